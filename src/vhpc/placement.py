"""Placement: turn (topology, VM request) into vCPU pinning, guest NUMA layout and host memory
binding, validate it, and render it for QEMU and libvirt.

Pure functions, no side effects except :func:`read_hugepages` (reads sysfs). Applying a
placement (pinning vCPU threads, starting QEMU) is the environment room's job.

Policy strings (``PlacementRequest.policy``), ``POLICY[;mem=MEM][;pin=pu|node]``:

==================  ==========================================================================
``float``           unpinned: vCPUs may run on any pCPU, memory unbound (host default policy).
                    The usual cloud default; seed 000 Sec. V compares pinned against it.
``compact``         fill one NUMA node, then the next: within a node one PU per core first
                    (cores in order), then the second hardware thread of each core, and so on.
``spread``          round-robin vCPUs over the NUMA nodes that have PUs (vCPU i → node i mod N),
                    each node filled in the ``compact`` order.
``span:K``          the VM over sockets (packages) 0..K-1, vCPUs divided evenly in blocks
                    (vCPUs 0..v/K-1 on package 0, ...), memory split across those nodes in
                    proportion to the vCPUs on each (seed 000 Fig. 2, VM spanning 1..S sockets).
``packages:LIST``   like ``span`` over the listed packages (``plan_partition`` uses it).
``confine:N``       vCPUs and memory on NUMA node N (seed 000 Sec. VIII node confinement;
                    seed 003 Fig. 4 "1-node" case).
``nodes:LIST``      vCPUs divided evenly in blocks over the listed nodes, in the order given
                    (seed 003 Fig. 4: ``nodes:0`` / ``nodes:0,1`` / ``nodes:0,1,2,3``; the paper
                    left memory to Linux in the 2- and 4-node cases: add ``;mem=local``).
``map:V=P,...``     explicit vCPU → pCPU map (seed 003 Fig. 5 binding cases). ``V`` is a vCPU
                    or range ``a-b``; ``P`` a PU list (``0-3``, ``0,4``) zipped 1:1 with V when
                    the counts match, else every vCPU in V may run on all of P; ``P`` = ``nN``
                    means all PUs of node N. Example: ``map:0-1=n0;mem=1``.
==================  ==========================================================================

``mem=`` (memory → host node binding of each guest node):

- ``auto`` (default): bind each guest node to the host node its vCPUs run on; a guest node
  whose vCPUs span several host nodes is interleaved across them (one QEMU backend cannot be
  split proportionally: expose guest NUMA, ``guest_numa="mirror"``, for an exact split).
  ``float`` with ``auto`` is unbound.
- ``bind`` / ``interleave`` / ``preferred``: that policy over the host nodes of the guest
  node's vCPUs (``preferred`` needs exactly one).
- ``local``: no binding; the host kernel places pages where the faulting vCPU thread runs
  (first touch), as KVM does by default (seed 000's cold/warm locality, seed 003 Fig. 4).
- ``LIST`` or ``bind:LIST`` / ``interleave:LIST`` / ``preferred:LIST``: explicit host nodes,
  e.g. remote memory ``confine:0;mem=1`` (seed 003 Fig. 5). With several guest nodes, LIST has
  one node (all guest nodes there) or one node per guest node.

``pin=pu`` (default) pins each vCPU to one PU; ``pin=node`` lets each vCPU run on every PU of
its host node (what ``numactl --cpunodebind`` does in seed 003).

Guest NUMA (``guest_numa``): ``"hidden"`` = one guest node; ``"mirror"`` = one guest node per
host node used (vCPUs grouped by host node, ids in host node order); an int G = G guest nodes
of consecutive vCPU blocks. Memory is split over guest nodes in proportion to their vCPUs, in
units of the page size (1 MiB for 4k, 2 MiB for 2m, 1 GiB for 1g).

Units: memory in MiB everywhere; hugepage sizes in KiB (as in sysfs ``hugepages-2048kB``).
Errors: :class:`PlacementError` (a ValueError) with a one-line message saying what to change.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from vhpc.errors import VhpcError
from vhpc.topology import Topology, TopologyError, format_list, parse_list, _runs

__all__ = [
    "PlacementError",
    "Policy",
    "PlacementRequest",
    "GuestNode",
    "Placement",
    "parse_policy",
    "place",
    "plan_vms",
    "plan_partition",
    "check_plan",
    "check_hugepages",
    "read_hugepages",
    "qemu_numa_args",
    "to_libvirt_xml",
    "describe",
    "BACKINGS",
]

#: backing name → page size in KiB
BACKINGS: dict[str, int] = {"4k": 4, "2m": 2048, "1g": 1048576}
_GRANULE_MIB = {"4k": 1, "2m": 2, "1g": 1024}
_KINDS = ("float", "compact", "spread", "span", "packages", "confine", "nodes", "map")
_MEM_MODES = ("auto", "bind", "interleave", "preferred", "local")
_LIBVIRT_MODE = {"bind": "strict", "preferred": "preferred", "interleave": "interleave"}


class PlacementError(VhpcError, ValueError):
    """A request that cannot be placed, or a placement that is invalid. One line, saying what
    to change."""


# ---------------------------------------------------------------------------- policy parsing


@dataclass(frozen=True)
class Policy:
    """A parsed policy string (see the module docstring for the grammar).

    kind: one of ``float compact spread span packages confine nodes map``; count: K of
    ``span:K``; targets: packages (``packages``) or nodes (``confine``, ``nodes``);
    vcpu_map: for ``map``, entries ``(vcpus, pus, node)`` where either pus (tuple of PU OS
    indexes) or node (an int, ``nN``) is set; mem: ``auto bind interleave preferred local``;
    mem_nodes: explicit host nodes for memory (empty = derived from vCPUs); pin: ``pu``/``node``.
    """

    kind: str
    text: str
    count: int | None = None
    targets: tuple[int, ...] = ()
    vcpu_map: tuple[tuple[tuple[int, ...], tuple[int, ...], int | None], ...] = ()
    mem: str = "auto"
    mem_nodes: tuple[int, ...] = ()
    pin: str = "pu"

    @property
    def pinned(self) -> bool:
        """True unless the policy is ``float``."""
        return self.kind != "float"


def _plist(text: str, what: str, policy: str) -> tuple[int, ...]:
    try:
        return parse_list(text)
    except ValueError:
        raise PlacementError(f"policy {policy!r}: bad {what} list {text!r}: write numbers and ranges like 0-3,8") from None


def parse_policy(text: str) -> Policy:
    """Parse a policy string such as ``"span:2"``, ``"nodes:0,1;mem=local"`` or
    ``"map:0-3=0-3;mem=1"`` into a :class:`Policy`. Raises PlacementError."""
    raw = " ".join(str(text).split())
    if not raw:
        raise PlacementError(f"empty policy: use one of {', '.join(_KINDS)}")
    parts = [p.strip() for p in raw.split(";")]
    head, mods = parts[0], parts[1:]
    kind, _, arg = head.partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    if kind not in _KINDS:
        raise PlacementError(f"unknown policy {kind!r} in {raw!r}: use one of {', '.join(_KINDS)}")
    count = None
    targets: tuple[int, ...] = ()
    vmap: list[tuple[tuple[int, ...], tuple[int, ...], int | None]] = []
    if kind in ("float", "compact", "spread"):
        if arg:
            raise PlacementError(f"policy {kind!r} takes no argument (got {arg!r}): write just {kind}")
    elif kind == "span":
        if not arg.isdigit() or int(arg) < 1:
            raise PlacementError(f"policy {raw!r}: span needs a socket count, e.g. span:2")
        count = int(arg)
    elif kind == "confine":
        if not arg.isdigit():
            raise PlacementError(f"policy {raw!r}: confine needs one NUMA node, e.g. confine:0")
        targets = (int(arg),)
    elif kind in ("nodes", "packages"):
        if not arg:
            raise PlacementError(f"policy {raw!r}: {kind} needs a list, e.g. {kind}:0,1")
        items = [a.strip() for a in arg.split(",")]
        seen: list[int] = []
        for it in items:
            for v in _plist(it, kind, raw):
                if v in seen:
                    raise PlacementError(f"policy {raw!r}: {kind[:-1]} {v} is listed twice: list each once")
                seen.append(v)
        targets = tuple(seen)
    elif kind == "map":
        if not arg:
            raise PlacementError(f"policy {raw!r}: map needs vCPU=PU pairs, e.g. map:0-3=0-3")
        cur: list | None = None
        for tok in arg.split(","):
            tok = tok.strip()
            if "=" in tok:
                left, right = (x.strip() for x in tok.split("=", 1))
                if not re.fullmatch(r"\d+(-\d+)?", left):
                    raise PlacementError(f"policy {raw!r}: left side {left!r} must be a vCPU or range a-b")
                cur = [_plist(left, "vCPU", raw), [], None]
                vmap.append(cur)  # type: ignore[arg-type]
                tok = right
            if cur is None:
                raise PlacementError(f"policy {raw!r}: start with a vCPU=PU pair, e.g. map:0-3=0-3")
            m = re.fullmatch(r"n(\d+)", tok)
            if m:
                if cur[1] or cur[2] is not None:
                    raise PlacementError(f"policy {raw!r}: give either PUs or one node nN per vCPU range")
                cur[2] = int(m.group(1))
            else:
                if cur[2] is not None:
                    raise PlacementError(f"policy {raw!r}: give either PUs or one node nN per vCPU range")
                cur[1].extend(_plist(tok, "PU", raw))
        vmap_t = []
        for v, p, n in vmap:
            if not p and n is None:
                raise PlacementError(f"policy {raw!r}: vCPUs {format_list(v)} have no PU after '='")
            vmap_t.append((tuple(v), tuple(p), n))
        vmap = vmap_t  # type: ignore[assignment]

    mem, mem_nodes, pin = "auto", (), "pu"
    for mod in mods:
        key, eq, val = mod.partition("=")
        key, val = key.strip().lower(), val.strip().lower()
        if not eq or not val:
            raise PlacementError(f"policy {raw!r}: modifier {mod!r} must be mem=... or pin=...")
        if key == "pin":
            if val not in ("pu", "node"):
                raise PlacementError(f"policy {raw!r}: pin must be pu or node")
            pin = val
        elif key == "mem":
            mode, _, lst = val.partition(":")
            if mode in _MEM_MODES and not lst:
                mem = mode
            elif mode in ("bind", "interleave", "preferred") and lst:
                mem, mem_nodes = mode, _ordered_list(lst, raw)
            elif re.fullmatch(r"[\d,\- ]+", val):
                mem, mem_nodes = "bind", _ordered_list(val, raw)
            else:
                raise PlacementError(
                    f"policy {raw!r}: mem must be auto, bind, interleave, preferred, local or a node list like mem=1")
        else:
            raise PlacementError(f"policy {raw!r}: unknown modifier {key!r}: use mem= or pin=")
    if kind == "float" and pin != "pu":
        raise PlacementError(f"policy {raw!r}: float is unpinned, pin= does not apply: drop it")
    return Policy(kind=kind, text=raw, count=count, targets=targets, vcpu_map=tuple(vmap), mem=mem,
                  mem_nodes=mem_nodes, pin=pin)


def _ordered_list(text: str, raw: str) -> tuple[int, ...]:
    """A node list keeping the order given (``1,0`` maps guest node 0 → host 1)."""
    out: list[int] = []
    for item in text.split(","):
        for v in _plist(item.strip(), "memory node", raw):
            if v in out:
                raise PlacementError(f"policy {raw!r}: memory node {v} is listed twice: list each once")
            out.append(v)
    return tuple(out)


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True)
class PlacementRequest:
    """What to place.

    vcpus: number of vCPUs (≥1); memory_mib: guest RAM in MiB; policy: policy string or a
    parsed :class:`Policy` (not parsed again);
    guest_numa: ``"hidden"``, ``"mirror"`` or an int; backing: ``"4k"``, ``"2m"`` or ``"1g"``;
    vm_index / vms: this VM is number ``vm_index`` of ``vms`` VMs with the same policy and
    size, and takes the ``vm_index``-th disjoint share of the policy's PUs (all ``vms`` shares
    must fit); exclusive: no pCPU may be shared with another VM of the same plan
    (:func:`check_plan`); check_memory: compare memory with node capacity (turn off when the
    host under-reports per-node memory).
    """

    vcpus: int
    memory_mib: int
    policy: str | Policy = "float"
    guest_numa: str | int = "hidden"
    backing: str = "4k"
    vm_index: int = 0
    vms: int = 1
    exclusive: bool = True
    check_memory: bool = True


@dataclass(frozen=True)
class GuestNode:
    """One guest NUMA node: ``id`` (0..G-1), its vCPUs (guest indexes, ascending),
    ``memory_mib``, the host nodes its memory comes from and the memory ``policy``:
    ``bind`` | ``preferred`` | ``interleave`` | ``default`` (unbound; host_nodes empty)."""

    id: int
    vcpus: tuple[int, ...]
    memory_mib: int
    host_nodes: tuple[int, ...]
    policy: str


@dataclass(frozen=True)
class Placement:
    """A concrete placement.

    vcpu_pins: index = vCPU → tuple of allowed pCPU (PU) OS indexes; ``()`` for ``float``.
    guest_nodes: guest NUMA layout (one node when guest NUMA is hidden). distances: guest
    node distance matrix (from host distances; 10 on the diagonal, ≥11 off it). backing:
    ``4k``/``2m``/``1g``. policy: the policy string as given. notes: human-readable caveats.
    """

    policy: str
    vcpus: int
    memory_mib: int
    vcpu_pins: tuple[tuple[int, ...], ...]
    guest_nodes: tuple[GuestNode, ...]
    backing: str = "4k"
    distances: tuple[tuple[int, ...], ...] = ((10,),)
    vm_index: int = 0
    exclusive: bool = True
    notes: tuple[str, ...] = ()

    @property
    def pinned(self) -> bool:
        """True when every vCPU has a pin set (not ``float``)."""
        return bool(self.vcpu_pins)

    @property
    def pcpus(self) -> tuple[int, ...]:
        """All pCPUs this VM may run on (empty for ``float``: anywhere)."""
        return tuple(sorted({p for pins in self.vcpu_pins for p in pins}))

    @property
    def host_nodes(self) -> tuple[int, ...]:
        """Host nodes memory is bound to (empty when unbound)."""
        return tuple(sorted({n for g in self.guest_nodes for n in g.host_nodes}))

    @property
    def hugepage_kib(self) -> int | None:
        """Hugepage size in KiB, or None for 4k backing."""
        return None if self.backing == "4k" else BACKINGS[self.backing]

    def pin_map(self) -> dict[int, set[int]]:
        """``{vCPU: allowed pCPUs}`` for sched_setaffinity on the vCPU threads (QMP
        ``query-cpus-fast`` cpu-index → thread-id); ``{}`` for ``float``."""
        return {v: set(s) for v, s in enumerate(self.vcpu_pins)}

    def to_dict(self) -> dict:
        """Plain JSON-able dict (for environment fingerprints and the store)."""
        d = asdict(self)
        d["vcpu_pins"] = [list(p) for p in self.vcpu_pins]
        d["distances"] = [list(r) for r in self.distances]
        d["notes"] = list(self.notes)
        d["guest_nodes"] = [dict(g, vcpus=list(g["vcpus"]), host_nodes=list(g["host_nodes"])) for g in d["guest_nodes"]]
        return d


# ---------------------------------------------------------------------------- placing


def _node_order(topo: Topology, n: int) -> list[int]:
    """PUs of node n, one per core first (cores in order), then second threads, ..."""
    by_core: dict[int, list[int]] = {}
    for p in topo.node(n).pus:
        by_core.setdefault(topo.pu(p).core, []).append(p)
    cores = sorted(by_core, key=lambda c: min(by_core[c]))
    depth = max((len(v) for v in by_core.values()), default=0)
    return [sorted(by_core[c])[k] for k in range(depth) for c in cores if k < len(by_core[c])]


def _package_order(topo: Topology, pkg: int) -> list[int]:
    """PUs of a package: its nodes one after the other in compact order (UMA: by core)."""
    p = topo.package(pkg)
    own = [n for n in p.nodes if topo.node(n).package == pkg]
    if own:
        return [pu for n in own for pu in _node_order(topo, n)]
    by_core: dict[int, list[int]] = {}
    for pu in p.pus:
        by_core.setdefault(topo.pu(pu).core, []).append(pu)
    cores = sorted(by_core, key=lambda c: min(by_core[c]))
    depth = max((len(v) for v in by_core.values()), default=0)
    return [sorted(by_core[c])[k] for k in range(depth) for c in cores if k < len(by_core[c])]


def _cpu_nodes(topo: Topology) -> list[int]:
    return [n.os_index for n in topo.nodes if n.pus]


def _check_node(topo: Topology, n: int, policy: str) -> None:
    if n not in topo.node_ids:
        raise PlacementError(f"policy {policy!r}: host has no NUMA node {n}: use one of {format_list(topo.node_ids)}")


def _take(groups: list[tuple[str, list[int]]], req: PlacementRequest, policy: str) -> list[int]:
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
            raise PlacementError(
                f"policy {policy!r}: {who} on {label} need {need} PUs but it has {len(order)}: "
                f"lower vcpus{' or vms' if nvms > 1 else ''}, or use a policy over more nodes")
        out.extend(order[req.vm_index * share:(req.vm_index + 1) * share])
    return out


def _pins(topo: Topology, pol: Policy, req: PlacementRequest) -> list[tuple[int, ...]]:
    """Per-vCPU allowed PU sets for a pinned policy."""
    t = pol.text
    if pol.kind == "compact":
        order = [p for n in _cpu_nodes(topo) for p in _node_order(topo, n)]
        chosen = _take([("the host", order)], req, t)
    elif pol.kind == "spread":
        orders = [_node_order(topo, n) for n in _cpu_nodes(topo)]
        rr = [o[i] for i in range(max(map(len, orders), default=0)) for o in orders if i < len(o)]
        chosen = _take([("the host", rr)], req, t)
    elif pol.kind in ("span", "packages"):
        pk_ids = [p.index for p in topo.packages]
        if pol.kind == "span":
            if pol.count > len(pk_ids):
                raise PlacementError(
                    f"policy {t!r}: the host has {len(pk_ids)} package(s): use span:1..{len(pk_ids)}")
            pkgs = pk_ids[: pol.count]
        else:
            for p in pol.targets:
                if p not in pk_ids:
                    raise PlacementError(f"policy {t!r}: host has no package {p}: use one of {format_list(pk_ids)}")
            pkgs = list(pol.targets)
        chosen = _take([(f"package {p}", _package_order(topo, p)) for p in pkgs], req, t)
    elif pol.kind in ("confine", "nodes"):
        for n in pol.targets:
            _check_node(topo, n, t)
            if not topo.node(n).pus:
                raise PlacementError(f"policy {t!r}: node {n} has no PUs (memory only): pick a node with CPUs")
        chosen = _take([(f"node {n}", _node_order(topo, n)) for n in pol.targets], req, t)
    elif pol.kind == "map":
        return _map_pins(topo, pol, req)
    else:  # pragma: no cover - parse_policy guards kinds
        raise PlacementError(f"unknown policy {pol.kind!r}")
    if pol.pin == "node":
        return [tuple(topo.node(topo.node_of_pu(p)).pus) for p in chosen]
    return [(p,) for p in chosen]


def _map_pins(topo: Topology, pol: Policy, req: PlacementRequest) -> list[tuple[int, ...]]:
    t = pol.text
    pins: dict[int, tuple[int, ...]] = {}
    valid = set(topo.pu_ids)
    for vcpus, pus, node in pol.vcpu_map:
        if node is not None:
            _check_node(topo, node, t)
            sets = [tuple(topo.node(node).pus)] * len(vcpus)
        else:
            bad = [p for p in pus if p not in valid]
            if bad:
                raise PlacementError(f"policy {t!r}: host has no PU {format_list(bad)}: use PUs {format_list(valid)}")
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
        out = [tuple(topo.node(topo.node_of_pu(s[0])).pus) for s in out]
    return out


def _split(memory_mib: int, weights: list[int], backing: str) -> list[int]:
    """Split memory in proportion to weights, in whole pages (largest remainder)."""
    g = _GRANULE_MIB[backing]
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


def _guest_groups(req: PlacementRequest, pins: list[tuple[int, ...]] | None, topo: Topology) -> list[tuple[int, ...]]:
    """vCPU groups, one per guest node."""
    v = req.vcpus
    gn = req.guest_numa
    if isinstance(gn, str) and gn.isdigit():
        gn = int(gn)
    if gn == "hidden":
        return [tuple(range(v))]
    if gn == "mirror":
        if pins is None:
            count = min(len(_cpu_nodes(topo)) or 1, v)
            return _blocks(v, count)
        by_node: dict[int, list[int]] = {}
        for i, s in enumerate(pins):
            by_node.setdefault(min(topo.node_of_pu(p) for p in s), []).append(i)
        return [tuple(by_node[n]) for n in sorted(by_node)]
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


def _memory_binding(pol: Policy, groups: list[tuple[int, ...]], pins, topo: Topology) -> list[tuple[tuple[int, ...], str]]:
    """(host_nodes, policy) per guest node."""
    t = pol.text
    for n in pol.mem_nodes:
        _check_node(topo, n, t)
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
        nodes = tuple(sorted({topo.node_of_pu(p) for v in g for p in pins[v]}))
        if pol.mem == "auto":
            out.append((nodes, "bind" if len(nodes) == 1 else "interleave"))
        elif pol.mem == "preferred" and len(nodes) != 1:
            raise PlacementError(
                f"policy {t!r}: a guest node spans host nodes {format_list(nodes)}, preferred needs one: "
                f"use guest_numa='mirror', or mem=bind/interleave")
        else:
            out.append((nodes, pol.mem))
    return out


def _node_demand(nodes: Sequence[GuestNode]) -> dict[int, float]:
    """MiB each host node must hold (multi-node bind/interleave: even split)."""
    d: dict[int, float] = {}
    for g in nodes:
        if g.policy == "default" or not g.host_nodes:
            continue
        for n in g.host_nodes:
            d[n] = d.get(n, 0.0) + g.memory_mib / len(g.host_nodes)
    return d


def _check_capacity(topo: Topology, demand: Mapping[int, float], what: str) -> None:
    for n, mib in sorted(demand.items()):
        cap = topo.node(n).memory_bytes
        if cap is None:
            continue
        cap_mib = cap / (1 << 20)
        if mib > cap_mib:
            raise PlacementError(
                f"{what} puts {mib:.0f} MiB on host node {n}, which has {cap_mib:.0f} MiB: lower memory_mib, "
                f"spread memory over more nodes, or set check_memory=False if the host under-reports node memory")


def _guest_distances(topo: Topology, nodes: Sequence[GuestNode]) -> tuple[tuple[int, ...], ...]:
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
    except TopologyError as exc:  # a lookup the checks above did not foresee
        raise PlacementError(f"policy {pol.text!r}: {exc}") from None


def _place(topo: Topology, req: PlacementRequest, pol: Policy) -> Placement:
    notes: list[str] = []
    pins = _pins(topo, pol, req) if pol.pinned else None
    if pins is not None and pol.kind != "map" and pol.pin == "pu" and topo.smt > 1:
        cores = {topo.pu(p).core for s in pins for p in s}
        if len(cores) < sum(len(s) for s in pins):
            notes.append("some vCPUs share a core (SMT siblings)")
    groups = _guest_groups(req, pins, topo)
    binding = _memory_binding(pol, groups, pins, topo)
    sizes = _split(req.memory_mib, [len(g) for g in groups], req.backing)
    gnodes = tuple(
        GuestNode(id=i, vcpus=tuple(g), memory_mib=sizes[i], host_nodes=tuple(b[0]), policy=b[1])
        for i, (g, b) in enumerate(zip(groups, binding)))
    if len(set(sizes)) > 1 and len(gnodes) > 1:
        notes.append("guest node sizes " + "/".join(map(str, sizes)) + " MiB (proportional to vCPUs, whole pages)")
    if pol.kind in ("span", "packages", "nodes") and pins is not None:
        k = pol.count if pol.kind == "span" else len(pol.targets)
        if req.vcpus % k:
            notes.append(f"{req.vcpus} vCPUs do not divide evenly over {k} places: the first get one more")
    if any(g.policy == "interleave" for g in gnodes) and pol.mem == "auto":
        notes.append("a guest node spans host nodes: its memory is interleaved (use guest_numa='mirror' to split it)")
    if any(g.policy == "default" for g in gnodes):
        notes.append("memory unbound: the host kernel places pages where vCPU threads first touch them")
    demand = _node_demand(gnodes)
    if not req.check_memory:
        notes.append("node memory capacity not checked (check_memory=False)")
    elif not topo.memory_known:
        if demand:
            notes.append("node memory capacity not checked: topology memory unknown (synthetic without memory=)")
    else:
        _check_capacity(topo, demand, f"policy {pol.text!r}")
    return Placement(
        policy=pol.text, vcpus=req.vcpus, memory_mib=req.memory_mib,
        vcpu_pins=tuple(pins) if pins is not None else (), guest_nodes=gnodes, backing=req.backing,
        distances=_guest_distances(topo, gnodes), vm_index=req.vm_index, exclusive=req.exclusive,
        notes=tuple(notes))


def check_plan(placements: Sequence[Placement], topo: Topology | None = None, check_memory: bool = True) -> None:
    """Validate several VMs placed together: no shared pCPU between two VMs when either is
    ``exclusive`` (a ``float`` VM may run anywhere, so it shares with every VM), and, with a
    topology of known memory, the memory all VMs bind to each host node fits it."""
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
            for n, mib in _node_demand(p.guest_nodes).items():
                demand[n] = demand.get(n, 0.0) + mib
        _check_capacity(topo, demand, f"the plan of {len(placements)} VMs")


def plan_vms(topo: Topology, requests: Sequence[PlacementRequest]) -> list[Placement]:
    """Place several VMs and validate them together (:func:`check_plan`)."""
    placements = [place(topo, r) for r in requests]
    check_plan(placements, topo, check_memory=all(r.check_memory for r in requests))
    return placements


def plan_partition(topo: Topology, vms_per_socket: int, vcpus_per_vm: int | None = None, memory_mib: int = 1024,
                   backing: str = "4k", guest_numa: str | int = "hidden", sockets_per_vm: int = 1,
                   exclusive: bool = True, check_memory: bool = True) -> list[Placement]:
    """Partition the host into VMs (seed 000 Sec. VIII, Fig. 8, 11, 12): ``vms_per_socket``
    VMs on each package, or with ``sockets_per_vm`` > 1 one VM per group of that many
    consecutive packages (Fig. 11's "2 VMs" case). Each VM gets ``vcpus_per_vm`` vCPUs
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
        raise PlacementError(f"sockets_per_vm={sockets_per_vm} does not divide the host's {npk} packages: use a divisor of {npk}")
    pk = [p.index for p in topo.packages]
    groups = [pk[g * sockets_per_vm:(g + 1) * sockets_per_vm] for g in range(npk // sockets_per_vm)]
    reqs = []
    for grp in groups:
        cores = sum(len(topo.package(p).cores) for p in grp)
        v = vcpus_per_vm if vcpus_per_vm is not None else cores // vms_per_socket
        if v < 1:
            raise PlacementError(f"{vms_per_socket} VMs per socket leave no core per VM: use at most {cores} VMs per socket")
        for slot in range(vms_per_socket):
            reqs.append(PlacementRequest(
                vcpus=v, memory_mib=memory_mib, policy=f"packages:{','.join(map(str, grp))}",
                guest_numa=guest_numa, backing=backing, vm_index=slot, vms=vms_per_socket,
                exclusive=exclusive, check_memory=check_memory))
    return plan_vms(topo, reqs)


# ---------------------------------------------------------------------------- hugepages


def read_hugepages(sysfs_root: str | os.PathLike = "/sys") -> dict[int, dict[int, int]]:
    """Free hugepages per host node: ``{node: {page_kib: free_pages}}`` from
    ``<sysfs_root>/devices/system/node/node*/hugepages/hugepages-<N>kB/free_hugepages``.
    Missing tree → ``{}``."""
    base = os.path.join(os.fspath(sysfs_root), "devices", "system", "node")
    out: dict[int, dict[int, int]] = {}
    try:
        entries = os.listdir(base)
    except OSError:
        return out
    for e in entries:
        m = re.fullmatch(r"node(\d+)", e)
        if not m:
            continue
        hp = os.path.join(base, e, "hugepages")
        sizes: dict[int, int] = {}
        try:
            subs = os.listdir(hp)
        except OSError:
            subs = []
        for s in subs:
            ms = re.fullmatch(r"hugepages-(\d+)kB", s)
            if not ms:
                continue
            try:
                with open(os.path.join(hp, s, "free_hugepages")) as fh:
                    sizes[int(ms.group(1))] = int(fh.read().strip() or 0)
            except (OSError, ValueError):
                continue
        out[int(m.group(1))] = sizes
    return out


def check_hugepages(placement: Placement | Sequence[Placement], available: Mapping[int, Mapping[int, int]]) -> None:
    """Check hugepage-backed guest memory against free hugepages ``{node: {page_kib: free}}``
    (from :func:`read_hugepages`). A guest node bound to several host nodes needs an even share
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


# ---------------------------------------------------------------------------- renderers


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
