"""Reading back where memory really is: ``/proc/PID/numa_maps`` (numa(7), proc(5)).

Each numa_maps line is ``ADDRESS POLICY key=value ...``; ``N<node>=<pages>`` counts resident
pages per node and ``kernelpagesize_kB`` gives the page size.  vhpc sums them per node to get
a QEMU process's resident memory per host NUMA node, and keeps the policies of the large
anonymous mappings (guest RAM backends: ``bind:0``, ``interleave:0-1``, ``default``).
"""

from __future__ import annotations

import re
from pathlib import Path

NODE_RE = re.compile(r"\bN(\d+)=(\d+)")
PAGESIZE_RE = re.compile(r"\bkernelpagesize_kB=(\d+)")


def parse_numa_maps(text: str, min_mib: float = 16.0) -> dict:
    """Summarise numa_maps text.

    Returns ``{"node_mib": {node: MiB resident}, "mappings": [{"policy": str, "node_mib":
    {node: MiB}, "huge": bool}]}``; ``mappings`` lists only anonymous or hugepage mappings with
    at least ``min_mib`` resident (guest RAM, not libraries).  Node keys are ints.
    """
    total: dict[int, float] = {}
    mappings = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        m = PAGESIZE_RE.search(line)
        kib = int(m.group(1)) if m else 4
        per_node = {int(n): int(p) * kib / 1024 for n, p in NODE_RE.findall(line)}
        for n, mib in per_node.items():
            total[n] = total.get(n, 0.0) + mib
        big = sum(per_node.values()) >= min_mib
        if big and ("anon=" in line or "huge" in line or "file=/memfd" in line):
            mappings.append({"policy": parts[1], "node_mib": per_node, "huge": kib > 4})
    return {"node_mib": dict(sorted(total.items())), "mappings": mappings}


def read_numa_maps(pid: int) -> dict | None:
    """:func:`parse_numa_maps` of process ``pid``; None when unreadable (process gone, no
    NUMA support, or no permission)."""
    try:
        return parse_numa_maps(Path(f"/proc/{pid}/numa_maps").read_text())
    except OSError:
        return None


def guest_nodes(read) -> list[dict]:
    """The guest's NUMA nodes from its sysfs, read with ``read(path) -> str | None`` (the guest
    agent's file read: no process is started in the guest).

    Returns ``[{"node": n, "cpus": "0-1", "mem_mib": MiB}]`` sorted by node; ``cpus`` is ""
    for a memory-only node.  Sources: /sys/devices/system/node/online, nodeN/cpulist and
    nodeN/meminfo (``Node N MemTotal: X kB``).
    """
    from vhpc.core.cpulist import parse_cpu_list as parse_list

    online = read("/sys/devices/system/node/online")
    if not online:
        return []
    out = []
    for n in parse_list(online.strip()):
        base = f"/sys/devices/system/node/node{n}"
        cpus = (read(f"{base}/cpulist") or "").strip()
        meminfo = read(f"{base}/meminfo") or ""
        m = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
        out.append({"node": n, "cpus": cpus, "mem_mib": int(m.group(1)) // 1024 if m else 0})
    return out
