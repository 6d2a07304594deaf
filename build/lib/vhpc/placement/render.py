"""Renderers: QEMU argv, libvirt domain XML (xml.etree), one-line descriptions."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.core.cpulist import runs as _runs
from vhpc.placement.model import BACKINGS, Placement
from vhpc.topology import Topology

_LIBVIRT_MODE = {"bind": "strict", "preferred": "preferred", "interleave": "interleave"}


def _needs_numa(p: Placement) -> bool:
    if len(p.guest_nodes) > 1 or p.backing != "4k":
        return True
    g = p.guest_nodes[0]
    return g.policy != "default" and bool(g.host_nodes)


def qemu_numa_args(placement: Placement) -> list[str]:
    """QEMU argv fragment for guest memory and NUMA (a list of strings, never a shell string).

    Per guest node i: ``-object memory-backend-ram,id=m<i>,size=<N>M[,host-nodes=..,policy=..]``
    (2m/1g backing: ``memory-backend-memfd`` with ``hugetlb=on,hugetlbsize=2M|1G,prealloc=on``,
    so a short hugepage pool fails at start, not with SIGBUS later), then
    ``-numa node,nodeid=i,cpus=<range>[,cpus=<range>...],memdev=m<i>`` (one ``cpus=`` per
    contiguous run), then ``-numa dist,src=i,dst=j,val=d`` for every i ≠ j.
    Non-contiguous host node sets repeat ``host-nodes=``.

    Returns ``[]`` when the placement has one guest node, no host binding and 4k backing: the
    caller then passes plain ``-m <memory_mib>M``. The caller always passes ``-m`` (equal to
    the total, QEMU checks it) and ``-smp <vcpus>``.
    """
    if not _needs_numa(placement):
        return []
    args: list[str] = []
    for g in placement.guest_nodes:
        if placement.backing == "4k":
            obj = f"memory-backend-ram,id=m{g.id},size={g.memory_mib}M"
        else:
            hs = "2M" if placement.backing == "2m" else "1G"
            obj = f"memory-backend-memfd,id=m{g.id},size={g.memory_mib}M,hugetlb=on,hugetlbsize={hs},prealloc=on"
        if g.host_nodes and g.policy != "default":
            obj += "".join(f",host-nodes={a}" if a == b else f",host-nodes={a}-{b}" for a, b in _runs(g.host_nodes))
            obj += f",policy={g.policy}"
        args += ["-object", obj]
    for g in placement.guest_nodes:
        cpus = "".join(f",cpus={a}" if a == b else f",cpus={a}-{b}" for a, b in _runs(g.vcpus))
        args += ["-numa", f"node,nodeid={g.id}{cpus},memdev=m{g.id}"]
    for i, row in enumerate(placement.distances):
        for j, d in enumerate(row):
            if i != j:
                args += ["-numa", f"dist,src={i},dst={j},val={d}"]
    return args


def to_libvirt_xml(placement: Placement, name: str = "vm", full: bool = False) -> str:
    """libvirt domain XML for the placement: ``<vcpu>``, ``<cputune><vcpupin vcpu cpuset/>``
    (pinned policies), ``<numatune><memory mode nodeset/><memnode cellid mode nodeset/>``
    (bound memory; bind → strict; the domain-wide ``<memory>`` takes the guest nodes' common
    mode, or ``restrictive`` when they differ), ``<memoryBacking><hugepages><page size unit nodeset/>``
    (2m/1g), and ``<cpu><numa><cell id cpus memory unit='MiB'>`` with ``<distances><sibling/>``
    when the guest has NUMA or bound memory.

    ``full=False`` gives a ``<domain>`` element with only these parts (a fragment to merge);
    ``full=True`` adds ``type='kvm'``, ``<name>``, ``<memory>`` and ``<os>`` so the result
    validates with ``virt-xml-validate``.
    """
    p = placement
    dom = ET.Element("domain")
    if full:
        dom.set("type", "kvm")
        ET.SubElement(dom, "name").text = name
        ET.SubElement(dom, "memory", unit="MiB").text = str(p.memory_mib)
    if p.backing != "4k":
        mb = ET.SubElement(dom, "memoryBacking")
        hp = ET.SubElement(mb, "hugepages")
        ET.SubElement(hp, "page", size=str(BACKINGS[p.backing]), unit="KiB",
                      nodeset=format_list(g.id for g in p.guest_nodes))
    ET.SubElement(dom, "vcpu", placement="static").text = str(p.vcpus)
    if p.pinned:
        ct = ET.SubElement(dom, "cputune")
        for v, pins in enumerate(p.vcpu_pins):
            ET.SubElement(ct, "vcpupin", vcpu=str(v), cpuset=format_list(pins))
    bound = [g for g in p.guest_nodes if g.policy != "default" and g.host_nodes]
    numa = _needs_numa(p)
    if bound:
        nt = ET.SubElement(dom, "numatune")
        modes = {_LIBVIRT_MODE[g.policy] for g in bound}
        all_nodes = format_list(n for g in bound for n in g.host_nodes)
        # domain-wide policy: the guest nodes' common mode; mixed modes (or "preferred" over
        # several nodes, which libvirt's top-level <memory> cannot express) → "restrictive"
        # (cgroup cpuset.mems only, the per-cell memnode policies still apply)
        top = modes.pop() if len(modes) == 1 else "restrictive"
        if top == "preferred" and len({n for g in bound for n in g.host_nodes}) > 1:
            top = "restrictive"
        ET.SubElement(nt, "memory", mode=top, nodeset=all_nodes)
        for g in bound:
            ET.SubElement(nt, "memnode", cellid=str(g.id), mode=_LIBVIRT_MODE[g.policy], nodeset=format_list(g.host_nodes))
    if full:
        os_el = ET.SubElement(dom, "os")
        ET.SubElement(os_el, "type", arch="x86_64", machine="pc").text = "hvm"
    if numa:
        cpu = ET.SubElement(dom, "cpu")
        nm = ET.SubElement(cpu, "numa")
        for g in p.guest_nodes:
            cell = ET.SubElement(nm, "cell", id=str(g.id), cpus=format_list(g.vcpus), memory=str(g.memory_mib), unit="MiB")
            if len(p.guest_nodes) > 1:
                ds = ET.SubElement(cell, "distances")
                for j, d in enumerate(p.distances[g.id]):
                    ET.SubElement(ds, "sibling", id=str(j), value=str(d))
    ET.indent(dom)
    return ET.tostring(dom, encoding="unicode")


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


def render_plans(topo: Topology, placements: Sequence[Placement]) -> str:
    """What ``vhpc plan`` prints: the topology's counts (allowed of total when restricted, with
    what was left out), then per VM its one-line description, the vCPU table, notes, the
    libvirt XML (:func:`to_libvirt_xml`) and the QEMU arguments (:func:`qemu_numa_args`)."""
    lines = [f"topology: {topo.summary()} ({topo.source})"]
    lines += [f"  left out: {lo.text()}" for lo in topo.left_out]
    lines += [f"  note: {n}" for n in topo.notes]
    for i, p in enumerate(placements):
        name = f"vm{i}" if len(placements) > 1 else "vm"
        lines.append(f"--- {name}: {describe(p)}")
        lines += _pin_table(p, topo)
        lines += [f"note: {n}" for n in p.notes]
        lines += ["libvirt XML", to_libvirt_xml(p, name=name)]
        qargs = qemu_numa_args(p)
        lines.append("QEMU arguments (plus -smp/-m; vCPU threads pinned via QMP query-cpus-fast + sched_setaffinity)")
        lines.append(" ".join(qargs) if qargs else f"-m {p.memory_mib}M (no NUMA backends)")
    return "\n".join(lines)
