"""MPI launch binding, per-rank read-back, and the kernel fidelity modes."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from vhpc.benchmarks import get
from vhpc.benchmarks.base import RunContext, parse_result_line
from vhpc.benchmarks.mpilaunch import Launch, readback

from conftest import require_tool

MPIRUN = shutil.which("mpirun") or "mpirun"


def need_mpirun():
    require_tool("mpirun")


def test_launch_binds_each_rank_to_its_own_cores():
    line = Launch(2, 1, "openmpi", ncpus=2).argv()
    assert line[1:] == ["--allow-run-as-root", "-np", "2", "--map-by", "slot:PE=1",
                        "--bind-to", "core"]
    assert Launch(4, 4, "openmpi", ncpus=16).argv()[-4:] == ["--map-by", "slot:PE=4",
                                                             "--bind-to", "core"]
    assert Launch(4, 4, "openmpi", 16).environ() == {
        "OMP_NUM_THREADS": "4", "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    assert Launch(4, 2, "mpich", 8).argv()[1:] == ["-np", "4", "-bind-to", "core:2"]
    assert Launch(2, 1, "mpich", 2).argv()[-1] == "core"


def test_oversubscribe_only_when_cpus_are_short_and_then_said():
    over = Launch(4, 1, "openmpi", ncpus=2)
    assert "--oversubscribe" in over.argv() and over.argv()[-2:] == ["--bind-to", "none"]
    assert over.environ()["OMP_PROC_BIND"] == "false"
    d = over.diagnostics()
    assert d["oversubscribed"] is True and "not comparable" in d["note"]
    fits = Launch(2, 1, "openmpi", ncpus=2)
    assert "--oversubscribe" not in fits.argv() and "note" not in fits.diagnostics()
    assert Launch(2, 1, "mpich", 1).argv()[-2:] == ["-bind-to", "none"]
    # a native cpus= set: --cpu-set; Open MPI 4 refuses it with PE=, so T > 1 shares the set
    assert Launch(2, 1, "openmpi", 2, cpuset=(2, 3)).argv()[2:] == [
        "-np", "2", "--cpu-set", "2,3", "--bind-to", "core"]
    split = Launch(2, 2, "openmpi", 4, cpuset=(0, 1, 2, 3))
    assert split.argv()[-2:] == ["--bind-to", "none"] and "share" in split.diagnostics()["note"]


def test_benchmarks_use_the_bound_launch():
    ctx = RunContext(Path("/k"), 16)
    hpccg = get("hpccg")
    p = hpccg.resolve({"ranks": 16})
    argv = hpccg.command(p, ctx)
    assert argv[argv.index("--map-by") + 1] == "slot:PE=1" and "--oversubscribe" not in argv
    assert hpccg.environ(p, ctx)["OMP_PLACES"] == "cores"
    cg = get("npb-cg")
    q = cg.resolve({"variant": "mpi", "ranks": 8, "threads": 2})
    argv = cg.command(q, ctx)
    assert argv[argv.index("--map-by") + 1] == "slot:PE=2" and argv[argv.index("--bind-to") + 1] == "core"
    # copies started together would all bind to the first cores: they run unbound
    c2 = cg.resolve({"variant": "mpi", "ranks": 4, "copies": 2})
    assert cg.command(c2, ctx)[cg.command(c2, ctx).index("--bind-to") + 1] == "none"
    lat = get("osu-latency")
    argv = lat.command(lat.resolve({}), RunContext(Path("/k"), 1))
    assert "--oversubscribe" in argv  # 2 ranks on a 1-CPU guest



def test_readback_flags_ranks_sharing_a_cpu():
    out = ("VHPC-RANK rank=1 host=h cpu=1 cpus=1 tasks=3\n"
           "noise\nVHPC-RANK rank=0 host=h cpu=0 cpus=0 tasks=3\n")
    got = readback(Launch(2, 1, "openmpi", 2), out)
    assert [r["cpus"] for r in got["ranks"]] == [[0], [1]] and "mismatches" not in got
    shared = out.replace("cpu=1 cpus=1", "cpu=0 cpus=0-1")
    bad = readback(Launch(2, 1, "openmpi", 2), shared)
    assert bad["mismatches"] == ["ranks 0 and 1 share CPU 0 on h although there was a CPU for each"]
    # oversubscribed (4 ranks, 2 CPUs): sharing is expected, not a mismatch
    four = "".join(f"VHPC-RANK rank={i} host=h cpu={i % 2} cpus=0-1 tasks=3\n" for i in range(4))
    assert "mismatches" not in readback(Launch(4, 1, "openmpi", 2), four)
    assert "mismatches" in readback(Launch(4, 1, "openmpi", 4), four)
    missing = readback(Launch(3, 1, "openmpi", 2), out)
    assert missing["mismatches"] == ["2 of 3 ranks reported their placement"]


def test_records_split_by_another_ranks_write_still_parse():
    # seen under MPICH's Hydra (ranks' stdout unbuffered): rank 1's placement record landed
    # between rank 0's result pairs and their newline
    out = ("data check: passed\n"
           "VHPC-RESULT latency_us=0.136925 lat_size=8 valid=1VHPC-RANK rank=1 host=vm cpu=1 "
           "cpus=1 tasks=2\n\nVHPC-RANK rank=0 host=vm cpu=0 cpus=0 tasks=2\n")
    assert parse_result_line(out) == {"latency_us": "0.136925", "lat_size": "8", "valid": "1"}
    got = readback(Launch(2, 1, "mpich", 2), out)
    assert [(r["rank"], r["cpus"]) for r in got["ranks"]] == [(0, [0]), (1, [1])]
    assert "mismatches" not in got


def test_result_record_is_one_write_with_its_newline(kernels_built):
    # an unbuffered stdout (as Hydra leaves it) must still get the record and its newline
    # in a single write(2), so no other rank's output can come in between
    strace = require_tool("strace")
    out = subprocess.run(
        [strace, "-f", "-s", "4096", "-e", "trace=write", "-e", "signal=none", "stdbuf", "-o0",
         str(kernels_built / "vhpc-stream"), "-n", "20000", "-t", "2"],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=60)
    writes = [ln for ln in out.stderr.splitlines() if "VHPC-RESULT" in ln]
    assert len(writes) == 1 and '\\n"' in writes[0], writes


def test_compare_stores_per_rank_cpus(tmp_path):
    """`vhpc compare -b hpccg:ranks=2 -e native` binds to cores and reads back two CPUs."""
    need_mpirun()
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "compare", "-b",
                        "hpccg:ranks=2,nx=12,ny=12,nz=12", "-e", "native", "--repeats", "1",
                        "--warmup", "0", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    db = sqlite3.connect(tmp_path / "vhpc.db")
    (applied, diag), = db.execute("SELECT applied_json, diagnostics_json FROM trials").fetchall()
    applied, diag = json.loads(applied), json.loads(diag)
    launcher = diag["mpi"]["launcher"]
    assert launcher[launcher.index("--bind-to") + 1] == "core" and "--oversubscribe" not in launcher
    ranks = applied["ranks"]
    assert [x["rank"] for x in ranks] == [0, 1]
    assert ranks[0]["cpu"] != ranks[1]["cpu"]
    assert not set(ranks[0]["cpus"]) & set(ranks[1]["cpus"])
    assert not applied.get("mismatches")


def test_hpccg_fixed_iterations_are_valid(kernels_built):
    """tol=0 runs HPCCG's 149 iterations and stays valid; too few iterations are not."""
    need_mpirun()
    exe = str(kernels_built / "vhpc-hpccg")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ok = subprocess.run([MPIRUN, "--allow-run-as-root", "-np", "1", exe, "-x", "12", "-y", "12",
                         "-z", "12"], capture_output=True, text=True, env=env, timeout=300)
    res = parse_result_line(ok.stdout)
    assert ok.returncode == 0 and res["iterations"] == "149" and res["valid"] == "1"
    assert float(res["true_residual"]) < 1e-9
    assert ok.stdout.count("VHPC-RANK rank=0 ") == 1
    short = subprocess.run([MPIRUN, "--allow-run-as-root", "-np", "1", exe, "-x", "12", "-y",
                            "12", "-z", "12", "-i", "5", "-t", "0"], capture_output=True,
                           text=True, env=env, timeout=300)
    assert short.returncode == 3 and parse_result_line(short.stdout)["valid"] == "0"


def sysfs_llc() -> int:
    """Largest-level Data/Unified cache of cpu0, read here independently of vhpc."""
    best = (0, 0)
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        if (d / "type").read_text().strip() in ("Data", "Unified"):
            size = (d / "size").read_text().strip()
            factor = {"K": 1024, "M": 1024 ** 2}.get(size[-1], 1)
            best = max(best, (int((d / "level").read_text()), int(size.rstrip("KM")) * factor))
    return best[1]


def test_stream_default_n_is_at_least_4x_llc(kernels_built):
    """STREAM's rule (each array at least 4x the last-level cache) in its two halves: with
    ``n`` left out vhpc passes this host's LLC from sysfs as ``-L``, and the kernel sizes its
    arrays from ``-L`` (run here with an 8 MiB LLC: this host's 480 MiB L3 made the default
    run touch 6 GiB of arrays, 15 s of CPU).  Without ``-L`` the kernel reads sysfs itself."""
    llc = sysfs_llc()
    if llc == 0:
        pytest.skip("no cache information in sysfs")
    from vhpc.benchmarks.quick import llc_bytes
    assert llc_bytes() == llc
    stream = get("stream")
    p = stream.resolve({})
    ctx = RunContext(kernels_built, 1)
    argv = stream.command(p, ctx)
    assert p["n"] is None and "-n" not in argv and argv[argv.index("-L") + 1] == str(llc)
    given = 8 << 20
    out = subprocess.run([str(kernels_built / "vhpc-stream"), "-t", "2", "-L", str(given)],
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                         timeout=300)
    res = parse_result_line(out.stdout)
    assert out.returncode == 0 and int(res["llc_bytes"]) == given and res["n_auto"] == "1"
    assert int(res["n"]) * 8 >= 4 * given and res["in_cache"] == "0"
    applied, diag = stream.readback(p, ctx, out.stdout)
    assert applied["stream"]["n"] == int(res["n"]) and "notes" not in diag
    small = subprocess.run([str(kernels_built / "vhpc-stream"), "-n", "10000", "-t", "2"],
                           capture_output=True, text=True, timeout=60)
    res = parse_result_line(small.stdout)
    assert int(res["llc_bytes"]) == llc  # no -L: the kernel's own sysfs read
    _, diag = stream.readback(stream.resolve({"n": 10000}), ctx, small.stdout)
    assert "cache" in diag["notes"][0] and res["in_cache"] == "1"


def test_native_cpus_restrict_the_mpi_ranks(kernels_built):
    """native:cpus=1 → mpirun --cpu-set 1: the rank runs on CPU 1 (mpirun alone ignores the
    affinity it inherits and would place it on CPU 0)."""
    need_mpirun()
    if 1 not in os.sched_getaffinity(0):
        pytest.skip("needs CPU 1")
    from vhpc.environments.native.environment import NativeEnvironment
    env = NativeEnvironment(cpus=[1], counters=False)
    assert env.mpi_cpuset() == (1,) and NativeEnvironment().mpi_cpuset() is None
    hpccg = get("hpccg")
    p = hpccg.resolve({"ranks": 1, "nx": 8, "ny": 8, "nz": 8})
    ctx = RunContext(kernels_built, 1, env.mpi_cpuset())
    argv = hpccg.command(p, ctx)
    assert argv[argv.index("--cpu-set") + 1] == "1"
    r = env.run(argv, hpccg.environ(p, ctx), timeout=300)
    applied, _ = hpccg.readback(p, ctx, r.stdout)
    assert r.returncode == 0 and [x["cpus"] for x in applied["ranks"]] == [[1]]


def test_build_flags_in_the_stored_fingerprint(kernels_built, tmp_path):
    """-O3 as the reference codes; -march=native only when asked, and then visible in every
    environment's stored fingerprint."""
    from vhpc.campaign import execute as campaign
    from vhpc.spec import parse as spec
    from vhpc.store import Store
    flags = (kernels_built / "build-flags").read_text().strip()
    assert "-O3" in flags and "-march" not in flags
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, spec.from_cli(["noise:duration=0.2"], ["native"], repeats=1,
                                                warmup=0))
    campaign.execute(store, cid)
    assert store.environments(cid)["native"].fingerprint["kernel_build"] == flags


def test_hpccg_default_grid_is_at_least_4x_llc(kernels_built):
    """HPCCG's default problem does not sit in L3 (32³ per rank was ~12 MB): each rank's
    local grid is sized from the cache as STREAM's n is, one rank's rows at 4x the LLC, and
    the same local grid at every rank count (weak scaling)."""
    need_mpirun()
    llc = sysfs_llc()
    if llc == 0:
        pytest.skip("no cache information in sysfs")
    from vhpc import benchmarks
    from vhpc.benchmarks.base import RunContext

    b = benchmarks.get("hpccg")
    p = b.resolve({"ranks": 1, "max_iter": 1})
    argv = b.command(p, RunContext(kernels_built, 1))
    assert argv[argv.index("-x") + 1] == "0"  # auto, decided by the kernel where it runs
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                         env={**os.environ, **b.environ(p, RunContext(kernels_built, 1))})
    res = parse_result_line(out.stdout)
    edge = int(res["nx"])
    assert res["n_auto"] == "1" and int(res["llc_bytes"]) == llc
    assert res["nx"] == res["ny"] == res["nz"] and int(res["rows"]) == edge ** 3
    row = 27 * (8 + 4) + 8 + 5 * 8  # values + int columns, row pointer, five vectors
    assert edge ** 3 * row >= 4 * llc and (edge == 32 or (edge - 1) ** 3 * row < 4 * llc)
    assert b.auto_values({**p, "ranks": 1}, None)["nx"].startswith(f"{edge} (auto")
    assert b.auto_values({**p, "ranks": 3}, None)["nx"].startswith(f"{edge} (auto")


def test_hpccg_and_stream_size_from_the_llc_vhpc_passes_so_a_guest_solves_the_hosts_grid(
        kernels_built):
    """A guest's emulated LLC (16 MiB beside this host's 32 MiB) gave it another grid than
    native's (45³ vs 57³ at ranks=2): vhpc passes the host's LLC with -L in every environment,
    and the kernels size from it: 4 MiB and one rank give the smallest edge e >= 32 with
    e³ x 372 bytes >= 16 MiB, 36 by hand (35³ x 372 = 15.9e6 < 16,777,216 <= 36³ x 372)."""
    need_mpirun()
    from vhpc import benchmarks
    from vhpc.benchmarks.base import RunContext
    from vhpc.benchmarks.quick import llc_bytes

    b = benchmarks.get("hpccg")
    p = b.resolve({"ranks": 1, "max_iter": 1})
    argv = b.command(p, RunContext(kernels_built, 1))
    if llc_bytes():
        assert argv[argv.index("-L") + 1] == str(llc_bytes())
    assert "-L" not in b.command(b.resolve({"ranks": 1, "nx": 40, "ny": 40, "nz": 40}),
                                 RunContext(kernels_built, 1))
    kernel = argv.index(str(kernels_built / "vhpc-hpccg"))
    mine = argv[:kernel + 1] + ["-i", "1", "-L", str(4 << 20)]
    out = subprocess.run(mine, capture_output=True, text=True, timeout=300,
                         env={**os.environ, **b.environ(p, RunContext(kernels_built, 1))})
    res = parse_result_line(out.stdout)
    assert (res["nx"], res["ny"], res["nz"], res["llc_bytes"], res["n_auto"]) == \
        ("36", "36", "36", str(4 << 20), "1")
    s = benchmarks.get("stream")
    sargv = s.command(s.resolve({}), RunContext(kernels_built, 1))
    if llc_bytes():
        assert sargv[sargv.index("-L") + 1] == str(llc_bytes())
    assert "-L" not in s.command(s.resolve({"n": 1000}), RunContext(kernels_built, 1))
    # 1 MiB: 4 x 1 MiB / 8 = 524,288 doubles, below STREAM's 2,000,000 floor
    res = parse_result_line(subprocess.run([str(kernels_built / "vhpc-stream"), "-t", "2", "-L",
                                            str(1 << 20)], capture_output=True, text=True,
                                           timeout=300).stdout)
    assert (res["n"], res["llc_bytes"], res["n_auto"]) == ("2000000", str(1 << 20), "1")


def test_hpccg_auto_grid_is_one_local_grid_at_1_2_and_3_ranks(kernels_built, tmp_path,
                                                             monkeypatch):
    """Weak scaling: HPCCG's nx, ny, nz are each process's local grid, and the automatic size
    is one cube for every rank count (a fixed problem per rank), so the global rows grow as
    the ranks: read back from the stored trials of a real native campaign.  The LLC vhpc
    sizes from is 8 MiB here: this host's 480 MiB L3 gives a 176-point edge, 2 GB a rank."""
    need_mpirun()
    from vhpc.benchmarks import quick
    monkeypatch.setattr(quick, "llc_bytes", lambda *a: 8 << 20)
    from vhpc.campaign import execute as campaign
    from vhpc.report import pagefacts
    from vhpc.spec import parse as spec
    from vhpc.store import Store

    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, spec.from_cli(
        [f"hpccg:ranks={r},max_iter=1" for r in (1, 2, 3)], ["native"], repeats=1, warmup=0))
    campaign.execute(store, cid)
    trials = store.trials(cid)
    results = {int(parse_result_line(t.stdout)["ranks"]): parse_result_line(t.stdout)
               for t in trials}
    assert len(results) == 3 and all(t.status == "done" for t in trials)
    edges = {p: (r["nx"], r["ny"], r["nz"]) for p, r in results.items()}
    assert len(set(edges.values())) == 1, edges
    edge = int(results[1]["nx"])
    for r in (1, 2, 3):
        assert int(results[r]["rows"]) == r * edge ** 3
    sizes = pagefacts.problem_sizes(store.campaign(cid)["spec"], trials)
    assert {s["nx"] for s in sizes.values()} == {f"{edge} (auto)"}
