"""Candidate placements for ``vhpc tune``: every placement the existing policies realize for one
VM size on a topology, with equivalent ones collapsed.

Generation (pure: the topology and host facts come in as data):

* policies ``float``, ``compact``, ``spread``, ``span:1..S`` (S packages) and ``confine:N``
  (every NUMA node with PUs), each with guest NUMA ``hidden`` and ``mirror`` and page backing
  ``4k`` (``2m`` too when :class:`HostOffer` allows it: an explicit ``--host-knob
  hugepages_2m=N`` or enough free 2 MiB pages for the VM);
* a ``span:K`` or ``confine:N`` whose PUs are fewer than the vCPUs is still realizable,
  oversubscribed: the existing ``map`` policy lets each block of vCPUs run on all PUs of its
  package (node), memory bound there; such candidates are marked ``oversubscribed`` (R:1);
* ``partition:V`` (MPI workloads only): V smaller VMs whose vCPUs add up to the request, one
  per group of S/V packages, or V/S per package (:func:`vhpc.placement.plan_partition`), run
  as one ``vcluster`` environment.

Collapsing equivalent candidates (:func:`signature`): two placements are treated as the same
when one becomes the other by renaming host NUMA nodes, packages, L3 domains and cores, and the
renaming preserves what can matter to a guest: for every vCPU (in guest order) its host node,
package, L3 domain and core and how many PUs it may run on; for every guest node (guest nodes
taken in order of their first vCPU, so their numbering does not count) its vCPUs, memory size,
memory policy and host nodes; the distance sub-matrix among the used nodes; and
the PU count and memory size of each used node.  Names are assigned in order of first use, so
the signature is the canonical form of the placement under those renamings (e.g. on a
4-socket host ``confine:0``..``confine:3`` and ``span:1`` are one candidate; ``compact`` and
``span:4`` for 16 vCPUs on 4×4 cores too; ``spread`` is not, because it numbers vCPUs
round-robin over the nodes).  Unused parts of the host are assumed idle.  The first name
generated is kept; the others are listed as ``aliases``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vhpc import placement
from vhpc.core.cpulist import format_cpu_list
from vhpc.core.errors import VhpcError
from vhpc.environments.kind import GUEST, GUEST_CLUSTER, kind_name
from vhpc.topology import Topology

__all__ = ["HostOffer", "Candidate", "Skipped", "generate", "restrict", "signature", "is_mpi",
           "TuneError"]


class TuneError(VhpcError, ValueError):
    """Bad ``vhpc tune`` input (candidate names, budget, sizes): one line saying what to change."""


@dataclass(frozen=True)
class HostOffer:
    """Host facts candidate generation needs: ``free_hugepages`` ``{node: {page_kib: free}}``
    (:func:`vhpc.host.facts.read_hugepages`), ``hugepages_knob`` True when the user
    asked for a 2 MiB pool with ``--host-knob hugepages_2m=N``, ``vcluster`` True when the
    ``vcluster`` environment exists (partition candidates can run)."""

    free_hugepages: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    hugepages_knob: bool = False
    vcluster: bool = False


@dataclass(frozen=True)
class Candidate:
    """One candidate placement.

    name: label (``compact``, ``span:2 mirror 2m``); env: environment name (letters, digits,
    ``-``); kind: ``vm`` or ``vcluster``; policy: the policy string the VM gets (``map:...``
    for oversubscribed ones); numa: ``hidden``/``mirror``; backing: ``4k``/``2m``;
    placements: one :class:`~vhpc.placement.Placement` per VM; oversubscribed: vCPUs per PU
    (1 = not); runnable: False when only listable (reason in ``note``); aliases: collapsed
    equivalent names; local: fraction of guest memory bound to the host nodes of the vCPUs
    that use it (1.0 local, 0.0 unbound or remote), the prior's ordering key; pool: the host's
    usable PUs, where an unpinned (``float``) VM's vCPUs may run."""

    name: str
    env: str
    kind: str
    policy: str
    numa: str
    backing: str
    placements: tuple[placement.Placement, ...]
    oversubscribed: int = 1
    runnable: bool = True
    note: str = ""
    aliases: tuple[str, ...] = ()
    local: float = 0.0
    pool: tuple[int, ...] = ()

    @property
    def vms(self) -> int:
        """Number of VMs (1 unless a partition)."""
        return len(self.placements)

    def options(self, memory_mib: int, accel: str = "auto") -> dict:
        """The environment options (typed spec fields of the ``vm`` / ``vcluster`` kind)."""
        p = self.placements[0]
        if self.policy == "partition":  # n VMs per socket: the vcluster's options
            return {"vms": self.vms, "vcpus": p.vcpus, "memory": p.memory_mib,
                    "policy": "partition", "accel": accel}
        return {"vcpus": p.vcpus, "memory": memory_mib, "policy": self.policy, "numa": self.numa,
                "backing": self.backing, "accel": accel}


@dataclass(frozen=True)
class Skipped:
    """A policy that was not generated, with why (shown by ``--dry-run``)."""

    name: str
    reason: str


def is_mpi(bench, params: Mapping) -> bool:
    """True when benchmark ``bench`` (resolved ``params``) runs as an MPI job: it takes the
    ``mpi`` parameter and, if it has a ``variant``, the variant is ``mpi``."""
    names = {p.name for p in bench.params}
    return "mpi" in names and params.get("variant", "mpi") == "mpi"


def _env_name(label: str) -> str:
    return "vm-" + re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")


def _locality(topo: Topology, p: placement.Placement) -> float:
    """Fraction of guest memory bound to host nodes its own vCPUs run on."""
    if not p.pinned:
        return 0.0
    local = 0
    for g in p.guest_nodes:
        cpu_nodes = {topo.node_of_pu(c) for v in g.vcpus for c in p.vcpu_pins[v]}
        if g.policy != "default" and g.host_nodes and set(g.host_nodes) <= cpu_nodes:
            local += g.memory_mib
    return local / max(p.memory_mib, 1)


def signature(topo: Topology, p: placement.Placement) -> tuple:
    """Canonical form of ``p`` under renamings of nodes, packages, L3 domains and cores (module
    docstring): equal signatures = equivalent placements on this topology."""
    names: dict[tuple[str, object], int] = {}

    def name(kind: str, key) -> int | None:
        if key is None:
            return None
        return names.setdefault((kind, key), sum(1 for k in names if k[0] == kind))

    per_vcpu = []
    for pins in p.vcpu_pins:
        pus = [topo.pu(c) for c in pins]
        per_vcpu.append((len(pins),
                         tuple(sorted({name("node", u.node) for u in pus}, key=str)),
                         tuple(sorted({name("pkg", u.package) for u in pus}, key=str)),
                         tuple(sorted({name("l3", (u.package, u.l3)) for u in pus}, key=str)),
                         tuple(sorted({name("core", u.core) for u in pus}, key=str))))
    guest = tuple(sorted((g.vcpus, g.memory_mib, g.policy,
                          tuple(sorted(name("node", n) for n in g.host_nodes)))
                         for g in p.guest_nodes))
    used = [n for (kind, n), _ in sorted(names.items(), key=lambda kv: kv[1]) if kind == "node"]
    nodes = tuple((len(topo.node(n).pus), topo.node(n).memory_bytes) for n in used)
    dist = tuple(tuple(topo.distance(a, b) for b in used) for a in used) if len(used) > 1 else ()
    return (p.pinned, p.backing, p.vcpus, p.memory_mib, tuple(per_vcpu), guest, nodes, dist)


def _oversubscribed_policy(topo: Topology, kind: str, target: int, vcpus: int) -> tuple[str, int]:
    """``span:K`` / ``confine:N`` that does not fit 1:1 as a ``map`` policy: vCPU blocks on all
    PUs of their package (node).  Returns (policy, vCPUs per PU, rounded up)."""
    groups = ([topo.package(p.index).pus for p in topo.packages[:target]] if kind == "span"
              else [topo.node(target).pus])
    k = len(groups)
    shares = [vcpus // k + (1 if i < vcpus % k else 0) for i in range(k)]
    parts, v0, ratio = [], 0, 1
    for share, pus in zip(shares, groups):
        if share == 0 or not pus:
            raise placement.PlacementError(f"{kind}:{target}: no PUs for vCPUs")
        parts.append(f"{v0}-{v0 + share - 1}={format_cpu_list(pus)}" if share > 1
                     else f"{v0}={format_cpu_list(pus)}")
        ratio = max(ratio, -(-share // len(pus)))
        v0 += share
    return "map:" + ",".join(parts), ratio


def _policies(topo: Topology) -> list[tuple[str, str, int]]:
    """(label, kind, target) of every single-VM policy to try, in listing order."""
    out = [("float", "float", 0), ("compact", "compact", 0), ("spread", "spread", 0)]
    out += [(f"span:{k}", "span", k) for k in range(1, len(topo.packages) + 1)]
    out += [(f"confine:{n}", "confine", n) for n in topo.cpu_node_ids]
    return out


def _backings(topo: Topology, offer: HostOffer, memory_mib: int) -> list[str]:
    """``4k``, plus ``2m`` when asked for with the knob or when free 2 MiB pages hold the VM."""
    free = sum(s.get(2048, 0) for s in offer.free_hugepages.values())
    return ["4k", "2m"] if offer.hugepages_knob or free * 2 >= memory_mib else ["4k"]


def _one_vm(topo: Topology, label: str, kind: str, target: int, vcpus: int, memory_mib: int,
            numa: str, backing: str) -> tuple[str, placement.Placement, int]:
    """(policy, placement, oversubscription) of one single-VM candidate; raises PlacementError."""
    pol = label
    try:
        p = placement.place(topo, placement.PlacementRequest(vcpus=vcpus, memory_mib=memory_mib,
                                                             policy=pol, guest_numa=numa,
                                                             backing=backing))
        return pol, p, 1
    except placement.PlacementError:
        have = (sum(len(topo.package(p.index).pus) for p in topo.packages[:target])
                if kind == "span" else len(topo.node(target).pus) if kind == "confine" else vcpus)
        if vcpus <= have:  # it failed for another reason than too few PUs
            raise
    pol, ratio = _oversubscribed_policy(topo, kind, target, vcpus)
    p = placement.place(topo, placement.PlacementRequest(vcpus=vcpus, memory_mib=memory_mib,
                                                         policy=pol, guest_numa=numa,
                                                         backing=backing, exclusive=False))
    return pol, p, ratio


def _partitions(topo: Topology, vcpus: int, memory_mib: int, offer: HostOffer
                ) -> tuple[list[Candidate], list[Skipped]]:
    """``partition:V`` candidates: V VMs of vcpus/V vCPUs and memory/V MiB, V a divisor of the
    vCPUs that the packages split evenly (one VM per S/V packages, or V/S VMs per package)."""
    npk = len(topo.packages)
    out, skipped = [], []
    for v in range(2, vcpus + 1):
        if vcpus % v or not (npk % v == 0 or v % npk == 0):
            continue
        label = f"partition:{v}"
        try:
            per_socket, spv = (v // npk, 1) if v % npk == 0 else (1, npk // v)
            plans = placement.plan_partition(topo, per_socket, vcpus // v, max(memory_mib // v, 128),
                                             sockets_per_vm=spv)
        except placement.PlacementError as exc:
            skipped.append(Skipped(label, str(exc)))
            continue
        note = "" if offer.vcluster else "listed only: the vcluster environment is not available"
        out.append(Candidate(label, _env_name(label), kind_name(GUEST_CLUSTER), "partition",
                             "hidden", "4k", tuple(plans), runnable=offer.vcluster, note=note,
                             local=sum(_locality(topo, p) for p in plans) / len(plans)))
    return out, skipped


def generate(topo: Topology, vcpus: int, memory_mib: int, offer: HostOffer = HostOffer(),
             mpi: bool = False) -> tuple[list[Candidate], list[Skipped]]:
    """Every candidate for a ``vcpus``-vCPU, ``memory_mib``-MiB VM on ``topo`` (module
    docstring), equivalent ones collapsed, plus the policies left out with why.  ``mpi``: the
    workload is MPI, so partition candidates are added.  Raises TuneError for a bad size."""
    if vcpus < 1 or memory_mib < 128:
        raise TuneError(f"--vcpus {vcpus} --memory {memory_mib}: give at least 1 vCPU and 128 MiB")
    seen: dict[tuple, int] = {}
    out: list[Candidate] = []
    skipped: list[Skipped] = []
    for label, kind, target in _policies(topo):
        for backing in _backings(topo, offer, memory_mib):
            for numa in (("hidden",) if kind == "float" else ("hidden", "mirror")):
                full = " ".join([label] + ([numa] if numa != "hidden" else [])
                                + ([backing] if backing != "4k" else []))
                try:
                    pol, p, ratio = _one_vm(topo, label, kind, target, vcpus, memory_mib, numa,
                                            backing)
                except placement.PlacementError as exc:
                    skipped.append(Skipped(full, str(exc)))
                    continue
                key = signature(topo, p)
                if key in seen:
                    c = out[seen[key]]
                    out[seen[key]] = Candidate(**{**c.__dict__, "aliases": c.aliases + (full,)})
                    continue
                seen[key] = len(out)
                note = f"oversubscribed {ratio}:1 (more vCPUs than PUs)" if ratio > 1 else ""
                out.append(Candidate(full, _env_name(full), kind_name(GUEST), pol, numa,
                                     backing, (p,), oversubscribed=ratio, note=note,
                                     local=_locality(topo, p),
                                     pool=() if p.pinned else tuple(topo.pu_ids)))
    if mpi:
        parts, why = _partitions(topo, vcpus, memory_mib, offer)
        out += parts
        skipped += why
    else:
        skipped.append(Skipped("partition", "the workload is not MPI (several smaller VMs need "
                                            "an MPI job across them)"))
    return out, skipped


def restrict(cands: Sequence[Candidate], wanted: Sequence[str]) -> list[Candidate]:
    """The candidates named in ``wanted`` (a name or an alias, e.g. ``compact``, ``span:2``,
    ``compact mirror``), in the order given.  Raises TuneError naming the unknown ones."""
    by_name = {}
    for c in cands:
        for n in (c.name, *c.aliases, c.env):
            by_name.setdefault(n, c)
    out, bad = [], []
    for w in wanted:
        c = by_name.get(" ".join(w.split()))
        if c is None:
            bad.append(w)
        elif c not in out:
            out.append(c)
    if bad:
        raise TuneError(f"--candidates: no candidate {', '.join(map(repr, bad))} on this host: "
                        f"choose from {', '.join(c.name for c in cands)}")
    return out
