"""Every program vhpc runs as a benchmark, once, inside one real guest at its smallest size
(the run's shared guest, conftest.guest: TCG boots are slow).  Several benchmarks share a
program (the five OSU modes are ``vhpc-osu``, the NPB kernels ``vhpc-npb-omp`` and
``vhpc-npb-mpi``): what a guest can break is the program's start and its launch (libraries
over 9p, CPU features, MPI in a guest), so one of them runs here; every mode and kernel runs
natively in its suite's own tests (test_suites.py, test_npb.py), which also check the parsing.
"""

import shutil
import stat

import pytest

from vhpc.benchmarks import REGISTRY, get
from vhpc.benchmarks import npb
from vhpc.benchmarks.base import RunContext, ensure_kernels
from vhpc.campaign.execute import outcome

from conftest import require_tool

pytestmark = pytest.mark.vm

SMALLEST = {
    "stream": {"n": 20000, "ntimes": 3},
    "randomaccess": {"table_log2": 18},
    "pingpong": {"iters": 20, "bw_size": 4096},
    "noise": {"duration": 0.1},
    "pagefault": {"mib": 2, "reps": 1},
    # one rank: 3.3 s instead of 7.7 s at the default 1x2 grid under TCG; the MPI launch in a
    # guest is the same launcher's for every MPI benchmark below
    "hpcc": {"n": 200, "nb": 32, "q": 1},
    # vhpc-osu: latency, bw, bibw, multi-lat and coll are its modes (-m)
    "osu-latency": {"sizes": "8,4096", "iters": 20, "iters_large": 5},
    "linpack": {"n": 100},
    "hpccg": {"nx": 8, "ny": 8, "nz": 8},
    # vhpc-npb-omp runs all five kernels (-k); the MPI variant below
    "npb-cg": {"class": "S"},
    "ivshmem-pingpong": {"max_size": 4096, "iters": 20, "iters_large": 5},  # POSIX shm in one VM
    # the applications at their smallest: the same launcher, ranks read back, check figure
    "lammps": {"atoms": 512, "steps": 10, "ranks": 2},
    "gromacs": {"size": 1.5, "steps": 5, "ranks": 1},
}


def program(name: str, overrides: dict) -> str:
    """The program benchmark ``name`` runs with ``overrides``: its vhpc kernel binary (the
    NPB variant's for npb-*), or the benchmark itself where vhpc ships no binary for it (hpcc,
    the applications, a user's NPB binary)."""
    bench = get(name)
    if isinstance(bench, npb.NpbBenchmark):
        return npb.BINARIES[bench.resolve(overrides)["variant"]]
    return getattr(bench, "binary", None) or name


@pytest.fixture
def shared_dir():
    """A scratch directory the guest can see (the guest's /tmp is its own, not the host's)."""
    from vhpc.core.paths import cache_dir

    d = cache_dir() / "test-npb-external"
    d.mkdir(exist_ok=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_every_benchmark_program_runs_verified_in_one_guest(kernels_built, shared_dir, guest):
    exe = shared_dir / "cg.S.x"  # a user's NPB binary for npb-external
    exe.write_text(f"#!/bin/sh\nexec {kernels_built / 'vhpc-npb-omp'} -k cg -c S\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    cases = [(name, dict(p)) for name, p in SMALLEST.items()]
    # vhpc-npb-mpi: IS (all-to-all); CG's MPI variant runs across two guests in test_vcluster.py
    cases.append(("npb-is", {"class": "S", "variant": "mpi"}))
    cases.append(("npb-external", {"binary": str(exe), "class": "S", "threads": 2}))
    require_tool("mpicc.mpich")  # make test installs MPICH: fails under CI=true when missing
    cases.append(("pingpong", {"iters": 20, "bw_size": 4096, "mpi": "mpich"}))
    shipped = {n for n, b in REGISTRY.items() if type(b).__name__ != "CommandBenchmark"}
    assert {n for n, _ in cases} <= shipped
    covered = {program(n, p) for n, p in cases}
    assert covered == {program(n, {}) for n in shipped} | {npb.BINARIES["mpi"]}
    failures = []
    vm = guest  # the run's shared guest (conftest.guest): 2 vCPUs, 1 GiB
    for name, overrides in cases:
        bench = get(name)
        params = bench.resolve(overrides)
        mpi = params.get("mpi", "openmpi")
        bindir = kernels_built if mpi == "openmpi" else ensure_kernels([bench.binary], mpi)
        ctx = RunContext(bindir, vm.vcpus)
        r = vm.run(bench.command(params, ctx), bench.environ(params, ctx), timeout=300)
        status, samples, error = outcome(bench, params, r)
        if status != "done" or not samples or not all(s.valid for s in samples):
            failures.append(f"{name} {overrides}: {status} {error} {r.stderr[-300:]}")
    assert not failures, "\n".join(failures)
