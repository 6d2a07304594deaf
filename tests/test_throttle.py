"""CPU bandwidth control on a real CPU-bound process: the group gets the quota δ asks for, the
process runs inside it, the kernel throttles it and accounts for it, and no cgroup is left
behind.  Behaviour is read from the kernel's own files (cpu.max / cfs_quota_us, cpu.stat,
/proc/PID/cgroup, wait4's rusage), never from elapsed time.

These tests create cgroups under /sys/fs/cgroup: every group they make, or that vhpc makes for
them, is removed again by the ``own_groups`` fixture (tasks moved to the parent first), even
when a test fails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhpc.host import cpu_bandwidth as throttle

from conftest import missing

CPU_S = 0.3  # CPU seconds the busy process burns (in its own process_time)
BUSY = [sys.executable, "-c",
        f"import time\nt=time.process_time()\nwhile time.process_time()-t<{CPU_S}: pass"]
BASES = (throttle.CGROUP_ROOT, throttle.CGROUP_ROOT / "cpu", throttle.CGROUP_ROOT / "cpuacct",
         throttle.CGROUP_ROOT / "cpu,cpuacct", throttle.CGROUP_ROOT / "unified")


def _groups(owner: int) -> set[Path]:
    """Throttle groups named after ``owner`` (other processes' groups are not ours to judge)."""
    out = set()
    for base in BASES:
        try:
            out.update(base.glob(f"{throttle.PREFIX}{owner}-*"))
        except OSError:
            pass
    return out


def _remove(d: Path) -> None:
    """Move ``d``'s tasks to its parent and remove it (the test's own clean-up)."""
    if not d.exists():
        return
    for pid in (d / "cgroup.procs").read_text().split():
        try:
            (d.parent / "cgroup.procs").write_text(pid + "\n")
        except OSError:  # the task has ended meanwhile
            pass
    d.rmdir()


@pytest.fixture
def own_groups():
    """Fail the test if vhpc left one of this process's groups, and remove whatever is left
    (also a group a test made by hand) so that the host's cgroup tree is as it was."""
    if not os.access(throttle.CGROUP_ROOT, os.W_OK):
        missing("CPU bandwidth control needs root and a writable /sys/fs/cgroup")
    before = _groups(os.getpid())
    made: list[Path] = []
    yield made
    left = _groups(os.getpid()) - before
    for d in sorted(left | set(made)):
        _remove(d)
    assert not left, f"cgroups left behind: {sorted(map(str, left))}"


def _quota(lim: throttle.CpuBandwidthLimit) -> tuple[int, int]:
    """(quota µs, period µs) as the kernel holds them for the group."""
    d = lim.dirs[0]
    if lim.version == 2:
        quota, period = (d / "cpu.max").read_text().split()
        return int(quota), int(period)
    return int((d / "cpu.cfs_quota_us").read_text()), int((d / "cpu.cfs_period_us").read_text())


def _cpu_stat(lim: throttle.CpuBandwidthLimit) -> dict[str, int]:
    return {k: int(v) for k, v in (ln.split() for ln in (lim.dirs[0] / "cpu.stat").read_text().splitlines())}


def _run_in(lim, argv) -> tuple[float, set[str]]:
    """Run ``lim.wrap(argv)``; returns (the process's CPU seconds from wait4, the cgroup paths
    of the cpu controller it was in while running)."""
    proc = subprocess.Popen(lim.wrap(argv), stdout=subprocess.PIPE)
    groups = set()
    try:
        for _ in range(2000):  # until the wrapper has exec'd into python (joined the group)
            try:
                text = Path(f"/proc/{proc.pid}/cgroup").read_text()
            except OSError:
                break
            groups = {ln.split(":", 2)[2] for ln in text.splitlines()
                      if ln.split(":", 2)[1] in ("", "cpu", "cpu,cpuacct")}
            if any(lim.name in g for g in groups):
                break
            time.sleep(0.005)
    finally:
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
    assert proc.returncode == 0
    return ru.ru_utime + ru.ru_stime, groups


def test_bandwidth_limit_throttles_a_busy_process_and_accounts_for_it(own_groups):
    # δ = 4 on one CPU, 10 ms periods: quota = 10000 · 1 / (1 + 4) = 2000 µs per period.  A
    # process that needs 0.3 s of CPU gets at most 2 ms per 10 ms: the kernel must throttle it,
    # however loaded the host is, unless it never got even a fifth of a CPU.
    with throttle.CpuBandwidthLimit(4.0, cpus=1, period_us=10_000) as lim:
        assert _quota(lim) == (2000, 10_000)
        assert all(d.name.startswith(f"{throttle.PREFIX}{os.getpid()}-") for d in lim.dirs)
        cpu_s, groups = _run_in(lim, BUSY)
        r = lim.read()
        raw = _cpu_stat(lim)
    assert any(g.endswith("/" + lim.name) for g in groups), groups  # it ran inside the group
    assert cpu_s >= CPU_S
    # the group's accounted CPU time is the process's own (plus the wrapper shell's exec)
    assert r.usage_s == pytest.approx(cpu_s, rel=0.1, abs=0.03)
    # the kernel throttled it, and read() reports the kernel's counters of a fresh group
    assert r.throttled_periods >= 1 and r.throttled_s > 0 and r.applied > 0
    # cpu.stat read again just after: the kernel may have closed one more period between the
    # two reads
    assert raw["nr_throttled"] - 1 <= r.throttled_periods <= raw["nr_throttled"]
    assert raw["nr_periods"] - 1 <= r.periods <= raw["nr_periods"]
    assert r.periods >= r.throttled_periods
    assert r.requested == 4.0 and r.cpus == 1
    assert not any(d.exists() for d in lim.dirs)  # removed on exit


def test_quota_follows_slowdown_and_cpus(own_groups):
    # quota = period · cpus / (1 + δ), by hand: 100000 · 2 / 1.25 = 160000; 100000 · 1 / 2 = 50000
    for delta, cpus, want in ((0.25, 2, 160_000), (1.0, 1, 50_000), (0.0, 3, 300_000)):
        with throttle.CpuBandwidthLimit(delta, cpus=cpus) as lim:
            assert _quota(lim) == (want, 100_000)


def test_unthrottled_group_applies_nothing(own_groups):
    # δ = 0: a whole CPU per period, which a single-threaded process cannot exceed
    with throttle.CpuBandwidthLimit(0.0, cpus=1) as lim:
        cpu_s, _ = _run_in(lim, [sys.executable, "-c", "sum(range(10**6))"])
        r = lim.read()
    assert r.throttled_periods == 0 and r.throttled_s == 0 and r.applied == 0.0
    assert r.usage_s == pytest.approx(cpu_s, rel=0.1, abs=0.03)


def test_stale_group_of_a_dead_owner_is_swept(own_groups):
    dead = subprocess.Popen(["true"])
    dead.wait()
    base = throttle.CGROUP_ROOT / "cpu"
    if not base.exists():
        base = throttle.CGROUP_ROOT
    stale = base / f"{throttle.PREFIX}{dead.pid}-0"
    stale.mkdir()
    own_groups.append(stale)  # removed by the fixture should the sweep not do it
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (stale / "cgroup.procs").write_text(f"{sleeper.pid}\n")
        removed = throttle.sweep_stale()
        assert stale in removed and not stale.exists()
        assert sleeper.poll() is None  # the task was moved out, not killed
        cg = Path(f"/proc/{sleeper.pid}/cgroup").read_text()
        assert stale.name not in cg
    finally:
        os.kill(sleeper.pid, signal.SIGKILL)
        sleeper.wait()


def test_bad_slowdown_is_a_user_error():
    with pytest.raises(throttle.ThrottleError, match=r"slowdown must be in \[0, 10\)"):
        throttle.CpuBandwidthLimit(-0.1, cpus=1)
    with pytest.raises(throttle.ThrottleError, match="cpus >= 1"):
        throttle.CpuBandwidthLimit(0.5, cpus=0)
