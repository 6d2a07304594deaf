"""Loaders that touch the host: ``lstopo`` (hwloc), this process's affinity and sysfs.

- :func:`from_host`: ``lstopo --of xml --disallowed`` (every PU and node, hwloc's allowed sets
  marking the cgroup cpuset), then restricted to this process's affinity
  (``sched_getaffinity``) and ``Cpus_allowed_list`` / ``Mems_allowed_list`` of
  ``/proc/self/status`` (proc(5)); without hwloc, :func:`from_sysfs` reads
  ``/sys/devices/system/{cpu,node}`` (the kernel's ABI, Documentation/ABI/stable/sysfs-devices-*)
  and says so in ``Topology.notes``.
- :func:`from_synthetic`: hwloc synthetic descriptions, capped at :data:`MAX_SYNTHETIC_PUS`
  PUs before lstopo runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from vhpc.core.cpulist import parse_cpu_list
from vhpc.topology.build import Raw, RawNode, RawPU, build
from vhpc.topology.hwloc import raw_from_xml
from vhpc.topology.model import Topology, TopologyError

__all__ = ["MAX_SYNTHETIC_PUS", "SEED_MACHINES", "from_hwloc_xml", "from_xml_file", "from_synthetic", "from_host",
           "from_sysfs", "process_limits", "load", "synthetic_pu_count"]

#: Largest synthetic machine vhpc builds (PUs): lstopo needs ~1 s and 11 MB of XML for it.
MAX_SYNTHETIC_PUS = 16384
#: Largest topology file read (bytes); a 16384-PU lstopo export is about 11 MB.
MAX_XML_BYTES = 64 << 20

#: Synthetic descriptions of the seed papers' machines (see docs/placement.md).
SEED_MACHINES: dict[str, str] = {
    "opteron-8350": "pack:4 numa:1 l3:1 core:4 pu:1",
    "xeon-e7310-uma": "pack:4 l3:1 core:4 pu:1",
    "nehalem-ep": "pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2",
    "nehalem-ex": "pack:4 numa:1(memory=16GiB) l3:1 core:8 pu:2",
}


def from_hwloc_xml(text: str, source: str = "xml", cpu_limits=(), node_limits=()) -> Topology:
    """A :class:`Topology` from hwloc XML text (v1 or v2), restricted further by
    ``cpu_limits``/``node_limits`` (``[(allowed set, why)]``). Raises TopologyError."""
    raw = raw_from_xml(text, source)
    raw.cpu_limits += list(cpu_limits)
    raw.node_limits += list(node_limits)
    return build(raw)


def _lstopo() -> str | None:
    return shutil.which("lstopo-no-graphics") or shutil.which("lstopo")


def _run_lstopo(args: list[str], what: str) -> str:
    exe = _lstopo()
    if exe is None:
        raise TopologyError(f"lstopo not found for {what}: install hwloc (Debian: apt-get install hwloc) "
                            f"or give an hwloc XML file")
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise TopologyError(f"lstopo took over 60 s for {what}: give an hwloc XML file instead") from None
    if proc.returncode != 0:
        err = " ".join((proc.stderr or proc.stdout or "").split())
        raise TopologyError(f"lstopo failed for {what}: {err}")
    return proc.stdout


def from_xml_file(path: str | os.PathLike) -> Topology:
    """Load an hwloc XML file (``lstopo --of xml``, v1 or v2), at most :data:`MAX_XML_BYTES` (64
    MiB), never waiting on a FIFO in its place.  Raises TopologyError when it cannot be read, is
    larger, is not UTF-8 text or is not an hwloc topology."""
    from vhpc.core.paths import read_regular

    try:
        data = read_regular(path, MAX_XML_BYTES)  # never waits on a FIFO in its place
    except OSError as exc:
        raise TopologyError(f"cannot read topology file {path}: {exc.strerror}") from None
    if len(data) > MAX_XML_BYTES:
        raise TopologyError(f"topology file {path} is over {MAX_XML_BYTES >> 20} MiB: give an lstopo --of xml export")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TopologyError(f"topology file {path} is not UTF-8 text: give an lstopo --of xml export") from None
    return from_hwloc_xml(text, source=str(path))


def synthetic_pu_count(desc: str) -> int:
    """PUs an hwloc synthetic description makes: the product of its ``type:N`` counts
    (attributes in parentheses ignored). Raises TopologyError on a level without a count."""
    total = 1
    for level in re.sub(r"\([^)]*\)", "", desc).split():
        m = re.fullmatch(r"[A-Za-z0-9]+:(\d+)", level)
        if not m:
            raise TopologyError(f"synthetic level {level!r} in {desc!r}: write levels like 'pack:2 core:4 pu:1'")
        total *= max(int(m.group(1)), 1)
    return total


def from_synthetic(desc: str) -> Topology:
    """Build a topology from an hwloc synthetic description such as
    ``"pack:4 numa:1 l3:1 core:4 pu:1"`` (``lstopo --input DESC --of xml -``).

    Node memory: ``numa:1(memory=8GiB)``; without it :attr:`Topology.memory_known` is False.
    Raises TopologyError for a description over :data:`MAX_SYNTHETIC_PUS` PUs (checked before
    lstopo runs), one hwloc rejects, or when lstopo is missing.
    """
    desc = " ".join(str(desc).split())
    if not desc:
        raise TopologyError("empty synthetic description: give one like 'pack:2 numa:1 l3:1 core:4 pu:1'")
    n = synthetic_pu_count(desc)
    if n > MAX_SYNTHETIC_PUS:
        raise TopologyError(f"synthetic topology {desc!r} has {n} PUs, over vhpc's cap of {MAX_SYNTHETIC_PUS}: "
                            f"describe a smaller machine")
    try:
        text = _run_lstopo(["--input", desc, "--of", "xml", "-"], f"synthetic {desc!r}")
    except TopologyError as exc:
        raise TopologyError(f"{exc}; write it like 'pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2'") from None
    return from_hwloc_xml(text, source=f"synthetic:{desc}")


def process_limits(status_text: str, affinity: set[int] | None) -> tuple[list, list]:
    """CPU and node limits of a process: its affinity mask, ``Cpus_allowed_list`` and
    ``Mems_allowed_list`` from its ``/proc/PID/status`` text → ``(cpu_limits, node_limits)``."""
    cpu, mem = [], []
    if affinity is not None:
        cpu.append((frozenset(affinity), "outside this process's CPU affinity (sched_getaffinity)"))
    for key, out, why in (("Cpus_allowed_list", cpu, "outside this process's cpuset (Cpus_allowed)"),
                          ("Mems_allowed_list", mem, "outside this process's cpuset (Mems_allowed)")):
        m = re.search(rf"^{key}:\s*(\S+)", status_text, re.M)
        if m:
            try:
                out.append((frozenset(parse_cpu_list(m.group(1))), why))
            except ValueError:
                pass
    return cpu, mem


def _own_limits() -> tuple[list, list]:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        status = ""
    try:
        aff = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        aff = None
    return process_limits(status, aff)


def from_host(use_hwloc: bool = True) -> Topology:
    """This host's usable view: hwloc (``--disallowed``, restricted to this process's limits),
    or sysfs when hwloc is not installed or ``use_hwloc`` is False (said in ``notes``)."""
    cpu, mem = _own_limits()
    if _lstopo() is None or not use_hwloc:
        topo_raw = raw_from_sysfs("/")
        topo_raw.cpu_limits += cpu
        topo_raw.node_limits += mem
        topo_raw.notes.insert(0, "hwloc's lstopo is not installed: topology read from sysfs "
                                 "(apt-get install hwloc for caches and distances as hwloc sees them)"
                              if use_hwloc else "topology read from sysfs, not hwloc (--topology sysfs)")
        return build(topo_raw)
    return from_hwloc_xml(_run_lstopo(["--of", "xml", "--disallowed", "-"], "this host"), source="host",
                          cpu_limits=cpu, node_limits=mem)


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text().strip()
    except OSError:
        return None


def _size_bytes(text: str | None) -> int | None:
    """sysfs cache size ``32768K`` → bytes."""
    m = re.fullmatch(r"(\d+)([KMG]?)", text or "")
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def _ids(root: Path, rel: str) -> tuple[int, ...]:
    text = _read(root, rel)
    try:
        return parse_cpu_list(text) if text else ()
    except ValueError:
        return ()


def raw_from_sysfs(root: str | os.PathLike = "/") -> Raw:
    """What ``<root>/sys/devices/system/{cpu,node}`` say: PUs (present, online), package and
    core ids, L3 domains (``cache/index*/level == 3``), nodes (cpulist, MemTotal, distance).
    Raises TopologyError when the tree has no CPUs."""
    base = Path(root) / "sys/devices/system"
    raw = Raw(source="sysfs")
    cpus = _ids(base, "cpu/present") or tuple(sorted(int(m.group(1)) for d in (base / "cpu").glob("cpu[0-9]*")
                                                     if (m := re.fullmatch(r"cpu(\d+)", d.name))))
    if not cpus:
        raise TopologyError(f"no CPUs under {base}/cpu: install hwloc (apt-get install hwloc) or give an hwloc XML file")
    online = set(_ids(base, "cpu/online") or cpus)
    raw.online = frozenset(online)
    sizes: list[int] = []
    for c in cpus:
        topo = f"cpu/cpu{c}/topology"
        pkg = _read(base, f"{topo}/physical_package_id")
        core = _read(base, f"{topo}/core_id")
        l3 = None
        for idx in sorted((base / f"cpu/cpu{c}/cache").glob("index*")):
            if _read(idx, "level") == "3":
                l3 = _read(idx, "shared_cpu_list")
                raw.l3_size.setdefault(l3, _size_bytes(_read(idx, "size")))
            elif _read(idx, "level") == "2" and _read(idx, "type") != "Instruction":
                sizes.append(_size_bytes(_read(idx, "size")) or 0)
        if pkg is not None:
            raw.package_os.setdefault(int(pkg), int(pkg))
        raw.pus.append(RawPU(os_index=c, package=int(pkg) if pkg is not None else None,
                             core=(pkg, core) if core is not None else None,
                             l3=l3, core_os=int(core) if core is not None else None))
    l3 = [s for s in raw.l3_size.values() if s]
    raw.llc_bytes = max(l3) if l3 else (max(sizes) if any(sizes) else None)
    nodes = _ids(base, "node/possible") or _ids(base, "node/online")
    node_online = set(_ids(base, "node/online") or nodes)
    raw.offline_nodes = frozenset(set(nodes) - node_online)
    dist: dict[tuple[int, int], int] = {}
    for n in sorted(node_online):
        mem = re.search(r"MemTotal:\s+(\d+) kB", _read(base, f"node/node{n}/meminfo") or "")
        raw.nodes.append(RawNode(os_index=n, memory_bytes=int(mem.group(1)) * 1024 if mem else None,
                                 cpuset=frozenset(_ids(base, f"node/node{n}/cpulist"))))
        row = (_read(base, f"node/node{n}/distance") or "").split()
        if len(row) == len(node_online):
            dist.update({(n, m): int(v) for m, v in zip(sorted(node_online), row)})
    raw.distances = dist or None
    return raw


def from_sysfs(root: str | os.PathLike = "/") -> Topology:
    """:func:`raw_from_sysfs` built into a :class:`Topology` (no process limits applied)."""
    raw = raw_from_sysfs(root)
    raw.notes.insert(0, "topology read from sysfs, not hwloc")
    return build(raw)


def load(spec: str | os.PathLike | None = None) -> Topology:
    """Load a topology: ``None`` or ``"host"`` → this host; ``"sysfs"`` → this host from sysfs
    only; an existing file → hwloc XML; anything else → a synthetic description or a
    :data:`SEED_MACHINES` name. Raises TopologyError (one line)."""
    if spec is None or (isinstance(spec, str) and spec.strip() in ("", "host")):
        return from_host()
    if isinstance(spec, str) and spec.strip() == "sysfs":
        return from_host(use_hwloc=False)
    if os.path.isfile(spec):
        return from_xml_file(spec)
    spec = str(spec)
    if spec in SEED_MACHINES:
        return from_synthetic(SEED_MACHINES[spec])
    if ":" not in spec:
        raise TopologyError(
            f"{spec!r} is neither a file nor a synthetic description: give an hwloc XML path, "
            f"'host', a machine name ({', '.join(SEED_MACHINES)}) or e.g. 'pack:2 numa:1 core:4 pu:1'")
    return from_synthetic(spec)
