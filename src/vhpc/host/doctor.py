"""``vhpc doctor``: what this host has and lacks for each environment kind and benchmark.

Each :class:`Component` names the command (or file, or Python module) that shows it is present,
what needs it, and the Debian and RHEL packages that provide it.  Checking only looks: nothing
is started, installed or changed (the KVM line reads ``/dev/kvm``'s permissions; whether KVM
really runs a guest is ``vhpc host``'s probe).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Component:
    """One thing vhpc may use: ``name``; ``needed_for`` (environment kinds, benchmarks);
    ``probe``: ``cmd:NAME`` (on PATH), ``glob:PATTERN`` (a file), ``module:NAME`` (Python) or
    ``kvm``; ``debian`` / ``rhel``: the package(s) that provide it."""

    name: str
    needed_for: str
    probe: str
    debian: str
    rhel: str


#: Package names from Debian 12 and RHEL 9 (EPEL for hpcc-free MPI tools where noted).
COMPONENTS = (
    Component("QEMU", "vm, vcluster", "cmd:qemu-system-x86_64", "qemu-system-x86", "qemu-kvm"),
    Component("guest kernel", "vm, vcluster", "glob:/boot/vmlinuz-*", "linux-image-amd64",
              "kernel-core"),
    Component("static busybox", "vm, vcluster (guest initramfs)", "cmd:busybox",
              "busybox-static", "busybox"),
    Component("cpio", "vm, vcluster (guest initramfs)", "cmd:cpio", "cpio", "cpio"),
    Component("KVM (/dev/kvm)", "vm, vcluster (else TCG emulation)", "kvm",
              "(kernel module kvm_intel/kvm_amd)", "(kernel module kvm_intel/kvm_amd)"),
    Component("hwloc", "topology, placement", "cmd:lstopo-no-graphics", "hwloc", "hwloc"),
    Component("numactl", "native/ssh nodes=, membind=; vm guest_bind=", "cmd:numactl",
              "numactl", "numactl"),
    Component("C compiler", "kernels (built on first use)", "cmd:cc", "build-essential",
              "gcc make"),
    Component("make", "kernels", "cmd:make", "make", "make"),
    Component("Open MPI", "MPI benchmarks (mpi=openmpi), vcluster", "cmd:mpicc.openmpi",
              "openmpi-bin libopenmpi-dev", "openmpi openmpi-devel"),
    Component("MPICH", "MPI benchmarks with mpi=mpich", "cmd:mpicc.mpich",
              "mpich libmpich-dev", "mpich mpich-devel"),
    Component("LAPACKE + OpenBLAS", "linpack", "glob:/usr/include/*lapacke.h",
              "liblapacke-dev libopenblas-dev", "lapack-devel openblas-devel"),
    Component("HPC Challenge", "hpcc-* benchmarks", "cmd:hpcc", "hpcc", "(build from source)"),
    Component("LAMMPS", "lammps benchmark, applications study", "cmd:lmp", "lammps",
              "lammps-openmpi (EPEL)"),
    Component("GROMACS", "gromacs benchmark, applications study", "cmd:gmx_mpi", "gromacs",
              "gromacs-openmpi (EPEL)"),
    Component("perf", "hardware counters (memory-profile, diagnostics)", "cmd:perf",
              "linux-perf", "perf"),
    Component("libvirtd", "vm:backend=libvirt", "cmd:libvirtd", "libvirt-daemon-system",
              "libvirt-daemon"),
    Component("libvirt-python", "vm:backend=libvirt", "module:libvirt",
              "pip install 'vhpc[libvirt]' (needs libvirt-dev pkg-config)",
              "pip install 'vhpc[libvirt]' (needs libvirt-devel)"),
    Component("Slurm client", "--executor slurm", "cmd:salloc", "slurm-client", "slurm"),
    Component("OpenSSH client", "ssh, vm:image=", "cmd:ssh", "openssh-client", "openssh-clients"),
    Component("qemu-img", "vm:image= (overlay, checks), vhpc image build", "cmd:qemu-img",
              "qemu-utils", "qemu-img"),
    Component("cloud-localds", "vm:image= (cloud-init NoCloud seed)", "cmd:cloud-localds",
              "cloud-image-utils", "cloud-utils"),
    Component("debugfs", "vm:image= with boot=kernel (the image's kernel)", "cmd:debugfs",
              "e2fsprogs", "e2fsprogs"),
    Component("SeaBIOS", "vm:image= with boot=firmware (the image's bootloader)",
              "glob:/usr/share/seabios/bios-256k.bin", "seabios", "seabios"),
    Component("OVMF", "vm:image= with boot=uefi (UEFI firmware)",
              "glob:/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf", "edk2-ovmf"),
    Component("debvm", "vhpc image build", "cmd:debvm-create", "debvm", "(Debian only)"),
    Component("mmdebstrap", "vhpc image build", "cmd:mmdebstrap", "mmdebstrap", "(Debian only)"),
    Component("sfdisk", "vhpc image build --bootloader (partition table)", "cmd:sfdisk", "fdisk",
              "util-linux"),
    Component("GRUB (BIOS)", "vhpc image build --bootloader grub",
              "glob:/usr/lib/grub/i386-pc/boot.img", "grub-pc-bin grub2-common",
              "grub2-pc-modules"),
    Component("GRUB (EFI)", "vhpc image build --bootloader grub-efi",
              "glob:/usr/lib/grub/x86_64-efi/linux.mod", "grub-efi-amd64-bin grub2-common",
              "grub2-efi-x64-modules"),
    Component("mtools", "vhpc image build --bootloader grub-efi (the EFI partition)",
              "cmd:mcopy", "mtools dosfstools", "mtools dosfstools"),
)


def check(c: Component) -> tuple[bool, str]:
    """(present, detail) for ``c``: the path found, or why it is missing.  Never raises."""
    kind, _, what = c.probe.partition(":")
    if kind == "cmd":
        path = shutil.which(what)
        return (path is not None, path or f"{what} not on PATH")
    if kind == "glob":
        found = sorted(glob.glob(what))
        return (bool(found), found[-1] if found else f"no {what}")
    if kind == "module":
        spec = importlib.util.find_spec(what)
        return (spec is not None, spec.origin or what if spec else f"Python module {what} missing")
    if os.path.exists("/dev/kvm"):
        ok = os.access("/dev/kvm", os.R_OK | os.W_OK)
        return (ok, "/dev/kvm (usable: see vhpc host's probe)" if ok else
                "/dev/kvm not writable by this user (add it to group kvm)")
    return (False, "no /dev/kvm: guests run under TCG emulation")


def report() -> list[tuple[Component, bool, str]]:
    """Every component with its check, in :data:`COMPONENTS` order."""
    return [(c, *check(c)) for c in COMPONENTS]
