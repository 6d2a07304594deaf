"""Guest boot artefacts built from what the host already has: no image download.

* :func:`find_kernel` picks a guest kernel (``/boot/vmlinuz-*``, newest first).
* :func:`unpack_vmlinux` extracts the uncompressed ELF ``vmlinux`` from a ``vmlinuz`` so QEMU
  can boot it through the PVH entry point, skipping in-guest decompression (about 2 s instead
  of 5 s under TCG, measured in shared/reference/vm-mechanics.md).
* :func:`build_initramfs` writes a tiny initramfs: static busybox, the kernel modules needed to
  mount the host's root over virtio-9p, to talk over virtio-serial and (vcluster) to use a
  virtio-net NIC, ``init``
  (guest/init.sh) and vhpc's guest agent (guest/agent.c, compiled statically here).  The guest
  then ``switch_root``s into the host's root (read-only) and runs the agent as init, so the
  guest has exactly the host's binaries.

Everything is cached under :func:`cache_dir`, keyed by the kernel file's name, size and mtime.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from vhpc.core.paths import cache_dir, write_atomic
from vhpc.core.errors import VhpcError

#: Modules the init script loads (with their dependencies, resolved from modules.dep).
GUEST_MODULES = ("virtio_pci", "virtio_console", "9pnet_virtio", "9p", "virtio_net")

XZ_MAGIC = b"\xfd7zXZ\x00"
GZIP_MAGIC = b"\x1f\x8b\x08"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class GuestImageError(VhpcError, RuntimeError):
    """The guest kernel or initramfs cannot be prepared; the message says what to install."""


@dataclass(frozen=True)
class GuestKernel:
    """A guest kernel: ``image`` (vmlinuz path), ``release`` (e.g. ``6.1.0-56-amd64``),
    ``modules`` (``/lib/modules/<release>``)."""

    image: Path
    release: str
    modules: Path


def find_kernel(path: str | os.PathLike | None = None) -> GuestKernel:
    """Return the guest kernel at ``path`` or the newest ``/boot/vmlinuz-*`` with modules.

    Raises GuestImageError when none is found (install ``linux-image-amd64``).
    """
    candidates = [Path(path)] if path else sorted(Path("/boot").glob("vmlinuz-*"), reverse=True)
    for image in candidates:
        release = image.name.removeprefix("vmlinuz-")
        modules = Path("/lib/modules") / release
        if image.is_file() and (modules / "modules.dep").is_file():
            return GuestKernel(image, release, modules)
    if path and not Path(path).is_file():
        raise GuestImageError(f"guest kernel {path} does not exist: pass a /boot/vmlinuz-<release>")
    if path:
        raise GuestImageError(
            f"guest kernel {path} has no /lib/modules/<release>/modules.dep: "
            "pass a /boot/vmlinuz-<release> whose modules are installed"
        )
    raise GuestImageError(
        "no guest kernel in /boot: run 'apt-get install linux-image-amd64' (or pass kernel=PATH)"
    )


def _key(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def unpack_vmlinux(kernel: GuestKernel) -> Path:
    """Return the path of the uncompressed ELF vmlinux for ``kernel`` (cached).

    Looks for an XZ stream inside the bzImage (Debian's compression) and decompresses it with
    :mod:`lzma`; gzip is tried as a fallback.  Raises GuestImageError when no payload is found.
    """
    dest = cache_dir() / f"vmlinux-{kernel.release}-{_key(kernel.image)}"
    if dest.exists():
        return dest
    blob = kernel.image.read_bytes()
    payload = None
    pos = blob.find(XZ_MAGIC)
    while pos >= 0 and payload is None:
        try:
            payload = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(blob[pos:])
        except lzma.LZMAError:
            pos = blob.find(XZ_MAGIC, pos + 1)
    if payload is None:
        import zlib

        pos = blob.find(GZIP_MAGIC)
        if pos >= 0:
            payload = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob[pos:])
    if not payload or payload[:4] != b"\x7fELF":
        raise GuestImageError(
            f"cannot unpack an ELF vmlinux from {kernel.image} (XZ or gzip payload expected)"
        )
    write_atomic(dest, payload)
    return dest


def _module_closure(kernel: GuestKernel, names: tuple[str, ...]) -> list[Path]:
    """Module files for ``names`` and their dependencies, in load order (deps first)."""
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in (kernel.modules / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
        base = Path(mod).name.split(".ko")[0]
        by_name[base] = mod
        by_name.setdefault(base.replace("-", "_"), mod)
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod in order:
            return
        for dep in reversed(deps.get(mod, [])):
            visit(dep)
        order.append(mod)

    for name in names:
        if name not in by_name:
            builtin = (kernel.modules / "modules.builtin").read_text()
            if f"/{name}.ko" in builtin:
                continue
            raise GuestImageError(f"kernel {kernel.release} lacks module {name}")
        visit(by_name[name])
    return [kernel.modules / m for m in order]


def _compile_agent(source: bytes, dest: Path) -> None:
    """Compile the guest agent as a static executable (the guest runs it before and after
    switch_root, so it may not depend on anything).  Raises GuestImageError without a C
    compiler and static libc (``apt-get install build-essential``)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise GuestImageError("a C compiler is needed to build the guest agent: "
                              "apt-get install build-essential")
    src = dest.with_suffix(".c")
    src.write_bytes(source)
    out = subprocess.run([cc, "-std=gnu11", "-O2", "-static", "-o", str(dest), str(src)],
                         capture_output=True, text=True)
    src.unlink()
    if out.returncode != 0:
        raise GuestImageError("building the guest agent failed: "
                              + (out.stderr.strip().splitlines() or ["?"])[-1])


def build_initramfs(kernel: GuestKernel) -> Path:
    """Return the path of vhpc's initramfs for ``kernel`` (cached; cpio newc, uncompressed).

    Contents: ``/bin/busybox`` (from Debian's busybox-static), ``/init`` (guest/init.sh),
    ``/vhpc-agent`` (guest/agent.c, static), ``/modules/NN-name.ko`` in load order.  Raises
    GuestImageError when busybox, cpio or a C compiler is missing.
    """
    guest = resources.files("vhpc.environments.vm") / "guest"
    init_text = (guest / "init.sh").read_bytes()
    agent_src = (guest / "agent.c").read_bytes().replace(  # one translation unit
        b'#include "peer.c"\n', (guest / "peer.c").read_bytes())
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not Path(busybox).exists() or shutil.which("cpio") is None:
        raise GuestImageError("busybox and cpio are needed: apt-get install busybox-static cpio")
    h = hashlib.sha256(init_text + agent_src).hexdigest()[:8]
    dest = cache_dir() / f"initramfs-{kernel.release}-{_key(kernel.modules / 'modules.dep', Path(busybox))}-{h}.cpio"
    if dest.exists():
        return dest
    modules = _module_closure(kernel, GUEST_MODULES)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("bin", "modules", "proc", "sys", "dev", "newroot"):
            (root / d).mkdir()
        shutil.copy2(busybox, root / "bin" / "busybox")
        (root / "init").write_bytes(init_text)
        (root / "init").chmod(0o755)
        _compile_agent(agent_src, root / "vhpc-agent")
        for i, mod in enumerate(modules):
            if mod.suffix == ".xz":
                data = lzma.decompress(mod.read_bytes())
            else:
                data = mod.read_bytes()
            (root / "modules" / f"{i:02d}-{mod.name.split('.ko')[0]}.ko").write_bytes(data)
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        out = subprocess.run(
            ["cpio", "--quiet", "-o", "-H", "newc", "--owner=0:0"],
            input="\n".join(files).encode(), cwd=root, capture_output=True, check=False,
        )
        if out.returncode != 0:
            raise GuestImageError(f"cpio failed: {out.stderr.decode().strip()}")
        write_atomic(dest, out.stdout)
    return dest


def host_khz() -> int | None:
    """Host TSC/CPU frequency in kHz from /proc/cpuinfo (``tsc_early_khz=`` on the guest
    command line avoids the PIT calibration hang seen under TCG, vm-mechanics.md)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return int(float(line.split(":")[1]) * 1000)
    except (OSError, ValueError):
        pass
    return None


#: Directories the guest gets privately (tmpfs), hiding the host's content (guest/init.sh).
GUEST_PRIVATE = ("/tmp", "/var/tmp", "/run", "/dev/shm")


def hidden_in_guest(path: Path) -> bool:
    """True when ``path`` lies under a directory the guest replaces with its own tmpfs."""
    p = Path(path).resolve()
    return any(p == Path(d) or Path(d) in p.parents for d in GUEST_PRIVATE)


def guest_shares() -> list[Path]:
    """vhpc's own files that the guest must see but that its private /tmp etc. would hide
    (e.g. a checkout in /tmp): the source tree and the Python environment, each exported
    read-only over an extra virtio-9p device and mounted at the same path in the guest."""
    import sys

    import vhpc

    out: list[Path] = []
    for cand in (Path(vhpc.__file__).resolve().parents[2], Path(sys.prefix).resolve()):
        if hidden_in_guest(cand) and " " not in str(cand):
            if not any(cand == o or o in cand.parents for o in out):
                out = [o for o in out if cand not in o.parents] + [cand]
    return out


def prefetch_files() -> list[str]:
    """The dynamic loader and C library this process runs on (from /proc/self/maps), which
    every dynamically linked guest command maps first.  The guest's init reads them once
    through virtio-9p before its agent starts (vhpc.prefetch=, guest/init.sh): a few large
    9p reads instead of the first exec's page-fault-sized ones, which made a cold guest's
    first command 0.1 s slower than its second under TCG (bench/bench_vm_cycle.py).  Paths
    with characters the kernel command line cannot carry are left out."""
    found: list[str] = []
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return found
    for line in maps.splitlines():
        fields = line.split(None, 5)
        path = fields[5] if len(fields) == 6 else ""
        name = Path(path).name
        if (name.startswith("ld-linux") or name.startswith("libc.so")) and path not in found \
                and re.fullmatch(r"/[A-Za-z0-9_./+-]+", path):
            found.append(path)
    return found


def kernel_cmdline(probe: bool = False, shares: list[Path] | None = None) -> str:
    """The guest kernel command line (serial console, quiet, extra shares and the files to
    prefetch for init)."""
    words = ["console=ttyS0", "quiet", "panic=-1", "mitigations=off"]
    khz = host_khz()
    if khz:
        words.append(f"tsc_early_khz={khz}")
    if probe:
        words.append("vhpc.probe=1")
    else:
        files = prefetch_files()
        if files:
            words.append("vhpc.prefetch=" + ":".join(files))
    words += [f"vhpc.share{i}={p}" for i, p in enumerate(shares or [])]
    return " ".join(words)
