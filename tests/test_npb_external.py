"""npb-external: NPB's standard report parsed from a user's own NPB binary."""

import os
import stat
from pathlib import Path

import pytest

from vhpc.benchmarks import BenchmarkError, ParseError, get
from vhpc.benchmarks.base import RunContext
from vhpc.benchmarks.npb_external import parse_npb_report
from vhpc.environments.native.environment import NativeEnvironment

MPI_REPORT = """
 MG Benchmark Completed.
 Class           =                        A
 Size            =              256x 256x 256
 Iterations      =                        4
 Time in seconds =                     1.25
 Total processes =                        4
 Active processes=                        4
 Mop/s total     =                  3114.51
 Mop/s/process   =                   778.63
 Operation type  =           floating point
 Verification    =               SUCCESSFUL
 Version         =                    3.4.2
"""


def test_mpi_report_with_grid_size():
    r = parse_npb_report("noise before\n" + MPI_REPORT)
    assert r["benchmark"] == "MG" and r["class"] == "A" and r["size"] == "256x 256x 256"
    assert r["processes"] == "4" and "threads" not in r
    assert (r["time"], r["mops"], r["verification"]) == ("1.25", "3114.51", "SUCCESSFUL")


def test_unsuccessful_report_gives_invalid_samples_and_wrong_class_is_an_error():
    b = get("npb-external")
    p = b.resolve({"binary": "/x/mg.A.x", "class": "A"})
    bad = MPI_REPORT.replace("SUCCESSFUL", "UNSUCCESSFUL")
    samples = b.parse(p, bad, "", 0)
    assert [s.metric for s in samples] == ["time", "mops"] and not any(s.valid for s in samples)
    with pytest.raises(ParseError, match="class 'A', not 'B'"):
        b.parse(b.resolve({"binary": "/x/mg.B.x", "class": "B"}), MPI_REPORT, "", 0)
    with pytest.raises(ParseError, match="no NPB report"):
        b.parse(p, "Segmentation fault\n", "", 139)


def test_path_from_npb_naming_convention_and_launchers():
    b = get("npb-external")
    ctx = RunContext(None, 2)
    p = b.resolve({"dir": "/opt/NPB/bin", "kernel": "cg", "class": "c", "launcher": "mpi"})
    assert b.command(p, ctx)[-1] == "/opt/NPB/bin/cg.C.x"
    argv = b.command(p, ctx)
    # ranks bound to cores, as vhpc's own MPI kernels (2 ranks on 2 CPUs: no --oversubscribe)
    assert argv[0] in ("mpirun", "mpirun.openmpi") and argv[1:8] == [
        "--allow-run-as-root", "-np", "2", "--map-by", "slot:PE=1", "--bind-to", "core"]
    assert b.environ(p, ctx) == {"OMP_NUM_THREADS": "1", "OMP_PLACES": "cores",
                                 "OMP_PROC_BIND": "close"}
    q = b.resolve({"binary": "/opt/NPB/bin/ep.A.x", "threads": 3})
    assert b.command(q, ctx) == ["/opt/NPB/bin/ep.A.x"]
    assert b.environ(q, ctx) == {"OMP_NUM_THREADS": "3", "OMP_PROC_BIND": "spread"}
    dt = b.resolve({"binary": "/opt/NPB/bin/dt.S.x", "launcher": "mpi", "ranks": 5, "args": "BH"})
    assert b.command(dt, ctx)[-2:] == ["/opt/NPB/bin/dt.S.x", "BH"]
    assert "--oversubscribe" in b.command(dt, ctx)  # 5 ranks on 2 CPUs
    with pytest.raises(BenchmarkError, match="give binary=PATH"):
        b.resolve({"kernel": "cg"})


def test_runs_a_real_npb_style_binary(kernels_built, tmp_path):
    exe = tmp_path / "cg.S.x"  # an "external" NPB binary: our own CG kernel behind NPB's name
    exe.write_text(f"#!/bin/sh\nexec {kernels_built / 'vhpc-npb-omp'} -k cg -c S\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    b = get("npb-external")
    p = b.resolve({"dir": str(tmp_path), "kernel": "cg", "class": "S", "threads": 1})
    ctx = RunContext(kernels_built, 1)
    r = NativeEnvironment(counters=False).run(b.command(p, ctx), b.environ(p, ctx), timeout=120)
    samples = {s.metric: s for s in b.parse(p, r.stdout, r.stderr, r.returncode)}
    assert samples["mops"].valid and samples["mops"].value > 0 and samples["time"].value > 0
    assert os.path.exists(b.path(p))


REPORTS = Path(__file__).parent / "data" / "npb-reports"


@pytest.mark.parametrize("name, bench, time, mops, who", [
    # produced by NPB 3.4.1 (NPB3.4-OMP and NPB3.4-MPI, gfortran/gcc -O3) on this project's host
    ("is.S.omp.txt", "IS", "0.00", "635.89", ("threads", "1")),       # C printer: no period
    ("is.S.mpi2.txt", "IS", "0.00", "913.76", ("processes", "2")),
    ("cg.S.omp.txt", "CG", "0.04", "1634.18", ("threads", "1")),      # Fortran printer
    ("ft.S.omp.txt", "FT", "0.12", "1488.52", ("threads", "1")),
    ("dt-bh.S.mpi5.txt", "DT_BH.S", "0.00", "82.37", ("processes", "5")),
])
def test_real_npb_reports_parse(name, bench, time, mops, who):
    text = (REPORTS / name).read_text()
    r = parse_npb_report(text)
    assert (r["benchmark"], r["class"], r["time"], r["mops"]) == (bench, "S", time, mops)
    assert r[who[0]] == who[1] and r["verification"] == "SUCCESSFUL"
    b = get("npb-external")
    kernel = bench.split("_")[0].split(".")[0].lower()
    p = b.resolve({"dir": "/x", "kernel": kernel, "class": "S"})
    samples = {s.metric: s for s in b.parse(p, text, "", 0)}
    assert samples["mops"].value == float(mops) and samples["mops"].valid
    with pytest.raises(ParseError, match="not EP"):
        b.parse(b.resolve({"dir": "/x", "kernel": "ep", "class": "S"}), text, "", 0)
