"""Host topology: packages (sockets) → NUMA nodes → L3 domains → cores → PUs, from hwloc.

The topology room is data. Its loaders run ``lstopo`` (hwloc 2.x) for this host
(:func:`from_host`) or a synthetic machine (:func:`from_synthetic`), read an hwloc XML file
(v1 or v2, :func:`from_xml_file`), or read sysfs when hwloc is not installed
(:func:`from_sysfs`); :mod:`vhpc.topology.build` turns what they found into the **usable view**
(allowed, online PUs and nodes; see :mod:`vhpc.topology.model`).

Identifiers: PUs, NUMA nodes and packages are named by their **OS index** (the numbers Linux
uses: ``taskset``, ``numactl``, QEMU ``host-nodes``). Cores and L3 domains, whose OS indexes
are not unique machine-wide, are named by a **logical index** (0, 1, ... in topology order).

The seed papers' machines as synthetic descriptions (``numa:1(memory=...)`` sets node memory;
without it hwloc invents 1 GiB per node and :attr:`Topology.memory_known` is False):

- Ibrahim et al. (CCGrid 2011), 4-socket quad-core AMD Opteron 8350 (NUMA):
  ``pack:4 numa:1 l3:1 core:4 pu:1``
- Ibrahim et al. (CCGrid 2011), 4-socket quad-core Intel Xeon E7310 (UMA):
  ``pack:4 l3:1 core:4 pu:1``
- Ibrahim et al. (CCGrid 2011) and Cheng and Chen (3PGCIC 2013), 2-socket quad-core
  Nehalem-EP / Westmere-EP with SMT: ``pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2``
- Cheng and Chen (3PGCIC 2013), 4-socket Nehalem-EX R910:
  ``pack:4 numa:1(memory=16GiB) l3:1 core:8 pu:2``
"""

from __future__ import annotations

import shutil  # noqa: F401  (tests patch topology.shutil.which to simulate a host without hwloc)

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.core.cpulist import parse_cpu_list as parse_list
from vhpc.topology.live import (MAX_SYNTHETIC_PUS, SEED_MACHINES, from_host, from_hwloc_xml, from_synthetic,
                                from_sysfs, from_xml_file, load, process_limits)
from vhpc.topology.model import (LOCAL_DISTANCE, REMOTE_DISTANCE, L3, PU, Core, LeftOut, NumaNode, Package,
                                 Topology, TopologyError)
from vhpc.topology.render import render_text

__all__ = [
    "TopologyError", "PU", "Core", "L3", "NumaNode", "Package", "LeftOut", "Topology",
    "from_hwloc_xml", "from_xml_file", "from_synthetic", "from_host", "from_sysfs", "load", "process_limits",
    "render_text", "parse_list", "format_list", "SEED_MACHINES", "MAX_SYNTHETIC_PUS",
    "LOCAL_DISTANCE", "REMOTE_DISTANCE",
]
