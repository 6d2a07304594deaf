"""Identity facts of the host beyond CPU model and kernel, for ``vhpc diff``'s fingerprint
diff: CPU microcode, BIOS/firmware (DMI, where readable), libvirt version, topology counts and
the vhpc version.  Reads only; a value that cannot be read is None (never invented).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from vhpc import __version__
from vhpc.host import probes


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def microcode(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The ``microcode`` revision of the first CPU in /proc/cpuinfo (x86), e.g. ``0xa20102e``."""
    m = re.search(r"^microcode\s*:\s*(\S+)", _read(Path(cpuinfo)) or "", re.M)
    return m.group(1) if m else None


def bios(dmi: str = "/sys/class/dmi/id") -> dict[str, str | None]:
    """BIOS/firmware vendor, version and date from DMI (sysfs, world-readable on x86)."""
    return {k: _read(Path(dmi, f"bios_{k}")) for k in ("vendor", "version", "date")}


@functools.cache
def libvirt_version() -> str | None:
    """``virsh --version`` (the libvirt client library's version), None when not installed.
    Asked once per process: every environment's fingerprint carries it, and inside a TCG
    guest (vhpc run there, tests/test_vm_numa_binding.py) each call took 0.9 s.  Remembered
    across processes for the same ``virsh`` file (:func:`vhpc.host.probes.remembered`)."""
    path = shutil.which("virsh")
    if not path:
        return None
    return probes.remembered("libvirt_version", probes.tool_key(path),
                             lambda: _virsh_version(path), keep=lambda v: v is not None)


def _virsh_version(path: str) -> str | None:
    """``virsh --version``'s output, None when it fails or prints nothing."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                             check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out or None


def topology_counts(sysfs: str = "/sys") -> str | None:
    """``packages:P nodes:N cores:C pus:U`` of the online CPUs (sysfs topology), None when
    sysfs has no CPU topology."""
    cpus = Path(sysfs, "devices/system/cpu")
    packages, cores, pus = set(), set(), 0
    for d in cpus.glob("cpu[0-9]*"):
        pkg = _read(d / "topology/physical_package_id")
        core = _read(d / "topology/core_id")
        if pkg is None or core is None:
            continue
        if _read(d / "online") == "0":
            continue
        packages.add(pkg)
        cores.add((pkg, core))
        pus += 1
    if not pus:
        return None
    nodes = len(list(Path(sysfs, "devices/system/node").glob("node[0-9]*"))) or 1
    return f"packages:{len(packages)} nodes:{nodes} cores:{len(cores)} pus:{pus}"


def identity() -> dict[str, Any]:
    """The facts above as fingerprint fields: ``microcode``, ``bios`` (vendor, version,
    date), ``libvirt_version``, ``topology`` and ``vhpc_version``."""
    return {"microcode": microcode(), "bios": bios(), "libvirt_version": libvirt_version(),
            "topology": topology_counts(), "vhpc_version": __version__}
