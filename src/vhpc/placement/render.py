"""Renderers: one-line descriptions and pin tables of placements.  The hypervisors' own
dialects (QEMU argv, libvirt domain XML) belong to their backends
(``environments/vm/backends/qemu.py``, ``libvirt_xml.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.placement.model import Placement
from vhpc.topology import Topology

def describe(placement: Placement) -> str:
    """One line for terminals and reports, e.g.
    ``span:2: vCPU 0-1→PU 0-1, 2-3→PU 4-5; guest node 0: 2048 MiB bind host 0, ...``."""
    p = placement
    if p.pinned:
        parts = []
        start = 0
        while start < p.vcpus:
            end = start
            # extend a run while vCPU+1 → next single PU
            while (end + 1 < p.vcpus and len(p.vcpu_pins[end]) == 1 and len(p.vcpu_pins[end + 1]) == 1
                   and p.vcpu_pins[end + 1][0] == p.vcpu_pins[end][0] + 1):
                end += 1
            if end > start:
                parts.append(f"{start}-{end}→PU {p.vcpu_pins[start][0]}-{p.vcpu_pins[end][0]}")
            else:
                parts.append(f"{start}→PU {format_list(p.vcpu_pins[start])}")
            start = end + 1
        cpu = "vCPU " + ", ".join(parts)
    else:
        cpu = f"{p.vcpus} vCPUs unpinned"
    mem = ", ".join(
        f"guest node {g.id}: {g.memory_mib} MiB " + (f"{g.policy} host {format_list(g.host_nodes)}" if g.policy != "default" else "unbound")
        for g in p.guest_nodes)
    back = "" if p.backing == "4k" else f"; {p.backing} hugepages"
    return f"{p.policy}: {cpu}; {mem}{back}"


def _pin_table(placement: Placement, topo: Topology) -> list[str]:
    """vCPU | pCPUs | host node | package | guest node, one row per vCPU."""
    guest_of = {v: g.id for g in placement.guest_nodes for v in g.vcpus}
    rows = [("vCPU", "pCPUs", "host node", "package", "guest node")]
    for v in range(placement.vcpus):
        pins = placement.vcpu_pins[v] if placement.vcpu_pins else ()
        nodes = {topo.node_of_pu(c) for c in pins} - {None}
        pkgs = {topo.pu(c).package for c in pins} - {None}
        rows.append((str(v), format_list(pins) or "any",
                     format_list(nodes) or ("none" if pins else "any"),
                     format_list(pkgs) or ("none" if pins else "any"), str(guest_of.get(v, 0))))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def render_plans(topo: Topology, placements: Sequence[Placement],
                 dialects: Callable[[Placement, str], list[str]] | None = None) -> str:
    """What ``vhpc plan`` prints: the topology's counts (allowed of total when restricted, with
    what was left out), then per VM its one-line description, the vCPU table, notes, and the
    lines ``dialects(placement, vm_name)`` gives (each hypervisor backend's own rendering:
    QEMU arguments, libvirt XML; the placement room knows no hypervisor)."""
    lines = [f"topology: {topo.summary()} ({topo.source})"]
    lines += [f"  left out: {lo.text()}" for lo in topo.left_out]
    lines += [f"  note: {n}" for n in topo.notes]
    for i, p in enumerate(placements):
        name = f"vm{i}"  # the guests' names, as a vcluster numbers them
        lines.append(f"--- {name}: {describe(p)}")
        lines += _pin_table(p, topo)
        lines += [f"note: {n}" for n in p.notes]
        if dialects is not None:
            lines += dialects(p, name)
    return "\n".join(lines)
