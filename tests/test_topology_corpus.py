"""Topologies of odd real machines (tests/data/topologies/, hwloc v1 and v2 XML) and the plans
vhpc makes on them. Each file covers one class of odd topology; the expected PUs, nodes and pins
below are written out by hand from the file's structure (see the comment at its top), never
computed by the code under test. Every plan's libvirt XML is checked with virt-xml-validate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from virtxml import validate_domain

from vhpc import topology as T
from vhpc.environments.vm.backends.libvirt_xml import to_libvirt_xml
from vhpc.placement import PlacementError, PlacementRequest as R, place, plan_partition

DATA = Path(__file__).parent / "data" / "topologies"


def load(name: str) -> T.Topology:
    return T.from_xml_file(DATA / name)


def pins(p) -> list[int]:
    """One PU per vCPU (pin=pu policies)."""
    assert all(len(s) == 1 for s in p.vcpu_pins)
    return [s[0] for s in p.vcpu_pins]


def layout(p):
    return [(g.vcpus, g.host_nodes, g.policy) for g in p.guest_nodes]


def checked(topo, **kw):
    """place() with the request, validating the full libvirt XML of the result."""
    p = place(topo, R(**kw))
    validate_domain(to_libvirt_xml(p, name="corpus", full=True))
    return p


# --------------------------------------------------------------------------- restricted cpuset


def test_restricted_cpuset_counts_and_left_out():
    # 4 packages x 1 node x 4 cores x 2 PUs (package p: PUs 8p..8p+7); allowed PUs 0-7,16-23, nodes 0,2
    t = load("restricted-cpuset.xml")
    assert t.pu_ids == tuple(range(0, 8)) + tuple(range(16, 24))
    assert t.node_ids == (0, 2) and [p.index for p in t.packages] == [0, 2]
    assert (t.total_pus, t.total_nodes, t.total_packages) == (32, 4, 4)
    assert t.summary() == "2 allowed packages of 4, 2 allowed NUMA nodes of 4, 8 cores, 16 allowed PUs of 32"
    texts = [lo.text() for lo in t.left_out]
    assert "PUs 8-15,24-31: outside the allowed cpuset (hwloc: disallowed)" in texts
    assert "NUMA nodes 1,3: outside the allowed nodeset (hwloc: disallowed)" in texts
    assert t.llc_bytes == 16 << 20


def test_restricted_cpuset_plans():
    t = load("restricted-cpuset.xml")
    # compact: node 0 one thread per core first (0,2,4,6 then 1,3,5,7), then node 2 the same way
    p = checked(t, vcpus=16, memory_mib=2048, policy="compact")
    assert pins(p) == [0, 2, 4, 6, 1, 3, 5, 7, 16, 18, 20, 22, 17, 19, 21, 23]
    p = checked(t, vcpus=4, memory_mib=2048, policy="span:2", guest_numa="mirror")
    assert pins(p) == [0, 2, 16, 18]
    assert layout(p) == [((0, 1), (0,), "bind"), ((2, 3), (2,), "bind")]
    with pytest.raises(PlacementError, match=r"17 vCPUs .* has 16 allowed PUs of 32: give at most 16 vCPUs"):
        place(t, R(vcpus=17, memory_mib=1024, policy="compact"))
    with pytest.raises(PlacementError, match=r"2 allowed packages of 4: use span:1\.\.2"):
        place(t, R(vcpus=4, memory_mib=1024, policy="span:3"))
    with pytest.raises(PlacementError, match=r"NUMA node 1 is not usable: outside the allowed nodeset.*CPU nodes 0,2"):
        place(t, R(vcpus=2, memory_mib=1024, policy="confine:1"))
    with pytest.raises(PlacementError, match=r"NUMA node 3 is not usable.*bind memory to one of nodes 0,2"):
        place(t, R(vcpus=2, memory_mib=1024, policy="confine:0;mem=3"))
    with pytest.raises(PlacementError, match=r"PU 8 is not usable: outside the allowed cpuset"):
        place(t, R(vcpus=2, memory_mib=1024, policy="map:0-1=7,8"))
    vms = plan_partition(t, 1)
    assert [pins(v) for v in vms] == [[0, 2, 4, 6], [16, 18, 20, 22]]


# --------------------------------------------------------------------------- offline CPU 0 and node 0


def test_offline_cpu0_node0():
    # 2 packages x 1 node x 2 cores x 2 PUs; PU 0 and node 0 offline: PUs 1-3 have no node
    t = load("offline-cpu0-node0.xml")
    assert t.pu_ids == (1, 2, 3, 4, 5, 6, 7) and t.node_ids == (1,)
    assert [t.node_of_pu(p) for p in (1, 2, 3, 4)] == [None, None, None, 1]
    assert {lo.text() for lo in t.left_out} == {"PU 0: offline", "NUMA node 0: offline"}
    assert t.summary() == "2 packages, 1 allowed NUMA node of 2, 4 cores, 7 allowed PUs of 8"
    # compact: node 1 (4,6 then 5,7), then the node-less PUs by core (core 0 = PU 1, core 1 = PUs 2,3)
    p = checked(t, vcpus=7, memory_mib=1024, policy="compact")
    assert pins(p) == [4, 6, 5, 7, 1, 2, 3]
    assert layout(p) == [((0, 1, 2, 3, 4, 5, 6), (1,), "bind")]
    p = checked(t, vcpus=3, memory_mib=1024, policy="span:1", guest_numa="mirror")
    assert pins(p) == [1, 2, 3] and layout(p) == [((0, 1, 2), (), "default")]
    p = checked(t, vcpus=4, memory_mib=1024, policy="spread", guest_numa="mirror")
    assert pins(p) == [4, 1, 6, 2]
    assert layout(p) == [((0, 2), (1,), "bind"), ((1, 3), (), "default")]
    with pytest.raises(PlacementError, match="NUMA node 0 is not usable: offline"):
        place(t, R(vcpus=1, memory_mib=1024, policy="confine:0"))
    with pytest.raises(PlacementError, match="PU 0 is not usable: offline"):
        place(t, R(vcpus=1, memory_mib=1024, policy="map:0=0"))


# --------------------------------------------------------------------------- memory-only HBM node


def test_hbm_memory_only_node():
    # 1 package, 4 cores x 2 PUs; DRAM node 0 (4 GiB) and HBM node 1 (1 GiB) share cpuset 0-7
    t = load("hbm-memory-only.xml")
    assert t.pu_ids == tuple(range(8)) and len(t.pus) == 8  # not 16: PUs counted once
    assert t.node(0).pus == tuple(range(8)) and t.node(1).pus == ()
    assert t.node(1).memory_only and t.node(1).memory_type == "HBM" and t.node(1).near_pus == tuple(range(8))
    assert t.node(1).memory_bytes == 1 << 30
    assert t.cpu_node_ids == (0,) and t.memory_node_ids == (0, 1)
    with pytest.raises(PlacementError, match=r"9 vCPUs .* has 8 PUs: give at most 8"):
        place(t, R(vcpus=9, memory_mib=1024, policy="compact"))
    p = checked(t, vcpus=8, memory_mib=1024, policy="compact")
    assert sorted(pins(p)) == list(range(8))
    p = checked(t, vcpus=4, memory_mib=1024, policy="nodes:0,1")  # vCPUs on node 0, memory in HBM
    assert pins(p) == [0, 2, 4, 6] and layout(p) == [((0, 1, 2, 3), (1,), "bind")]
    p = checked(t, vcpus=2, memory_mib=512, policy="confine:0;mem=1")
    assert layout(p) == [((0, 1), (1,), "bind")]
    p = checked(t, vcpus=2, memory_mib=1024, policy="compact;mem=0,1", guest_numa=2)
    assert layout(p) == [((0,), (0,), "bind"), ((1,), (1,), "bind")]  # a guest cell in HBM
    with pytest.raises(PlacementError, match=r"node 1 is memory-only \(HBM.*nodes:0,1"):
        place(t, R(vcpus=2, memory_mib=1024, policy="confine:1"))
    with pytest.raises(PlacementError, match="1024 MiB|capacity|which has 1024 MiB"):
        place(t, R(vcpus=2, memory_mib=2048, policy="nodes:0,1"))


# --------------------------------------------------------------------------- no Package / no Core


def test_no_package_objects():
    # Machine -> 2 Groups, each NUMANode + 2 PUs, no Package and no Core objects
    t = load("no-package.xml")
    assert [p.pus for p in t.packages] == [(0, 1), (2, 3)]
    assert len(t.cores) == 4
    assert any("no Package objects" in n for n in t.notes) and any("no Core objects" in n for n in t.notes)
    p = checked(t, vcpus=4, memory_mib=1024, policy="span:2", guest_numa="mirror")
    assert pins(p) == [0, 1, 2, 3] and layout(p) == [((0, 1), (0,), "bind"), ((2, 3), (1,), "bind")]
    vms = plan_partition(t, 1)
    assert [pins(v) for v in vms] == [[0, 1], [2, 3]]
    with pytest.raises(PlacementError, match=r"2 packages: use span:1\.\.2"):
        place(t, R(vcpus=3, memory_mib=1024, policy="span:3"))


# --------------------------------------------------------------------------- SMT, AMD


def test_smt():
    # 2 packages x 1 node x 4 cores x 2 PUs: core k = PUs 2k, 2k+1
    t = load("smt.xml")
    assert t.smt == 2 and len(t.cores) == 8
    p = checked(t, vcpus=4, memory_mib=2048, policy="spread", guest_numa="mirror")
    assert pins(p) == [0, 8, 2, 10] and layout(p) == [((0, 2), (0,), "bind"), ((1, 3), (1,), "bind")]
    p = checked(t, vcpus=10, memory_mib=2048, policy="compact")
    assert pins(p) == [0, 2, 4, 6, 1, 3, 5, 7, 8, 10]
    assert "some vCPUs share a core (SMT siblings)" in p.notes


def test_amd_several_nodes_per_package():
    # 2 packages x 2 nodes (one per L3) x 2 cores x 2 PUs; node n = PUs 4n..4n+3; distances 10/12/32
    t = load("amd-nodes-per-package.xml")
    assert [p.nodes for p in t.packages] == [(0, 1), (2, 3)]
    assert t.distance(0, 1) == 12 and t.distance(0, 2) == 32 and t.distances_measured
    p = checked(t, vcpus=8, memory_mib=2048, policy="span:1", guest_numa="mirror")
    assert pins(p) == [0, 2, 1, 3, 4, 6, 5, 7]
    assert layout(p) == [((0, 1, 2, 3), (0,), "bind"), ((4, 5, 6, 7), (1,), "bind")]
    assert p.distances == ((10, 12), (12, 10))
    p = checked(t, vcpus=4, memory_mib=2048, policy="span:2", guest_numa="mirror")
    assert pins(p) == [0, 2, 8, 10] and p.distances == ((10, 32), (32, 10))
    with pytest.raises(PlacementError, match=r"9 vCPUs on package 0 need 9 PUs but it has 8 usable PUs: policy compact would fit"):
        place(t, R(vcpus=9, memory_mib=1024, policy="span:1"))


# --------------------------------------------------------------------------- hwloc v1


def test_hwloc_v1_with_offline_cpus():
    # v1 (Socket objects, online_cpuset 0-5): 2 sockets x 2 cores x 2 PUs; PU 6 offline (object
    # kept), PU 7 offline (no object); relative distances 1.0/2.1 x latency_base 10
    t = load("v1-offline.xml")
    assert t.pu_ids == (0, 1, 2, 3, 4, 5) and t.node_ids == (0, 1)
    assert [lo.text() for lo in t.left_out] == ["PUs 6-7: offline"]
    assert [p.pus for p in t.packages] == [(0, 1, 2, 3), (4, 5)]
    assert t.distances == ((10, 21), (21, 10)) and t.distances_measured
    p = checked(t, vcpus=6, memory_mib=1024, policy="compact", guest_numa="mirror")
    assert pins(p) == [0, 2, 1, 3, 4, 5]
    assert layout(p) == [((0, 1, 2, 3), (0,), "bind"), ((4, 5), (1,), "bind")]
    with pytest.raises(PlacementError, match="6 allowed PUs of 8"):
        place(t, R(vcpus=7, memory_mib=1024, policy="compact"))


# --------------------------------------------------------------------------- live limits, sysfs, caps


def test_process_limits_restrict_the_host_view():
    xml = (DATA / "smt.xml").read_text()
    cpu, mem = T.process_limits("Cpus_allowed_list:\t0-5\nMems_allowed_list:\t0\n", {0, 1, 2, 3})
    t = T.from_hwloc_xml(xml, cpu_limits=cpu, node_limits=mem)
    assert t.pu_ids == (0, 1, 2, 3) and t.node_ids == (0,)
    assert "PUs 4-15: outside this process's CPU affinity (sched_getaffinity)" in [lo.text() for lo in t.left_out]


def _fake_sysfs(root: Path) -> None:
    """2 CPUs online of 4 present, one package, cores 0/1, one L3 of 32 MiB, node 0 with 1 GiB."""
    cpu = root / "sys/devices/system/cpu"
    cpu.mkdir(parents=True)
    (cpu / "present").write_text("0-3\n")
    (cpu / "online").write_text("0-1\n")
    for c in range(2):
        topo = cpu / f"cpu{c}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{c}\n")
        l3 = cpu / f"cpu{c}/cache/index3"
        l3.mkdir(parents=True)
        (l3 / "level").write_text("3\n")
        (l3 / "size").write_text("32768K\n")
        (l3 / "shared_cpu_list").write_text("0-1\n")
    node = root / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    (node.parent / "online").write_text("0\n")
    (node / "cpulist").write_text("0-1\n")
    (node / "meminfo").write_text("Node 0 MemTotal:       1048576 kB\n")
    (node / "distance").write_text("10\n")


def test_sysfs_fallback(tmp_path):
    _fake_sysfs(tmp_path)
    t = T.from_sysfs(tmp_path)
    assert t.pu_ids == (0, 1) and t.total_pus == 4 and t.node(0).memory_bytes == 1 << 30
    assert t.llc_bytes == 32 << 20 and len(t.l3s) == 1 and t.l3s[0].pus == (0, 1)
    assert [lo.text() for lo in t.left_out] == ["PUs 2-3: offline"]


def test_host_without_hwloc_uses_sysfs(tmp_path):
    # a PATH without lstopo: `vhpc host` reads sysfs and says so
    env = dict(os.environ, PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "host", "--no-probe"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "lstopo is not installed: topology read from sysfs" in r.stdout
    assert "lstopo not found" not in r.stdout + r.stderr


def test_synthetic_cap_refuses_before_lstopo(monkeypatch):
    monkeypatch.setattr(T.live, "_run_lstopo", lambda *a: pytest.fail("lstopo ran"))
    with pytest.raises(T.TopologyError, match=r"1000000000 PUs, over vhpc's cap of 16384"):
        T.load("pack:1000 core:1000 pu:1000")


def test_vhpc_host_prints_allowed_view():
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "host", "--topology", str(DATA / "restricted-cpuset.xml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "2 allowed packages of 4, 2 allowed NUMA nodes of 4, 8 cores, 16 allowed PUs of 32" in r.stdout
    assert "PUs 8-15,24-31: outside the allowed cpuset" in r.stdout


@pytest.mark.parametrize("args, match", [
    (["--topology", "pack:1000 core:1000 pu:1000", "--vcpus", "2"], "cap of 16384"),
    (["--topology", str(DATA / "restricted-cpuset.xml"), "--vcpus", "17", "--policy", "compact"],
     "16 allowed PUs of 32"),
    (["--topology", str(DATA / "offline-cpu0-node0.xml"), "--vcpus", "2", "--policy", "confine:0"], "offline"),
])
def test_vhpc_plan_refusals_are_one_line(args, match):
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "plan", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("vhpc: error:") and match in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_hwloc_v1_without_numanode_objects():
    # hand-written v1 UMA file: 2 sockets x 2 cores x 1 PU, no NUMANode, Machine local_memory 8 GiB
    t = load("v1-uma-no-numanode.xml")
    assert t.node_ids == (0,) and t.node(0).pus == (0, 1, 2, 3) and t.node(0).memory_bytes == 8 << 30
    assert t.node(0).package is None and [p.pus for p in t.packages] == [(0, 1), (2, 3)]
    assert any("no NUMANode objects" in n for n in t.notes)
    p = checked(t, vcpus=2, memory_mib=1024, policy="span:2")
    assert pins(p) == [0, 2] and layout(p) == [((0, 1), (0,), "bind")]
