"""Hypervisor backends are registered parts: a duplicate name is refused, an unknown name is one
line listing the known ones (from the spec parser and from the CLI, exit 2), and a backend
registered by a test — no edit anywhere else — is the one a ``vm`` environment uses.

The toy backend below is not a hypervisor: its "guest" is a local Python process that speaks
vhpc's guest agent protocol (vhpc/environments/vm/agent.py) on a unix socket and runs commands
on the host.  It proves the seam (selection by name, the shared agent channel, the generic
read-back, pause/resume/kill, fingerprint and applied-placement hooks), not a new hypervisor.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhpc.core.errors import SpecError
from vhpc.core.registry import DuplicateName
from vhpc.environments.vm.backends.base import (BACKENDS, BootRequest, GuestSession,
                                                HypervisorBackend, ProbeResult)
from vhpc.environments.vm.backends.libvirt import LibvirtBackend
from vhpc.environments.vm.backends.qemu import QemuBackend
from vhpc.spec import parse

ROOT = Path(__file__).resolve().parents[1]

#: A guest agent in Python: READY, then RUN (runs argv on the host) and READ (answers from a
#: one-node guest sysfs of one vCPU and 256 MiB; any other path is an error).
FAKE_AGENT = r"""
import os, socket, subprocess, sys, time
FILES = {"/sys/devices/system/node/online": "0\n",
         "/sys/devices/system/node/node0/cpulist": "0\n",
         "/sys/devices/system/node/node0/meminfo": "Node 0 MemTotal:  262144 kB\n"}
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1]); srv.listen(1)
conn, _ = srv.accept()
conn.sendall(b"READY 0.5 1 toy\n")
f = conn.makefile("rb")
while True:
    words = f.readline().split()
    if not words:
        break
    if words[0] == b"RUN":
        rid, tms, argc, envc, n = map(int, words[1:])
        parts = [x.decode() for x in f.read(n).split(b"\0")[:-1]]
        env = dict(kv.split("=", 1) for kv in parts[argc:argc + envc])
        t0 = time.monotonic()
        try:
            p = subprocess.run(parts[:argc], capture_output=True, cwd=parts[-1],
                               env={**os.environ, **env}, timeout=tms / 1000)
            rc, to, out, err = p.returncode, 0, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, to, out, err = -1, 1, b"", b""
        head = (f"DONE {rid} {rc} {to} {time.monotonic() - t0:.6f} 0 0 0 0 0 0 "
                f"{len(out)} {len(err)}\n")
        conn.sendall(head.encode() + out + err)
    elif words[0] == b"READ":
        rid, n = int(words[1]), int(words[2])
        path = f.read(n).decode()
        ok, data = (1, FILES[path].encode()) if path in FILES else (0, b"no such file")
        conn.sendall(f"DATA {rid} {ok} {len(data)}\n".encode() + data)
"""


class ToySession(GuestSession):
    """The fake agent process as a session: its main thread stands for vCPU 0; pause and resume
    are SIGSTOP/SIGCONT, kill is SIGKILL."""

    def __init__(self):
        super().__init__()
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        self.release()


class ToyBackend(HypervisorBackend):
    """Boots the fake agent and pins "vCPU 0" (its main thread) as the placement says."""

    booted: list[BootRequest] = []

    @classmethod
    def probe_accel(cls, kernel=None, use_cache=True):
        return ProbeResult("tcg", "the toy backend emulates nothing")

    def boot(self, request):
        from vhpc.environments.vm.agent import AgentChannel

        self.booted.append(request)
        s = ToySession()
        sock = s.workdir / "agent.sock"
        s.proc = subprocess.Popen([sys.executable, "-c", FAKE_AGENT, str(sock)])
        s.agent = AgentChannel.connect(sock, time.monotonic() + request.boot_timeout,
                                       s.proc.poll)
        s.agent.wait_ready(time.monotonic() + request.boot_timeout)
        s.vcpu_threads = {0: s.proc.pid}
        for vcpu, cpus in request.placement.pin_map().items():
            os.sched_setaffinity(s.vcpu_threads[vcpu], cpus)
        return s

    def fingerprint(self):
        return {"hypervisor": "toy 1.0"}

    def applied(self, session, applied):
        return applied.model_copy(update={"notes": f"toy agent pid {session.pid}"})


def _state_becomes(pid: int, state: str, wait: float = 10.0) -> bool:
    """True once process ``pid``'s state (proc(5) stat field 3) is ``state``; a signal is
    delivered asynchronously, so poll for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == state:
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def toy():
    """The toy backend registered as ``toy`` for one test."""
    BACKENDS.register("toy")(ToyBackend)
    ToyBackend.booted = []
    try:
        yield ToyBackend
    finally:
        BACKENDS.unregister("toy")


def test_qemu_and_libvirt_are_registered_and_a_duplicate_is_refused():
    assert BACKENDS.get("qemu") is QemuBackend and BACKENDS.get("libvirt") is LibvirtBackend
    assert not issubclass(LibvirtBackend, QemuBackend)  # side by side, not a subclass

    class Again(HypervisorBackend):
        pass

    with pytest.raises(DuplicateName, match="hypervisor backend 'qemu' is registered twice"):
        BACKENDS.register("qemu")(Again)
    assert BACKENDS.get("qemu") is QemuBackend  # the first registration stays


def test_default_backend_is_qemu_and_libvirt_for_a_domain_xml():
    assert parse.env("vm").options.backend_name == "qemu"
    assert parse.env("vm", backend="libvirt").options.backend_name == "libvirt"
    xml = str(ROOT / "tests" / "data" / "libvirt-domain.xml")
    assert parse.env("vm", domain_xml=xml).options.backend_name == "libvirt"
    with pytest.raises(SpecError, match="uri= needs backend=libvirt"):
        parse.env("vm", backend="qemu", uri="qemu:///system")


def test_unknown_backend_is_one_line_listing_the_known_ones():
    with pytest.raises(SpecError) as err:
        parse.from_cli(["stream"], ["native", "vm:backend=nope"])
    text = str(err.value)
    assert "\n" not in text
    assert "backend: Input should be 'qemu' or 'libvirt' (got 'nope')" in text


def test_unknown_backend_from_the_cli_exits_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "compare", "-b", "stream", "-e",
                        "native", "-e", "vm:backend=nope", "--repeats", "1", "--out",
                        str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'qemu' or 'libvirt'" in lines[0] and "'nope'" in lines[0]


def test_a_registered_backend_is_listed_and_chosen_without_other_edits(toy):
    """The toy backend, registered by this test only, is accepted by the spec, named in the
    unknown-name message, and is the backend the ``vm`` environment boots with."""
    with pytest.raises(SpecError, match="'qemu', 'libvirt' or 'toy'"):
        parse.env("vm", backend="nope")
    env = parse.env("vm", backend="toy", vcpus=1, memory=256, pin="0").build()
    assert type(env.backend) is toy
    with env:
        r = env.run(["sh", "-c", "echo hi from $WHO; exit 3"], env={"WHO": "toy"}, timeout=30,
                    key="k")
        pid = env.guest.pid
        env.pause()
        assert _state_becomes(pid, "T")  # stopped by the backend's pause()
        env.resume()
        again = env.run(["true"], timeout=30, key="k")
    assert r.returncode == 3 and r.stdout == "hi from toy\n" and r.session_index == 0
    assert again.ok and again.session_index == 1  # same key, same session: warm
    assert [(b.vcpus, b.memory_mib, b.session) for b in toy.booted] == [(1, 256, 0)]
    a = r.applied
    assert a.hypervisor_pid == pid and [v.allowed for v in a.vcpus] == [[0]]
    assert [g.cpus for g in a.guest_numa] == ["0"] and a.mismatches == []
    assert a.notes == f"toy agent pid {pid}"  # the backend's applied() hook ran
    with pytest.raises(ProcessLookupError):  # close() killed the session
        os.kill(pid, 0)
    fp = env.fingerprint()
    assert fp["hypervisor"] == "toy 1.0" and fp["accel"] == "tcg" and fp["emulated"] is True


def test_an_option_a_backend_cannot_honour_is_refused_at_parse_and_in_dry_run(toy, monkeypatch,
                                                                              tmp_path, capsys):
    """A backend declares what it cannot honour; the spec refuses it before anything runs, so
    ``vhpc compare --dry-run`` says it in one line and exits 2 (and stores nothing)."""
    from vhpc import cli

    monkeypatch.setattr(toy, "unsupported_options", {"corunner": "use backend=qemu"})
    parse.env("vm", backend="toy", vcpus=1)  # without the option: fine
    with pytest.raises(SpecError, match="corunner= is not supported with backend=toy: use "
                                        "backend=qemu"):
        parse.env("vm", backend="toy", vcpus=1, corunner="low")
    rc = cli.main(["compare", "-b", "stream", "-e", "native", "-e",
                   "vm:backend=toy,corunner=low", "--dry-run", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "corunner= is not supported with backend=toy" in err[0]
    assert not (tmp_path / "vhpc.db").exists()
    # libvirt declares the same: refused at parse, not at boot
    with pytest.raises(SpecError, match="corunner= is not supported with backend=libvirt"):
        parse.env("vm", backend="libvirt", corunner="low")
    with pytest.raises(SpecError, match="slowdown= is not supported with backend=libvirt"):
        parse.env("vm", backend="libvirt", slowdown=0.1)
