"""Tests of the C benchmark kernels in kernels/ (built into kernels/build/).

Each kernel is run at a tiny size; its single machine-readable line
``VHPC-RESULT key=value ...`` is parsed and checked for validity and
physically sane values. The failure paths are exercised too: bad options
(exit 2, one ``error:`` line), a wrong MPI rank count (exit 2) and the
testing-only ``-X`` switch that corrupts the data after the timed loop so
that verification must fail (exit 3, valid=0).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS_DIR = Path(__file__).resolve().parents[1] / "kernels"
BUILD = KERNELS_DIR / "build"
NAMES = ["vhpc-stream", "vhpc-randomaccess", "vhpc-pingpong", "vhpc-noise", "vhpc-pagefault"]
MPIRUN = shutil.which("mpirun") or "mpirun"
MPI_ARGS = ["--allow-run-as-root", "--oversubscribe"]
TIMEOUT = 300

needs_mpi = pytest.mark.needs("mpirun")  # conftest.require_tool: fails under CI=true


@pytest.fixture(scope="module")
def build(kernels_built) -> Path:
    """Path of the build directory (conftest.kernels_built: built as ``make kernels`` does)."""
    assert kernels_built == BUILD
    return BUILD


def test_the_checkout_build_carries_vhpcs_build_key(kernels_built):
    """``make kernels`` (and kernels_built) build through vhpc, which records the build key:
    a campaign's first use then rebuilds nothing.  A plain ``make -C kernels`` left no key, and
    the first campaign relinked every kernel in place while a test's guest ran them."""
    from vhpc.benchmarks import kernel_binaries
    from vhpc.benchmarks.base import build_key, ensure_kernels

    assert (kernels_built / "build-key").read_text().strip() == build_key()
    built = {p.name for p in kernels_built.glob("vhpc-*") if os.access(p, os.X_OK)}
    assert built == set(kernel_binaries())  # every program the benchmarks run, nothing else
    before = {p: p.stat().st_mtime_ns for p in kernels_built.iterdir()}
    assert ensure_kernels(kernel_binaries()) == kernels_built
    assert {p: p.stat().st_mtime_ns for p in kernels_built.iterdir()} == before


def test_a_new_build_key_rebuilds_the_npb_binaries_too(tmp_path, kernels_built):
    """The NPB binaries depend on build-key.want (kernels/stamps.mk) like every other kernel: a
    new compiler, MPI or source gives vhpc a new key, and before, every kernel but NPB's was
    rebuilt while the folder's build-key named the new build."""
    build = tmp_path / "build"
    build.mkdir()
    for name in ("vhpc-npb-omp", "build-flags", "build-key.want"):
        shutil.copy2(kernels_built / name, build / name)  # mtimes kept: up to date
    key = (build / "build-key.want").read_text().strip()

    def make(k: str) -> int:
        r = subprocess.run(["make", "-s", "-C", str(KERNELS_DIR / "npb"), f"BUILD={build}",
                            f"VHPC_BUILD_KEY={k}", str(build / "vhpc-npb-omp")],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stdout + r.stderr
        return (build / "vhpc-npb-omp").stat().st_mtime_ns

    built = (build / "vhpc-npb-omp").stat().st_mtime_ns
    assert make(key) == built  # the same key: nothing to do
    assert make("0123456789abcdef") > built  # a new key: built again
    assert (build / "build-key.want").read_text().strip() == "0123456789abcdef"


def parse_result(stdout: str) -> dict[str, float | str]:
    """The key=value pairs of the one VHPC-RESULT line (numbers as floats)."""
    lines = [line for line in stdout.splitlines() if line.startswith("VHPC-RESULT")]
    assert len(lines) == 1, f"expected exactly one VHPC-RESULT line in:\n{stdout}"
    result: dict[str, float | str] = {}
    for field in lines[0].split()[1:]:
        key, sep, value = field.partition("=")
        assert sep and key and value, f"malformed field {field!r}"
        try:
            result[key] = float(value)
        except ValueError:
            result[key] = value
    assert result.get("valid") in (0.0, 1.0), "valid=0 or valid=1 is mandatory"
    return result


def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=full_env)


def run_ok(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float | str]:
    proc = run(cmd, env)
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    res = parse_result(proc.stdout)
    assert res["valid"] == 1
    return res


def mpi(build: Path, np: int, *args: str) -> list[str]:
    return [MPIRUN, *MPI_ARGS, "-np", str(np), str(build / "vhpc-pingpong"), *args]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# --- STREAM ------------------------------------------------------------------


def test_stream_tiny(build: Path) -> None:
    res = run_ok([str(build / "vhpc-stream"), "-n", "100000", "-t", "3"])
    assert res["n"] == 100000 and res["ntimes"] == 3 and res["threads"] >= 1
    for key in ("copy_bw", "scale_bw", "add_bw", "triad_bw"):
        assert 0.01 <= res[key] <= 1000, f"{key}={res[key]} GB/s"
    assert res["max_rel_err"] <= 1e-13


def test_stream_corruption_detected(build: Path) -> None:
    proc = run([str(build / "vhpc-stream"), "-n", "10000", "-t", "3", "-X"])
    assert proc.returncode == 3
    assert parse_result(proc.stdout)["valid"] == 0


# --- RandomAccess ------------------------------------------------------------


def test_randomaccess_tiny(build: Path) -> None:
    # Racing threads lose updates: ~0.5 % (up to >1 %) at 2^16 words with 2
    # threads, < 0.1 % at 2^18, so 2^18 (2 MiB, still fast) keeps a margin.
    res = run_ok([str(build / "vhpc-randomaccess"), "-l", "18"])
    assert res["table_log2"] == 18 and res["nupdate"] == 4 * 2**18 and res["atomic"] == 0
    assert 1e-6 < res["gups"] < 100
    assert 0 <= res["error_fraction"] <= 0.01
    assert res["errors"] == pytest.approx(res["error_fraction"] * 2**18, rel=1e-4)


def test_randomaccess_atomic_exact(build: Path) -> None:
    # A small table maximizes collisions; atomic updates must lose none.
    res = run_ok([str(build / "vhpc-randomaccess"), "-l", "10", "-a"], env={"OMP_NUM_THREADS": "2"})
    assert res["atomic"] == 1 and res["errors"] == 0


def test_randomaccess_single_thread_exact(build: Path) -> None:
    # One thread cannot race: the 128 start values (HPCC starts()) must
    # reproduce the serial sequence exactly, so not a single entry may differ.
    res = run_ok([str(build / "vhpc-randomaccess"), "-l", "12"], env={"OMP_NUM_THREADS": "1"})
    assert res["threads"] == 1 and res["errors"] == 0


def test_randomaccess_corruption_detected(build: Path) -> None:
    proc = run([str(build / "vhpc-randomaccess"), "-l", "12", "-X"])
    assert proc.returncode == 3
    res = parse_result(proc.stdout)
    assert res["valid"] == 0 and res["error_fraction"] > 0.01


# --- ping-pong -----------------------------------------------------------------


@needs_mpi
def test_pingpong_two_ranks(build: Path) -> None:
    res = run_ok(mpi(build, 2, "-s", "8", "-S", "65536", "-i", "200", "-w", "20", "-b", "5", "-W", "8"))
    assert res["lat_size"] == 8 and res["bw_size"] == 65536
    assert 0 < res["latency_us"] < 1e5
    assert 0.1 < res["bandwidth_MBps"] < 1e7


@needs_mpi
def test_pingpong_one_rank_rejected(build: Path) -> None:
    proc = run(mpi(build, 1))
    assert proc.returncode == 2
    assert len(error_lines(proc.stderr)) == 1
    assert "VHPC-RESULT" not in proc.stdout


@needs_mpi
def test_pingpong_bad_option(build: Path) -> None:
    proc = run(mpi(build, 2, "-z"))
    assert proc.returncode == 2
    assert len(error_lines(proc.stderr)) == 1  # only rank 0 complains


# --- OS noise ----------------------------------------------------------------


def test_noise_tiny(build: Path) -> None:
    res = run_ok([str(build / "vhpc-noise"), "-d", "0.2"])
    assert 0.2 <= res["duration_s"] < 5
    assert res["threshold_ns"] >= 200
    assert res["threshold_ns"] >= 10 * res["min_loop_ns"]
    assert 0 <= res["detour_pct"] <= 100
    assert res["detours_per_s"] >= 0
    assert 0 <= res["p99_detour_us"] <= res["max_detour_us"]
    if res["detours"] > 0:
        assert res["max_detour_us"] * 1e3 > res["threshold_ns"]


def test_noise_explicit_threshold(build: Path) -> None:
    res = run_ok([str(build / "vhpc-noise"), "-d", "0.05", "-T", "5000"])
    assert res["threshold_ns"] == 5000


# --- page faults ---------------------------------------------------------------


def check_faults(res: dict[str, float | str], kinds: list[str]) -> None:
    for kind in kinds:
        pages = res["file_pages"] if kind == "file" else res["pages"]
        assert res[f"{kind}_faults"] >= 0.9 * pages
        assert 0 < res[f"{kind}_us"] < 1000, f"{kind}_us={res[kind + '_us']}"


def test_pagefault_tiny(build: Path) -> None:
    res = run_ok([str(build / "vhpc-pagefault"), "-m", "4", "-r", "2"])
    assert res["pages"] == 4 * 2**20 / res["page_size"]
    assert "file_us" not in res
    check_faults(res, ["private", "shared"])


def test_pagefault_file(build: Path, tmp_path: Path) -> None:
    # tmpfs faults page by page; an ext4/xfs file written with write(2) may
    # sit in large folios that are mapped several pages per fault.
    shm = Path("/dev/shm")
    directory = shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path
    path = directory / f"vhpc-test-pagefault-{os.getpid()}"
    content = os.urandom(4096) * 512  # 2 MiB
    path.write_bytes(content)
    try:
        res = run_ok([str(build / "vhpc-pagefault"), "-m", "2", "-r", "1", "-f", str(path)])
        assert res["file_pages"] == res["pages"]
        check_faults(res, ["private", "shared", "file"])
        assert path.read_bytes() == content, "the file's contents must be preserved"
    finally:
        path.unlink()


# --- command-line handling common to all kernels -------------------------------

SERIAL = ["vhpc-stream", "vhpc-randomaccess", "vhpc-noise", "vhpc-pagefault"]
BAD_ARGS = [
    ("vhpc-stream", ["-z"]),
    ("vhpc-stream", ["-n", "abc"]),
    ("vhpc-stream", ["-t", "1"]),
    ("vhpc-stream", ["extra"]),
    ("vhpc-randomaccess", ["-l", "99"]),
    ("vhpc-randomaccess", ["-l"]),
    ("vhpc-noise", ["-d", "-1"]),
    ("vhpc-noise", ["-T", "0"]),
    ("vhpc-pagefault", ["-m", "0"]),
    ("vhpc-pagefault", ["-f", "/nonexistent/vhpc"]),
    ("vhpc-pagefault", ["--long"]),
]


@pytest.mark.parametrize("name,args", BAD_ARGS, ids=[f"{n}{''.join(a)}" for n, a in BAD_ARGS])
def test_bad_option(build: Path, name: str, args: list[str]) -> None:
    proc = run([str(build / name), *args])
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "VHPC-RESULT" not in proc.stdout


@pytest.mark.parametrize("name", SERIAL)
def test_help(build: Path, name: str) -> None:
    proc = run([str(build / name), "-h"])
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: ") and "VHPC-RESULT" not in proc.stdout
    assert "%%" not in proc.stdout  # usage is printed verbatim, not via printf
