"""The host model: frozen dataclasses, pure data, no I/O.

The tuples of a :class:`Topology` hold the **usable view**: PUs that are online and allowed to
this process (inside its cpuset / affinity, hwloc's *allowed* cpuset), NUMA nodes that are
online and allowed, and the cores, L3 domains and packages that keep at least one such PU.
Everything a loader saw but left out is listed in :attr:`Topology.left_out`, with why, and
:attr:`Topology.total_pus` / :attr:`Topology.total_nodes` count the whole machine, so messages
can say "16 allowed PUs of 64".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from vhpc.core.cpulist import format_cpu_list
from vhpc.core.errors import VhpcError

__all__ = ["TopologyError", "PU", "Core", "L3", "NumaNode", "Package", "LeftOut", "Topology",
           "LOCAL_DISTANCE", "REMOTE_DISTANCE", "MEMORY_KINDS"]

#: SLIT distances hwloc and Linux assume without a measured matrix (ACPI SLIT: 10 = local).
LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20
#: Memory kinds vhpc names (hwloc NUMANode ``subtype``, normalised; see hwloc's "Heterogeneous Memory").
MEMORY_KINDS = ("DRAM", "HBM", "NVDIMM", "CXL", "GPU")


class TopologyError(VhpcError, ValueError):
    """A topology could not be read or built. The message is one line that says what to change."""


@dataclass(frozen=True)
class PU:
    """A processing unit (hardware thread). ``os_index``: Linux CPU number; ``core``/``l3``:
    logical indexes (``l3`` None when the machine has no L3); ``package``: package index (None
    if outside any package); ``node``: OS index of its local NUMA node, None when it has none
    that is usable (node offline, disallowed, or the PU is in no node's cpuset)."""

    os_index: int
    core: int
    package: int | None
    node: int | None
    l3: int | None


@dataclass(frozen=True)
class Core:
    """A physical core: logical ``index`` (unique), hwloc ``os_index`` (Linux core_id, unique
    only within a package), its usable PUs (OS indexes, ascending) and where it sits."""

    index: int
    os_index: int | None
    pus: tuple[int, ...]
    package: int | None
    node: int | None
    l3: int | None


@dataclass(frozen=True)
class L3:
    """A last-level-cache domain: logical ``index``, size in bytes (None if unknown), cores
    (logical indexes) and PUs (OS indexes) below it."""

    index: int
    size_bytes: int | None
    cores: tuple[int, ...]
    pus: tuple[int, ...]


@dataclass(frozen=True)
class NumaNode:
    """A NUMA memory node: Linux ``os_index``, ``memory_bytes`` (None when unknown, 0 when the
    node has no memory), ``pus``: the usable PUs whose *local* node this is (empty for a
    memory-only node such as HBM/CXL/NVDIMM sharing a CPU node's cpuset), the package holding
    it (None if it spans packages, as on a UMA machine), its L3 domains, ``memory_type`` (one of
    :data:`MEMORY_KINDS`, from hwloc's ``subtype``; ``DRAM`` when hwloc says nothing) and
    ``near_pus``: the usable PUs of its cpuset (its locality; equals ``pus`` for a CPU node)."""

    os_index: int
    memory_bytes: int | None
    pus: tuple[int, ...]
    package: int | None
    l3s: tuple[int, ...] = ()
    memory_type: str = "DRAM"
    near_pus: tuple[int, ...] = ()

    @property
    def has_memory(self) -> bool:
        """False only when the node is known to hold no memory (``memory_bytes == 0``)."""
        return self.memory_bytes is None or self.memory_bytes > 0

    @property
    def memory_only(self) -> bool:
        """True for a node without local PUs (never CPU capacity; a valid memory target)."""
        return not self.pus


@dataclass(frozen=True)
class Package:
    """A socket (or what stands in for one, see :attr:`Topology.notes`): ``index``, its usable
    PUs, cores (logical) and the NUMA nodes (OS indexes) whose PUs lie in it."""

    index: int
    pus: tuple[int, ...]
    cores: tuple[int, ...]
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class LeftOut:
    """Something the loader saw and kept out of the usable view: ``what`` is ``PU``,
    ``NUMA node`` or ``package``; ``ids`` the OS indexes; ``why`` one short phrase."""

    what: str
    ids: tuple[int, ...]
    why: str

    def text(self) -> str:
        """``"PUs 16-63: outside this process's allowed cpuset"``."""
        plural = {"PU": "PUs", "NUMA node": "NUMA nodes", "package": "packages"}.get(self.what, self.what)
        name = self.what if len(self.ids) == 1 else plural
        return f"{name} {format_cpu_list(self.ids)}: {self.why}"


@dataclass(frozen=True)
class Topology:
    """A host model (the usable view, see the module docstring). All tuples sorted by index.

    ``distances``: NUMA distance matrix, rows/columns in the order of ``nodes`` (hwloc's
    matrix if the source has one, else 10 local / 20 remote; ``distances_measured`` says which).
    ``memory_known``: False when node memory sizes are invented (synthetic description without
    ``memory=``), so capacity checks are skipped. ``source``: ``host``, a file path,
    ``synthetic:<desc>`` or ``sysfs``. ``total_pus``/``total_nodes``: PUs and nodes of the whole
    machine, usable or not. ``left_out``: what is not usable, with why. ``notes``: how the loader
    filled gaps (no Package/Core objects, sysfs fallback). ``llc_bytes``: size of one
    last-level cache domain in bytes (hwloc's or sysfs's, never sysconf), None when unknown.
    """

    packages: tuple[Package, ...]
    nodes: tuple[NumaNode, ...]
    l3s: tuple[L3, ...]
    cores: tuple[Core, ...]
    pus: tuple[PU, ...]
    distances: tuple[tuple[int, ...], ...]
    distances_measured: bool = False
    memory_known: bool = True
    source: str = ""
    info: dict[str, str] = field(default_factory=dict, compare=False)
    total_pus: int = 0
    total_nodes: int = 0
    total_packages: int = 0
    left_out: tuple[LeftOut, ...] = ()
    notes: tuple[str, ...] = ()
    llc_bytes: int | None = None

    # -- counts and views --------------------------------------------------------
    @property
    def node_ids(self) -> tuple[int, ...]:
        """Usable NUMA node OS indexes, ascending."""
        return tuple(n.os_index for n in self.nodes)

    @property
    def pu_ids(self) -> tuple[int, ...]:
        """Usable PU OS indexes, ascending."""
        return tuple(p.os_index for p in self.pus)

    @property
    def cpu_node_ids(self) -> tuple[int, ...]:
        """Usable nodes with local PUs (CPU capacity), ascending."""
        return tuple(n.os_index for n in self.nodes if n.pus)

    @property
    def memory_node_ids(self) -> tuple[int, ...]:
        """Usable nodes that hold memory (valid memory-binding targets), ascending."""
        return tuple(n.os_index for n in self.nodes if n.has_memory)

    @property
    def restricted(self) -> bool:
        """True when some PU or node of the machine is left out of the usable view."""
        return bool(self.left_out)

    @staticmethod
    def _count(n: int, total: int, word: str) -> str:
        """``"16 allowed PUs of 64"`` / ``"1 package"``."""
        plural = word if n == 1 and total <= n else word + "s"
        if total > n:
            return f"{n} allowed {word}{'s' if n != 1 else ''} of {total}"
        return f"{n} {plural}"

    def pu_count_text(self) -> str:
        """``"16 allowed PUs of 64"`` when restricted, else ``"16 PUs"``."""
        return self._count(len(self.pus), self.total_pus, "PU")

    def node_count_text(self) -> str:
        """``"2 allowed NUMA nodes of 8"`` when restricted, else ``"2 NUMA nodes"``."""
        return self._count(len(self.nodes), self.total_nodes, "NUMA node")

    def package_count_text(self) -> str:
        """``"5 allowed packages of 8"`` when some packages have no usable PU, else ``"8 packages"``."""
        return self._count(len(self.packages), self.total_packages, "package")

    # -- lookups ---------------------------------------------------------------
    @cached_property
    def _by_id(self) -> tuple[dict[int, PU], dict[int, NumaNode], dict[int, Package]]:
        """OS index → object maps (built once: lookups stay O(1) on 16384-PU machines)."""
        return ({p.os_index: p for p in self.pus}, {n.os_index: n for n in self.nodes},
                {p.index: p for p in self.packages})

    def node(self, os_index: int) -> NumaNode:
        """The usable NUMA node with OS index ``os_index``; TopologyError naming why it is not usable."""
        node = self._by_id[1].get(os_index)
        if node is not None:
            return node
        raise TopologyError(f"{self._why('NUMA node', os_index)} (usable nodes: {format_cpu_list(self.node_ids) or 'none'})")

    def pu(self, os_index: int) -> PU:
        """The usable PU with OS index ``os_index``; TopologyError naming why it is not usable."""
        pu = self._by_id[0].get(os_index)
        if pu is not None:
            return pu
        raise TopologyError(f"{self._why('PU', os_index)} (usable PUs: {format_cpu_list(self.pu_ids)})")

    def package(self, index: int) -> Package:
        """The package with index ``index``; TopologyError if there is none."""
        pkg = self._by_id[2].get(index)
        if pkg is not None:
            return pkg
        raise TopologyError(f"{self._why('package', index)} "
                            f"(usable packages: {format_cpu_list(pk.index for pk in self.packages) or 'none'})")

    def _why(self, what: str, i: int) -> str:
        """``"NUMA node 3 is not usable: offline"`` or ``"host has no NUMA node 3"``."""
        for lo in self.left_out:
            if lo.what == what and i in lo.ids:
                return f"{what} {i} is not usable: {lo.why}"
        return f"host has no {what} {i}"

    def pus_of_node(self, node: int) -> tuple[int, ...]:
        """PU OS indexes local to NUMA node ``node`` (OS index); TopologyError when it is not usable."""
        return self.node(node).pus

    def node_of_pu(self, pu: int) -> int | None:
        """Local NUMA node OS index of PU ``pu`` (OS index; None when it has no usable node);
        TopologyError when the PU is not usable."""
        return self.pu(pu).node

    def package_of_node(self, node: int) -> int | None:
        """Package index holding NUMA node ``node`` (OS index; None if the node spans packages,
        UMA); TopologyError when the node is not usable."""
        return self.node(node).package

    def nodes_of_package(self, package: int) -> tuple[int, ...]:
        """NUMA node OS indexes whose PUs are in package ``package`` (index); TopologyError when
        there is no such package."""
        return self.package(package).nodes

    def distance(self, node_a: int, node_b: int) -> int:
        """NUMA distance between usable nodes ``node_a`` and ``node_b`` (OS indexes), as the
        host reports it (hwloc, from the firmware's SLIT: 10 = local); TopologyError naming a
        node that is not usable."""
        ids = self.node_ids
        try:
            return self.distances[ids.index(node_a)][ids.index(node_b)]
        except ValueError:
            self.node(node_a if node_a not in ids else node_b)
            raise  # pragma: no cover - node() raised already

    @property
    def smt(self) -> int:
        """Largest number of usable PUs per core (1 = no SMT)."""
        return max((len(c.pus) for c in self.cores), default=1)

    def summary(self) -> str:
        """One line: counts of packages, nodes, cores, PUs (allowed of total when restricted)."""
        return (f"{self.package_count_text()}, {self.node_count_text()}, "
                f"{self._count(len(self.cores), 0, 'core')}, {self.pu_count_text()}")
