"""Guest NUMA layout and host memory: vCPU groups, memory split, binding, capacity, hugepages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.placement.model import GRANULE_MIB, GuestNode, Placement, PlacementError, PlacementRequest
from vhpc.placement.policy import Policy
from vhpc.topology import Topology


def split_memory(memory_mib: int, weights: list[int], backing: str) -> list[int]:
    """Split ``memory_mib`` (MiB) over guest nodes in proportion to ``weights`` (one per guest
    node, e.g. its vCPUs), in whole pages of ``backing`` (``4k``, ``2m``, ``1g``:
    :data:`GRANULE_MIB`) by the largest-remainder (Hamilton) method: a list of MiB, one per guest
    node, summing to ``memory_mib``.  Raises PlacementError when ``memory_mib`` is not a whole
    number of pages, or a guest node would get no whole page."""
    granule_mib = GRANULE_MIB[backing]
    if memory_mib % granule_mib:
        lower = memory_mib // granule_mib * granule_mib
        raise PlacementError(
            f"memory {memory_mib} MiB is not a multiple of the {backing} page ({granule_mib} MiB): "
            f"use {lower or granule_mib} or {lower + granule_mib} MiB")
    pages = memory_mib // granule_mib
    total = sum(weights)
    exact = [pages * weight / total for weight in weights]
    shares = [int(share) for share in exact]
    rest = pages - sum(shares)
    for i in sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))[:rest]:
        shares[i] += 1
    for i, share in enumerate(shares):
        if share == 0:
            need = len(weights) * granule_mib
            raise PlacementError(
                f"memory {memory_mib} MiB split over {len(weights)} guest nodes leaves guest node {i} without a whole "
                f"{backing} page: give at least {need} MiB or fewer guest nodes")
    return [share * granule_mib for share in shares]


def guest_groups(req: PlacementRequest, pins: list[tuple[int, ...]] | None, topology: Topology) -> list[tuple[int, ...]]:
    """The vCPU groups of ``req``'s guest, one tuple of vCPU indexes per guest NUMA node, from
    ``guest_numa``: ``hidden`` one group; a number K, K contiguous blocks as even as possible;
    ``mirror``, one group per host node the pinned PUs (``pins``: one tuple of host PU OS indexes
    per vCPU; None when the vCPUs float) lie on, else as many blocks as the host has CPU nodes (one
    vCPU each at least).  Raises PlacementError for a number outside 1..vCPUs or any other value.
    """
    vcpus = req.vcpus
    guest_numa = req.guest_numa
    if isinstance(guest_numa, str) and guest_numa.isdigit():
        guest_numa = int(guest_numa)
    if guest_numa == "hidden":
        return [tuple(range(vcpus))]
    if guest_numa == "mirror":
        if pins is None:
            count = min(len(topology.cpu_node_ids) or 1, vcpus)
            return _blocks(vcpus, count)
        by_node: dict[int, list[int]] = {}
        for vcpu, pus in enumerate(pins):
            nodes = [node for node in (topology.node_of_pu(pu) for pu in pus) if node is not None]
            by_node.setdefault(min(nodes) if nodes else -1, []).append(vcpu)  # -1: PUs without a node
        return [tuple(by_node[node]) for node in sorted(by_node, key=lambda node: (node < 0, node))]
    if isinstance(guest_numa, int) and not isinstance(guest_numa, bool):
        if guest_numa < 1 or guest_numa > vcpus:
            raise PlacementError(f"guest_numa={guest_numa}: give 1..{vcpus} guest nodes (one vCPU each at least), "
                                 "'hidden' or 'mirror'")
        return _blocks(vcpus, guest_numa)
    raise PlacementError(f"guest_numa={guest_numa!r}: use 'hidden', 'mirror' or a number of guest nodes")


def _blocks(vcpus: int, count: int) -> list[tuple[int, ...]]:
    """vCPUs 0..vcpus-1 in ``count`` contiguous blocks, the first ``vcpus % count`` one larger."""
    out, start = [], 0
    for i in range(count):
        size = vcpus // count + (1 if i < vcpus % count else 0)
        out.append(tuple(range(start, start + size)))
        start += size
    return out


def memory_binding(policy: Policy, groups: list[tuple[int, ...]], pins,
                   topology: Topology) -> list[tuple[tuple[int, ...], str]]:
    """The memory binding of each guest node (``groups``: its vCPUs, :func:`guest_groups`):
    ``(host_nodes, mode)``, mode a set_mempolicy(2)/libvirt ``<memnode mode=>`` one (``bind``,
    ``interleave``, ``preferred``) or ``default`` with no host nodes (memory left unbound).

    Explicit ``mem=`` nodes (one for all, or one per guest node) come first; a ``nodes`` policy
    onto memory-only nodes binds to them; otherwise each guest node binds to the host nodes with
    memory that its pinned PUs (``pins``: one tuple of host PU OS indexes per vCPU; None when they
    float) lie on, ``mem=auto`` choosing bind for one node and interleave for several.  Raises
    PlacementError when a memory node is not usable or holds no memory, when the count of ``mem=``
    nodes fits neither one nor one per guest node, when ``preferred`` would need several nodes, or
    when floating vCPUs ask for a binding without ``mem=`` nodes."""
    policy_text = policy.text
    for node in policy.mem_nodes:
        _memory_node(topology, node, policy_text)
    memory_only = tuple(node for node in policy.targets
                        if policy.name == "nodes" and not topology.node(node).pus)
    if memory_only and not policy.mem_nodes and policy.mem in ("auto", "bind", "interleave"):
        mode = policy.mem if policy.mem != "auto" else ("bind" if len(memory_only) == 1 else "interleave")
        return [(tuple(sorted(memory_only)), mode)] * len(groups)
    if policy.mem_nodes:
        memory_nodes = policy.mem_nodes
        if len(groups) == 1:
            per_guest_node = [tuple(sorted(memory_nodes))]
        elif len(memory_nodes) == 1:
            per_guest_node = [memory_nodes] * len(groups)
        elif len(memory_nodes) == len(groups):
            per_guest_node = [(node,) for node in memory_nodes]
        else:
            raise PlacementError(
                f"policy {policy_text!r}: {len(memory_nodes)} memory nodes for {len(groups)} guest nodes: "
                "give one node, or one per guest node")
        mode = policy.mem
        out = []
        for nodes in per_guest_node:
            if mode == "preferred" and len(nodes) != 1:
                raise PlacementError(f"policy {policy_text!r}: preferred takes one host node per guest node: "
                                     "use bind or interleave")
            out.append((nodes, mode if mode != "auto" else "bind"))
        return out
    if policy.mem == "local" or (pins is None and policy.mem == "auto"):
        return [((), "default")] * len(groups)
    if pins is None:
        raise PlacementError(f"policy {policy_text!r}: float vCPUs have no node to bind memory to: give nodes, "
                             "e.g. float;mem=0")
    out = []
    for group in groups:
        nodes = tuple(sorted({node for vcpu in group for pu in pins[vcpu]
                              if (node := topology.node_of_pu(pu)) is not None
                              and topology.node(node).has_memory}))
        if not nodes:  # PUs without a usable node, or a CPU node without memory
            out.append(((), "default"))
        elif policy.mem == "auto":
            out.append((nodes, "bind" if len(nodes) == 1 else "interleave"))
        elif policy.mem == "preferred" and len(nodes) != 1:
            raise PlacementError(
                f"policy {policy_text!r}: a guest node spans host nodes {format_list(nodes)}, preferred needs one: "
                f"use guest_numa='mirror', or mem=bind/interleave")
        else:
            out.append((nodes, policy.mem))
    return out


def _memory_node(topology: Topology, node: int, policy: str) -> None:
    """Refuse a memory target that is not usable or holds no memory, naming the ones that fit."""
    usable = format_list(topology.memory_node_ids)
    fit = (f"bind memory to one of nodes {usable}" if usable
           else "no node with memory is usable: leave memory unbound (mem=local)")
    if node not in topology.node_ids:
        raise PlacementError(f"policy {policy!r}: {topology._why('NUMA node', node)}: {fit}")
    if not topology.node(node).has_memory:
        raise PlacementError(f"policy {policy!r}: NUMA node {node} has no memory: {fit}")


def node_demand(nodes: Sequence[GuestNode]) -> dict[int, float]:
    """MiB each host node must hold for the guest nodes ``nodes``: {host node: MiB}; a guest node
    bound to several host nodes (bind/interleave) puts an even share on each, an unbound one
    (``default``) on none."""
    demand: dict[int, float] = {}
    for guest_node in nodes:
        if guest_node.policy == "default" or not guest_node.host_nodes:
            continue
        for node in guest_node.host_nodes:
            demand[node] = demand.get(node, 0.0) + guest_node.memory_mib / len(guest_node.host_nodes)
    return demand


def check_capacity(topology: Topology, demand: Mapping[int, float], what: str) -> None:
    """Raise PlacementError when ``demand`` (host node → MiB) puts more on a node than
    ``topology`` says it holds (nodes of unknown size pass); ``what`` names the guest(s)."""
    for node, mib in sorted(demand.items()):
        capacity = topology.node(node).memory_bytes
        if capacity is None:
            continue
        capacity_mib = capacity / (1 << 20)
        if mib > capacity_mib:
            raise PlacementError(
                f"{what} puts {mib:.0f} MiB on host node {node}, which has {capacity_mib:.0f} MiB: lower memory_mib, "
                f"spread memory over more nodes, or set check_memory=False if the host under-reports node memory")


def guest_distances(topology: Topology, nodes: Sequence[GuestNode]) -> tuple[tuple[int, ...], ...]:
    """The guest's NUMA distance matrix (ACPI SLIT units: 10 local): between guest nodes, the mean
    host distance of their host nodes, at least 11; 20 where one is unbound.  A tuple of rows, one
    per guest node of ``nodes``, in their order."""
    rows = []
    for here in nodes:
        row = []
        for there in nodes:
            if here.id == there.id:
                row.append(10)
            elif not here.host_nodes or not there.host_nodes:
                row.append(20)
            else:
                distances = [topology.distance(source, target)
                             for source in here.host_nodes for target in there.host_nodes]
                row.append(max(11, round(sum(distances) / len(distances))))
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
    for placed in placements:
        kib = placed.hugepage_kib
        if kib is None:
            continue
        for guest_node in placed.guest_nodes:
            pages = guest_node.memory_mib * 1024 // kib
            if guest_node.policy == "default" or not guest_node.host_nodes:
                need[(None, kib)] = need.get((None, kib), 0) + pages
            else:
                spread = len(guest_node.host_nodes)
                for i, node in enumerate(guest_node.host_nodes):
                    share = pages // spread + (1 if i < pages % spread else 0)
                    need[(node, kib)] = need.get((node, kib), 0) + share
    for (node, kib), pages in sorted(need.items(), key=lambda x: (x[0][0] is None, x[0][0] or 0, x[0][1])):
        label = f"{kib // 1024} MiB" if kib < 1048576 else f"{kib // 1048576} GiB"
        if node is None:
            free = sum(sizes.get(kib, 0) for sizes in available.values())
            if free < pages:
                raise PlacementError(
                    f"unbound guest memory needs {pages} free {label} hugepages, the host has {free}: reserve "
                    f"{pages - free} more (e.g. /sys/kernel/mm/hugepages/hugepages-{kib}kB/nr_hugepages)")
            continue
        free = available.get(node, {}).get(kib, 0)
        if free < pages:
            raise PlacementError(
                f"host node {node} has {free} free {label} hugepages, the placement needs {pages}: reserve {pages - free} "
                f"more in /sys/devices/system/node/node{node}/hugepages/hugepages-{kib}kB/nr_hugepages")
