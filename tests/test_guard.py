"""The process guard of native trials: one guard process per vhpc process, a group
it watches dies with vhpc, a group it was told ``done`` about survives, a fork does not keep
the guard waiting, and a trial whose gate never opens starts nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from vhpc.environments.native.environment import GATE, run_process
from vhpc.host import owned


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(predicate, what: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def guards_of(pid: int) -> list[int]:
    """Live guard processes (``vhpc-guard`` in the command line) whose parent is ``pid``."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (d / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"\0vhpc-guard" in argv and alive(int(d.name)):
            out.append(int(d.name))
    return out


def test_trials_share_one_guard_process():
    for _ in range(3):
        r = run_process(["sh", "-c", "echo $$"], None, 30)
        assert r.returncode == 0 and r.stdout.strip().isdigit()
    assert len(guards_of(os.getpid())) == 1


def test_a_missing_executable_is_127_without_a_guard_write():
    r = run_process(["/nonexistent/vhpc-nothing"], None, 30)
    assert r.returncode == 127 and "no such executable" in r.stderr


# A stand-in for vhpc: starts three sleeps in sessions of their own; the guard watches the
# first, watched-then-done the second, and after a fork (a child that keeps running and holds
# whatever it inherited) watches the third.  Prints the pids, then waits to be killed.
OWNER = """
import os, subprocess, sys, time
from vhpc.host import owned
def sleeper():
    return subprocess.Popen(["sleep", "300"], start_new_session=True).pid
watched, done = sleeper(), sleeper()
owned.GroupGuard(watched)
owned.GroupGuard(done).done()
child = os.fork()
if child == 0:
    time.sleep(300)
    os._exit(0)
after_fork = sleeper()
owned.GroupGuard(after_fork)
print(watched, done, after_fork, child, flush=True)
time.sleep(300)
"""


def test_a_killed_owners_watched_groups_die_and_done_ones_live():
    proc = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        pids = [int(x) for x in proc.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(pids) == 4, "the owner did not start"
        watched, done, after_fork, child = pids
        assert all(alive(p) for p in pids)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        wait_until(lambda: not alive(watched) and not alive(after_fork),
                   "the guard to kill the watched groups")
        assert alive(done), "the guard killed a group it had been told was done"
        assert alive(child), "the forked child is not a trial: nothing kills it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def test_a_gate_that_never_opens_starts_nothing(tmp_path):
    mark = tmp_path / "ran"
    proc = subprocess.Popen(["/bin/sh", "-c", GATE, "vhpc-trial", "touch", str(mark)],
                            stdin=subprocess.PIPE, start_new_session=True)
    proc.stdin.close()  # type: ignore[union-attr]  # as when vhpc dies before "go"
    assert proc.wait(timeout=30) == 125
    assert not mark.exists()


def test_a_dead_guard_is_replaced():
    run_process(["true"], None, 30)
    (first,) = guards_of(os.getpid())
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not alive(first), "the guard to die")
    r = run_process(["sh", "-c", "echo ok"], None, 30)
    assert r.returncode == 0 and r.stdout.strip() == "ok"
    (second,) = guards_of(os.getpid())
    assert second != first


def test_vcluster_orphans_go_through_the_one_reaper(tmp_path):
    """vcluster's work folders and shared files are reaped by owned.reap: a dead owner's are
    removed with the processes using them, a live owner's (also one whose start time was
    unknown, ``None``) are kept."""
    from vhpc.environments.vcluster import network

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    shm = tmp_path / "shm"
    shm.mkdir()
    gone = tmp_path / f"{network.WORK_PREFIX}{dead.pid}-None-a"
    gone.mkdir()
    gone_shm = shm / f"{network.SHM_PREFIX}{dead.pid}-77-a"
    gone_shm.write_bytes(b"\0")
    kept = tmp_path / f"{network.WORK_PREFIX}{os.getpid()}-None-b"
    kept.mkdir()
    user = subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); "
                             "time.sleep(300)", str(gone_shm)], stdout=subprocess.PIPE, text=True)
    try:
        assert user.stdout.readline().strip() == "1"  # type: ignore[union-attr]
        found = network.reap_orphans(tmp_path, shm)
        assert user.wait(timeout=30) == -signal.SIGKILL
    finally:
        if user.poll() is None:
            user.kill()
            user.wait()
    assert not gone.exists() and not gone_shm.exists() and kept.exists()
    assert len(found) == 3 and all("orphaned" in line for line in found)
    assert any(str(user.pid) in line for line in found)
    assert owned.owner_alive(kept.name, network.WORK_PREFIX)


def test_a_short_trials_background_processes_die_with_it_in_any_group(tmp_path):
    """The sweep after a short trial reads only PIDs above the session's (young): a child
    left in the background, in the leader's group or in a group of its own (as Open MPI puts
    each rank), is still found and killed when the trial ends."""
    pids = tmp_path / "pids"
    script = (f"sleep 60 >/dev/null 2>&1 & echo $! >> {pids}; "
              f"{sys.executable} -c 'import subprocess as s; "
              f"p = s.Popen([\"sleep\", \"60\"], process_group=0, stdout=s.DEVNULL, "
              f"stderr=s.DEVNULL); "
              f"open(\"{pids}\", \"a\").write(f\"{{p.pid}}\\n\")'")
    r = run_process(["/bin/sh", "-c", script], None, 30)
    assert r.returncode == 0 and r.elapsed < 1.0, r.stderr
    left = [int(p) for p in pids.read_text().split()]
    assert len(left) == 2
    wait_until(lambda: not any(alive(p) for p in left), "the trial's background processes")


def test_a_trial_process_waits_for_its_exit_and_times_out_while_it_runs():
    """``wait(timeout)`` sleeps on the child's pidfd: it returns the exit status of a child
    that ended, and raises TimeoutExpired, leaving the child running, for one that did not."""
    done = owned.TrialProcess(["/bin/sh", "-c", "exit 3"])
    assert done.wait(timeout=30) == 3
    live = owned.TrialProcess(["sleep", "30"])
    try:
        try:
            live.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
        else:
            raise AssertionError("wait() returned while the child ran")
        assert live.returncode is None and alive(live.pid)
    finally:
        live.kill()
    assert live.wait(timeout=30) == -signal.SIGKILL


def test_the_sweep_reading_pids_one_by_one_finds_what_listing_proc_finds():
    """A session's members read PID by PID up to the last PID allocated are those found by
    listing /proc: the leader and a background child, in a group of the session's own."""
    leader = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & sleep 60; true"],
                              start_new_session=True)
    try:
        wait_until(lambda: len(owned.session_members(leader.pid)) == 3, "the session's three")
        last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
        by_range = owned.session_members(leader.pid, leader.pid - 1, last)
        assert sorted(by_range) == sorted(owned.session_members(leader.pid))
        assert leader.pid in by_range
    finally:
        owned.kill_session(leader.pid)
        leader.wait()


def test_a_trial_inherits_vhpcs_environment_and_adds_its_own(monkeypatch):
    """No variables of its own: the trial inherits vhpc's environment; with some, they are
    added to it."""
    monkeypatch.setenv("VHPC_TEST_INHERITED", "kept")
    script = 'echo "$VHPC_TEST_INHERITED $VHPC_TEST_ADDED"'
    assert run_process(["/bin/sh", "-c", script], None, 30).stdout == "kept \n"
    r = run_process(["/bin/sh", "-c", script], {"VHPC_TEST_ADDED": "new"}, 30)
    assert r.stdout == "kept new\n"
