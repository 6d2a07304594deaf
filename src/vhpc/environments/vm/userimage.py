"""A user's own guest image (``vm:image=FILE``): inspect it, boot it from an overlay, reach it.

The image is the user's disk (qcow2 or raw) with its own kernel, distro and MPI.  vhpc never
writes it:

* :func:`inspect` reads it through ``qemu-img`` (QEMU's own tool, qemu-img(1)) with the format
  given or named by the file's suffix, refuses a format that does not match the contents, a
  qcow2 that names a backing or external data file (a guest could read that host file
  through it), and a qcow2 that ``qemu-img check`` finds corrupt; it records the image's
  SHA-256 and whether the disk is a bare filesystem (an ext2/3/4 superblock at byte 1024) or
  a partitioned disk with its own bootloader;
* :func:`create_overlay` makes a qcow2 overlay backed by the image (``qemu-img create -b``):
  the guest writes only into the overlay, QEMU opens the image read-only;
* the image is pinned from check to boot (:class:`PinnedImage`): :func:`inspect` holds the
  file open and hashes what it holds; before every boot (and again once QEMU has opened its
  disks) the file is checked to be the one checked, so a file replaced later (a qcow2 backed by
  a host file, say) fails that boot in one line; the qemu backend hands QEMU the held file
  descriptor itself (``-add-fd``) as a node with ``backing: null``, libvirt an explicit
  backing chain that ends at the image, so the overlay's header never leads QEMU elsewhere;
* :func:`extract_kernel` (direct kernel boot, ``boot=kernel``, the default for a bare
  filesystem) copies the image's own ``/vmlinuz`` and ``/initrd.img`` out of its root
  filesystem with ``debugfs`` (e2fsprogs), which opens it read-only;
* each boot (:class:`ImageGuest`) gets a fresh ed25519 key pair for the login and another for
  the guest's sshd, written into a cloud-init NoCloud seed (``cloud-localds`` from
  cloud-image-utils: an ISO labelled ``cidata`` with ``user-data`` and ``meta-data``,
  https://cloudinit.readthedocs.io/en/latest/reference/datasources/nocloud.html); the guest's
  sshd is reached on a loopback port forward of QEMU's user-mode network
  (``hostfwd=tcp:127.0.0.1:PORT-:22``, ``restrict=on``: the guest reaches nothing else), its
  host key pinned, and everything after that goes through the ``ssh`` environment's machinery
  (:class:`~vhpc.environments.ssh.environment.SshEnvironment`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

from vhpc.core.paths import cache_dir, trusted_folder, write_atomic
from vhpc.environments.base import EnvError
from vhpc.environments.ssh.environment import SshEnvironment, SshUnanswered, unanswered
from vhpc.environments.vm import imagedisk
from vhpc.environments.vm.agent import GuestHung
from vhpc.environments.vm.userimage_check import check_image_file
from vhpc.environments.vm.backends.qemu import (QEMU, GuestConfig, QemuGuest, qemu_opt, qmp_connect,
                                                spawn)

#: The login cloud-init creates in the guest for vhpc (no password, no sudo).
GUEST_USER = "vhpc"
#: Seconds the guest may go on refusing the session key after its sshd first answered
#: (cloud-init installs the key before sshd starts on Debian; this is a margin).
AUTH_GRACE = 60.0
#: The name under which the session's pinned host key is looked up (ssh_config(5)).
HOST_KEY_ALIAS = "vhpc-image-guest"
#: Seconds to wait before each further ssh connection to a booted guest that did not answer
#: (the banner exchange included): a loaded host may leave its sshd unscheduled for tens of
#: seconds (a campaign at load 7 saw a banner exchange time out).  Then the guest counts as hung
#: (GuestHung): it is killed and a fresh one booted (ImageEnvironment).
RETRY_WAITS = (5.0, 15.0, 30.0)


class UserImageError(EnvError):
    """The user's image cannot be used as it is; the message says what to change."""


def identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """(device, inode, size, mtime ns, ctime ns) of ``st``: equal for two stats of one file
    only while nothing was written to it, renamed over it or changed its metadata (any write
    changes ``st_ctime``, which a user cannot set back: utimensat(2))."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class PinnedImage:
    """The checked image, held open read-only from its check to the last boot.

    ``path`` (resolved), ``fd`` (the open file: the qemu backend hands it to QEMU, so a path
    renamed over later is never read), ``sha256`` of what ``fd`` held when checked and its
    :func:`identity` then.  :meth:`verify` before every boot; :meth:`close` when the
    environment closes.  Raises UserImageError (one line) when the file cannot be opened."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as exc:
            raise UserImageError(f"image={path}: cannot be opened ({exc.strerror})") from None
        self.ident = identity(os.fstat(self.fd))
        self.sha256 = sha256_fd(self.fd)

    def verify(self) -> None:
        """Check that ``path`` still names the file checked, unchanged (two stats; the file is
        hashed again only when a stat differs, and accepted when its SHA-256 is the one
        recorded).  Raises UserImageError naming the image and both digests otherwise."""
        if self.fd < 0:
            raise UserImageError(f"image={self.path}: no longer held open (the environment "
                                 "was closed)")
        try:
            now = identity(os.stat(self.path))
        except OSError:
            now = None
        if now == self.ident and identity(os.fstat(self.fd)) == self.ident:
            return
        if now is None:
            raise UserImageError(f"image={self.path} is gone since vhpc checked it: restore "
                                 "it, or start a new campaign")
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as exc:  # a link now, or unreadable
            raise UserImageError(f"image={self.path} changed since vhpc checked it (cannot be "
                                 f"opened: {exc.strerror}): restore it, or start a new "
                                 "campaign") from None
        # a device or FIFO renamed into place is never read (/dev/zero would hash forever)
        digest = sha256_fd(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else "not a regular file"
        if digest != self.sha256:
            os.close(fd)
            raise UserImageError(
                f"image={self.path} changed since vhpc checked it (SHA-256 {self.sha256[:12]} "
                f"then, {digest[:12]} now): a campaign boots the one image it checked; "
                "restore it, or start a new campaign")
        os.close(self.fd)  # the same bytes (copied back, touched): hold the file there now
        self.fd, self.ident = fd, identity(os.fstat(fd))

    def close(self) -> None:
        """Let the file go (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass(frozen=True)
class UserImage:
    """An inspected image: ``path`` (absolute), ``format`` (``qcow2``/``raw``),
    ``virtual_bytes`` (disk size the guest sees), ``file_bytes`` (size on the host), ``sha256``
    (hex digest of the file), ``layout`` (``filesystem``: a bare ext2/3/4 root without a
    partition table, booted with its kernel given directly; ``disk``: partitioned, booted
    through the firmware and the image's bootloader)."""

    path: Path
    format: str
    virtual_bytes: int
    file_bytes: int
    sha256: str
    layout: str
    pin: PinnedImage | None = field(default=None, compare=False, repr=False)

    def record(self) -> dict[str, Any]:
        """JSON form for the fingerprint."""
        return {"path": str(self.path), "format": self.format, "sha256": self.sha256,
                "virtual_bytes": self.virtual_bytes, "file_bytes": self.file_bytes,
                "layout": self.layout}


def require(tool: str, package: str) -> str:
    """Path of ``tool``; raises UserImageError naming the Debian ``package`` when missing."""
    path = shutil.which(tool) or (tool if os.path.isabs(tool) and os.path.exists(tool) else None)
    if path is None:
        raise UserImageError(f"vm:image needs {tool}: apt-get install {package}")
    return path


def _qemu_img(*args: str, timeout: float = 600.0) -> subprocess.CompletedProcess:
    return subprocess.run([require("qemu-img", "qemu-utils"), *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _last_line(text: str, fallback: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else fallback


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_fd(fd: int) -> str:
    """Hex SHA-256 of the open file ``fd`` from its start (``pread``: its offset stays)."""
    h, at = hashlib.sha256(), 0
    while block := os.pread(fd, 1 << 20, at):
        h.update(block)
        at += len(block)
    return h.hexdigest()


#: ext2/3/4 superblock magic 0xEF53 at byte 1024 + 56 of a filesystem (little endian).
EXT_MAGIC_OFFSET, EXT_MAGIC = 1080, b"\x53\xef"


def _head(path: Path, fmt: str, size: int = 2048) -> bytes:
    """The first ``size`` bytes the guest sees of the disk (``qemu-img dd`` for qcow2)."""
    if fmt == "raw":
        with open(path, "rb") as f:
            return f.read(size)
    with tempfile.TemporaryDirectory(prefix="vhpc-head-") as tmp:
        out = Path(tmp) / "head"
        res = _qemu_img("dd", "-f", fmt, "-O", "raw", f"bs={size}", "count=1", f"if={path}",
                        f"of={out}")
        if res.returncode != 0:
            raise UserImageError(f"image={path}: cannot be read: "
                                 f"{_last_line(res.stderr, 'qemu-img dd failed')}")
        return out.read_bytes()


def inspect(path: str | os.PathLike, fmt: str) -> UserImage:
    """Check the image at ``path`` as ``fmt`` (``qcow2``/``raw``) and describe it.

    Raises UserImageError (one line, what to change) when the file is missing or unreadable,
    its contents are another format or no disk at all, it is a system file
    (:func:`~vhpc.environments.vm.userimage_check.check_image_file`), a qcow2 names a backing
    or data file, or ``qemu-img check`` finds it corrupt."""
    p = Path(path)
    if not p.is_file() or not os.access(p, os.R_OK):
        raise UserImageError(f"image={p}: no such readable file")
    real = check_image_file(p)  # a disk at all, and the user's own: at once, before qemu-img
    pin = PinnedImage(real)  # held, and hashed, before qemu-img reads it
    try:
        image = _inspect(p, fmt, pin)
        pin.verify()  # what qemu-img checked is what is held
    except BaseException:
        pin.close()
        raise
    return image


def _inspect(p: Path, fmt: str, pin: PinnedImage) -> UserImage:
    """:func:`inspect` once ``p`` is pinned."""
    res = _qemu_img("info", "--output=json", str(p))  # probed: only to compare with fmt
    if res.returncode != 0:
        raise UserImageError(f"image={p}: qemu-img cannot open it: "
                             f"{_last_line(res.stderr, 'qemu-img info failed')}")
    try:
        info = json.loads(res.stdout)
    except ValueError:
        raise UserImageError(f"image={p}: qemu-img info gave no JSON") from None
    seen = info.get("format")
    if seen != fmt:
        raise UserImageError(f"image={p} holds a {seen} image, not {fmt}: give format={seen}"
                             if seen in ("qcow2", "raw") else
                             f"image={p} holds a {seen} image: convert it with qemu-img "
                             "convert -O qcow2")
    if info.get("backing-filename") or info.get("full-backing-filename"):
        raise UserImageError(f"image={p} is an overlay of {info.get('backing-filename')}: "
                             "flatten it first (qemu-img convert -O qcow2 IMAGE FLAT.qcow2)")
    data_file = (info.get("format-specific") or {}).get("data", {}).get("data-file")
    if data_file:
        raise UserImageError(f"image={p} keeps its data in {data_file}: convert it into one "
                             "file first (qemu-img convert -O qcow2 IMAGE ONE.qcow2)")
    if fmt == "qcow2":
        check = _qemu_img("check", "-f", "qcow2", "--output=json", str(p))
        if check.returncode not in (0, 3):  # 3: leaked clusters only, harmless for reading
            why = _last_line(check.stderr, "") or f"qemu-img check exit status {check.returncode}"
            try:
                corrupt = json.loads(check.stdout).get("corruptions")
                why = f"{corrupt} corruptions" if corrupt else why
            except ValueError:
                pass
            raise UserImageError(f"image={p} is damaged ({why}): qemu-img check -r all on a "
                                 "copy may repair it")
    layout = ("filesystem" if _head(p, fmt)[EXT_MAGIC_OFFSET:EXT_MAGIC_OFFSET + 2] == EXT_MAGIC
              else "disk")
    return UserImage(path=pin.path, format=fmt, virtual_bytes=int(info.get("virtual-size", 0)),
                     file_bytes=pin.ident[2], sha256=pin.sha256, layout=layout, pin=pin)


#: Bytes of a disk's start read to find its partition table: the MBR, or GPT's protective MBR,
#: header and up to 128 entries (34 sectors), well inside the first MiB.
TABLE_BYTES = 1 << 20


def partition_table(image: UserImage) -> dict:
    """The image's partition table as ``sfdisk --json`` reads it
    (:func:`~vhpc.environments.vm.imagedisk.partitions`), ``{}`` for none.  A qcow2's first
    MiB is copied out (``qemu-img dd``) into a sparse file of the disk's virtual size, so
    sfdisk finds GPT's primary header where it expects it.  Raises UserImageError when the
    image cannot be read or sfdisk is missing."""
    if image.format == "raw":
        return _table(image.path)
    with tempfile.TemporaryDirectory(prefix="vhpc-table-") as tmp:
        disk = Path(tmp) / "head.raw"
        disk.write_bytes(_head(image.path, image.format, TABLE_BYTES))
        os.truncate(disk, max(image.virtual_bytes, TABLE_BYTES))
        return _table(disk)


def _table(disk: Path) -> dict:
    try:
        return imagedisk.partitions(disk)
    except imagedisk.ImageDiskError as exc:
        raise UserImageError(str(exc).replace("vhpc image build --bootloader",
                                              "vm:image")) from None


def auto_boot(image: UserImage) -> str:
    """The boot ``boot=auto`` means for ``image``: ``kernel`` for a bare root filesystem,
    ``uefi`` for a GPT disk with an EFI system partition, else ``firmware``
    (:func:`~vhpc.environments.vm.imagedisk.boot_for`)."""
    if image.layout == "filesystem":
        return "kernel"
    return imagedisk.boot_for(partition_table(image))


def check_boot(image: UserImage, mode: str) -> None:
    """Refuse a ``boot=`` (``firmware``/``uefi``) the image cannot boot with: a bare
    filesystem has no bootloader, and UEFI needs a GPT disk with an EFI system partition.
    Raises UserImageError saying which boot= to give."""
    if mode == "kernel":
        return
    if image.layout == "filesystem":
        raise UserImageError(f"image={image.path} is a bare root filesystem without a "
                             f"bootloader: boot={mode} cannot start it; give boot=kernel")
    if mode == "uefi" and auto_boot(image) != "uefi":
        raise UserImageError(f"image={image.path} has no EFI system partition on a GPT disk: "
                             "boot=uefi cannot start it; give boot=firmware")


def create_overlay(image: UserImage, dest: Path) -> Path:
    """A qcow2 overlay at ``dest`` backed by ``image`` (read-only for QEMU: every guest write
    lands in ``dest``), of the image's checked virtual size (``-u``: qemu-img does not open the
    image again).  Raises UserImageError when qemu-img refuses."""
    res = _qemu_img("create", "-q", "-f", "qcow2", "-F", image.format, "-b", str(image.path),
                    "-u", str(dest), str(image.virtual_bytes))
    if res.returncode != 0:
        raise UserImageError(f"cannot create an overlay of {image.path} in {dest.parent}: "
                             f"{_last_line(res.stderr, 'qemu-img create failed')}")
    return dest


# ---------------------------------------------------------------- direct kernel boot


#: A path inside the image that debugfs reads as one word.
SAFE_PATH = re.compile(r"^/[A-Za-z0-9._+/-]+$")


def _debugfs(fs: Path, request: str) -> subprocess.CompletedProcess:
    """``debugfs -R REQUEST FS`` (read-only: no ``-w``)."""
    return subprocess.run([require("debugfs", "e2fsprogs"), "-R", request, str(fs)],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def _boot_file(fs: Path, link: str, prefix: str) -> str:
    """Path inside the filesystem of the file ``link`` (``/vmlinuz``) points at, else the last
    ``/boot/<prefix>*`` in version order."""
    res = _debugfs(fs, f"stat {link}")
    m = re.search(r'Fast link dest: "([^"]+)"', res.stdout)
    if m:
        target = m.group(1) if m.group(1).startswith("/") else "/" + m.group(1)
        # the image is not trusted: a name that debugfs would read as more than one word
        if not SAFE_PATH.match(target) or "/../" in target + "/":
            raise UserImageError(f"the image's {link} points at {target!r}: give boot=firmware "
                                 "or link it to a file under /boot")
        return target
    listing = _debugfs(fs, "ls -p /boot").stdout
    names = [f.split("/")[5] for f in listing.splitlines() if f.count("/") >= 6]
    found = sorted((n for n in names if n.startswith(prefix) and SAFE_PATH.match("/" + n)),
                   key=lambda n: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", n)])
    if not found:
        raise UserImageError(f"no {link} or /boot/{prefix}* in the image's root filesystem: "
                             "give an image with a kernel (linux-image-*) or boot=firmware")
    return "/boot/" + found[-1]


def extract_kernel(image: UserImage) -> tuple[Path, Path]:
    """The image's own kernel and initramfs (``/vmlinuz``, ``/initrd.img`` or the newest in
    ``/boot``), copied out of its root filesystem with debugfs, cached by the image's SHA-256
    under ``cache_dir()/image-kernels``.  Only a bare-filesystem image (``layout ==
    "filesystem"``) has its root where debugfs finds it.  Raises UserImageError."""
    if image.layout != "filesystem":
        raise UserImageError(f"image={image.path} is a partitioned disk: boot=kernel needs a "
                             "bare root filesystem; use boot=firmware (its bootloader)")
    what = "the folder of images' kernels"
    dest = trusted_folder(trusted_folder(cache_dir() / "image-kernels", what)
                          / image.sha256[:32], what)
    kernel, initrd = dest / "vmlinuz", dest / "initrd.img"
    if kernel.is_file() and initrd.is_file():
        return kernel, initrd
    with tempfile.TemporaryDirectory(prefix="vhpc-fs-", dir=dest.parent) as tmp:
        fs = image.path
        if image.format != "raw":  # debugfs reads a plain file: a sparse raw copy, then gone
            fs = Path(tmp) / "root.raw"
            res = _qemu_img("convert", "-f", image.format, "-O", "raw", str(image.path), str(fs))
            if res.returncode != 0:
                raise UserImageError(f"image={image.path}: cannot be read: "
                                     f"{_last_line(res.stderr, 'qemu-img convert failed')}")
        for link, prefix, out in (("/vmlinuz", "vmlinuz-", kernel),
                                  ("/initrd.img", "initrd.img-", initrd)):
            inside = _boot_file(fs, link, prefix)
            part = Path(tmp) / out.name
            res = _debugfs(fs, f"dump {inside} {part}")
            if not part.is_file() or part.stat().st_size == 0:
                raise UserImageError(f"cannot copy {inside} out of image={image.path}: "
                                     f"{_last_line(res.stderr, 'debugfs failed')}")
            if image.pin is not None:  # read from the file checked: cached under its SHA-256
                image.pin.verify()
            os.replace(part, out)
    return kernel, initrd


# ---------------------------------------------------------------- cloud-init seed


def keygen(path: Path, comment: str) -> str:
    """A new ed25519 key pair at ``path`` / ``path.pub`` (ssh-keygen(1), no passphrase);
    returns the public key line.  Raises UserImageError without ssh-keygen."""
    subprocess.run([require("ssh-keygen", "openssh-client"), "-q", "-t", "ed25519", "-N", "",
                    "-C", comment, "-f", str(path)], check=True, capture_output=True,
                   stdin=subprocess.DEVNULL)
    return path.with_suffix(".pub").read_text().strip()


@dataclass(frozen=True)
class SeedParts:
    """What a vcluster adds to each boot's seed (vcluster/images.py): ``cloud_config`` (more
    cloud-config keys: ``write_files``, ``runcmd``), ``authorized`` (more public keys the
    login accepts) and ``network_config`` (a NoCloud ``network-config``, version 2, applied by
    cloud-init before the guest's network starts; None: the image's own); ``kernel_hash``:
    the kernel folder's name in the guest for every guest of the cluster (None: the sources'
    hash at each boot)."""

    cloud_config: Mapping[str, Any] = field(default_factory=dict)
    authorized: tuple[str, ...] = ()
    network_config: Mapping[str, Any] | None = None
    kernel_hash: str | None = None


def seed_documents(hostname: str, instance_id: str, login_key: str, host_private: str,
                   host_public: str, parts: SeedParts = SeedParts()) -> tuple[str, str]:
    """(user-data, meta-data) of a NoCloud seed: the user :data:`GUEST_USER` (locked password,
    no sudo) with ``login_key`` authorised, root login and password logins off, and the
    guest's sshd given exactly the host key pair ``host_private``/``host_public`` (so the
    client can pin it), with what ``parts`` adds (:class:`SeedParts`; with a network-config
    the meta-data says ``dsmode: local``, so cloud-init applies it before the network starts).
    cloud-init's cloud-config modules ``users_groups`` and ``ssh``
    (https://cloudinit.readthedocs.io/en/latest/reference/modules.html); YAML written by
    PyYAML."""
    import yaml

    user_data = {
        "users": [{"name": GUEST_USER, "gecos": "vhpc benchmarks", "shell": "/bin/sh",
                   "lock_passwd": True,
                   "ssh_authorized_keys": [login_key, *parts.authorized]}],
        "disable_root": True,
        "ssh_pwauth": False,
        "ssh_deletekeys": True,
        "ssh_keys": {"ed25519_private": host_private, "ed25519_public": host_public},
        "resize_rootfs": False,  # the disk is the overlay of a fixed-size image
        "growpart": {"mode": "off"},
        "locale": False,  # keep the image's own (update-locale fails where none is built)
        **parts.cloud_config,
    }
    meta = {"instance-id": instance_id, "local-hostname": hostname,
            **({"dsmode": "local"} if parts.network_config else {})}
    return ("#cloud-config\n" + yaml.safe_dump(user_data, sort_keys=False),
            yaml.safe_dump(meta, sort_keys=False))


def write_seed(folder: Path, hostname: str,
               parts: SeedParts = SeedParts()) -> tuple[Path, Path, str]:
    """Keys and a NoCloud seed for one boot, in ``folder``: returns (seed ISO, login private
    key, known_hosts line for :data:`HOST_KEY_ALIAS`); ``parts`` as for
    :func:`seed_documents`, its ``network_config`` as the seed's ``network-config``.  The seed
    is made by ``cloud-localds`` (cloud-image-utils).  Raises UserImageError when a tool is
    missing or fails."""
    localds = require("cloud-localds", "cloud-image-utils")
    login_pub = keygen(folder / "id_ed25519", "vhpc-session")
    host_pub = keygen(folder / "host_ed25519", "vhpc-guest")
    host_private = (folder / "host_ed25519").read_text()
    user_data, meta_data = seed_documents(hostname, f"vhpc-{uuid.uuid4().hex}", login_pub,
                                          host_private, host_pub, parts)
    (folder / "user-data").write_text(user_data)
    (folder / "meta-data").write_text(meta_data)
    seed = folder / "seed.iso"
    network = []
    if parts.network_config:
        import yaml

        (folder / "network-config").write_text(yaml.safe_dump(dict(parts.network_config),
                                                              sort_keys=False))
        network = [f"--network-config={folder / 'network-config'}"]
    res = subprocess.run([localds, *network, str(seed), str(folder / "user-data"),
                          str(folder / "meta-data")], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=120)
    if res.returncode != 0 or not seed.is_file():
        raise UserImageError(f"cloud-localds failed: {_last_line(res.stderr, 'no seed written')}")
    known = f"{HOST_KEY_ALIAS} {' '.join(host_pub.split()[:2])}\n"
    (folder / "known_hosts").write_text(known)
    return seed, folder / "id_ed25519", known


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- booting it


@dataclass(frozen=True)
class ImageBoot:
    """What a session of an image boots: ``overlay`` (the qcow2 over the user's image),
    ``hostname`` (given to cloud-init), and for a direct kernel boot the image's ``kernel``,
    ``initrd`` and the kernel command line ``append`` (None/"" : firmware and bootloader);
    ``firmware``: what starts the image's bootloader (``seabios``: :func:`firmware`;
    ``ovmf``: UEFI, :func:`ovmf`); ``seed``: what a vcluster adds to each boot's seed
    (:class:`SeedParts`); ``base``: the checked image (:class:`UserImage`, held open by its
    ``pin``) the overlay stands on, verified before every boot (:meth:`verify`) and given to
    the hypervisor as the overlay's whole backing chain; None only in tests of the argv."""

    overlay: Path
    hostname: str
    kernel: Path | None = None
    initrd: Path | None = None
    append: str = ""
    seed: SeedParts = SeedParts()
    firmware: Literal["seabios", "ovmf"] = "seabios"
    base: UserImage | None = None

    def verify(self) -> None:
        """The base image is still the file checked (:meth:`PinnedImage.verify`).  Raises
        UserImageError (one line) when it changed."""
        if self.base is not None and self.base.pin is not None:
            self.base.pin.verify()

    def pass_fds(self) -> tuple[int, ...]:
        """File descriptors QEMU must inherit (the pinned base image's)."""
        pin = self.base.pin if self.base is not None else None
        return (pin.fd,) if pin is not None and pin.fd >= 0 else ()

    def qemu_guest(self, cfg: GuestConfig) -> QemuGuest:
        """The qemu backend's guest booting this image with ``cfg`` (:class:`ImageGuest`): the
        backend asks the image, so it never imports this module."""
        return ImageGuest(cfg, self)


def image_argv(cfg: GuestConfig, image: ImageBoot, workdir: Path, seed: Path,
               port: int) -> list[str]:
    """QEMU argv (a list) booting ``image``: the overlay and the seed as virtio disks, a
    user-mode NIC whose only way in is ``127.0.0.1:port`` → guest port 22 (``restrict=on``:
    no packet leaves for the host or beyond), a virtio RNG (sshd's keys need entropy early),
    the serial console into ``workdir/console.log`` and QMP on ``workdir/qmp.sock``; the
    image's kernel (``-kernel``/``-initrd``/``-append``) for a direct boot, else SeaBIOS
    (:func:`firmware`, ``-bios``) or OVMF (:func:`uefi_args`) and the image's bootloader; the
    placement's NUMA arguments come in ``cfg.extra_args``."""
    argv = [
        shutil.which(QEMU) or QEMU,
        "-name", "vhpc-guest,debug-threads=on",
        "-machine", cfg.machine, "-accel", cfg.accel,
        "-cpu", "host" if cfg.accel == "kvm" else "max",
        "-smp", str(cfg.vcpus), "-m", f"{cfg.memory_mib}M",
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        *disk_args(image),
        "-drive", f"file={qemu_opt(seed)},format=raw,if=virtio,readonly=on",
        "-netdev", f"user,id=vhpcssh,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:22",
        "-device", "virtio-net-pci,netdev=vhpcssh",
        "-device", "virtio-rng-pci",
        "-serial", f"file:{workdir / 'console.log'}",
        "-qmp", f"unix:{qemu_opt(workdir / 'qmp.sock')},server=on,wait=off",
    ]
    if image.kernel is not None:
        argv += ["-kernel", str(image.kernel), "-initrd", str(image.initrd),
                 "-append", image.append]
    elif image.firmware == "ovmf":  # the image's EFI bootloader, started by OVMF
        argv += uefi_args(workdir)
    else:  # the image's own bootloader, started by Debian's SeaBIOS
        argv += ["-bios", str(firmware())]
    return argv + list(cfg.extra_args)


#: QEMU's name of the node holding the user's image under the overlay, and the fd set it
#: reads the image from (``-add-fd``, QEMU's docs: "-add-fd fd=fd,set=set").
BASE_NODE, BASE_FDSET = "vhpc-base", 1


def disk_args(image: ImageBoot) -> list[str]:
    """QEMU arguments of the guest's disk: the overlay as the first virtio disk; with a
    pinned ``image.base`` its backing is given, not read from the overlay's header: the held
    file descriptor (``-add-fd``; :meth:`ImageBoot.pass_fds` must reach QEMU) as the node
    :data:`BASE_NODE`, read-only, whose own backing is ``null`` for a qcow2 (QEMU's
    BlockdevOptionsGenericCOWFormat), so no file the image's header names is ever opened."""
    drive = f"file={qemu_opt(image.overlay)},format=qcow2,if=virtio"
    fds = image.pass_fds()
    if not fds:
        return ["-drive", drive]
    node: dict[str, Any] = {
        "node-name": BASE_NODE, "driver": image.base.format, "read-only": True,
        "file": {"driver": "file", "filename": f"/dev/fdset/{BASE_FDSET}", "read-only": True}}
    if image.base.format == "qcow2":
        node["backing"] = None
    return ["-add-fd", f"fd={fds[0]},set={BASE_FDSET},opaque=vhpc-image",
            "-blockdev", json.dumps(node), "-drive", f"{drive},backing={BASE_NODE}"]


#: The PC firmware an image's bootloader is started by: Debian's SeaBIOS (package seabios,
#: which qemu-system-x86 depends on), the 256 KiB build QEMU's ``pc`` machine loads itself.
SEABIOS = Path("/usr/share/seabios/bios-256k.bin")


def firmware() -> Path:
    """Path of the firmware for ``boot=firmware`` (:data:`SEABIOS`).  Raises UserImageError
    naming the Debian package when it is missing."""
    if not SEABIOS.is_file():
        raise UserImageError(f"boot=firmware needs SeaBIOS ({SEABIOS}): apt-get install seabios")
    return SEABIOS


#: UEFI firmware for ``boot=uefi``: Debian's OVMF (package ovmf), 4 MiB flash layout, without
#: Secure Boot (which would need SMM and the q35 machine).  The code is read-only; the
#: firmware writes its variable store, so each guest gets its own copy of the template.
OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
#: Name of a guest's private copy of the UEFI variable store in its session folder.
VARS_NAME = "OVMF_VARS.fd"


def ovmf() -> tuple[Path, Path]:
    """(code, variable store template) of :data:`OVMF_CODE`, :data:`OVMF_VARS`.  Raises
    UserImageError naming the Debian package when they are missing."""
    for path in (OVMF_CODE, OVMF_VARS):
        if not path.is_file():
            raise UserImageError(f"boot=uefi needs OVMF ({path}): apt-get install ovmf")
    return OVMF_CODE, OVMF_VARS


def private_vars(workdir: Path) -> Path:
    """A private copy (0600) of OVMF's variable store template in ``workdir`` (the guest's
    session folder, removed with it): the firmware writes its boot entries there.  Raises
    UserImageError."""
    _, template = ovmf()
    return write_atomic(workdir / VARS_NAME, template.read_bytes())


def uefi_args(workdir: Path) -> list[str]:
    """QEMU arguments booting through OVMF: its code as read-only pflash unit 0, the guest's
    variable store (:func:`private_vars`, ``workdir/OVMF_VARS.fd``) as writable unit 1
    (QEMU's docs, "OVMF" / ``-drive if=pflash``)."""
    code, _ = ovmf()
    return ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={qemu_opt(code)}",
            "-drive", f"if=pflash,format=raw,unit=1,file={qemu_opt(workdir / VARS_NAME)}"]


class ReachedOverSsh:
    """What every backend's session of a user's image shares (mixed into a
    :class:`~vhpc.environments.vm.backends.base.GuestSession`): a seed and a loopback port per
    boot, the guest ready once its sshd accepts this boot's key and start-up has settled.
    ``ssh`` is the session's :class:`~vhpc.environments.ssh.environment.SshEnvironment`
    (127.0.0.1, the forwarded port, the session key, the pinned host key, no user ssh_config);
    agent requests are served over it (``read``: ``cat`` of a file; ``run``: the ssh
    environment's wrapper, whose read-back of the benchmark's processes is kept in
    ``processes``).  The session sets ``image`` (an :class:`ImageBoot`)."""

    image: ImageBoot
    port: int | None = None
    ssh: Any = None
    processes: list | None = None

    def _boot_image(self, start, timeout: float) -> float:
        """Write the seed, pick the port, ``start(seed, deadline)`` the hypervisor (the
        backend's part), wait until sshd accepts the session key and start-up settled;
        returns the boot's seconds.  Raises EnvError (one line, then the console tail) after
        killing the guest when the image has no sshd, no cloud-init, or does not boot within
        ``timeout`` seconds."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            seed, key, _ = write_seed(self.workdir, self.image.hostname, self.image.seed)
            if self.image.kernel is None and self.image.firmware == "ovmf":
                private_vars(self.workdir)
            self.port = free_port()
            self.image.verify()  # the image checked is the one booted, every boot
            start(seed, deadline)
            self.image.verify()  # and still it once the hypervisor has opened its disks
            self.ssh = self._wait_ssh(key, deadline, timeout)
            self._wait_settled(deadline, timeout)
        except BaseException as exc:
            detail = self.failure_detail()
            self.kill()
            if isinstance(exc, EnvError):
                raise type(exc)(f"{exc}{detail}") from None
            if isinstance(exc, (OSError, TimeoutError, subprocess.SubprocessError)):
                raise EnvError(f"the image did not boot: {exc}{detail}") from None
            raise
        self.boot_seconds = time.monotonic() - t0
        return self.boot_seconds

    def _wait_ssh(self, key: Path, deadline: float, timeout: float):
        """The session's SshEnvironment once its master connection is up.  Raises EnvError
        when QEMU exits, sshd never answers by ``deadline``, or it goes on refusing the key
        (no cloud-init) for :data:`AUTH_GRACE` seconds."""
        ssh = SshEnvironment(f"{self.image.hostname} (image)", host="127.0.0.1",
                             user=GUEST_USER, port=self.port, identity=str(key), config="none",
                             options=("-o", f"HostKeyAlias={HOST_KEY_ALIAS}",
                                      "-o", f"UserKnownHostsFile={self.workdir / 'known_hosts'}",
                                      "-o", "GlobalKnownHostsFile=/dev/null",
                                      "-o", "StrictHostKeyChecking=yes",
                                      "-o", "ServerAliveCountMax=20"),
                             kernel_hash=self.image.seed.kernel_hash,
                             hint=f"the guest {self.image.hostname} did not answer")
        refused_since = None
        last = "no answer yet"
        while True:
            status = self._exit_status()
            if status is not None:
                raise EnvError(f"QEMU exited with status {status} while the image booted")
            try:
                ssh.connect()
                ssh.retry_waits = RETRY_WAITS  # booted: from now on a late answer is waited for
                return ssh
            except (EnvError, subprocess.TimeoutExpired) as exc:
                last = str(exc).split("cannot connect: ")[-1].rsplit(": ", 1)[0]
            now = time.monotonic()
            if any(w in last for w in ("Permission denied", "Host key verification",
                                       "IDENTIFICATION HAS CHANGED")):
                refused_since = refused_since or now
                if now - refused_since > AUTH_GRACE:
                    raise EnvError(
                        f"the image's sshd refused vhpc's session key ({last}): the image needs "
                        "cloud-init with the NoCloud datasource (apt-get install cloud-init in "
                        "it), which installs the key (docs/images.md)")
            if now > deadline:
                raise EnvError(
                    f"the image's sshd did not answer on 127.0.0.1:{self.port} within "
                    f"{timeout:g} s (last: {last}): the image needs "
                    "openssh-server and cloud-init, and a slow boot a larger boot_timeout=")
            time.sleep(2.0)

    def _wait_settled(self, deadline: float, timeout: float) -> None:
        """Wait, until ``deadline``, for the guest's start-up to finish (``cloud-init status
        --wait``, then ``systemctl is-system-running --wait`` where the image has them), so
        the first trial does not share the vCPUs with cloud-init's last stage."""
        script = ("command -v cloud-init >/dev/null && cloud-init status --wait >/dev/null; "
                  "command -v systemctl >/dev/null && systemctl is-system-running --wait "
                  ">/dev/null; true")
        try:
            self.ssh.shell(script, timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise EnvError(f"the image's start-up (cloud-init, systemd) did not finish within "
                           f"{timeout:g} s: give a larger boot_timeout=") from None
        except SshUnanswered as exc:
            raise self.unanswered(exc.why) from None

    def unanswered(self, why: str) -> GuestHung:
        """The error of a booted guest that did not answer ssh (``why``: ssh's last line),
        naming the guest and the image: a hung guest, which the environment replaces by a
        fresh boot."""
        base = self.image.base.path if self.image.base is not None else self.image.overlay
        return GuestHung(f"the guest {self.image.hostname} (image={base}) did not answer ssh "
                         f"({why})")

    def request(self, op: str, wait: float, **payload) -> dict[str, Any]:
        """The agent requests VmEnvironment makes, served over ssh: ``read`` (``path``) →
        ``{"data"}`` or ``{"error"}``; ``run`` (``argv``, ``env``, ``timeout``; ``cwd`` is
        the login's home) → ``{"rc", "stdout", "stderr", "elapsed", "timed_out"}``.  Raises
        GuestHung when the guest did not answer ssh (after :data:`RETRY_WAITS`), EnvError
        when the connection is lost."""
        if self.ssh is None:
            raise EnvError("the guest is not running")
        try:
            if op == "read":
                res = self.ssh.shell(f"cat -- {shlex.quote(payload['path'])}", timeout=wait)
                return {"data": res.stdout} if res.returncode == 0 else {"error": res.stderr}
            if op == "run":
                r = self.ssh.run(list(payload["argv"]), payload.get("env"),
                                 float(payload.get("timeout", wait)))
                if r.error and r.returncode is None and unanswered(r.error):
                    raise self.unanswered(r.error.split("cannot connect: ")[-1])
                if r.error:
                    raise EnvError(r.error)
                self.processes = r.applied.processes if r.applied is not None else None
                return {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr,
                        "elapsed": r.elapsed, "timed_out": r.timed_out}
        except subprocess.TimeoutExpired:
            raise EnvError(f"the guest did not answer over ssh within {wait:g} s") from None
        except SshUnanswered as exc:
            raise self.unanswered(exc.why) from None
        raise EnvError(f"unknown request {op!r}")

    def _close_ssh(self) -> None:
        """Flush the guest's page cache to the overlay (``sync`` over ssh: the next boot of the
        same overlay finds the kernels built in this one), then close the ssh connection.
        Never raises."""
        if self.ssh is not None:
            try:
                if self.alive():
                    self.resume()  # a paused guest would not answer
                    self.ssh.shell("sync", timeout=60)
            except Exception:  # noqa: BLE001 - best effort: the guest may be gone
                pass
            self.ssh.close()
            self.ssh = None


class ImageGuest(ReachedOverSsh, QemuGuest):
    """One boot of a user's image by QEMU itself (backend ``qemu``): :func:`image_argv`, the
    rest as :class:`ReachedOverSsh` says."""

    def __init__(self, cfg: GuestConfig, image: ImageBoot):
        super().__init__(cfg)
        self.image = image

    def boot(self) -> float:
        """Start QEMU and wait for the guest (:meth:`ReachedOverSsh._boot_image`).  Raises
        EnvError."""
        def start(seed: Path, deadline: float) -> None:
            argv = image_argv(self.cfg, self.image, self.workdir, seed, self.port)
            self.proc = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=open(self.workdir / "qemu.stderr", "wb"),
                              pass_fds=self.image.pass_fds())
            self.qmp = qmp_connect(self.workdir / "qmp.sock", deadline, self._exit_status)
            self.vcpu_threads = {c["cpu-index"]: c["thread-id"]
                                 for c in self.qmp.cmd("query-cpus-fast")}

        return self._boot_image(start, self.cfg.boot_timeout)

    def kill(self) -> None:
        """Sync and close the ssh session, then stop QEMU as :meth:`QemuGuest.kill` does.
        Idempotent; never raises."""
        self._close_ssh()
        super().kill()
