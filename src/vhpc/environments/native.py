"""The ``native`` environment: benchmarks run directly on the host (the usual baseline)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

from vhpc.environments import hostinfo
from vhpc.environments.base import Environment, RunResult, now


def run_process(argv: list[str], env: dict[str, str] | None, timeout: float,
                cwd: str | None = None) -> RunResult:
    """Run ``argv`` in its own process group; on timeout kill the whole group (SIGKILL).

    Returns a :class:`RunResult`; a missing executable gives returncode 127 and the reason in
    stderr, as a shell would.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    started = now()
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=full_env, cwd=cwd, start_new_session=True)
    except OSError as exc:
        return RunResult(127, "", f"cannot start {argv[0]}: {exc}", started, 0.0)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return RunResult(
        None if timed_out else proc.returncode,
        out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
        started, time.monotonic() - t0, timed_out=timed_out,
    )


class NativeEnvironment(Environment):
    """Runs commands on the host.  ``cpus`` optionally restricts them to host CPUs (applied with
    sched_setaffinity inherited by the child, read back from the process's allowed CPUs)."""

    kind = "native"

    def __init__(self, name: str = "native", cpus: list[int] | None = None):
        super().__init__(name)
        self.cpus = cpus

    def fingerprint(self) -> dict[str, Any]:
        fp = hostinfo.fingerprint()
        fp.update(kind="native", accel=None, cpus=self.cpus)
        return fp

    def run(self, argv, env=None, timeout=600.0) -> RunResult:
        if self.cpus:
            saved = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.cpus)
            try:
                result = run_process(argv, env, timeout)
            finally:
                os.sched_setaffinity(0, saved)
            result.applied = {"cpus": sorted(self.cpus)}
        else:
            result = run_process(argv, env, timeout)
            result.applied = {"cpus": sorted(os.sched_getaffinity(0))}
        return result
