"""vm:backend=libvirt and vm:domain_xml: XML built from the placement, the user's XML kept as
given, read-back compared with the request, and real guests started by a real libvirtd.

The integration tests use a running libvirtd when ``LIBVIRT_DEFAULT_URI`` or
/run/libvirt/libvirt-sock answers; otherwise they start a private one (QEMU driver only, its
own sockets in a temp dir) and stop it afterwards.  Under CI=true a missing libvirtd or
libvirt-python fails them instead of skipping.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vhpc import placement as P
from vhpc import topology as T
from vhpc.environments.vm.backends import libvirt_xml as lx

from conftest import missing, require_module

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "data" / "libvirt-domain.xml"


_missing = missing  # conftest: fails under CI=true, skips elsewhere


# ------------------------------------------------------------------------------ XML, no daemon


def test_generated_domain_carries_the_placement():
    """span:2 over two single-node sockets of 2 cores: vCPUs 0-1 on PUs 0-1 / node 0 and
    vCPUs 2-3 on PUs 2-3 / node 1, 1 GiB per guest node, 2 MiB pages."""
    topo = T.from_synthetic("pack:2 numa:1 l3:1 core:2 pu:1")
    plan = P.place(topo, P.PlacementRequest(vcpus=4, memory_mib=2048, policy="span:2",
                                            guest_numa="mirror", backing="2m"))
    dom = lx.generated_domain(plan, accel="tcg", emulator_cpus=[5])
    assert dom.get("type") == "qemu"
    assert lx.generated_domain(plan, accel="kvm").get("type") == "kvm"
    assert dom.find("cpu").get("mode") == "maximum"
    assert dom.find("features/acpi") is not None  # guest NUMA (SRAT) and poweroff need ACPI
    assert dom.find("memoryBacking/hugepages/page").get("size") == "2048"
    req = lx.requested(dom)
    assert req["vcpus"] == 4 and req["memory_mib"] == 2048
    assert req["vcpu_pins"] == {0: [0], 1: [1], 2: [2], 3: [3]}
    assert req["emulator_pins"] == [5]
    assert req["memnodes"] == {0: {"mode": "strict", "nodes": [0]},
                               1: {"mode": "strict", "nodes": [1]}}
    assert req["memory_nodes"] == [0, 1]
    assert [(c["cpus"], c["memory_mib"]) for c in req["cells"]] == [([0, 1], 1024), ([2, 3], 1024)]


def test_user_domain_kept_except_what_vhpc_needs(tmp_path):
    dom = lx.parse_user_xml(EXAMPLE.read_text(), str(EXAMPLE))
    changes = lx.add_vhpc_parts(dom, name="vhpc-x-1-0", vmlinux=Path("/k/vmlinux"),
                                initrd=Path("/k/initrd"), cmdline="console=ttyS0",
                                workdir=tmp_path, shares=[])
    assert dom.findtext("name") == "vhpc-x-1-0" and dom.find("uuid") is None
    assert any("my-hpc-guest" in c for c in changes)
    assert dom.findtext("os/kernel") == "/k/vmlinux" and dom.findtext("os/initrd") == "/k/initrd"
    channel = dom.find("devices/channel")
    assert channel.find("target").get("name") == "vhpc.agent"
    assert channel.find("source").get("path") == str(tmp_path / "agent.sock")
    assert dom.find("devices/filesystem/source").get("dir") == "/"
    assert dom.find("devices/filesystem/readonly") is not None
    # the rest as the user wrote it
    assert lx.requested(dom)["vcpu_pins"] == {0: [1], 1: [0]}
    assert dom.find("devices/memballoon").get("model") == "virtio"
    assert dom.find("clock/timer").get("tickpolicy") == "catchup"
    assert dom.find("cpu").get("mode") == "maximum"
    plan = lx.plan_dict(lx.requested(dom))  # what the report's placement section reads
    assert plan["vcpu_pins"] == [[1], [0]]
    assert plan["guest_nodes"] == [{"id": 0, "vcpus": [0, 1], "memory_mib": 512,
                                    "host_nodes": [0], "policy": "strict"}]


@pytest.mark.parametrize("text, words", [
    ("<domain type='qemu'", "not well-formed"),
    ("<network><name>x</name></network>", "expected a libvirt <domain>"),
    ("<domain type='xen'><vcpu>1</vcpu><memory unit='MiB'>512</memory></domain>", "type='qemu'"),
    ("<domain type='qemu'><vcpu>1</vcpu><memory unit='MiB'>64</memory></domain>", "128 MiB"),
    ("<domain type='qemu'><vcpu>1</vcpu><memory unit='parsec'>1</memory></domain>", "unknown unit"),
])
def test_bad_user_xml_says_what_to_change(text, words):
    with pytest.raises(lx.DomainXmlError, match=words):
        lx.parse_user_xml(text, "dom.xml")


def test_cpuset_exclusions():
    """formatdomain.html: '^N' excludes N from a cpuset."""
    assert lx.parse_cpuset("0-3,^2,8") == [0, 1, 3, 8]
    assert lx.parse_cpuset("1") == [1]


def test_memory_units_follow_libvirt():
    """formatdomain.html: KiB by default, 'G'/'GiB' = 2^30 bytes, 'GB' = 10^9 bytes."""
    mib = lx.memory_mib
    assert mib(ET.fromstring("<memory>1048576</memory>")) == 1024
    assert mib(ET.fromstring("<memory unit='G'>2</memory>")) == 2048
    assert mib(ET.fromstring("<memory unit='GB'>1</memory>")) == 953
    assert mib(ET.fromstring("<cell id='0' memory='512' unit='MiB'/>")) == 512


def test_readback_differences_are_mismatches():
    require_module("libvirt")
    from vhpc.environments.vm.backends.libvirt import readback_mismatches

    req = {"vcpu_pins": {0: [0], 1: [1]}, "emulator_pins": [1], "memory_mode": "strict",
           "memory_nodes": [0], "memnodes": {}, "cells": []}
    same = {"vcpupin": {0: [0], 1: [1]}, "emulatorpin": [1],
            "numatune": {"mode": "strict", "nodeset": "0"}}
    threads = [{"vcpu": 0, "allowed": [0]}, {"vcpu": 1, "allowed": [1]}]
    memory = {"mappings": [{"node_mib": {0: 512.0}}]}
    assert readback_mismatches(req, same, threads, memory, [{"node": 0}]) == []
    off = {"vcpupin": {0: [0], 1: [0, 1]}, "emulatorpin": [0, 1],
           "numatune": {"mode": "interleave", "nodeset": "0-1"}}
    out = readback_mismatches(req, off, [{"vcpu": 0, "allowed": [0]}, {"vcpu": 1, "allowed": [0, 1]}],
                              {"mappings": [{"node_mib": {0: 256.0, 1: 256.0}}]},
                              [{"node": 0}, {"node": 1}])
    text = "\n".join(out)
    assert "libvirt reports vCPU 1 pinned to [0, 1]" in text
    assert "vCPU 1 thread may run on [0, 1]" in text
    assert "emulator threads on [0, 1]" in text
    assert "numatune interleave [0, 1]" in text
    assert "256 MiB of guest memory on host node 1" in text
    assert "guest sees 2 NUMA nodes, the domain defines 1" in text


def _cli(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "vhpc.cli", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=900)


@pytest.mark.parametrize("opt, words", [
    ("vm:domain_xml=/nonexistent/dom.xml", "cannot read it"),
    (f"vm:domain_xml={EXAMPLE},vcpus=4", "drop vcpus"),
    ("vm:backend=xen", "backend: Input should be 'qemu' or 'libvirt'"),
    (f"vm:backend=qemu,domain_xml={EXAMPLE}", "needs backend=libvirt"),
    ("vm:backend=libvirt,uri=qemu:///system?socket=/nonexistent/sock", "start libvirtd"),
])
def test_bad_libvirt_options_exit_2(tmp_path, opt, words):
    r = _cli("compare", "-b", "stream", "-e", "native", "-e", opt, "--repeats", "1",
             "--warmup", "0", "--out", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------ real libvirtd


@pytest.fixture(scope="module")
def libvirt_uri(tmp_path_factory):
    """A libvirt URI to a live daemon: the one already running, or a private libvirtd this
    fixture starts and stops."""
    require_module("libvirt")
    from vhpc.environments.vm.backends.libvirtd import DaemonError, PrivateLibvirtd, socket_live

    given = os.environ.get("LIBVIRT_DEFAULT_URI")
    if given:
        yield given
        return
    if socket_live(Path("/run/libvirt/libvirt-sock")):
        yield "qemu:///system"
        return
    # a short folder: libvirtd and QEMU put unix sockets (108-byte path limit) below it, and
    # pytest-xdist's temp paths (…/popen-gwN/…) are long
    import shutil
    import tempfile

    workdir = Path(tempfile.mkdtemp(prefix="vhpc-lvd-", dir="/tmp"))
    daemon = PrivateLibvirtd(workdir)
    try:
        try:
            uri = daemon.start()
        except DaemonError as exc:
            _missing(str(exc))
        yield uri
    finally:
        daemon.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def vhpc_domains(uri: str) -> list[str]:
    """Names of vhpc's domains (running or defined) at ``uri``, via virsh."""
    out = subprocess.run(["virsh", "-c", uri, "list", "--all", "--name"], capture_output=True,
                         text=True, check=True).stdout
    return [n for n in out.split() if n.startswith("vhpc-")]


def _mount_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _daemon_ns(uri: str) -> str | None:
    """Mount namespace of the private libvirtd behind ``uri`` (its pid file beside its socket,
    backends/libvirtd.py); None for a daemon vhpc did not start."""
    if "socket=" not in uri:
        return None
    pidfile = Path(uri.split("socket=", 1)[1].split("&", 1)[0]).parent / "libvirtd.pid"
    try:
        ns = _mount_ns(pidfile.read_text().strip())
    except OSError:
        return None
    return ns if ns != _mount_ns("self") else None


def libvirt_qemus(uri: str) -> set[int]:
    """QEMU processes libvirt started for vhpc domains (``-name guest=vhpc-...``) through the
    daemon at ``uri``: a private daemon's guests share its mount namespace, so guests of
    another private daemon on this host (another worker's, another user's) are not counted;
    other QEMUs on the host (other users' guests) are not counted either."""
    ns = _daemon_ns(uri)
    pids = set()
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"\0guest=vhpc-" in cmd.read_bytes() and (
                    ns is None or _mount_ns(cmd.parent.name) == ns):
                pids.add(int(cmd.parent.name))
        except OSError:
            pass
    return pids


@pytest.fixture
def no_domain_left(libvirt_uri):
    """Fail the test if it leaves a vhpc domain defined or its QEMU running."""
    assert vhpc_domains(libvirt_uri) == [], "vhpc domains defined before the test"
    before = libvirt_qemus(libvirt_uri)
    yield libvirt_uri
    assert vhpc_domains(libvirt_uri) == [], "vhpc domains left behind"
    assert libvirt_qemus(libvirt_uri) - before == set(), "QEMU of a vhpc domain left running"


def test_generated_domain_runs_pauses_and_reads_back(no_domain_left):
    """One vCPU pinned to the first host CPU (pin=auto); QEMU's other threads go to the
    remaining host CPUs (<emulatorpin>) when there are any."""
    from vhpc.spec.parse import env as env_spec

    host = sorted(os.sched_getaffinity(0))
    env = env_spec("vm", "lv", backend="libvirt", uri=no_domain_left, vcpus=1, memory=512,
                   accel="tcg", pin="auto").build()
    with env:
        r = env.run(["nproc"], timeout=60)
        assert r.ok, r.error or r.stderr
        assert r.stdout.strip() == "1"
        name = r.applied.domain
        assert name in vhpc_domains(no_domain_left)
        env.pause()
        state = subprocess.run(["virsh", "-c", no_domain_left, "domstate", name],
                               capture_output=True, text=True).stdout.strip()
        assert state == "paused"
        env.resume()
        assert env.run(["true"], timeout=60).ok
    a = r.applied
    assert a.backend == "libvirt" and a.mismatches == []
    # libvirt and the host agree with the request
    assert a.libvirt["vcpupin"] == {0: [host[0]]}
    assert [v.allowed for v in a.vcpus] == [[host[0]]]
    if len(host) > 1:
        assert a.libvirt["emulatorpin"] == host[1:]
    assert a.libvirt["numatune"]["mode"] == "strict"
    assert a.libvirt["dommemstat"]["actual"] == 512 * 1024
    fp = env.fingerprint()
    assert fp["backend"] == "libvirt" and "<vcpupin" in fp["domain_xml_submitted"]


def test_leftover_of_killed_vhpc_is_removed(no_domain_left, capsys):
    """SIGKILL leaves libvirt's domain running; the next libvirt environment removes it."""
    script = ("import sys\nfrom vhpc.spec.parse import env\n"
              f"e = env('vm', 'orphan', backend='libvirt', uri={no_domain_left!r}, vcpus=1,"
              " memory=256, accel='tcg', pin='none').build()\ne.start()\nprint(e.guest.name, flush=True)\n"
              "sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        name = proc.stdout.readline().strip()
        assert name.startswith("vhpc-orphan-")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert vhpc_domains(no_domain_left) == [name]
    xml = subprocess.run(["virsh", "-c", no_domain_left, "dumpxml", name], capture_output=True,
                         text=True, check=True).stdout
    # the guest folder is the dead owner's: any vhpc starting a guest now (another test
    # worker's) may already have reaped it, so only its absence at the end is checked
    workdir = Path(ET.fromstring(xml).find("devices/channel/source").get("path")).parent
    assert workdir.name.startswith("vhpc-guest-")
    from vhpc.spec.parse import env as env_spec

    capsys.readouterr()
    nxt = env_spec("vm", "next", backend="libvirt", uri=no_domain_left, vcpus=1, memory=256, accel="tcg", pin="none").build()
    assert nxt.removed_leftovers == [name]
    assert f"removed leftover libvirt domain {name}" in capsys.readouterr().err
    assert not workdir.exists()


def test_cli_compare_stream_through_libvirt(no_domain_left, tmp_path, kernels_built):
    """Both forms from the command line: vhpc's domain and the user's (the report's placement
    section renders both).  The user's domain runs here only (a guest boot costs 20 s under
    TCG): its pins, fingerprint and the changes vhpc made are checked from the store."""
    env = dict(os.environ, LIBVIRT_DEFAULT_URI=no_domain_left)
    r = _cli("compare", "-b", "stream:n=20000,ntimes=3", "-e", "native",  # tiny: TCG guests
             "-e", "vm:backend=libvirt,memory=512",
             "-e", f"vm:domain_xml={EXAMPLE},name=mine", "--repeats", "1", "--warmup", "0",
             "--out", str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    db = sqlite3.connect(tmp_path / "vhpc.db")
    rows = {env: json.loads(a) for env, a in db.execute(
        "SELECT environment, applied_json FROM trials WHERE applied_json LIKE '%libvirt%'")}
    assert set(rows) == {"vm", "mine"}
    assert all("vcpupin" in a["libvirt"] and "dommemstat" in a["libvirt"] for a in rows.values())
    # the user's domain: its two vCPUs pinned as its XML says, read back without mismatch
    assert rows["mine"]["libvirt"]["vcpupin"] == {"0": [1], "1": [0]}
    assert rows["mine"]["mismatches"] == [] and len(rows["mine"]["vcpus"]) == 2
    (fp,) = [json.loads(f) for (f,) in db.execute(
        "SELECT fingerprint_json FROM environments WHERE name = 'mine'")]
    # kept as given, what vhpc changed named, and the XML submitted holds the user's clock
    assert fp["domain_xml_given"] == EXAMPLE.read_text()
    assert "my-hpc-guest" in " ".join(fp["domain_changes"])
    assert "tickpolicy" in fp["domain_xml_submitted"]
    html = next(tmp_path.glob("*/report.html")).read_text()
    assert f"as given in {EXAMPLE}" in html


def test_guest_death_and_refused_domain_leave_nothing(no_domain_left, tmp_path):
    """A guest that powers off during a trial fails that trial and the next trial boots a new
    session; a domain libvirt refuses to start fails the trial with libvirt's reason."""
    from vhpc.spec.parse import env as env_spec

    env = env_spec("vm", "dies", backend="libvirt", uri=no_domain_left, vcpus=1, memory=256, accel="tcg", pin="none").build()
    with env:
        r = env.run(["sh", "-c", "echo o > /proc/sysrq-trigger; sleep 60"], timeout=120)
        assert r.error and "guest failed during the trial" in r.error
        assert vhpc_domains(no_domain_left) == []
        again = env.run(["true"], timeout=60)
        assert again.ok and env.sessions == 2
    bad = tmp_path / "bad.xml"
    bad.write_text(EXAMPLE.read_text().replace("cpuset='1'", "cpuset='4095'"))
    env = env_spec("vm", "refused", backend="libvirt", uri=no_domain_left, domain_xml=str(bad)).build()
    try:
        r = env.run(["true"], timeout=60)
    finally:
        env.close()
    assert r.error and "libvirt could not start the domain" in r.error


def test_guest_numa_cells_reach_the_guest(no_domain_left):
    """numa=2: libvirt's <cpu><numa> cells become two guest nodes of one vCPU each."""
    from vhpc.spec.parse import env as env_spec

    env = env_spec("vm", "cells", backend="libvirt", uri=no_domain_left, vcpus=2, memory=512, accel="tcg", pin="none", numa=2).build()
    with env:
        r = env.run(["true"], timeout=60)
    assert r.ok, r.error
    assert [(n["node"], n["cpus"]) for n in r.applied.model_dump()["guest_numa"]] == [(0, "0"), (1, "1")]
    assert r.applied.mismatches == []


def test_a_second_private_daemon_on_the_host_leaves_the_first_answering(libvirt_uri):
    """Another private libvirtd on the same host (another test worker's, another user's) runs
    beside this module's: a system-mode QEMU driver takes /run/libvirt/qemu/driver.pid, so
    without a mount namespace of its own one of the two would exit after opening its socket."""
    import shutil
    import tempfile

    from vhpc.environments.vm.backends.libvirtd import PrivateLibvirtd

    workdir = Path(tempfile.mkdtemp(prefix="vhpc-lvd-", dir="/tmp"))
    second = PrivateLibvirtd(workdir)
    qemu = []
    try:
        uri = second.start()
        assert vhpc_domains(uri) == [] and vhpc_domains(libvirt_uri) == []
        # a domain still running when the daemon stops (a killed user's, say): no disk and no
        # kernel, so QEMU sits in its firmware; libvirtd leaves such a QEMU running on exit
        xml = ("<domain type='qemu'><name>vhpc-left</name><memory unit='MiB'>32</memory>"
               "<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>")
        (workdir / "left.xml").write_text(xml)
        subprocess.run(["virsh", "-c", uri, "create", str(workdir / "left.xml")], check=True,
                       capture_output=True, timeout=60)
        qemu = [p.parent.name for p in Path("/proc").glob("[0-9]*/cmdline")
                if b"guest=vhpc-left," in _read(p)]
        assert len(qemu) == 1, qemu
    finally:
        destroyed = second.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    assert destroyed == ["vhpc-left"] and not Path(f"/proc/{qemu[0]}").exists()
    assert vhpc_domains(libvirt_uri) == []  # stopping the second left the first running


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # a process that ended
        return b""
