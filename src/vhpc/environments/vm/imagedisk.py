"""A bootable disk around an image's root filesystem, laid out by Debian's own tools.

``vhpc image build --bootloader grub|grub-efi`` puts the ext4 root filesystem ``debvm-create``
made into partition 1 of a disk, as distribution cloud images are laid out, and installs GRUB:

* ``grub``: an MBR (``label: dos``) disk, partition 1 the bootable root; ``grub-install
  --target=i386-pc`` (Debian's grub-pc-bin) writes GRUB's boot sector into the MBR and its core
  image into the gap before partition 1; SeaBIOS starts it (``boot=firmware``);
* ``grub-efi``: a GPT disk, partition 1 the root, partition 2 an EFI system partition (FAT,
  type C12A7328-F81F-11D2-BA4B-00A0C93EC93B, UEFI 2.10 section 5.3.3) holding the removable
  media path ``EFI/BOOT/BOOTX64.EFI`` (UEFI 2.10 section 3.5.1.1), a GRUB made by
  ``grub-mkstandalone -O x86_64-efi`` (grub-efi-amd64-bin); OVMF starts it (``boot=uefi``).

Both GRUBs read the same ``/boot/grub/grub.cfg`` on the root (:func:`grub_cfg`): the image's own
kernel and initramfs, ``root=/dev/vda1``, the console on the first serial port.  The partition
table is written by ``sfdisk`` (util-linux, :func:`partition_script`), the root copied in with
``dd``, the disk attached with ``losetup -P``/``partx -a`` (root only: there is no udev to make
the partition nodes) and detached again whatever happens.  Every step runs in the build's
:class:`~vhpc.host.contained.BuildBox`, which journals the loop device's backing file, the
mount point and the temporary folders before they are made, so the next vhpc undoes what a
killed one left.  :func:`partitions` reads a disk's
table back with ``sfdisk --json``; ``boot=auto`` picks the firmware from it (:func:`boot_for`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from vhpc.core.errors import VhpcError
from vhpc.core.paths import write_atomic
from vhpc.host.contained import BuildBox

#: The layouts ``--bootloader`` offers; ``none`` is the bare root filesystem.
BOOTLOADERS = ("none", "grub", "grub-efi")
#: Partition type GUIDs (UEFI 2.10 table 5-7; the Linux one from the Discoverable Partitions
#: Specification) and the MBR type of a Linux filesystem.
ESP_TYPE = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
LINUX_GPT_TYPE = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
LINUX_MBR_TYPE = "83"
#: Partition 1 starts at 1 MiB (sector 2048), where fdisk and parted put it: the gap before it
#: holds GRUB's core image on an MBR disk.
FIRST_SECTOR = 2048
SECTOR = 512
#: Size of the EFI system partition: GRUB's standalone image is about 5 MiB.
ESP_MIB = 32
#: Kernel command line of the image's GRUB entry: root on partition 1 of the first virtio disk,
#: the console on the first serial port, and ``no_timer_check`` (kernel-parameters.txt: skip
#: the test for broken timer interrupts), as RHEL's and CentOS's cloud images boot: under TCG
#: on a loaded host that test failed once in four boots here ("IO-APIC + timer doesn't work",
#: a kernel panic under OVMF).
KERNEL_ARGS = "root=/dev/vda1 ro console=ttyS0,115200n8 no_timer_check"


class ImageDiskError(VhpcError):
    """The disk cannot be made; the message says what to install or change."""


def tool(name: str, package: str) -> str:
    """Path of ``name``; raises ImageDiskError naming the Debian ``package`` when missing."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if Path(p).exists()), None)
    if path is None:
        raise ImageDiskError(f"vhpc image build --bootloader needs {name}: "
                             f"apt-get install {package}")
    return path


def partition_script(bootloader: str, root_bytes: int) -> str:
    """The ``sfdisk`` script (sfdisk(8), "Input format") of a disk whose partition 1 holds a
    root filesystem of ``root_bytes``: one bootable Linux partition on an MBR for ``grub``;
    GPT with the root first and an :data:`ESP_MIB` MiB EFI system partition second for
    ``grub-efi``.  Raises ValueError for another bootloader or a size not in whole sectors."""
    if root_bytes <= 0 or root_bytes % SECTOR:
        raise ValueError(f"root filesystem of {root_bytes} bytes: not whole sectors")
    sectors = root_bytes // SECTOR
    if bootloader == "grub":
        return (f"label: dos\n"
                f"start={FIRST_SECTOR}, size={sectors}, type={LINUX_MBR_TYPE}, bootable\n")
    if bootloader == "grub-efi":
        return (f"label: gpt\n"
                f"start={FIRST_SECTOR}, size={sectors}, type={LINUX_GPT_TYPE}, name=root\n"
                f"size={ESP_MIB}MiB, type={ESP_TYPE}, name=esp\n")
    raise ValueError(f"no disk layout for bootloader {bootloader!r}")


def disk_bytes(bootloader: str, root_bytes: int) -> int:
    """Size of the disk file for :func:`partition_script`: the 1 MiB before partition 1, the
    root, and for GPT the ESP and 1 MiB for the backup table at the end."""
    extra = (ESP_MIB + 1) << 20 if bootloader == "grub-efi" else 0
    return FIRST_SECTOR * SECTOR + root_bytes + extra


def grub_cfg(kernel: str, initrd: str) -> str:
    """The root's ``/boot/grub/grub.cfg`` (GRUB manual, "Configuration file"): output on the
    serial port and the screen, one entry booting ``kernel`` and ``initrd`` (paths inside the
    root filesystem) with :data:`KERNEL_ARGS`.  GRUB itself puts ``BOOT_IMAGE=<kernel>`` first
    on the kernel's command line."""
    return ("serial --unit=0 --speed=115200\n"
            "terminal_input serial console\n"
            "terminal_output serial console\n"
            "set timeout=1\n"
            "menuentry 'Debian (vhpc image)' {\n"
            "  insmod part_msdos\n  insmod part_gpt\n  insmod ext2\n"
            f"  linux {kernel} {KERNEL_ARGS}\n"
            f"  initrd {initrd}\n"
            "}\n")


def efi_stub_cfg(root_uuid: str) -> str:
    """The grub.cfg embedded in the standalone EFI GRUB: a standalone GRUB's root is its own
    memdisk, so it finds the root filesystem by its UUID and reads that root's
    ``/boot/grub/grub.cfg`` (:func:`grub_cfg`)."""
    return ("insmod part_gpt\ninsmod fat\ninsmod ext2\n"
            f"search --no-floppy --fs-uuid --set=root {root_uuid}\n"
            "configfile /boot/grub/grub.cfg\n")


def partitions(disk: Path) -> dict:
    """The partition table of the raw disk file ``disk`` as ``sfdisk --json`` gives it
    (``{"label": "dos"|"gpt", "partitions": [{"node", "start", "size", "type", ...}]}``),
    or ``{}`` when the disk has none.  Raises ImageDiskError when sfdisk is missing."""
    res = subprocess.run([tool("sfdisk", "fdisk"), "--json", str(disk)], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=60)
    if res.returncode != 0 or not res.stdout.strip():
        return {}
    return json.loads(res.stdout).get("partitiontable", {})


def boot_for(table: dict) -> str:
    """The boot a partition ``table`` (:func:`partitions`) calls for: ``uefi`` for a GPT disk
    with an EFI system partition, else ``firmware`` (SeaBIOS and the MBR's bootloader)."""
    if table.get("label") == "gpt" and any(
            p.get("type", "").upper() == ESP_TYPE for p in table.get("partitions", [])):
        return "uefi"
    return "firmware"


Run = Callable[[list[str], str], None]


@contextlib.contextmanager
def attached(disk: Path, run: Run, box: BuildBox) -> Iterator[str]:
    """The raw ``disk`` as a loop device (``losetup -P``) with its partition nodes (``partx -a``:
    no udev makes them here); yields ``/dev/loopN``; detached afterwards (``partx -d``, ``losetup
    -d``), also on error. ``disk`` is journalled in ``box`` as a loop device's backing file before
    it is attached.  Raises ImageDiskError when losetup cannot attach it (it needs root)."""
    box.record("loops", disk)
    res = box.run([tool("losetup", "mount"), "-f", "--show", "-P", str(disk)], timeout=60)
    if res.returncode != 0:
        raise ImageDiskError(f"losetup cannot attach the disk ({res.stderr.strip()}): "
                             "vhpc image build --bootloader runs as root")
    loop = res.stdout.strip()
    try:
        if not Path(loop + "p1").exists():
            run([tool("partx", "util-linux"), "-a", loop], "partx")
        yield loop
    finally:
        subprocess.run([tool("partx", "util-linux"), "-d", loop], capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=60)
        if subprocess.run([tool("losetup", "mount"), "-d", loop], capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=60).returncode == 0:
            box.forget("loops", disk)


@contextlib.contextmanager
def mounted(device: str, run: Run, box: BuildBox) -> Iterator[Path]:
    """``device`` mounted on a fresh temporary folder (journalled in ``box`` before the
    mount), unmounted afterwards; the folder is removed only once empty (never through a
    mount that did not come off)."""
    mnt = Path(tempfile.mkdtemp(prefix="vhpc-mnt-"))
    box.record("paths", mnt)
    box.record("mounts", mnt)
    try:
        run([tool("mount", "mount"), device, str(mnt)], "mount")
        try:
            yield mnt
        finally:
            subprocess.run([tool("umount", "mount"), str(mnt)], capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=120)
    finally:
        try:
            mnt.rmdir()  # fails while still mounted: then the next vhpc unmounts it
            box.forget("mounts", mnt)
            box.forget("paths", mnt)
        except OSError:
            pass


def boot_files(root: Path) -> tuple[str, str]:
    """(kernel, initrd) paths inside the mounted ``root``: the targets of Debian's ``/vmlinuz``
    and ``/initrd.img`` links.  Raises ImageDiskError when the root has no kernel."""
    found = []
    for link in ("vmlinuz", "initrd.img"):
        if not (root / link).is_symlink():
            raise ImageDiskError(f"the image's root has no /{link}: it needs a Debian kernel "
                                 "(linux-image-*)")
        found.append("/" + str((root / link).readlink()).lstrip("/"))
    return found[0], found[1]


def make_disk(root_fs: Path, disk: Path, bootloader: str, run: Run,
              box: BuildBox | None = None) -> None:
    """Write the raw ``disk`` for ``bootloader`` (``grub`` or ``grub-efi``) around the ext4
    root filesystem file ``root_fs`` (module docstring).  ``run(argv, what)`` runs a step,
    logging it and raising on failure; the other steps run in ``box`` (default: plain
    children, nothing journalled).  Raises ImageDiskError when a tool is missing or a step
    fails."""
    box = box if box is not None else BuildBox(contain=False)
    size = root_fs.stat().st_size
    with open(disk, "xb") as f:  # a new, sparse file in the build's own folder
        f.truncate(disk_bytes(bootloader, size))
    sfdisk = tool("sfdisk", "fdisk")
    res = box.run([sfdisk, "--no-reread", "--no-tell-kernel", str(disk)],
                  input=partition_script(bootloader, size), timeout=60)
    if res.returncode != 0:
        raise ImageDiskError(f"sfdisk failed: {res.stderr.strip()}")
    run(["dd", f"if={root_fs}", f"of={disk}", "bs=1M", f"seek={FIRST_SECTOR * SECTOR}",
         "oflag=seek_bytes", "conv=notrunc,sparse", "status=none"], "dd")
    with attached(disk, run, box) as loop, mounted(loop + "p1", run, box) as root:
        kernel, initrd = boot_files(root)
        (root / "boot" / "grub").mkdir(parents=True, exist_ok=True)
        write_atomic(root / "boot" / "grub" / "grub.cfg", grub_cfg(kernel, initrd))
        if bootloader == "grub":
            run([tool("grub-install", "grub2-common"), "--target=i386-pc",
                 f"--boot-directory={root / 'boot'}", "--modules=part_msdos ext2",
                 "--no-floppy", loop], "grub-install")
        else:
            uuid = box.run([tool("blkid", "util-linux"), "-s", "UUID", "-o", "value",
                            loop + "p1"], timeout=60).stdout.strip()
            if not uuid:
                raise ImageDiskError("blkid found no UUID on the root filesystem")
            _efi_partition(loop + "p2", uuid, run, box)
        run(["sync"], "sync")


def _efi_partition(esp: str, root_uuid: str, run: Run, box: BuildBox) -> None:
    """Format ``esp`` as FAT and put a standalone GRUB at its removable media path (mtools:
    the FAT is written without being mounted); the temporary folder is journalled in
    ``box``."""
    run([tool("mkfs.vfat", "dosfstools"), "-n", "ESP", esp], "mkfs.vfat")
    with tempfile.TemporaryDirectory(prefix="vhpc-efi-") as tmp:
        box.record("paths", tmp)
        cfg = write_atomic(Path(tmp) / "grub.cfg", efi_stub_cfg(root_uuid))
        stub = Path(tmp) / "BOOTX64.EFI"
        run([tool("grub-mkstandalone", "grub-common"), "-O", "x86_64-efi",
             "-o", str(stub), f"boot/grub/grub.cfg={cfg}"], "grub-mkstandalone")
        # mtools writes into the FAT without mounting it (no vfat module in a container)
        run([tool("mmd", "mtools"), "-i", esp, "::/EFI", "::/EFI/BOOT"], "mmd")
        run([tool("mcopy", "mtools"), "-i", esp, str(stub), "::/EFI/BOOT/BOOTX64.EFI"],
            "mcopy")
    box.forget("paths", tmp)
