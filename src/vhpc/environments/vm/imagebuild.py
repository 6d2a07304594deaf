"""``vhpc image build``: a small Debian guest image for ``vm:image=``, made by Debian's own tools.

``debvm-create`` (debvm, a thin wrapper of ``mmdebstrap``) writes a bare ext4 root filesystem
with Debian's cloud kernel and its initramfs in ``/boot``; ``qemu-img convert`` makes it a
compressed qcow2.  vhpc boots it with its own kernel given directly (``boot=kernel``, the default
for a bare filesystem: docs/images.md).  Packages come only from the apt sources this host
already uses (``apt-get indextargets``: the host's own parse of its sources), with the host's
suite names mapped to the release asked for; nothing is downloaded from elsewhere.

The image holds :data:`BASE_PACKAGES` (cloud-init and sshd to be reached, a compiler, make, Open
MPI, hwloc and numactl to build and bind vhpc's kernels) plus ``--include``.  Root's password is
locked and debvm's console autologin is skipped: the only way in is the key cloud-init gets.

The result is cached under ``cache_dir()/images/<key>/`` where ``key`` hashes every input
(:func:`inputs`: release, packages, apt sources, size, the debvm and mmdebstrap versions and
:data:`RECIPE`), so a second build with the same inputs only copies the cached image.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from vhpc.core.errors import VhpcError
from vhpc.core.paths import (cache_dir, cache_lock, check_output, output_file, output_path,
                             trusted_folder, write_atomic)
from vhpc.environments.vm.imagedisk import BOOTLOADERS, KERNEL_ARGS, make_disk
from vhpc.environments.vm.userimage import sha256_file
from vhpc.host.contained import BuildBox
from vhpc.host.owned import owner_tag

#: Packages every image gets: reached by cloud-init + sshd, builds and binds vhpc's kernels.
BASE_PACKAGES = ("cloud-init", "openssh-server", "gcc", "make", "libc6-dev", "openmpi-bin",
                 "libopenmpi-dev", "hwloc", "numactl", "libnuma-dev", "procps")
#: Size of the image's root filesystem as the guest sees it (qcow2 stores only what is used).
IMAGE_SIZE = "3G"
#: Changes whenever the way an image is made changes, so cached images are rebuilt.
RECIPE = 1
#: A Debian package name (Debian Policy 5.6.1); apt patterns and options are refused.
PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
#: A Debian release name or suite (bookworm, trixie, stable, sid).
RELEASE = re.compile(r"^[a-z][a-z0-9-]{1,30}$")


class ImageBuildError(VhpcError):
    """The image cannot be built; the message says what to install or change."""


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ImageBuildError(f"vhpc image build needs {name}: apt-get install {package}")
    return path


def packages(include: list[str] | tuple[str, ...] = ()) -> list[str]:
    """:data:`BASE_PACKAGES` plus ``include`` (each a Debian package name, commas allowed),
    sorted and unique.  Raises ImageBuildError for anything that is not a package name."""
    extra = [p.strip() for item in include for p in item.split(",") if p.strip()]
    for p in extra:
        if not PACKAGE.match(p):
            raise ImageBuildError(f"--include {p!r} is not a Debian package name (lowercase "
                                  "letters, digits, + - .)")
    return sorted(set(BASE_PACKAGES) | set(extra))


def host_codename() -> str:
    """The host's release codename (``VERSION_CODENAME`` of /etc/os-release), "" if none."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    m = re.search(r"^VERSION_CODENAME=\"?([^\"\n]*)\"?$", text, re.M)
    return m.group(1) if m else ""


def apt_sources(release: str, indextargets: str | None = None) -> list[str]:
    """One-line apt sources (``deb URI SUITE COMPONENT...``) for ``release`` from the
    repositories the host uses: ``apt-get indextargets`` lists the host's binary package
    indexes (``indextargets``: its output, for tests); each suite of the host's release
    (``bookworm``, ``bookworm-updates``, ``bookworm-security``) becomes the same suite of
    ``release``; other repositories are left out.  Raises ImageBuildError when none is left."""
    if indextargets is None:
        res = subprocess.run([_tool("apt-get", "apt"), "indextargets", "--format",
                              "$(TARGET_OF)\t$(REPO_URI)\t$(RELEASE)\t$(COMPONENT)"],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL)
        indextargets = res.stdout
    host = host_codename()
    suites: dict[tuple[str, str], list[str]] = {}
    for line in indextargets.splitlines():
        fields = line.split("\t")
        if len(fields) != 4 or fields[0] != "deb":
            continue
        _, uri, suite, component = fields
        base, sep, tail = suite.partition("-")
        if not host or base != host or not re.match(r"^[a-z][a-z0-9.+:/~_-]*$", uri):
            continue
        key = (uri, release + sep + tail)
        if component not in suites.setdefault(key, []):
            suites[key].append(component)
    if not suites:
        raise ImageBuildError(f"the host's apt sources name no suite of its release "
                              f"{host or '(unknown)'}: vhpc image build uses the host's Debian "
                              "sources (/etc/apt/sources.list*)")
    return [f"deb {uri} {suite} {' '.join(comps)}"
            for (uri, suite), comps in sorted(suites.items())]


def _version(package: str) -> str:
    res = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    return res.stdout.strip() if res.returncode == 0 else ""


def inputs(release: str, include: list[str] | tuple[str, ...] = (),
           sources: list[str] | None = None, bootloader: str = "none") -> dict[str, Any]:
    """Everything an image is made from: the cache key hashes exactly this (``bootloader``,
    the GRUB version and the kernel command line of its entry only for a disk with a
    bootloader, so a bare filesystem keeps its key).  Raises ImageBuildError for a bad
    release, package name or bootloader."""
    if not RELEASE.match(release):
        raise ImageBuildError(f"--release {release!r}: give a Debian release name such as "
                              "bookworm")
    if bootloader not in BOOTLOADERS:
        raise ImageBuildError(f"--bootloader {bootloader!r}: give one of "
                              f"{', '.join(BOOTLOADERS)}")
    spec = {"recipe": RECIPE, "release": release, "packages": packages(include),
            "sources": sources if sources is not None else apt_sources(release),
            "size": IMAGE_SIZE, "debvm": _version("debvm"), "mmdebstrap": _version("mmdebstrap")}
    if bootloader != "none":
        grub = "grub-pc-bin" if bootloader == "grub" else "grub-efi-amd64-bin"
        spec.update(bootloader=bootloader, grub=_version(grub), kernel_args=KERNEL_ARGS)
    return spec


def cache_key(spec: dict[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of ``spec`` (:func:`inputs`) as canonical JSON."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BuiltImage:
    """A built image: ``path`` (where it was written), ``sha256``, ``file_bytes``,
    ``build_seconds`` (of the build that made the cached copy), ``cached`` (this call only
    copied it), ``key`` (the cache key)."""

    path: Path
    sha256: str
    file_bytes: int
    build_seconds: float
    cached: bool
    key: str


def debvm_argv(target: Path, spec: dict[str, Any]) -> list[str]:
    """The ``debvm-create`` command line for ``spec`` (:func:`inputs`) writing ``target``:
    no console autologin, root's password locked, the packages and the host's sources as
    mmdebstrap's ``--include`` and mirror arguments (debvm-create(1))."""
    return [_tool("debvm-create", "debvm"), "-o", str(target), "-r", spec["release"],
            "-z", spec["size"], "-h", "vhpc-image", "--skip=autologin", "--",
            "--include=" + ",".join(spec["packages"]),
            '--customize-hook=passwd --root "$1" --lock root',
            *spec["sources"]]


#: what each tool of a build does, for the progress line (the stage, then the tool)
STAGES = {"debvm-create": "installing Debian into a root file system",
          "qemu-img convert": "compressing the disk into qcow2", "dd": "copying the root file "
          "system onto the disk", "grub-install": "installing GRUB (BIOS)",
          "grub-mkstandalone": "building GRUB for UEFI", "mkfs.vfat": "making the EFI "
          "system partition", "mmd": "filling the EFI system partition", "mcopy": "filling "
          "the EFI system partition", "sync": "writing the disk out", "partx": "reading the "
          "disk's partitions", "mount": "mounting the disk"}
#: a tool's last output line is shown this many seconds after it was written, no longer
FRESH_S = 5.0


def _run_logged(argv: list[str], log: Path, what: str,
                progress: Callable[[str], None] | None, box: BuildBox) -> None:
    """Run ``argv`` in the build's ``box`` (its cgroup: it and every child die with vhpc) with
    its output in ``log``, reporting every second the stage (:data:`STAGES`), the tool and its
    time, and its last output line while that is fresh (this tool's own, written in the last
    :data:`FRESH_S` seconds: never a line an earlier tool left in the log); kill it and its
    children on failure or interrupt.  Raises ImageBuildError naming ``what`` and the cause
    (:func:`cause`)."""
    with open(log, "ab") as out:
        start = out.seek(0, 2)  # this tool's output begins here
        proc = box.popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    t0 = changed = time.monotonic()
    size = start
    stage = STAGES.get(what, what)
    try:
        while proc.poll() is None:
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            if progress is None:
                continue
            now = time.monotonic()
            grown = log.stat().st_size if log.exists() else size
            if grown != size:
                size, changed = grown, now
            line = _last_line(log, start) if now - changed <= FRESH_S else ""
            head = f"{stage} ({what}, {now - t0:.0f} s)" if stage != what else \
                f"{what} ({now - t0:.0f} s)"
            progress(f"{head}: {line[:60]}" if line else head)
    except BaseException:
        box.finished(proc, kill=True)
        raise
    box.finished(proc)
    if proc.returncode != 0:
        raise ImageBuildError(f"{what} failed ({cause(log, start)}): the whole log is {log}")


#: How a step says why it failed, most telling first: apt's and mmdebstrap's error lines
#: ("E: Unable to locate package nosuchpkg"), then a tool's own "error:" line (grub-install,
#: qemu-img, mkfs).  The first such line is the cause; the later ones report its consequences
#: ("E: apt-get ... failed", "I: removing tempdir").
CAUSES = (re.compile(r"^E: "), re.compile(r"(^|: )(error|fatal)\b", re.I))
#: Bytes of a step's output read to find its cause: mmdebstrap's last screenfuls.
CAUSE_BYTES = 64 << 10


def cause(log: Path, start: int = 0) -> str:
    """Why the step whose output begins at byte ``start`` of ``log`` failed: its first line
    matching :data:`CAUSES` (in that order), else its last line (within its last
    :data:`CAUSE_BYTES`); "" when it wrote nothing."""
    try:
        with open(log, "rb") as f:
            end = f.seek(0, 2)
            f.seek(max(start, end - CAUSE_BYTES))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines()
                     if ln.strip()]
    except OSError:
        return ""
    for pattern in CAUSES:
        found = next((ln for ln in lines if pattern.search(ln)), None)
        if found is not None:
            return found
    return lines[-1] if lines else ""


def _last_line(log: Path, since: int = 0) -> str:
    """The last non-blank line written to ``log`` at or after byte ``since`` ("" if none)."""
    try:
        with open(log, "rb") as f:
            end = f.seek(0, 2)
            f.seek(max(since, end - 4096))
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def build(out: Path, release: str = "bookworm", include: list[str] | tuple[str, ...] = (),
          progress: Callable[[str], None] | None = None,
          bootloader: str = "none") -> BuiltImage:
    """Write the image for (``release``, ``include``, ``bootloader``) to ``out``: from the
    cache when one with the same :func:`inputs` exists, else built (``debvm-create``; for a
    ``bootloader`` the disk around it, environments/vm/imagedisk.py; then ``qemu-img convert
    -c -O qcow2``) into the cache first.  ``progress`` gets one-line updates.  ``out`` is
    written through the safe writer (:func:`vhpc.core.paths.output_file`).  Raises
    ImageBuildError (a tool missing, the build failing: with its log's path), OutputPathError
    for an ``out`` that is a device, FIFO, link or folder, or whose folder is missing (checked
    before building)."""
    if str(out) == "-":  # the progress and the summary are on standard output
        raise ImageBuildError("--out -: give a file name; the image is not written to "
                              "standard output")
    out = check_output(out, "--out")  # before a build of minutes: a device is never written
    spec = inputs(release, include, bootloader=bootloader)
    key = cache_key(spec)
    folder = trusted_folder(trusted_folder(cache_dir() / "images", "the image cache") / key,
                            "the image cache")
    image, manifest = folder / "image.qcow2", folder / "manifest.json"
    with cache_lock(folder / ".lock"):  # another vhpc building the same image: wait for it
        cached = image.is_file() and manifest.is_file()
        if not cached:
            _build(spec, folder, image, manifest, progress)
    record = json.loads(manifest.read_text())
    if not (out.is_file() and not out.is_symlink() and out.stat().st_size == image.stat().st_size
            and sha256_file(out) == record["sha256"]):
        if progress is not None:
            progress(f"copying the image to {out}")
        with output_file(out, binary=True, what="--out") as dst, open(image, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
    return BuiltImage(path=out, sha256=record["sha256"], file_bytes=out.stat().st_size,
                      build_seconds=float(record["build_seconds"]), cached=cached, key=key)


def _build(spec: dict[str, Any], folder: Path, image: Path, manifest: Path,
           progress: Callable[[str], None] | None) -> None:
    """Build ``spec``'s image into ``image`` (debvm-create, then qemu-img convert) and write its
    ``manifest`` (inputs, SHA-256, build seconds); the log is ``folder/build.log``.  Raises
    ImageBuildError."""
    _tool("mmdebstrap", "mmdebstrap")
    qemu_img = _tool("qemu-img", "qemu-utils")
    log = write_atomic(folder / "build.log", json.dumps(spec, indent=1) + "\n")
    t0 = time.monotonic()
    with BuildBox() as box:  # every process in its cgroup, what it makes journalled
        tmp = Path(tempfile.mkdtemp(prefix=f"build-{owner_tag()}-", dir=folder))
        box.record("paths", tmp)
        try:
            record = _steps(spec, tmp, image, log, progress, box, t0, qemu_img)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    write_atomic(manifest, json.dumps(record, indent=1) + "\n")


def _steps(spec: dict[str, Any], tmp: Path, image: Path, log: Path,
           progress: Callable[[str], None] | None, box: BuildBox, t0: float,
           qemu_img: str) -> dict[str, Any]:
    """The build's steps in its folder ``tmp``: debvm-create, the disk around the root for a
    bootloader, qemu-img convert into ``image``; returns the manifest's record."""
    def run(argv: list[str], what: str) -> None:
        _run_logged(argv, log, what, progress, box)

    root = tmp / "root.ext4"
    run(debvm_argv(root, spec), "debvm-create")
    if spec.get("bootloader", "none") != "none":
        disk = tmp / "disk.raw"
        make_disk(root, disk, spec["bootloader"], run, box)
        root.unlink()
        root = disk
    with output_path(image) as part:  # qemu-img writes a private temp, renamed at the end
        box.record("paths", part)
        run([qemu_img, "convert", "-c", "-f", "raw", "-O", "qcow2", str(root), str(part)],
            "qemu-img convert")
        return {"inputs": spec, "sha256": sha256_file(part),
                "build_seconds": round(time.monotonic() - t0, 1),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
