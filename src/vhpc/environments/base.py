"""The environment interface shared by ``native`` and ``vm``.

An :class:`Environment` is used as a context manager by the campaign::

    with env:                      # start(): nothing for native, boots a VM for vm
        r = env.run(argv, env={}, timeout=60.0)
        env.pause(); env.resume()  # a paused VM neither perturbs others nor loses warm state
        env.new_session()          # cold protocol: a fresh boot
    # close(): always stops every process the environment started
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from vhpc.benchmarks.apps.common import host_app_versions
from vhpc.core.errors import VhpcError
from vhpc.core.records import AppliedPlacement, Diagnostics


class EnvError(VhpcError, RuntimeError):
    """An environment cannot be started or used; the message says what to change."""


@dataclass
class RunResult:
    """Outcome of one command in an environment.

    returncode: exit status (None when the command never completed: timeout or guest failure);
    stdout/stderr: decoded output; started: epoch seconds; elapsed: wall seconds;
    timed_out: the per-trial timeout fired; error: environment-level failure text (guest hung or
    died, with the console tail), None when the environment itself was fine;
    session_index: trial position in the current session (VM: 0 = first after boot);
    applied: placement as applied and read back (:class:`vhpc.core.records.AppliedPlacement`);
    diagnostics: per-trial counters (:class:`vhpc.core.records.Diagnostics`: resource usage,
    faults, vmstat deltas, perf counts, and why any is unavailable).
    """

    returncode: int | None
    stdout: str
    stderr: str
    started: float
    elapsed: float
    timed_out: bool = False
    error: str | None = None
    session_index: int | None = None
    applied: AppliedPlacement | None = None
    diagnostics: Diagnostics | None = None

    @property
    def ok(self) -> bool:
        """True when the command ran to completion with exit status 0."""
        return self.returncode == 0 and not self.timed_out and self.error is None


class Environment(ABC):
    """Where a benchmark runs.  ``name`` is unique in a campaign; ``kind`` is the name its
    kind registered under (set by :func:`vhpc.environments.kind.build` from the registry, empty
    for an environment built by hand).

    What an environment can do is asked through the attributes and methods below (each with a
    default), never by comparing ``kind`` with a name: ``mpi_job_step``,
    :meth:`leftover_record`, :meth:`throttle_pid`."""

    kind: str = ""
    #: Its MPI commands run on the executor's node itself, so an executor with its own MPI
    #: launcher (Slurm's ``srun --mpi=pmix``) may launch them as a job step across its nodes.
    mpi_job_step: bool = False
    #: Its guests may be spread over an executor's compute nodes (the executor then hands it
    #: remote members built from its ``node_shares()``: :meth:`VclusterEnvironment.attach_nodes`);
    #: runs on one host otherwise.
    spans_nodes: bool = False

    def __init__(self, name: str):
        self.name = name

    @property
    def accel(self) -> str | None:
        """``kvm``/``tcg`` for VMs, None for native."""
        return None

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """What identifies this environment's results: CPU model, kernels, QEMU version,
        accelerator, placement as configured, host knobs.  JSON-serialisable."""

    def start(self) -> None:
        """Prepare the environment (boot a VM); idempotent."""

    def close(self) -> None:
        """Stop everything this environment started; safe to call twice."""

    def pause(self) -> None:
        """Stop consuming CPU while other environments run (VM: QMP ``stop``)."""

    def resume(self) -> None:
        """Undo :meth:`pause`."""

    def new_session(self) -> None:
        """End the session so the next trial starts a fresh one (VM: reboot) and is cold."""

    #: Sessions started so far (a VM counts its boots; environments without sessions stay 0).
    sessions: int = 0
    #: Told the name of each stage of a long preparation as it begins (an image's check,
    #: kernel copy and first boot), for a progress display; None: nobody listens.
    stage_hook: Callable[[str], None] | None = None

    def stage(self, what: str) -> None:
        """Say that the stage ``what`` of a long preparation begins (:attr:`stage_hook`)."""
        if self.stage_hook is not None:
            self.stage_hook(what)

    def preflight(self) -> None:
        """Check, before a campaign is stored, that this environment can run here (ssh: the
        host answers; slowdown: a cgroup can be limited).  Raises a VhpcError subclass."""

    def app_versions(self) -> dict[str, str] | None:
        """Versions of the applications vhpc runs (LAMMPS, GROMACS) as the trials here find
        them (:func:`vhpc.benchmarks.apps.common.app_versions`), None when unknown before the
        trials run.  Default: this host's (native, and vhpc's own guests, which share its
        root)."""
        return host_app_versions()

    def benchmark_cpus(self) -> int:
        """CPUs a benchmark may use here: vCPUs in a VM, MPI ranks across a vcluster's guests,
        allowed CPUs natively (sched_getaffinity(2) of this process by default)."""
        return len(os.sched_getaffinity(0))

    def mpi_cpuset(self) -> tuple[int, ...] | None:
        """Host CPUs an MPI launch should bind its ranks to (native with ``cpus=``/``nodes=``),
        or None to let MPI choose."""
        return None

    def leftover_record(self, tag: str) -> dict[str, Any] | None:
        """What a killed run of this environment may leave behind that the next run must clean
        (ssh: the remote process groups of this campaign's trials, which it names after
        ``tag``, the campaign id, from now on), as a JSON-serialisable dict with ``kind`` set;
        None (the default) when nothing can outlive vhpc's own process group.  The campaign
        stores it before the first trial and hands it back to
        :meth:`EnvironmentKind.clean_leftover` on resume."""
        return None

    def throttle_pid(self) -> int | None:
        """The host process whose CPU time is this environment's work, for a CPU bandwidth
        limit (VM: the hypervisor process), or None when the limit wraps each command instead
        (native) or cannot reach it (remote hosts)."""
        return None

    def kernel_dir(self, local: Path | None, impl: str, binary: str) -> Path | None:
        """Directory of the kernel binaries as this environment sees them: ``local`` (the
        host's build) by default; ``ssh`` builds them on the remote host."""
        return local

    def stage_files(self, paths: list[str]):
        """Make the host files and folders ``paths`` (a benchmark's inputs:
        :meth:`~vhpc.benchmarks.base.Benchmark.copied_inputs`) readable where this
        environment's trials run; returns a :class:`~vhpc.benchmarks.base.Remote` saying where
        they and ``rankrun.py`` lie there, or None (the default) when trials see this host's
        file system (native, vhpc's own guests).  Raises EnvError when a copy fails."""
        return None

    @abstractmethod
    def run(self, argv: list[str], env: dict[str, str] | None = None,
            timeout: float = 600.0, key: str = "") -> RunResult:
        """Run ``argv`` (a list, never a shell string) with extra ``env`` vars, killing it after
        ``timeout`` seconds.  ``key`` names the kind of trial (benchmark + parameters) so an
        environment with sessions can number repeated trials.  Never raises for a failing
        command: failures are in the result."""

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def now() -> float:
    """Epoch seconds (for trial start/end times)."""
    return time.time()
