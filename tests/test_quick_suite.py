"""The quick suite's Python side on the real kernels: command lines and parsing."""

from vhpc.benchmarks import get
from vhpc.benchmarks.base import RunContext
from vhpc.environments.native.environment import NativeEnvironment

from conftest import require_tool


def run(name, overrides, bindir):
    b = get(name)
    p = b.resolve(overrides)
    r = NativeEnvironment(counters=False).run(b.command(p, RunContext(bindir, 2)),
                                              b.environ(p, RunContext(bindir, 2)), timeout=120)
    return b.parse(p, r.stdout, r.stderr, r.returncode)


def test_pagefault_maps_a_shared_file_only_when_asked(kernels_built, tmp_path):
    plain = {s.metric for s in run("pagefault", {"mib": 4, "reps": 1}, kernels_built)}
    assert plain == {"private_us", "shared_us"}
    shm = "/dev/shm/vhpc-test-pagefault"
    with open(shm, "wb") as f:
        f.truncate(4 << 20)
    try:
        samples = {s.metric: s for s in run("pagefault", {"mib": 4, "reps": 1, "file": shm}, kernels_built)}
    finally:
        import os
        os.unlink(shm)
    assert samples["file_us"].valid and samples["file_us"].value > 0


def test_every_quick_benchmark_parses_its_own_kernel(kernels_built):
    sizes = {"stream": {"n": 20000, "ntimes": 3}, "randomaccess": {"table_log2": 18},
             "pingpong": {"iters": 20}, "noise": {"duration": 0.1}, "pagefault": {"mib": 2, "reps": 1}}
    for name, overrides in sizes.items():
        samples = run(name, overrides, kernels_built)
        assert {s.metric for s in samples} == {m.name for m in get(name).metrics} - {"file_us"}
        assert all(s.valid for s in samples), name


def test_mpich_builds_and_runs_the_mpi_kernels(tmp_path):
    from vhpc.campaign import execute as campaign
    from vhpc.spec import parse as spec
    from vhpc.store import Store

    require_tool("mpicc.mpich")
    s = spec.from_cli(["pingpong:iters=20,mpi=mpich", "osu-latency:sizes=8,iters=20,mpi=mpich",
                       "npb-cg:class=S,variant=mpi,mpi=mpich", "pingpong:iters=20"],
                      ["native"], repeats=1, warmup=0)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    counts = campaign.execute(store, cid)
    assert counts == {"done": 4, "failed": 0}, [
        (t.benchmark, t.params, t.error, (t.stderr or "")[-800:]) for t in store.trials(cid)
        if t.status != "done"]
    bad = {(o.benchmark, o.params) for o in store.observations(cid) if not o.valid}
    assert not bad, [(t.benchmark, t.params, t.returncode, (t.stdout or "")[-600:],
                      (t.stderr or "")[-600:]) for t in store.trials(cid)
                     if (t.benchmark, t.params) in bad]
    dirs = campaign.kernel_dirs(s)
    assert set(dirs) == {"openmpi", "mpich"} and dirs["mpich"].name.endswith("-mpich")
    import subprocess
    linked = subprocess.run(["ldd", str(dirs["mpich"] / "vhpc-pingpong")], capture_output=True,
                            text=True).stdout
    assert "libmpich" in linked and "libmpi.so.40" not in linked
