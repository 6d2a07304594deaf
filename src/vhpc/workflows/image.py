"""``vhpc image build``: a small Debian guest image for ``vm:image=`` (docs/images.md)."""

from __future__ import annotations

from pathlib import Path

from vhpc.core.argtypes import path_arg
from vhpc.environments.kind import BASELINE, IMAGE_BUILDER, KINDS, kind_name
from vhpc.workflows.common import console


def add_parser(sub) -> None:
    """``vhpc image build [--out FILE] [--release R] [--include PKG ...]``."""
    img = sub.add_parser("image", help="build a Debian guest image for vm:image=FILE "
                         "(docs/images.md)")
    isub = img.add_subparsers(dest="image_command", required=True)
    b = isub.add_parser("build", help="build (or take from the cache) a small Debian image: "
                        "kernel, cloud-init, sshd, gcc, Open MPI, hwloc, numactl")
    b.add_argument("--out", default=None, metavar="FILE", type=path_arg,
                   help="where to write the qcow2 image (default vhpc-RELEASE.qcow2)")
    b.add_argument("--release", default="bookworm",
                   help="Debian release, from the host's own apt sources (default %(default)s)")
    b.add_argument("--include", action="append", default=[], metavar="PKG[,PKG...]",
                   help="more Debian packages in the image, e.g. lammps,gromacs (repeatable)")
    b.add_argument("--bootloader", default="none", choices=("none", "grub", "grub-efi"),
                   help="none: a bare root filesystem (booted with boot=kernel); grub: an MBR "
                   "disk with GRUB (boot=firmware); grub-efi: GPT with an EFI system partition "
                   "(boot=uefi); default %(default)s")


def run(args) -> int:
    """Build the image and say where it is, its size and SHA-256, and how to use it."""
    from rich.markup import escape

    out = Path(args.out or f"vhpc-{args.release}.qcow2")
    say = dict(highlight=False, markup=False, soft_wrap=True)
    with console.status(f"building a Debian {escape(args.release)} image ...") as status:
        builder = KINDS.providing(IMAGE_BUILDER)
        built = builder().build_image(  # log lines shown as typed
            out, args.release, args.include, progress=lambda line: status.update(escape(line)),
            bootloader=args.bootloader)
    how = ("from the cache (same inputs)" if built.cached
           else f"built in {built.build_seconds:.0f} s")
    console.print(f"{built.path}: {built.file_bytes / 2**20:.0f} MiB, {how}", **say)
    console.print(f"sha256 {built.sha256}", **say)
    boot = {"none": "", "grub": ",boot=firmware", "grub-efi": ",boot=uefi"}[args.bootloader]
    console.print(f"use it: vhpc compare -e {kind_name(BASELINE)} "
                  f"-e {builder.name}:image={built.path}{boot}", **say)
    return 0
