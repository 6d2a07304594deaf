"""Guest NUMA layout and host memory: vCPU groups, memory split, binding, capacity, hugepages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.placement.model import GRANULE_MIB, GuestNode, Placement, PlacementError, PlacementRequest
from vhpc.placement.policy import Policy
from vhpc.topology import Topology


def split_memory(memory_mib: int, weights: list[int], backing: str) -> list[int]:
    """Split memory in proportion to weights, in whole pages (largest remainder)."""
    g = GRANULE_MIB[backing]
    if memory_mib % g:
        lo = memory_mib // g * g
        raise PlacementError(
            f"memory {memory_mib} MiB is not a multiple of the {backing} page ({g} MiB): "
            f"use {lo or g} or {lo + g} MiB")
    units = memory_mib // g
    total = sum(weights)
    exact = [units * w / total for w in weights]
    base = [int(x) for x in exact]
    rest = units - sum(base)
    for i in sorted(range(len(weights)), key=lambda i: (-(exact[i] - base[i]), i))[:rest]:
        base[i] += 1
    for i, b in enumerate(base):
        if b == 0:
            need = len(weights) * g
            raise PlacementError(
                f"memory {memory_mib} MiB split over {len(weights)} guest nodes leaves guest node {i} without a whole "
                f"{backing} page: give at least {need} MiB or fewer guest nodes")
    return [b * g for b in base]


def guest_groups(req: PlacementRequest, pins: list[tuple[int, ...]] | None, topo: Topology) -> list[tuple[int, ...]]:
    """vCPU groups, one per guest node."""
    v = req.vcpus
    gn = req.guest_numa
    if isinstance(gn, str) and gn.isdigit():
        gn = int(gn)
    if gn == "hidden":
        return [tuple(range(v))]
    if gn == "mirror":
        if pins is None:
            count = min(len(topo.cpu_node_ids) or 1, v)
            return _blocks(v, count)
        by_node: dict[int, list[int]] = {}
        for i, s in enumerate(pins):
            nodes = [n for n in (topo.node_of_pu(p) for p in s) if n is not None]
            by_node.setdefault(min(nodes) if nodes else -1, []).append(i)  # -1: PUs without a node
        return [tuple(by_node[n]) for n in sorted(by_node, key=lambda n: (n < 0, n))]
    if isinstance(gn, int) and not isinstance(gn, bool):
        if gn < 1 or gn > v:
            raise PlacementError(f"guest_numa={gn}: give 1..{v} guest nodes (one vCPU each at least), 'hidden' or 'mirror'")
        return _blocks(v, gn)
    raise PlacementError(f"guest_numa={gn!r}: use 'hidden', 'mirror' or a number of guest nodes")


def _blocks(v: int, k: int) -> list[tuple[int, ...]]:
    out, start = [], 0
    for i in range(k):
        n = v // k + (1 if i < v % k else 0)
        out.append(tuple(range(start, start + n)))
        start += n
    return out


def memory_binding(pol: Policy, groups: list[tuple[int, ...]], pins, topo: Topology) -> list[tuple[tuple[int, ...], str]]:
    """(host_nodes, policy) per guest node."""
    t = pol.text
    for n in pol.mem_nodes:
        _memory_node(topo, n, t)
    mem_only = tuple(n for n in pol.targets if pol.name == "nodes" and not topo.node(n).pus)
    if mem_only and not pol.mem_nodes and pol.mem in ("auto", "bind", "interleave"):
        mode = pol.mem if pol.mem != "auto" else ("bind" if len(mem_only) == 1 else "interleave")
        return [(tuple(sorted(mem_only)), mode)] * len(groups)
    if pol.mem_nodes:
        L = pol.mem_nodes
        if len(groups) == 1:
            per = [tuple(sorted(L))]
        elif len(L) == 1:
            per = [L] * len(groups)
        elif len(L) == len(groups):
            per = [(n,) for n in L]
        else:
            raise PlacementError(
                f"policy {t!r}: {len(L)} memory nodes for {len(groups)} guest nodes: give one node, or one per guest node")
        mode = pol.mem
        out = []
        for nodes in per:
            if mode == "preferred" and len(nodes) != 1:
                raise PlacementError(f"policy {t!r}: preferred takes one host node per guest node: use bind or interleave")
            out.append((nodes, mode if mode != "auto" else "bind"))
        return out
    if pol.mem == "local" or (pins is None and pol.mem == "auto"):
        return [((), "default")] * len(groups)
    if pins is None:
        raise PlacementError(f"policy {t!r}: float vCPUs have no node to bind memory to: give nodes, e.g. float;mem=0")
    out = []
    for g in groups:
        nodes = tuple(sorted({n for v in g for p in pins[v] if (n := topo.node_of_pu(p)) is not None
                              and topo.node(n).has_memory}))
        if not nodes:  # PUs without a usable node, or a CPU node without memory
            out.append(((), "default"))
        elif pol.mem == "auto":
            out.append((nodes, "bind" if len(nodes) == 1 else "interleave"))
        elif pol.mem == "preferred" and len(nodes) != 1:
            raise PlacementError(
                f"policy {t!r}: a guest node spans host nodes {format_list(nodes)}, preferred needs one: "
                f"use guest_numa='mirror', or mem=bind/interleave")
        else:
            out.append((nodes, pol.mem))
    return out


def _memory_node(topo: Topology, n: int, policy: str) -> None:
    """Refuse a memory target that is not usable or holds no memory, naming the ones that fit."""
    ok = format_list(topo.memory_node_ids)
    fit = f"bind memory to one of nodes {ok}" if ok else "no node with memory is usable: leave memory unbound (mem=local)"
    if n not in topo.node_ids:
        raise PlacementError(f"policy {policy!r}: {topo._why('NUMA node', n)}: {fit}")
    if not topo.node(n).has_memory:
        raise PlacementError(f"policy {policy!r}: NUMA node {n} has no memory: {fit}")


def node_demand(nodes: Sequence[GuestNode]) -> dict[int, float]:
    """MiB each host node must hold (multi-node bind/interleave: even split)."""
    d: dict[int, float] = {}
    for g in nodes:
        if g.policy == "default" or not g.host_nodes:
            continue
        for n in g.host_nodes:
            d[n] = d.get(n, 0.0) + g.memory_mib / len(g.host_nodes)
    return d


def check_capacity(topo: Topology, demand: Mapping[int, float], what: str) -> None:
    """Raise PlacementError when ``demand`` (host node → MiB) puts more on a node than
    ``topo`` says it holds (nodes of unknown size pass); ``what`` names the guest(s)."""
    for n, mib in sorted(demand.items()):
        cap = topo.node(n).memory_bytes
        if cap is None:
            continue
        cap_mib = cap / (1 << 20)
        if mib > cap_mib:
            raise PlacementError(
                f"{what} puts {mib:.0f} MiB on host node {n}, which has {cap_mib:.0f} MiB: lower memory_mib, "
                f"spread memory over more nodes, or set check_memory=False if the host under-reports node memory")


def guest_distances(topo: Topology, nodes: Sequence[GuestNode]) -> tuple[tuple[int, ...], ...]:
    """The guest's NUMA distance matrix (ACPI SLIT units: 10 local): between guest nodes, the
    mean host distance of their host nodes, at least 11; 20 where one is unbound."""
    rows = []
    for a in nodes:
        row = []
        for b in nodes:
            if a.id == b.id:
                row.append(10)
            elif not a.host_nodes or not b.host_nodes:
                row.append(20)
            else:
                vals = [topo.distance(x, y) for x in a.host_nodes for y in b.host_nodes]
                row.append(max(11, round(sum(vals) / len(vals))))
        rows.append(tuple(row))
    return tuple(rows)


def check_hugepages(placement: Placement | Sequence[Placement], available: Mapping[int, Mapping[int, int]]) -> None:
    """Check hugepage-backed guest memory against free hugepages ``{node: {page_kib: free}}``
    (from :func:`vhpc.host.facts.read_hugepages`). A guest node bound to several host nodes needs an even share
    on each; an unbound one needs its pages anywhere (total over nodes). Several placements
    (one plan) are summed. 4k backing needs nothing. Raises PlacementError naming the node,
    the shortfall and the sysfs file to raise."""
    placements = [placement] if isinstance(placement, Placement) else list(placement)
    need: dict[tuple[int | None, int], int] = {}
    for p in placements:
        kib = p.hugepage_kib
        if kib is None:
            continue
        for g in p.guest_nodes:
            pages = g.memory_mib * 1024 // kib
            if g.policy == "default" or not g.host_nodes:
                need[(None, kib)] = need.get((None, kib), 0) + pages
            else:
                k = len(g.host_nodes)
                for i, n in enumerate(g.host_nodes):
                    share = pages // k + (1 if i < pages % k else 0)
                    need[(n, kib)] = need.get((n, kib), 0) + share
    for (n, kib), pages in sorted(need.items(), key=lambda x: (x[0][0] is None, x[0][0] or 0, x[0][1])):
        label = f"{kib // 1024} MiB" if kib < 1048576 else f"{kib // 1048576} GiB"
        if n is None:
            free = sum(sizes.get(kib, 0) for sizes in available.values())
            if free < pages:
                raise PlacementError(
                    f"unbound guest memory needs {pages} free {label} hugepages, the host has {free}: reserve "
                    f"{pages - free} more (e.g. /sys/kernel/mm/hugepages/hugepages-{kib}kB/nr_hugepages)")
            continue
        free = available.get(n, {}).get(kib, 0)
        if free < pages:
            raise PlacementError(
                f"host node {n} has {free} free {label} hugepages, the placement needs {pages}: reserve {pages - free} "
                f"more in /sys/devices/system/node/node{n}/hugepages/hugepages-{kib}kB/nr_hugepages")
