"""Hostile input, killed runs and untrusted files: one test per finding of the
second battery.  Real CLI runs (in-process where nothing is killed, subprocesses where vhpc
is), real files and processes; Slurm faults use stand-in Slurm commands on PATH, the
capacity check a real one-node cluster.  No timing asserts: waits are bounded polls."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from vhpc.core.errors import VhpcError
from vhpc.environments.vcluster import network as vclusternet
from vhpc.host import owned
from vhpc.spec import parse as spec

from conftest import custom_file, fake_slurm, one_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
VHPC = [sys.executable, "-m", "vhpc.cli"]


# ------------------------------------------------------------------------------ helpers

def wait_for(predicate, what: str, limit: float = 180, proc=None) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"vhpc ended ({proc.returncode}) before {what}: "
                                 f"{proc.stderr.read()[-2000:] if proc.stderr else ''}")
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def naming(text: str) -> list[int]:
    """PIDs of live processes whose command line mentions ``text``."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if text.encode() in (d / "cmdline").read_bytes() and int(d.name) != os.getpid():
                out.append(int(d.name))
        except OSError:
            pass
    return [p for p in out if alive(p)]


# ------------------------------------------------------------ parsing: one line, exit 2

@pytest.mark.parametrize("text,needle", [
    ("1: 2\nbenchmarks: [stream]\nenvironments: [native]\n", "key 1"),
    ("benchmarks: [{stream: {1: 2}}]\nenvironments: [native]\n", "key 1"),
    ("benchmarks: [stream]\nenvironments: [{native: {null: 0}}]\n", "key None"),
    ("yes: 1\nbenchmarks: [stream]\nenvironments: [native]\n", "key True"),
    ("benchmarks: [stream]\nenvironments: [native]\nrepeats: " + "9" * 40 + "\n",
     "out of range"),
    ("benchmarks: [{stream: {n: " + "9" * 30 + "}}]\nenvironments: [native]\n", "out of range"),
    ('benchmarks: ["stream:n=\\u0661\\u0662"]\nenvironments: [native]\n', "ASCII"),
    ("benchmarks: [{stream: {n: '１０００'}}]\nenvironments: [native]\n", "ASCII"),
    ("benchmarks: [stream]\nenvironments: ['native:cpus=０']\n", "ASCII"),
    ("benchmarks: [stream]\nenvironments: [{native: {cpus: '０-1'}}]\n", "ASCII"),
    ("benchmarks: [stream]\nenvironments: [native]\nexecutor: 'slurm:nodes=１２'\n", "ASCII"),
    ('benchmarks: [stream]\nenvironments: ["native:name=a\\0b"]\n', "NUL"),
])
def test_hostile_campaign_files_are_one_line_errors(capsys, tmp_path, text, needle):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    one_line(*run_cli(capsys, "run", "--dry-run", f)[::2], needle)


def test_nul_in_a_custom_command_or_env_is_refused_at_parsing(capsys, tmp_path):
    for extra in ({"command": ["sh", "-c", "echo v 1\0rm -rf /"]},
                  {"command": "echo\0v 1"},
                  {"command": ["sh", "-c", "echo v 1"], "env": {"X": "a\0b"}}):
        f = custom_file(tmp_path / "c.yaml", **extra)
        with pytest.raises(VhpcError, match="NUL"):
            spec.from_file(f)
        one_line(*run_cli(capsys, "run", "--dry-run", f)[::2], "NUL")
        one_line(*run_cli(capsys, "run", f, "--out", tmp_path / "o")[::2], "NUL")
    assert not (tmp_path / "o" / "vhpc.db").exists() or not sqlite3.connect(
        tmp_path / "o" / "vhpc.db").execute("SELECT * FROM campaigns").fetchall()


@pytest.mark.parametrize("argv,needle", [
    (["plan", "--vcpus", "99999999999999999999"], "out of range"),
    (["plan", "--vcpus", "１２"], "ASCII"),
    (["compare", "--dry-run", "-b", "stream", "-e", "native", "-e",
      "vm:vcpus=99999999999999999999"], "vcpus"),
    (["compare", "--dry-run", "-b", "stream", "-e", "native:cpus=0-99999999999"], "beyond"),
    (["compare", "--dry-run", "-b", "stream:n=１０００", "-e", "native"], "ASCII"),
    (["compare", "--dry-run", "-b", "stream", "-e", "native", "--repeats", "３"], "repeats"),
    (["compare", "--dry-run", "-b", "stream", "-e", "vm:policy=span:２"], "ASCII"),
    (["compare", "--dry-run", "-b", "stream", "-e", "native", "--host-knob",
      "hugepages_2m=１２"], "allowed values"),
])
def test_huge_and_non_ascii_numbers_are_bounded_before_allocation(capsys, argv, needle):
    one_line(*run_cli(capsys, *argv)[::2], needle)


def test_a_huge_vcpu_in_a_domain_xml_is_refused_before_allocation(tmp_path):
    from vhpc.environments.vm.backends.libvirt_xml import DomainXmlError, parse_user_xml

    for vcpu, cells in (("99999999999999999999", ""),
                        ("2", "<cpu><numa><cell id='0' cpus='0-99999999999' memory='256' "
                              "unit='MiB'/></numa></cpu>")):
        text = (f"<domain type='qemu'><name>x</name><vcpu>{vcpu}</vcpu>"
                f"<memory unit='MiB'>256</memory>{cells}</domain>")
        with pytest.raises(DomainXmlError, match="out of range|beyond"):
            parse_user_xml(text, "d.xml")


def test_slurm_nodes_accept_ascii_digits_only():
    from vhpc import executors

    assert executors.parse("slurm:nodes=12").options.nodes == 12
    for bad in ("１２", "٣", "1_2", " 12x"):
        with pytest.raises(VhpcError, match="ASCII"):
            executors.parse(f"slurm:nodes={bad}")


# ----------------------------------------------------- reports and damaged stores

def test_an_unwritable_report_path_is_refused_before_any_work(capsys, finished, tmp_path):
    out, cid = finished
    for flag, path, needle in (("--html", "/nonexistent/x.html", "does not exist"),
                               ("--csv", tmp_path, "is a folder"),
                               ("--json", "/etc/passwd/x.json", "does not exist")):
        before = sorted(p.name for p in (out / cid).iterdir())
        one_line(*run_cli(capsys, "report", cid, "--out", out, flag, path)[::2], flag, needle)
        assert sorted(p.name for p in (out / cid).iterdir()) == before  # nothing written


@pytest.mark.parametrize("edit,needle,commands", [
    ("UPDATE campaigns SET spec_json='{not json'", "campaigns", ("report", "resume")),
    ("UPDATE campaigns SET spec_json=json_set(spec_json, '$.baseline', 7)", "baseline",
     ("report", "resume")),
    ("UPDATE campaigns SET spec_json=json_set(spec_json, '$.repeats', -3)", "repeats",
     ("resume",)),
    ("UPDATE samples SET value='many'", "samples", ("report",)),
    ("UPDATE environments SET fingerprint_json='[oops'", "environments", ("report",)),
    ("UPDATE trials SET environment='elsewhere', status='pending'", "trials", ("resume",)),
])
def test_a_store_edited_by_hand_is_named_damaged(capsys, finished, tmp_path, edit, needle,
                                                 commands):
    import shutil

    out, cid = finished
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    db = sqlite3.connect(copy / "vhpc.db")
    db.execute(edit)
    db.commit()
    db.close()
    saved = sqlite3.connect(copy / "vhpc.db").execute("SELECT COUNT(*) FROM samples").fetchone()
    for name in commands:
        argv = ["report", cid] if name == "report" else ["compare", "--resume", cid]
        one_line(*run_cli(capsys, *argv, "--out", copy)[::2], "damaged store",
                 needle)
    # nothing measured is lost
    assert sqlite3.connect(copy / "vhpc.db").execute(
        "SELECT COUNT(*) FROM samples").fetchone() == saved


# ------------------------------------------------------------------ custom timeout

def test_a_custom_benchmarks_timeout_is_enforced(capsys, tmp_path):
    f = custom_file(tmp_path / "c.yaml", ["sh", "-c", "sleep 60; echo v 1"], timeout=1,
                    extra="timeout: 120\n")
    rc, _, err = run_cli(capsys, "run", f, "--out", tmp_path / "out")
    assert rc == 1, err  # the trial failed
    db = sqlite3.connect(tmp_path / "out" / "vhpc.db")
    status, timed_out, error = db.execute("SELECT status, timed_out, error FROM trials").fetchone()
    assert (status, timed_out) == ("failed", 1) and "timed out" in error
    probe = spec.from_file(f).benchmark("probe")
    assert probe.trial_timeout(120) == 1 and probe.trial_timeout(0.5) == 0.5
    plain = custom_file(tmp_path / "d.yaml", ["true"])
    assert spec.from_file(plain).benchmark("probe").trial_timeout(900) == 900


# ------------------------------------------------------------------------ security

def test_results_are_private_by_default_and_shared_on_request(capsys, tmp_path):
    f = custom_file(tmp_path / "c.yaml", ["sh", "-c", "echo v 1"])
    old = os.umask(0o022)
    try:
        assert run_cli(capsys, "run", f, "--out", tmp_path / "private")[0] == 0
        assert run_cli(capsys, "--share", "run", f, "--out", tmp_path / "shared")[0] == 0
    finally:
        os.umask(old)
    for folder, file_mode, dir_mode in (("private", 0o600, 0o700), ("shared", 0o644, 0o755)):
        out = tmp_path / folder
        assert stat.S_IMODE((out / "vhpc.db").stat().st_mode) == file_mode
        (cdir,) = [p for p in out.iterdir() if p.is_dir()]
        assert stat.S_IMODE(cdir.stat().st_mode) == dir_mode
        for report in cdir.iterdir():
            if report.is_file() and not report.name.startswith("."):
                assert stat.S_IMODE(report.stat().st_mode) == file_mode, report
    assert os.umask(0o022) == 0o022  # vhpc restored the caller's umask
    os.umask(old)


def test_a_libvirt_uri_that_runs_a_program_is_refused(capsys, tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "x.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    uri = f"qemu+ext:///system?command={script}"
    for bad in (uri, "qemu+ssh://evil/system", "qemu:///system?command=/bin/true",
                "test:///default", "-oProxyCommand=x"):
        f = tmp_path / "c.yaml"
        f.write_text(yaml.safe_dump({"benchmarks": ["stream"], "environments": [
            {"vm": {"backend": "libvirt", "uri": bad}}]}))
        one_line(*run_cli(capsys, "run", "--dry-run", f)[::2], "--allow-uri")
    assert not marker.exists()
    ok = spec.env("vm", backend="libvirt", uri="qemu:///system?socket=/run/x/libvirt-sock")
    assert ok.options.uri.startswith("qemu:///system")
    os.environ["VHPC_ALLOW_URI"] = "qemu+tcp://lab/system"
    try:  # an explicit --allow-uri (this environment variable) admits that one URI
        assert spec.env("vm", backend="libvirt", uri="qemu+tcp://lab/system").options.uri
    finally:
        del os.environ["VHPC_ALLOW_URI"]


def test_ssh_hosts_cannot_be_options_and_every_argv_ends_options(capsys):
    from vhpc.environments.ssh.environment import SshEnvironment

    one_line(*run_cli(capsys, "compare", "--dry-run", "-b", "stream", "-e", "ssh:host=-V")[::2],
             "host")
    one_line(*run_cli(capsys, "compare", "--dry-run", "-b", "stream", "-e",
                      "ssh:host=h,user=-oProxyCommand=x")[::2], "user")
    rc, _, err = run_cli(capsys, "host", "--ssh", "-oProxyCommand=touch /tmp/pwned")
    one_line(rc, err, "'-'")
    env = SshEnvironment("r", host="node7", user="me", port=2222)
    for extra in ((), ("-O", "check"), ("-O", "exit")):
        argv = env.ssh_argv(*extra)
        assert argv[-2:] == ["--", "node7"], argv
    with pytest.raises(ValueError, match="'-'"):
        SshEnvironment("r", host="-V")


@pytest.fixture
def fake_root(tmp_path):
    """A fake /sys,/proc knob tree and a trusted journal folder under ``tmp_path``."""
    r = tmp_path / "root"
    (r / "proc/sys/kernel").mkdir(parents=True)
    (r / "proc/sys/kernel/numa_balancing").write_text("0\n")
    journal = tmp_path / "journal"
    journal.mkdir(mode=0o755)
    return r, journal


def test_a_knob_journal_naming_other_files_writes_nothing(fake_root, tmp_path):
    from vhpc.host.knobs import recover

    root, journal = fake_root
    victim = tmp_path / "victim"
    victim.write_text("safe\n")
    knob = root / "proc/sys/kernel/numa_balancing"
    entry = journal / "evil.json"
    entry.write_text(json.dumps({"owner": None, "saved": {
        str(victim): "owned", str(root / "proc/sys/kernel/../../../victim"): "1",
        str(knob): "1; rm -rf /", str(root / "etc/shadow"): "1"}}))
    entry.chmod(0o644)
    (left,) = recover(journal, root)
    assert victim.read_text() == "safe\n" and knob.read_text() == "0\n"
    assert len(left.failed) == 4 and all("not a vhpc knob" in f for f in left.failed)
    good = journal / "good.json"  # a knob of vhpc's table with an allowed value: restored
    good.write_text(json.dumps({"owner": None, "saved": {str(knob): "1"}}))
    good.chmod(0o644)
    (left,) = recover(journal, root)
    assert knob.read_text() == "1" and not left.failed


def test_an_untrusted_journal_folder_or_file_is_never_read(fake_root, tmp_path):
    from vhpc.host.knobs import HostKnobs, KnobError, recover

    root, journal = fake_root
    knob = root / "proc/sys/kernel/numa_balancing"
    (journal / "a.json").write_text(json.dumps({"owner": None, "saved": {str(knob): "1"}}))
    (journal / "a.json").chmod(0o666)  # anyone may write this file: ignored
    assert recover(journal, root) == [] and knob.read_text() == "0\n"
    journal.chmod(0o777)  # anyone may write the folder: ignored, and never used
    (journal / "a.json").chmod(0o644)
    assert recover(journal, root) == [] and knob.read_text() == "0\n"
    with pytest.raises(KnobError, match="others may write"):
        with HostKnobs({"numa_balancing": "1"}, journal, root):
            pass
    assert knob.read_text() == "0\n"


def test_one_knob_journal_per_host_whatever_the_cache(monkeypatch, tmp_path):
    from vhpc.host import knobs

    paths = set()
    for cache in ("a", "b"):
        monkeypatch.setenv("VHPC_CACHE", str(tmp_path / cache))
        paths.add(knobs.journal_path())
    assert paths == {knobs.JOURNAL_DIR} and str(knobs.JOURNAL_DIR).startswith("/run/")
    assert knobs.knob_of("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages") == \
        "hugepages_2m"
    assert knobs.knob_of("/etc/passwd") is None


def test_two_caches_share_the_journal_so_a_second_campaign_cannot_undo_the_first(fake_root):
    from vhpc.host.knobs import HostKnobs, KnobError

    root, journal = fake_root  # one folder per host: both campaigns see it
    knob = root / "proc/sys/kernel/numa_balancing"
    with HostKnobs({"numa_balancing": "1"}, journal, root):
        with pytest.raises(KnobError, match="held by"):
            with HostKnobs({"numa_balancing": "0"}, journal, root):
                pass
        assert knob.read_text() == "1"
    assert knob.read_text().strip() == "0"


def test_docs_say_a_campaign_file_is_code():
    text = (ROOT / "docs/campaigns.md").read_text()
    assert "runs commands: trust it like a script" in text


# ------------------------------------------------------------- owned folders

def test_a_dead_owners_folders_are_reaped_with_their_processes(tmp_path):
    child = subprocess.Popen([sys.executable, "-c",
                              "from vhpc.host.owned import owned_tempdir as o; import sys;"
                              f"print(o('vhpc-guest-', {str(tmp_path)!r}), flush=True)"],
                             stdout=subprocess.PIPE, text=True, env={**os.environ,
                                                                     "PYTHONPATH": str(ROOT / "src")})
    folder = Path(child.stdout.readline().strip())
    child.wait()
    # a process still naming it; its first line says it runs (until exec, a child's command
    # line is still pytest's, which names no folder: reaping before would miss it)
    user = subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); "
                             "time.sleep(300)", str(folder)], stdout=subprocess.PIPE, text=True)
    assert user.stdout.readline().strip() == "1"
    mine = owned.owned_tempdir("vhpc-guest-", tmp_path)  # a live owner's: kept
    try:
        owned.reap("vhpc-guest-", tmp_path)
        assert not folder.exists() and mine.exists()
        assert user.wait(timeout=30) == -signal.SIGKILL
    finally:
        if user.poll() is None:
            user.kill()
            user.wait()
    assert folder.name.startswith(f"vhpc-guest-{child.pid}-")


# ---------------------------------------------------------------------- Slurm

DOWN = 'echo "{c}: error: Unable to contact slurm controller (connect failure)" >&2; exit 1'


def test_a_dead_controller_is_named_unreachable(tmp_path, monkeypatch):
    from vhpc.executors.slurm.allocation import ControllerUnreachable, SlurmExecutor

    for k, v in fake_slurm(tmp_path, {"sinfo": DOWN.format(c="sinfo"),
                                      "squeue": DOWN.format(c="squeue")}).items():
        monkeypatch.setenv(k, v)
    ex = SlurmExecutor("20260101-000000-abcd")
    with pytest.raises(VhpcError, match="controller is unreachable"):
        ex.preflight()
    ex.job_id = "7"
    ex.resume_hint = "vhpc compare --resume 20260101-000000-abcd --out /r"
    with pytest.raises(ControllerUnreachable, match="unreachable.*--out /r"):
        ex._check_alive()


def test_the_allocation_carries_a_time_limit_and_vhpcs_pid(tmp_path, monkeypatch):
    from vhpc.executors.slurm.allocation import SlurmExecutor

    for k, v in fake_slurm(tmp_path, {"sinfo": 'echo "batch* 2:00:00"'}).items():
        monkeypatch.setenv(k, v)
    ex = SlurmExecutor("20260101-000000-abcd")
    ex.plan_trials, ex.plan_seconds = 3, 3 * 60.0
    argv = ex.salloc_argv()
    assert f"--comment=vhpc pid={os.getpid()} " in " ".join(argv)
    assert "campaign=20260101-000000-abcd" in " ".join(argv)
    minutes = int(next(a for a in argv if a.startswith("--time=")).split("=")[1])
    assert minutes == 3 + 3 * 4 + 10  # trials' timeouts + step margins + slack
    ex.plan_seconds = 10 ** 6  # capped at the partition's 2 h
    assert "--time=120" in ex.salloc_argv()
    ex.time = "5"
    assert "--time=5" in ex.salloc_argv()


def test_resume_cancels_its_own_leaked_allocation_first(tmp_path, monkeypatch):
    from vhpc.executors.slurm.allocation import SlurmExecutor

    log = tmp_path / "scancel.log"
    for k, v in fake_slurm(tmp_path, {
            "squeue": 'echo "41|vhpc pid=1 host=h campaign=c"',
            "scancel": f'echo "$@" >> {log}'}).items():
        monkeypatch.setenv(k, v)
    ex = SlurmExecutor("c")
    assert ex.cancel_leaked() == ["41"]
    assert log.read_text().split() == ["41"]


def test_an_impossible_slurm_request_is_refused_before_anything_is_stored(
        capsys, tmp_path, monkeypatch):
    nodes = 'echo "n1 batch* 4 idle"'  # a one-node cluster
    for k, v in fake_slurm(tmp_path, {"sinfo": f'case "$*" in *-N*) {nodes};; *) echo batch;; '
                                               'esac'}).items():
        monkeypatch.setenv(k, v)
    for executor, needle in (("slurm:nodes=2", "has 1 node"),):
        rc, _, err = run_cli(capsys, "compare", "-b", "stream", "-e", "native", "--executor",
                             executor, "--out", tmp_path / "out")
        one_line(rc, err, needle)
    down = 'echo "n1 batch* 4 down*"'
    for k, v in fake_slurm(tmp_path, {"sinfo": f'case "$*" in *-N*) {down};; *) echo batch;; '
                                               'esac'}).items():
        monkeypatch.setenv(k, v)
    one_line(*run_cli(capsys, "compare", "-b", "stream", "-e", "native", "--executor", "slurm",
                      "--out", tmp_path / "out")[::2], "can run jobs")
    assert not (tmp_path / "out").exists()  # no store, not even an empty one


@pytest.mark.slurm
def test_more_nodes_than_a_real_cluster_has_is_refused(capsys, slurm_cluster, tmp_path,
                                                       monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm_cluster["SLURM_CONF"])
    rc, _, err = run_cli(capsys, "compare", "-b", "stream", "-e", "native", "--executor",
                         "slurm:nodes=2", "--out", tmp_path / "out")
    one_line(rc, err, "nodes=2", "has 1 node")
    assert not (tmp_path / "out").exists()  # refused before a store (even an empty one)


# ------------------------------------------------------------------ kill -9

def spawn(*args, env=None):
    return subprocess.Popen(VHPC + [str(a) for a in args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def campaign_id(out: Path) -> str:
    return sqlite3.connect(out / "vhpc.db").execute("SELECT id FROM campaigns").fetchone()[0]


def kill9_then_resume(out: Path, proc, pids: list[int], folders: list[str],
                      env=None, gate: Path | None = None) -> int:
    """SIGKILL vhpc during a trial, open ``gate`` (when given), start ``--resume``, check
    that once it has started nothing of the killed trial is left (``pids``, ``folders`` of the
    killed run), and let the resume end by itself (each test's resumed trial ends: a gate or
    the custom ``timeout:``).  Returns the resume's exit status; it leaves no folder of its
    own."""
    assert pids or folders, "the trial left nothing to check"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if gate is not None:
        gate.touch()
    resume = spawn("compare", "--resume", campaign_id(out), "--no-report", "--out", out, env=env)
    try:
        gone = lambda: not any(alive(p) for p in pids) and not any(  # noqa: E731
            Path(f).exists() for f in folders)
        try:
            wait_for(gone, "the killed run's processes and folders to go", proc=resume)
        except AssertionError:
            if not gone():
                raise  # (a resume that already ended is fine once nothing is left)
        rc = resume.wait(timeout=600)
    finally:
        if resume.poll() is None:
            resume.kill()
            resume.wait()
    tmp = Path(tempfile.gettempdir())
    assert not [p for pre in owned.PREFIXES + ("vhpc-vcluster-",)
                for p in tmp.glob(f"{pre}{resume.pid}-*")], "the resume left a folder"
    assert not campaign_left(out)
    return rc


def campaign_left(out: Path) -> list:
    """Leftover records of the campaign in ``out`` (none once a run ended normally)."""
    return sqlite3.connect(out / "vhpc.db").execute("SELECT * FROM leftovers").fetchall()


def test_kill9_during_a_native_trial_leaves_no_process(tmp_path):
    marks, gate = tmp_path / "marks", tmp_path / "gate"
    marks.mkdir()
    cmd = (f"if [ -e {gate} ]; then echo v 1; exit 0; fi; sleep 300 & echo $! > {marks}/child; "
           "wait")
    f = custom_file(tmp_path / "c.yaml", ["sh", "-c", cmd])
    out = tmp_path / "out"
    proc = spawn("run", f, "--out", out)
    try:
        wait_for(lambda: (marks / "child").exists() and (marks / "child").read_text().strip(),
                 "the trial", proc=proc)
        child = int((marks / "child").read_text())
        assert alive(child)
        gate.touch()  # the resumed trial ends at once
        assert kill9_then_resume(out, proc, [child], []) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not alive(child)


def test_kill9_during_an_ssh_trial_leaves_no_remote_process_or_master(sshd, tmp_path):
    marks, gate = tmp_path / "marks", tmp_path / "gate"
    marks.mkdir()
    port = sshd["VHPC_SSH_PORT"]
    env = {"VHPC_SSH_CONFIG": sshd["VHPC_SSH_CONFIG"]}
    cmd = (f"if [ -e {gate} ]; then echo v 1; exit 0; fi; sleep 300 & echo $! > {marks}/child; "
           "wait")
    f = custom_file(tmp_path / "c.yaml", ["sh", "-c", cmd],
                    env=f"ssh:host=127.0.0.1,port={port},workdir={tmp_path / 'remote'}")
    out = tmp_path / "out"
    proc = spawn("run", f, "--out", out, env=env)
    try:
        wait_for(lambda: (marks / "child").exists() and (marks / "child").read_text().strip(),
                 "the remote trial", proc=proc)
        child = int((marks / "child").read_text())
        ctl = [str(p) for p in Path(tempfile.gettempdir()).glob(f"vhpc-ssh-{proc.pid}-*")]
        masters = [p for c in ctl for p in naming(c)]
        assert ctl and masters, "no ControlMaster of the trial"
        rows = sqlite3.connect(out / "vhpc.db").execute(
            "SELECT record_json FROM leftovers").fetchall()
        assert rows and json.loads(rows[0][0])["tag"] == campaign_id(out)  # recorded
        gate.touch()
        assert kill9_then_resume(out, proc, [child, *masters], ctl, env=env) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not alive(child) and not any(alive(m) for m in masters)
    # the resumed run's own wrapper may take a moment to end after vhpc returns (its sampler's
    # forks): a wrapper still there after a bounded wait is one left behind
    wait_for(lambda: not naming(str(tmp_path / "remote")),
             "the remote wrappers to end (a remote wrapper of the killed run is left)", limit=20)


@pytest.fixture
def guest_gate():
    """A gate file's path that guests see: under vhpc's cache folder (a guest sees the host's
    files read-only at their own paths, but its /tmp is its own).  The trial waits until the
    gate exists; the test opens it once the first run is killed, so the resumed trial ends at
    once instead of at its timeout."""
    from vhpc.core.paths import cache_dir

    folder = Path(tempfile.mkdtemp(prefix="test-gate-", dir=cache_dir()))
    yield folder / "gate"
    shutil.rmtree(folder, ignore_errors=True)


def _gated(gate: Path) -> list[str]:
    return ["sh", "-c", f"if [ -e {gate} ]; then echo v 1; exit 0; fi; sleep 300; echo v 1"]


@pytest.mark.vm
@pytest.mark.parallel  # the kill waits on a gate, not on timing: no race with load
def test_kill9_during_a_vm_trial_leaves_no_qemu_or_guest_folder(tmp_path, kernels_built,
                                                               no_qemu_leak, guest_gate):
    f = custom_file(tmp_path / "c.yaml", _gated(guest_gate), timeout=30,
                    env="vm:vcpus=1,memory=256,pin=none")
    out = tmp_path / "out"
    proc = spawn("run", f, "--out", out)
    found: dict[str, list] = {}

    def qemu_up() -> bool:
        dirs = [str(p) for p in Path(tempfile.gettempdir()).glob(f"vhpc-guest-{proc.pid}-*")]
        qemu = [p for d in dirs for p in naming(d)]
        found.update(dirs=dirs, qemu=qemu)
        return bool(dirs and qemu)

    try:
        wait_for(qemu_up, "the guest of the trial", limit=300, proc=proc)
        assert kill9_then_resume(out, proc, found["qemu"], found["dirs"], gate=guest_gate) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.vm
@pytest.mark.parallel  # as above (17.8 s of the serial pass alone)
def test_kill9_during_a_vcluster_trial_leaves_nothing(tmp_path, kernels_built, no_qemu_leak,
                                                      guest_gate):
    f = custom_file(tmp_path / "c.yaml", _gated(guest_gate), timeout=60,
                    env="vcluster:vms=2,vcpus=1,memory=384,net=ivshmem")
    out = tmp_path / "out"
    proc = spawn("run", f, "--out", out)
    found: dict[str, list] = {}

    def cluster_up() -> bool:
        tmp = Path(tempfile.gettempdir())
        dirs = [str(p) for pre in ("vhpc-guest-", "vhpc-vcluster-")
                for p in tmp.glob(f"{pre}{proc.pid}-*")]
        # the guests' shared memory (net=ivshmem): a kill -9 leaves it, the resume removes it
        shm = [str(p) for p in vclusternet.SHM_DIR.glob(f"{vclusternet.SHM_PREFIX}{proc.pid}-*")]
        qemu = [p for d in dirs for p in naming(d)]
        found.update(dirs=dirs + shm, qemu=qemu)
        return len([d for d in dirs if "guest" in d]) == 2 and len(set(qemu)) >= 2 and bool(shm)

    try:
        wait_for(cluster_up, "both guests of the trial", limit=400, proc=proc)
        assert kill9_then_resume(out, proc, found["qemu"], found["dirs"], gate=guest_gate) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
