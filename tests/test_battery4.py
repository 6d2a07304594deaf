"""The fourth hostile battery: a store a reader corrupted, caches anyone could plant,
ranks that outlived their trial, inputs that escaped, flags that ran nothing, damaged stores."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from vhpc import cli
from vhpc.core.errors import VhpcError

from conftest import alive_naming, one_line, require_tool, run_cli

VHPC = [sys.executable, "-m", "vhpc.cli"]

#: A reader as a user runs one beside a campaign (``sqlite3 vhpc.db 'select ...'`` every half
#: second): while vhpc (pid argv[2]) holds the store open (its /proc fd table names the file)
#: from before a poll to after it, the poll must still find the -wal; prints how many polls
#: ran so and how many found it gone.
READER = textwrap.dedent("""
    import os, sqlite3, sys, time
    db, pid = os.path.realpath(sys.argv[1]), sys.argv[2]
    def alive():
        return os.path.exists(f"/proc/{pid}/fd")
    def holds():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return False
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == db:
                    return True
            except OSError:
                pass
        return False
    polls = gone = 0
    while alive():
        if holds():
            c = sqlite3.connect(db, timeout=5)
            c.execute("select count(*) from trials").fetchone()
            c.close()
            missing = not os.path.exists(db + "-wal")
            if holds():
                polls += 1
                gone += missing
        time.sleep(0.5)
    print(polls, gone)
""")


@pytest.mark.xdist_group("paper_reader")  # two TCG guests: started first, beside the rest
def test_a_paper_read_by_sqlite3_meanwhile_stores_every_trial(tmp_path, kernels_built):
    """Two studies in one ``vhpc paper`` with a reader polling the store every 0.5 s: every
    trial is stored, rc 0, and the WAL never vanishes while vhpc holds the store.  Before, the
    second study's open dropped the first connection's locks, the reader's close deleted the
    WAL and the paper ended "disk I/O error" with trials left pending (seed 001 shrunk to one
    small benchmark per study: the same two stores, in a minute)."""
    out = tmp_path / "out"
    paper = subprocess.Popen(
        [*VHPC, "paper", "001", "--repeats", "1", "--warmup", "0",
         "-b", "mpi-p2p=osu-latency:max_size=8,iters=10,iters_large=10",
         "-b", "linpack=linpack:n=50", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(out / "vhpc.db"),
                               str(paper.pid)], stdout=subprocess.PIPE, text=True)
    try:
        text, _ = paper.communicate(timeout=600)
    finally:
        paper.kill()
    polls, gone = map(int, reader.communicate(timeout=60)[0].split())
    assert paper.returncode == 0, text[-2000:]
    assert polls >= 10 and gone == 0, (polls, gone)
    db = sqlite3.connect(out / "vhpc.db")
    status = dict(db.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall())
    assert status == {"done": 4}, status


# ------------------------------------------------------------------ stores: damaged, foreign ids

def _custom(path: Path, command=("echo", "v 1"), envs=("native",), **probe) -> Path:
    """A campaign file at ``path``: the custom benchmark ``p`` (``command``, metric ``v``, the
    other keys of ``probe``) in ``envs``, one round, no warm-up."""
    p = {"name": "p", "command": list(command),
         "metrics": [{"name": "v", "regex": r"v (\d+)", "direction": "higher"}], **probe}
    path.write_text(yaml.safe_dump({"custom": [p], "benchmarks": ["p"], "environments": list(envs),
                                    "warmup": 0, "repeats": 1}))
    return path


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A finished native campaign of a custom benchmark: (results folder, campaign id)."""
    tmp = tmp_path_factory.mktemp("stored")
    assert cli.main(["run", str(_custom(tmp / "c.yaml", ["sh", "-c", "echo v 1"])),
                     "--out", str(tmp / "out"), "--no-report"]) == 0
    with sqlite3.connect(tmp / "out" / "vhpc.db") as db:
        (cid,) = db.execute("SELECT id FROM campaigns").fetchone()
    return tmp / "out", cid


def _copy_edited(stored, tmp_path: Path, *edits: str, args=()) -> Path:
    out = tmp_path / "out"
    shutil.copytree(stored[0], out)
    db = sqlite3.connect(out / "vhpc.db")
    for edit in edits:
        db.execute(edit, args)
    db.commit()
    db.close()
    return out


@pytest.mark.parametrize("edit", ["UPDATE trials SET started='soon'",
                                  "UPDATE meta SET value='x' WHERE key='schema_version'"])
def test_a_damaged_store_is_one_line_for_every_command(capsys, stored, tmp_path, edit):
    """Text in trials.started or a schema version 'x': one line "damaged store" (exit 2) from
    report, --resume, paper --dry-run and study --dry-run, never a TypeError/ValueError."""
    out = _copy_edited(stored, tmp_path, edit)
    cid = stored[1]
    for argv in (["report", cid], ["compare", "--resume", cid],
                 ["paper", "001", "--dry-run"], ["study", "linpack", "--dry-run"]):
        one_line(*run_cli(capsys, *argv, "--out", out)[::2], "damaged store")


def test_a_campaign_id_from_a_store_never_becomes_a_path_outside_out(capsys, stored, tmp_path):
    """A received store whose campaign id is an absolute folder: paper --from-store and report
    refuse it as damaged and write nothing there."""
    elsewhere = tmp_path / "elsewhere"
    ids = [("campaigns", "id"), ("trials", "campaign_id"), ("environments", "campaign_id")]
    out = _copy_edited(stored, tmp_path, *(f"UPDATE {t} SET {c}=?" for t, c in ids),
                       args=(str(elsewhere),))
    for argv in (["paper", "001", "--from-store"], ["report", str(elsewhere)],
                 ["list", "campaigns"]):
        one_line(*run_cli(capsys, *argv, "--out", out)[::2], "damaged store", "campaign id")
    assert not elsewhere.exists()


# ------------------------------------------------------------------------------ paper flags

@pytest.mark.parametrize("argv,needle", [
    (["004", "--executor", "bogus"], "--executor"),
    (["004", "--executor", "slurm:bogus=1"], "--executor"),
    (["001", "--host-knob", "bogus=1"], "--host-knob"),
    (["001", "--from-store"], "no vhpc store"),
])
def test_paper_with_a_flag_that_runs_nothing_exits_2_and_creates_nothing(capsys, tmp_path, argv,
                                                                        needle):
    """A bad --executor or --host-knob is refused before any study (exit 2, one line), and
    --from-store on an empty or missing folder creates no store and no page."""
    for out in (tmp_path / "missing", tmp_path):
        one_line(*run_cli(capsys, "paper", *argv, "--out", out)[::2], needle)
        assert not (out / "vhpc.db").exists() and not list(out.glob("paper-*"))


# ------------------------------------------------------------------------------ cache trust

def _lammps_campaign(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"benchmarks": ["lammps:ranks=1,atoms=256,steps=5"],
                                    "environments": ["native"], "warmup": 0, "repeats": 1}))
    return path


def test_a_planted_application_input_in_another_users_cache_never_runs(tmp_path, monkeypatch,
                                                                       capsys):
    """$VHPC_CACHE on a folder another user owns, holding a complete prepared LAMMPS input
    whose ``shell touch`` would run as root: the campaign is refused in one line before any
    trial, and the planted command never runs."""
    require_tool("lmp")
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    from vhpc.benchmarks import get
    from vhpc.benchmarks.apps import common

    cache = tmp_path / "cache"
    monkeypatch.setenv("VHPC_CACHE", str(cache))
    bench = get("lammps")
    params = bench.resolve({"ranks": 1, "atoms": 256, "steps": 5})
    folder = common.prepared("lammps", {"in.lmp": bench.input_text(params, 1)},
                             salt=shutil.which(bench.app_binary))
    marker = tmp_path / "planted"
    with open(folder / "in.lmp", "a") as f:
        f.write(f"shell touch {marker}\n")
    for p in (cache, *cache.rglob("*")):
        os.lchown(p, 12345, 12345)  # the cache and all in it: another user's
    one_line(*run_cli(capsys, "run", _lammps_campaign(tmp_path / "c.yaml"),
                      "--out", tmp_path / "out")[::2], str(cache), "belongs to uid 12345")
    assert not marker.exists()
    for p in (cache, cache / "apps"):  # the cache is ours again, the prepared folder is not
        os.lchown(p, 0, 0)
    one_line(*run_cli(capsys, "run", tmp_path / "c.yaml", "--out", tmp_path / "out")[::2],
             folder.name, "belongs to uid 12345")
    assert not marker.exists()


@pytest.mark.parametrize("cache_kind", ["apps", "kernels"])
def test_a_symlink_planted_as_a_cache_lock_is_never_followed(tmp_path, monkeypatch, cache_kind):
    """A lock file name in the cache made a symbolic link to a file of root's: refused in one
    line, and the file keeps its content (open(..., "w") truncated it to 0 bytes)."""
    from vhpc.benchmarks import base
    from vhpc.benchmarks.apps import common
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    cache = tmp_path / "cache"
    monkeypatch.setenv("VHPC_CACHE", str(cache))
    if cache_kind == "apps":
        files = {"in.x": "input\n"}
        common.prepared("probe", files)  # learn the folder's name: the lock is beside it
        (folder,) = [p for p in (cache / "apps").iterdir() if p.is_dir()]
        shutil.rmtree(folder)
        (cache / "apps" / f".{folder.name}.lock").unlink()
        (cache / "apps" / f".{folder.name}.lock").symlink_to(victim)
        with pytest.raises(VhpcError, match="lock"):
            common.prepared("probe", files)
    else:
        k = cache / "k"
        monkeypatch.setenv("VHPC_KERNELS", str(k))
        monkeypatch.setattr(base, "_make", lambda argv: pytest.fail("built through the link"))
        cache.mkdir(mode=0o700)
        (cache / ".k.lock").symlink_to(victim)
        with pytest.raises(VhpcError, match="lock"):
            base.ensure_kernels(["vhpc-stream"])
    assert victim.read_text() == "precious\n"


# ------------------------------------------------------------------------------ checks

def test_a_check_value_that_is_not_a_number_fails_the_check(tmp_path, capsys):
    """A custom check printing ``nan`` in one environment: that trial fails its check (every
    sample invalid, the reason stored); before, the value was dropped with a note, the
    environment's samples stayed valid and the findings said the trials agree."""
    from vhpc.analysis.checks import check_findings
    from vhpc.store import Store

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to tell the environments apart")
    f = _custom(tmp_path / "c.yaml",
                ["sh", "-c", "echo v 3; [ $(nproc) -gt 1 ] && echo e 5 || echo e nan"],
                envs=("native", {"native": {"name": "onecpu", "cpus": "1"}}),
                check={"name": "e", "regex": r"e (\S+)", "rtol": 0.01})
    rc, _, err = run_cli(capsys, "run", f, "--out", tmp_path / "out", "--no-report")
    store = Store(tmp_path / "out" / "vhpc.db", existing=True)
    (cid,) = [c["id"] for c in store.campaigns()]
    trials = {t.environment: t for t in store.trials(cid)}
    assert trials["native"].error is None
    assert trials["onecpu"].error.startswith("check failed: e = nan"), trials["onecpu"].error
    valid = {(o.environment, o.metric): o.valid for o in store.observations(cid)}
    assert valid == {("native", "v"): True, ("native", "e"): True, ("onecpu", "v"): False}
    bad = {o.trial_id for o in store.observations(cid) if not o.valid}
    found = {f.kind for f in check_findings(store.trials(cid), store.campaign(cid)["spec"], bad)}
    assert "check-failed" in found, found


# ------------------------------------------------------------------------------ orphans



def test_a_timed_out_or_killed_mpi_trial_leaves_no_rank_and_no_working_folder(tmp_path):
    """An ``mpi:`` trial past its timeout: every rank dies with it (Open MPI gives each rank a
    process group of its own, so killing mpirun's group left them running under init) and
    the ranks' working folders ($TMPDIR/vhpc-app-*) go; after a kill -9 of vhpc mid-trial the
    next campaign reaps the folders the dead ranks left."""
    require_tool("mpirun")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    mark = f"{os.getpid() % 1000 + 100}.{time.time_ns() % 997}"  # a sleep no one else runs
    f = _custom(tmp_path / "c.yaml", ["sh", "-c", f"sleep {mark}; echo v 1"],
                mpi={"ranks": 2}, timeout=3)
    out = tmp_path / "out"
    done = subprocess.run([*VHPC, "run", str(f), "--out", str(out), "--no-report"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]  # the trial failed: timed out
    with sqlite3.connect(out / "vhpc.db") as db:
        assert "timed out" in db.execute("SELECT error FROM trials").fetchone()[0]
    assert not alive_naming(mark)  # no rank, rankrun, shell or mpirun
    assert not list(tmpdir.glob("vhpc-app-*"))
    # kill -9 of vhpc while the ranks run: its guard kills them; their folders stay until the
    # next campaign starts, which reaps them
    f = _custom(tmp_path / "k.yaml", ["sh", "-c", f"sleep {mark}; echo v 1"],
                mpi={"ranks": 2}, timeout=300)
    proc = subprocess.Popen([*VHPC, "run", str(f), "--out", str(out), "--no-report"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(alive_naming(f"sleep\0{mark}")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(list(tmpdir.glob("vhpc-app-*"))) == 2
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while alive_naming(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive_naming(mark)
    again = subprocess.run([*VHPC, "run", str(_custom(tmp_path / "q.yaml")),
                            "--out", str(out), "--no-report"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not list(tmpdir.glob("vhpc-app-*"))


# ------------------------------------------------------------------------------ inputs, env, names

@pytest.mark.parametrize("probe,needle", [
    ({"inputs": ["/dev/zero"]}, "not a regular file or folder"),
    ({"inputs": ["src=/abs/X"]}, "does not exist"),
    ({"inputs": [{"src": "/etc/hostname", "as": "/abs/X"}]}, "one plain file name"),
    ({"inputs": [{"src": "/etc/hostname", "as": ".."}]}, "one plain file name"),
    ({"inputs": [{"src": "/etc/hostname", "to": "x"}]}, "unknown key"),
    ({"env": {"-x": "1"}}, "not a variable name"),
    ({"env": {"A=B": "1"}}, "not a variable name"),
])
def test_inputs_and_env_that_cannot_work_are_one_line(tmp_path, capsys, probe, needle):
    """/dev/zero (copied until the disk was full), a ``SRC=NAME`` that copied to /abs/X, a
    rename leaving the rank's folder, an env key rankrun took for an option: refused in one
    line before a campaign is stored, nothing written outside."""
    f = _custom(tmp_path / "c.yaml", **probe)
    one_line(*run_cli(capsys, "run", f, "--out", tmp_path / "o")[::2], needle)
    assert not (tmp_path / "o").exists()  # no store, not even an empty one
    assert not os.path.exists("/abs/X")


def test_two_custom_benchmarks_with_one_name_are_refused(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    p = {"name": "p", "command": ["echo", "v 1"],
         "metrics": [{"name": "v", "regex": r"v (\d+)", "direction": "higher"}]}
    f.write_text(yaml.safe_dump({"custom": [p, {**p, "command": ["echo", "v 2"]}],
                                 "benchmarks": ["p"], "environments": ["native"]}))
    one_line(*run_cli(capsys, "run", f, "--out", tmp_path / "o")[::2], "two benchmarks",
             "'p'")


def test_an_input_named_with_equals_and_a_path_for_the_ranks_only(tmp_path, capsys):
    """An input whose name holds ``=`` is staged as it is named, ``{src, as}`` renames one, and
    ``env: {PATH: ...}`` reaches the rank without deciding which mpirun starts."""
    require_tool("mpirun")
    (tmp_path / "rate=7.txt").write_text("v 7\n")
    (tmp_path / "other").write_text("w 8\n")
    f = _custom(tmp_path / "c.yaml",
                ["/bin/sh", "-c", "/bin/cat rate=7.txt renamed.txt; echo path=$PATH"],
                mpi={"ranks": 1}, env={"PATH": "/app/bin"},
                inputs=[str(tmp_path / "rate=7.txt"), {"src": str(tmp_path / "other"),
                                                        "as": "renamed.txt"}])
    rc, _, err = run_cli(capsys, "run", f, "--out", tmp_path / "o", "--no-report")
    assert rc == 0, err
    with sqlite3.connect(tmp_path / "o" / "vhpc.db") as db:
        (stdout, value), = db.execute("SELECT stdout, value FROM trials JOIN samples ON "
                                      "samples.trial_id=trials.id").fetchall()
    assert value == 7 and "w 8" in stdout and "path=/app/bin" in stdout, stdout


def test_a_symlink_inside_an_input_folder_that_guests_cannot_see_is_refused(tmp_path, capsys):
    """A folder input (where guests see it) holding a symbolic link into /tmp, which guests
    replace with their own: refused before anything runs, naming the link's target."""
    secret = tmp_path / "secret.dat"  # under /tmp: hidden in a guest
    secret.write_text("x\n")
    data = Path(tempfile.mkdtemp(prefix="vhpc-test-input-", dir=Path.home()))
    try:
        (data / "link.dat").symlink_to(secret)
        f = _custom(tmp_path / "c.yaml", envs=("native", "vm"), inputs=[str(data)])
        one_line(*run_cli(capsys, "run", f, "--out", tmp_path / "o")[::2], str(secret),
                 "/tmp")
        (data / "link.dat").unlink()
        (data / "link.dat").symlink_to(tmp_path / "nowhere")
        one_line(*run_cli(capsys, "run", _custom(tmp_path / "c.yaml", inputs=[str(data)]),
                          "--out", tmp_path / "o")[::2], "leads nowhere")
    finally:
        shutil.rmtree(data)


# ------------------------------------------------------------------------------ tune

def test_tune_offers_only_candidates_compare_accepts_and_stores_nothing_else(tmp_path, capsys):
    """--memory beyond the host: the unpinned candidate compare refuses ("the host has N
    MiB") is not offered, and the race stops in one line before a store exists (before, it
    stored the race, then exited 2)."""
    rc, out, _ = run_cli(capsys, "tune", "-b", "stream", "--memory", "16777216", "--dry-run")
    assert rc == 0 and "0 candidate(s)" in out and "not a candidate: float" in out, out
    one_line(*run_cli(capsys, "tune", "-b", "stream", "--memory", "16777216",
                      "--out", tmp_path / "o")[::2], "no runnable candidate")
    assert not (tmp_path / "o").exists()
