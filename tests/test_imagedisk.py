"""The disks ``vhpc image build --bootloader`` makes and how an image's disk is booted, checked
without booting a guest: the partition tables (read back with ``sfdisk --json``), GRUB in the
MBR or a standalone EFI GRUB in the EFI system partition of a small synthetic disk made by the
same code, the grub.cfg entry, ``boot=auto``'s choice from the table, the QEMU command line and
the libvirt XML (validated by libvirt's schema) of ``boot=uefi``.  Booting real GRUB images
(minutes under TCG) is ``make test-images`` (tests/test_userimage_boot.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import missing, require_tool

from vhpc.environments.vm import imagebuild, imagedisk, userimage
from vhpc.environments.vm.backends import libvirt_xml as lx
from vhpc.environments.vm.backends.libvirt import image_domain
from vhpc.environments.vm.options import VmOptions

ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"  # UEFI 2.10 table 5-7
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"  # Discoverable Partitions Specification
KERNEL = "/boot/vmlinuz-6.1.0-1-cloud-amd64"


def _table_only(path: Path, bootloader: str, root_bytes: int) -> Path:
    """A disk file with just the partition table ``bootloader``'s disk gets (sfdisk)."""
    with open(path, "wb") as f:
        f.truncate(imagedisk.disk_bytes(bootloader, root_bytes))
    subprocess.run([require_tool("sfdisk"), "--no-reread", "--no-tell-kernel", str(path)],
                   input=imagedisk.partition_script(bootloader, root_bytes), text=True,
                   check=True, capture_output=True)
    return path


def test_partition_layouts_read_back_by_sfdisk(tmp_path):
    root = 64 << 20
    mbr = imagedisk.partitions(_table_only(tmp_path / "mbr.raw", "grub", root))
    assert mbr["label"] == "dos"
    (p1,) = mbr["partitions"]
    assert (p1["start"], p1["size"], p1["type"], p1.get("bootable")) == (2048, root // 512,
                                                                         "83", True)
    gpt = imagedisk.partitions(_table_only(tmp_path / "gpt.raw", "grub-efi", root))
    assert gpt["label"] == "gpt"
    p1, p2 = gpt["partitions"]
    assert (p1["node"][-1], p1["start"], p1["size"], p1["type"]) == ("1", 2048, root // 512,
                                                                     LINUX)
    assert (p2["type"], p2["size"]) == (ESP, (32 << 20) // 512)
    assert p2["start"] >= p1["start"] + p1["size"]
    assert imagedisk.boot_for(mbr) == "firmware" and imagedisk.boot_for(gpt) == "uefi"
    blank = tmp_path / "blank.raw"
    blank.write_bytes(b"\0" * (1 << 20))
    assert imagedisk.partitions(blank) == {} and imagedisk.boot_for({}) == "firmware"
    with pytest.raises(ValueError):
        imagedisk.partition_script("lilo", root)


def test_grub_cfg_boots_the_images_kernel_from_partition_one():
    cfg = imagedisk.grub_cfg(KERNEL, "/boot/initrd.img-6.1.0-1-cloud-amd64")
    lines = [ln.strip() for ln in cfg.splitlines()]
    assert f"linux {KERNEL} root=/dev/vda1 ro console=ttyS0,115200n8 no_timer_check" in lines
    assert "initrd /boot/initrd.img-6.1.0-1-cloud-amd64" in lines
    assert "terminal_output serial console" in lines  # GRUB's menu on the serial console
    stub = imagedisk.efi_stub_cfg("2a77f7e5-1de9-4c70-8db7-2bf2493361a2").splitlines()
    assert "search --no-floppy --fs-uuid --set=root 2a77f7e5-1de9-4c70-8db7-2bf2493361a2" in stub
    assert stub[-1] == "configfile /boot/grub/grub.cfg"


def _synthetic_root(tmp_path: Path) -> Path:
    """A 32 MiB ext4 root with Debian's /vmlinuz and /initrd.img links (mke2fs -d)."""
    tree = tmp_path / "tree"
    (tree / "boot").mkdir(parents=True)
    (tree / "boot" / "vmlinuz-6.1.0-1-cloud-amd64").write_bytes(b"KERNEL" * 100)
    (tree / "boot" / "initrd.img-6.1.0-1-cloud-amd64").write_bytes(b"INITRD" * 100)
    os.symlink("boot/vmlinuz-6.1.0-1-cloud-amd64", tree / "vmlinuz")
    os.symlink("boot/initrd.img-6.1.0-1-cloud-amd64", tree / "initrd.img")
    fs = tmp_path / "root.ext4"
    with open(fs, "wb") as f:
        f.truncate(32 << 20)
    subprocess.run([require_tool("mke2fs"), "-q", "-t", "ext4", "-d", str(tree), str(fs)],
                   check=True)
    return fs


def _run(argv: list[str], what: str) -> None:
    res = subprocess.run(argv, capture_output=True, text=True)
    assert res.returncode == 0, (what, res.stderr)


def _part(disk: Path, entry: dict, dest: Path) -> Path:
    """Partition ``entry`` of ``disk`` copied into ``dest``."""
    subprocess.run(["dd", f"if={disk}", f"of={dest}", "bs=512", f"skip={entry['start']}",
                    f"count={entry['size']}", "status=none"], check=True)
    return dest


@pytest.fixture
def as_root():
    """make_disk attaches a loop device and mounts the root: it needs root and the tools."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    for tool in ("sfdisk", "grub-install", "grub-mkstandalone", "mkfs.vfat", "mcopy",
                 "losetup", "debugfs"):
        require_tool(tool)
    for folder, pkg in (("i386-pc", "grub-pc-bin"), ("x86_64-efi", "grub-efi-amd64-bin")):
        if not Path("/usr/lib/grub", folder).is_dir():
            missing(f"/usr/lib/grub/{folder} not installed (apt-get install {pkg})")


def _loops_of(disk: Path) -> str:
    return subprocess.run(["losetup", "-j", str(disk)], capture_output=True, text=True).stdout


def test_grub_disk_has_grub_in_the_mbr_and_the_cfg_on_the_root(tmp_path, as_root):
    disk = tmp_path / "grub.raw"
    imagedisk.make_disk(_synthetic_root(tmp_path), disk, "grub", _run)
    assert _loops_of(disk) == ""  # detached again
    mbr = disk.read_bytes()[:512]
    assert mbr[510:] == b"\x55\xaa" and b"GRUB" in mbr  # GRUB's boot.img in sector 0
    (p1,) = imagedisk.partitions(disk)["partitions"]
    root = _part(disk, p1, tmp_path / "p1.ext4")
    cfg = subprocess.run(["debugfs", "-R", "cat /boot/grub/grub.cfg", str(root)],
                         capture_output=True, text=True).stdout
    assert f"linux {KERNEL} root=/dev/vda1" in cfg
    mods = subprocess.run(["debugfs", "-R", "ls -p /boot/grub/i386-pc", str(root)],
                          capture_output=True, text=True).stdout
    assert "/normal.mod/" in mods  # grub-install's modules on the root, read at boot


def test_grub_efi_disk_has_the_removable_path_and_finds_its_root(tmp_path, as_root):
    disk = tmp_path / "efi.raw"
    imagedisk.make_disk(_synthetic_root(tmp_path), disk, "grub-efi", _run)
    assert _loops_of(disk) == ""
    p1, p2 = imagedisk.partitions(disk)["partitions"]
    assert p2["type"] == ESP
    esp = _part(disk, p2, tmp_path / "esp.fat")
    efi = tmp_path / "BOOTX64.EFI"
    subprocess.run(["mcopy", "-i", str(esp), "::/EFI/BOOT/BOOTX64.EFI", str(efi)], check=True)
    assert efi.read_bytes()[:2] == b"MZ"  # a PE image, as UEFI loads
    root = _part(disk, p1, tmp_path / "p1.ext4")
    uuid = subprocess.run(["blkid", "-s", "UUID", "-o", "value", str(root)],
                          capture_output=True, text=True).stdout.strip()
    assert uuid and f"--fs-uuid --set=root {uuid}".encode() in efi.read_bytes()


def _gpt_qcow2(tmp_path: Path, bootloader: str = "grub-efi") -> Path:
    raw = _table_only(tmp_path / "disk.raw", bootloader, 64 << 20)
    out = tmp_path / "disk.qcow2"
    subprocess.run([require_tool("qemu-img"), "convert", "-f", "raw", "-O", "qcow2", str(raw),
                    str(out)], check=True)
    return out


def test_boot_auto_picks_uefi_for_an_esp_and_qemu_gets_ovmf(tmp_path):
    from vhpc.environments import kind
    from vhpc.environments.options import HostFacts

    if not userimage.OVMF_CODE.is_file():
        missing("OVMF not installed (apt-get install ovmf)")
    disk = _gpt_qcow2(tmp_path)
    env = kind.build("vm", "vm", VmOptions(image=str(disk), vcpus=1, memory=256, accel="tcg"),
                     HostFacts.live())
    try:
        boot = env._image_boot()
        assert env.boot_mode == "uefi" and boot.kernel is None and boot.firmware == "ovmf"
        work = tmp_path / "session"
        work.mkdir()
        seed = work / "seed.iso"
        seed.write_bytes(b"\0" * 2048)
        argv = userimage.image_argv(userimage.GuestConfig(vcpus=1, memory_mib=256,
                                                          machine="pc"),
                                    boot, work, seed, userimage.free_port())
        assert "-bios" not in argv and "-kernel" not in argv
        drives = [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]
        assert ("if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd"
                in drives)
        assert f"if=pflash,format=raw,unit=1,file={work}/OVMF_VARS.fd" in drives
        vars_ = userimage.private_vars(work)  # what each boot makes before QEMU starts
        assert vars_.read_bytes() == Path("/usr/share/OVMF/OVMF_VARS_4M.fd").read_bytes()
        assert stat.S_IMODE(vars_.stat().st_mode) == 0o600
    finally:
        env.close()


@pytest.mark.parametrize("given, layout, error", [
    ("uefi", "grub", "no EFI system partition on a GPT disk: .*give boot=firmware"),
    ("firmware", "none", "bare root filesystem without a bootloader: .*give boot=kernel"),
])
def test_a_boot_the_disk_cannot_do_is_refused(tmp_path, given, layout, error):
    from vhpc.environments import kind
    from vhpc.environments.options import HostFacts

    if layout == "none":
        disk = tmp_path / "root.ext4"
        with open(disk, "wb") as f:
            f.truncate(8 << 20)
        subprocess.run([require_tool("mke2fs"), "-q", "-t", "ext4", str(disk)], check=True)
    else:
        disk = _gpt_qcow2(tmp_path, layout)
    env = kind.build("vm", "vm", VmOptions(image=str(disk), boot=given), HostFacts.live())
    try:
        with pytest.raises(userimage.UserImageError, match=error):
            env._image_boot()
    finally:
        env.close()


def test_libvirt_domain_for_uefi_is_valid_with_a_private_nvram(tmp_path):
    from vhpc import placement as P
    from vhpc import topology as T

    if not userimage.OVMF_CODE.is_file():
        missing("OVMF not installed (apt-get install ovmf)")
    topo = T.from_synthetic("pack:1 numa:1 l3:1 core:2 pu:1")
    plan = P.place(topo, P.PlacementRequest(vcpus=2, memory_mib=1024, policy="compact"))
    work = tmp_path / "run"
    work.mkdir()
    boot = userimage.ImageBoot(work / "overlay.qcow2", "vhpc-img", firmware="ovmf")
    dom = image_domain(plan, accel="tcg", emulator_cpus=None, name="vhpc-img-1-0", image=boot,
                       workdir=work, seed=work / "seed.iso", port=40123)
    path = tmp_path / "dom.xml"
    path.write_text(lx.to_text(dom))
    res = subprocess.run([require_tool("virt-xml-validate"), str(path), "domain"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    loader = dom.find("os/loader")
    assert (loader.get("type"), loader.get("readonly"), loader.text) == (
        "pflash", "yes", "/usr/share/OVMF/OVMF_CODE_4M.fd")
    nvram = dom.find("os/nvram")
    assert nvram.text == f"{work}/OVMF_VARS.fd"  # the guest's own copy, in its session folder
    assert nvram.get("template") == "/usr/share/OVMF/OVMF_VARS_4M.fd"
    assert dom.find("os/boot").get("dev") == "hd" and dom.find("os/kernel") is None


def test_the_bootloader_keys_the_image_cache_and_none_keeps_the_old_key():
    src = ["deb http://mirror.example/debian bookworm main"]
    bare = imagebuild.cache_key(imagebuild.inputs("bookworm", [], src))
    assert bare == imagebuild.cache_key(imagebuild.inputs("bookworm", [], src, "none"))
    keys = {bare, *(imagebuild.cache_key(imagebuild.inputs("bookworm", [], src, b))
                    for b in ("grub", "grub-efi"))}
    assert len(keys) == 3
    with pytest.raises(imagebuild.ImageBuildError, match="--bootloader 'lilo'"):
        imagebuild.inputs("bookworm", [], src, "lilo")
