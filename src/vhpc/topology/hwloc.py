"""hwloc XML (v1 ``hwloc.dtd`` and v2 ``hwloc2.dtd``) → :class:`~vhpc.topology.build.Raw`.

Facts used (hwloc's XML format, as ``lstopo --of xml`` and ``--export-xml-flags 1`` write it):

- bitmaps are comma-separated 32-bit hex words, most significant first; ``0xf...f`` as the
  first word means every higher bit is set too;
- the root Machine object carries ``cpuset`` (online PUs), ``complete_cpuset`` (online and
  offline), ``allowed_cpuset``/``allowed_nodeset`` (what the exporting process may use), and in
  v1 ``online_cpuset``; v2 exports no object for an offline PU or node;
- v1 names packages ``Socket`` and caches ``Cache`` with ``depth``/``cache_type``; v1 NUMA
  nodes are parents of their packages, v2 NUMA nodes are memory children;
- memory-only nodes (KNL MCDRAM, HBM, NVDIMM, CXL) carry ``subtype`` (hwloc ≥ 2.0) or an info
  ``DAXType``; distances: ``<distances2 type="NUMANode">`` (v2) or
  ``<distances relative_depth latency_base><latency value/>`` (v1, relative values).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from vhpc.topology.build import Raw, RawNode, RawPU
from vhpc.topology.model import TopologyError

__all__ = ["parse_bitmap", "raw_from_xml", "memory_kind"]

_PACKAGE_TYPES = ("Package", "Socket")


def parse_bitmap(text: str | None) -> tuple[frozenset[int], int | None]:
    """hwloc bitmap text → (set bits, ``inf_from``): with a leading ``0xf...f`` word every bit
    from ``inf_from`` up is set as well (else None). Raises TopologyError on unreadable text."""
    if not text:
        return frozenset(), None
    words = [w.strip().removeprefix("0x") for w in text.split(",")]
    inf = words and "..." in words[0]
    if inf:
        words = words[1:]
    bits: set[int] = set()
    n = len(words)
    for i, w in enumerate(words):
        try:
            v = int(w or "0", 16)
        except ValueError:
            raise TopologyError(f"unreadable bitmap {text[:40]!r}{'...' if len(text) > 40 else ''}"
                                " in hwloc XML: export it again with lstopo --of xml") from None
        if not v:
            continue
        shift = 32 * (n - 1 - i)
        # linear in the word's length (clearing the lowest bit of a huge int one at a time
        # was quadratic: a 500 KB word took minutes)
        b = bin(v)
        top = len(b) - 3 + shift  # the bit of b[2]
        bits.update(top - j for j, c in enumerate(b[2:]) if c == "1")
    return frozenset(bits), (32 * n if inf else None)


def _within(bitmap: tuple[frozenset[int], int | None], ids) -> frozenset[int]:
    """Members of ``ids`` set in ``bitmap`` (counting its infinite tail)."""
    bits, inf = bitmap
    return frozenset(i for i in ids if i in bits or (inf is not None and i >= inf))


def memory_kind(subtype: str | None, infos: dict[str, str]) -> str:
    """Normalise hwloc's NUMANode ``subtype`` / ``DAXType`` to DRAM, HBM, NVDIMM, CXL or GPU."""
    s = " ".join(filter(None, (subtype, infos.get("DAXType"), infos.get("subtype")))).upper()
    for key, kind in (("CXL", "CXL"), ("HBM", "HBM"), ("MCDRAM", "HBM"), ("NVM", "NVDIMM"), ("PMEM", "NVDIMM"),
                      ("DAX", "NVDIMM"), ("GPU", "GPU")):
        if key in s:
            return kind
    return "DRAM"


def _int(s: str | None) -> int | None:
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


def _cache_level(el: ET.Element) -> int | None:
    """3 for L3, 2 for L2 (data or unified), else None; both v1 and v2 spellings."""
    t = el.get("type", "")
    if t in ("L3Cache", "L2Cache"):
        return int(t[1])
    if t == "Cache" and el.get("cache_type", "0") in ("0", "1"):
        return _int(el.get("depth"))
    return None


class _Walk:
    """One pass over the object tree, collecting PUs with their ancestors, nodes and caches."""

    def __init__(self) -> None:
        self.raw = Raw()
        self.dies: dict[int, int | None] = {}
        self.l2: list[int] = []
        self.node_order: list[int] = []  # NUMA node OS indexes in document (logical) order

    def walk(self, el: ET.Element, anc: dict) -> None:
        """Visit the children of ``el``; ``anc`` maps package/die/l3/core to the nearest ancestor."""
        for child in el:
            if child.tag == "info" and el.get("type") == "Machine":
                self.raw.info[child.get("name", "")] = child.get("value", "")
            if child.tag != "object":
                continue
            t, a, key = child.get("type"), anc, id(child)
            level = _cache_level(child)
            if t in _PACKAGE_TYPES:
                self.raw.package_os[key] = _int(child.get("os_index"))
                a = dict(anc, package=key)
            elif t == "Die":
                self.dies[key] = _int(child.get("os_index"))
                a = dict(anc, die=key)
            elif level == 3:
                self.raw.l3_size[key] = _int(child.get("cache_size"))
                a = dict(anc, l3=key)
            elif level == 2 and child.get("cache_size"):
                self.l2.append(int(child.get("cache_size")))
            elif t == "Core":
                a = dict(anc, core=key, core_os=_int(child.get("os_index")))
            elif t == "NUMANode":
                self._node(child)
            elif t == "PU":
                self._pu(child, anc)
            self.walk(child, a)

    def _node(self, el: ET.Element) -> None:
        os_i = _int(el.get("os_index"))
        os_i = os_i if os_i is not None else len(self.raw.nodes)
        infos = {i.get("name", ""): i.get("value", "") for i in el.findall("info")}
        self.raw.nodes.append(RawNode(os_index=os_i, memory_bytes=_int(el.get("local_memory")),
                                      cpuset=parse_bitmap(el.get("cpuset"))[0], memory_type=memory_kind(el.get("subtype"), infos)))
        self.node_order.append(os_i)

    def _pu(self, el: ET.Element, anc: dict) -> None:
        os_i = _int(el.get("os_index"))
        if os_i is None:
            raise TopologyError("a PU without os_index in hwloc XML: export it again with lstopo --of xml")
        self.raw.pus.append(RawPU(os_index=os_i, package=anc.get("package") or anc.get("die"), core=anc.get("core"),
                                  l3=anc.get("l3"), core_os=anc.get("core_os")))


def raw_from_xml(text: str, source: str = "xml") -> Raw:
    """Parse hwloc XML text (v1 or v2). Raises TopologyError (one line) when it is not an hwloc
    topology or has no PU objects."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise TopologyError(f"not valid XML ({exc}): give an hwloc XML file from lstopo --of xml") from None
    if root.tag != "topology":
        raise TopologyError(f"root element is <{root.tag}>, not <topology>: give an hwloc XML file from lstopo --of xml")
    machine = root.find("object")
    if machine is None:
        raise TopologyError("hwloc XML has no objects: give a full topology from lstopo --of xml")
    w = _Walk()
    w.walk(root, {})
    raw = w.raw
    raw.source = source
    if not raw.pus:
        raise TopologyError("hwloc XML has no PU objects: give a full topology from lstopo --of xml")
    if not raw.package_os and w.dies and any(p.package is not None for p in raw.pus):
        raw.package_os, raw.package_kind = dict(w.dies), "Die objects"
    elif not raw.package_os:
        for p in raw.pus:
            p.package = None
    sizes = [s for s in raw.l3_size.values() if s]
    raw.llc_bytes = max(sizes) if sizes else (max(w.l2) if w.l2 else None)
    _masks(raw, machine, w.node_order)
    if not raw.nodes and not raw.offline_nodes:  # hwloc 1.x UMA export: hwloc 2 inserts one node
        raw.nodes.append(RawNode(os_index=0, memory_bytes=_int(machine.get("local_memory")),
                                 cpuset=frozenset(p.os_index for p in raw.pus)))
        raw.notes.append("no NUMANode objects: the whole machine counts as NUMA node 0 (as hwloc 2 reads it)")
    synthetic = raw.info.get("Backend") == "Synthetic"
    raw.memory_known = not (synthetic and "memory=" not in raw.info.get("SyntheticDescription", ""))
    raw.distances = _distances_v2(root) or _distances_v1(machine, w.node_order)
    return raw


def _masks(raw: Raw, machine: ET.Element, node_order: list[int]) -> None:
    """Online, offline and allowed sets from the root object's bitmaps."""
    pu_ids = [p.os_index for p in raw.pus]
    node_ids = [n.os_index for n in raw.nodes]
    if machine.get("online_cpuset"):  # v1
        raw.online = _within(parse_bitmap(machine.get("online_cpuset")), pu_ids)
    complete, _ = parse_bitmap(machine.get("complete_cpuset"))
    online, _ = parse_bitmap(machine.get("online_cpuset") or machine.get("cpuset"))
    if complete and online:
        raw.offline_pus = frozenset(complete - online - set(pu_ids))
    c_nodes, _ = parse_bitmap(machine.get("complete_nodeset"))
    nodes, _ = parse_bitmap(machine.get("nodeset"))
    if c_nodes and nodes:
        raw.offline_nodes = frozenset(c_nodes - nodes - set(node_ids))
    if machine.get("allowed_cpuset"):
        raw.cpu_limits.append((_within(parse_bitmap(machine.get("allowed_cpuset")), pu_ids),
                               "outside the allowed cpuset (hwloc: disallowed)"))
    if machine.get("allowed_nodeset"):
        raw.node_limits.append((_within(parse_bitmap(machine.get("allowed_nodeset")), node_ids),
                                "outside the allowed nodeset (hwloc: disallowed)"))


def _distances_v2(root: ET.Element) -> dict[tuple[int, int], int] | None:
    """``<distances2 type="NUMANode">`` (OS-indexed) → {(a, b): distance}."""
    for d in root.iter("distances2"):
        idx_el = d.find("indexes")
        if d.get("type") != "NUMANode" or idx_el is None or d.get("indexing", "os") != "os":
            continue
        try:
            idx = [int(x) for x in (idx_el.text or "").split()]
            vals = [int(x) for v in d.findall("u64values") for x in (v.text or "").split()]
        except ValueError:
            continue
        n = len(idx)
        if len(vals) == n * n:
            return {(a, b): vals[i * n + j] for i, a in enumerate(idx) for j, b in enumerate(idx)}
    return None


def _distances_v1(machine: ET.Element, node_order: list[int]) -> dict[tuple[int, int], int] | None:
    """hwloc 1.x ``<distances nbobjs relative_depth latency_base><latency value/>`` over all NUMA
    nodes (logical order): relative latencies × ``latency_base`` (Linux SLIT 10/20 → 1.0/2.0 × 10)."""
    for d in machine.iter("distances"):
        n = _int(d.get("nbobjs"))
        try:
            vals = [float(x.get("value", "")) for x in d.findall("latency")]
            base = float(d.get("latency_base") or 10.0)
        except ValueError:
            continue
        if n != len(node_order) or len(vals) != n * n:
            continue
        return {(a, b): round(vals[i * n + j] * base) for i, a in enumerate(node_order) for j, b in enumerate(node_order)}
    return None
