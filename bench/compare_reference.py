#!/usr/bin/env python3
"""vhpc's kernels against the official reference codes, side by side on this machine.

    .venv/bin/python bench/compare_reference.py REFDIR [--repeats 9]
        [--only npb,stream,hpccg,osu] [--threads 1,N] [--cpu N] [--quiet 0.10] [--wait 60]
        [--write docs/fidelity.md [--block NAME]]

(the project's virtual environment: the interval of the median needs numpy and scipy).

REFDIR holds the reference codes, built beforehand outside the repository (this script
downloads and builds nothing but STREAM, which is one file):
  - NPB 3.4 OpenMP: ``REFDIR/**/NPB3.4-OMP/bin/{ep,mg,ft,cg,is}.<CLASS>.x`` (config/make.def
    from make.def.template: gfortran/gcc -O3 -fopenmp);
  - STREAM: ``REFDIR/**/stream.c`` (McCalpin); compiled here with ``gcc -O3 -fopenmp
    -DSTREAM_ARRAY_SIZE=<n> -DNTIMES=10`` at the n vhpc-stream chooses on this host;
  - Mantevo HPCCG: ``REFDIR/**/test_HPCCG`` (make USE_MPI=-DUSING_MPI CXX=mpicxx
    LINKER=mpicxx CPP_OPT_FLAGS=-O3);
  - OSU Micro-Benchmarks 7.4: ``REFDIR/**/osu_latency`` and ``osu_bw``, configured with
    ``CC=mpicc CFLAGS='-O3 -DFLOAT_PRECISION=6'`` so that it prints microseconds with six
    decimals instead of two (osu_util.h defines FLOAT_PRECISION only where it is not defined:
    no OSU source is changed).
vhpc's side: the kernels in ``$VHPC_KERNELS`` or ``kernels/build``.

How the two sides are run (the same for both, so the ratio measures the code, not the set-up):
  - one launch line: the OpenMP cases (NPB, STREAM) run once per ``--threads`` count: one thread
    under ``taskset -c CPU`` with vhpc's OpenMP environment for a bound run (OMP_NUM_THREADS=1
    OMP_PLACES=cores OMP_PROC_BIND=close), and T > 1 threads unpinned with the environment a
    campaign gives the benchmark on T CPUs (``Benchmark.environ``: OMP_NUM_THREADS=T
    OMP_PROC_BIND=spread; by default T = every CPU, as campaigns run); MPI cases use the line
    vhpc itself launches with (:class:`vhpc.benchmarks.mpilaunch.Launch`: ``mpirun -np R
    --cpu-set LIST --bind-to core``), so mapping and binding are identical;
  - full-precision figures: each side's own result line (NPB's ``Mop/s total``, STREAM's best
    rates, HPCCG's ``MFLOPS Summary: Total``, OSU's latency with six decimals and its 1 MiB
    bandwidth, osu_bw against ``vhpc-osu -b bw``, both with a window of 64 messages) and vhpc's
    VHPC-RESULT keys (six significant digits);
  - pairs interleaved: repeat i runs reference then vhpc for even i, vhpc then reference for
    odd i, so that drift of the machine's speed hits both sides alike;
  - quiet CPUs: before each run, the CPUs the case uses are sampled from /proc/stat (busy share
    of 0.25 s, which on an idle wait is other processes' load); the run starts when every one is
    below ``--quiet``, or after ``--wait`` seconds in any case, and a pair that had to start on
    a loaded CPU is counted in the table's ``loaded`` column;
  - the ratio is formed per pair, vhpc / reference for rates and reference / vhpc for latency,
    so below 1 always means vhpc looks slower; the table gives min / median / max of the pair
    ratios, a 95% percentile-bootstrap interval of the median ratio (scipy.stats.bootstrap,
    10,000 resamples of the pairs, seeded), the ratio of each side's best figure (load only ever
    slows a run, so a side's best is its steadiest estimate) and the band vhpc is held to
    (:data:`BANDS`) with whether the median ratio lies in it;
  - verified: NPB's ``Verification = SUCCESSFUL``, STREAM's ``Solution Validates``, HPCCG's
    ``Final residual`` <= 1e-6 (Mantevo prints no verdict; its residual falls from ~1e2 to
    <1e-20 in 149 iterations), OSU's ``-c`` validation run once before the pairs (``Pass``);
    vhpc's side: ``valid=1`` in its result line.  ``verified`` counts runs that verified.

``--clock cpu`` (for a shared, loaded machine): both sides' wall clocks (clock_gettime,
gettimeofday) read the process's CPU time instead, through a small LD_PRELOAD library this
script compiles into its temporary folder; every figure then leaves out the time the process
waited for a CPU that others held (cache and memory contention stay in).  Single-process cases
only (OSU's ranks spin while they wait, so their CPU time is their wall time): osu is left out.

``--write FILE`` also puts the table, with date, machine, load and command, between the markers
``<!-- compare_reference:begin -->`` and ``<!-- compare_reference:end -->`` of FILE
(``--clock cpu``: ``compare_reference:cpu:begin`` / ``compare_reference:cpu:end``; ``--block
NAME``: ``compare_reference:NAME:begin`` / ``...:end``); docs/fidelity.md holds the project's.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy
import scipy.stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
from vhpc.benchmarks import get  # noqa: E402  (the campaigns' own benchmark definitions)
from vhpc.benchmarks.base import ParseError, RunContext, parse_result_line  # noqa: E402
from vhpc.benchmarks.mpilaunch import Launch  # noqa: E402  (the repository's own launch line)

KERNELS = Path(os.environ.get("VHPC_KERNELS", HERE.parent / "kernels" / "build"))


def markers(block: str) -> tuple[str, str]:
    """The --write markers of ``block`` (``--block``; "" or "wall": compare_reference, the
    wall-clock table; "cpu": compare_reference:cpu, the --clock cpu one; any other name N:
    compare_reference:N)."""
    tag = "compare_reference" if block in ("", "wall") else f"compare_reference:{block}"
    return f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"


#: OpenMP environment of a bound single-threaded run (Launch(1).environ()), both sides.
OMP_ONE = Launch(1).environ()

#: The bands vhpc's kernels are held to (docs/fidelity.md), as (lowest, highest) ratio, by the
#: case's first word: NPB ±10%, STREAM ±3%, HPCCG ±5%, OSU ±5%.
BANDS = {"NPB": (0.90, 1.10), "STREAM": (0.97, 1.03), "HPCCG": (0.95, 1.05),
         "OSU": (0.95, 1.05)}


def campaign_env(benchmark: str, threads: int) -> dict[str, str]:
    """The OpenMP environment a campaign gives ``benchmark`` (a registered name such as
    ``npb-cg``) on ``threads`` CPUs: that benchmark's own ``environ`` with its defaults."""
    bench = get(benchmark)
    return bench.environ(bench.resolve({}), RunContext(KERNELS, threads))


@dataclass(frozen=True)
class Team:
    """How an OpenMP case is started on both sides: ``threads`` threads on ``cpus``, behind the
    argv ``prefix`` (taskset for one pinned thread), with the variables ``env``."""

    threads: int
    cpus: tuple[int, ...]
    prefix: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    @property
    def layout(self) -> str:
        """The table's words for it: ``1 thread``, ``2 threads``."""
        return f"{self.threads} thread{'s' if self.threads > 1 else ''}"


def team(threads: int, cpu: int, benchmark: str) -> Team:
    """One thread: pinned to ``cpu`` with the bound single-thread environment.  More: unpinned
    on CPUs 0..threads-1 with the environment a campaign uses for ``benchmark``."""
    if threads == 1:
        return Team(1, (cpu,), tuple(pinned(cpu)), tuple(OMP_ONE.items()))
    return Team(threads, tuple(range(threads)), tuple(PRELOAD),
                tuple(campaign_env(benchmark, threads).items()))

Parser = Callable[[str], "tuple[float, bool]"]


@dataclass
class Case:
    """One compared figure: how each side is started and how its output is read."""

    name: str
    unit: str
    higher: bool  # higher is better (rates); False: latency
    cpus: tuple[int, ...]  # CPUs the case runs on (sampled for quiet before each run)
    ref_argv: list[str]
    vhpc_argv: list[str]
    ref_parse: Parser
    vhpc_parse: Parser
    env: dict[str, str] = field(default_factory=lambda: dict(OMP_ONE))
    cwd: str | None = None
    pairs: list[tuple[float, float]] = field(default_factory=list)
    verified: list[int] = field(default_factory=lambda: [0, 0])  # reference, vhpc
    loaded: int = 0  # pairs with a run that started on a loaded CPU
    share: str = ""  # cases with the same key read one run per side and pair (STREAM)
    threads: int = 1  # OpenMP threads of each side (MPI cases: 1 per rank)
    layout: str = "1 thread"  # how the case runs, as the table says: "2 threads", "2 ranks"


def grab(pattern: str, text: str) -> float:
    """The first group of ``pattern`` in ``text`` as a float (RuntimeError when absent)."""
    m = re.search(pattern, text, re.M)
    if not m:
        raise RuntimeError(f"no match for {pattern!r} in output:\n{text[-800:]}")
    return float(m.group(1))


def vhpc_result(key: str) -> Parser:
    """Parser of a vhpc kernel's ``VHPC-RESULT`` line (vhpc's own parser,
    benchmarks.base.parse_result_line): (key's value, valid=1).  RuntimeError without it."""
    def parse(text: str) -> tuple[float, bool]:
        try:
            kv = parse_result_line(text)
        except ParseError:
            kv = {}
        if key not in kv:
            raise RuntimeError(f"no {key}= in vhpc's result line:\n{text[-800:]}")
        return float(kv[key]), kv.get("valid") == "1"
    return parse


def cpu_times() -> dict[int, tuple[int, int]]:
    """Per CPU from /proc/stat: (busy jiffies, total jiffies); idle and iowait are not busy."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"cpu(\d+)\s+(.*)", line)
            if m:
                v = [int(x) for x in m.group(2).split()]
                total = sum(v[:8])  # user nice system idle iowait irq softirq steal
                out[int(m.group(1))] = (total - v[3] - v[4], total)
    return out


def busy(cpus: tuple[int, ...], window: float = 0.25) -> float:
    """The largest busy share among ``cpus`` over ``window`` seconds (0 idle, 1 fully used)."""
    a = cpu_times()
    time.sleep(window)
    b = cpu_times()
    shares = [(b[c][0] - a[c][0]) / max(1, b[c][1] - a[c][1]) for c in cpus if c in a]
    return max(shares, default=0.0)


def wait_quiet(cpus: tuple[int, ...], limit: float, wait: float) -> bool:
    """Block until every CPU of ``cpus`` is below ``limit`` busy, for at most ``wait`` seconds;
    True when they were quiet, False when the wait ran out."""
    deadline = time.monotonic() + wait
    while True:
        if busy(cpus) <= limit:
            return True
        if time.monotonic() >= deadline:
            return False


def run(argv: list[str], env: dict[str, str], cwd: str | None = None) -> str:
    """Run one side to completion; its stdout (RuntimeError on a non-zero exit)."""
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env},
                          cwd=cwd, timeout=1800)
    if proc.returncode not in (0, 3):  # 3: a vhpc kernel whose verification failed
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return proc.stdout


def find(refdir: Path, pattern: str) -> Path | None:
    """The first path under ``refdir`` matching ``**/pattern`` (None when there is none)."""
    hits = sorted(refdir.glob(f"**/{pattern}"))
    return hits[0] if hits else None


#: --clock cpu: wall clocks read as process CPU time (both sides, via LD_PRELOAD).
CPU_CLOCK_C = r"""
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id == CLOCK_MONOTONIC || id == CLOCK_REALTIME || id == CLOCK_MONOTONIC_RAW)
        id = CLOCK_PROCESS_CPUTIME_ID;
    return (int)syscall(SYS_clock_gettime, id, ts);
}
int gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec ts;
    (void)tz;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}
"""
PRELOAD: list[str] = []  # ["env", "LD_PRELOAD=<lib>"] under --clock cpu


def cpu_clock(tmp: Path) -> list[str]:
    """Build the CPU-time clock library in ``tmp``; the argv prefix that loads it."""
    src, lib = tmp / "cpuclock.c", tmp / "cpuclock.so"
    src.write_text(CPU_CLOCK_C)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return ["env", f"LD_PRELOAD={lib}"]


def pinned(cpu: int) -> list[str]:
    """The single-process launch prefix of both sides."""
    return ["taskset", "-c", str(cpu)] + PRELOAD


def mpi(ranks: int, cpus: tuple[int, ...]) -> list[str]:
    """vhpc's own MPI launch line for ``ranks`` single-threaded ranks on ``cpus``."""
    return Launch(ranks, 1, "openmpi", len(cpus), cpuset=cpus).argv()


def npb_cases(refdir: Path, cls: str, kernels: list[str], tm: Team) -> list[Case]:
    """NPB 3.4 OpenMP against vhpc-npb-omp, both on the threads of ``tm``."""
    bindir = find(refdir, "NPB3.4-OMP/bin")
    out = []

    def ref_parse(text: str) -> tuple[float, bool]:
        ok = re.search(r"Verification\s*=\s*SUCCESSFUL", text) is not None
        return grab(r"Mop/s total\s*=\s*(\S+)", text), ok

    for k in kernels:
        ref = bindir / f"{k}.{cls}.x" if bindir else None
        if not ref or not ref.exists():
            print(f"skip NPB {k.upper()}: no {k}.{cls}.x under {refdir}", file=sys.stderr)
            continue
        prefix = list(tm.prefix)
        out.append(Case(f"NPB {k.upper()} {cls}", "Mop/s", True, tm.cpus, prefix + [str(ref)],
                        prefix + [str(KERNELS / "vhpc-npb-omp"), "-k", k, "-c", cls],
                        ref_parse, vhpc_result("mops"), env=dict(tm.env), threads=tm.threads,
                        layout=tm.layout))
    return out


def stream_size(n: int | None, cpu: int) -> int:
    """STREAM's elements per array: ``n``, else the one vhpc-stream chooses on this host (its
    LLC rule), read from a short pinned run."""
    vhpc = pinned(cpu) + [str(KERNELS / "vhpc-stream")]
    return n or int(vhpc_result("n")(run(vhpc + ["-t", "2"], OMP_ONE))[0])


def stream_cases(refdir: Path, n: int, tm: Team, tmp: Path) -> list[Case]:
    """McCalpin's stream.c at ``n`` elements against vhpc-stream, both on the threads of ``tm``:
    one case per kernel, the four reading the same run of each program per pair."""
    src = find(refdir, "stream.c")
    if not src:
        print(f"skip STREAM: no stream.c under {refdir}", file=sys.stderr)
        return []
    exe = tmp / f"stream-{n}"
    if not exe.exists():
        subprocess.run(["gcc", "-O3", "-fopenmp", f"-DSTREAM_ARRAY_SIZE={n}", "-DNTIMES=10",
                        "-o", str(exe), str(src)], check=True)
    prefix = list(tm.prefix)
    vhpc = prefix + [str(KERNELS / "vhpc-stream"), "-n", str(n), "-t", "10"]
    out = []
    for name in ("copy", "scale", "add", "triad"):
        def ref_parse(text: str, label=name.capitalize()) -> tuple[float, bool]:
            return grab(rf"^{label}:\s+(\S+)", text), "Solution Validates" in text

        def vhpc_parse(text: str, key=f"{name}_bw") -> tuple[float, bool]:
            value, ok = vhpc_result(key)(text)
            return 1000.0 * value, ok  # GB/s -> MB/s

        out.append(Case(f"STREAM {name} n={n}", "MB/s", True, tm.cpus, prefix + [str(exe)],
                        vhpc, ref_parse, vhpc_parse, env=dict(tm.env),
                        share=f"stream-{tm.threads}", threads=tm.threads, layout=tm.layout))
    return out


def hpccg_case(refdir: Path, ranks: int, grid: int | None, cpus: tuple[int, ...],
               tmp: Path) -> list[Case]:
    """Mantevo HPCCG (MPI build) against vhpc-hpccg: 149 iterations, MFLOPS as Mantevo counts
    them (27 non-zeros per row) on both sides.  ``grid`` None: the grid vhpc-hpccg sizes
    itself on this host (``-x 0``: from the last-level cache, as vhpc's campaigns run it), read
    from one iteration's result line (72³ a rank on a 32 MiB LLC); a grid inside the cache
    (32³) is the load-sensitive case vhpc moved away from."""
    ref = find(refdir, "test_HPCCG")
    if not ref:
        print(f"skip HPCCG: no test_HPCCG under {refdir}", file=sys.stderr)
        return []
    if grid is None:
        out = run(mpi(ranks, cpus) + [str(KERNELS / "vhpc-hpccg"), "-x", "0", "-y", "0",
                                      "-z", "0", "-i", "1"], OMP_ONE, cwd=str(tmp))
        grid = int(parse_result_line(out)["nx"])

    def ref_parse(text: str) -> tuple[float, bool]:
        resid = grab(r"^Final residual:\s*(\S+)", text)
        return grab(r"MFLOPS Summary:\s*\n\s*Total\s*:\s*(\S+)", text), resid <= 1e-6

    g = str(grid)
    return [Case(f"HPCCG {grid}³ per rank, 149 it", "MFLOPS", True, cpus,
                 mpi(ranks, cpus) + PRELOAD + [str(ref), g, g, g],  # prints its YAML report
                 mpi(ranks, cpus) + PRELOAD + [str(KERNELS / "vhpc-hpccg"), "-x", g, "-y", g,
                                               "-z", g, "-i", "149", "-t", "0"],
                 ref_parse, vhpc_result("mflops"), cwd=str(tmp),
                 layout=f"{ranks} rank{'s' if ranks > 1 else ''}")]


def osu_cases(refdir: Path, cpus: tuple[int, ...], iters: int, warmup: int, bw_iters: int,
              bw_warmup: int) -> list[Case]:
    """osu_latency at 8 bytes and osu_bw at 1 MiB (OSU 7.4, six decimals) against vhpc-osu -b
    latency / -b bw, 2 ranks on ``cpus``; each OSU program's ``-c`` validation runs once
    before the pairs."""
    out = []
    mib = 1 << 20
    for test, size, unit, higher, its, skip in (("latency", 8, "us", False, iters, warmup),
                                                ("bw", mib, "MB/s", True, bw_iters, bw_warmup)):
        ref = find(refdir, f"mpi/pt2pt/standard/osu_{test}") or find(refdir, f"osu_{test}")
        if not ref:
            print(f"skip OSU {test}: no osu_{test} under {refdir}", file=sys.stderr)
            continue
        check = run(mpi(2, cpus) + [str(ref), "-m", f"{size}:{size}", "-i", "10", "-x", "2",
                                    "-c"], OMP_ONE)
        validated = re.search(rf"^{size}\s+\S+\s+Pass\s*$", check, re.M) is not None

        def ref_parse(text: str, size=size, validated=validated) -> tuple[float, bool]:
            return grab(rf"^{size}\s+(\S+)", text), validated

        # vhpc-osu's -i/-w count small messages, -I/-u those above 8 KiB (OSU's -i/-x both)
        counts = ["-i", str(its), "-w", str(skip), "-I", str(its), "-u", str(skip)]
        key = f"lat_{size}" if test == "latency" else f"bw_avg_{size}"
        label = f"OSU latency {size} B" if test == "latency" else "OSU bandwidth 1 MiB"
        out.append(Case(label, unit, higher, cpus,
                        mpi(2, cpus) + [str(ref), "-m", f"{size}:{size}", "-i", str(its), "-x",
                                        str(skip)],
                        mpi(2, cpus) + [str(KERNELS / "vhpc-osu"), "-b", test, "-s", str(size),
                                        *counts],
                        ref_parse, vhpc_result(key), layout="2 ranks"))
    return out


def measure(case: Case, rep: int, quiet: float, wait: float,
            shared: dict[tuple[str, int, str], tuple[str, bool]]) -> None:
    """One interleaved pair of ``case``; appends (reference, vhpc) to ``case.pairs``.
    ``shared`` keeps the outputs of cases with a ``share`` key for the others of this pair."""
    got: dict[str, float] = {}
    was_loaded = False
    for side in (("ref", "vhpc") if rep % 2 == 0 else ("vhpc", "ref")):
        argv, parse = (case.ref_argv, case.ref_parse) if side == "ref" else \
            (case.vhpc_argv, case.vhpc_parse)
        key = (case.share, rep, side)
        if not case.share or key not in shared:
            loaded = not wait_quiet(case.cpus, quiet, wait)
            shared[key] = (run(argv, case.env, case.cwd), loaded)
        text, loaded = shared[key]
        was_loaded |= loaded
        value, ok = parse(text)
        got[side] = value
        case.verified[side == "vhpc"] += int(ok)
    case.pairs.append((got["ref"], got["vhpc"]))
    case.loaded += int(was_loaded)
    print(f"# pair {rep} {case.name}: reference {got['ref']:g} vhpc {got['vhpc']:g}"
          f"{' (loaded CPU)' if was_loaded else ''}", file=sys.stderr, flush=True)


def ratio(case: Case, ref: float, vhpc: float) -> float:
    """vhpc / reference for rates, reference / vhpc for latency (below 1: vhpc slower)."""
    return vhpc / ref if case.higher else ref / vhpc


def median_interval(ratios: list[float], confidence: float = 0.95,
                    seed: int = 62) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median of ``ratios`` (scipy.stats.bootstrap,
    10,000 resamples, seeded so that a table is reproducible from its pairs); (nan, nan) for
    fewer than 2 ratios.  Efron & Tibshirani, An Introduction to the Bootstrap (1993), ch. 13."""
    if len(ratios) < 2:
        return math.nan, math.nan
    res = scipy.stats.bootstrap((ratios,), numpy.median, confidence_level=confidence,
                                n_resamples=10_000, method="percentile",
                                random_state=numpy.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def band_of(case: Case) -> tuple[float, float]:
    """The band (lowest, highest ratio) vhpc is held to for ``case`` (:data:`BANDS`)."""
    return BANDS[case.name.split()[0]]


def host_line() -> str:
    """Machine and kernel: ``name (CPU model, N CPUs, Linux release)``."""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), platform.processor())
    return (f"{platform.node()} ({model}, {os.cpu_count()} CPUs, "
            f"{platform.system()} {platform.release()})")


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages of /proc/loadavg."""
    return " ".join(open("/proc/loadavg").read().split()[:3])


def table(cases: list[Case], cmdline: str, load_start: str = "") -> str:
    """The Markdown result: a heading line with date, machine and load (at the start and the
    end), the command, the table (one row per case and thread count)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    clock = "process CPU time (--clock cpu)" if PRELOAD else "wall"
    start = f"load average at the start {load_start}, " if load_start else ""
    lines = [f"{now} on {host_line()}, {start}at the end {loadavg()}, clock: {clock}:", "",
             f"    {cmdline}", "",
             "| case | run as | unit | ratio min | ratio median | median 95% CI | ratio max | "
             "ratio of bests | band | median in band | reference best | vhpc best | pairs | "
             "loaded | verified ref / vhpc |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        if not c.pairs:
            continue
        rs = [ratio(c, r, v) for r, v in c.pairs]
        best = max if c.higher else min  # load on a shared host only ever slows a run down
        rb, vb = best(r for r, _ in c.pairs), best(v for _, v in c.pairs)
        n = len(c.pairs)
        med = statistics.median(rs)
        lo, hi = median_interval(rs)
        blo, bhi = band_of(c)
        within = "yes" if blo <= med <= bhi else "no"
        lines.append(f"| {c.name} | {c.layout} | {c.unit} | {min(rs):.3f} | {med:.3f} | "
                     f"[{lo:.3f}, {hi:.3f}] | {max(rs):.3f} | {ratio(c, rb, vb):.3f} | "
                     f"{blo:.2f}-{bhi:.2f} | {within} | {rb:g} | {vb:g} | {n} | {c.loaded} | "
                     f"{c.verified[0]}/{n} / {c.verified[1]}/{n} |")
    return "\n".join(lines) + "\n"


def write_block(path: Path, text: str, block: str) -> None:
    """Replace the marked block ``block`` of ``path`` (:func:`markers`) with ``text``; SystemExit
    when ``path`` lacks its markers."""
    BEGIN, END = markers(block)
    doc = path.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"compare_reference.py: {path} lacks the {BEGIN} / {END} markers")
    head, rest = doc.split(BEGIN, 1)
    path.write_text(f"{head}{BEGIN}\n{text}{END}{rest.split(END, 1)[1]}")


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block), exit status 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"compare_reference.py: {message}\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line; a bad value is a one-line error and exit status 2."""
    ap = OneLineParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("refdir", type=Path, help="directory holding the built reference codes")
    ap.add_argument("--repeats", type=int, default=9, help="interleaved pairs per case")
    ap.add_argument("--only", default="npb,stream,hpccg,osu",
                    help="comma-separated groups; npb:ft+is picks NPB kernels")
    ap.add_argument("--npb-class", default="A", choices=("S", "W", "A", "B", "C"))
    ap.add_argument("--stream-n", type=int, default=None,
                    help="STREAM elements per array (default: vhpc-stream's own LLC rule)")
    ap.add_argument("--hpccg-ranks", type=int, default=1)
    ap.add_argument("--hpccg-grid", type=int, default=None,
                    help="HPCCG's local grid edge (default: the one vhpc-hpccg sizes itself on "
                         "this host, -x 0, as vhpc's campaigns run it)")
    ap.add_argument("--threads", default=None,
                    help="comma-separated OpenMP thread counts of the NPB and STREAM cases "
                         "(default: 1 and every CPU, the count campaigns use)")
    ap.add_argument("--osu-iters", type=int, default=10000)
    ap.add_argument("--osu-warmup", type=int, default=100)
    ap.add_argument("--osu-bw-iters", type=int, default=100,
                    help="osu_bw windows of 64 messages at 1 MiB (OSU's -i; default 100)")
    ap.add_argument("--osu-bw-warmup", type=int, default=10)
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU of the single-process cases (default: the last one)")
    ap.add_argument("--quiet", type=float, default=0.10,
                    help="largest busy share of a CPU counted as quiet (default 0.10)")
    ap.add_argument("--wait", type=float, default=60.0,
                    help="longest wait for quiet CPUs before a run starts anyway (s)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: wall clocks read as process CPU time on both sides (no osu)")
    ap.add_argument("--write", type=Path, default=None,
                    help="also put the table into this Markdown file's marked block")
    ap.add_argument("--block", default=None,
                    help="the block --write fills: <!-- compare_reference:BLOCK:begin --> "
                         "(default: the clock's, compare_reference or compare_reference:cpu)")
    args = ap.parse_args(argv)
    ncpu = os.cpu_count() or 1
    if not args.refdir.is_dir():
        ap.error(f"{args.refdir} is not a directory: give the folder holding the reference builds")
    if args.repeats < 1 or args.hpccg_ranks < 1 or args.osu_iters < 1 or (
            args.hpccg_grid is not None and args.hpccg_grid < 2):
        ap.error("--repeats, --hpccg-ranks, --osu-iters must be >= 1 and --hpccg-grid >= 2")
    try:
        args.threads = sorted({int(t) for t in args.threads.split(",")}) if args.threads \
            else sorted({1, ncpu})
    except ValueError:
        ap.error(f"--threads {args.threads}: give thread counts such as 1,{ncpu}")
    if not all(1 <= t <= ncpu for t in args.threads):
        ap.error(f"--threads: each count must be 1-{ncpu} (this machine's CPUs)")
    if args.osu_bw_iters < 1 or args.osu_bw_warmup < 0 or args.osu_warmup < 0:
        ap.error("--osu-bw-iters must be >= 1, the warm-ups >= 0")
    if args.cpu is not None and not 0 <= args.cpu < ncpu:
        ap.error(f"--cpu {args.cpu}: this machine has CPUs 0-{ncpu - 1}")
    if args.hpccg_ranks > ncpu or ncpu < 2 and "osu" in args.only:
        ap.error(f"not enough CPUs ({ncpu}) for the MPI cases: lower --hpccg-ranks or drop osu")
    if not 0.0 < args.quiet <= 1.0 or args.wait < 0:
        ap.error("--quiet must be in (0, 1] and --wait >= 0")
    if args.write and not args.write.is_file():
        ap.error(f"--write {args.write}: no such file")
    if args.write:
        block = args.clock if args.block is None else args.block
        if any(m not in args.write.read_text() for m in markers(block)):
            ap.error(f"--write {args.write}: it lacks the markers {' / '.join(markers(block))}")
    return args


def build_cases(args: argparse.Namespace, tmp: Path) -> list[Case]:
    """Every case the ``--only`` groups ask for, in a fixed order."""
    ncpu = os.cpu_count() or 1
    cpu = ncpu - 1 if args.cpu is None else args.cpu
    groups = dict((g.partition(":")[0], g.partition(":")[2]) for g in args.only.split(","))
    if args.clock == "cpu":
        PRELOAD[:] = cpu_clock(tmp)
        if groups.pop("osu", None) is not None:
            print("skip OSU: --clock cpu measures single-process cases only", file=sys.stderr)
    cases: list[Case] = []
    if "npb" in groups:
        ks = groups["npb"].split("+") if groups["npb"] else ["ep", "mg", "ft", "cg", "is"]
        for threads in args.threads:
            cases += npb_cases(args.refdir, args.npb_class, ks, team(threads, cpu, "npb-cg"))
    if "stream" in groups:
        n = stream_size(args.stream_n, cpu)
        for threads in args.threads:
            cases += stream_cases(args.refdir, n, team(threads, cpu, "stream"), tmp)
    if "hpccg" in groups:
        hcpus = tuple(range(ncpu - args.hpccg_ranks, ncpu)) if args.hpccg_ranks > 1 else (cpu,)
        cases += hpccg_case(args.refdir, args.hpccg_ranks, args.hpccg_grid, hcpus, tmp)
    if "osu" in groups:
        cases += osu_cases(args.refdir, (ncpu - 2, ncpu - 1), args.osu_iters, args.osu_warmup,
                           args.osu_bw_iters, args.osu_bw_warmup)
    return cases


def main(argv: list[str] | None = None) -> int:
    """Run every case's interleaved pairs; print (and optionally write) the table."""
    args = parse_args(argv)
    load_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="vhpc-ref-") as tmp:
        cases = build_cases(args, Path(tmp))
        given = list(sys.argv[1:] if argv is None else argv)
        # the reference folder is this machine's: the command shown names it REFDIR
        given = ["REFDIR" if a == str(args.refdir) else a for a in given]
        cmdline = ".venv/bin/python bench/compare_reference.py " + " ".join(given)
        for rep in range(args.repeats):
            shared: dict[tuple[str, int, str], tuple[str, bool]] = {}
            for case in cases:
                measure(case, rep, args.quiet, args.wait, shared)
            if rep + 1 < args.repeats:  # the table so far: an interrupted run keeps it
                print(f"after {rep + 1} of {args.repeats} pairs:\n"
                      f"{table(cases, cmdline, load_start)}", end="", flush=True)
    text = table(cases, cmdline, load_start)
    print(text, end="")
    if args.write:
        write_block(args.write, text, args.clock if args.block is None else args.block)
    return 0


if __name__ == "__main__":
    if not shutil.which("taskset"):
        sys.exit("compare_reference.py: taskset (util-linux) is needed to pin both sides")
    sys.exit(main())
