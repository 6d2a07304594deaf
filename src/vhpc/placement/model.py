"""Placement records: the request, the guest NUMA node, the placement (pure data)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vhpc.core.errors import VhpcError

#: backing name → page size in KiB
BACKINGS: dict[str, int] = {"4k": 4, "2m": 2048, "1g": 1048576}
#: The page size of each backing in MiB (4k counts as 1: memory is given in MiB).
GRANULE_MIB = {"4k": 1, "2m": 2, "1g": 1024}


class PlacementError(VhpcError, ValueError):
    """A request that cannot be placed, or a placement that is invalid. One line, saying what
    to change."""


@dataclass(frozen=True)
class PlacementRequest:
    """What to place.

    vcpus: number of vCPUs (≥1); memory_mib: guest RAM in MiB; policy: policy string or a
    parsed :class:`vhpc.placement.policy.Policy` (not parsed again);
    guest_numa: ``"hidden"``, ``"mirror"`` or an int; backing: ``"4k"``, ``"2m"`` or ``"1g"``;
    vm_index / vms: this VM is number ``vm_index`` of ``vms`` VMs with the same policy and
    size, and takes the ``vm_index``-th disjoint share of the policy's PUs (all ``vms`` shares
    must fit); exclusive: no pCPU may be shared with another VM of the same plan
    (:func:`check_plan`); check_memory: compare memory with node capacity (turn off when the
    host under-reports per-node memory).
    """

    vcpus: int
    memory_mib: int
    policy: Any = "float"  # str | Policy (policy.py imports this module)
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


def needs_guest_numa(placement: Placement) -> bool:
    """True when a hypervisor must be told the guest's NUMA layout or memory binding: more
    than one guest node, hugepage backing, or memory bound to host nodes (else a plain
    ``-m``/``<memory>`` describes the guest)."""
    if len(placement.guest_nodes) > 1 or placement.backing != "4k":
        return True
    g = placement.guest_nodes[0]
    return g.policy != "default" and bool(g.host_nodes)
