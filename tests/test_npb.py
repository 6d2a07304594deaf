"""Tests of the NAS Parallel Benchmarks kernels (kernels/npb/) and their wrapper (vhpc.benchmarks.npb).

* Every kernel (EP, IS, CG, MG, FT) must pass NPB's own verification for classes S and W
  with the OpenMP binary on 1 and 2 threads and with the MPI binary on 1 and 2 ranks, and
  class A with the OpenMP binary on 2 threads.
* ``-X`` perturbs the computation: verification must fail (exit 3, ``valid=0``) and the
  Python parser must mark the samples invalid.
* Bad options exit 2 with one ``error:`` line.
* The wrapper builds the right command lines for both variants and parses real output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vhpc import benchmarks
from vhpc.benchmarks.base import BenchmarkError, ParseError, RunContext
from vhpc.benchmarks.npb import NPB_SUITE, pow2_floor

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
BUILD = KERNELS / "build"
OMP = BUILD / "vhpc-npb-omp"
MPI = BUILD / "vhpc-npb-mpi"
MPIRUN = shutil.which("mpirun") or "mpirun"
MPI_ARGS = ["--allow-run-as-root", "--oversubscribe"]
TIMEOUT = 600
NAMES = ["ep", "is", "cg", "mg", "ft"]

needs_mpi = pytest.mark.needs("mpirun")  # conftest.require_tool: fails under CI=true


@pytest.fixture(scope="module")
def build() -> Path:
    """Build kernels/npb (only) into kernels/build/ and return that directory."""
    proc = subprocess.run(["make", "-s", "-C", str(KERNELS / "npb"), f"BUILD={BUILD}"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert OMP.exists()
    return BUILD


def parse_result(stdout: str) -> dict[str, str]:
    lines = [line for line in stdout.splitlines() if line.startswith("VHPC-RESULT")]
    assert len(lines) == 1, f"expected exactly one VHPC-RESULT line in:\n{stdout}"
    pairs = dict(field.split("=", 1) for field in lines[0].split()[1:])
    assert pairs["valid"] in ("0", "1")
    return pairs


def run(cmd: list[str], threads: int | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)


def omp_cmd(kernel: str, cls: str, *extra: str) -> list[str]:
    return [str(OMP), "-k", kernel, "-c", cls, *extra]


def mpi_cmd(np: int, kernel: str, cls: str, *extra: str) -> list[str]:
    return [MPIRUN, *MPI_ARGS, "-np", str(np), str(MPI), "-k", kernel, "-c", cls, *extra]


def check_verified(proc: subprocess.CompletedProcess[str], kernel: str, cls: str, *,
                   threads: int = 1, ranks: int = 1) -> dict[str, str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    res = parse_result(proc.stdout)
    assert res["kernel"] == kernel and res["class"] == cls
    assert res["verified"] == "1" and res["valid"] == "1"
    assert int(res["threads"]) == threads and int(res["ranks"]) == ranks
    assert float(res["time_s"]) > 0 and float(res["mops"]) > 0
    # the NPB report block
    out = proc.stdout
    assert f" {kernel.upper()} Benchmark Completed." in out
    assert re.search(rf"^ Class {{11}}= +{cls}$", out, re.M)
    assert re.search(r"^ Verification    = +SUCCESSFUL$", out, re.M)
    for label in ("Size", "Iterations", "Time in seconds", "Mop/s total", "Operation type"):
        assert re.search(rf"^ {re.escape(label)} +=", out, re.M), label
    label = "Total processes" if ranks > 1 or "mpirun" in proc.args[0] else "Total threads"
    assert re.search(rf"^ {label} += +\d+$", out, re.M), label
    return res


# --- verification of every kernel ---------------------------------------------


@pytest.mark.parametrize("cls", ["S", "W"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kernel", NAMES)
def test_omp_verifies(build: Path, kernel: str, threads: int, cls: str) -> None:
    check_verified(run(omp_cmd(kernel, cls), threads), kernel, cls, threads=threads)


@needs_mpi
@pytest.mark.parametrize("cls", ["S", "W"])
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("kernel", NAMES)
def test_mpi_verifies(build: Path, kernel: str, ranks: int, cls: str) -> None:
    res = check_verified(run(mpi_cmd(ranks, kernel, cls)), kernel, cls, ranks=ranks)
    assert res["threads"] == "1"  # one thread per rank unless OMP_NUM_THREADS is set


@pytest.mark.parametrize("kernel", ["is", "mg", "ft"])
def test_omp_class_a(build: Path, kernel: str) -> None:
    """Class A where the data layout changes with the class (IS's key range and buckets, MG's
    grid levels, FT's dimensions).  EP and CG run the same code at every class: S and W verify
    them above; their class A took 21 s of the suite's 2 cores (EP 2^28 pairs, CG n = 14000)."""
    check_verified(run(omp_cmd(kernel, "A"), 2), kernel, "A", threads=2)


@needs_mpi
@pytest.mark.parametrize("kernel", ["is", "mg", "ft"])
def test_mpi_four_ranks(build: Path, kernel: str) -> None:
    """More ranks than cores (oversubscribed): IS exchange with 4 ranks, MG with replicated
    coarse levels (fewer planes than ranks), FT transposes with 4 ranks."""
    check_verified(run(mpi_cmd(4, kernel, "S")), kernel, "S", ranks=4)


# --- deliberately perturbed runs ------------------------------------------------


@pytest.mark.parametrize("kernel", NAMES)
def test_perturbed_fails_verification(build: Path, kernel: str) -> None:
    proc = run(omp_cmd(kernel, "S", "-X"), 2)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    res = parse_result(proc.stdout)
    assert res["verified"] == "0" and res["valid"] == "0" and res["perturbed"] == "1"
    assert re.search(r"^ Verification    = +UNSUCCESSFUL$", proc.stdout, re.M)


@needs_mpi
@pytest.mark.parametrize("kernel", NAMES)
def test_perturbed_fails_verification_mpi(build: Path, kernel: str) -> None:
    proc = run(mpi_cmd(2, kernel, "S", "-X"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    res = parse_result(proc.stdout)
    assert res["verified"] == "0" and res["valid"] == "0"


def wrapper_run(name: str, params: dict, extra: list[str] | None = None):
    """Run a benchmark through the wrapper's command()/environ() and parse it."""
    bench = benchmarks.get(name)
    resolved = bench.resolve(params)
    ctx = RunContext(BUILD, 2)
    argv = bench.command(resolved, ctx) + (extra or [])
    env = dict(os.environ, **bench.environ(resolved, ctx))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    return bench, resolved, proc, bench.parse(resolved, proc.stdout, proc.stderr, proc.returncode)


@pytest.mark.parametrize("variant", ["omp", pytest.param("mpi", marks=needs_mpi)])
def test_wrapper_marks_perturbed_run_invalid(build: Path, variant: str) -> None:
    _, _, proc, samples = wrapper_run("npb-mg", {"variant": variant}, ["-X"])
    assert proc.returncode == 3
    assert [s.metric for s in samples] == ["time", "mops"]
    assert samples and not any(s.valid for s in samples)


@pytest.mark.parametrize("variant", ["omp", pytest.param("mpi", marks=needs_mpi)])
def test_wrapper_end_to_end(build: Path, variant: str) -> None:
    _, resolved, proc, samples = wrapper_run("npb-cg", {"variant": variant, "class": "s"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = parse_result(proc.stdout)
    assert res["threads"] == ("2" if variant == "omp" else "1")
    assert res["ranks"] == ("1" if variant == "omp" else "2")
    assert {s.metric: s.valid for s in samples} == {"time": True, "mops": True}
    by = {s.metric: s for s in samples}
    assert by["time"].unit == "s" and not by["time"].higher_is_better
    assert by["mops"].unit == "Mop/s" and by["mops"].higher_is_better
    assert by["time"].value == pytest.approx(float(res["time_s"]))


# --- bad command lines ----------------------------------------------------------


@pytest.mark.parametrize("args", [
    [], ["-k", "xx"], ["-k", "ep", "-c", "D"], ["-k", "ep", "-c", "SS"], ["-k", "ep", "-q"],
    ["-k", "ep", "stray"], ["-k"],
])
def test_bad_options(build: Path, args: list[str]) -> None:
    proc = run([str(OMP), *args])
    assert proc.returncode == 2
    assert len([ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]) == 1
    assert "VHPC-RESULT" not in proc.stdout


@needs_mpi
def test_mpi_rank_count_not_power_of_two(build: Path) -> None:
    proc = run([MPIRUN, *MPI_ARGS, "-np", "3", str(MPI), "-k", "ep"])
    assert proc.returncode == 2
    assert len([ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]) == 1


def test_help(build: Path) -> None:
    proc = run([str(OMP), "-h"])
    assert proc.returncode == 0 and "-k KERNEL" in proc.stdout


# --- the Python wrapper (no binaries needed) -----------------------------------

CTX = RunContext(Path("/opt/k"), 6)


def test_suite_registered() -> None:
    names = [b.name for b in NPB_SUITE]
    assert names == ["npb-ep", "npb-is", "npb-cg", "npb-mg", "npb-ft"]
    for name in names:
        bench = benchmarks.get(name)
        assert [p.name for p in bench.params] == ["class", "variant", "threads", "ranks", "mpi",
                                                   "copies"]
        assert [m.name for m in bench.metrics] == ["time", "mops"]
        assert bench.provenance and bench.verification and bench.binary == "vhpc-npb-omp"


def test_defaults_and_command_omp() -> None:
    bench = benchmarks.get("npb-ft")
    params = bench.resolve({})
    assert params == {"class": "S", "variant": "omp", "threads": None, "ranks": None,
                      "mpi": "openmpi", "copies": 1}
    assert bench.command(params, CTX) == ["/opt/k/vhpc-npb-omp", "-k", "ft", "-c", "S"]
    assert bench.environ(params, CTX)["OMP_NUM_THREADS"] == "6"
    params = bench.resolve({"class": "a", "threads": 3})
    assert bench.command(params, CTX)[-1] == "A"
    assert bench.environ(params, CTX)["OMP_NUM_THREADS"] == "3"


def test_command_mpi() -> None:
    bench = benchmarks.get("npb-is")
    params = bench.resolve({"variant": "MPI", "ranks": 2, "class": "W"})
    argv = bench.command(params, CTX)
    assert argv[0] in ("mpirun", "mpirun.openmpi")  # Debian's suffixed name where it exists
    # 2 ranks on 6 CPUs: each bound to its own core (docs/mpi.md), no --oversubscribe
    assert argv[1:] == ["--allow-run-as-root", "-np", "2", "--map-by", "slot:PE=1",
                        "--bind-to", "core", "/opt/k/vhpc-npb-mpi", "-k", "is", "-c", "W"]
    mpich = bench.command(bench.resolve({"variant": "mpi", "ranks": 2, "mpi": "mpich"}), CTX)
    assert mpich[:5] == ["mpirun.mpich", "-np", "2", "-bind-to", "core"]
    assert bench.environ(params, CTX) == {"OMP_NUM_THREADS": "1", "OMP_PLACES": "cores",
                                          "OMP_PROC_BIND": "close"}
    # default ranks: the largest power of two not above the CPU count (6 -> 4)
    argv = bench.command(bench.resolve({"variant": "mpi"}), CTX)
    assert argv[argv.index("-np") + 1] == "4"
    assert [pow2_floor(n) for n in (1, 2, 3, 4, 7, 8, 9)] == [1, 2, 2, 4, 4, 8, 8]


@pytest.mark.parametrize("bad", [{"class": "D"}, {"variant": "cuda"}, {"ranks": 2},
                                 {"variant": "mpi", "ranks": 3}, {"threads": 0},
                                 {"size": 1}])
def test_bad_params(bad: dict) -> None:
    keys = "|".join(bad)  # the message names the parameter at fault
    with pytest.raises(BenchmarkError, match=f"^npb-ep: (({keys})=|unknown parameter '({keys})')"):
        benchmarks.get("npb-ep").resolve(bad)


REAL_OUTPUT = """\
 Zeta is  8.5971775078648e+00, reference  8.5971775078648e+00, relative error 1.033e-15

 CG Benchmark Completed.
 Class           =                        S
 Size            =                     1400
 Iterations      =                       15
 Time in seconds =                     0.01
 Total threads   =                        2
 Avail threads   =                        2
 Mop/s total     =                  5777.05
 Mop/s/thread    =                  2888.52
 Operation type  =           floating point
 Verification    =               SUCCESSFUL
 Version         =                 3.4-vhpc

VHPC-RESULT kernel=cg class=S time_s=0.0115377 mops=5777.05 verified=1 valid=1 threads=2 ranks=1 \
niter=15 rel_err=1.0331e-15 perturbed=0
"""


def test_parse_real_output() -> None:
    bench = benchmarks.get("npb-cg")
    params = bench.resolve({})
    samples = bench.parse(params, REAL_OUTPUT, "", 0)
    assert [(s.metric, s.value, s.unit, s.valid) for s in samples] == [
        ("time", 0.0115377, "s", True), ("mops", 5777.05, "Mop/s", True)]
    # non-zero exit or failed verification: invalid samples
    assert not any(s.valid for s in bench.parse(params, REAL_OUTPUT, "", 3))
    failed = REAL_OUTPUT.replace("verified=1 valid=1", "verified=0 valid=0")
    assert not any(s.valid for s in bench.parse(params, failed, "", 0))


def test_parse_errors() -> None:
    bench = benchmarks.get("npb-cg")
    params = bench.resolve({})
    with pytest.raises(ParseError, match="no VHPC-RESULT line"):
        bench.parse(params, "no result here", "", 1)
    with pytest.raises(ParseError, match="for kernel 'cg'"):  # another kernel's output
        benchmarks.get("npb-mg").parse(params, REAL_OUTPUT, "", 0)
    with pytest.raises(ParseError, match="for class 'S', not 'A'"):  # another class
        bench.parse(bench.resolve({"class": "A"}), REAL_OUTPUT, "", 0)
    with pytest.raises(ParseError, match="mops='x' is not a number"):
        bench.parse(params, REAL_OUTPUT.replace("mops=5777.05", "mops=x"), "", 0)
