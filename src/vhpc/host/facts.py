"""Facts about the host that identify results: CPU model, kernel, QEMU version, host knobs.

Reads only; never changes a setting.  Every value that cannot be read is reported as None
(never invented).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

from vhpc.host import firmware


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _bracketed(text: str | None) -> str | None:
    """``always [madvise] never`` → ``madvise`` (sysfs multiple-choice files)."""
    if text is None:
        return None
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else text


def cpu_model() -> str | None:
    """``model name`` from /proc/cpuinfo."""
    text = _read("/proc/cpuinfo") or ""
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else platform.processor() or None


def qemu_version(binary: str = "qemu-system-x86_64") -> str | None:
    """QEMU's version string (``7.2.22``), None when QEMU is not installed."""
    path = shutil.which(binary)
    if not path:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"version (\S+)", out)
    return m.group(1) if m else None


def hugepages(sysfs: str = "/sys") -> dict[str, dict[str, int]]:
    """Hugepages per size: ``{"2048kB": {"total": n, "free": n}}`` (system-wide counts)."""
    out: dict[str, dict[str, int]] = {}
    for d in sorted(Path(sysfs, "kernel/mm/hugepages").glob("hugepages-*")):
        size = d.name.removeprefix("hugepages-")
        out[size] = {k: int(_read(d / f"{k}_hugepages") or 0) for k in ("nr", "free")}
        out[size] = {"total": out[size]["nr"], "free": out[size]["free"]}
    return out


def performance_settings() -> dict[str, Any]:
    """Host settings that change HPC and VM performance (read-only snapshot).

    Keys: thp (transparent_hugepage/enabled), thp_defrag, numa_balancing (0/1),
    hugepages, kvm_ept (Intel), kvm_npt (AMD), kvm_pvm (nested PVM backend present),
    governor (cpu0 scaling governor), isolcpus, nohz_full.
    """
    cmdline = _read("/proc/cmdline") or ""

    def param(name: str) -> str | None:
        m = re.search(rf"(?:^|\s){name}=(\S+)", cmdline)
        return m.group(1) if m else None

    return {
        "thp": _bracketed(_read("/sys/kernel/mm/transparent_hugepage/enabled")),
        "thp_defrag": _bracketed(_read("/sys/kernel/mm/transparent_hugepage/defrag")),
        "numa_balancing": _read("/proc/sys/kernel/numa_balancing"),
        "hugepages": hugepages(),
        "kvm_ept": _read("/sys/module/kvm_intel/parameters/ept"),
        "kvm_npt": _read("/sys/module/kvm_amd/parameters/npt"),
        "kvm_pvm": os.path.isdir("/sys/module/kvm_pvm"),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "isolcpus": param("isolcpus") or _read("/sys/devices/system/cpu/isolated") or None,
        "nohz_full": param("nohz_full"),
    }


def fingerprint() -> dict[str, Any]:
    """Host identity for every environment: CPU model, CPU count, host kernel, knobs."""
    return {
        "cpu_model": cpu_model(),
        "host_cpus": os.cpu_count(),
        "host_kernel": platform.release(),
        "knobs": performance_settings(),
        **firmware.identity(),  # microcode, BIOS, libvirt, topology, vhpc version (vhpc diff)
    }


def read_hugepages(sysfs_root: str | os.PathLike = "/sys") -> dict[int, dict[int, int]]:
    """Free hugepages per host node: ``{node: {page_kib: free_pages}}`` from
    ``<sysfs_root>/devices/system/node/node*/hugepages/hugepages-<N>kB/free_hugepages``
    (the data :func:`vhpc.placement.check_hugepages` checks against). Missing tree → ``{}``."""
    out: dict[int, dict[int, int]] = {}
    for node_dir in Path(sysfs_root, "devices/system/node").glob("node*"):
        m = re.fullmatch(r"node(\d+)", node_dir.name)
        if not m:
            continue
        sizes: dict[int, int] = {}
        for d in node_dir.glob("hugepages/hugepages-*kB"):
            ms = re.fullmatch(r"hugepages-(\d+)kB", d.name)
            free = _read(d / "free_hugepages")
            if ms and free is not None and free.isdigit():
                sizes[int(ms.group(1))] = int(free)
        out[int(m.group(1))] = sizes
    return out


def process_cmdlines() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, argv) of every process this host shows in /proc (``/proc/PID/cmdline`` split at
    NUL; proc(5)); processes that exit while being read are skipped."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            yield int(entry.name), (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
