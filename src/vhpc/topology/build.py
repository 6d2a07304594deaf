"""Assemble a :class:`~vhpc.topology.model.Topology` from what a loader found (:class:`Raw`).

Loaders (hwloc XML, sysfs) only report objects and masks; the rules live here, once:

- a PU is usable when it is online and inside every CPU limit (hwloc's allowed cpuset, the
  process's affinity, ``Cpus_allowed``); a NUMA node when it is online and inside every node
  limit (hwloc's allowed nodeset, ``Mems_allowed``);
- a PU's local node is the usable node whose cpuset holds it, preferring DRAM over other kinds,
  then the lowest OS index; every other node sharing that cpuset (HBM, CXL, NVDIMM, GPU memory)
  is memory-only, so no PU is counted twice;
- without Package objects the loader's stand-in (Die objects, else CPU NUMA nodes, else the
  whole machine) is used and said in ``notes``; without Core objects each PU is a core.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from vhpc.topology.model import (LOCAL_DISTANCE, REMOTE_DISTANCE, L3, PU, Core, LeftOut, NumaNode, Package,
                                 Topology, TopologyError)

_KIND_RANK = {"DRAM": 0}


@dataclass
class RawPU:
    """A PU as a loader saw it: keys of its package, core and L3 ancestors (None when absent)."""

    os_index: int
    package: Hashable | None = None
    core: Hashable | None = None
    l3: Hashable | None = None
    core_os: int | None = None


@dataclass
class RawNode:
    """A NUMA node as a loader saw it: memory in bytes (None unknown), cpuset, memory type (DRAM, HBM, ...)."""

    os_index: int
    memory_bytes: int | None
    cpuset: frozenset[int]
    memory_type: str = "DRAM"


@dataclass
class Raw:
    """Everything a loader found. ``cpu_limits``/``node_limits``: (allowed set, why the rest is
    left out), applied in order; ``online``: online PUs among ``pus`` (None = all);
    ``offline_pus``/``offline_nodes``: known to exist but offline (no object);
    ``package_os``: package key → OS index (document order); ``package_kind``: what stands in
    for packages when the machine has none (``""`` = real packages)."""

    pus: list[RawPU] = field(default_factory=list)
    nodes: list[RawNode] = field(default_factory=list)
    package_os: dict = field(default_factory=dict)
    package_kind: str = ""
    l3_size: dict = field(default_factory=dict)
    llc_bytes: int | None = None
    cpu_limits: list[tuple[frozenset[int], str]] = field(default_factory=list)
    node_limits: list[tuple[frozenset[int], str]] = field(default_factory=list)
    online: frozenset[int] | None = None
    offline_pus: frozenset[int] = frozenset()
    offline_nodes: frozenset[int] = frozenset()
    distances: dict[tuple[int, int], int] | None = None
    memory_known: bool = True
    notes: list[str] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)
    source: str = ""


def _usable(raw: Raw) -> tuple[set[int], set[int], list[LeftOut]]:
    """Usable PU and node OS indexes, and what was left out with why."""
    left: list[LeftOut] = []
    all_pus = {p.os_index for p in raw.pus}
    offline = (all_pus - raw.online if raw.online is not None else set()) | (set(raw.offline_pus) - all_pus)
    if offline:
        left.append(LeftOut("PU", tuple(sorted(offline)), "offline"))
    pus = all_pus - offline
    for allowed, why in raw.cpu_limits:
        out = pus - allowed
        if out:
            left.append(LeftOut("PU", tuple(sorted(out)), why))
            pus -= out
    node_ids = {n.os_index for n in raw.nodes}
    off_n = set(raw.offline_nodes) - node_ids
    if off_n:
        left.append(LeftOut("NUMA node", tuple(sorted(off_n)), "offline"))
    nodes = set(node_ids)
    for allowed, why in raw.node_limits:
        out = nodes - allowed
        if out:
            left.append(LeftOut("NUMA node", tuple(sorted(out)), why))
            nodes -= out
    return pus, nodes, left


def _local_nodes(raw: Raw, pus: set[int], nodes: set[int]) -> dict[int, int]:
    """PU → its local node: among all nodes whose cpuset holds it (usable or not), DRAM first,
    then the lowest OS index; a PU whose local node is not usable gets none. HBM/CXL/NVDIMM/GPU
    nodes are memory-only whenever the machine has DRAM nodes (online or offline), so they never
    take a CPU node's place; on a machine with only such nodes they are the CPU nodes."""
    dram = any(n.memory_type == "DRAM" for n in raw.nodes) or bool(raw.offline_nodes)
    rank = sorted((n for n in raw.nodes if n.memory_type == "DRAM" or not dram),
                  key=lambda n: (_KIND_RANK.get(n.memory_type, 1), n.memory_bytes == 0, n.os_index))
    local: dict[int, int] = {}
    for n in rank:
        for p in n.cpuset:
            if p in pus and p not in local:
                local[p] = n.os_index
    return {p: n for p, n in local.items() if n in nodes}


def _package_keys(raw: Raw, pus: set[int], local: dict[int, int]) -> tuple[dict[int, Hashable | None], dict, list[str]]:
    """PU → package key, key → index, and notes on the stand-in used."""
    notes: list[str] = []
    pkg_of = {p.os_index: p.package for p in raw.pus}
    keys = dict(raw.package_os)
    if raw.package_kind:
        notes.append(f"no Package objects: {raw.package_kind} stand in for packages (span:K counts them)")
    if not any(pkg_of[p] is not None for p in pus):
        cpu_nodes = sorted(set(local.values()))
        if len(cpu_nodes) > 1:
            pkg_of = {p: ("node", local[p]) if p in local else None for p in pkg_of}
            keys = {("node", n): n for n in cpu_nodes}
            notes.append("no Package objects: each NUMA node with CPUs stands in for a package (span:K counts nodes)")
        else:
            pkg_of = {p: "machine" for p in pkg_of}
            keys = {"machine": 0}
            if not raw.package_kind:
                notes.append("no Package objects: the whole machine counts as one package")
    os_vals = [v for v in keys.values() if v is not None]
    unique = len(os_vals) == len(keys) and len(set(os_vals)) == len(os_vals)
    index = {k: (v if unique else i) for i, (k, v) in enumerate(keys.items())}
    return pkg_of, index, notes


def build(raw: Raw) -> Topology:
    """The usable-view :class:`Topology` of ``raw``. Raises TopologyError when no PU is usable."""
    if not raw.pus:
        raise TopologyError("the topology has no PU objects: give a full topology from lstopo --of xml")
    pus, nodes, left = _usable(raw)
    if not pus:
        raise TopologyError(f"no usable PU among the machine's {len(raw.pus)}: "
                            + "; ".join(lo.text() for lo in left if lo.what == "PU"))
    local = _local_nodes(raw, pus, nodes)
    pkg_of, pkg_index, notes = _package_keys(raw, pus, local)
    notes = list(raw.notes) + notes
    rp = {p.os_index: p for p in raw.pus}
    has_cores = any(p.core is not None for p in raw.pus)
    if not has_cores:
        notes.append("no Core objects: each PU counts as a core")
    # cores in the order of their first usable PU
    core_pus: dict = {}
    for p in sorted(pus):
        key = rp[p].core if rp[p].core is not None else ("pu", p)
        core_pus.setdefault(key, []).append(p)
    core_index = {k: i for i, k in enumerate(core_pus)}
    l3_keys = [k for k in raw.l3_size if any(rp[p].l3 == k for p in pus)]
    l3_index = {k: i for i, k in enumerate(l3_keys)}

    def pkg(p: int) -> int | None:
        k = pkg_of.get(p)
        return pkg_index.get(k) if k is not None else None

    pu_objs = tuple(PU(os_index=p, core=core_index[rp[p].core if rp[p].core is not None else ("pu", p)],
                       package=pkg(p), node=local.get(p), l3=l3_index.get(rp[p].l3)) for p in sorted(pus))
    by_os = {p.os_index: p for p in pu_objs}
    cores = tuple(Core(index=core_index[k], os_index=rp[ps[0]].core_os, pus=tuple(ps), package=by_os[ps[0]].package,
                       node=by_os[ps[0]].node, l3=by_os[ps[0]].l3) for k, ps in core_pus.items())
    l3_cores, l3_pus = _group(cores, "l3", "index"), _group(pu_objs, "l3", "os_index")
    l3s = tuple(L3(index=i, size_bytes=raw.l3_size[k], cores=l3_cores.get(i, ()), pus=l3_pus.get(i, ()))
                for i, k in enumerate(l3_keys))
    node_of = _group(pu_objs, "node", "os_index")
    pus_of_pkg, cores_of_pkg = _group(pu_objs, "package", "os_index"), _group(cores, "package", "index")
    node_objs = []
    for n in sorted((n for n in raw.nodes if n.os_index in nodes), key=lambda n: n.os_index):
        n_pus = node_of.get(n.os_index, ())
        near = tuple(sorted(set(n.cpuset) & pus))
        pk = {by_os[p].package for p in (n_pus or near)}
        node_objs.append(NumaNode(os_index=n.os_index, memory_bytes=n.memory_bytes, pus=n_pus,
                                  package=pk.pop() if len(pk) == 1 else None,
                                  l3s=tuple(sorted({by_os[p].l3 for p in n_pus if by_os[p].l3 is not None})),
                                  memory_type=n.memory_type, near_pus=near))
    packages = []
    for k, idx in pkg_index.items():
        p_pus = pus_of_pkg.get(idx, ())
        if not p_pus:
            continue
        packages.append(Package(index=idx, pus=p_pus, cores=cores_of_pkg.get(idx, ()),
                                nodes=tuple(n.os_index for n in node_objs if n.pus and set(n.pus) <= set(p_pus))))
    packages.sort(key=lambda p: p.index)
    empty = sorted(set(pkg_index.values()) - {p.index for p in packages})
    if empty and not any(lo.what == "package" for lo in left):
        left.append(LeftOut("package", tuple(empty), "no allowed online PU in it"))
    ids = [n.os_index for n in node_objs]
    dist, measured = _distances(raw.distances, ids)
    return Topology(
        packages=tuple(packages), nodes=tuple(node_objs), l3s=l3s, cores=tuple(sorted(cores, key=lambda c: c.index)),
        pus=pu_objs, distances=dist, distances_measured=measured,
        memory_known=raw.memory_known and all(n.memory_bytes is not None for n in node_objs) and bool(node_objs),
        source=raw.source, info=dict(raw.info), total_pus=len({p.os_index for p in raw.pus} | set(raw.offline_pus)),
        total_nodes=len({n.os_index for n in raw.nodes} | set(raw.offline_nodes)), total_packages=len(pkg_index),
        left_out=tuple(left), notes=tuple(notes), llc_bytes=raw.llc_bytes)


def _group(objs, key: str, val: str) -> dict:
    """``{getattr(o, key): (getattr(o, val), ...)}`` in the order of ``objs``."""
    out: dict = {}
    for o in objs:
        out.setdefault(getattr(o, key), []).append(getattr(o, val))
    return {k: tuple(v) for k, v in out.items()}


def _distances(d: dict[tuple[int, int], int] | None, ids: list[int]) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """The matrix over ``ids`` from ``d`` when it has every pair, else 10 local / 20 remote."""
    if d and all((a, b) in d for a in ids for b in ids):
        return tuple(tuple(d[(a, b)] for b in ids) for a in ids), True
    return tuple(tuple(LOCAL_DISTANCE if a == b else REMOTE_DISTANCE for b in ids) for a in ids), False
