#!/usr/bin/env python3
"""Per-trial cost of running remotely: `true` as a trial natively, over ssh, as a Slurm step.

Needs the cluster and sshd of tests/cluster/up in the environment (SLURM_CONF,
VHPC_SSH_PORT, VHPC_SSH_CONFIG):

    eval "$(tests/cluster/up)"; .venv/bin/python bench/bench_remote.py --runs 10; tests/cluster/down

Prints the median wall seconds of one trial for each path; the difference to native is what
the ssh environment (one multiplexed ssh command plus the remote wrapper) and the slurm
executor (one srun job step that starts Python on the node) add to every trial.
"""

import argparse
import os
import statistics
import time

from vhpc.environments.native.environment import NativeEnvironment
from vhpc.environments.ssh.environment import SshEnvironment
from vhpc.executors.slurm.allocation import SlurmExecutor
from vhpc.spec.parse import EnvSpec


def median_trial(run, runs: int) -> float:
    """Median wall seconds of ``run()`` over ``runs`` calls (after one untimed call)."""
    run()
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        result = run()
        times.append(time.monotonic() - t0)
        assert result.ok, (result.returncode, result.error, result.stderr[-300:])
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    native = NativeEnvironment("native", counters=False)
    print(f"native        {median_trial(lambda: native.run(['true'], timeout=60), args.runs):.3f} s")
    ssh = SshEnvironment("ssh", host="127.0.0.1", port=int(os.environ["VHPC_SSH_PORT"]))
    try:
        ssh.prepare(["vhpc-noise"])
        t = median_trial(lambda: ssh.run(["true"], timeout=60), args.runs)
        print(f"ssh           {t:.3f} s")
    finally:
        ssh.close()
    spec = EnvSpec(kind="native", name="native")
    with SlurmExecutor("bench") as ex:
        t = median_trial(lambda: ex.run(native, spec, ["true"], {}, 60, "true"), args.runs)
        print(f"slurm step    {t:.3f} s")


if __name__ == "__main__":
    main()
