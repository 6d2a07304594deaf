"""A known slowdown that holds under load: a cgroup-v2 freezer duty cycle (for calibration).

``slowdown=δ`` must make a trial take ``1 + δ`` times as long as it would under the same
competition for the CPU.  A CPU quota (:mod:`vhpc.host.cpu_bandwidth`) does not: it never binds
when another process on the same CPU already keeps the benchmark below the quota, so on a busy
host the injected slowdown vanishes.  Physical time taken away does hold: the group is frozen
(``cgroup.freeze``, the cgroup-v2 freezer of Linux ≥ 5.2, Documentation/admin-guide/cgroup-v2.rst
"Core Interface Files") for a share ``f = δ / (1 + δ)`` of every period and thawed for the rest,
so whatever progress rate the benchmark has while thawed, it has it for ``1 − f`` of the wall
time and its wall time grows by ``1 / (1 − f) = 1 + δ``.

A thread of this process runs the duty cycle (at the lowest real-time priority where permitted,
so that it wakes on time on a busy host; it sleeps nearly all the time): thawed ``period / (1 +
δ)``, then frozen for as long as keeps the frozen share of the elapsed time at ``f`` in the
middle of the next thawed phase (the thread's own lateness is corrected in the next period, not
accumulated).  The time actually frozen is measured
around the writes, and :class:`FreezeReading` gives the slowdown it applied, ``frozen / (wall −
frozen)``.

Groups are named ``vhpc-freeze-<pid>-<n>`` after their owner and removed on exit (thawed first);
should the owner die (``kill -9``), its guard (:class:`vhpc.host.owned.ThawGuard`) thaws the
group at once, and every later vhpc start (any command) thaws and removes the groups of dead
owners (:func:`sweep_stale`), so a daemon a trial left there never stays frozen.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from vhpc.core.errors import VhpcError
from vhpc.host.cpu_bandwidth import remove_group, sweep_groups
from vhpc.host.owned import ThawGuard

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "vhpc-freeze-"
#: duty-cycle period (s).  Long against the scheduler's slice: a task just thawed is placed
#: ahead of a co-runner that kept its CPU (it slept), so each thaw gives it a little extra CPU
#: time; with a busy loop on the benchmark's CPU and δ = 0.3, a CPU-bound loop here took 1.17×
#: as long at 5 ms, 1.26× at 50 ms (pagefault: 1.18–1.21×, vs 0.79× at 5 ms).  Short enough
#: that a trial of a second sees tens of periods.
PERIOD_S = 0.05
_counter = itertools.count()


class FreezerError(VhpcError):
    """The cgroup-v2 freezer is not available or not permitted here."""


def v2_base() -> Path | None:
    """The cgroup-v2 directory where a child group with ``cgroup.freeze`` can be made (the
    unified mount, ``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified`` on a hybrid host), else
    None.  Creates nothing."""
    for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        if (base / "cgroup.procs").exists() and (base / "cgroup.subtree_control").exists():
            return base
    return None


@dataclass(frozen=True)
class FreezeReading:
    """What the duty cycle did between :meth:`FreezerDutyCycle.start` and :meth:`stop`:
    ``wall_s`` elapsed seconds, ``frozen_s`` seconds the group was frozen, ``cycles`` periods
    run, ``requested`` the δ asked for."""

    wall_s: float
    frozen_s: float
    cycles: int
    requested: float

    @property
    def applied(self) -> float:
        """Slowdown the freezing applied, ``frozen / (wall − frozen)`` (0 when nothing ran)."""
        thawed = self.wall_s - self.frozen_s
        if self.wall_s <= 0 or thawed <= 0:
            return 0.0
        return self.frozen_s / thawed


class FreezerDutyCycle:
    """A cgroup-v2 group whose processes are frozen for the share ``δ / (1 + δ)`` of the time.

    Use as a context manager; :meth:`add` moves a process (all its threads; its future children
    inherit the group), :meth:`wrap` prefixes a command so that it joins before it execs;
    :meth:`start` starts the duty cycle, :meth:`stop` ends it (thawed) and returns a
    :class:`FreezeReading`.  Raises :class:`FreezerError` when the kernel has no cgroup-v2
    freezer or the group cannot be made (not root, read-only cgroupfs)."""

    def __init__(self, slowdown: float, period_s: float = PERIOD_S):
        if not 0 <= slowdown < 10 or not period_s > 0:
            raise FreezerError(f"slowdown must be in [0, 10) (got {slowdown})")
        self.slowdown, self.period_s = float(slowdown), float(period_s)
        self.share = self.slowdown / (1.0 + self.slowdown)
        self.name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.dir: Path | None = None
        self._guard: ThawGuard | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = self._t1 = 0.0
        self._frozen = 0.0
        self._cycles = 0
        self._lock = threading.Lock()

    def __enter__(self) -> FreezerDutyCycle:
        sweep_stale()
        base = v2_base()
        if base is None:
            raise FreezerError("no cgroup v2 hierarchy is mounted (cgroup.freeze needs it)")
        d = base / self.name
        try:
            d.mkdir()
        except OSError as exc:
            raise FreezerError(f"cannot create a cgroup in {base} ({exc.strerror}): run vhpc "
                               "as root on a host with writable cgroups") from None
        self.dir = d
        try:  # thawed by the guard should vhpc die (kill -9) while the group is frozen
            self._guard = ThawGuard(d)
        except OSError:
            self._guard = None  # no guard: the next vhpc's sweep_stale thaws it
        if not (d / "cgroup.freeze").exists():
            self.__exit__(None, None, None)
            raise FreezerError(f"this kernel ({os.uname().release}) has no cgroup v2 freezer "
                               "(cgroup.freeze, Linux 5.2 or later)")
        return self

    def add(self, pid: int) -> None:
        """Move process ``pid`` (with all its threads) into the group."""
        assert self.dir is not None
        (self.dir / "cgroup.procs").write_text(f"{pid}\n")

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` prefixed so that the command joins the group before it execs."""
        assert self.dir is not None
        procs = self.dir / "cgroup.procs"
        return ["/bin/sh", "-c", f'echo $$ > "{procs}"; exec "$@"', "vhpc-freeze", *argv]

    def _write(self, frozen: bool) -> None:
        try:
            (self.dir / "cgroup.freeze").write_text("1\n" if frozen else "0\n")
        except OSError:
            pass  # the group is being removed: nothing left to freeze

    def _run(self) -> None:
        try:  # on time on a busy host: this thread (only) at the lowest real-time priority
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO,
                                  os.sched_param(1))
        except (OSError, AttributeError):
            pass  # not permitted: the share is still kept, the periods are less even
        thawed_s = self.period_s * (1.0 - self.share)
        while not self._stop.wait(thawed_s):
            now = time.monotonic()
            with self._lock:
                # freeze for x with (frozen + x) = share · (elapsed + x + thawed / 2): the share
                # so far, however late this thread woke, aimed at the middle of the next thawed
                # phase, so that a trial ending anywhere in it gets the share on average (aimed
                # at its start, trials of three periods got 0.16-0.19 of an asked 0.2); bounded
                # so one period never freezes for long
                x = ((self.share * (now - self._t0 + thawed_s / 2) - self._frozen)
                     / (1.0 - self.share))
            x = min(max(x, 0.0), 4.0 * self.period_s * max(self.share, 0.05))
            if x <= 0:
                continue
            t1 = time.monotonic()
            self._write(True)
            self._stop.wait(x)
            self._write(False)
            with self._lock:
                self._frozen += time.monotonic() - t1
                self._cycles += 1

    def start(self) -> None:
        """Start the duty cycle (a no-op for δ = 0 but for the clock)."""
        self._t0 = time.monotonic()
        self._frozen, self._cycles = 0.0, 0
        if self.share > 0:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> FreezeReading:
        """End the duty cycle, the group thawed; the reading since :meth:`start`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.dir is not None:
            self._write(False)
        self._t1 = time.monotonic()
        return FreezeReading(self._t1 - self._t0, self._frozen, self._cycles, self.slowdown)

    def __exit__(self, *exc) -> None:
        self.stop()
        if self.dir is not None:
            remove_group(self.dir)
            self.dir = None
        if self._guard is not None:
            self._guard.done()
            self._guard = None


def sweep_stale() -> list[Path]:
    """Thaw and remove freezer groups whose owning vhpc process is dead; returns them."""
    return sweep_groups(PREFIX, (CGROUP_ROOT, CGROUP_ROOT / "unified"))
