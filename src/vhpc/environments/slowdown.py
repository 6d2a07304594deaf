"""An environment slowed by a known physical amount: the ``slowdown=`` option (calibration).

``native:slowdown=0.05`` or ``vm:slowdown=0.05`` wraps the environment in
:class:`ThrottledEnvironment`: every trial runs under CPU bandwidth control
(:class:`vhpc.host.cpu_bandwidth.CpuBandwidthLimit`, cgroup v1 or v2) that grants
``slowdown_cpus × period / (1 + δ)`` CPU time per period, so a workload keeping
``slowdown_cpus`` CPUs busy takes ``1 + δ`` times as long.  Native: the benchmark's process
tree joins the group before it execs (``lim.wrap(argv)``); vm: the QEMU process is moved into
the group for the trial and back to its own cgroup afterwards.

The slowdown the kernel actually applied (:attr:`ThrottleReading.applied`, and the usage-based
upper bound) is stored with each trial in its diagnostics as ``throttle`` (a dict of the
reading's fields plus ``applied`` and ``applied_from_usage``), so ``vhpc calibrate`` can
compare the recovered effect with the true one.  This is an advanced option for measuring
vhpc itself (docs/calibrate.md), not for comparing environments.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from vhpc.core import records
from vhpc.host import cpu_bandwidth
from vhpc.environments.base import Environment, EnvError, RunResult


#: CFS period for the slowdown: 10 ms (the kernel's default is 100 ms, its minimum 1 ms,
#: sched-bwc.rst); a shorter period spreads the throttling evenly over sub-second trials
PERIOD_US = 10_000


def _cgroup_home(pid: int, lim: cpu_bandwidth.CpuBandwidthLimit) -> list[Path]:
    """For each directory of ``lim``, the cgroup of the same hierarchy that ``pid`` is in now
    (from ``/proc/PID/cgroup``, cgroups(7)); [] when unreadable."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    where = {}
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        where[ctrls] = path
    home = []
    for d in lim.dirs:
        key = "" if lim.version == 2 else d.parent.name
        if key in where:
            home.append(d.parent / where[key].lstrip("/"))
    return home


def reading_dict(r: cpu_bandwidth.ThrottleReading) -> dict[str, Any]:
    """The reading's fields with ``applied`` and ``applied_from_usage`` (JSON-ready)."""
    return {**dataclasses.asdict(r), "applied": r.applied,
            "applied_from_usage": r.applied_from_usage}


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

    def __getattr__(self, name: str) -> Any:  # vcpus, placement, ... of the inner environment
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def sessions(self) -> int:  # type: ignore[override]
        return self.inner.sessions

    def benchmark_cpus(self) -> int:
        return self.inner.benchmark_cpus()

    def mpi_cpuset(self):
        return self.inner.mpi_cpuset()

    def kernel_dir(self, local, impl: str, binary: str):
        return self.inner.kernel_dir(local, impl, binary)

    @property
    def mpi_job_step(self) -> bool:  # type: ignore[override]
        return self.inner.mpi_job_step

    def leftover_record(self, tag: str):
        return self.inner.leftover_record(tag)

    def throttle_pid(self):
        return self.inner.throttle_pid()

    @property
    def accel(self) -> str | None:
        return self.inner.accel

    def fingerprint(self) -> dict[str, Any]:
        fp = dict(self.inner.fingerprint())
        fp["slowdown"] = {"requested": self.slowdown, "cpus": self.cpus}
        return fp

    def preflight(self) -> None:
        """Check (once) that a bandwidth-limited cgroup can be created here, then the inner
        environment's own preflight if it has one.  Raises :class:`EnvError`."""
        if not self._probed:
            try:
                with cpu_bandwidth.CpuBandwidthLimit(self.slowdown, self.cpus, self.period_us):
                    pass
            except cpu_bandwidth.ThrottleError as exc:
                raise EnvError(f"environment {self.name}: slowdown= needs CPU bandwidth "
                               f"control: {exc}") from None
            self._probed = True
        self.inner.preflight()

    def start(self) -> None:
        self.preflight()
        self.inner.start()

    def close(self) -> None:
        self.inner.close()

    def pause(self) -> None:
        self.inner.pause()

    def resume(self) -> None:
        self.inner.resume()

    def new_session(self) -> None:
        self.inner.new_session()

    def run(self, argv, env=None, timeout=600.0, key="") -> RunResult:
        """The inner environment's run under the bandwidth limit; the kernel's reading is added
        to the result's diagnostics as ``throttle``."""
        try:
            self.start()
        except EnvError as exc:
            return RunResult(None, "", "", 0.0, 0.0, error=str(exc))
        pid = self.inner.throttle_pid()
        with cpu_bandwidth.CpuBandwidthLimit(self.slowdown, self.cpus, self.period_us) as lim:
            if pid is None:  # the command itself runs here: it starts inside the group
                result = self.inner.run(lim.wrap(list(argv)), env, timeout, key)
            else:
                home = _cgroup_home(pid, lim)
                lim.add(pid)
                lim.start()
                try:
                    result = self.inner.run(argv, env, timeout, key)
                finally:
                    for d in home:  # back where it was, before the group is removed
                        try:
                            (d / "cgroup.procs").write_text(f"{pid}\n")
                        except OSError:
                            pass
            reading = lim.read()
        result.diagnostics = records.extended(result.diagnostics, records.Diagnostics,
                                              throttle=reading_dict(reading))
        return result
