"""Broken stores, full and read-only disks, two vhpc at once, host knobs of a live campaign,
sessions after a resume.  Real files, real mounts, real concurrent processes.

Mounts (tmpfs, read-only bind) need root; without it those tests skip.  Every subprocess gets
its own VHPC_CACHE so host-knob journals of other vhpc runs on this host are never touched."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sqlite3
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhpc import analysis
from vhpc.campaign import execute as campaign
from vhpc.spec import parse as spec
from vhpc.environments.base import Environment, RunResult
from vhpc.store import Store, StoreError
from conftest import private_cache, qemu_pids
from test_campaign import StopAfter  # the Ctrl-C progress callback

VHPC = [sys.executable, "-m", "vhpc.cli"]
ROOT = os.geteuid() == 0
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def vhpc(tmp_path, *args, prefix=(), timeout=300):
    # wide tables: campaign ids must not be cut, however long the temp path (xdist adds to it)
    env = dict(os.environ, VHPC_CACHE=str(tmp_path / "cache"), COLUMNS="250")
    return subprocess.run(list(prefix) + VHPC + list(args), capture_output=True, text=True,
                          env=env, timeout=timeout)


def spawn(tmp_path, *args):
    env = dict(os.environ, VHPC_CACHE=str(tmp_path / "cache"))
    return subprocess.Popen(VHPC + list(args), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)


def one_line_error(r, *needles):
    """Exit status 2, one stderr line ``vhpc: error: ...`` holding every needle."""
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vhpc: error:"), r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def campaign_file(tmp_path, command="echo v 1", repeats=3, extra=""):
    """A native campaign of a custom benchmark ``probe`` running ``sh -c command``."""
    f = tmp_path / "c.yaml"
    f.write_text(
        "custom:\n  - name: probe\n"
        f"    command: [sh, -c, '{command}']\n"
        "    metrics: [{name: v, regex: 'v (\\d+)', unit: '1', higher_is_better: true}]\n"
        f"benchmarks: [probe]\nenvironments: [native]\nwarmup: 0\nrepeats: {repeats}\n{extra}")
    return f


def gated(tmp_path, first_free=0):
    """A shell command that prints ``v 1`` once the file ``gate`` exists; the first
    ``first_free`` runs do not wait.  Returns (command, gate path, marker folder)."""
    gate, marks = tmp_path / "gate", tmp_path / "marks"
    marks.mkdir()
    cmd = (f"n=$(ls {marks} | wc -l); touch {marks}/$$; "
           f"if [ $n -ge {first_free} ]; then while [ ! -e {gate} ]; do sleep 0.05; done; fi; "
           "echo v 1")
    return cmd, gate, marks


def wait_for(predicate, what, proc=None, limit=120):
    deadline = time.time() + limit
    while time.time() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"vhpc exited ({proc.returncode}) before {what}: {proc.stderr.read()}")
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def rows(db_path, sql, *args):
    if not Path(db_path).exists():
        return []
    db = sqlite3.connect(db_path, timeout=30)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        db.close()


def finished_campaign(tmp_path, out):
    """A finished 3-trial campaign in ``out`` (its id): a copy of one that ``vhpc run`` made
    once per worker (pytest's base temporary folder), as each test here damages its own."""
    template = tmp_path.parent / "finished-campaign"
    if not (template / "vhpc.db").exists():
        r = vhpc(tmp_path, "run", str(campaign_file(tmp_path)), "--out", str(template))
        assert r.returncode == 0, r.stderr
    shutil.copytree(template, out)
    return rows(out / "vhpc.db", "SELECT id FROM campaigns")[0][0]


@contextlib.contextmanager
def mounted(target: Path, *mount_args):
    if not ROOT:
        pytest.skip("mounting a small filesystem needs root")
    target.mkdir(exist_ok=True)
    subprocess.run(["mount", *mount_args, str(target)], check=True)
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=True)


def fill(folder: Path) -> Path:
    """Write a file in ``folder`` until the filesystem has no space left."""
    filler = folder / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


# -- damaged, unreadable, read-only, full -----------------------------------------------------

# every command on the subtlest damage (the file opens; pages fail when read), one command
# each on the others: the check is the store's, which every command opens alike
@pytest.mark.parametrize("damage,commands", [
    ("truncated", (["list", "campaigns"], ["report", "{cid}"], ["compare", "--resume", "{cid}"])),
    ("pages overwritten", (["report", "{cid}"],)),
    ("not a database", (["compare", "--resume", "{cid}"],)),
])
def test_a_damaged_store_is_a_one_line_error_naming_the_file(tmp_path, damage, commands):
    out = tmp_path / "out"
    cid = finished_campaign(tmp_path, out)
    db = out / "vhpc.db"
    c = sqlite3.connect(db)
    c.execute("SELECT COUNT(*) FROM trials").fetchall()
    c.close()  # the last connection to close checkpoints: every row is in the file now
    assert not (out / "vhpc.db-wal").exists()
    if damage == "truncated":
        os.truncate(db, 3 * 4096)
    elif damage == "pages overwritten":
        with open(db, "r+b") as f:
            f.seek(2 * 4096)
            f.write(os.urandom(4 * 4096))
    else:
        db.write_bytes(os.urandom(64 * 1024))
    for args in ([a.format(cid=cid) for a in c] for c in commands):
        line = one_line_error(vhpc(tmp_path, *args, "--out", str(out)), str(db))
        assert ("move it aside" in line) and ("malformed" in line or "not a database" in line)


def test_an_unreadable_store_is_a_one_line_error(tmp_path):
    out = tmp_path / "out"
    finished_campaign(tmp_path, out)
    # root reads anything: drop the capabilities that let it (setpriv, util-linux)
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if ROOT else []
    (out / "vhpc.db").chmod(0)
    try:
        line = one_line_error(vhpc(tmp_path, "list", "campaigns", "--out", str(out),
                                   prefix=prefix), f"cannot open {out / 'vhpc.db'}")
        assert "not readable and writable by you" in line and "chmod" in line
    finally:
        (out / "vhpc.db").chmod(0o644)
    out.chmod(0o500)
    try:
        one_line_error(vhpc(tmp_path, "run", str(campaign_file(tmp_path)), "--out", str(out),
                            prefix=prefix), f"{out} is not writable by you")
    finally:
        out.chmod(0o755)


def test_a_read_only_out_is_a_one_line_error(tmp_path):
    out = tmp_path / "out"
    cid = finished_campaign(tmp_path, out)
    with mounted(tmp_path / "ro", "--bind", str(out)) as ro:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        for args in (["run", str(campaign_file(tmp_path))], ["compare", "--resume", cid],
                     ["list", "campaigns"]):
            one_line_error(vhpc(tmp_path, *args, "--out", str(ro)), str(ro / "vhpc.db"),
                           "read-only filesystem", "pick another --out")
        one_line_error(vhpc(tmp_path, "run", str(campaign_file(tmp_path)), "--out",
                            str(ro / "new")), f"cannot create the results folder {ro / 'new'}")
    fresh = tmp_path / "immutable"
    fresh.mkdir()
    subprocess.run(["chattr", "+i", str(fresh)], check=True)
    try:
        one_line_error(vhpc(tmp_path, "run", str(campaign_file(tmp_path)), "--out", str(fresh)),
                       str(fresh / "vhpc.db"), "not writable")
    finally:
        subprocess.run(["chattr", "-i", str(fresh)], check=True)
    assert rows(out / "vhpc.db", "SELECT COUNT(*) FROM trials WHERE status='done'") == [(3,)]


def test_a_full_disk_at_creation_is_a_one_line_error(tmp_path):
    with mounted(tmp_path / "small", "-t", "tmpfs", "-o", "size=1m", "tmpfs") as small:
        fill(small)
        one_line_error(vhpc(tmp_path, "run", str(campaign_file(tmp_path)), "--out",
                            str(small / "out")), "is full", str(small / "out" / "vhpc.db"))


def test_a_full_disk_stops_the_campaign_as_interrupted_and_it_resumes(tmp_path):
    cmd, gate, marks = gated(tmp_path, first_free=1)
    cfile = campaign_file(tmp_path, cmd, repeats=3)
    with mounted(tmp_path / "small", "-t", "tmpfs", "-o", "size=2m", "tmpfs") as small:
        out = small / "out"
        db = out / "vhpc.db"
        proc = spawn(tmp_path, "run", str(cfile), "--out", str(out))
        # trial 1 is stored, trial 2 waits at the gate: now the disk fills up
        wait_for(lambda: rows(db, "SELECT COUNT(*) FROM trials WHERE status='done'") == [(1,)]
                 and len(list(marks.iterdir())) == 2, "the first trial", proc)
        before = rows(db, "SELECT id, started FROM trials WHERE status='done'")
        filler = fill(small)
        gate.touch()
        _, err = proc.communicate(timeout=120)
        r = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
        cid = rows(db, "SELECT id FROM campaigns")[0][0]
        one_line_error(r, f"the disk holding {db} is full", f"--resume {cid}")
        filler.unlink()
        listing = vhpc(tmp_path, "list", "campaigns", "--out", str(out))
        assert cid in listing.stdout and "interrupted" in listing.stdout
        assert "running" not in listing.stdout.split(cid)[1].splitlines()[0]
        r = vhpc(tmp_path, "compare", "--resume", cid, "--no-report", "--out", str(out))
        assert r.returncode == 0, r.stderr
        assert rows(db, "SELECT status FROM campaigns") == [("finished",)]
        assert rows(db, "SELECT status, COUNT(*) FROM trials GROUP BY status") == [("done", 3)]
        after = dict(rows(db, "SELECT id, started FROM trials"))
        assert all(after[tid] == started for tid, started in before)  # not re-run
        assert rows(db, "SELECT COUNT(*) FROM samples") == [(3,)]


# -- two processes at once --------------------------------------------------------------------

def test_processes_racing_to_create_a_fresh_store_all_succeed(tmp_path):
    code = ("import os, sys, time\n"
            "from vhpc.store import Store\n"
            "print('ready', flush=True)\n"
            "while not os.path.exists(sys.argv[2]): time.sleep(0.001)\n"
            "Store(sys.argv[1]).campaigns()\n")
    for attempt in range(5):
        db, go = tmp_path / f"s{attempt}" / "vhpc.db", tmp_path / f"go{attempt}"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(db), str(go)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(6)]
        for p in procs:  # a barrier: each has imported vhpc and is spinning on the start signal
            assert p.stdout.readline() == "ready\n", p.communicate(timeout=120)[1]
        go.touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        assert rows(db, "SELECT * FROM meta") == [("schema_version", "1")]


def test_two_vhpc_on_a_fresh_out_both_run(tmp_path):
    cfile = campaign_file(tmp_path, repeats=2)
    procs = [spawn(tmp_path, "run", str(cfile), "--out", str(tmp_path / "out")) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    db = tmp_path / "out" / "vhpc.db"
    assert rows(db, "SELECT COUNT(*), SUM(status='finished') FROM campaigns") == [(2, 2)]
    assert rows(db, "SELECT COUNT(*) FROM trials WHERE status='done'") == [(4,)]


def test_a_running_campaign_has_one_owner_and_a_dead_owner_is_taken_over(tmp_path):
    cmd, gate, marks = gated(tmp_path, first_free=1)
    out = tmp_path / "out"
    db = out / "vhpc.db"
    first = spawn(tmp_path, "run", str(campaign_file(tmp_path, cmd, repeats=3)), "--out", str(out))
    wait_for(lambda: len(list(marks.iterdir())) == 2, "the second trial", first)
    cid = rows(db, "SELECT id FROM campaigns")[0][0]
    assert rows(db, "SELECT pid FROM owners") == [(first.pid,)]
    second = vhpc(tmp_path, "compare", "--resume", cid, "--out", str(out))
    one_line_error(second, f"campaign {cid} is being run by pid {first.pid} on ", "kill")
    assert "running" in vhpc(tmp_path, "list", "campaigns", "--out", str(out)).stdout
    assert len(list(marks.iterdir())) == 2  # the refused resume ran nothing

    first.send_signal(signal.SIGKILL)
    first.wait()
    assert "interrupted" in vhpc(tmp_path, "list", "campaigns", "--out", str(out)).stdout
    gate.touch()
    third = vhpc(tmp_path, "compare", "--resume", cid, "--no-report", "--out", str(out))
    assert third.returncode == 0, third.stderr
    assert f"left by pid {first.pid} on" in third.stderr and "taking it over" in third.stderr
    # trial 1 ran once, trial 2 was killed and re-run once, trial 3 ran once
    assert rows(db, "SELECT seq, status, attempts FROM trials ORDER BY seq") == [
        (0, "done", 1), (1, "done", 2), (2, "done", 1)]
    assert rows(db, "SELECT COUNT(*) FROM owners") == [(0,)]
    assert rows(db, "SELECT status FROM campaigns") == [("finished",)]


def test_one_process_cannot_own_a_campaign_twice(tmp_path):
    s = spec.from_file(campaign_file(tmp_path, repeats=1))
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    other = Store(tmp_path / "vhpc.db")
    with store.own(cid):
        assert other.is_owned(cid) and other.campaign(cid)["status"] == "running"
        with pytest.raises(StoreError, match=f"being run by pid {os.getpid()}"):
            campaign.execute(other, cid)
    assert store.campaign(cid)["status"] == "interrupted"  # no owner any more
    campaign.execute(other, cid)
    assert store.campaign(cid)["status"] == "finished"


# -- host knobs of a live campaign ------------------------------------------------------------

@pytest.fixture
def real_thp():
    """The host's THP mode, saved before and written back after the test whatever happens (the
    test changes it through vhpc, which must restore it itself: asserted in the test)."""
    if not (ROOT and THP.exists()):
        pytest.skip("needs root and /sys/kernel/mm/transparent_hugepage")
    original = THP.read_text().split("[")[1].split("]")[0]
    try:
        yield original
    finally:
        if f"[{original}]" not in THP.read_text():
            THP.write_text(original)


# Alone, after the parallel pass: every vhpc start restores a dead owner's host knobs, so another
# worker's vhpc restored the killed campaign's THP before this test's own start could (and say
# whose it was): seen once in a full make test.
@pytest.mark.serial
def test_another_vhpc_start_leaves_a_live_campaigns_thp_alone(tmp_path, real_thp):
    original = real_thp
    value = "never" if original != "never" else "madvise"
    cmd, gate, marks = gated(tmp_path)
    cfile = campaign_file(tmp_path, cmd, repeats=1, extra=f"host_knobs: {{thp: {value}}}\n")
    proc = spawn(tmp_path, "run", str(cfile), "--out", str(tmp_path / "out"))
    try:
        wait_for(lambda: any(marks.iterdir()), "the trial", proc)
        assert f"[{value}]" in THP.read_text()
        r = vhpc(tmp_path, "list", "benchmarks")
        assert r.returncode == 0 and "restored" not in r.stderr, r.stderr
        assert f"[{value}]" in THP.read_text()  # still the campaign's setting
        gate.touch()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            gate.touch()
            proc.wait(timeout=120)
    assert f"[{original}]" in THP.read_text()  # restored when the campaign ended

    # a campaign killed with its knob applied: the next vhpc start restores it, and says whose
    gate.unlink()
    for m in marks.iterdir():
        m.unlink()
    proc = spawn(tmp_path, "run", str(cfile), "--out", str(tmp_path / "out"))
    try:
        wait_for(lambda: any(marks.iterdir()), "the trial", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert f"[{value}]" in THP.read_text()
        r = vhpc(tmp_path, "list", "benchmarks")
        assert f"left changed by vhpc pid {proc.pid} on " in r.stderr, r.stderr
        assert f"{THP}={original}" in r.stderr and "no longer running" in r.stderr
        assert f"[{original}]" in THP.read_text()
    finally:
        gate.touch()  # lets the orphaned benchmark command end


# -- sessions after a resume ------------------------------------------------------------------

class FakeVm(Environment):
    """Sessions as :class:`VmEnvironment` counts them (a boot on the first run after close,
    ``session_index`` per trial kind), the command run on the host: no QEMU needed."""

    kind = "vm"

    def __init__(self, name="vm", die_after=None):
        super().__init__(name)
        self.sessions, self.up, self.counts, self.die_after, self.runs = 0, False, {}, die_after, 0

    def fingerprint(self):
        return {"kind": "vm"}

    def close(self):
        self.up = False

    def new_session(self):
        self.close()

    def run(self, argv, env=None, timeout=600.0, key=""):
        if not self.up:
            self.up, self.counts = True, {}
            self.sessions += 1
        index = self.counts.get(key, 0)
        self.counts[key] = index + 1
        self.runs += 1
        r = subprocess.run(argv, capture_output=True, text=True)
        if self.runs == self.die_after:
            self.close()  # the guest died after this trial
        return RunResult(r.returncode, r.stdout, r.stderr, time.time(), 0.0, session_index=index)


def groups(store, cid):
    result = analysis.analyse(store.observations(cid), store.environments(cid), "native")
    return {(s.environment, s.group): s.n for s in result.summaries}


def warm_spec(tmp_path):
    f = campaign_file(tmp_path, repeats=3)
    f.write_text(f.read_text().replace("environments: [native]", "environments: [native, vm]")
                 .replace("warmup: 0", "warmup: 1"))
    return spec.from_file(f)


def test_the_first_trial_after_a_resume_reboot_is_labelled_and_not_a_cold_group(tmp_path):
    from vhpc.environments.native.environment import NativeEnvironment

    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, warm_spec(tmp_path))
    with pytest.raises(KeyboardInterrupt):  # stopped after warm-up and one measured round
        campaign.execute(store, cid, StopAfter(4),
                         envs={"native": NativeEnvironment("native"), "vm": FakeVm()})
    assert store.campaign(cid)["status"] == "interrupted"
    campaign.execute(store, cid, envs={"native": NativeEnvironment("native"), "vm": FakeVm()})
    trials = store.trials(cid)
    assert [(t.seq, t.environment, t.session_index) for t in trials if t.reboot] == [(5, "vm", 0)]
    assert [t.environment for t in trials] == ["native", "vm", "vm", "native", "native", "vm", "vm", "native"]
    g = groups(store, cid)
    assert ("vm", "cold") not in g  # the warm campaign grows no cold group ...
    assert g[("vm", "warm")] == 2 and g[("vm", "all")] == 2  # ... and the re-boot trial is out
    assert g[("native", "all")] == 3


class BootsBeforeTheTrial(FakeVm):
    """A guest reached, and booted if down, in the steps before a trial (as an image guest is
    while its inputs are copied, and rebooted there when it hangs)."""

    def stage_files(self, paths):
        if not self.up:
            self.up, self.counts = True, {}
            self.sessions += 1
        return None


@pytest.mark.parametrize("vm", [FakeVm, BootsBeforeTheTrial], ids=["in-run", "before-run"])
def test_a_guest_that_died_reboots_into_a_labelled_trial(tmp_path, vm):
    """The guest dies after its second trial; the session that replaces it, booted by the
    trial itself or in the steps before it, begins with a trial stored as ``reboot``."""
    from vhpc.environments.native.environment import NativeEnvironment

    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, warm_spec(tmp_path))
    campaign.execute(store, cid, envs={"native": NativeEnvironment("native"),
                                       "vm": vm(die_after=2)})
    vm = [(t.round, t.session_index, t.reboot) for t in store.trials(cid) if t.environment == "vm"]
    assert vm == [(0, 0, False), (1, 1, False), (2, 0, True), (3, 1, False)]
    assert ("vm", "cold") not in groups(store, cid)


def test_a_cold_warm_campaign_keeps_its_planned_cold_trials(tmp_path):
    from vhpc.environments.native.environment import NativeEnvironment

    s = spec.from_file(campaign_file(tmp_path, repeats=2)).model_copy(
        update={"protocol": "cold-warm", "session_trials": 2})
    s = spec.CampaignSpec.model_validate({**s.model_dump(), "environments": [
        e.model_dump() for e in warm_spec(tmp_path).environments]})
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid, envs={"native": NativeEnvironment("native"), "vm": FakeVm()})
    assert not any(t.reboot for t in store.trials(cid))
    assert groups(store, cid)[("vm", "cold")] == 2


def test_kill_and_resume_of_a_warm_vm_campaign_labels_the_reboot_trial(tmp_path, kernels_built,
                                                                       no_qemu_leak,
                                                                       kvm_probe_answer):
    """The real thing: a QEMU guest, vhpc SIGKILLed between two trials of its warm guest, then
    resumed.  The guest dies with vhpc, not at the next start; the resume runs exactly the
    trials that did not finish (nothing lost, nothing twice) and labels its first VM trial a
    reboot.  The benchmark waits at the gate only on the host (the guest's /tmp is its own, so
    the marks folder does not exist there)."""
    private_cache(tmp_path / "cache", kvm_probe_answer)  # vhpc()'s and spawn()'s cache
    before = qemu_pids()
    cmd, gate, marks = gated(tmp_path, first_free=1)
    cmd = f"if [ -d {marks} ]; then {cmd}; else echo v 1; fi"
    f = campaign_file(tmp_path, cmd, repeats=2)
    f.write_text(f.read_text().replace("environments: [native]",
                                       "environments: [native, 'vm:memory=512']")
                 .replace("warmup: 0", "warmup: 1"))
    out = tmp_path / "out"
    db = out / "vhpc.db"
    proc = spawn(tmp_path, "run", str(f), "--out", str(out))
    # plan: native(w) vm(w) | vm native | native vm; the native trial of round 1 waits
    wait_for(lambda: len(list(marks.iterdir())) == 2, "the measured native trial", proc, 600)
    assert rows(db, "SELECT seq FROM trials WHERE status='done' ORDER BY seq") == [(0,), (1,), (2,)]
    finished = dict(rows(db, "SELECT id, started FROM trials WHERE status='done'"))
    assert qemu_pids() - before, "the warm guest is not running"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # QEMU dies with vhpc (PR_SET_PDEATHSIG): an orphaned guest would be counted here
    wait_for(lambda: not qemu_pids() - before, "the guest to die with vhpc", limit=10)
    gate.touch()
    cid = rows(db, "SELECT id FROM campaigns")[0][0]
    r = vhpc(tmp_path, "compare", "--resume", cid, "--no-report", "--out", str(out), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert rows(db, "SELECT seq, environment, session_index, reboot FROM trials "
                    "WHERE environment LIKE 'vm%' ORDER BY seq") == [
        (1, "vm", 0, 0), (2, "vm", 1, 0), (5, "vm", 0, 1)]
    store = Store(db)
    trials = store.trials(cid)
    assert len(trials) == 6 and all(t.status == "done" for t in trials)
    assert all(t.started == finished[t.id] for t in trials if t.id in finished)  # not run again
    obs = store.observations(cid)
    assert len({(o.trial_id, o.metric) for o in obs}) == len(obs)  # nothing twice
    assert {o.trial_id for o in obs} == {t.id for t in trials}  # nothing lost
    g = groups(store, cid)
    assert ("vm", "cold") not in g and g[("vm", "all")] == 1 and g[("vm", "warm")] == 1
