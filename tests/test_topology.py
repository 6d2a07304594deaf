"""Topology room: hwloc loaders (synthetic seed machines, host, XML file), lookups, rendering."""

from __future__ import annotations

import subprocess

import pytest

from vhpc import topology as T
from vhpc.topology import TopologyError

# conftest.require_tool: under CI=true (make test installs hwloc) a missing lstopo fails
pytestmark = pytest.mark.needs("lstopo")

OPTERON = "pack:4 numa:1 l3:1 core:4 pu:1"  # seed 000: 4-socket quad-core Opteron 8350
TIGERTON = "pack:4 l3:1 core:4 pu:1"  # seed 000: 4-socket quad-core Xeon E7310, UMA
NEHALEM_EP = "pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2"  # seed 000/003: 2-socket Nehalem/Westmere-EP, SMT
NEHALEM_EX = "pack:4 numa:1(memory=16GiB) l3:1 core:8 pu:2"  # seed 003: R910


def test_opteron_4x4():
    t = T.from_synthetic(OPTERON)
    assert len(t.packages) == 4 and len(t.nodes) == 4 and len(t.pus) == 16 and len(t.cores) == 16
    assert t.smt == 1
    assert t.node_ids == (0, 1, 2, 3)
    assert t.pus_of_node(2) == (8, 9, 10, 11)
    assert t.node_of_pu(13) == 3
    assert t.package_of_node(1) == 1
    assert t.nodes_of_package(3) == (3,)
    assert len(t.l3s) == 4 and t.l3s[0].pus == (0, 1, 2, 3)
    assert t.distances == ((10, 20, 20, 20), (20, 10, 20, 20), (20, 20, 10, 20), (20, 20, 20, 10))
    assert not t.distances_measured
    assert not t.memory_known  # hwloc invents 1 GiB per node without memory=
    assert t.source == f"synthetic:{OPTERON}"


def test_tigerton_uma_single_node_spans_packages():
    t = T.from_synthetic(TIGERTON)
    assert len(t.packages) == 4 and len(t.nodes) == 1 and len(t.pus) == 16
    assert t.pus_of_node(0) == tuple(range(16))
    assert t.package_of_node(0) is None
    assert t.package(2).pus == (8, 9, 10, 11)
    assert t.distances == ((10,),)


def test_nehalem_ep_smt():
    t = T.from_synthetic(NEHALEM_EP)
    assert len(t.packages) == 2 and len(t.nodes) == 2 and len(t.cores) == 8 and len(t.pus) == 16
    assert t.smt == 2
    assert t.pus_of_node(1) == tuple(range(8, 16))
    assert t.pu(9).core == 4 and t.pu(8).core == 4 and t.pu(10).core == 5
    assert t.cores[4].pus == (8, 9)
    assert t.memory_known
    assert t.node(0).memory_bytes == 8 << 30
    assert t.node(1).l3s == (1,)


def test_nehalem_ex():
    t = T.from_synthetic(NEHALEM_EX)
    assert len(t.packages) == 4 and len(t.nodes) == 4 and len(t.cores) == 32 and len(t.pus) == 64
    assert t.pus_of_node(3) == tuple(range(48, 64))
    assert t.node(2).memory_bytes == 16 << 30
    assert t.package_of_node(2) == 2


def test_seed_machine_names():
    assert T.load("opteron-8350").summary() == "4 packages, 4 NUMA nodes, 16 cores, 16 PUs"
    assert T.load("nehalem-ep").summary() == "2 packages, 2 NUMA nodes, 8 cores, 16 PUs"


def test_multiword_cpusets():
    # PUs above 31 are written as several 32-bit words in hwloc cpusets
    t = T.from_synthetic("pack:2 numa:1 core:20 pu:1")
    assert t.pus_of_node(1) == tuple(range(20, 40))
    assert t.node_of_pu(39) == 1


def test_host_loader():
    t = T.load(None)
    assert len(t.nodes) >= 1 and len(t.pus) >= 1
    assert all(p.node is not None for p in t.pus)
    assert t.source == "host"
    assert T.load("host").pu_ids == t.pu_ids


def test_xml_file_loader(tmp_path):
    xml = subprocess.run(["lstopo", "--input", NEHALEM_EP, "--of", "xml", "-"], capture_output=True, text=True,
                         check=True).stdout
    path = tmp_path / "nehalem.xml"
    path.write_text(xml)
    t = T.load(str(path))
    assert t.source == str(path)
    ref = T.from_synthetic(NEHALEM_EP)
    assert (t.packages, t.nodes, t.cores, t.pus) == (ref.packages, ref.nodes, ref.cores, ref.pus)
    assert t.memory_known


def test_xml_distances(tmp_path):
    xml = subprocess.run(["lstopo", "--input", "pack:2 numa:1 core:2 pu:1", "--of", "xml", "-"],
                         capture_output=True, text=True, check=True).stdout
    dist = ('<distances2 type="NUMANode" nbobjs="2" kind="5" indexing="os">'
            '<indexes length="4">0 1 </indexes><u64values length="12">10 21 21 10 </u64values></distances2>')
    t = T.from_hwloc_xml(xml.replace("</topology>", dist + "</topology>"))
    assert t.distances == ((10, 21), (21, 10))
    assert t.distances_measured
    assert t.distance(1, 0) == 21


def test_bad_synthetic():
    with pytest.raises(TopologyError, match="synthetic"):
        T.from_synthetic("bogus:3 pu:1")
    with pytest.raises(TopologyError, match="synthetic level 'pack:two'"):
        T.load("pack:two")
    with pytest.raises(TopologyError, match="neither a file"):
        T.load("no-such-file.xml")


def test_bad_xml():
    with pytest.raises(TopologyError, match="not valid XML"):
        T.from_hwloc_xml("<topology")
    with pytest.raises(TopologyError, match="<topology>"):
        T.from_hwloc_xml("<html/>")
    with pytest.raises(TopologyError, match="no PU"):
        T.from_hwloc_xml('<topology version="2.0"><object type="Machine" os_index="0"/></topology>')
    with pytest.raises(TopologyError, match="cannot read"):
        T.from_xml_file("/nonexistent/topo.xml")


def test_missing_lstopo(monkeypatch):
    monkeypatch.setattr(T.shutil, "which", lambda name: None)
    with pytest.raises(TopologyError, match="install hwloc"):
        T.from_synthetic(OPTERON)


def test_unknown_ids():
    t = T.from_synthetic(OPTERON)
    with pytest.raises(TopologyError, match="no NUMA node 9"):
        t.node(9)
    with pytest.raises(TopologyError, match="no PU 99"):
        t.pu(99)
    with pytest.raises(TopologyError, match="no package 4"):
        t.package(4)


def test_render_text():
    t = T.from_synthetic(OPTERON)
    text = T.render_text(t)
    for i in range(4):
        assert f"package {i}:" in text
        assert f"node {i} (" in text
    assert "L3 0 (16 MiB): 0[0] 1[1] 2[2] 3[3]" in text
    assert "distances (assumed 10/20)" in text
    smt = T.render_text(T.from_synthetic(NEHALEM_EP))
    assert "node 1 (8 GiB): PUs 8-15" in smt and "4[8-9]" in smt
    uma = T.render_text(T.from_synthetic(TIGERTON))
    assert "spans packages 0-3" in uma and "package 3:" in uma


def test_lists():
    assert T.parse_list("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert T.format_list([5, 0, 1, 2, 8]) == "0-2,5,8"
    assert T.format_list([]) == ""
    with pytest.raises(ValueError, match="bad index list"):
        T.parse_list("3-1")


def test_llc_from_hwloc_and_sysfs_agree_with_the_kernel():
    # expected value read here straight from the kernel's files (never sysconf: glibc derives
    # it from CPUID, and reported 384 MiB on a host whose sysfs and hwloc say 32 MiB)
    from pathlib import Path

    sizes = []
    for idx in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index*"):
        if (idx / "level").read_text().strip() == "3":
            text = (idx / "size").read_text().strip()
            sizes.append(int(text[:-1]) << {"K": 10, "M": 20}[text[-1]])
    hw, fs = T.from_host(), T.from_host(use_hwloc=False)
    assert fs.source == "sysfs" and any("sysfs" in n for n in fs.notes)
    assert hw.llc_bytes == fs.llc_bytes
    if sizes:
        assert hw.llc_bytes == max(sizes)
    assert (hw.pu_ids, hw.node_ids) == (fs.pu_ids, fs.node_ids)
