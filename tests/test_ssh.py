"""The ssh environment against a real OpenSSH server on this host (tests/cluster/up)."""

from __future__ import annotations

import shutil
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import require_tool
from vhpc.benchmarks.base import source_hash
from vhpc.environments.ssh.environment import (KERNEL_SRC, SshEnvironment, hypervisor,
                                               parse_fingerprint)
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


# ------------------------------------------------------ a custom benchmark's inputs, copied


def _inputs_bench(rate: Path, data: Path, mpi: bool = False):
    from vhpc.benchmarks.custom import from_mapping

    return from_mapping({
        "name": "staged", "inputs": [str(rate), str(data)],
        "command": ["sh", "-c", "cat rate.txt data/a.txt data/sub/b.txt data/link.txt"],
        "metrics": [{"name": "rate", "regex": r"rate: (\d+)", "unit": "1/s",
                     "higher_is_better": True}],
        "success": "alpha\nbeta\noutside", **({"mpi": {"ranks": 2}} if mpi else {})})


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "in" / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("alpha\n")
    (data / "sub" / "b.txt").write_text("beta\n")
    (tmp_path / "in" / "outside.txt").write_text("outside\n")
    (data / "link.txt").symlink_to(tmp_path / "in" / "outside.txt")
    rate = tmp_path / "in" / "rate.txt"
    rate.write_text("rate: 7\n")
    return rate, data


def _native_and_remote(sshd, tmp_path: Path, campaign: dict) -> tuple[Store, str, dict]:
    """Run ``campaign`` (a campaign file's mapping, one round) natively and on the loopback
    ssh host (workdir ``tmp_path/remote-work``); assert both trials done and return (the store,
    the campaign id, environment → trial)."""
    work = tmp_path / "remote-work"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({
        **campaign, "repeats": 1, "warmup": 0,
        "environments": ["native", {"ssh": {"host": "127.0.0.1", "name": "remote",
                                            "port": int(sshd["VHPC_SSH_PORT"]),
                                            "workdir": str(work)}}]}))
    out = subprocess.run(CLI + ["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "res"),
                                "--no-report"], capture_output=True, text=True, env=_env(sshd),
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    store = Store(tmp_path / "res" / "vhpc.db")
    cid = store.campaigns()[0]["id"]
    trials = {t.environment: t for t in store.trials(cid)}
    assert {e: t.status for e, t in trials.items()} == {"native": "done", "remote": "done"}
    return store, cid, trials


def test_inputs_are_copied_over_ssh_and_the_trial_reads_the_copy(sshd, tmp_path, monkeypatch):
    from vhpc.benchmarks.base import RunContext
    from vhpc.environments.ssh.inputs import InputError

    monkeypatch.setenv("VHPC_SSH_CONFIG", sshd["VHPC_SSH_CONFIG"])
    rate, data = _inputs(tmp_path)
    bench = _inputs_bench(rate, data)
    work = tmp_path / "w"
    env = SshEnvironment("r", host="127.0.0.1", port=int(sshd["VHPC_SSH_PORT"]),
                         workdir=str(work))
    try:
        remote = env.stage_files(bench.copied_inputs({}))
        copy_rate, copy_data = Path(remote.files[str(rate)]), Path(remote.files[str(data)])
        assert copy_rate.parent.parent == work and copy_data.parent.parent == work
        assert copy_rate.read_text() == "rate: 7\n"
        link = copy_data / "link.txt"  # the link was followed: a file of its own there
        assert not link.is_symlink() and link.read_text() == "outside\n"
        assert (copy_data / "sub" / "b.txt").read_text() == "beta\n"
        assert oct(copy_rate.stat().st_mode & 0o777) == "0o600"
        assert Path(remote.rankrun).parent.parent == work and remote.python == "python3"
        copy_rate.write_text("rate: 9\n")  # the trial must read the copy, not the host file
        argv = bench.command({}, RunContext(Path("."), 1, None, remote))
        assert str(rate) not in argv and str(data) not in argv and sys.executable not in argv
        r = env.run(argv, timeout=120)
        assert r.ok, r.stderr
        (sample,) = bench.parse({}, r.stdout, r.stderr, r.returncode)
        assert (sample.value, sample.valid) == (9.0, True)
        # the same contents are found by their hash, not sent again; changed ones are
        assert env.stage_files([str(rate)]).files[str(rate)] == str(copy_rate)
        rate.write_text("rate: 8\n")
        again = Path(env.stage_files([str(rate)]).files[str(rate)])
        assert again != copy_rate and again.read_text() == "rate: 8\n"
        os.mkfifo(data / "pipe")  # what a native trial refuses is refused here too
        with pytest.raises(InputError, match="data/pipe is a FIFO, not a regular file or "
                                             "folder"):
            env.stage_files([str(data)])
        (data / "pipe").unlink()
        (data / "sub" / "up").symlink_to(data)
        with pytest.raises(InputError, match="a loop of links"):
            env.stage_files([str(data)])
    finally:
        env.close()


def test_a_campaign_stages_inputs_for_mpi_ranks_over_ssh(sshd, tmp_path, kernels_built):
    rate, data = _inputs(tmp_path)
    work = tmp_path / "remote-work"
    store, cid, trials = _native_and_remote(sshd, tmp_path, {
        "custom": [{"name": "staged", "inputs": [str(rate), str(data)], "mpi": {"ranks": 2},
                    "command": ["sh", "-c", "cat rate.txt data/a.txt data/link.txt"],
                    "metrics": [{"name": "rate", "regex": r"rate: (\d+)", "unit": "1/s",
                                 "higher_is_better": True}],
                    "success": "alpha\noutside"}],
        "benchmarks": ["staged"]})
    assert trials["remote"].stdout.count("VHPC-RANK") == 2  # both ranks ran rankrun there
    assert all(o.valid and o.value == 7.0 for o in store.observations(cid))
    assert len(list(work.glob("inputs-*/.done"))) == 2 and list(work.glob("kernels-*/rankrun.py"))


def test_an_image_guest_gets_its_inputs_over_its_ssh_session(sshd, tmp_path, monkeypatch):
    """vm:image= stages inputs through the booted guest's ssh session (here a real sshd stands
    for the guest's), so the copies land on the guest's side."""
    from vhpc.environments import kind
    from vhpc.environments.options import HostFacts
    from vhpc.environments.vm.options import VmOptions

    monkeypatch.setenv("VHPC_SSH_CONFIG", sshd["VHPC_SSH_CONFIG"])
    rate, _ = _inputs(tmp_path)
    guest_ssh = SshEnvironment("g", host="127.0.0.1", port=int(sshd["VHPC_SSH_PORT"]),
                               workdir=str(tmp_path / "guest-home"))

    class Booted:  # stands for a running ImageGuest: alive, with its session's ssh
        ssh = guest_ssh

        def alive(self):
            return True

        def resume(self):  # the campaign pauses a guest while another environment runs
            pass

        def kill(self):
            guest_ssh.close()

    env = kind.build("vm", "vm", VmOptions(image=str(tmp_path / "x.qcow2"), accel="tcg"),
                     HostFacts.live())
    env.guest = Booted()
    try:
        copy = Path(env.stage_files([str(rate)]).files[str(rate)])
        assert copy.parent.parent == tmp_path / "guest-home" and copy.read_text() == "rate: 7\n"
    finally:
        env.close()
    assert not guest_ssh._ctl


def test_the_kernel_source_hash_ignores_build_locks_and_outputs_but_not_an_edit(tmp_path):
    # a build's lock files and output folders appear with the first build: two guests of one
    # vcluster hashed the same sources differently minutes apart and looked for rankrun.py
    # in different folders
    src = tmp_path / "kernels"
    shutil.copytree(KERNEL_SRC, src, ignore=shutil.ignore_patterns("build*", ".*"))
    before = source_hash(src)
    (src / ".build.lock").touch()
    (src / ".build-mpich.lock").write_text("x")
    (src / "build").mkdir()
    (src / "build" / "vhpc-stream").write_text("binary")
    assert source_hash(src) == before
    with open(src / "vhpc-stream.c", "a") as f:
        f.write("/* edited */\n")
    assert source_hash(src) != before


def test_lammps_runs_on_an_ssh_host_from_its_copied_input(sshd, tmp_path):
    """LAMMPS on an ssh host: its prepared input is copied there (workdir inputs-*), the
    host's own lmp runs it through the copied rankrun.py, the E_pair agrees with native's,
    after the campaign compared the versions on both sides (the same lmp here)."""
    require_tool("lmp")
    work = tmp_path / "remote-work"
    store, cid, trials = _native_and_remote(
        sshd, tmp_path, {"benchmarks": ["lammps:atoms=500,steps=20,ranks=1"]})
    epair = {o.environment: o.value for o in store.observations(cid) if o.metric == "epair"}
    assert epair["remote"] == epair["native"]
    copies = [f.read_text() for f in work.glob("inputs-*/input")]  # what the ranks read there
    assert any(re.search(r"^run\s+20$", c, re.M) for c in copies), copies
