"""Users' images end to end: ``vhpc image build`` makes Debian images (cached in the user's vhpc
cache, so only the first run builds each): a bare filesystem, a GRUB disk with LAMMPS, a GRUB EFI
disk.  Campaigns boot them under TCG and store valid samples against native: a custom
``rootfs`` check, STREAM and an MPI ping-pong in the bare one; LAMMPS in the GRUB disk started
by SeaBIOS through its own GRUB (``BOOT_IMAGE=`` on the guest's kernel command line, root on
/dev/vda1, the same E_pair as native); the EFI disk through OVMF under QEMU and libvirt.  Each
image is byte-for-byte unchanged and no QEMU is left.  An image without cloud-init, or without
sshd, is refused in one line with the console tail.  Each boot of a full Debian under TCG takes
minutes here: these run with ``make test-images`` (VHPC_VM_TESTS=1), not ``make test``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import qemu_pids, require_tool
from test_libvirt import libvirt_uri  # noqa: F401 - the suite's libvirtd fixture

pytestmark = [pytest.mark.images, pytest.mark.skipif(
    os.environ.get("VHPC_VM_TESTS") != "1",
    reason="builds and boots a Debian image for minutes under TCG: make test-images")]

VHPC = [sys.executable, "-m", "vhpc.cli"]

CAMPAIGN = r"""
custom:
  - name: rootfs
    command: findmnt -bno FSTYPE,SIZE /
    success: '^(ext4|xfs|btrfs)\s'
    metrics:
      - {name: root_bytes, regex: '^(?:ext4|xfs|btrfs)\s+(\d+)', unit: B, direction: higher}
    check: {metric: root_bytes}   # an identity figure (docs/statistics.md): shown, no verdict
benchmarks: [rootfs, "stream:n=2000000", pingpong]
environments: [native, {vm: {image: bench.qcow2, vcpus: 2}}]
repeats: 1
warmup: 0
"""


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    for tool in ("debvm-create", "mmdebstrap", "qemu-img", "cloud-localds", "debugfs"):
        require_tool(tool)
    out = tmp_path_factory.mktemp("image") / "bench.qcow2"
    res = subprocess.run([*VHPC, "image", "build", "--out", str(out)], capture_output=True,
                         text=True, timeout=3600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.is_file() and f"sha256 {_sha(out)}" in res.stdout
    return out


def _build(tmp_path_factory, name: str, *args: str) -> Path:
    """``vhpc image build --out NAME ARGS`` (from the cache after the first time)."""
    for tool in ("debvm-create", "mmdebstrap", "qemu-img", "cloud-localds", "sfdisk",
                 "grub-install", "grub-mkstandalone", "mcopy"):
        require_tool(tool)
    out = tmp_path_factory.mktemp("image") / name
    res = subprocess.run([*VHPC, "image", "build", "--out", str(out), *args],
                         capture_output=True, text=True, timeout=3600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.is_file() and f"sha256 {_sha(out)}" in res.stdout
    return out


@pytest.fixture(scope="module")
def grub_image(tmp_path_factory) -> Path:
    return _build(tmp_path_factory, "grub.qcow2", "--bootloader", "grub", "--include", "lammps")


@pytest.fixture(scope="module")
def efi_image(tmp_path_factory) -> Path:
    return _build(tmp_path_factory, "efi.qcow2", "--bootloader", "grub-efi")


def _run_campaign(cwd: Path) -> Path:
    """``vhpc run c.yaml --out res`` in ``cwd``, its run folders (the overlays') in a fresh
    short TMPDIR, which it returns: QMP's socket must fit in sun_path (108 bytes, unix(7))."""
    tmp = Path(tempfile.mkdtemp(prefix="vhpc-t-", dir="/tmp"))
    res = subprocess.run([*VHPC, "run", "c.yaml", "--out", "res", "--no-report"], cwd=cwd,
                         capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "TMPDIR": str(tmp)})
    assert res.returncode == 0, res.stderr[-3000:]
    return tmp


def test_campaign_in_the_image_against_native(image, tmp_path):
    before = qemu_pids()
    sha = _sha(image)
    (tmp_path / "bench.qcow2").symlink_to(image)
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    tmp = _run_campaign(tmp_path)
    db = sqlite3.connect(tmp_path / "res" / "vhpc.db")
    valid = {(env, bench) for env, bench in db.execute(
        "select t.environment, t.benchmark from trials t join samples s on s.trial_id = t.id "
        "where t.status = 'done' and s.valid = 1")}
    assert {("vm", b) for b in ("rootfs", "stream", "pingpong")} <= valid, valid
    (fp_json,) = db.execute(
        "select fingerprint_json from environments where name = 'vm'").fetchone()
    fp = json.loads(fp_json)
    assert fp["guest_os"].startswith("Debian GNU/Linux") and "cloud" in fp["guest_kernel"]
    assert fp["image"]["sha256"] == sha and fp["image"]["boot"] == "kernel"
    assert fp["guest_mpi"].startswith("mpirun (Open MPI)")
    boots = [json.loads(a).get("boot_seconds") for (a,) in db.execute(
        "select applied_json from trials where environment = 'vm'")]
    assert boots and all(b and b > 0 for b in boots), boots
    assert _sha(image) == sha
    assert qemu_pids() - before == set()
    assert not list(tmp.glob("vhpc-guest-*/overlay.qcow2"))  # the overlay is gone
    shutil.rmtree(tmp)


def _broken_copy(image: Path, dest: Path, remove: list[str]) -> Path:
    """A raw copy of ``image`` with the files ``remove`` unlinked (debugfs -w on the copy)."""
    qemu_img, debugfs = require_tool("qemu-img"), require_tool("debugfs")
    raw = dest / "broken.raw"
    subprocess.run([qemu_img, "convert", "-f", "qcow2", "-O", "raw", str(image), str(raw)],
                   check=True)
    for path in remove:
        subprocess.run([debugfs, "-w", "-R", f"rm {path}", str(raw)], check=True,
                       capture_output=True)
    return raw


@pytest.mark.parametrize("remove, says", [
    (["/usr/bin/cloud-init"], "refused vhpc's session key"),
    (["/usr/sbin/sshd"], "sshd did not answer"),
])
def test_an_image_without_cloud_init_or_sshd_fails_in_one_line(image, tmp_path, remove, says):
    before = qemu_pids()
    raw = _broken_copy(image, tmp_path, remove)
    res = subprocess.run([*VHPC, "compare", "-b", "stream:n=100000", "-e", "native", "-e",
                          f"vm:image={raw},boot_timeout=420", "--repeats", "1", "--warmup", "0",
                          "--out", str(tmp_path / "res")], capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "console tail:" in lines[0], lines
    db = tmp_path / "res" / "vhpc.db"
    assert not db.exists() or sqlite3.connect(db).execute(
        "select count(*) from trials").fetchone() == (0,)
    assert qemu_pids() - before == set()


LIBVIRT_CAMPAIGN = r"""
custom:
  - name: staged
    inputs: [in/rate.txt, in/data]
    mpi: {ranks: 2}
    command: ["sh", "-c", "cat rate.txt data/a.txt data/link.txt; hostname"]
    success: 'alpha\nrate: 7'
    metrics:
      - {name: rate, regex: 'rate: (\d+)', unit: 1/s, direction: higher}
benchmarks: [staged]
environments:
  - native
  - {vm: {image: bench.qcow2, vcpus: 2, backend: libvirt, uri: "URI", name: lvimage}}
repeats: 1
warmup: 0
"""


def test_libvirt_boots_the_image_and_its_ranks_read_the_copied_inputs(image, tmp_path,
                                                                      libvirt_uri):
    """backend=libvirt boots the image (a transient domain: overlay, seed cdrom, sshd
    forward); a custom MPI benchmark's inputs (a file, and a folder with a link to a file
    outside it) are copied into the guest and both ranks read them there; the domain is gone
    afterwards, the image unchanged."""
    from test_libvirt import vhpc_domains

    sha = _sha(image)
    (tmp_path / "bench.qcow2").symlink_to(image)
    (tmp_path / "in" / "data").mkdir(parents=True)
    (tmp_path / "in" / "data" / "a.txt").write_text("alpha\n")
    (tmp_path / "in" / "rate.txt").write_text("rate: 7\n")
    (tmp_path / "in" / "data" / "link.txt").symlink_to(tmp_path / "in" / "rate.txt")
    (tmp_path / "c.yaml").write_text(LIBVIRT_CAMPAIGN.replace("URI", libvirt_uri))
    tmp = _run_campaign(tmp_path)
    db = sqlite3.connect(tmp_path / "res" / "vhpc.db")
    rows = db.execute("select t.environment, t.stdout, s.value, s.valid from trials t join "
                      "samples s on s.trial_id = t.id where t.status = 'done'").fetchall()
    assert {(e, v, ok) for e, _, v, ok in rows} == {("native", 7.0, 1), ("lvimage", 7.0, 1)}
    out = next(o for e, o, _, _ in rows if e == "lvimage")
    assert out.count("host=vhpc-lvimage") == 2 and out.count("alpha") == 2
    (fp_json,) = db.execute(
        "select fingerprint_json from environments where name = 'lvimage'").fetchone()
    fp = json.loads(fp_json)
    assert fp["backend"] == "libvirt" and fp["guest_os"].startswith("Debian GNU/Linux")
    assert "<qemu:commandline" in fp["domain_xml_submitted"]
    assert vhpc_domains(libvirt_uri) == [] and _sha(image) == sha
    assert not list(tmp.glob("vhpc-guest-*"))
    shutil.rmtree(tmp)


VCLUSTER_CAMPAIGN = r"""
custom:
  - name: staged
    inputs: [in/rate.txt, in/data]
    mpi: {ranks: 2}
    command: ["sh", "-c", "cat rate.txt data/a.txt; hostname"]
    success: 'alpha'
    metrics:
      - {name: rate, regex: 'rate: (\d+)', unit: 1/s, direction: higher}
benchmarks: [staged, pingpong]
environments: [native, {vcluster: {image: bench.qcow2, vms: 2, vcpus: 1, name: vcimage}}]
repeats: 1
warmup: 0
"""


def test_a_vcluster_of_the_image_runs_one_mpi_job_across_its_guests(image, tmp_path):
    """vcluster:image= boots two guests from the image (an overlay each), joins them on the
    private segment, and runs a custom MPI benchmark (its inputs copied into both) and the
    ping-pong with one rank in each guest; nothing is left, the image unchanged."""
    before, sha = qemu_pids(), _sha(image)
    (tmp_path / "bench.qcow2").symlink_to(image)
    (tmp_path / "in" / "data").mkdir(parents=True)
    (tmp_path / "in" / "data" / "a.txt").write_text("alpha\n")
    (tmp_path / "in" / "rate.txt").write_text("rate: 7\n")
    (tmp_path / "c.yaml").write_text(VCLUSTER_CAMPAIGN)
    tmp = _run_campaign(tmp_path)
    db = sqlite3.connect(tmp_path / "res" / "vhpc.db")
    rows = db.execute("select t.benchmark, t.stdout, s.metric, s.valid from trials t join "
                      "samples s on s.trial_id = t.id where t.environment = 'vcimage' and "
                      "t.status = 'done'").fetchall()
    assert {(b, m) for b, _, m, ok in rows if ok} == {
        ("staged", "rate"), ("pingpong", "latency_us"), ("pingpong", "bandwidth_MBps")}
    for bench in ("staged", "pingpong"):  # rank r ran in guest r
        out = next(o for b, o, _, _ in rows if b == bench)
        assert "VHPC-RANK rank=0 host=vhpc-vm0" in out and "VHPC-RANK rank=1 host=vhpc-vm1" in out
    assert _sha(image) == sha and qemu_pids() - before == set()
    assert not list(tmp.glob("vhpc-*"))
    shutil.rmtree(tmp)


BOOTINFO = r"""
custom:
  - name: bootinfo
    command: sh -c 'cat /proc/cmdline; findmnt -no SOURCE /; echo words=$(wc -w < /proc/cmdline)'
    success: 'BOOT_IMAGE='
    metrics:
      - {name: cmdline_words, regex: 'words=(\d+)', unit: count, direction: higher}
    check: {metric: cmdline_words}   # an identity figure: shown, no verdict
"""


def _valid(db) -> set[tuple[str, str]]:
    return {(env, bench) for env, bench in db.execute(
        "select t.environment, t.benchmark from trials t join samples s on s.trial_id = t.id "
        "where t.status = 'done' and s.valid = 1")}


def _stdout(db, env: str, bench: str) -> str:
    return db.execute("select stdout from trials where environment = ? and benchmark = ? and "
                      "status = 'done'", (env, bench)).fetchone()[0]


def test_grub_disk_boots_through_seabios_and_its_own_grub_and_runs_lammps(grub_image,
                                                                           tmp_path):
    """vm:image=GRUB disk,boot=firmware: GRUB starts the image's kernel (its BOOT_IMAGE= on
    the guest's command line), the root is partition 1, LAMMPS (installed by --include, its
    input copied in) gives the same step-100 E_pair as native."""
    before, sha = qemu_pids(), _sha(grub_image)
    (tmp_path / "c.yaml").write_text(BOOTINFO + f"""
benchmarks: [bootinfo, "lammps:atoms=4000,ranks=1"]
environments: [native, {{vm: {{image: {grub_image}, boot: firmware, vcpus: 2}}}}]
repeats: 1
warmup: 0
""")
    tmp = _run_campaign(tmp_path)
    db = sqlite3.connect(tmp_path / "res" / "vhpc.db")
    assert {("vm", "bootinfo"), ("vm", "lammps"), ("native", "lammps")} <= _valid(db)
    cmdline, root = _stdout(db, "vm", "bootinfo").splitlines()[:2]
    assert cmdline.startswith("BOOT_IMAGE=/boot/vmlinuz-") and "root=/dev/vda1" in cmdline
    assert root == "/dev/vda1"
    epair = dict(db.execute("select t.environment, s.value from trials t join samples s on "
                            "s.trial_id = t.id where s.metric = 'epair'"))
    assert epair["vm"] == epair["native"], epair
    fp = json.loads(db.execute("select fingerprint_json from environments where name = 'vm'")
                    .fetchone()[0])
    assert fp["image"]["boot"] == "firmware" and fp["image"]["layout"] == "disk"
    assert "lammps" in fp["guest_apps"]
    assert _sha(grub_image) == sha and qemu_pids() - before == set()
    shutil.rmtree(tmp)


@pytest.mark.parametrize("backend", ["qemu", "libvirt"])
def test_efi_disk_boots_through_ovmf(efi_image, tmp_path, backend, request):
    """vm:image=GRUB EFI disk: boot=auto is uefi (GPT with an ESP); OVMF starts the standalone
    GRUB, which starts the image's kernel from partition 1; under QEMU and libvirt."""
    before, sha = qemu_pids(), _sha(efi_image)
    extra = ""
    if backend == "libvirt":
        uri = request.getfixturevalue("libvirt_uri")
        extra = f', backend: libvirt, uri: "{uri}"'
    (tmp_path / "c.yaml").write_text(BOOTINFO + f"""
benchmarks: [bootinfo]
environments: [{{vm: {{image: {efi_image}, vcpus: 2{extra}}}}}]
repeats: 1
warmup: 0
""")
    tmp = _run_campaign(tmp_path)
    db = sqlite3.connect(tmp_path / "res" / "vhpc.db")
    assert ("vm", "bootinfo") in _valid(db)
    cmdline, root = _stdout(db, "vm", "bootinfo").splitlines()[:2]
    assert cmdline.startswith("BOOT_IMAGE=/boot/vmlinuz-") and root == "/dev/vda1"
    fp = json.loads(db.execute("select fingerprint_json from environments where name = 'vm'")
                    .fetchone()[0])
    assert fp["image"]["boot"] == "uefi"
    assert _sha(efi_image) == sha and qemu_pids() - before == set()
    assert not list(tmp.glob("vhpc-guest-*"))  # the private OVMF_VARS went with the session
    shutil.rmtree(tmp)


NODES_CAMPAIGN = """
benchmarks: [pingpong]
environments: [{vcluster: {image: IMAGE, vms: 2, vcpus: 1, name: vcimage}}]
executor: slurm:nodes=2
repeats: 1
warmup: 0
"""


@pytest.fixture(scope="module")
def cluster2(tmp_path_factory, kernels_built):
    from conftest import slurm_nodes

    yield from slurm_nodes(tmp_path_factory, 2, **{"qemu-system-x86_64": "qemu-system-x86"})


def _with_environ(needle: str) -> set[int]:
    """Live processes other than this one whose environment holds ``needle`` (KEY=VALUE):
    what a campaign started, through srun and the guest hosts, down to QEMU and ssh."""
    from conftest import _procs

    out = set()
    for pid, (_, state, _) in _procs().items():
        if state == "Z" or pid == os.getpid():
            continue
        try:
            if needle.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                out.add(pid)
        except OSError:
            continue
    return out


def test_a_vcluster_of_the_image_spans_two_slurm_nodes(image, cluster2, tmp_path):
    """vcluster:image= under slurm:nodes=2: one guest host per node boots its guest from the
    image (an overlay each, on that node); the segment is carried between the nodes' addresses.
    vhpc SIGKILLed once both guests run leaves nothing (QEMU, job steps, guest hosts, ssh
    masters, overlays); --resume boots them again and runs the ping-pong: rank 0 read back in
    vhpc-vm0 on vhpc1 and rank 1 in vhpc-vm1 on vhpc2, with each vCPU's host CPU; the nodes'
    guests report the image's SHA-256; nothing is left, the image unchanged."""
    import signal
    import time

    from conftest import _cmdline
    from vhpc.store import Store

    before, sha = qemu_pids(), _sha(image)
    (tmp_path / "c.yaml").write_text(NODES_CAMPAIGN.replace("IMAGE", str(image)))
    tmp = Path(tempfile.mkdtemp(prefix="vhpc-t-", dir="/tmp"))
    env = {**os.environ, "TMPDIR": str(tmp), "SLURM_CONF": cluster2["SLURM_CONF"]}
    mine = f"TMPDIR={tmp}"
    proc = subprocess.Popen([*VHPC, "run", "c.yaml", "--out", "res", "--no-report"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        guests = {p for p in _with_environ(mine) if b"vhpc-guest" in _cmdline(p)
                  and b"qemu-system" in _cmdline(p)}
        if len(guests) >= 2:
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    time.sleep(20)  # guest 1 booting: its node's guest host is mid-request
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _with_environ(mine):
        time.sleep(0.5)
    left = {p: _cmdline(p)[:120] for p in _with_environ(mine)}
    assert not left, f"left after SIGKILL: {left}"
    store = Store(tmp_path / "res" / "vhpc.db")
    cid = store.campaigns()[0]["id"]
    res = subprocess.run([*VHPC, "compare", "--resume", cid, "--out", "res", "--no-report"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=3600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    (trial,) = store.trials(cid)
    assert trial.status == "done", (trial.error, (trial.stdout or "")[-2000:])
    assert {o.metric for o in store.observations(cid)} >= {"latency_us", "bandwidth_MBps"}
    ranks = sorted(trial.applied.ranks, key=lambda r: r["rank"])
    assert [(r["rank"], r["vm"], r["guest"].split(".")[0], r["node"]) for r in ranks] == [
        (0, 0, "vhpc-vm0", "vhpc1"), (1, 1, "vhpc-vm1", "vhpc2")]
    assert all(isinstance(r["host_cpu"], int) for r in ranks)
    assert not trial.applied.mismatches
    assert [h["node"] for h in trial.applied.slurm["guest_hosts"]] == ["vhpc1", "vhpc2"]
    fp = store.environments(cid)["vcimage"].fingerprint
    assert fp["image"]["sha256"] == sha and sorted(fp["nodes"]) == ["vhpc1", "vhpc2"]
    assert _sha(image) == sha and qemu_pids() - before == set() and not _with_environ(mine)
    assert not list(tmp.glob("vhpc-*"))  # the killed run's overlays too: reaped at resume
    shutil.rmtree(tmp)
