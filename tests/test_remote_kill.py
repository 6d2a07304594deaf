"""Nothing a remote campaign starts outlives it.  Slurm: a vhpc stopped by SIGTERM, SIGINT or
SIGKILL, or a step past its time, leaves no ``srun``, no job step and no process of the trial
(seen before: ``srun`` reparented to init 43 min after its vhpc had gone).  ssh: a vhpc
stopped by SIGTERM kills its remote trial and closes its ControlMaster.  Against the suite's
real one-node Slurm cluster and OpenSSH server (tests/cluster/up)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import alive_naming

VHPC = [sys.executable, "-m", "vhpc.cli"]


def _env(cluster) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": cluster["SLURM_CONF"]}


def _steps(cluster, job: str) -> list[str]:
    """The running steps of ``job`` other than the allocation's own (squeue --steps)."""
    out = subprocess.run(["squeue", "-h", "--steps", "-j", job, "-o", "%i %j"],
                         capture_output=True, text=True, env=_env(cluster)).stdout.split("\n")
    return [ln for ln in out if ln.strip() and not ln.split()[0].endswith(
        (".extern", ".batch", ".interactive"))]


def _wait(predicate, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.mark.slurm
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signalled_vhpc_leaves_no_srun_step_or_trial_process(slurm_cluster, tmp_path, sig):
    """SIGTERM (SIGINT takes the same path) to vhpc alone during a trial step: vhpc ends
    (130), and no srun, no job step, no process of the trial is left.  SIGKILL: srun dies
    with vhpc (PR_SET_PDEATHSIG) and the allocation is cancelled by its guard, so the step
    ends too (before, srun ran on reparented to init, its step in an allocation nobody
    cancelled)."""
    mark = f"vhpc-kill-{os.getpid()}-{sig.name}"
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({
        "custom": [{"name": "probe", "command": ["sh", "-c", f"sleep 300; echo v 1 # {mark}"],
                    "metrics": [{"name": "v", "regex": r"v (\d+)", "direction": "higher"}]}],
        "benchmarks": ["probe"], "environments": ["native"], "warmup": 0, "repeats": 1,
        "executor": "slurm"}))
    proc = subprocess.Popen(VHPC + ["run", str(f), "--no-report", "--out", str(tmp_path / "o")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=_env(slurm_cluster), start_new_session=True)
    try:
        _wait(lambda: [p for p in alive_naming(mark) if b"sleep" in
                       Path(f"/proc/{p}/cmdline").read_bytes()[:16]] or proc.poll() is not None,
              "the trial's command on the node")
        assert proc.poll() is None, proc.stderr.read()
        sruns = [p for p in alive_naming("vhpc.executors.slurm.step") if
                 Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"srun")]
        assert sruns, "no srun for the trial's step"
        jobs = {a.split("=", 1)[1] for p in sruns for a in
                Path(f"/proc/{p}/cmdline").read_bytes().decode().split("\0")
                if a.startswith("--jobid=")}
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=120)
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 130), err[-2000:]
    _wait(lambda: not alive_naming(mark) and not any(map(_alive_pid, sruns)),
          "srun and the trial's processes to end", 60)
    for job in jobs:
        _wait(lambda: not _steps(slurm_cluster, job), f"the steps of job {job} to end", 60)
        _wait(lambda: not _job_state(slurm_cluster, job), f"job {job} to end", 60)


def _job_state(cluster, job: str) -> str:
    """squeue's state of ``job`` ("" once it has ended)."""
    return subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                          text=True, env=_env(cluster)).stdout.strip()


@pytest.mark.slurm
def test_a_step_past_its_time_is_cancelled_with_everything_in_it(slurm_cluster, tmp_path,
                                                                 monkeypatch):
    """A step whose command ignores SIGINT and SIGTERM, past its time limit: the executor
    cancels it (srun's two SIGINTs, then scancel of the step) and returns; no srun, no step
    and no process of it is left."""
    from vhpc.executors.slurm import step as stepmod
    from vhpc.executors.slurm.allocation import SlurmExecutor, SlurmOptions

    monkeypatch.setenv("SLURM_CONF", slurm_cluster["SLURM_CONF"])
    monkeypatch.setattr(stepmod, "SRUN_GRACE", 1.0)  # scancel at once after srun's try
    pidfile = tmp_path / "pid"
    mark = f"vhpc-hang-{os.getpid()}"
    with SlurmExecutor("t", SlurmOptions(time="5")) as ex:
        argv = ["srun", f"--jobid={ex.job_id}", "--nodes=1", "--ntasks=1", "--overlap",
                "--job-name=vhpc-hang", "sh", "-c",
                f"trap '' INT TERM; echo $$ > {pidfile}; exec sh -c 'trap \"\" INT TERM; "
                f"sleep 300 # {mark}'"]
        out, err, rc, killed = ex._srun(argv, 5.0)
        assert killed and rc is None, (rc, err)
        assert pidfile.exists(), err
        _wait(lambda: not alive_naming(mark), "the step's processes to end", 30)
        _wait(lambda: not _steps(slurm_cluster, ex.job_id), "the step to end", 30)


def _alive_pid(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_sigterm_during_an_ssh_trial_kills_it_remotely_at_once(sshd, tmp_path):
    """SIGTERM to vhpc during an ssh trial: vhpc ends (130) and the remote trial and the
    ControlMaster are gone with it, without waiting for a resume."""
    marks = tmp_path / "marks"
    marks.mkdir()
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({
        "custom": [{"name": "probe", "command": [
            "sh", "-c", f"sleep 300 & echo $! > {marks}/child; wait; echo v 1"],
            "metrics": [{"name": "v", "regex": r"v (\d+)", "direction": "higher"}]}],
        "benchmarks": ["probe"], "warmup": 0, "repeats": 1,
        "environments": [{"ssh": {"host": "127.0.0.1", "port": int(sshd["VHPC_SSH_PORT"]),
                                  "workdir": str(tmp_path / "remote")}}]}))
    proc = subprocess.Popen(VHPC + ["run", str(f), "--no-report", "--out", str(tmp_path / "o")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "VHPC_SSH_CONFIG": sshd["VHPC_SSH_CONFIG"]},
                            start_new_session=True)
    try:
        _wait(lambda: (marks / "child").exists() and (marks / "child").read_text().strip()
              or proc.poll() is not None, "the remote trial")
        assert proc.poll() is None, proc.stderr.read()
        child = int((marks / "child").read_text())
        masters = [p for p in alive_naming(f"vhpc-ssh-{proc.pid}-") if b"ControlMaster=yes" in
                   Path(f"/proc/{p}/cmdline").read_bytes()]
        assert masters, "no ControlMaster of the trial"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    assert not _alive_pid(child) and not any(map(_alive_pid, masters))


def test_a_trial_whose_output_a_setsid_child_holds_ends_at_its_timeout(tmp_path, capsys):
    """A native trial (as a co-run's or any benchmark's) that starts a process in a session
    of its own holding the trial's output pipes, past its timeout: the trial ends as timed
    out within seconds of the timeout and the escaped process is killed.  Killing the trial's
    session alone would leave the pipes open and ``communicate()`` waiting for that process
    (here 300 s; in a co-run study 26 min past its 600 s timeout)."""
    from conftest import run_cli

    mark = f"vhpc-escaped-{os.getpid()}"
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({
        "custom": [{"name": "probe", "timeout": 3, "command": [
            "sh", "-c", f"setsid sh -c 'sleep 300 # {mark}' & sleep 300"],
            "metrics": [{"name": "v", "regex": r"v (\d+)", "direction": "higher"}]}],
        "benchmarks": ["probe"], "environments": ["native"], "warmup": 0, "repeats": 1}))
    t0 = time.monotonic()
    rc, out, err = run_cli(capsys, "run", f, "--no-report", "--out", tmp_path / "o")
    took = time.monotonic() - t0
    assert rc == 1, err[-2000:]
    with sqlite3.connect(tmp_path / "o" / "vhpc.db") as db:
        (status, error), = db.execute("SELECT status, error FROM trials").fetchall()
    assert status == "failed" and "timed out" in error, error
    assert took < 60, took  # bounded by the timeout, not by the escaped process's 300 s
    _wait(lambda: not alive_naming(mark), "the escaped process to be killed", 10)


def _silent_qmp(path: Path) -> "threading.Thread":
    """A QMP server at ``path`` that greets, accepts the capabilities negotiation and then
    never answers a command (a QEMU whose monitor hangs)."""
    import json
    import socket
    import threading

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        conn.sendall(json.dumps({"QMP": {"version": {"qemu": {"micro": 0, "minor": 2,
                                                               "major": 7}, "package": ""},
                                         "capabilities": []}}).encode() + b"\n")
        req = json.loads(conn.recv(65536))  # qmp_capabilities (one JSON object, no newline)
        reply = {"return": {}, **({"id": req["id"]} if "id" in req else {})}
        conn.sendall(json.dumps(reply).encode() + b"\n")
        conn.recv(65536)  # the next command: never answered
        time.sleep(30)
        conn.close()
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_a_qemu_whose_monitor_hangs_fails_pause_and_resume_in_bounded_time(tmp_path,
                                                                           monkeypatch):
    """QMP stop/cont (every trial pauses and resumes the measured guest and its co-runner)
    to a QEMU that stops answering: an EnvError after QMP_WAIT seconds, not a trial held
    forever."""
    from vhpc.environments.base import EnvError
    from vhpc.environments.vm.backends import qemu

    monkeypatch.setattr(qemu, "QMP_WAIT", 1.0)
    sock = tmp_path / "qmp.sock"
    _silent_qmp(sock)
    guest = qemu.QemuGuest(qemu.GuestConfig())
    guest.proc = subprocess.Popen(["sleep", "60"])  # the "QEMU": alive, its monitor silent
    try:
        guest.qmp = qemu.qmp_connect(sock, time.monotonic() + 10, guest._exit_status)
        for op in (guest.resume, guest.pause):
            t0 = time.monotonic()
            with pytest.raises(EnvError, match="QMP (cont|stop) failed: QEMU did not answer"):
                op()
            assert time.monotonic() - t0 < 20
    finally:
        guest.kill()
    assert guest.proc.poll() is not None


@pytest.mark.vm
def test_a_co_run_trial_whose_benchmark_hangs_ends_bounded_and_leaves_no_qemu(
        tmp_path, capsys, kernels_built, no_qemu_leak):
    """A co-run trial (the measured guest beside a co-runner guest) whose benchmark leaves a
    process in a session of its own holding its output: the guest's agent kills it once the
    trial's group is killed and answers "timed out" seconds after the timeout (before, it
    waited for that process, and the host gave up HANG_GRACE later calling the guest hung);
    both QEMUs are gone at the end."""
    from conftest import run_cli

    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({
        "custom": [{"name": "probe", "timeout": 5, "command": [
            "sh", "-c", "setsid sleep 300 & sleep 300"],
            "metrics": [{"name": "v", "regex": r"v (\d+)", "direction": "higher"}]}],
        "benchmarks": ["probe"], "warmup": 0, "repeats": 1,
        "environments": [{"vm": {"vcpus": 1, "memory": 512, "corunner": "low"}}]}))
    rc, _, err = run_cli(capsys, "run", f, "--no-report", "--out", tmp_path / "o")
    assert rc == 1, err[-2000:]
    with sqlite3.connect(tmp_path / "o" / "vhpc.db") as db:
        (status, error, started, ended), = db.execute(
            "SELECT status, error, started, ended FROM trials").fetchall()
    assert status == "failed" and "timed out" in error, error
