"""Placing VMs on a :class:`~vhpc.topology.Topology`: vCPU → PU pins, plans of several VMs."""

from __future__ import annotations

from collections.abc import Sequence

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.placement.memory import (check_capacity, guest_distances, guest_groups, memory_binding, node_demand,
                                   split_memory)
from vhpc.placement.model import BACKINGS, GuestNode, Placement, PlacementError, PlacementRequest
from vhpc.placement.policy import Policy, parse_policy
from vhpc.topology import Topology, TopologyError


class NoFit(PlacementError):
    """The policy's PUs are too few for the request (place() adds the policy that would fit)."""


def _core_order(topo: Topology, pus) -> list[int]:
    """PUs one per core first (cores in order of their first PU), then second threads, ..."""
    by_core: dict[int, list[int]] = {}
    for p in pus:
        by_core.setdefault(topo.pu(p).core, []).append(p)
    cores = sorted(by_core, key=lambda c: min(by_core[c]))
    depth = max((len(v) for v in by_core.values()), default=0)
    return [sorted(by_core[c])[k] for k in range(depth) for c in cores if k < len(by_core[c])]


def _node_order(topo: Topology, n: int) -> list[int]:
    """PUs of node n in compact order (:func:`_core_order`)."""
    return _core_order(topo, topo.node(n).pus)


def _package_order(topo: Topology, pkg: int) -> list[int]:
    """PUs of a package: its nodes one after the other in compact order, then PUs of the
    package outside those nodes (UMA, or PUs without a usable node) by core."""
    p = topo.package(pkg)
    own = [n for n in p.nodes if topo.node(n).package == pkg]
    order = [pu for n in own for pu in _node_order(topo, n)]
    taken = set(order)
    return order + _core_order(topo, [pu for pu in p.pus if pu not in taken])


def _host_orders(topo: Topology) -> list[list[int]]:
    """Compact order per CPU node, plus one group for PUs without a usable node."""
    orders = [_node_order(topo, n) for n in topo.cpu_node_ids]
    loose = [p.os_index for p in topo.pus if p.node is None]
    return orders + ([_core_order(topo, loose)] if loose else [])


def _cpu_node(topo: Topology, n: int, policy: str) -> None:
    """Refuse a vCPU target node that is not usable or has no PUs, naming the ones that fit."""
    cpu = format_list(topo.cpu_node_ids)
    if n not in topo.node_ids:
        fit = f"use one of the CPU nodes {cpu}" if cpu else "no NUMA node with PUs is usable: use compact, spread or span:K"
        raise PlacementError(f"policy {policy!r}: {topo._why('NUMA node', n)}: {fit}")
    node = topo.node(n)
    if not node.pus:
        near = f", near PUs {format_list(node.near_pus)}" if node.near_pus else ""
        raise PlacementError(
            f"policy {policy!r}: node {n} is memory-only ({node.memory_type}{near}), not CPU capacity: put vCPUs on a "
            f"CPU node ({cpu}) and memory on {n}, e.g. nodes:{topo.cpu_node_ids[0] if topo.cpu_node_ids else 0},{n} "
            f"or ;mem={n}")


def _take(groups: list[tuple[str, list[int]]], req: PlacementRequest, policy: str, topo: Topology) -> list[int]:
    """Even block distribution of req.vcpus over groups, VM share number req.vm_index."""
    k = len(groups)
    v = req.vcpus
    if v < k:
        raise PlacementError(f"policy {policy!r} spreads over {k} places but the VM has {v} vCPUs: give at least {k} vCPUs")
    shares = [v // k + (1 if i < v % k else 0) for i in range(k)]
    nvms = max(req.vms, req.vm_index + 1)
    out: list[int] = []
    for (label, order), share in zip(groups, shares):
        need = nvms * share
        if need > len(order):
            who = f"{nvms} VMs × {share} vCPUs" if nvms > 1 else f"{share} vCPUs"
            has = topo.pu_count_text() if label == "the host" else f"{len(order)} usable PUs"
            raise NoFit(f"policy {policy!r}: {who} on {label} need {need} PUs but it has {has}")
        out.extend(order[req.vm_index * share:(req.vm_index + 1) * share])
    return out


def _chosen(topo: Topology, pol: Policy, req: PlacementRequest) -> list[int]:
    """One PU per vCPU for the policies that pick PUs themselves (not ``map``)."""
    t = pol.text
    if pol.name == "compact":
        return _take([("the host", [p for o in _host_orders(topo) for p in o])], req, t, topo)
    if pol.name == "spread":
        orders = _host_orders(topo)
        rr = [o[i] for i in range(max(map(len, orders), default=0)) for o in orders if i < len(o)]
        return _take([("the host", rr)], req, t, topo)
    if pol.name in ("span", "packages"):
        pk_ids = [p.index for p in topo.packages]
        if pol.name == "span":
            if pol.count > len(pk_ids):
                raise PlacementError(f"policy {t!r}: the host has {topo.package_count_text()}: use span:1..{len(pk_ids)}"
                                     if len(pk_ids) > 1 else
                                     f"policy {t!r}: the host has {topo.package_count_text()}: use span:1 or compact")
            pkgs = pk_ids[: pol.count]
        else:
            for p in pol.targets:
                if p not in pk_ids:
                    raise PlacementError(f"policy {t!r}: {topo._why('package', p)}: use one of {format_list(pk_ids)}")
            pkgs = list(pol.targets)
        return _take([(f"package {p}", _package_order(topo, p)) for p in pkgs], req, t, topo)
    if pol.name == "confine":
        _cpu_node(topo, pol.targets[0], t)
        targets = list(pol.targets)
    else:  # nodes: memory-only nodes in the list take memory, not vCPUs
        for n in pol.targets:
            if n not in topo.node_ids:
                _cpu_node(topo, n, t)
        targets = [n for n in pol.targets if topo.node(n).pus]
        if not targets:
            _cpu_node(topo, pol.targets[0], t)
    return _take([(f"node {n}", _node_order(topo, n)) for n in targets], req, t, topo)


def _pins(topo: Topology, pol: Policy, req: PlacementRequest) -> list[tuple[int, ...]]:
    """Per-vCPU allowed PU sets for a pinned policy."""
    if pol.name == "map":
        return _map_pins(topo, pol, req)
    chosen = _chosen(topo, pol, req)
    if pol.pin == "node":
        return [topo.node(topo.node_of_pu(p)).pus if topo.node_of_pu(p) is not None else (p,) for p in chosen]
    return [(p,) for p in chosen]


def _map_pins(topo: Topology, pol: Policy, req: PlacementRequest) -> list[tuple[int, ...]]:
    t = pol.text
    pins: dict[int, tuple[int, ...]] = {}
    valid = set(topo.pu_ids)
    for vcpus, pus, node in pol.vcpu_map:
        if node is not None:
            _cpu_node(topo, node, t)
            sets = [tuple(topo.node(node).pus)] * len(vcpus)
        else:
            bad = [p for p in pus if p not in valid]
            if bad:
                left = [p for p in bad if "not usable" in topo._why("PU", p)]
                why = topo._why("PU", left[0]) if left else f"host has no PU {format_list(bad)}"
                raise PlacementError(f"policy {t!r}: {why}: use PUs {format_list(valid)} ({topo.pu_count_text()})")
            if len(pus) == len(vcpus):
                sets = [(p,) for p in pus]
            else:
                sets = [tuple(sorted(pus))] * len(vcpus)
        for v, s in zip(vcpus, sets):
            if v in pins:
                raise PlacementError(f"policy {t!r}: vCPU {v} is mapped twice: map each vCPU once")
            if v >= req.vcpus:
                raise PlacementError(f"policy {t!r}: vCPU {v} does not exist (vcpus={req.vcpus}): map vCPUs 0-{req.vcpus - 1}")
            pins[v] = s
    missing = [v for v in range(req.vcpus) if v not in pins]
    if missing:
        raise PlacementError(f"policy {t!r}: vCPUs {format_list(missing)} are not mapped: map every vCPU 0-{req.vcpus - 1}")
    out = [pins[v] for v in range(req.vcpus)]
    if pol.pin == "node":
        out = [topo.node(topo.node_of_pu(s[0])).pus if topo.node_of_pu(s[0]) is not None else s for s in out]
    return out


def _would_fit(topo: Topology, req: PlacementRequest, tried: str) -> str:
    """What to change after a :class:`NoFit`: the first of compact, spread, span:1..K that
    places this request (same vCPUs, VM share), else fewer vCPUs or ``float``."""
    cands = ["compact", "spread"] + [f"span:{k}" for k in range(1, len(topo.packages) + 1)]
    for c in cands:
        if c == tried.split(";")[0]:
            continue
        try:
            _pins(topo, parse_policy(c), req)
        except PlacementError:
            continue
        return f"policy {c} would fit"
    most = len(topo.pus) // max(req.vms, 1)
    fewer = f"give at most {most} vCPUs" + (" per VM" if req.vms > 1 else "") if most else "give fewer VMs"
    return f"{fewer}, or use float (unpinned)"


def place(topo: Topology, req: PlacementRequest) -> Placement:
    """Place one VM: :class:`PlacementRequest` on a :class:`~vhpc.topology.Topology` →
    :class:`Placement`. Raises :class:`PlacementError` (one line, what to change) for an
    invalid request: bad policy, more vCPUs than the policy's PUs, unknown node/package/PU,
    span K over the package count, memory not a whole number of pages, memory over a node's
    capacity (skipped, with a note, when the topology's memory is unknown)."""
    if not isinstance(req.vcpus, int) or req.vcpus < 1:
        raise PlacementError(f"vcpus={req.vcpus!r}: give at least 1 vCPU")
    if not isinstance(req.memory_mib, int) or req.memory_mib < 1:
        raise PlacementError(f"memory_mib={req.memory_mib!r}: give guest memory in MiB, e.g. 1024")
    if req.backing not in BACKINGS:
        raise PlacementError(f"backing={req.backing!r}: use one of {', '.join(BACKINGS)}")
    if req.vms < 1 or req.vm_index < 0 or req.vm_index >= max(req.vms, 1):
        raise PlacementError(f"vm_index={req.vm_index} with vms={req.vms}: vm_index must be 0..vms-1")
    pol = req.policy if isinstance(req.policy, Policy) else parse_policy(req.policy)
    try:
        return _place(topo, req, pol)
    except NoFit as exc:
        raise PlacementError(f"{exc}: {_would_fit(topo, req, pol.text)}") from None
    except TopologyError as exc:  # a lookup the checks above did not foresee
        raise PlacementError(f"policy {pol.text!r}: {exc}") from None


def _place(topo: Topology, req: PlacementRequest, pol: Policy) -> Placement:
    notes: list[str] = []
    pins = _pins(topo, pol, req) if pol.pinned else None
    if pins is not None and pol.name != "map" and pol.pin == "pu" and topo.smt > 1:
        cores = {topo.pu(p).core for s in pins for p in s}
        if len(cores) < sum(len(s) for s in pins):
            notes.append("some vCPUs share a core (SMT siblings)")
    if pins is not None:
        loose = {p for s in pins for p in s if topo.node_of_pu(p) is None}
        if loose:
            notes.append(f"PUs {format_list(loose)} have no usable local NUMA node (offline, disallowed or absent)")
    groups = guest_groups(req, pins, topo)
    binding = memory_binding(pol, groups, pins, topo)
    sizes = split_memory(req.memory_mib, [len(g) for g in groups], req.backing)
    gnodes = tuple(
        GuestNode(id=i, vcpus=tuple(g), memory_mib=sizes[i], host_nodes=tuple(b[0]), policy=b[1])
        for i, (g, b) in enumerate(zip(groups, binding)))
    if len(set(sizes)) > 1 and len(gnodes) > 1:
        notes.append("guest node sizes " + "/".join(map(str, sizes)) + " MiB (proportional to vCPUs, whole pages)")
    if pol.name in ("span", "packages", "nodes") and pins is not None:
        k = pol.count if pol.name == "span" else len([n for n in pol.targets if pol.name == "packages" or topo.node(n).pus])
        if req.vcpus % k:
            notes.append(f"{req.vcpus} vCPUs do not divide evenly over {k} places: the first get one more")
    if any(g.policy == "interleave" for g in gnodes) and pol.mem == "auto":
        notes.append("a guest node spans host nodes: its memory is interleaved (use guest_numa='mirror' to split it)")
    mem_only = sorted({n for g in gnodes for n in g.host_nodes if topo.node(n).memory_only})
    if mem_only:
        kinds = "/".join(sorted({topo.node(n).memory_type for n in mem_only}))
        notes.append(f"memory on memory-only node(s) {format_list(mem_only)} ({kinds}), no CPU there")
    if any(g.policy == "default" for g in gnodes):
        notes.append("memory unbound: the host kernel places pages where vCPU threads first touch them")
    demand = node_demand(gnodes)
    if not req.check_memory:
        notes.append("node memory capacity not checked (check_memory=False)")
    elif not topo.memory_known:
        if demand:
            notes.append("node memory capacity not checked: topology memory unknown "
                         "(synthetic without memory=, or no node sizes in the file)")
    else:
        check_capacity(topo, demand, f"policy {pol.text!r}")
    return Placement(
        policy=pol.text, vcpus=req.vcpus, memory_mib=req.memory_mib,
        vcpu_pins=tuple(pins) if pins is not None else (), guest_nodes=gnodes, backing=req.backing,
        distances=guest_distances(topo, gnodes), vm_index=req.vm_index, exclusive=req.exclusive,
        notes=tuple(notes))


def check_plan(placements: Sequence[Placement], topo: Topology | None = None, check_memory: bool = True) -> None:
    """Validate several VMs placed together: no shared pCPU between two VMs when either is
    ``exclusive`` (a ``float`` VM may run anywhere, so it shares with every VM), and, with a
    topology of known memory (unless ``check_memory`` is False), the memory (MiB) all VMs bind to
    each host node fits it.  Raises PlacementError naming the VMs and what to change."""
    for i, a in enumerate(placements):
        for j in range(i + 1, len(placements)):
            b = placements[j]
            if not (a.exclusive or b.exclusive):
                continue
            if not a.pinned or not b.pinned:
                f = i if not a.pinned else j
                raise PlacementError(
                    f"VM {f} floats ({placements[f].policy!r}) so it may share pCPUs with VM {j if f == i else i}: "
                    f"pin it or set exclusive=False")
            shared = set(a.pcpus) & set(b.pcpus)
            if shared:
                raise PlacementError(
                    f"VMs {i} and {j} share pCPUs {format_list(shared)}: give them different vm_index/vms shares or "
                    f"disjoint nodes, or set exclusive=False")
    if topo is not None and check_memory and topo.memory_known:
        demand: dict[int, float] = {}
        for p in placements:
            for n, mib in node_demand(p.guest_nodes).items():
                demand[n] = demand.get(n, 0.0) + mib
        check_capacity(topo, demand, f"the plan of {len(placements)} VMs")


def plan_vms(topo: Topology, requests: Sequence[PlacementRequest]) -> list[Placement]:
    """Place several VMs and validate them together (:func:`check_plan`)."""
    placements = [place(topo, r) for r in requests]
    check_plan(placements, topo, check_memory=all(r.check_memory for r in requests))
    return placements


def plan_partition(topo: Topology, vms_per_socket: int, vcpus_per_vm: int | None = None, memory_mib: int = 1024,
                   backing: str = "4k", guest_numa: str | int = "hidden", sockets_per_vm: int = 1,
                   exclusive: bool = True, check_memory: bool = True) -> list[Placement]:
    """Partition the host into VMs (Ibrahim et al., CCGrid 2011, Sec. VIII, Fig. 8, 11, 12):
    ``vms_per_socket`` VMs on each package, or with ``sockets_per_vm`` > 1 one VM per group of
    that many consecutive packages (Fig. 11's "2 VMs" case). Each VM gets ``vcpus_per_vm`` vCPUs
    (default: the cores of its package group divided by ``vms_per_socket``) and
    ``memory_mib`` MiB on its packages' nodes. Returns one :class:`Placement` per VM, ordered
    by package then slot; their policies read ``packages:LIST`` and ``vm_index`` is the slot
    within the package group. Raises PlacementError."""
    npk = len(topo.packages)
    if vms_per_socket < 1 or sockets_per_vm < 1:
        raise PlacementError("vms_per_socket and sockets_per_vm must be at least 1")
    if sockets_per_vm > 1 and vms_per_socket != 1:
        raise PlacementError("give either vms_per_socket > 1 or sockets_per_vm > 1, not both")
    if npk % sockets_per_vm:
        raise PlacementError(f"sockets_per_vm={sockets_per_vm} does not divide the host's {topo.package_count_text()}: "
                             f"use a divisor of {npk}")
    pk = [p.index for p in topo.packages]
    groups = [pk[g * sockets_per_vm:(g + 1) * sockets_per_vm] for g in range(npk // sockets_per_vm)]
    reqs = []
    for grp in groups:
        cores = sum(len(topo.package(p).cores) for p in grp)
        v = vcpus_per_vm if vcpus_per_vm is not None else cores // vms_per_socket
        if v < 1:
            raise PlacementError(f"{vms_per_socket} VMs per socket leave no core per VM on packages {format_list(grp)} "
                                 f"({cores} usable cores): use at most {cores} VMs per socket")
        for slot in range(vms_per_socket):
            reqs.append(PlacementRequest(
                vcpus=v, memory_mib=memory_mib, policy=f"packages:{','.join(map(str, grp))}",
                guest_numa=guest_numa, backing=backing, vm_index=slot, vms=vms_per_socket,
                exclusive=exclusive, check_memory=check_memory))
    return plan_vms(topo, reqs)
