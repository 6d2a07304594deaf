"""A known, physical slowdown: CPU bandwidth control on a process tree (for calibration).

``vhpc calibrate`` slows one of two identical environments by a known amount δ and checks that
the analysis recovers it.  The slowdown is CFS bandwidth control (the kernel's
``Documentation/scheduler/sched-bwc.rst``): a cgroup whose tasks may use at most ``quota`` µs
of CPU time per ``period`` µs, summed over CPUs.  A workload that keeps ``cpus`` CPUs busy
needs ``cpus × period`` per period; granting ``cpus × period / (1 + δ)`` stretches its wall
time by the factor ``1 + δ``.

Both cgroup versions are handled: v2 (``cpu.max``, ``cpu.stat`` with ``usage_usec`` and
``throttled_usec``) and v1 (``cpu.cfs_period_us``/``cpu.cfs_quota_us`` and ``cpu.stat``'s
``throttled_time`` in the ``cpu`` hierarchy, ``cpuacct.usage`` in the ``cpuacct`` one).

The slowdown actually applied is measured independently of the benchmark's own figures, from the
kernel's accounting: ``throttled`` is the time the group's run queues spent throttled, summed over
CPUs, so per busy CPU the workload lost ``throttled / cpus`` of its wall time and the applied
slowdown is ``wall / (wall − throttled / cpus) − 1``.  The CPU time granted (``usage``) gives a
second estimate, ``wall × cpus / usage − 1``, which also counts any other cause of lost CPU time
(another process on the same CPUs), so it is an upper bound on a shared host.

Groups are named ``vhpc-throttle-<pid>-<n>`` after their owner; :func:`sweep_stale` removes those
whose owner is dead (after a ``kill -9``), so no cgroup outlives vhpc for long.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from vhpc.core.errors import VhpcError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "vhpc-throttle-"
DEFAULT_PERIOD_US = 100_000  # CFS default period (sched-bwc.rst)
_counter = itertools.count()


class ThrottleError(VhpcError):
    """CPU bandwidth control is not available or not permitted on this host."""


@dataclass(frozen=True)
class ThrottleReading:
    """What the kernel accounted for the throttled group between :meth:`CpuBandwidthLimit.start`
    and :meth:`CpuBandwidthLimit.read`: ``wall_s`` elapsed seconds, ``usage_s`` CPU seconds
    granted, ``throttled_s`` seconds of throttling summed over CPUs, ``periods`` and
    ``throttled_periods`` (CFS periods seen / throttled), ``cpus`` the busy CPUs assumed and
    ``requested`` the δ asked for."""

    wall_s: float
    usage_s: float
    throttled_s: float
    periods: int
    throttled_periods: int
    cpus: int
    requested: float

    @property
    def applied(self) -> float:
        """Slowdown the throttling caused: ``wall / (wall − throttled / cpus) − 1`` (0 when
        nothing ran)."""
        lost = self.throttled_s / self.cpus
        if self.wall_s <= 0 or lost >= self.wall_s:
            return 0.0
        return self.wall_s / (self.wall_s - lost) - 1.0

    @property
    def applied_from_usage(self) -> float | None:
        """Estimate ``wall × cpus / usage − 1``, an upper bound for a CPU-bound workload that
        keeps at most ``cpus`` CPUs busy (not for a VM, whose emulator threads add CPU time
        beyond its vCPUs); None when the usage counter is unavailable or zero."""
        if self.usage_s <= 0:
            return None
        return self.wall_s * self.cpus / self.usage_s - 1.0


def _v2_dir() -> Path | None:
    """The cgroup-v2 directory vhpc may create groups in, when its ``cpu`` controller is
    enabled for children there; else None."""
    for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        ctl = base / "cgroup.subtree_control"
        try:
            if "cpu" in ctl.read_text().split():
                return base
        except OSError:
            continue
    return None


def _v1_dirs() -> tuple[Path, Path | None] | None:
    """(cpu, cpuacct) v1 hierarchies, cpuacct None when not mounted; None without v1 cpu."""
    cpu = next((p for p in (CGROUP_ROOT / "cpu", CGROUP_ROOT / "cpu,cpuacct")
                if (p / "cpu.cfs_quota_us").exists()), None)
    if cpu is None:
        return None
    acct = next((p for p in (CGROUP_ROOT / "cpuacct", cpu) if (p / "cpuacct.usage").exists()), None)
    return cpu, acct


def _stat(path: Path) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in (ln.split() for ln in path.read_text().splitlines() if ln)}
    except (OSError, ValueError):
        return {}


class CpuBandwidthLimit:
    """A cgroup that slows the processes put in it by the factor ``1 + slowdown``.

    ``slowdown`` δ ≥ 0 (0.05 = 5 % longer wall time for a CPU-bound workload); ``cpus`` ≥ 1 the
    number of CPUs the workload keeps busy (a VM: its vCPUs; native: its threads × ranks).
    Use as a context manager; :meth:`add` moves a process (all its threads, and its future
    children) into the group; :meth:`read` returns a :class:`ThrottleReading`.  Raises
    :class:`ThrottleError` when neither cgroup version offers CPU bandwidth control here or
    the group cannot be created (not root, read-only cgroupfs)."""

    def __init__(self, slowdown: float, cpus: int, period_us: int = DEFAULT_PERIOD_US):
        if not (0 <= slowdown < 10) or cpus < 1:
            raise ThrottleError(f"slowdown must be in [0, 10) and cpus >= 1 "
                                f"(got {slowdown}, {cpus})")
        self.slowdown, self.cpus, self.period_us = slowdown, cpus, period_us
        self.quota_us = max(1000, int(period_us * cpus / (1.0 + slowdown)))
        self.name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.dirs: list[Path] = []
        self.version = 0
        self._t0 = 0.0
        self._base: dict[str, int] = {}

    def __enter__(self) -> CpuBandwidthLimit:
        sweep_stale()
        v2 = _v2_dir()
        try:
            if v2 is not None:
                self.version, d = 2, v2 / self.name
                d.mkdir()
                self.dirs = [d]
                (d / "cpu.max").write_text(f"{self.quota_us} {self.period_us}\n")
            elif (v1 := _v1_dirs()) is not None:
                self.version = 1
                cpu, acct = v1
                self.dirs = [cpu / self.name]
                if acct is not None and acct != cpu:
                    self.dirs.append(acct / self.name)
                for d in self.dirs:
                    d.mkdir()
                (self.dirs[0] / "cpu.cfs_period_us").write_text(f"{self.period_us}\n")
                (self.dirs[0] / "cpu.cfs_quota_us").write_text(f"{self.quota_us}\n")
            else:
                raise ThrottleError("no cgroup with CPU bandwidth control (cgroup v2 'cpu' "
                                    "controller or v1 'cpu' hierarchy) on this host")
        except OSError as exc:
            self.__exit__(None, None, None)
            raise ThrottleError(f"cannot create a CPU-bandwidth cgroup ({exc.strerror}): run "
                                "vhpc as root on a host with writable cgroups") from None
        self.start()
        return self

    def add(self, pid: int) -> None:
        """Move process ``pid`` (with all its threads) into the group."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(f"{pid}\n")

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` prefixed so that the command joins the group before it execs (for commands
        another room spawns); children inherit the group."""
        joins = "; ".join(f'echo $$ > "{d / "cgroup.procs"}"' for d in self.dirs)
        return ["/bin/sh", "-c", f'{joins}; exec "$@"', "vhpc-throttle", *argv]

    def _counters(self) -> dict[str, int]:
        """usage and throttled time in ns, periods and throttled periods."""
        if self.version == 2:
            s = _stat(self.dirs[0] / "cpu.stat")
            return {"usage": s.get("usage_usec", 0) * 1000,
                    "throttled": s.get("throttled_usec", 0) * 1000,
                    "periods": s.get("nr_periods", 0), "nthr": s.get("nr_throttled", 0)}
        s = _stat(self.dirs[0] / "cpu.stat")
        usage = 0
        for d in self.dirs:
            try:
                usage = int((d / "cpuacct.usage").read_text())
                break
            except (OSError, ValueError):
                continue
        return {"usage": usage, "throttled": s.get("throttled_time", 0),
                "periods": s.get("nr_periods", 0), "nthr": s.get("nr_throttled", 0)}

    def start(self) -> None:
        """Start (or restart) the measurement window of :meth:`read`."""
        self._t0 = time.monotonic()
        self._base = self._counters()

    def read(self) -> ThrottleReading:
        """Counters accumulated since :meth:`start`."""
        now, c = time.monotonic(), self._counters()
        d = {k: c[k] - self._base.get(k, 0) for k in c}
        return ThrottleReading(wall_s=now - self._t0, usage_s=d["usage"] / 1e9,
                               throttled_s=d["throttled"] / 1e9, periods=d["periods"],
                               throttled_periods=d["nthr"], cpus=self.cpus,
                               requested=self.slowdown)

    def __exit__(self, *exc) -> None:
        for d in self.dirs:
            remove_group(d)
        self.dirs = []


def remove_group(group: Path) -> None:
    """Thaw the cgroup ``group`` (where it has ``cgroup.freeze``), move its remaining tasks to its
    parent, then remove it (best effort: errors are ignored).  Shared with
    :mod:`vhpc.host.freezer`."""
    try:
        (group / "cgroup.freeze").write_text("0\n")
    except OSError:
        pass
    try:
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                (group.parent / "cgroup.procs").write_text(pid + "\n")
            except OSError:
                pass
        group.rmdir()
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_groups(prefix: str, bases: tuple[Path, ...]) -> list[Path]:
    """Remove the groups ``<base>/<prefix><pid>-<n>`` whose owning process ``pid`` is dead
    (after a ``kill -9``); returns the removed paths.  Groups of this process and names
    without a pid are left alone."""
    removed = []
    for base in bases:
        try:
            groups = list(base.glob(prefix + "*"))
        except OSError:
            continue
        for d in groups:
            try:
                owner = int(d.name[len(prefix):].split("-")[0])
            except ValueError:
                continue
            if owner != os.getpid() and not _alive(owner):
                remove_group(d)
                if not d.exists():
                    removed.append(d)
    return removed


def sweep_stale() -> list[Path]:
    """Remove throttle groups whose owning vhpc process is dead; returns the removed paths."""
    return sweep_groups(PREFIX, (CGROUP_ROOT, CGROUP_ROOT / "unified", CGROUP_ROOT / "cpu",
                                 CGROUP_ROOT / "cpuacct", CGROUP_ROOT / "cpu,cpuacct"))
