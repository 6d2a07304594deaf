"""The cgroup-v2 freezer duty cycle behind ``slowdown=`` (vhpc.host.freezer): the group is
frozen for the share δ/(1 + δ) of the time and thawed the rest, read from the kernel's own
``cgroup.events``; it is thawed and removed afterwards, also for a process still running in it;
where the kernel has none, the environment says so before the run and falls back."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from vhpc.host import freezer

from conftest import missing


@pytest.fixture
def v2():
    base = freezer.v2_base()
    if base is None or not os.access(base, os.W_OK):
        missing("the freezer needs root and a writable cgroup v2 hierarchy")
    return base


def _frozen(d) -> bool:
    events = dict(line.split() for line in (d / "cgroup.events").read_text().splitlines())
    return events.get("frozen") == "1"


def test_the_duty_cycle_freezes_the_share_asked_and_leaves_nothing(v2):
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.001)"])
    try:
        with freezer.FreezerDutyCycle(1.0) as fz:  # 2x: frozen half the time
            d = fz.dir
            fz.add(child.pid)
            assert str(child.pid) in (d / "cgroup.procs").read_text().split()
            fz.start()
            seen = []
            t_end = time.monotonic() + 1.5
            while time.monotonic() < t_end:
                seen.append(_frozen(d))
                time.sleep(0.0007)
            r = fz.stop()
            assert not _frozen(d)  # thawed when stopped
        # the kernel saw both states, about half the time each
        share = sum(seen) / len(seen)
        assert 0.25 < share < 0.75, share
        assert r.applied == pytest.approx(1.0, abs=0.15) and r.cycles >= 15  # 50 ms periods
        assert not d.exists()  # removed, the process moved out and still running
        assert child.poll() is None
        assert f"{freezer.PREFIX}" not in open(f"/proc/{child.pid}/cgroup").read()
    finally:
        child.kill()
        child.wait()


def test_a_stale_group_of_a_dead_owner_is_thawed_and_swept(v2):
    dead = _dead_pid()
    d = v2 / f"{freezer.PREFIX}{dead}-0"
    d.mkdir()
    (d / "cgroup.freeze").write_text("1\n")
    assert d in freezer.sweep_stale() and not d.exists()


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_no_freezer_is_said_before_the_run_and_the_quota_is_used(tmp_path, monkeypatch):
    from vhpc.environments.slowdown import ThrottledEnvironment
    from vhpc.spec.parse import env as env_spec

    monkeypatch.setattr(freezer, "CGROUP_ROOT", tmp_path / "none")
    with pytest.raises(freezer.FreezerError, match="no cgroup v2 hierarchy"):
        with freezer.FreezerDutyCycle(0.3):
            pass
    env = ThrottledEnvironment(env_spec("native").build(), 0.3, cpus=1)
    try:
        env.preflight()
    except Exception as exc:  # no CPU bandwidth control either: one error naming both
        assert "freezer" in str(exc) and "CPU bandwidth control" in str(exc)
        return
    finally:
        env.close()
    assert not env.freezer
    assert env.preflight_note.startswith("slowdown= on native: no cgroup v2 hierarchy")
    assert "CPU bandwidth control instead" in env.preflight_note
    assert "\n" not in env.preflight_note
