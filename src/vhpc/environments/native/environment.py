"""The ``native`` environment: benchmarks run directly on the host (the usual baseline)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from vhpc.core import records
from vhpc.core.cpulist import parse_cpu_list
from vhpc.host import counters, facts, owned
from vhpc.environments.base import Environment, RunResult, now
from vhpc.environments.readback import READBACK_MARK, RUN_SCRIPT, parse_readback

#: share of the benchmark's resident pages that must be on the planned nodes for the memory
#: binding to read back as applied
LOCALITY_MIN = 0.95
#: numa_maps counts pages; the read-back assumes 4 KiB pages for MiB figures
PAGE_MIB = 4 / 1024


def binding_mismatches(procs: list[dict[str, Any]], cpus: set[int] | None,
                       mem_nodes: set[int]) -> list[str]:
    """Differences between sampled processes (:func:`vhpc.environments.readback.parse_readback`
    output) and the plan: a process allowed on CPUs outside ``cpus`` (None: not planned), or
    fewer than :data:`LOCALITY_MIN` of all sampled resident pages on ``mem_nodes`` (empty: not
    planned).  One sentence each; no samples (a run shorter than the first samples) give no
    mismatch: the trial's ``unverified`` says so instead."""
    out = []
    if cpus:
        for p in procs:
            allowed = set(parse_cpu_list(p["cpus"])) if p.get("cpus") else set()
            if allowed - cpus:
                out.append(f"{p.get('comm')} (pid {p['pid']}) may run on CPUs "
                           f"{p['cpus']}, planned {','.join(map(str, sorted(cpus)))}")
    total = sum(sum(p["pages_per_node"].values()) for p in procs)
    if mem_nodes and total:
        on = sum(n for p in procs for k, n in p["pages_per_node"].items()
                 if int(k) in mem_nodes)
        if on / total < LOCALITY_MIN:
            out.append(f"{100 * on / total:.0f} % of the benchmark's resident pages on planned "
                       f"node(s) {','.join(map(str, sorted(mem_nodes)))} (< "
                       f"{LOCALITY_MIN * 100:.0f} %)")
    return out


#: Holds a native trial until its guard watches, then runs it (``exec``: same pid and group).
GATE = 'read go || exit 125; exec "$@" </dev/null'


#: Seconds the output pipes of a killed trial may stay open before their holders are killed.
DRAIN_WAIT = 2.0


def drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """The rest of the output of ``proc``, a trial whose session was killed.  A process that
    left the session (``setsid``: a daemon, a co-runner started in the background) and still
    holds the output pipes would keep ``communicate()`` waiting for as long as it runs, past
    the trial's timeout; every holder is killed (:func:`vhpc.host.owned.kill_pipe_holders`)
    until the pipes close, and after a few rounds they are closed unread."""
    for _ in range(5):
        try:
            return proc.communicate(timeout=DRAIN_WAIT)
        except subprocess.TimeoutExpired:
            owned.kill_pipe_holders(proc.stdout, proc.stderr)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    proc.wait()
    return b"", b""


def run_process(argv: list[str], env: dict[str, str] | None, timeout: float,
                cwd: str | None = None) -> RunResult:
    """Run ``argv`` in a session of its own; on timeout, and when it ends, kill every process
    left in that session (SIGKILL, :func:`~vhpc.host.owned.kill_session`: MPI ranks run in
    groups of their own) and reap the working folders of ranks so killed.

    The group dies with vhpc: a :class:`~vhpc.host.owned.GroupGuard` (one guard process shared
    by all trials) kills the whole group if vhpc is killed (``kill -9``) while it runs, so a
    resumed trial never runs beside a survivor.  The command waits (in a ``sh`` that then
    ``exec``s it, stdin /dev/null) until the guard is watching: a vhpc killed in between
    closes the gate's pipe, and the ``sh`` exits without starting anything.  No ``preexec_fn``:
    subprocess may then start the child with vfork, without copying vhpc's memory.

    Returns a :class:`RunResult`; a missing executable gives returncode 127 and the reason in
    stderr, as a shell would.
    """
    full_env = {**os.environ, **env} if env else None  # None: the child inherits vhpc's
    started = now()
    t0 = time.monotonic()
    exe = argv[0] if "/" in argv[0] else shutil.which(
        argv[0], path=(full_env or os.environ).get("PATH"))
    if not exe or not os.access(os.path.join(cwd or "", exe), os.X_OK):
        return RunResult(127, "", f"cannot start {argv[0]}: no such executable", started, 0.0)
    try:
        proc = owned.TrialProcess(["/bin/sh", "-c", GATE, "vhpc-trial", *argv],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=full_env, cwd=cwd,
                                   start_new_session=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return RunResult(127, "", f"cannot start {argv[0]}: {exc}", started, 0.0)
    try:
        guard = owned.GroupGuard(proc.pid)
    except OSError as exc:  # no guard: the gate's pipe closes and the sh exits unstarted
        proc.stdin.close()  # type: ignore[union-attr]
        proc.communicate()
        return RunResult(127, "", f"cannot start {argv[0]}: no process guard: {exc}",
                         started, time.monotonic() - t0)
    try:
        proc.stdin.write(b"go\n")  # type: ignore[union-attr]  # the guard watches: start
        proc.stdin.close()  # type: ignore[union-attr]
    except OSError:
        pass
    proc.stdin = None
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        owned.kill_session(proc.pid)  # every group: Open MPI gives each rank its own
        out, err = drain(proc)
    except BaseException:
        owned.kill_session(proc.pid)
        proc.wait()
        raise
    finally:
        try:  # whatever the trial left running outlives it not
            owned.kill_session(proc.pid, young=time.monotonic() - t0 < 1.0)
        finally:
            guard.done()
    if timed_out:  # the killed ranks' working folders (their owners are gone now)
        owned.reap(owned.APP_PREFIX)
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

    With ``nodes``/``membind`` every trial runs under the ssh environment's wrapper
    (``vhpc-run.sh``), which samples the benchmark's processes while they run: allowed CPUs
    (``/proc/PID/status``) and resident pages per node (``/proc/PID/numa_maps``).  A process
    allowed on a CPU outside ``nodes``, or fewer than :data:`LOCALITY_MIN` of the pages on the
    planned memory nodes, is a placement mismatch; with ``strict`` it fails the trial.
    """

    mpi_job_step = True

    def __init__(self, name: str = "native", cpus: list[int] | None = None,
                 nodes: str | None = None, membind: str | None = None, counters: bool = True,
                 strict: bool = False):
        super().__init__(name)
        self.cpus = cpus
        self.nodes = nodes
        self.membind = membind if membind is not None else nodes
        self.strict = strict
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

    def benchmark_cpus(self) -> int:
        """The CPUs of ``cpus=`` when given, else the CPUs this process may run on
        (:meth:`Environment.benchmark_cpus`)."""
        return len(self.cpus) if self.cpus else super().benchmark_cpus()

    def fingerprint(self) -> dict[str, Any]:
        """This host's fingerprint (:func:`vhpc.host.facts.fingerprint`) with ``kind=native``, no
        accelerator, the ``cpus=`` list and the numactl prefix (None without
        ``nodes=``/``membind=``)."""
        fp = facts.fingerprint()
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
        """Run ``argv`` on this host as :meth:`Environment.run` does (``timeout`` in seconds),
        inside the numactl prefix for ``nodes=``/``membind=``, under ``perf stat`` when counters
        are on and usable.  With numactl, a wrapper script also samples the processes and their
        page locality into ``result.applied`` and is given 30 s beyond ``timeout`` to report; a
        kill by its timeout counts as the trial's timeout. ``result.diagnostics`` holds the
        children's resource usage and the perf counters (or why there are none).  Never raises for
        a failing command."""
        argv = list(argv)
        perf_ok, perf_why = counters.perf_status() if self.counters else (False, "counters=0")
        perf_file = None
        if perf_ok:
            perf_file = owned.owned_tempfile("vhpc-perf-", ".csv")
            argv = counters.perf_wrap(argv, perf_file)
        argv = self.numactl + argv  # outermost: perf and the benchmark are both bound
        usage0 = counters.children_usage()
        rundir = str(owned.owned_tempdir("vhpc-run-")) if self.numactl else None
        if rundir:
            argv = ["/bin/sh", str(RUN_SCRIPT), f"{rundir}/trial.pid",
                    str(int(max(1, timeout))), *argv]
        try:
            result = self._run(argv, env, timeout + (30 if rundir else 0))
        finally:
            perf = (counters.perf_result(perf_file) if perf_file
                    else records.PerfCounters(unavailable=perf_why))
            if perf_file:
                os.unlink(perf_file)
            if rundir:
                shutil.rmtree(rundir, ignore_errors=True)
        if rundir:
            self._readback(result, timeout)
        result.diagnostics = records.Diagnostics.build(
            rusage=counters.delta(usage0, counters.children_usage()), perf=perf)
        return result

    def _readback(self, result: RunResult, timeout: float) -> None:
        """Fold the wrapper's samples into ``result.applied`` (processes, page locality,
        mismatches); a kill by the wrapper's timeout is the trial's timeout."""
        result.stderr, _, text = result.stderr.partition(READBACK_MARK + "\n")
        if result.returncode == 137 and result.elapsed >= timeout:
            result.returncode, result.timed_out = None, True
        procs = parse_readback(text)
        planned = set(self.mpi_cpuset() or ()) if self.nodes is not None else None
        mem_nodes = set(parse_cpu_list(self.membind)) if self.membind is not None else set()
        mismatches = binding_mismatches(procs, planned, mem_nodes)
        total = sum(sum(p["pages_per_node"].values()) for p in procs)
        on = sum(n for p in procs for k, n in p["pages_per_node"].items() if int(k) in mem_nodes)
        locality = (records.PageLocality(nodes=sorted(mem_nodes), on_nodes_mib=on * PAGE_MIB,
                                         total_mib=total * PAGE_MIB)
                    if mem_nodes and total else None)
        extra = {} if procs else {"unverified": "the run ended before its processes could be "
                                                "sampled: binding not verified"}
        result.applied = records.extended(result.applied, records.AppliedPlacement,
                                          processes=procs, page_locality=locality,
                                          mismatches=mismatches, **extra)
        if self.strict and mismatches and result.error is None:
            result.error = "placement mismatch (strict): " + "; ".join(mismatches)

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
