#!/usr/bin/env python3
"""vhpc's kernels against the official reference codes, side by side on this machine.

    python3 bench/compare_reference.py REFDIR [--repeats 5] [--only npb,stream,hpccg,osu]

REFDIR holds the reference codes the user built beforehand (this script downloads nothing):
  - NPB 3.4 OpenMP: ``REFDIR/**/NPB3.4-OMP/bin/{ep,mg,ft,cg,is}.<CLASS>.x`` (make suite,
    config/make.def from make.def.template: gfortran/gcc -O3 -fopenmp);
  - STREAM: ``REFDIR/**/stream.c`` (McCalpin); compiled here with ``gcc -O3 -fopenmp
    -DSTREAM_ARRAY_SIZE=<n>`` at the array size vhpc-stream uses;
  - Mantevo HPCCG: ``REFDIR/**/test_HPCCG`` (make USE_MPI=-DUSING_MPI CXX=mpicxx, -O3);
  - OSU Micro-Benchmarks: ``REFDIR/**/osu_latency``.
vhpc's side: the kernels in ``$VHPC_KERNELS`` or ``kernels/build``.

Each repeat runs every case as reference then vhpc, or vhpc then reference (alternating), so
that drift hits both; the ratio vhpc / reference is formed per pair, for "higher is better"
figures (Mop/s, MB/s, MFLOPS), and reference / vhpc for latency, so a ratio below 1 always
means vhpc looks slower.  Prints min / median / max of the pair ratios per figure, and the
ratio of the best figures (on a shared, loaded host load only ever slows a run, so the best
of several runs is the steadiest estimate; STREAM itself reports best-of-NTIMES), as Markdown.
MPI runs use one launch line for both sides: ``mpirun -np R --map-by slot:PE=1 --bind-to core``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = Path(os.environ.get("VHPC_KERNELS", HERE.parent / "kernels" / "build"))
MPIRUN = [shutil.which("mpirun.openmpi") or "mpirun", "--allow-run-as-root"]


def find(refdir: Path, pattern: str) -> Path | None:
    hits = sorted(refdir.glob(f"**/{pattern}"))
    return hits[0] if hits else None


def run(argv: list[str], env: dict[str, str], cwd: str | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env},
                          cwd=cwd, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return proc.stdout


def grab(pattern: str, text: str) -> float:
    m = re.search(pattern, text, re.M)
    if not m:
        raise RuntimeError(f"no match for {pattern!r} in output:\n{text[-800:]}")
    return float(m.group(1))


def vhpc_key(key: str, text: str) -> float:
    return grab(rf"^VHPC-RESULT .*\b{key}=(\S+)", text)


def mpi(ranks: int) -> list[str]:
    return MPIRUN + ["-np", str(ranks), "--map-by", "slot:PE=1", "--bind-to", "core"]


def cases(refdir: Path, only: set[str], cls: str, stream_n: int | None, hpccg: tuple[int, int],
          tmp: Path) -> list[tuple]:
    """(name, metric, reference runner, vhpc runner, higher_is_better) per compared figure."""
    one = {"OMP_NUM_THREADS": "1", "OMP_PROC_BIND": "true"}
    out = []
    if "npb" in only:
        bindir = find(refdir, "NPB3.4-OMP/bin")
        for k in ("ep", "mg", "ft", "cg", "is"):
            ref = bindir / f"{k}.{cls}.x" if bindir else None
            if not ref or not ref.exists():
                print(f"skip NPB {k.upper()}: no {k}.{cls}.x under {refdir}", file=sys.stderr)
                continue
            out.append((f"NPB {k.upper()} {cls}", "Mop/s",
                        lambda ref=ref: grab(r"Mop/s total\s*=\s*(\S+)", run([str(ref)], one)),
                        lambda k=k: vhpc_key("mops", run([str(KERNELS / "vhpc-npb-omp"), "-k", k,
                                                          "-c", cls], one)), True))
    if "stream" in only and find(refdir, "stream.c"):
        n = stream_n or int(vhpc_key("n", run([str(KERNELS / "vhpc-stream"), "-t", "2"], one)))
        exe = tmp / "stream"
        subprocess.run(["gcc", "-O3", "-fopenmp", f"-DSTREAM_ARRAY_SIZE={n}", "-o", str(exe),
                        str(find(refdir, "stream.c"))], check=True)
        cache: dict[str, str] = {}
        for name, ref_label in (("copy", "Copy"), ("scale", "Scale"), ("add", "Add"),
                                ("triad", "Triad")):
            # one run of each program serves the four kernels: reuse the output within a repeat
            def ref_run(label=ref_label):
                if label == "Copy":
                    cache["ref"] = run([str(exe)], one)
                return grab(rf"^{label}:\s+(\S+)", cache["ref"])

            def vhpc_run(name=name):
                if name == "copy":
                    cache["vhpc"] = run([str(KERNELS / "vhpc-stream"), "-n", str(n)], one)
                return 1000.0 * vhpc_key(f"{name}_bw", cache["vhpc"])
            out.append((f"STREAM {name} n={n}", "MB/s", ref_run, vhpc_run, True))
    if "hpccg" in only and find(refdir, "test_HPCCG"):
        ref, (ranks, g) = find(refdir, "test_HPCCG"), hpccg
        out.append((f"HPCCG {g}^3 x{ranks} 149 it", "MFLOPS",
                    lambda ref=ref, ranks=ranks, g=g: grab(r"MFLOPS Summary:\s*\n\s*Total\s*:\s*(\S+)",
                                 run(mpi(ranks) + [str(ref), str(g), str(g), str(g)], one,
                                     cwd=str(tmp))),
                    lambda ranks=ranks, g=g: vhpc_key("mflops", run(mpi(ranks) + [
                        str(KERNELS / "vhpc-hpccg"), "-x", str(g), "-y", str(g), "-z", str(g),
                        "-i", "149", "-t", "0"], one)), True))
    if "osu" in only and find(refdir, "osu_latency"):
        ref = find(refdir, "osu_latency")
        out.append(("osu latency 8 B", "us",
                    lambda ref=ref: grab(r"^8\s+(\S+)", run(mpi(2) + [str(ref), "-m", "8:8", "-i", "10000",
                                                             "-x", "100"], one)),
                    lambda: vhpc_key("lat_8", run(mpi(2) + [
                        str(KERNELS / "vhpc-osu"), "-b", "latency", "-s", "8", "-i", "10000",
                        "-w", "100"], one)), False))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("refdir", type=Path, help="directory holding the built reference codes")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved pairs per case")
    ap.add_argument("--only", default="npb,stream,hpccg,osu", help="comma-separated groups")
    ap.add_argument("--npb-class", default="A", choices=("S", "W", "A", "B", "C"))
    ap.add_argument("--stream-n", type=int, default=None,
                    help="STREAM elements per array (default: vhpc-stream's own LLC rule)")
    ap.add_argument("--hpccg-ranks", type=int, default=1)
    ap.add_argument("--hpccg-grid", type=int, default=32)
    args = ap.parse_args()
    if not args.refdir.is_dir():
        ap.error(f"{args.refdir} is not a directory: give the folder holding the reference builds")
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="vhpc-ref-") as tmp:
        todo = cases(args.refdir, only, args.npb_class, args.stream_n,
                     (args.hpccg_ranks, args.hpccg_grid), Path(tmp))
        ratios: dict[str, list[float]] = {c[0]: [] for c in todo}
        raw: dict[str, list[tuple[float, float]]] = {c[0]: [] for c in todo}
        for rep in range(args.repeats):
            for name, _unit, ref_fn, vhpc_fn, higher in todo:
                if rep % 2 == 0:
                    r, v = ref_fn(), vhpc_fn()
                else:
                    v, r = vhpc_fn(), ref_fn()
                raw[name].append((r, v))
                ratios[name].append(v / r if higher else r / v)
                print(f"# rep {rep} {name}: reference {r:g} vhpc {v:g}", file=sys.stderr,
                      flush=True)
    print("| case | unit | ratio min | ratio median | ratio max | ratio of bests | reference "
          "best | vhpc best | pairs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, unit, _ref, _v, higher in todo:
        rs = ratios[name]
        best = max if higher else min  # load on a shared host only ever slows a run down
        ref_best, v_best = best(r for r, _ in raw[name]), best(v for _, v in raw[name])
        of_bests = v_best / ref_best if higher else ref_best / v_best
        print(f"| {name} | {unit} | {min(rs):.3f} | {statistics.median(rs):.3f} | {max(rs):.3f} "
              f"| {of_bests:.3f} | {ref_best:g} | {v_best:g} | {len(rs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
