"""The ssh environment against a real OpenSSH server on this host (tests/cluster/up)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from vhpc.environments.ssh.environment import SshEnvironment, hypervisor, parse_fingerprint
from vhpc.store import Store

CLI = [sys.executable, "-m", "vhpc.cli"]


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _env(sshd) -> dict[str, str]:
    return {**os.environ, "VHPC_SSH_CONFIG": sshd["VHPC_SSH_CONFIG"]}


def _procs_with(text: str) -> list[int]:
    pids = []
    for p in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in p.read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                pids.append(int(p.parent.name))
        except OSError:
            pass
    return pids


def test_hypervisor_as_seen_from_inside():
    assert hypervisor({"virt_systemd": "", "virt_sysfs": "xen"}) == "xen"
    assert hypervisor({"virt_systemd": "kvm", "virt_sysfs": ""}) == "kvm"
    assert hypervisor({"virt_systemd": "none", "cpuid_hypervisor": "1"}) == "unknown (cpuid)"
    assert hypervisor({"virt_systemd": "none", "cpuid_hypervisor": "0"}) == "none"
    fp, xml = parse_fingerprint("hostname=n7\nhost_cpus=4\nnode_0=0-1\nnode_1=2-3\n"
                                "virt_sysfs=xen\n---topology---\n")
    assert fp["hypervisor"] == "xen" and fp["host_cpus"] == 4 and xml == ""
    assert fp["numa_nodes"] == {"0": "0-1", "1": "2-3"} and fp["topology_source"] == "sysfs"


def test_compare_runs_stream_remotely_and_records_fingerprint(sshd, tmp_path, kernels_built):
    port = sshd["VHPC_SSH_PORT"]
    work = tmp_path / "remote-work"
    out = subprocess.run(CLI + ["compare", "-b", "stream:n=2000000", "-e", "native", "-e",
                                f"ssh:host=127.0.0.1,port={port},workdir={work},name=remote",
                                "--repeats", "2", "--warmup", "0", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=_env(sshd), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    store = Store(tmp_path / "vhpc.db")
    cid = store.campaigns()[0]["id"]
    envs = store.environments(cid)
    fp = envs["remote"].fingerprint
    # the "remote" machine is this host: its facts, read here independently, must match
    model = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
             if ln.startswith("model name")][0]
    assert fp["cpu_model"] == model
    assert fp["host_kernel"] == os.uname().release
    assert fp["remote_host"] == socket.gethostname()
    assert fp["host_cpus"] == os.cpu_count()
    virt = subprocess.run(["systemd-detect-virt", "--vm"], capture_output=True, text=True)
    if virt.stdout.strip() not in ("", "none"):
        assert fp["hypervisor"] == virt.stdout.strip()
    assert "Open MPI" in (fp["mpi"] or "") and fp["compiler"]
    trials = [t for t in store.trials(cid) if t.environment == "remote"]
    assert len(trials) == 2 and all(t.status == "done" for t in trials)
    # the binary ran from the remote work directory, built there at the sources' hash
    built = list(work.glob("kernels-*/build/vhpc-stream"))
    assert len(built) == 1
    procs = trials[0].applied.processes
    assert any(p["comm"] == "vhpc-stream" and sum(p["pages_per_node"].values()) > 0
               for p in procs), procs
    assert store.observations(cid)
    html = (tmp_path / cid / "report.html").read_text()
    assert "Open MPI" in html and "ssh_target" in html
    assert not list(work.glob("run/*")), "a pid file of a finished trial was left behind"


def test_timeout_kills_the_remote_process_group(sshd, tmp_path, monkeypatch):
    monkeypatch.setenv("VHPC_SSH_CONFIG", sshd["VHPC_SSH_CONFIG"])
    env = SshEnvironment("r", host="127.0.0.1", port=int(sshd["VHPC_SSH_PORT"]),
                         workdir=str(tmp_path / "w"), cpus="0")
    try:
        env.prepare(["vhpc-noise"])
        marker = f"{os.getpid()}.{int.from_bytes(os.urandom(3), 'big')}"
        r = env.run(["sh", "-c", f"sleep {marker}; true"], timeout=2)
        assert r.timed_out and r.returncode is None
        assert not _procs_with(f"sleep {marker}")
        r = env.run(["sh", "-c", "grep Cpus_allowed_list /proc/self/status"], timeout=30)
        assert r.ok and r.stdout.split()[-1] == "0"  # cpus=0 applied remotely (taskset)
    finally:
        env.close()
    assert not list((tmp_path / "w" / "run").glob("*"))
    assert not env._ctl  # master connection closed


def test_unreachable_host_is_one_line_error(tmp_path):
    port = _free_port()
    out = subprocess.run(CLI + ["compare", "-b", "stream", "-e", "native", "-e",
                                f"ssh:host=127.0.0.1,port={port}", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Connection refused" in lines[0] and "port=" in lines[0]
    assert Store(tmp_path / "vhpc.db").campaigns() == []  # nothing stored, nothing run


def test_refused_key_is_one_line_error(sshd, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    cfg = tmp_path / "ssh_config"
    state = Path(sshd["VHPC_CLUSTER_DIR"])
    cfg.write_text(f"Host *\n  UserKnownHostsFile {state / 'known_hosts'}\n")
    out = subprocess.run(CLI + ["host", "--ssh", f"127.0.0.1:{sshd['VHPC_SSH_PORT']}"],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "VHPC_SSH_CONFIG": str(cfg), "SSH_AUTH_SOCK": ""})
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Permission denied" in lines[0] and "identity=" in lines[0]


def test_host_report_over_ssh(sshd):
    out = subprocess.run(CLI + ["host", "--ssh", f"127.0.0.1:{sshd['VHPC_SSH_PORT']}"],
                         capture_output=True, text=True, env=_env(sshd), timeout=120)
    assert out.returncode == 0, out.stderr
    nodes = len(list(Path("/sys/devices/system/node").glob("node[0-9]*")))  # the same machine
    assert re.search(rf"\b{nodes} NUMA nodes?\b", out.stdout) and "hypervisor" in out.stdout
    assert socket.gethostname() in out.stdout
