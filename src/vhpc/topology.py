"""Host topology: packages (sockets) → NUMA nodes → L3 domains → cores → PUs, from hwloc.

The topology room is pure data. Its only side effect is running ``lstopo`` (hwloc 2.x) to get
an XML description, either of this host (:func:`from_host`) or of a synthetic machine
(:func:`from_synthetic`), which is then parsed with :mod:`xml.etree` (:func:`from_hwloc_xml`).

Identifiers: PUs, NUMA nodes and packages are named by their **OS index** (the numbers Linux
uses: ``taskset``, ``numactl``, QEMU ``host-nodes``). Cores and L3 domains, whose OS indexes
are not unique machine-wide, are named by a **logical index** (0, 1, ... in topology order).

The seed machines as synthetic descriptions (``numa:1(memory=...)`` sets node memory; without
it hwloc invents 1 GiB per node and :attr:`Topology.memory_known` is False):

- seed 000, 4-socket quad-core AMD Opteron 8350 (NUMA): ``pack:4 numa:1 l3:1 core:4 pu:1``
- seed 000, 4-socket quad-core Intel Xeon E7310 (UMA): ``pack:4 l3:1 core:4 pu:1``
- seed 000/003, 2-socket quad-core Nehalem-EP / Westmere-EP with SMT:
  ``pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2``
- seed 003, 4-socket Nehalem-EX R910: ``pack:4 numa:1(memory=16GiB) l3:1 core:8 pu:2``
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from vhpc.errors import VhpcError

__all__ = [
    "TopologyError",
    "PU",
    "Core",
    "L3",
    "NumaNode",
    "Package",
    "Topology",
    "from_hwloc_xml",
    "from_xml_file",
    "from_synthetic",
    "from_host",
    "load",
    "render_text",
    "parse_list",
    "format_list",
    "SEED_MACHINES",
]

#: Synthetic descriptions of the seed papers' machines (see the module docstring).
SEED_MACHINES: dict[str, str] = {
    "opteron-8350": "pack:4 numa:1 l3:1 core:4 pu:1",
    "xeon-e7310-uma": "pack:4 l3:1 core:4 pu:1",
    "nehalem-ep": "pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2",
    "nehalem-ex": "pack:4 numa:1(memory=16GiB) l3:1 core:8 pu:2",
}

LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20


class TopologyError(VhpcError, ValueError):
    """A topology could not be read or built. The message is one line that says what to change."""


# ---------------------------------------------------------------------------- list helpers


def parse_list(text: str) -> tuple[int, ...]:
    """Parse a Linux-style index list such as ``"0-3,8,10-11"`` into sorted unique ints.

    Raises ValueError (a one-line message) on malformed input or reversed ranges.
    """
    out: set[int] = set()
    text = text.strip()
    if not text:
        raise ValueError("empty index list: give numbers like 0-3,8")
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo < 0 or hi < lo:
                    raise ValueError
                out.update(range(lo, hi + 1))
            else:
                v = int(part)
                if v < 0:
                    raise ValueError
                out.add(v)
        except ValueError:
            raise ValueError(f"bad index list item {part!r} in {text!r}: use numbers and ranges like 0-3,8") from None
    return tuple(sorted(out))


def _runs(values) -> list[tuple[int, int]]:
    """Contiguous runs (lo, hi) of the sorted unique values."""
    vals = sorted(set(values))
    runs: list[tuple[int, int]] = []
    for v in vals:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def format_list(values) -> str:
    """Format ints as a compact Linux-style list: ``[0, 1, 2, 5]`` → ``"0-2,5"`` ('' if empty)."""
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in _runs(values))


# ---------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class PU:
    """A processing unit (hardware thread). ``os_index``: Linux CPU number; ``core``/``l3``:
    logical indexes (``l3`` None when the machine has no L3); ``package``: package OS index
    (None if outside any package); ``node``: NUMA node OS index (the lowest one whose cpuset
    holds this PU)."""

    os_index: int
    core: int
    package: int | None
    node: int | None
    l3: int | None


@dataclass(frozen=True)
class Core:
    """A physical core: logical ``index`` (unique), hwloc ``os_index`` (Linux core_id, unique
    only within a package), its PUs (OS indexes, ascending) and where it sits."""

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
    """A NUMA memory node: Linux ``os_index``, ``memory_bytes`` (None when unknown), local PUs
    (OS indexes; empty for CPU-less memory), the package holding it (None if it spans several
    packages, as on a UMA machine) and its L3 domains (logical indexes)."""

    os_index: int
    memory_bytes: int | None
    pus: tuple[int, ...]
    package: int | None
    l3s: tuple[int, ...] = ()


@dataclass(frozen=True)
class Package:
    """A socket: ``index`` (OS index), its PUs, cores (logical) and NUMA nodes (OS indexes)
    whose PUs lie in it."""

    index: int
    pus: tuple[int, ...]
    cores: tuple[int, ...]
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class Topology:
    """A host model. All tuples are sorted by index.

    ``distances``: NUMA distance matrix, rows/columns in the order of ``nodes`` (hwloc's
    matrix if the XML has one, else 10 local / 20 remote; ``distances_measured`` says which).
    ``memory_known``: False when node memory sizes are invented (synthetic description
    without ``memory=``), so capacity checks must be skipped. ``source``: where it came from
    (``host``, a file path, or ``synthetic:<desc>``).
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

    # -- lookups ---------------------------------------------------------------
    @property
    def node_ids(self) -> tuple[int, ...]:
        """NUMA node OS indexes, ascending."""
        return tuple(n.os_index for n in self.nodes)

    @property
    def pu_ids(self) -> tuple[int, ...]:
        """PU OS indexes, ascending."""
        return tuple(p.os_index for p in self.pus)

    def node(self, n: int) -> NumaNode:
        """The NUMA node with OS index ``n``; TopologyError if there is none."""
        for node in self.nodes:
            if node.os_index == n:
                return node
        raise TopologyError(f"host has no NUMA node {n} (nodes: {format_list(self.node_ids)})")

    def pu(self, p: int) -> PU:
        """The PU with OS index ``p``; TopologyError if there is none."""
        for pu in self.pus:
            if pu.os_index == p:
                return pu
        raise TopologyError(f"host has no PU {p} (PUs: {format_list(self.pu_ids)})")

    def package(self, p: int) -> Package:
        """The package with index ``p``; TopologyError if there is none."""
        for pkg in self.packages:
            if pkg.index == p:
                return pkg
        raise TopologyError(f"host has no package {p} (packages: {format_list(pk.index for pk in self.packages)})")

    def pus_of_node(self, n: int) -> tuple[int, ...]:
        """PU OS indexes local to NUMA node ``n``."""
        return self.node(n).pus

    def node_of_pu(self, p: int) -> int | None:
        """NUMA node OS index of PU ``p`` (None only on a machine without NUMA nodes)."""
        return self.pu(p).node

    def package_of_node(self, n: int) -> int | None:
        """Package index holding NUMA node ``n`` (None if the node spans packages, UMA)."""
        return self.node(n).package

    def nodes_of_package(self, p: int) -> tuple[int, ...]:
        """NUMA node OS indexes whose PUs are in package ``p``."""
        return self.package(p).nodes

    def cores_of_node(self, n: int) -> tuple[Core, ...]:
        """Cores whose PUs are local to node ``n``, in topology order."""
        return tuple(c for c in self.cores if c.node == n)

    def distance(self, a: int, b: int) -> int:
        """NUMA distance between nodes ``a`` and ``b`` (OS indexes)."""
        ids = self.node_ids
        try:
            return self.distances[ids.index(a)][ids.index(b)]
        except ValueError:
            raise TopologyError(f"host has no NUMA node {a if a not in ids else b} (nodes: {format_list(ids)})") from None

    @property
    def smt(self) -> int:
        """Largest number of PUs per core (1 = no SMT)."""
        return max((len(c.pus) for c in self.cores), default=1)

    def summary(self) -> str:
        """One line: counts of packages, nodes, cores, PUs."""
        return (f"{len(self.packages)} packages, {len(self.nodes)} NUMA nodes, "
                f"{len(self.cores)} cores, {len(self.pus)} PUs")


# ---------------------------------------------------------------------------- XML parsing


def _parse_cpuset(text: str | None) -> set[int]:
    """hwloc bitmap string (``0x0000ffff`` or ``0x00004000,0x0``: 32-bit words, most significant
    first) → set of bit indexes. Infinite prefixes (``0xf...f,``) are ignored."""
    if not text:
        return set()
    words = [w.strip() for w in text.split(",")]
    bits: set[int] = set()
    n = len(words)
    for i, w in enumerate(words):
        if w.startswith("0x"):
            w = w[2:]
        if w in ("f...f", "") or "..." in w:
            continue
        try:
            v = int(w, 16)
        except ValueError:
            raise TopologyError(f"unreadable cpuset {text!r} in hwloc XML: export it again with lstopo --of xml") from None
        shift = 32 * (n - 1 - i)
        b = 0
        while v:
            if v & 1:
                bits.add(b + shift)
            v >>= 1
            b += 1
    return bits


def _int_or_none(s: str | None) -> int | None:
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


def from_hwloc_xml(text: str, source: str = "xml") -> Topology:
    """Build a :class:`Topology` from hwloc XML text (hwloc 2.x; 1.x files also parse).

    Raises TopologyError on XML that is not an hwloc topology or that has no PUs.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise TopologyError(f"not valid XML ({exc}): give an hwloc XML file from lstopo --of xml") from None
    if root.tag != "topology":
        raise TopologyError(f"root element is <{root.tag}>, not <topology>: give an hwloc XML file from lstopo --of xml")

    info: dict[str, str] = {}
    pu_anc: dict[int, dict[str, ET.Element | None]] = {}  # pu os -> nearest Package/L3/Core
    numa_elems: list[ET.Element] = []
    core_elems: list[ET.Element] = []
    l3_elems: list[ET.Element] = []
    pkg_elems: list[ET.Element] = []

    def walk(el: ET.Element, anc: dict[str, ET.Element | None]) -> None:
        for child in el:
            if child.tag == "info" and el.get("type") == "Machine":
                info[child.get("name", "")] = child.get("value", "")
                continue
            if child.tag != "object":
                continue
            t = child.get("type")
            a = anc
            if t == "Package":
                pkg_elems.append(child)
                a = dict(anc, Package=child)
            elif t == "L3Cache" or (t == "Cache" and child.get("depth") == "3" and child.get("cache_type") in ("0", "1", None)):
                l3_elems.append(child)
                a = dict(anc, L3=child)
            elif t == "Core":
                core_elems.append(child)
                a = dict(anc, Core=child)
            elif t == "NUMANode":
                numa_elems.append(child)
            elif t == "PU":
                os_i = _int_or_none(child.get("os_index"))
                if os_i is None:
                    raise TopologyError("a PU without os_index in hwloc XML: export it again with lstopo --of xml")
                pu_anc[os_i] = dict(anc)
            walk(child, a)

    walk(root, {"Package": None, "L3": None, "Core": None})
    if not pu_anc:
        raise TopologyError("hwloc XML has no PU objects: give a full topology from lstopo --of xml")

    # packages
    pkg_index: dict[int, int] = {}  # id(elem) -> index
    for i, el in enumerate(pkg_elems):
        os_i = _int_or_none(el.get("os_index"))
        pkg_index[id(el)] = os_i if os_i is not None else i
    # L3 and cores: logical indexes in document order
    l3_index = {id(el): i for i, el in enumerate(l3_elems)}
    core_index = {id(el): i for i, el in enumerate(core_elems)}

    # NUMA nodes: by cpuset membership
    node_cpus: dict[int, set[int]] = {}
    node_mem: dict[int, int | None] = {}
    for i, el in enumerate(numa_elems):
        os_i = _int_or_none(el.get("os_index"))
        os_i = os_i if os_i is not None else i
        node_cpus[os_i] = _parse_cpuset(el.get("cpuset")) & set(pu_anc)
        node_mem[os_i] = _int_or_none(el.get("local_memory"))

    synthetic = info.get("Backend") == "Synthetic"
    memory_known = not (synthetic and "memory=" not in info.get("SyntheticDescription", ""))
    memory_known = memory_known and all(m is not None for m in node_mem.values()) and bool(node_mem)

    # PU records; a PU without any core gets its own pseudo-core
    pus: list[PU] = []
    extra_core = len(core_elems)
    core_pus: dict[int, list[int]] = {}
    core_meta: dict[int, tuple[int | None, int | None, int | None]] = {}
    for p in sorted(pu_anc):
        anc = pu_anc[p]
        pkg = pkg_index[id(anc["Package"])] if anc["Package"] is not None else None
        l3 = l3_index[id(anc["L3"])] if anc["L3"] is not None else None
        if anc["Core"] is not None:
            core = core_index[id(anc["Core"])]
            core_os = _int_or_none(anc["Core"].get("os_index"))
        else:
            core, core_os = extra_core, None
            extra_core += 1
        nodes_with = [n for n in sorted(node_cpus) if p in node_cpus[n]]
        node = nodes_with[0] if nodes_with else None
        pus.append(PU(os_index=p, core=core, package=pkg, node=node, l3=l3))
        core_pus.setdefault(core, []).append(p)
        core_meta[core] = (core_os, pkg, l3)

    pu_by_os = {p.os_index: p for p in pus}
    cores = []
    for c in sorted(core_pus):
        c_os, pkg, l3 = core_meta[c]
        first = pu_by_os[min(core_pus[c])]
        cores.append(Core(index=c, os_index=c_os, pus=tuple(sorted(core_pus[c])), package=pkg, node=first.node, l3=l3))
    # renumber cores in order of their first PU so that logical order follows OS order
    cores.sort(key=lambda c: c.pus[0])
    renum = {c.index: i for i, c in enumerate(cores)}
    cores = [Core(index=renum[c.index], os_index=c.os_index, pus=c.pus, package=c.package, node=c.node, l3=c.l3) for c in cores]
    pus = [PU(os_index=p.os_index, core=renum[p.core], package=p.package, node=p.node, l3=p.l3) for p in pus]

    l3s = []
    for el in l3_elems:
        i = l3_index[id(el)]
        l3_pus = tuple(p.os_index for p in pus if p.l3 == i)
        l3_cores = tuple(c.index for c in cores if c.l3 == i)
        l3s.append(L3(index=i, size_bytes=_int_or_none(el.get("cache_size")), cores=l3_cores, pus=l3_pus))

    nodes = []
    for n in sorted(node_cpus):
        n_pus = tuple(sorted(node_cpus[n]))
        pkgs = {pu_by_os[p].package for p in n_pus}
        pkg = pkgs.pop() if len(pkgs) == 1 else None
        n_l3 = tuple(sorted({pu_by_os[p].l3 for p in n_pus if pu_by_os[p].l3 is not None}))
        nodes.append(NumaNode(os_index=n, memory_bytes=node_mem[n], pus=n_pus, package=pkg, l3s=n_l3))

    packages = []
    for el in pkg_elems:
        idx = pkg_index[id(el)]
        p_pus = tuple(p.os_index for p in pus if p.package == idx)
        p_cores = tuple(c.index for c in cores if c.package == idx)
        p_nodes = tuple(n.os_index for n in nodes if n.pus and set(n.pus) <= set(p_pus))
        packages.append(Package(index=idx, pus=p_pus, cores=p_cores, nodes=p_nodes))
    packages.sort(key=lambda p: p.index)

    dist, measured = _parse_distances(root, [n.os_index for n in nodes])
    return Topology(
        packages=tuple(packages), nodes=tuple(nodes), l3s=tuple(l3s), cores=tuple(cores), pus=tuple(pus),
        distances=dist, distances_measured=measured, memory_known=memory_known, source=source, info=info,
    )


def _parse_distances(root: ET.Element, node_ids: list[int]) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """NUMA distance matrix from ``<distances2 type="NUMANode">`` (hwloc 2.x), else 10/20."""
    k = len(node_ids)
    default = tuple(tuple(LOCAL_DISTANCE if i == j else REMOTE_DISTANCE for j in range(k)) for i in range(k))
    for d in root.iter("distances2"):
        if d.get("type") != "NUMANode":
            continue
        idx_el = d.find("indexes")
        if idx_el is None or d.get("indexing", "os") != "os":
            continue
        try:
            idx = [int(x) for x in (idx_el.text or "").split()]
            vals = [int(x) for v in d.findall("u64values") for x in (v.text or "").split()]
        except ValueError:
            continue
        n = len(idx)
        if len(vals) != n * n or set(idx) != set(node_ids):
            continue
        pos = {nid: i for i, nid in enumerate(idx)}
        mat = tuple(tuple(vals[pos[a] * n + pos[b]] for b in node_ids) for a in node_ids)
        return mat, True
    return default, False


# ---------------------------------------------------------------------------- loaders


def _lstopo() -> str:
    exe = shutil.which("lstopo") or shutil.which("lstopo-no-graphics")
    if exe is None:
        raise TopologyError("lstopo not found: install hwloc (Debian: apt-get install hwloc) or give an hwloc XML file")
    return exe


def _run_lstopo(args: list[str], what: str) -> str:
    try:
        proc = subprocess.run([_lstopo(), *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise TopologyError(f"lstopo took over 60 s for {what}: give an hwloc XML file instead") from None
    if proc.returncode != 0:
        err = " ".join((proc.stderr or proc.stdout or "").split())
        raise TopologyError(f"lstopo failed for {what}: {err}")
    return proc.stdout


def from_xml_file(path: str | os.PathLike) -> Topology:
    """Load an hwloc XML file (as written by ``lstopo --of xml``)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise TopologyError(f"cannot read topology file {path}: {exc.strerror}") from None
    return from_hwloc_xml(text, source=str(path))


def from_synthetic(desc: str) -> Topology:
    """Build a topology from an hwloc synthetic description such as
    ``"pack:4 numa:1 l3:1 core:4 pu:1"`` (runs ``lstopo --input DESC --of xml -``).

    Node memory: ``numa:1(memory=8GiB)``; without it :attr:`Topology.memory_known` is False.
    Raises TopologyError for a description hwloc rejects, or when lstopo is missing.
    """
    desc = " ".join(str(desc).split())
    if not desc:
        raise TopologyError("empty synthetic description: give one like 'pack:2 numa:1 l3:1 core:4 pu:1'")
    try:
        text = _run_lstopo(["--input", desc, "--of", "xml", "-"], f"synthetic {desc!r}")
    except TopologyError as exc:
        msg = str(exc)
        raise TopologyError(f"{msg}; write it like 'pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2'") from None
    topo = from_hwloc_xml(text, source=f"synthetic:{desc}")
    return topo


def from_host() -> Topology:
    """This host's topology (``lstopo --of xml``)."""
    return from_hwloc_xml(_run_lstopo(["--of", "xml", "-"], "this host"), source="host")


def load(spec: str | os.PathLike | None = None) -> Topology:
    """Load a topology: ``None`` or ``"host"`` → this host; an existing file → hwloc XML;
    anything else → a synthetic description (or a :data:`SEED_MACHINES` name)."""
    if spec is None or (isinstance(spec, str) and spec.strip() in ("", "host")):
        return from_host()
    if os.path.isfile(spec):
        return from_xml_file(spec)
    spec = str(spec)
    if spec in SEED_MACHINES:
        return from_synthetic(SEED_MACHINES[spec])
    if ":" not in spec:
        raise TopologyError(
            f"{spec!r} is neither a file nor a synthetic description: give an hwloc XML path, "
            f"'host', a machine name ({', '.join(SEED_MACHINES)}) or e.g. 'pack:2 numa:1 core:4 pu:1'")
    return from_synthetic(spec)


# ---------------------------------------------------------------------------- rendering


def _size(n: int | None) -> str:
    if n is None:
        return "? memory"
    for unit, f in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            v = n / f
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.05 else f"{v:.1f} {unit}"
    return f"{n} B"


def render_text(topo: Topology, width: int = 100) -> str:
    """A compact text drawing for ``vhpc host``: package → NUMA node (memory) → L3 → cores
    with their PU lists, then the distance matrix when there are several nodes."""
    lines = [f"host: {topo.summary()}" + (f"  [{topo.source}]" if topo.source else "")]
    mem_note = "" if topo.memory_known else ", invented"

    def core_text(cs) -> str:
        return " ".join(f"{c.index}[{format_list(c.pus)}]" for c in cs)

    def emit_cores(cores: list[Core], indent: str) -> None:
        by_l3: dict[int | None, list[Core]] = {}
        for c in cores:
            by_l3.setdefault(c.l3, []).append(c)
        for l3, cs in by_l3.items():
            head = f"{indent}L3 {l3} ({_size(topo.l3s[l3].size_bytes)}): " if l3 is not None and l3 < len(topo.l3s) else f"{indent}cores: "
            body = core_text(cs)
            wrapped = textwrap.wrap(body, width=max(20, width - len(head)))
            lines.append(head + (wrapped[0] if wrapped else ""))
            lines.extend(" " * len(head) + w for w in wrapped[1:])

    spanning = [n for n in topo.nodes if n.package is None]
    for n in spanning:
        pk = sorted({topo.pu(p).package for p in n.pus if topo.pu(p).package is not None})
        where = f"packages {format_list(pk)}" if pk else "no PUs"
        lines.append(f"node {n.os_index} ({_size(n.memory_bytes)}{mem_note}) spans {where}, PUs {format_list(n.pus)}")
    for pkg in topo.packages:
        lines.append(f"package {pkg.index}: PUs {format_list(pkg.pus)}")
        pkg_cores = [c for c in topo.cores if c.package == pkg.index]
        own_nodes = [topo.node(n) for n in pkg.nodes if topo.node(n).package == pkg.index]
        if own_nodes:
            for n in own_nodes:
                lines.append(f"  node {n.os_index} ({_size(n.memory_bytes)}{mem_note}): PUs {format_list(n.pus)}")
                emit_cores([c for c in pkg_cores if c.node == n.os_index], "    ")
            rest = [c for c in pkg_cores if c.node not in {n.os_index for n in own_nodes}]
            if rest:
                emit_cores(rest, "  ")
        else:
            emit_cores(pkg_cores, "  ")
    loose = [c for c in topo.cores if c.package is None]
    if loose:
        lines.append("outside packages:")
        emit_cores(loose, "  ")
    if len(topo.nodes) > 1:
        kind = "hwloc" if topo.distances_measured else "assumed 10/20"
        ids = topo.node_ids
        lines.append(f"distances ({kind}):")
        lines.append("      " + "".join(f"{i:>5}" for i in ids))
        for i, row in zip(ids, topo.distances):
            lines.append(f"  {i:>4}" + "".join(f"{v:>5}" for v in row))
    return "\n".join(lines)
