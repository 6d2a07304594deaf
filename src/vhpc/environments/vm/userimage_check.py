"""What ``vm:image=FILE`` may name, checked at once, before ``qemu-img`` or a guest runs.

A file that cannot be a disk (0 bytes, a text file) would otherwise boot and fail only when
the guest never answers, after the whole ``boot_timeout``; a link to ``/etc/shadow`` would be
attached to a guest as its disk.  :func:`check_image_file` refuses, in well under a second:

* a file whose first bytes are neither a disk-image format QEMU reads (the magic numbers of
  qcow2, QED, VMDK, VDI, VHDX, VPC: ``qemu-img`` then checks the rest) nor, in a file of at
  least :data:`MIN_DISK_BYTES`, a raw disk: an MBR or a GPT's protective MBR (0x55AA at
  byte 510, "Master Boot Record", UEFI 2.10 §5.2.1), or a filesystem superblock (ext2/3/4,
  XFS, Btrfs);
* unless ``--allow-system-image`` (``$VHPC_ALLOW_SYSTEM_IMAGE=1``): a path that resolves
  outside the user's own places (home, the current folder, the temporary folder), or to a file
  the user could not read without root's privilege (judged by its mode bits for the invoking
  user: ``$SUDO_UID`` under sudo).
"""

from __future__ import annotations

import os
import pwd
import stat
import tempfile
from pathlib import Path

from vhpc.environments.base import EnvError
from vhpc.environments.vm.options import ALLOW_SYSTEM_IMAGE_ENV

#: smallest file taken for a disk: a qcow2 of an empty 1 MiB disk is 192 KiB, and a raw disk
#: with a partition table or filesystem that boots is far larger
MIN_DISK_BYTES = 64 * 1024

#: (offset, magic) of the image formats QEMU reads (QEMU's block drivers' probe functions)
IMAGE_MAGIC = ((0, b"QFI\xfb"), (0, b"QED\x00"), (0, b"KDMV"), (0, b"# Disk DescriptorFile"),
               (64, b"\x7f\x10\xda\xbe"), (0, b"vhdxfile"), (0, b"conectix"))
#: (offset, magic) of a raw disk: MBR or GPT protective MBR boot signature, GPT header,
#: ext2/3/4 (0xEF53 at 1024 + 56), XFS ("XFSB"), Btrfs ("_BHRfS_M" at 64 KiB + 64)
RAW_MAGIC = ((510, b"\x55\xaa"), (512, b"EFI PART"), (1080, b"\x53\xef"), (0, b"XFSB"),
             (65600, b"_BHRfS_M"))


class ImageFileError(EnvError):
    """``vm:image=`` names a file that is not a disk image, or one vhpc will not attach to a
    guest without ``--allow-system-image``; the message says what to change."""


def _user() -> tuple[int, list[int], Path | None]:
    """(uid, group ids, home) of the user who invoked vhpc: ``$SUDO_UID`` under sudo."""
    uid = os.geteuid()
    if uid == 0 and os.environ.get("SUDO_UID", "").isdigit():
        uid = int(os.environ["SUDO_UID"])
    try:
        entry = pwd.getpwuid(uid)
        groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
        return uid, groups, Path(entry.pw_dir)
    except (KeyError, OSError):
        return uid, [os.getegid()], None


def readable_without_root(st: os.stat_result, uid: int, groups: list[int]) -> bool:
    """Whether the mode bits of ``st`` let ``uid`` (in ``groups``) read the file without
    root's CAP_DAC_OVERRIDE (the owner's, else the group's, else the others' bit)."""
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IRUSR)
    if st.st_gid in groups:
        return bool(st.st_mode & stat.S_IRGRP)
    return bool(st.st_mode & stat.S_IROTH)


def _places(home: Path | None) -> list[Path]:
    cwd = Path.cwd().resolve()
    places = [Path(tempfile.gettempdir()).resolve(), Path("/tmp"), Path("/var/tmp")]
    places += [p.resolve() for p in (home,) if p is not None and p != Path("/")]
    return places + ([cwd] if cwd != Path("/") else [])


def check_image_file(path: str | os.PathLike, allow_system: bool | None = None) -> Path:
    """``path`` resolved, when it may be a guest's disk (see the module doc); ``allow_system``
    defaults to ``$VHPC_ALLOW_SYSTEM_IMAGE == "1"``.  Reads at most 64 KiB + 72 bytes.
    Raises ImageFileError (one line naming the file and what to change)."""
    p = Path(path)
    if allow_system is None:
        allow_system = os.environ.get(ALLOW_SYSTEM_IMAGE_ENV) == "1"
    try:
        real = p.resolve(strict=True)
        st = os.stat(real)
    except (OSError, RuntimeError):
        raise ImageFileError(f"image={p}: no such readable file") from None
    if not stat.S_ISREG(st.st_mode):
        raise ImageFileError(f"image={p}: not a regular file: give a disk image file")
    uid, groups, home = _user()
    if not allow_system:
        if not any(real.is_relative_to(place) for place in _places(home)):
            raise ImageFileError(f"image={p} resolves to {real}, outside your home, the current "
                                 "folder and the temporary folder: copy the image there, or "
                                 "give vhpc --allow-system-image")
        if not readable_without_root(st, uid, groups):
            raise ImageFileError(f"image={p} ({real}) is not readable by you without root: "
                                 "give an image of your own, or vhpc --allow-system-image")
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        head = os.pread(fd, 65600 + 8, 0)
    finally:
        os.close(fd)
    if any(head[at:at + len(magic)] == magic for at, magic in IMAGE_MAGIC):
        return real  # an image format: qemu-img judges the rest (a damaged one is named)
    if st.st_size < MIN_DISK_BYTES:
        raise ImageFileError(f"image={p} has {st.st_size} bytes, too small to be a disk (a "
                             f"raw disk has at least {MIN_DISK_BYTES // 1024} KiB): give a "
                             "qcow2 or raw disk image (vhpc image build makes one)")
    if not any(head[at:at + len(magic)] == magic for at, magic in RAW_MAGIC):
        raise ImageFileError(f"image={p} is neither a disk image (qcow2, VMDK, VDI, VHDX...) "
                             "nor a raw disk with a partition table or filesystem: give a "
                             "disk image (vhpc image build makes one)")
    return real
