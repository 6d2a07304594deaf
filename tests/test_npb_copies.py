"""NPB jobs started together (copies=N, seed 003 Fig. 2's oversubscription runs)."""

from vhpc.benchmarks import get
from vhpc.benchmarks.base import RunContext
from vhpc.environments.native.environment import NativeEnvironment


def test_copies_run_together_and_every_copy_must_verify(kernels_built):
    b = get("npb-ep")
    p = b.resolve({"class": "S", "copies": 3, "threads": 1})
    ctx = RunContext(kernels_built, 2)
    r = NativeEnvironment(counters=False).run(b.command(p, ctx), b.environ(p, ctx), timeout=300)
    lines = [line for line in r.stdout.splitlines() if line.startswith("VHPC-RESULT")]
    assert len(lines) == 3 and r.returncode == 0
    samples = {s.metric: s for s in b.parse(p, r.stdout, r.stderr, r.returncode)}
    mops = [float(tok.split("=")[1]) for line in lines for tok in line.split() if tok.startswith("mops=")]
    times = [float(tok.split("=")[1]) for line in lines for tok in line.split() if tok.startswith("time_s=")]
    assert samples["mops"].value == sum(mops) and samples["time"].value == sum(times) / 3
    assert all(s.valid for s in samples.values())
    missing_one = "\n".join(r.stdout.splitlines()[: r.stdout.splitlines().index(lines[-1])])
    assert not any(s.valid for s in b.parse(p, missing_one, "", 0))  # a copy died: invalid
    failed = r.stdout.replace("verified=1 valid=1", "verified=0 valid=0", 1)
    assert not any(s.valid for s in b.parse(p, failed, "", 0))
