"""The ``native`` environment: benchmarks run directly on the host (the usual baseline)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from vhpc import records
from vhpc.cpulist import parse_cpu_list
from vhpc.environments import counters, hostinfo
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
    """Runs commands on the host.

    ``cpus`` restricts them to host CPUs (sched_setaffinity, inherited by the child);
    ``nodes`` binds them to host NUMA nodes, CPUs and memory, with ``numactl --cpunodebind
    --membind`` (numactl(8)) so native and VM placements are comparable; ``membind`` binds
    memory only (e.g. remote memory for a NUMA-penalty measurement).
    """

    kind = "native"

    def __init__(self, name: str = "native", cpus: list[int] | None = None,
                 nodes: str | None = None, membind: str | None = None, counters: bool = True):
        super().__init__(name)
        self.cpus = cpus
        self.nodes = nodes
        self.counters = counters
        self.numactl: list[str] = []
        if nodes is not None or membind is not None:
            if shutil.which("numactl") is None:
                raise ValueError("nodes=/membind= need numactl: apt-get install numactl")
            self.numactl = ["numactl"]
            if nodes is not None:
                self.numactl.append(f"--cpunodebind={nodes}")
            if nodes is not None or membind is not None:
                self.numactl.append(f"--membind={membind if membind is not None else nodes}")

    def fingerprint(self) -> dict[str, Any]:
        fp = hostinfo.fingerprint()
        fp.update(kind="native", accel=None, cpus=self.cpus, numactl=self.numactl or None)
        return fp

    def mpi_cpuset(self) -> tuple[int, ...] | None:
        """Host CPUs this environment confines trials to, for the MPI launcher (``cpus=``, or
        the CPUs of the ``nodes=`` NUMA nodes from sysfs ``node<N>/cpulist``); None when
        unrestricted.  Open MPI's mpirun maps ranks onto the whole machine, ignoring the
        affinity it inherits, unless given ``--cpu-set`` (docs/mpi.md)."""
        if self.cpus:
            return tuple(sorted(self.cpus))
        if self.nodes is None:
            return None
        cpus: set[int] = set()
        for node in parse_cpu_list(self.nodes):
            try:
                text = Path(f"/sys/devices/system/node/node{node}/cpulist").read_text()
            except OSError:
                return None
            if text.strip():  # a memory-only node has no CPUs
                cpus.update(parse_cpu_list(text))
        return tuple(sorted(cpus)) or None

    def run(self, argv, env=None, timeout=600.0, key="") -> RunResult:
        argv = self.numactl + list(argv)
        perf_ok, perf_why = counters.perf_status() if self.counters else (False, "counters=0")
        perf_file = None
        if perf_ok:
            fd, perf_file = tempfile.mkstemp(prefix="vhpc-perf-", suffix=".csv")
            os.close(fd)
            argv = counters.perf_wrap(argv, perf_file)
        usage0 = counters.children_usage()
        try:
            result = self._run(argv, env, timeout)
        finally:
            perf = (counters.perf_result(perf_file) if perf_file
                    else records.PerfCounters(unavailable=perf_why))
            if perf_file:
                os.unlink(perf_file)
        result.diagnostics = records.Diagnostics.build(
            rusage=counters.delta(usage0, counters.children_usage()), perf=perf)
        return result

    def _run(self, argv, env, timeout) -> RunResult:
        if self.cpus:
            saved = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.cpus)
            try:
                result = run_process(argv, env, timeout)
            finally:
                os.sched_setaffinity(0, saved)
            cpus = sorted(self.cpus)
        else:
            result = run_process(argv, env, timeout)
            cpus = sorted(os.sched_getaffinity(0))
        result.applied = records.AppliedPlacement(cpus=cpus, numactl=self.numactl or None)
        return result
