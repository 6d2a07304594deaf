"""Sixth hostile battery, the image half: an image is pinned from its check to every boot (a
file swapped later fails the boot in one line, and QEMU reads only the bytes checked, never a
backing file); a killed ``vhpc image build`` leaves no process, loop device, mount or build
folder once vhpc starts again; a failed build names its cause; an image guest that answers ssh
late is retried, then rebooted, and the campaign goes on.  Real boots of full images are in
tests/test_userimage_boot.py (``make test-images``); here the smallest stand-ins run the real
mechanism in seconds: a boot sector, a fake debvm-create, a loop device on a sparse file."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import qemu_pids, require_tool
from test_userimage import BOOT_PROGRAM, _bootable_disk, _sha
from vhpc.environments import kind
from vhpc.environments.base import EnvError
from vhpc.environments.options import HostFacts
from vhpc.environments.vm import userimage
from vhpc.environments.vm.backends.qemu import qmp_connect, spawn
from vhpc.environments.vm.options import VmOptions


def one_line(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text


def _image_env(path: Path, fmt: str | None = None):
    return kind.build("vm", "vm", VmOptions(image=str(path), format=fmt, vcpus=1, memory=256,
                                            accel="tcg"), HostFacts.live())


def _disk_saying(path: Path, message: bytes) -> Path:
    """:func:`_bootable_disk` whose boot sector prints ``message`` instead."""
    _bootable_disk(path)
    tail = b"VHPC-MBR-BOOTED\r\n\0"
    assert len(message) == len(tail) - 3
    data = bytearray(path.read_bytes())
    at = len(BOOT_PROGRAM) - len(tail)
    data[at:at + len(tail)] = message + b"\r\n\0"
    path.write_bytes(bytes(data))
    return path


def _qcow2(raw: Path, dest: Path, backing: Path | None = None) -> Path:
    qemu_img = require_tool("qemu-img")
    if backing is None:
        subprocess.run([qemu_img, "convert", "-f", "raw", "-O", "qcow2", str(raw), str(dest)],
                       check=True)
    else:
        subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                        str(backing), str(dest)], check=True)
    return dest


# ------------------------------------------------ item 3: an image pinned from check to boot


def test_a_swapped_image_fails_the_next_boot_and_trial_in_one_line(tmp_path):
    """The image is checked, its overlay made; then the file is replaced by a qcow2 backed by a
    host file.  The next boot of the overlay refuses in one line naming both digests, and a
    trial in that environment fails with that line, QEMU never started."""
    require_tool("qemu-img")
    image = _qcow2(_bootable_disk(tmp_path / "disk.raw"), tmp_path / "bench.qcow2")
    checked = _sha(image)
    env = _image_env(image)
    pids = qemu_pids()
    try:
        boot = env._image_boot()
        assert boot.base.sha256 == checked and env.image.record()["sha256"] == checked
        secret = _disk_saying(tmp_path / "secret.raw", b"VHPC-HOSTSECRET")
        _qcow2(secret, tmp_path / "evil.qcow2", backing=secret)
        os.replace(tmp_path / "evil.qcow2", image)
        with pytest.raises(userimage.UserImageError) as exc:
            env._image_boot()
        msg = str(exc.value)
        assert one_line(msg) and f"image={image.resolve()} changed since vhpc checked it" in msg
        assert checked[:12] in msg and _sha(image)[:12] in msg
        result = env.run(["true"], timeout=30)
        assert result.returncode is None and one_line(result.error)
        assert "changed since vhpc checked it" in result.error
        assert qemu_pids() - pids == set()
    finally:
        env.close()
    print(f"PASS swapped image: {msg}")


def test_the_same_bytes_copied_back_still_boot(tmp_path):
    """A file replaced by a copy with the same bytes (a restore from backup) is accepted: what
    counts is the SHA-256, and the copy is held from then on."""
    image = _qcow2(_bootable_disk(tmp_path / "disk.raw"), tmp_path / "bench.qcow2")
    env = _image_env(image)
    try:
        boot = env._image_boot()
        old_fd_inode = os.fstat(boot.base.pin.fd).st_ino
        copy = tmp_path / "copy.qcow2"
        copy.write_bytes(image.read_bytes())
        os.replace(copy, image)
        env._image_boot()  # no error
        assert os.fstat(boot.base.pin.fd).st_ino == image.stat().st_ino != old_fd_inode
    finally:
        env.close()
    # still pinned after close: a boot after a failed trial boots the file checked, or none
    assert env.image.sha256 == _sha(image)


def _console_after_boot(boot: userimage.ImageBoot, workdir: Path, want: bytes,
                        wait: float = 60.0) -> tuple:
    """Boot ``boot`` with QEMU as vhpc's qemu backend does (:func:`userimage.image_argv`, the
    pinned descriptor passed), an empty seed and SeaBIOS; wait (at most ``wait`` s) until its
    console shows ``want`` or QEMU exits, read its block nodes over QMP; kill it.  Returns
    (console bytes, the files the nodes opened: each node's ``file``, a ``json:`` description
    for a node with options)."""
    seed = workdir / "seed.iso"
    seed.write_bytes(b"\0" * 4096)
    argv = userimage.image_argv(userimage.GuestConfig(vcpus=1, memory_mib=256, machine="pc"),
                                boot, workdir, seed, userimage.free_port())
    proc = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.PIPE, pass_fds=boot.pass_fds())
    console = workdir / "console.log"
    try:
        qmp = qmp_connect(workdir / "qmp.sock", time.monotonic() + 30, proc.poll)
        nodes = [n["file"] for n in qmp.cmd("query-named-block-nodes")]
        qmp.close()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and proc.poll() is None and (
                not console.exists() or want not in console.read_bytes()):
            time.sleep(0.3)
        return (console.read_bytes() if console.exists() else b""), nodes
    finally:
        proc.kill()
        proc.wait()


def test_qemu_boots_the_bytes_checked_though_the_path_now_names_another_disk(tmp_path):
    """Past the check, even a swap between the check and QEMU's start changes nothing QEMU
    reads: QEMU gets the descriptor vhpc holds, so the guest boots the checked boot sector, and
    the disk swapped in (a qcow2 backed by a 'host file' with a boot sector of its own) is
    neither booted nor opened."""
    require_tool("qemu-system-x86_64")
    image = _qcow2(_bootable_disk(tmp_path / "disk.raw"), tmp_path / "bench.qcow2")
    env = _image_env(image)
    pids = qemu_pids()
    try:
        boot = env._image_boot()
        secret = _disk_saying(tmp_path / "secret.raw", b"VHPC-HOSTSECRET")
        _qcow2(secret, tmp_path / "evil.qcow2", backing=secret)
        os.replace(tmp_path / "evil.qcow2", image)
        console, nodes = _console_after_boot(boot, tmp_path, b"VHPC-MBR-BOOTED")
    finally:
        env.close()
    assert b"VHPC-MBR-BOOTED" in console and b"VHPC-HOSTSECRET" not in console
    assert f"/dev/fdset/{userimage.BASE_FDSET}" in nodes  # the descriptor held since the check
    assert not any(str(secret) in n or str(image) in n for n in nodes), nodes
    assert qemu_pids() - pids == set()


def test_a_pinned_qcow2_that_names_a_backing_file_gets_none(tmp_path):
    """``backing: null``: should a qcow2 naming a host file ever be pinned (here on purpose,
    past every check), QEMU still opens nothing it names: the guest sees zeros where the
    backing file's boot sector is, and the file is in no block node."""
    require_tool("qemu-system-x86_64")
    secret = _disk_saying(tmp_path / "secret.raw", b"VHPC-HOSTSECRET")
    evil = _qcow2(secret, tmp_path / "evil.qcow2", backing=secret)
    (tmp_path / "run").mkdir()
    base = userimage.UserImage(path=evil, format="qcow2", virtual_bytes=secret.stat().st_size,
                               file_bytes=evil.stat().st_size, sha256=_sha(evil),
                               layout="disk", pin=userimage.PinnedImage(evil))
    try:
        overlay = userimage.create_overlay(base, tmp_path / "run" / "overlay.qcow2")
        boot = userimage.ImageBoot(overlay, "vhpc-x", base=base)
        # the checked boot sector printed within a second in the test above: 3 s for this one
        console, nodes = _console_after_boot(boot, tmp_path, b"VHPC-HOSTSECRET", wait=3.0)
    finally:
        base.pin.close()
    assert b"VHPC-HOSTSECRET" not in console
    assert nodes and not any(str(secret) in n for n in nodes), nodes


def test_libvirt_gets_the_backing_chain_ending_at_the_checked_image(tmp_path):
    """The libvirt backend cannot take a descriptor: its domain names the chain itself, the
    overlay over the checked image over nothing (an empty ``backingStore``), valid for
    libvirt's schema; the image is verified before and after the domain starts as for QEMU
    (ReachedOverSsh._boot_image)."""
    import xml.etree.ElementTree as ET

    from test_libvirt_image import _validate
    from vhpc import placement as P
    from vhpc import topology as T
    from vhpc.environments.vm.backends.libvirt import image_domain

    image = _qcow2(_bootable_disk(tmp_path / "disk.raw"), tmp_path / "bench.qcow2")
    env = _image_env(image)
    try:
        boot = env._image_boot()
        plan = P.place(T.from_synthetic("pack:1 numa:1 l3:1 core:2 pu:1"),
                       P.PlacementRequest(vcpus=1, memory_mib=256))
        dom = image_domain(plan, accel="tcg", emulator_cpus=None, name="vhpc-x", image=boot,
                           workdir=boot.overlay.parent, seed=tmp_path / "seed.iso", port=40123)
    finally:
        env.close()
    _validate(tmp_path, dom)
    disk = dom.findall("devices/disk")[0]
    chain = disk.find("backingStore")
    assert chain.find("source").get("file") == str(image.resolve())
    assert chain.find("format").get("type") == "qcow2"
    end = chain.find("backingStore")
    assert end is not None and len(end) == 0 and not end.attrib, ET.tostring(disk)


# ------------------------------------- items 1-2: a killed image build leaves nothing behind

#: A process that lingers until killed; its command line names the test's folder.
LINGER = "while :; do sleep 1; done\n"
#: The fake debvm-create: at stage ``debvm`` it forks a grandchild that leaves its session
#: (``setsid``: out of reach of a process-group kill) and lingers; else it writes a small ext4
#: root with Debian's /vmlinuz and /initrd.img links (mke2fs -d), in well under a second.
DEBVM = """#!/bin/sh
out=; while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
if [ "$VHPC_TEST_STOP" = debvm ]; then
  setsid sh "$FAKE/linger" & sh "$FAKE/linger" & touch "$FAKE/reached"; wait
fi
t=$(mktemp -d); mkdir "$t/boot"; echo K > "$t/boot/vmlinuz-6.1.0-1-cloud-amd64"
echo I > "$t/boot/initrd.img-6.1.0-1-cloud-amd64"
ln -s boot/vmlinuz-6.1.0-1-cloud-amd64 "$t/vmlinuz"
ln -s boot/initrd.img-6.1.0-1-cloud-amd64 "$t/initrd.img"
truncate -s 32M "$out" && mke2fs -q -t ext4 -d "$t" "$out"; rc=$?; rm -rf "$t"; exit $rc
"""
#: A tool that stops the build where the test kills it: lingers (and forks a lingering
#: grandchild out of its session) when ``$VHPC_TEST_STOP`` names it, else runs the real one.
STOPPER = """#!/bin/sh
if [ "$VHPC_TEST_STOP" = "{name}" ]; then
  setsid sh "$FAKE/linger" & touch "$FAKE/reached"; exec sh "$FAKE/linger"
fi
exec {real} "$@"
"""
#: Stage of the build → (bootloader, the tool it is in when killed).
STAGES = {"debvm": ("grub", "debvm"), "partitioning": ("grub", "sfdisk"),
          "grub-install": ("grub", "grub-install"), "esp": ("grub-efi", "grub-mkstandalone")}


def _ours(tmp_path: Path) -> list[str]:
    """Processes whose command line names ``tmp_path`` (the fakes and what they forked)."""
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            argv = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if str(tmp_path).encode() in argv and d.name != str(os.getpid()):
            found.append(d.name + ": " + argv.replace(b"\0", b" ").decode())
    return found


def _loops_under(tmp_path: Path) -> list[str]:
    out = []
    for d in Path("/sys/block").glob("loop*"):
        try:
            back = (d / "loop" / "backing_file").read_text()
        except OSError:
            continue
        if back.startswith(str(tmp_path)):
            out.append(f"{d.name}: {back.strip()}")
    return out


@pytest.fixture
def build_box(tmp_path):
    """What a killed build needs: root, loop devices, the tools; fake debvm-create and stage
    stoppers first on PATH; a private cache and temporary folder."""
    if os.geteuid() != 0:
        pytest.skip("loop devices and mounts need root")
    for t in ("unshare", "losetup", "findmnt", "mke2fs", "sfdisk", "grub-install",
              "grub-mkstandalone", "mkfs.vfat", "qemu-img", "mmdebstrap"):
        require_tool(t)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "linger").write_text(LINGER)
    (fake / "debvm-create").write_text(DEBVM)
    for name in ("sfdisk", "grub-install", "grub-mkstandalone"):
        real = require_tool(name)
        (fake / name).write_text(STOPPER.format(name=name, real=real))
    for f in fake.iterdir():
        f.chmod(0o755)
    (tmp_path / "cache").mkdir(mode=0o700)
    (tmp_path / "tmp").mkdir(mode=0o700)
    return fake


#: Run inside a private mount namespace (unshare -m): start the build, wait until the fake
#: says the stage is reached, note the loop devices and mounts, kill -9 vhpc, run `vhpc host`,
#: and print what is mounted under the test's folder afterwards.
KILL_SCRIPT = """
"$VHPC" image build --out "$OUT" --bootloader "$BOOTLOADER" >"$FAKE/build.out" 2>&1 &
pid=$!
i=0; while [ ! -e "$FAKE/reached" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
sleep 0.3
echo "mounts-before: $(findmnt -rn -o TARGET | grep -c "^$ROOT")"
echo "loops-before: $(losetup -a | grep -c "$ROOT")"
kill -9 $pid; wait $pid
"$VHPC" host --no-probe >/dev/null 2>&1
echo "mounts-after: $(findmnt -rn -o TARGET | grep -c "^$ROOT")"
"""


@pytest.mark.parametrize("stage", list(STAGES))
def test_kill_9_of_image_build_at_each_stage_leaves_nothing_after_the_next_start(
        tmp_path, build_box, stage):
    """``kill -9`` of ``vhpc image build`` while the build is in ``stage``: the guard kills
    every process of the build's cgroup at once (a grandchild that left its session too), and
    the next vhpc (``vhpc host``) unmounts the root, detaches the loop device and removes the
    build folder, the mount folder and the journal, as the journal recorded them."""
    import sys

    bootloader, tool = STAGES[stage]
    fake = build_box
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "FAKE": str(fake),
           "VHPC_TEST_STOP": tool, "VHPC_CACHE": str(tmp_path / "cache"),
           "TMPDIR": str(tmp_path / "tmp"), "OUT": str(tmp_path / "out.qcow2"),
           "BOOTLOADER": bootloader, "ROOT": str(tmp_path),
           "VHPC": str(Path(sys.executable).parent / "vhpc")}
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          KILL_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    report = res.stdout + res.stderr + (fake / "build.out").read_text()
    assert (fake / "reached").exists(), report  # the build got to the stage
    attached = 1 if tool in ("grub-install", "grub-mkstandalone") else 0
    for what in ("mounts", "loops"):  # what there was to undo when vhpc died
        assert int(res.stdout.split(f"{what}-before: ")[1].split()[0]) == attached, report
    assert "mounts-after: 0" in res.stdout, report
    time.sleep(0.2)
    assert _ours(tmp_path) == [], report
    assert _loops_under(tmp_path) == [], report
    images = tmp_path / "cache" / "images"
    assert not list(images.glob("*/build-*")) and not list(images.glob("*/.image.*")), report
    assert not list((tmp_path / "tmp").glob("vhpc-*")), report
    assert not list((tmp_path / "cache" / "leftovers").glob("*")), report
    assert not list(Path("/sys/fs/cgroup/unified").glob("vhpc-build-*")) or all(
        not (d / "cgroup.procs").read_text().strip()
        for d in Path("/sys/fs/cgroup/unified").glob("vhpc-build-*")), report


def test_the_sweep_undoes_only_what_a_dead_builds_journal_may_name(tmp_path, monkeypatch):
    """A dead owner's journal (the cache is input like any other) naming a loop device backed
    by a file outside the image cache, a mount point that is not vhpc's and folders outside its
    places: the sweep leaves each alone (the loop device stays attached) and removes only the
    build folder it may name, then the journal; a live owner's journal is not touched."""
    from vhpc.host import contained, owned

    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    losetup = require_tool("losetup")
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)
    other = tmp_path / "other.raw"
    with open(other, "wb") as f:
        f.truncate(1 << 20)
    loop = subprocess.run([losetup, "-f", "--show", str(other)], capture_output=True,
                          text=True, check=True).stdout.strip()
    try:
        build = tmp_path / "cache" / "images" / "0123456789abcdef" / "build-1-1-x"
        build.mkdir(parents=True)
        keep = tmp_path / "keep"
        keep.mkdir()
        folder = contained.journal_folder()
        dead = folder / "build-999999-1-journal.json"  # pid 999999 started at tick 1: gone
        dead.write_text(json.dumps({"loops": [str(other)], "mounts": ["/", str(keep)],
                                    "paths": [str(keep), "/etc", str(build),
                                              str(build.parent / ".." / "x")]}))
        live = folder / f"build-{owned.owner_tag()}-journal.json"
        live.write_text(json.dumps({"paths": [str(build.parent)]}))
        lines = contained.sweep_stale()
        assert not build.exists() and keep.is_dir() and Path("/etc").is_dir()
        assert lines == [f"removed {build} (its vhpc image build is gone)"]
        assert not dead.exists() and live.exists() and build.parent.is_dir()
        assert subprocess.run([losetup, "-j", str(other)], capture_output=True,
                              text=True).stdout.startswith(loop)  # still attached
    finally:
        subprocess.run([losetup, "-d", loop], check=True)


# ------------------------------------------------------- item 14: a build error names its cause

#: What mmdebstrap (under debvm-create) prints when apt cannot find a package, as the battery
#: saw it: the cause first, then its consequences, then the clean-up.
NOSUCHPKG = """#!/bin/sh
echo "I: running apt-get update..."
echo "done"
echo "Reading package lists..."
echo "E: Unable to locate package nosuchpkg"
echo "E: apt-get --yes -oApt::Get::Download-Only=true install failed"
echo "W: hooklistener errored out: E: received eof on socket"
echo "I: removing tempdir /tmp/mmdebstrap.Xyz..."
exit 1
"""


def test_a_failed_build_names_the_apt_error_not_the_clean_up(tmp_path, monkeypatch, capsys):
    """``image build --include nosuchpkg``: the one-line error carries apt's line "E: Unable
    to locate package nosuchpkg" from the log, not its last line ("I: removing tempdir"),
    and nothing of the build is left running or in the cache."""
    from vhpc import cli
    from vhpc.environments.vm import imagebuild

    require_tool("mmdebstrap"), require_tool("qemu-img")
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "debvm-create").write_text(NOSUCHPKG)
    (fake / "debvm-create").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(imagebuild, "apt_sources",
                        lambda release: [f"deb http://deb.debian.org/debian/ {release} main"])
    rc = cli.main(["image", "build", "--out", str(tmp_path / "x.qcow2"), "--include",
                   "nosuchpkg"])
    err = capsys.readouterr().err
    assert rc == 2 and one_line(err), err
    assert "debvm-create failed (E: Unable to locate package nosuchpkg)" in err, err
    assert "removing tempdir" not in err and "build.log" in err
    assert not list((tmp_path / "cache" / "images").glob("*/build-*"))
    assert not (tmp_path / "x.qcow2").exists()


@pytest.mark.parametrize("log, want", [
    ("I: a\nE: first\nE: second\nI: removing tempdir\n", "E: first"),
    ("Installing for i386-pc platform.\ngrub-install: error: cannot find a device for /.\n",
     "grub-install: error: cannot find a device for /."),
    ("qemu-img: Could not open 'x': No such file\n", "qemu-img: Could not open 'x': No such file"),
    ("", ""),
])
def test_the_cause_is_the_first_error_line_of_the_step(tmp_path, log, want):
    from vhpc.environments.vm import imagebuild

    path = tmp_path / "build.log"
    path.write_text("E: an earlier step's error\n" + log)
    assert imagebuild.cause(path, len("E: an earlier step's error\n")) == want


# ------------------------------- item 16: an image guest that answers ssh late is rebooted


class _Silent:
    """A TCP listener on 127.0.0.1 that accepts and never says a word: ssh's banner exchange
    times out against it, as against a guest whose sshd a loaded host does not schedule."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.close()
        for c in self.accepted:
            c.close()


class _Guest(userimage.ReachedOverSsh):
    """A booted image guest for :meth:`ImageEnvironment.answering`, paused as the campaign
    leaves a guest while another environment runs: its ssh is real (an SshEnvironment) or
    :class:`_Answers`; its QEMU is not."""

    def __init__(self, image: userimage.ImageBoot, ssh=None):
        self.image, self.ssh, self.killed, self.paused = image, ssh, False, True

    def alive(self):
        return not self.killed

    def kill(self):
        self.killed = True

    def resume(self):
        self.paused = False


class _Answers:
    """The ssh of a guest that answers: what the environment asks of it, answered, noting
    whether the guest was running then (a paused guest would not answer)."""

    def __init__(self, asked: list, guest: _Guest):
        self.asked, self.guest = asked, guest

    def kernel_dir(self, local, impl, binary):
        self.asked.append((binary, "paused" if self.guest.paused else "running"))
        return Path("/home/vhpc/.cache/vhpc/kernels-x/build")


@pytest.fixture
def late_guest(tmp_path, monkeypatch):
    """An image environment whose boots hand out :class:`_Guest` s from ``queue``
    (``silent_guest(waits)``: a real ssh client to a :class:`_Silent` port, trying again after
    each of ``waits``; ``waits=None``: one that answers, its requests kept in ``asked``),
    ssh's timeout 1 s."""
    from vhpc.environments.ssh import environment as sshenv
    from vhpc.environments.ssh.environment import SshEnvironment

    require_tool("ssh")
    monkeypatch.setattr(sshenv, "CONNECT_TIMEOUT", 1)
    silent = _Silent()
    image = _qcow2(_bootable_disk(tmp_path / "disk.raw"), tmp_path / "bench.qcow2")
    env = _image_env(image)
    boot = userimage.ImageBoot(tmp_path / "overlay.qcow2", "vhpc-vm", base=env.check_image()
                               and env.image)
    queue: list = []
    booted: list = []
    asked: list = []

    def silent_guest(waits=(0.1, 0.1)):
        if waits is None:  # one that answers
            guest = _Guest(boot)
            guest.ssh = _Answers(asked, guest)
            return guest
        ssh = SshEnvironment("vhpc-vm (image)", host="127.0.0.1", user="vhpc",
                             port=silent.port, config="none", hint="the guest did not answer",
                             retry_waits=waits)
        return _Guest(boot, ssh)

    def fake_boot():
        env.guest = queue.pop(0)
        booted.append(env.guest)
        env.sessions += 1

    monkeypatch.setattr(env, "_boot", fake_boot)
    yield env, queue, booted, silent, silent_guest, image, asked
    silent.close()
    env.close()


def test_a_guest_that_times_out_in_the_banner_exchange_is_retried_then_rebooted(late_guest):
    """The first guest accepts TCP but never sends ssh's banner: vhpc tries again after each
    wait (3 connections), then counts it hung: it is killed, a fresh guest booted (and
    resumed), and the kernels' folder comes from that one: the campaign goes on.  Why is kept, naming the guest
    and the image, never host= or port=."""
    env, queue, booted, silent, silent_guest, image, asked = late_guest
    queue += [silent_guest(), silent_guest(waits=None)]
    got = env.kernel_dir(Path("/build"), "openmpi", "vhpc-stream")
    assert got == Path("/home/vhpc/.cache/vhpc/kernels-x/build")
    assert asked == [("vhpc-stream", "running")]  # resumed first: a paused guest never answers
    assert len(silent.accepted) == 3  # the first try and one after each of 2 waits
    assert booted[0].killed and not booted[1].killed and env.guest is booted[1]
    (why,) = env.boot_hangs
    assert f"the guest vhpc-vm (image={image.resolve()}) did not answer ssh" in why, why
    assert "banner exchange" in why and "host=" not in why and "port=" not in why, why
    print(f"PASS rebooted after: {why}")


def test_the_same_guest_failing_again_stops_with_one_line_naming_guest_and_image(late_guest):
    """The fresh guest does not answer either: kernel_dir (before a trial) raises one line
    naming the guest and the image, and a trial fails with it; each silent guest is killed."""
    env, queue, booted, silent, silent_guest, image, _ = late_guest
    queue += [silent_guest(waits=()), silent_guest(waits=())]
    with pytest.raises(EnvError) as exc:
        env.kernel_dir(Path("/build"), "openmpi", "vhpc-stream")
    msg = str(exc.value)
    assert one_line(msg) and "again after a fresh boot" in msg, msg
    assert f"the guest vhpc-vm (image={image.resolve()})" in msg and "banner exchange" in msg
    assert "host=" not in msg and "port=" not in msg, msg
    assert [g.killed for g in booted] == [True, True]
    print(f"PASS stopped: {msg}")
    queue += [silent_guest(waits=()), silent_guest(waits=())]
    result = env.run(["true"], timeout=30)
    assert result.returncode is None and one_line(result.error), result.error
    assert "again after a fresh boot" in result.error and "port=" not in result.error


def test_a_fifo_or_link_put_in_the_images_place_is_refused_without_reading(tmp_path):
    """Past the check the image's path may become a FIFO (no writer: opening or reading it
    would block) or a link to /etc/shadow: the next boot refuses each at once, in one line."""
    image = _qcow2(_bootable_disk(tmp_path / "disk.raw"), tmp_path / "bench.qcow2")
    env = _image_env(image)
    try:
        env._image_boot()
        for swap in ("fifo", "link"):
            os.unlink(image)
            os.mkfifo(image) if swap == "fifo" else os.symlink("/etc/shadow", image)
            t0 = time.monotonic()
            with pytest.raises(userimage.UserImageError) as exc:
                env._image_boot()
            assert time.monotonic() - t0 < 5 and one_line(str(exc.value)), swap
            assert "changed since vhpc checked it" in str(exc.value), (swap, exc.value)
    finally:
        env.close()

