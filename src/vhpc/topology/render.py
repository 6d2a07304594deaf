"""Text drawings of a topology for ``vhpc host`` (pure: data in, text out)."""

from __future__ import annotations

import textwrap

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.topology.model import Core, Topology

__all__ = ["render_text", "size_text"]


def size_text(size: int | None) -> str:
    """Bytes as ``16 MiB`` / ``1.5 GiB`` (``? memory`` when unknown)."""
    if size is None:
        return "? memory"
    for unit, f in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= f:
            v = size / f
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.05 else f"{v:.1f} {unit}"
    return f"{size} B"


def _node_label(topo: Topology, n) -> str:
    mem_note = "" if topo.memory_known else ", invented"
    kind = "" if n.memory_type == "DRAM" else f"{n.memory_type}, "
    return f"node {n.os_index} ({kind}{size_text(n.memory_bytes)}{mem_note})"


def _emit_cores(topo: Topology, lines: list[str], cores: list[Core], indent: str, width: int) -> None:
    by_l3: dict[int | None, list[Core]] = {}
    for c in cores:
        by_l3.setdefault(c.l3, []).append(c)
    for l3, cs in by_l3.items():
        if l3 is not None and l3 < len(topo.l3s):
            head = f"{indent}L3 {l3} ({size_text(topo.l3s[l3].size_bytes)}): "
        else:
            head = f"{indent}cores: "
        wrapped = textwrap.wrap(" ".join(f"{c.index}[{format_list(c.pus)}]" for c in cs), width=max(20, width - len(head)))
        lines.append(head + (wrapped[0] if wrapped else ""))
        lines.extend(" " * len(head) + w for w in wrapped[1:])


def _header(topo: Topology) -> list[str]:
    lines = [f"host: {topo.summary()}" + (f"  [{topo.source}]" if topo.source else "")]
    if topo.restricted:
        lines.append("allowed view (what vhpc places on); left out:")
        lines.extend(f"  {lo.text()}" for lo in topo.left_out)
    lines.extend(f"note: {n}" for n in topo.notes)
    if topo.llc_bytes:
        lines.append(f"last-level cache: {size_text(topo.llc_bytes)} per domain")
    return lines


def render_text(topo: Topology, width: int = 100) -> str:
    """A compact text drawing for ``vhpc host``: the counts (allowed of total when restricted),
    what was left out and why, loader notes, then package → NUMA node (kind, memory) → L3 →
    cores with their PU lists, memory-only nodes, PUs without a node, and the distance matrix."""
    lines = _header(topo)
    for n in topo.nodes:
        if n.pus and n.package is None:
            pk = sorted({topo.pu(p).package for p in n.pus if topo.pu(p).package is not None})
            where = f"packages {format_list(pk)}" if pk else "no package"
            lines.append(f"{_node_label(topo, n)} spans {where}, PUs {format_list(n.pus)}")
    for pkg in topo.packages:
        lines.append(f"package {pkg.index}: PUs {format_list(pkg.pus)}")
        pkg_cores = [c for c in topo.cores if c.package == pkg.index]
        own = [topo.node(n) for n in pkg.nodes if topo.node(n).package == pkg.index]
        for n in own:
            lines.append(f"  {_node_label(topo, n)}: PUs {format_list(n.pus)}")
            _emit_cores(topo, lines, [c for c in pkg_cores if c.node == n.os_index], "    ", width)
        rest = [c for c in pkg_cores if c.node not in {n.os_index for n in own}]
        if rest:
            _emit_cores(topo, lines, rest, "  ", width)
    loose = [c for c in topo.cores if c.package is None]
    if loose:
        lines.append("outside packages:")
        _emit_cores(topo, lines, loose, "  ", width)
    for n in topo.nodes:
        if n.memory_only:
            near = f"near PUs {format_list(n.near_pus)}" if n.near_pus else "no nearby PU"
            lines.append(f"{_node_label(topo, n)}: memory only, {near}")
    nodeless = [p.os_index for p in topo.pus if p.node is None]
    if nodeless and topo.nodes:
        lines.append(f"PUs {format_list(nodeless)}: no usable local NUMA node (memory there is left unbound)")
    if len(topo.nodes) > 1:
        kind = "hwloc" if topo.distances_measured else "assumed 10/20"
        lines.append(f"distances ({kind}):")
        lines.append("      " + "".join(f"{i:>5}" for i in topo.node_ids))
        for i, row in zip(topo.node_ids, topo.distances):
            lines.append(f"  {i:>4}" + "".join(f"{v:>5}" for v in row))
    return "\n".join(lines)
