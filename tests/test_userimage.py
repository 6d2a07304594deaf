"""A user's own image, the cheap parts: a user's image is checked, never written, seeded for cloud-init
and refused in one line when it cannot be used; ``vhpc image build`` is cached by its inputs.
Booting a real image (minutes under TCG) is in tests/test_userimage_boot.py (VHPC_VM_TESTS=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, require_tool
from vhpc.environments.vm import imagebuild, userimage
from vhpc.environments.vm.options import VmOptions, image_format


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _raw_disk(path: Path, mib: int = 4) -> Path:
    """A raw disk of zeros with an MBR boot signature (a 'partitioned disk')."""
    data = bytearray(mib << 20)
    data[510:512] = b"\x55\xaa"
    data[4096:4100] = b"keep"
    path.write_bytes(bytes(data))
    return path


def _ext4_root(tmp: Path) -> Path:
    """A bare ext4 root (raw) with /vmlinuz and /initrd.img links into /boot, as Debian has."""
    mke2fs = require_tool("mke2fs")
    root = tmp / "root"
    (root / "boot").mkdir(parents=True)
    (root / "boot" / "vmlinuz-6.1.0-1-cloud-amd64").write_bytes(b"KERNEL-6.1" * 100)
    (root / "boot" / "initrd.img-6.1.0-1-cloud-amd64").write_bytes(b"INITRD-6.1" * 100)
    (root / "boot" / "vmlinuz-5.10.0-9-amd64").write_bytes(b"OLD-KERNEL")
    os.symlink("boot/vmlinuz-6.1.0-1-cloud-amd64", root / "vmlinuz")
    os.symlink("boot/initrd.img-6.1.0-1-cloud-amd64", root / "initrd.img")
    fs = tmp / "root.ext4"
    subprocess.run([mke2fs, "-q", "-t", "ext4", "-d", str(root), str(fs), "8M"], check=True)
    return fs


# ---------------------------------------------------------------- options


@pytest.mark.parametrize("given, error", [
    ({"image": "disk.bin"}, "the name does not say its format: add format=qcow2"),
    ({"format": "raw"}, "format= needs image=FILE"),
    ({"boot": "kernel"}, "boot= needs image=FILE"),
    ({"image": "a.qcow2", "kernel": "/boot/vmlinuz"}, "boots its own kernel: drop kernel="),
    ({"image": "a.qcow2", "format": "vmdk"}, "'qcow2' or 'raw'"),
])
def test_image_options_are_checked_at_parse(given, error):
    with pytest.raises(ValueError, match=error.replace("(", r"\(").replace("=", "=")):
        VmOptions(**given)


def test_image_path_is_absolute_and_format_comes_from_the_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    o = VmOptions(image="bench.qcow2", vcpus=2)
    assert o.image == str(tmp_path / "bench.qcow2")
    assert image_format(o.image, o.format) == "qcow2"
    assert image_format("root.ext4", None) == "raw"
    assert image_format("disk.bin", "raw") == "raw"
    assert VmOptions.model_validate(o.given()) == o  # a stored spec reloads equal


def test_campaign_file_anchors_the_image_at_its_folder(tmp_path, monkeypatch):
    from vhpc.spec.parse import from_file

    sub = tmp_path / "c"
    sub.mkdir()
    (sub / "c.yaml").write_text("benchmarks: [stream]\n"
                                "environments: [native, {vm: {image: bench.qcow2, vcpus: 2}}]\n")
    monkeypatch.chdir(tmp_path)
    spec = from_file(sub / "c.yaml")
    assert spec.environments[1].options.image == str(sub / "bench.qcow2")


# ---------------------------------------------------------------- inspection


def test_corrupt_qcow2_is_refused_in_one_line(tmp_path):
    require_tool("qemu-img")
    bad = tmp_path / "bad.qcow2"
    bad.write_bytes(b"QFI\xfb" + b"\x00\x00\x00\x03" + os.urandom(4096))
    with pytest.raises(userimage.UserImageError) as exc:
        userimage.inspect(bad, "qcow2")
    assert str(exc.value).startswith(f"image={bad}")
    assert "\n" not in str(exc.value)


def test_damaged_qcow2_metadata_is_refused(tmp_path):
    qemu_img = require_tool("qemu-img")
    img = tmp_path / "img.qcow2"
    subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", str(img), "16M"], check=True)
    subprocess.run([require_tool("qemu-io"), "-c", "write -P 1 0 1M", str(img)], check=True,
                   capture_output=True)
    data = bytearray(img.read_bytes())
    l1 = int.from_bytes(data[40:48], "big")  # qcow2 header: l1_table_offset (docs/interop)
    data[l1:l1 + 8] = (0x8000000000000000 | (len(data) + (1 << 30))).to_bytes(8, "big")
    img.write_bytes(bytes(data))  # an L2 table far beyond the end of the file
    with pytest.raises(userimage.UserImageError, match="is damaged"):
        userimage.inspect(img, "qcow2")


def test_format_must_match_the_contents(tmp_path):
    require_tool("qemu-img")
    raw = _raw_disk(tmp_path / "disk.qcow2")
    with pytest.raises(userimage.UserImageError, match="holds a raw image, not qcow2: give "
                                                       "format=raw"):
        userimage.inspect(raw, "qcow2")
    assert userimage.inspect(raw, "raw").layout == "disk"


def test_a_qcow2_naming_a_host_file_as_backing_is_refused(tmp_path):
    qemu_img = require_tool("qemu-img")
    secret = _raw_disk(tmp_path / "host-file.raw")
    img = tmp_path / "evil.qcow2"
    subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(secret),
                    str(img)], check=True)
    with pytest.raises(userimage.UserImageError, match="is an overlay of .*flatten it"):
        userimage.inspect(img, "qcow2")


def test_inspect_records_size_checksum_and_layout(tmp_path):
    qemu_img = require_tool("qemu-img")
    fs = _ext4_root(tmp_path)
    img = tmp_path / "root.qcow2"
    subprocess.run([qemu_img, "convert", "-f", "raw", "-O", "qcow2", str(fs), str(img)],
                   check=True)
    info = userimage.inspect(img, "qcow2")
    assert (info.format, info.layout, info.virtual_bytes) == ("qcow2", "filesystem", 8 << 20)
    assert info.sha256 == _sha(img) and info.file_bytes == img.stat().st_size


# ---------------------------------------------------------------- overlay, kernel, seed


def test_the_overlay_takes_every_write_and_the_image_none(tmp_path):
    qemu_io = require_tool("qemu-io")
    disk = _raw_disk(tmp_path / "disk.raw")
    before = _sha(disk)
    info = userimage.inspect(disk, "raw")
    (tmp_path / "run").mkdir()
    overlay = userimage.create_overlay(info, tmp_path / "run" / "overlay.qcow2")
    subprocess.run([qemu_io, "-f", "qcow2", "-c", "write -P 0xab 0 1M", str(overlay)],
                   check=True, capture_output=True)
    seen = subprocess.run([qemu_io, "-f", "qcow2", "-c", "read -P 0xab 0 1M", str(overlay)],
                          capture_output=True, text=True)
    assert "Pattern verification failed" not in seen.stdout and seen.returncode == 0
    assert _sha(disk) == before
    argv = userimage.image_argv(userimage.GuestConfig(vcpus=2, memory_mib=512),
                                userimage.ImageBoot(overlay, "vhpc-x"), tmp_path,
                                tmp_path / "seed.iso", 2222)
    assert not any(str(disk) in a for a in argv)  # QEMU gets the overlay, never the image
    assert "user,id=vhpcssh,restrict=on,hostfwd=tcp:127.0.0.1:2222-:22" in argv


def test_direct_boot_copies_the_images_own_kernel(tmp_path, monkeypatch):
    require_tool("debugfs")
    qemu_img = require_tool("qemu-img")
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    fs = _ext4_root(tmp_path)
    img = tmp_path / "root.qcow2"
    subprocess.run([qemu_img, "convert", "-f", "raw", "-O", "qcow2", str(fs), str(img)],
                   check=True)
    before = _sha(img)
    kernel, initrd = userimage.extract_kernel(userimage.inspect(img, "qcow2"))
    assert kernel.read_bytes() == b"KERNEL-6.1" * 100
    assert initrd.read_bytes() == b"INITRD-6.1" * 100
    assert _sha(img) == before
    (tmp_path / "root" / "vmlinuz").unlink()
    os.symlink("boot/x /root/.bashrc", tmp_path / "root" / "vmlinuz")  # a hostile link
    subprocess.run([require_tool("mke2fs"), "-q", "-t", "ext4", "-d", str(tmp_path / "root"),
                    str(tmp_path / "evil.ext4"), "8M"], check=True)
    with pytest.raises(userimage.UserImageError, match="points at '/boot/x /root/.bashrc'"):
        userimage.extract_kernel(userimage.inspect(tmp_path / "evil.ext4", "raw"))
    with pytest.raises(userimage.UserImageError, match="partitioned disk: .*boot=firmware"):
        userimage.extract_kernel(userimage.inspect(_raw_disk(tmp_path / "d.raw"), "raw"))


def test_seed_carries_this_boots_keys_and_hostname(tmp_path):
    require_tool("cloud-localds")
    isoinfo = require_tool("isoinfo")
    keygen = require_tool("ssh-keygen")
    seed, key, known = userimage.write_seed(tmp_path, "vhpc-mine")
    head = seed.read_bytes()[0x8000:0x8000 + 72]
    assert head[1:6] == b"CD001" and head[40:72].decode().strip() == "cidata"

    def member(name):
        return subprocess.run([isoinfo, "-R", "-i", str(seed), "-x", f"/{name}"], check=True,
                              capture_output=True, text=True).stdout

    assert member("user-data").startswith("#cloud-config\n")
    user = yaml.safe_load(member("user-data"))
    meta = yaml.safe_load(member("meta-data"))
    pub = subprocess.run([keygen, "-y", "-f", str(key)], check=True, capture_output=True,
                         text=True).stdout.split()[:2]
    (vhpc,) = user["users"]
    assert vhpc["name"] == userimage.GUEST_USER and vhpc["lock_passwd"] is True
    assert [k.split()[:2] for k in vhpc["ssh_authorized_keys"]] == [pub]
    assert "sudo" not in vhpc and user["disable_root"] is True and user["ssh_pwauth"] is False
    host_pub = user["ssh_keys"]["ed25519_public"].split()[:2]
    assert known.split() == [userimage.HOST_KEY_ALIAS, *host_pub]
    assert host_pub[0] == "ssh-ed25519" and "PRIVATE KEY" in user["ssh_keys"]["ed25519_private"]
    assert meta["local-hostname"] == "vhpc-mine" and meta["instance-id"].startswith("vhpc-")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    second = tmp_path / "again"
    second.mkdir()
    _, key2, _ = userimage.write_seed(second, "vhpc-mine")
    assert key2.read_text() != key.read_text()  # a new key every boot


# ---------------------------------------------------------------- refused before storing


def test_run_with_a_corrupt_image_stores_nothing_and_says_one_line(tmp_path):
    require_tool("qemu-img")
    bad = tmp_path / "bench.qcow2"
    bad.write_bytes(b"QFI\xfb" + os.urandom(8192))
    campaign = tmp_path / "c.yaml"
    campaign.write_text("benchmarks: [stream]\nrepeats: 1\nwarmup: 0\n"
                        "environments: [native, {vm: {image: bench.qcow2, accel: tcg}}]\n")
    out = subprocess.run([sys.executable, "-m", "vhpc.cli", "run", str(campaign), "--out",
                          str(tmp_path / "res")], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"vhpc: error: image={bad}: qemu-img cannot open it"), lines
    import sqlite3

    db = tmp_path / "res" / "vhpc.db"
    if db.exists():
        assert sqlite3.connect(db).execute("select count(*) from campaigns").fetchone() == (0,)


# ---------------------------------------------------------------- vhpc image build


INDEX = ("deb\thttp://deb.debian.org/debian/\t{c}\tmain\n"
         "deb\thttp://deb.debian.org/debian/\t{c}\tcontrib\n"
         "deb\thttp://deb.debian.org/debian/\t{c}-updates\tmain\n"
         "deb\thttp://deb.debian.org/debian-security/\t{c}-security\tmain\n"
         "deb-src\thttp://deb.debian.org/debian/\t{c}\tmain\n"
         "deb\thttps://deb.nodesource.com/node_20.x/\tnodistro\tmain\n")


def test_image_sources_are_the_hosts_for_the_release_asked(monkeypatch):
    monkeypatch.setattr(imagebuild, "host_codename", lambda: "bookworm")
    lines = imagebuild.apt_sources("trixie", INDEX.format(c="bookworm"))
    assert lines == ["deb http://deb.debian.org/debian-security/ trixie-security main",
                     "deb http://deb.debian.org/debian/ trixie main contrib",
                     "deb http://deb.debian.org/debian/ trixie-updates main"]
    with pytest.raises(imagebuild.ImageBuildError, match="no suite of its release bookworm"):
        imagebuild.apt_sources("bookworm", INDEX.format(c="bullseye"))


def test_image_inputs_key_the_cache():
    src = ["deb http://deb.debian.org/debian/ bookworm main"]
    a = imagebuild.cache_key(imagebuild.inputs("bookworm", ["fio", "htop"], src))
    assert a == imagebuild.cache_key(imagebuild.inputs("bookworm", ["htop,fio", "fio"], src))
    assert a != imagebuild.cache_key(imagebuild.inputs("bookworm", ["fio"], src))
    assert a != imagebuild.cache_key(imagebuild.inputs("trixie", ["fio", "htop"], src))
    assert a != imagebuild.cache_key(imagebuild.inputs("bookworm", ["fio", "htop"], src + [
        "deb http://deb.debian.org/debian/ bookworm-updates main"]))
    for bad in ("--allow-unauthenticated", "?name(x)", "a b", "Foo"):
        with pytest.raises(imagebuild.ImageBuildError, match="not a Debian package name"):
            imagebuild.packages([bad])
    with pytest.raises(imagebuild.ImageBuildError, match="--release"):
        imagebuild.inputs("../x", [], src)
    assert set(imagebuild.BASE_PACKAGES) <= set(imagebuild.packages())


def test_image_build_is_taken_from_the_cache_while_its_inputs_stay(tmp_path, monkeypatch):
    require_tool("debvm-create"), require_tool("mmdebstrap"), require_tool("qemu-img")
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    built = []

    def fake_build(argv, log, what, progress, box):  # stands for debvm-create and qemu-img
        target = Path(argv[argv.index("-o") + 1]) if what == "debvm-create" else Path(argv[-1])
        target.write_bytes(what.encode() * 1000)
        built.append(what)

    monkeypatch.setattr(imagebuild, "_run_logged", fake_build)
    monkeypatch.setattr(imagebuild, "apt_sources",
                        lambda release: [f"deb http://deb.debian.org/debian/ {release} main"])
    first = imagebuild.build(tmp_path / "a.qcow2", "bookworm", ["fio"])
    assert built == ["debvm-create", "qemu-img convert"] and not first.cached
    assert first.sha256 == _sha(tmp_path / "a.qcow2")
    again = imagebuild.build(tmp_path / "b.qcow2", "bookworm", ["fio"])
    assert len(built) == 2 and again.cached and again.sha256 == first.sha256
    imagebuild.build(tmp_path / "c.qcow2", "bookworm", ["fio", "htop"])
    assert len(built) == 4  # another input: built again


def test_debvm_command_uses_only_the_given_sources():
    require_tool("debvm-create")
    spec = imagebuild.inputs("bookworm", [], ["deb http://mirror.example/debian bookworm main"])
    argv = imagebuild.debvm_argv(Path("/tmp/x.ext4"), spec)
    assert argv[argv.index("--") + 1:][-1] == "deb http://mirror.example/debian bookworm main"
    assert "--skip=autologin" in argv and '--customize-hook=passwd --root "$1" --lock root' in argv
    inc = next(a for a in argv if a.startswith("--include="))
    assert {"cloud-init", "openssh-server", "openmpi-bin", "hwloc", "numactl"} <= set(
        inc.removeprefix("--include=").split(","))


def test_a_cold_trial_uses_the_checking_boot_but_never_a_used_session(tmp_path):
    """preflight boots the image once; the first cold trial's new_session keeps that boot (no
    trial ran in it), a later one ends the session (the guest is killed, the overlay kept)."""
    from vhpc.environments import kind
    from vhpc.environments.options import HostFacts

    class Booted:  # stands for a running ImageGuest
        killed = False

        def alive(self):
            return not self.killed

        def kill(self):
            self.killed = True

    env = kind.build("vm", "vm", VmOptions(image=str(tmp_path / "x.qcow2"), accel="tcg"),
                     HostFacts.live())
    assert env.boot_timeout == 900.0  # an image's boot under TCG takes minutes
    env.guest = guest = Booted()
    env.rundir = tmp_path
    env.new_session()
    assert env.guest is guest and not guest.killed
    env._trials_in_session["stream[]"] = 1
    env.new_session()
    assert guest.killed and env.guest is None and env.rundir == tmp_path
    env.close()
    assert env.rundir is None and not tmp_path.exists()


def test_inputs_a_vhpc_guest_cannot_see_are_fine_for_an_image_which_gets_copies(tmp_path):
    """An input under /tmp: vhpc's own guest (its own tmpfs there) refuses it before anything
    runs; a user's image gets the input copied in over ssh, so it is not refused."""
    from vhpc.benchmarks.base import BenchmarkError
    from vhpc.campaign.execute import _refuse_hidden_inputs
    from vhpc.environments.vm.guestimage import hidden_in_guest
    from vhpc.spec.parse import from_file

    data = tmp_path / "in.dat"
    data.write_text("x\n")
    assert hidden_in_guest(str(data))
    custom = [{"name": "c", "command": "cat in.dat", "inputs": [str(data)],
               "metrics": [{"name": "v", "regex": "(x)", "direction": "higher"}]}]

    def spec(vm):
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(
            {"custom": custom, "benchmarks": ["c"], "environments": ["native", {"vm": vm}]}))
        s = from_file(tmp_path / "c.yaml")
        return s, s.benchmark("c")

    s, bench = spec({"image": "bench.qcow2", "accel": "tcg"})
    _refuse_hidden_inputs(s, bench, {})
    s, bench = spec({"accel": "tcg"})
    with pytest.raises(BenchmarkError, match=f"{data} lies under /tmp"):
        _refuse_hidden_inputs(s, bench, {})


# ---------------------------------------------------------------- boot=firmware

#: A boot sector (x86 real mode, loaded at 0x7c00): xor ax,ax; mov ds,ax; mov dx,0x3f8;
#: mov si,0x7c16; then lodsb / test al,al / jz +3 / out dx,al / jmp back: the message at
#: 0x7c16 goes to COM1 (the serial console); then cli; hlt; jmp back to hlt.
BOOT_PROGRAM = bytes.fromhex("31c08ed8baf803be167cac84c07403eeebf8faf4ebfd") + \
    b"VHPC-MBR-BOOTED\r\n\0"


def _bootable_disk(path: Path) -> Path:
    """A raw disk, MBR-partitioned (one Linux partition from sector 2048), whose boot sector
    runs :data:`BOOT_PROGRAM`: the smallest image with a bootloader of its own."""
    data = bytearray(4 << 20)
    data[:len(BOOT_PROGRAM)] = BOOT_PROGRAM
    entry = bytes([0x80, 0, 0, 0, 0x83, 0, 0, 0]) + (2048).to_bytes(4, "little") + \
        (6144).to_bytes(4, "little")
    data[446:462] = entry
    data[510:512] = b"\x55\xaa"
    path.write_bytes(bytes(data))
    return path


def test_boot_firmware_runs_seabios_and_the_images_own_bootloader(tmp_path):
    """boot=auto on a partitioned disk is boot=firmware: QEMU gets Debian's SeaBIOS and no
    kernel, and booting that command line runs the image's own boot sector from the overlay
    (its message reaches the console log); the image stays unchanged and QEMU is gone."""
    from conftest import qemu_pids
    from vhpc.environments import kind
    from vhpc.environments.options import HostFacts
    from vhpc.environments.vm.backends.qemu import spawn

    require_tool("qemu-system-x86_64")
    owner = subprocess.run(["dpkg", "-S", str(userimage.SEABIOS)], capture_output=True,
                           text=True)
    assert owner.stdout.startswith("seabios:"), owner  # Debian's firmware, as installed
    disk = _bootable_disk(tmp_path / "disk.img")
    before, pids = _sha(disk), qemu_pids()
    env = kind.build("vm", "vm", VmOptions(image=str(disk), vcpus=1, memory=256, accel="tcg"),
                     HostFacts.live())
    proc = None
    try:
        boot = env._image_boot()
        assert env.boot_mode == "firmware" and boot.kernel is None and boot.append == ""
        seed = tmp_path / "seed.iso"
        seed.write_bytes(b"\0" * 4096)
        argv = userimage.image_argv(userimage.GuestConfig(vcpus=1, memory_mib=256,
                                                          machine="pc"),
                                    boot, tmp_path, seed, userimage.free_port())
        assert "-kernel" not in argv and "-append" not in argv
        assert argv[argv.index("-bios") + 1] == str(userimage.SEABIOS)
        assert f"file={boot.overlay},format=qcow2,if=virtio,backing={userimage.BASE_NODE}" \
            in argv  # the image itself from the descriptor vhpc holds (pinned)
        proc = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, pass_fds=boot.pass_fds())
        console = tmp_path / "console.log"
        import time

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and (
                not console.exists() or b"VHPC-MBR-BOOTED" not in console.read_bytes()):
            time.sleep(0.5)
        assert console.exists() and b"VHPC-MBR-BOOTED" in console.read_bytes(), (
            proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        env.close()
    assert _sha(disk) == before and qemu_pids() - pids == set()
