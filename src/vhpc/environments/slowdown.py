"""An environment slowed by a known physical amount: the ``slowdown=`` option (calibration).

``native:slowdown=0.05`` or ``vm:slowdown=0.05`` wraps the environment in
:class:`ThrottledEnvironment`: every trial runs under a cgroup-v2 freezer duty cycle
(:class:`vhpc.host.freezer.FreezerDutyCycle`): frozen for the share δ/(1 + δ) of the time, so
the trial takes ``1 + δ`` times as long as it would under the same competition for its CPUs,
also when another process shares them (a busy host).  Where the kernel has no cgroup-v2
freezer, CPU bandwidth control instead (:class:`vhpc.host.cpu_bandwidth.CpuBandwidthLimit`:
``slowdown_cpus × period / (1 + δ)`` CPU time per period), which holds only when the benchmark
keeps ``slowdown_cpus`` CPUs busy by itself; :attr:`ThrottledEnvironment.preflight_note` says
so in one line before the run.  Native: the benchmark's process tree joins the group before it
execs (``wrap(argv)``); vm: the QEMU process is moved into the group for the trial and back to
its own cgroup afterwards.

The slowdown actually applied (the freezer: the share of the trial's wall time frozen; the
quota: from the kernel's throttling accounting) is stored with each trial in its diagnostics as
``throttle`` (the reading's fields plus ``applied``, and ``method``: ``freezer`` or
``cpu-quota``), so ``vhpc calibrate`` can compare the recovered effect with the true one.  This
is an advanced option for measuring vhpc itself (docs/calibrate.md), not for comparing
environments.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from vhpc.core import records
from vhpc.host import cpu_bandwidth, freezer
from vhpc.environments.base import Environment, EnvError, RunResult


#: CFS period for the slowdown: 10 ms (the kernel's default is 100 ms, its minimum 1 ms,
#: sched-bwc.rst); a shorter period spreads the throttling evenly over sub-second trials
PERIOD_US = 10_000


def _cgroup_home(pid: int, dirs: list[Path], version: int) -> list[Path]:
    """For each group directory in ``dirs`` (cgroup ``version`` 1 or 2), the cgroup of the same
    hierarchy that ``pid`` is in now (from ``/proc/PID/cgroup``, cgroups(7)); [] when
    unreadable."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    where = {}
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        where[ctrls] = path
    home = []
    for d in dirs:
        key = "" if version == 2 else d.parent.name
        if key in where:
            home.append(d.parent / where[key].lstrip("/"))
    return home


def reading_dict(r: cpu_bandwidth.ThrottleReading | freezer.FreezeReading) -> dict[str, Any]:
    """The reading's fields with ``applied`` and ``method`` (``freezer`` or ``cpu-quota``,
    whose usage-based bound ``applied_from_usage`` is added too), JSON-ready."""
    if isinstance(r, freezer.FreezeReading):
        return {**dataclasses.asdict(r), "applied": r.applied, "method": "freezer"}
    return {**dataclasses.asdict(r), "applied": r.applied,
            "applied_from_usage": r.applied_from_usage, "method": "cpu-quota"}


#: the one line said before a run where the kernel has no cgroup-v2 freezer
NO_FREEZER = ("slowdown= on {name}: {why}; CPU bandwidth control instead, which does not hold "
              "when other processes share the benchmark's CPUs (a busy host)")


class ThrottledEnvironment(Environment):
    """``inner`` with every trial slowed by ``slowdown`` (δ ≥ 0, 0.05 = 5 % longer for a
    workload keeping ``cpus`` CPUs busy; quota per ``period_us``).  Delegates everything else to ``inner`` (name, kind,
    sessions, placement).  :meth:`start` raises :class:`EnvError` when this host has no usable
    CPU bandwidth control (not root, no cgroup ``cpu`` controller)."""

    def __init__(self, inner: Environment, slowdown: float, cpus: int,
                 period_us: int = PERIOD_US):
        super().__init__(inner.name)
        if not 0 <= slowdown < 10 or cpus < 1:
            raise ValueError(f"slowdown={slowdown}, slowdown_cpus={cpus}: use 0 <= slowdown < 10"
                             " and slowdown_cpus >= 1")
        self.inner, self.slowdown, self.cpus = inner, float(slowdown), int(cpus)
        self.period_us = period_us
        self.kind = inner.kind
        self._probed = False
        #: whether the freezer duty cycle slows the trials (else the CPU quota), and the one
        #: line to say before the run when it cannot (set by :meth:`preflight`)
        self.freezer = True
        self.preflight_note = ""

    def __getattr__(self, name: str) -> Any:  # vcpus, placement, ... of the inner environment
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def sessions(self) -> int:  # type: ignore[override]
        """The wrapped environment's sessions."""
        return self.inner.sessions

    def benchmark_cpus(self) -> int:
        """The wrapped environment's (:meth:`Environment.benchmark_cpus`)."""
        return self.inner.benchmark_cpus()

    def mpi_cpuset(self):
        """The wrapped environment's (:meth:`Environment.mpi_cpuset`)."""
        return self.inner.mpi_cpuset()

    def kernel_dir(self, local, impl: str, binary: str):
        """The wrapped environment's (:meth:`Environment.kernel_dir`)."""
        return self.inner.kernel_dir(local, impl, binary)

    def stage_files(self, paths: list[str]):
        """The wrapped environment's (:meth:`Environment.stage_files`); raises what it raises."""
        return self.inner.stage_files(paths)

    def app_versions(self):
        """The wrapped environment's (:meth:`Environment.app_versions`)."""
        return self.inner.app_versions()

    @property
    def mpi_job_step(self) -> bool:  # type: ignore[override]
        """The wrapped environment's."""
        return self.inner.mpi_job_step

    def leftover_record(self, tag: str):
        """The wrapped environment's (:meth:`Environment.leftover_record`)."""
        return self.inner.leftover_record(tag)

    def throttle_pid(self):
        """The wrapped environment's (:meth:`Environment.throttle_pid`)."""
        return self.inner.throttle_pid()

    @property
    def accel(self) -> str | None:
        """The wrapped environment's accelerator (``kvm``/``tcg``, None natively)."""
        return self.inner.accel

    def fingerprint(self) -> dict[str, Any]:
        """The wrapped environment's fingerprint plus ``slowdown``: the requested δ and the CPUs
        the slowdown assumes busy."""
        fp = dict(self.inner.fingerprint())
        fp["slowdown"] = {"requested": self.slowdown, "cpus": self.cpus}
        return fp

    def preflight(self) -> None:
        """Check (once) that a freezer group can be created here, else a bandwidth-limited
        one (then :attr:`preflight_note` says why, for the caller to print before the run),
        then the inner environment's own preflight if it has one.  Raises :class:`EnvError`
        when neither can."""
        if not self._probed:
            try:
                with freezer.FreezerDutyCycle(self.slowdown):
                    pass
            except freezer.FreezerError as exc:
                self.freezer = False
                self.preflight_note = NO_FREEZER.format(name=self.name, why=exc)
                try:
                    with cpu_bandwidth.CpuBandwidthLimit(self.slowdown, self.cpus,
                                                         self.period_us):
                        pass
                except cpu_bandwidth.ThrottleError as exc2:
                    raise EnvError(f"environment {self.name}: slowdown= needs the cgroup-v2 "
                                   f"freezer ({exc}) or CPU bandwidth control ({exc2})") from None
            self._probed = True
        self.inner.preflight()

    def start(self) -> None:
        """Run :meth:`preflight` (its probe once), then start the wrapped environment.  Raises
        EnvError when this host can slow nothing."""
        self.preflight()
        self.inner.start()

    def close(self) -> None:
        """Close the wrapped environment."""
        self.inner.close()

    def pause(self) -> None:
        """Pause the wrapped environment."""
        self.inner.pause()

    def resume(self) -> None:
        """Resume the wrapped environment."""
        self.inner.resume()

    def new_session(self) -> None:
        """End the wrapped environment's session."""
        self.inner.new_session()

    def run(self, argv, env=None, timeout=600.0, key="") -> RunResult:
        """The inner environment's run under the freezer duty cycle (or the bandwidth limit);
        the reading is added to the result's diagnostics as ``throttle``."""
        try:
            self.start()
        except EnvError as exc:
            return RunResult(None, "", "", 0.0, 0.0, error=str(exc))
        pid = self.inner.throttle_pid()
        lim = freezer.FreezerDutyCycle(self.slowdown) if self.freezer else \
            cpu_bandwidth.CpuBandwidthLimit(self.slowdown, self.cpus, self.period_us)
        with lim:
            if pid is None:  # the command itself runs here: it starts inside the group
                lim.start()
                try:
                    result = self.inner.run(lim.wrap(list(argv)), env, timeout, key)
                finally:
                    reading = self._read(lim)
            else:
                home = _cgroup_home(pid, [lim.dir], 2) if self.freezer else \
                    _cgroup_home(pid, lim.dirs, lim.version)
                lim.add(pid)
                lim.start()
                try:
                    result = self.inner.run(argv, env, timeout, key)
                finally:
                    reading = self._read(lim)
                    for d in home:  # back where it was, before the group is removed
                        try:
                            (d / "cgroup.procs").write_text(f"{pid}\n")
                        except OSError:
                            pass
        result.diagnostics = records.extended(result.diagnostics, records.Diagnostics,
                                              throttle=reading_dict(reading))
        return result

    @staticmethod
    def _read(lim) -> cpu_bandwidth.ThrottleReading | freezer.FreezeReading:
        """The reading of the freezer (its duty cycle stopped, the group thawed) or the
        bandwidth limit."""
        return lim.stop() if isinstance(lim, freezer.FreezerDutyCycle) else lim.read()
