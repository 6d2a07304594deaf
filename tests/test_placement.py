"""Placement room. Expected vCPU→pCPU maps and memory nodes below are written out by hand from
the seed machines' topologies (see the comments), never computed by the code under test."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from virtxml import validate_domain

from vhpc import topology as T
from vhpc.host.facts import read_hugepages
from vhpc.placement import (
    GuestNode,
    Placement,
    PlacementError,
    PlacementRequest as R,
    check_hugepages,
    check_plan,
    describe,
    parse_policy,
    place,
    plan_partition,
    plan_vms,
)
from vhpc.environments.vm.backends.libvirt_xml import to_libvirt_xml
from vhpc.environments.vm.backends.qemu import qemu_numa_args

# conftest.require_tool: under CI=true (make test installs hwloc) a missing lstopo fails
pytestmark = pytest.mark.needs("lstopo")


@pytest.fixture(scope="module")
def opteron():
    # 4 packages × 1 node × 4 cores × 1 PU: node n = PUs 4n..4n+3; memory unknown (synthetic)
    return T.from_synthetic("pack:4 numa:1 l3:1 core:4 pu:1")


@pytest.fixture(scope="module")
def tigerton():
    # UMA: 4 packages × 4 cores, one node 0 over PUs 0-15
    return T.from_synthetic("pack:4 l3:1 core:4 pu:1")


@pytest.fixture(scope="module")
def nehalem():
    # 2 packages × 1 node (8 GiB) × 4 cores × 2 PUs: core k = PUs 2k, 2k+1; node 0 = PUs 0-7
    # compact order within node 0 (one PU per core first): 0 2 4 6 1 3 5 7
    return T.from_synthetic("pack:2 numa:1(memory=8GiB) l3:1 core:4 pu:2")


@pytest.fixture(scope="module")
def nehalem_ex():
    # 4 packages × 1 node (16 GiB) × 8 cores × 2 PUs: node n = PUs 16n..16n+15
    # compact order within node n: 16n+0, +2, ..., +14, then +1, +3, ..., +15
    return T.from_synthetic("pack:4 numa:1(memory=16GiB) l3:1 core:8 pu:2")


def pins(*pus):
    return tuple((p,) for p in pus)


def layout(p: Placement):
    """(vcpus, memory_mib, host_nodes, policy) per guest node."""
    return [(g.vcpus, g.memory_mib, g.host_nodes, g.policy) for g in p.guest_nodes]


# ----------------------------------------------------------------------------- Opteron (seed 000)


@pytest.mark.parametrize("k, vcpus, expected_pins, host_nodes", [
    (1, 4, pins(0, 1, 2, 3), [(0,)]),
    (2, 8, pins(0, 1, 2, 3, 4, 5, 6, 7), [(0,), (1,)]),
    (3, 12, pins(*range(12)), [(0,), (1,), (2,)]),
    (4, 16, pins(*range(16)), [(0,), (1,), (2,), (3,)]),
    (4, 4, pins(0, 4, 8, 12), [(0,), (1,), (2,), (3,)]),
])
def test_opteron_span(opteron, k, vcpus, expected_pins, host_nodes):
    p = place(opteron, R(vcpus=vcpus, memory_mib=1024 * k, policy=f"span:{k}", guest_numa="mirror"))
    assert p.vcpu_pins == expected_pins
    assert [g.host_nodes for g in p.guest_nodes] == host_nodes
    assert [g.memory_mib for g in p.guest_nodes] == [1024] * k
    assert all(g.policy == "bind" for g in p.guest_nodes)
    assert any("not checked" in n for n in p.notes)  # synthetic without memory=


def test_uneven_memory_split(opteron):
    # 4096 MiB over 3 guest nodes of 4 vCPUs each: 1365.33 → 1366/1365/1365 (largest remainder)
    p = place(opteron, R(vcpus=12, memory_mib=4096, policy="span:3", guest_numa="mirror"))
    assert [g.memory_mib for g in p.guest_nodes] == [1366, 1365, 1365]
    # 5 vCPUs over 2 sockets: 3 + 2
    p = place(opteron, R(vcpus=5, memory_mib=1000, policy="span:2", guest_numa="mirror"))
    assert p.vcpu_pins == pins(0, 1, 2, 4, 5)
    assert [g.memory_mib for g in p.guest_nodes] == [600, 400]
    assert any("divide evenly" in n for n in p.notes)


def test_opteron_span_hidden_guest_numa_interleaves(opteron):
    p = place(opteron, R(vcpus=8, memory_mib=2048, policy="span:2"))
    assert layout(p) == [(tuple(range(8)), 2048, (0, 1), "interleave")]
    assert p.distances == ((10,),)


def test_opteron_compact_spread_confine_nodes_map(opteron):
    p = place(opteron, R(vcpus=6, memory_mib=3072, policy="compact", guest_numa="mirror"))
    assert p.vcpu_pins == pins(0, 1, 2, 3, 4, 5)
    assert layout(p) == [((0, 1, 2, 3), 2048, (0,), "bind"), ((4, 5), 1024, (1,), "bind")]

    p = place(opteron, R(vcpus=6, memory_mib=6144, policy="spread", guest_numa="mirror"))
    assert p.vcpu_pins == pins(0, 4, 8, 12, 1, 5)
    assert layout(p) == [((0, 4), 2048, (0,), "bind"), ((1, 5), 2048, (1,), "bind"),
                         ((2,), 1024, (2,), "bind"), ((3,), 1024, (3,), "bind")]

    p = place(opteron, R(vcpus=4, memory_mib=1024, policy="confine:2"))
    assert p.vcpu_pins == pins(8, 9, 10, 11)
    assert layout(p) == [((0, 1, 2, 3), 1024, (2,), "bind")]

    p = place(opteron, R(vcpus=4, memory_mib=1024, policy="nodes:0,1", guest_numa="mirror"))
    assert p.vcpu_pins == pins(0, 1, 4, 5)
    assert layout(p) == [((0, 1), 512, (0,), "bind"), ((2, 3), 512, (1,), "bind")]

    p = place(opteron, R(vcpus=4, memory_mib=1024, policy="map:0-3=0,4,8,12;mem=3"))
    assert p.vcpu_pins == pins(0, 4, 8, 12)
    assert layout(p) == [((0, 1, 2, 3), 1024, (3,), "bind")]


def test_opteron_float(opteron):
    p = place(opteron, R(vcpus=16, memory_mib=4096, policy="float"))
    assert p.vcpu_pins == () and not p.pinned
    assert layout(p) == [(tuple(range(16)), 4096, (), "default")]
    assert qemu_numa_args(p) == []


def test_opteron_vm_index_shares(opteron):
    # two 2-vCPU VMs confined to node 1 take PUs 4,5 and 6,7
    a = place(opteron, R(vcpus=2, memory_mib=512, policy="confine:1", vm_index=0, vms=2))
    b = place(opteron, R(vcpus=2, memory_mib=512, policy="confine:1", vm_index=1, vms=2))
    assert (a.vcpu_pins, b.vcpu_pins) == (pins(4, 5), pins(6, 7))
    # spread, VM 1 of 2 with 4 vCPUs: round-robin order 0 4 8 12 1 5 9 13 ... → 1 5 9 13
    c = place(opteron, R(vcpus=4, memory_mib=512, policy="spread", vm_index=1, vms=2))
    assert c.vcpu_pins == pins(1, 5, 9, 13)


def test_partition_seed000(opteron):
    # Fig. 8/11: 2 VMs per socket, 2 vCPUs each
    ps = plan_partition(opteron, vms_per_socket=2, memory_mib=512)
    assert [p.vcpu_pins for p in ps] == [pins(0, 1), pins(2, 3), pins(4, 5), pins(6, 7),
                                         pins(8, 9), pins(10, 11), pins(12, 13), pins(14, 15)]
    assert [p.host_nodes for p in ps] == [(0,), (0,), (1,), (1,), (2,), (2,), (3,), (3,)]
    # Fig. 11 "2 VMs": each spans two sockets
    ps = plan_partition(opteron, vms_per_socket=1, sockets_per_vm=2, memory_mib=1024, guest_numa="mirror")
    assert [p.vcpu_pins for p in ps] == [pins(0, 1, 2, 3, 4, 5, 6, 7), pins(8, 9, 10, 11, 12, 13, 14, 15)]
    assert [layout(p) for p in ps] == [
        [((0, 1, 2, 3), 512, (0,), "bind"), ((4, 5, 6, 7), 512, (1,), "bind")],
        [((0, 1, 2, 3), 512, (2,), "bind"), ((4, 5, 6, 7), 512, (3,), "bind")]]
    # one VM per socket, 4 vCPUs each (default: all cores of the socket)
    ps = plan_partition(opteron, vms_per_socket=1, memory_mib=1024)
    assert [p.vcpu_pins for p in ps] == [pins(0, 1, 2, 3), pins(4, 5, 6, 7), pins(8, 9, 10, 11), pins(12, 13, 14, 15)]


# ----------------------------------------------------------------------------- Tigerton (UMA)


def test_tigerton_uma(tigerton):
    p = place(tigerton, R(vcpus=8, memory_mib=1024, policy="span:2", guest_numa="mirror"))
    assert p.vcpu_pins == pins(0, 1, 2, 3, 4, 5, 6, 7)
    assert layout(p) == [(tuple(range(8)), 1024, (0,), "bind")]  # one host node
    p = place(tigerton, R(vcpus=4, memory_mib=1024, policy="spread"))
    assert p.vcpu_pins == pins(0, 1, 2, 3)
    ps = plan_partition(tigerton, vms_per_socket=1, memory_mib=256)
    assert [p.vcpu_pins for p in ps] == [pins(0, 1, 2, 3), pins(4, 5, 6, 7), pins(8, 9, 10, 11), pins(12, 13, 14, 15)]
    with pytest.raises(PlacementError, match="no NUMA node 1"):
        place(tigerton, R(vcpus=4, memory_mib=1024, policy="confine:1"))


# ----------------------------------------------------------------------------- Nehalem-EP (SMT)


def test_nehalem_ep_policies(nehalem):
    p = place(nehalem, R(vcpus=4, memory_mib=2048, policy="span:1"))
    assert p.vcpu_pins == pins(0, 2, 4, 6)
    assert layout(p) == [((0, 1, 2, 3), 2048, (0,), "bind")]

    p = place(nehalem, R(vcpus=8, memory_mib=4096, policy="span:2", guest_numa="mirror"))
    assert p.vcpu_pins == pins(0, 2, 4, 6, 8, 10, 12, 14)
    assert layout(p) == [((0, 1, 2, 3), 2048, (0,), "bind"), ((4, 5, 6, 7), 2048, (1,), "bind")]

    p = place(nehalem, R(vcpus=8, memory_mib=1024, policy="compact"))
    assert p.vcpu_pins == pins(0, 2, 4, 6, 1, 3, 5, 7)
    assert any("SMT" in n for n in p.notes)

    p = place(nehalem, R(vcpus=10, memory_mib=1024, policy="compact", guest_numa="mirror"))
    assert p.vcpu_pins == pins(0, 2, 4, 6, 1, 3, 5, 7, 8, 10)
    assert [g.vcpus for g in p.guest_nodes] == [tuple(range(8)), (8, 9)]
    assert [g.memory_mib for g in p.guest_nodes] == [819, 205]

    p = place(nehalem, R(vcpus=4, memory_mib=1024, policy="spread"))
    assert p.vcpu_pins == pins(0, 8, 2, 10)

    p = place(nehalem, R(vcpus=4, memory_mib=1024, policy="confine:1"))
    assert p.vcpu_pins == pins(8, 10, 12, 14)

    p = place(nehalem, R(vcpus=4, memory_mib=1024, policy="nodes:0,1"))
    assert p.vcpu_pins == pins(0, 2, 8, 10)
    assert layout(p) == [((0, 1, 2, 3), 1024, (0, 1), "interleave")]

    p = place(nehalem, R(vcpus=2, memory_mib=1024, policy="map:0-1=n1;mem=0"))
    assert p.vcpu_pins == (tuple(range(8, 16)), tuple(range(8, 16)))
    assert layout(p) == [((0, 1), 1024, (0,), "bind")]

    p = place(nehalem, R(vcpus=2, memory_mib=1024, policy="confine:0;pin=node"))
    assert p.vcpu_pins == (tuple(range(8)), tuple(range(8)))


def test_seed003_fig5_binding_cases(nehalem):
    # Case 0: VM-A vCPUs on socket 0 / memory node 0, VM-B on socket 1 / node 1
    a, b = plan_vms(nehalem, [R(vcpus=2, memory_mib=2048, policy="confine:0"),
                              R(vcpus=2, memory_mib=2048, policy="confine:1")])
    assert (a.vcpu_pins, a.host_nodes, b.vcpu_pins, b.host_nodes) == (pins(0, 2), (0,), pins(8, 10), (1,))
    # remote memory for VM-A, both memories on node 1
    a, b = plan_vms(nehalem, [R(vcpus=2, memory_mib=2048, policy="confine:0;mem=1"),
                              R(vcpus=2, memory_mib=2048, policy="confine:1")])
    assert (a.vcpu_pins, a.host_nodes, b.vcpu_pins, b.host_nodes) == (pins(0, 2), (1,), pins(8, 10), (1,))
    # both VMs on socket 0 (shared LLC), disjoint PUs through vm_index
    a, b = plan_vms(nehalem, [R(vcpus=2, memory_mib=2048, policy="confine:0", vm_index=0, vms=2),
                              R(vcpus=2, memory_mib=2048, policy="confine:0;mem=1", vm_index=1, vms=2)])
    assert (a.vcpu_pins, a.host_nodes, b.vcpu_pins, b.host_nodes) == (pins(0, 2), (0,), pins(4, 6), (1,))
    # the same written as explicit maps
    a = place(nehalem, R(vcpus=2, memory_mib=2048, policy="map:0-1=4,6;mem=1"))
    assert (a.vcpu_pins, a.host_nodes) == (pins(4, 6), (1,))


# ----------------------------------------------------------------------------- Nehalem-EX (seed 003)


@pytest.mark.parametrize("k, vcpus, expected", [
    (1, 8, pins(0, 2, 4, 6, 8, 10, 12, 14)),
    (2, 8, pins(0, 2, 4, 6, 16, 18, 20, 22)),
    (3, 9, pins(0, 2, 4, 16, 18, 20, 32, 34, 36)),
    (4, 16, pins(0, 2, 4, 6, 16, 18, 20, 22, 32, 34, 36, 38, 48, 50, 52, 54)),
])
def test_nehalem_ex_span(nehalem_ex, k, vcpus, expected):
    p = place(nehalem_ex, R(vcpus=vcpus, memory_mib=3072 * k, policy=f"span:{k}", guest_numa="mirror"))
    assert p.vcpu_pins == expected
    assert [g.host_nodes for g in p.guest_nodes] == [(n,) for n in range(k)]
    assert [g.memory_mib for g in p.guest_nodes] == [3072] * k


def test_seed003_fig4_vcpus_on_1_2_4_nodes(nehalem_ex):
    # 4-vCPU VM; 1-node case binds memory, 2- and 4-node cases leave it to Linux
    one = place(nehalem_ex, R(vcpus=4, memory_mib=16384, policy="nodes:0"))
    two = place(nehalem_ex, R(vcpus=4, memory_mib=16384, policy="nodes:0,1;mem=local"))
    four = place(nehalem_ex, R(vcpus=4, memory_mib=16384, policy="nodes:0,1,2,3;mem=local"))
    assert one.vcpu_pins == pins(0, 2, 4, 6) and one.host_nodes == (0,)
    assert two.vcpu_pins == pins(0, 2, 16, 18) and two.host_nodes == ()
    assert four.vcpu_pins == pins(0, 16, 32, 48) and four.host_nodes == ()
    assert layout(four) == [((0, 1, 2, 3), 16384, (), "default")]
    assert qemu_numa_args(four) == []
    p = place(nehalem_ex, R(vcpus=4, memory_mib=1024, policy="compact"))
    assert p.vcpu_pins == pins(0, 2, 4, 6)
    p = place(nehalem_ex, R(vcpus=4, memory_mib=1024, policy="spread"))
    assert p.vcpu_pins == pins(0, 16, 32, 48)
    p = place(nehalem_ex, R(vcpus=2, memory_mib=1024, policy="confine:3"))
    assert p.vcpu_pins == pins(48, 50)


def test_guest_numa_int_and_distances(nehalem_ex):
    p = place(nehalem_ex, R(vcpus=4, memory_mib=2048, policy="confine:0", guest_numa=2))
    assert layout(p) == [((0, 1), 1024, (0,), "bind"), ((2, 3), 1024, (0,), "bind")]
    assert p.distances == ((10, 11), (11, 10))  # same host node: 11, Linux rejects 10 off the diagonal
    p = place(nehalem_ex, R(vcpus=4, memory_mib=2048, policy="span:2", guest_numa="2"))
    assert p.distances == ((10, 20), (20, 10))


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("policy, vcpus, match", [
    ("compact", 17, "need 17 PUs but it has 16"),
    ("spread", 17, "need 17 PUs"),
    ("confine:0", 5, "need 5 PUs but it has 4"),
    ("nodes:0,1", 10, "need 5 PUs"),
    ("span:5", 4, "has 4 package"),
    ("span:4", 2, "at least 4 vCPUs"),
    ("confine:7", 2, "no NUMA node 7"),
    ("nodes:0,9", 2, "no NUMA node 9"),
    ("packages:6", 2, "no package 6"),
    ("confine:0;mem=5", 2, "no NUMA node 5"),
    ("map:0-1=n9", 2, "no NUMA node 9"),
    ("map:0-1=40,41", 2, "no PU 40-41"),
    ("map:0=0", 2, "vCPUs 1 are not mapped"),
    ("map:0-1=0-1,1=3", 2, "vCPU 1 is mapped twice"),
    ("map:0-3=0-3", 2, "vCPU 2 does not exist"),
    ("float;mem=bind", 2, "give nodes"),
    ("span:2;mem=preferred", 2, "preferred needs one"),
    ("confine:0;mem=0,1,2", 2, None),  # hidden guest: bind to the list is fine
])
def test_policy_errors(opteron, policy, vcpus, match):
    req = R(vcpus=vcpus, memory_mib=1024, policy=policy)
    if match is None:
        assert place(opteron, req).host_nodes == (0, 1, 2)
        return
    with pytest.raises(PlacementError, match=match):
        place(opteron, req)


@pytest.mark.parametrize("policy", [
    "bogus", "", "span:x", "span:0", "compact:3", "confine:", "nodes:", "nodes:0,0", "map:", "map:0-3",
    "map:a=1", "confine:0;mem=wat", "confine:0;pin=core", "confine:0;foo=1", "confine:0;mem", "float;pin=node",
    "map:0=n1,3", "nodes:0,x",
])
def test_parse_errors(policy):
    with pytest.raises(PlacementError, match=re.escape(f"policy '{policy.split(':')[0]}") if policy
                       else "empty policy"):
        parse_policy(policy)


def test_parse_policy_forms():
    p = parse_policy(" nodes:1,0 ; mem=interleave:0-3 ; pin=node ")
    assert (p.name, p.targets, p.mem, p.mem_nodes, p.pin) == ("nodes", (1, 0), "interleave", (0, 1, 2, 3), "node")
    p = parse_policy("map:0-1=0,4,2=n1;mem=1,0")
    assert p.vcpu_map == (((0, 1), (0, 4), None), ((2,), (), 1))
    assert (p.mem, p.mem_nodes) == ("bind", (1, 0))


def test_request_errors(opteron, nehalem):
    with pytest.raises(PlacementError, match="at least 1 vCPU"):
        place(opteron, R(vcpus=0, memory_mib=1024))
    with pytest.raises(PlacementError, match="memory in MiB"):
        place(opteron, R(vcpus=1, memory_mib=0))
    with pytest.raises(PlacementError, match="backing"):
        place(opteron, R(vcpus=1, memory_mib=1024, backing="64k"))
    with pytest.raises(PlacementError, match="vm_index"):
        place(opteron, R(vcpus=1, memory_mib=1024, policy="compact", vm_index=2, vms=2))
    with pytest.raises(PlacementError, match="guest_numa=5"):
        place(opteron, R(vcpus=4, memory_mib=1024, policy="compact", guest_numa=5))
    with pytest.raises(PlacementError, match="guest_numa='weird'"):
        place(opteron, R(vcpus=4, memory_mib=1024, policy="compact", guest_numa="weird"))
    with pytest.raises(PlacementError, match="3 VMs × 2 vCPUs on node 0 need 6 PUs"):
        place(opteron, R(vcpus=2, memory_mib=1024, policy="confine:0", vm_index=0, vms=3))
    with pytest.raises(PlacementError, match="memory nodes for 2 guest nodes"):
        place(opteron, R(vcpus=8, memory_mib=1024, policy="span:2;mem=0,1,2", guest_numa="mirror"))


def test_memory_capacity(nehalem, opteron):
    with pytest.raises(PlacementError, match="10240 MiB on host node 0, which has 8192 MiB"):
        place(nehalem, R(vcpus=2, memory_mib=10240, policy="confine:0"))
    # split over two nodes fits, and check_memory=False skips the check with a note
    assert place(nehalem, R(vcpus=8, memory_mib=10240, policy="span:2", guest_numa="mirror"))
    p = place(nehalem, R(vcpus=2, memory_mib=10240, policy="confine:0", check_memory=False))
    assert any("check_memory=False" in n for n in p.notes)
    # synthetic topology without memory: no check, but a note
    p = place(opteron, R(vcpus=2, memory_mib=1 << 20, policy="confine:0"))
    assert any("topology memory unknown" in n for n in p.notes)
    # several VMs on one node add up
    with pytest.raises(PlacementError, match="plan of 2 VMs puts 10240 MiB on host node 0"):
        plan_vms(nehalem, [R(vcpus=2, memory_mib=5120, policy="confine:0", vm_index=i, vms=2) for i in range(2)])


def test_hugepage_granularity(nehalem):
    with pytest.raises(PlacementError, match="not a multiple of the 1g page.*use 1024 or 2048 MiB"):
        place(nehalem, R(vcpus=2, memory_mib=1536, policy="confine:0", backing="1g"))
    with pytest.raises(PlacementError, match="2m page"):
        place(nehalem, R(vcpus=2, memory_mib=1025, policy="confine:0", backing="2m"))
    with pytest.raises(PlacementError, match="without a whole 1g page: give at least 2048 MiB"):
        place(nehalem, R(vcpus=8, memory_mib=1024, policy="span:2", guest_numa="mirror", backing="1g"))
    p = place(nehalem, R(vcpus=8, memory_mib=3072, policy="span:2", guest_numa="mirror", backing="1g"))
    assert [g.memory_mib for g in p.guest_nodes] == [2048, 1024]
    p = place(nehalem, R(vcpus=8, memory_mib=1026, policy="span:2", guest_numa="mirror", backing="2m"))
    assert [g.memory_mib for g in p.guest_nodes] == [514, 512]


def test_exclusive_overlap(opteron):
    same = [R(vcpus=2, memory_mib=512, policy="confine:0"), R(vcpus=2, memory_mib=512, policy="confine:0")]
    with pytest.raises(PlacementError, match="VMs 0 and 1 share pCPUs 0-1"):
        plan_vms(opteron, same)
    shared = [R(vcpus=2, memory_mib=512, policy="confine:0", exclusive=False),
              R(vcpus=2, memory_mib=512, policy="confine:0", exclusive=False)]
    assert len(plan_vms(opteron, shared)) == 2
    with pytest.raises(PlacementError, match="VM 1 floats"):
        plan_vms(opteron, [R(vcpus=2, memory_mib=512, policy="confine:0"), R(vcpus=2, memory_mib=512)])
    node = [R(vcpus=2, memory_mib=512, policy="confine:0;pin=node", vm_index=0, vms=2),
            R(vcpus=2, memory_mib=512, policy="confine:0;pin=node", vm_index=1, vms=2)]
    with pytest.raises(PlacementError, match="share pCPUs 0-3"):
        plan_vms(opteron, node)
    check_plan([])


def test_partition_errors(opteron):
    with pytest.raises(PlacementError, match="divide"):
        plan_partition(opteron, vms_per_socket=1, sockets_per_vm=3)
    with pytest.raises(PlacementError, match="not both"):
        plan_partition(opteron, vms_per_socket=2, sockets_per_vm=2)
    with pytest.raises(PlacementError, match="at most 4 VMs per socket"):
        plan_partition(opteron, vms_per_socket=5)
    with pytest.raises(PlacementError, match="need 6 PUs"):
        plan_partition(opteron, vms_per_socket=2, vcpus_per_vm=3)


# ----------------------------------------------------------------------------- hugepages


def test_read_hugepages(tmp_path):
    for node, sizes in {0: {2048: 512, 1048576: 0}, 1: {2048: 100}}.items():
        for kib, free in sizes.items():
            d = tmp_path / "devices/system/node" / f"node{node}" / "hugepages" / f"hugepages-{kib}kB"
            d.mkdir(parents=True)
            (d / "free_hugepages").write_text(f"{free}\n")
            (d / "nr_hugepages").write_text(f"{free}\n")
    (tmp_path / "devices/system/node/possible").write_text("0-1\n")
    assert read_hugepages(tmp_path) == {0: {2048: 512, 1048576: 0}, 1: {2048: 100}}
    assert read_hugepages(tmp_path / "missing") == {}


def test_check_hugepages(nehalem):
    p = place(nehalem, R(vcpus=8, memory_mib=2048, policy="span:2", guest_numa="mirror", backing="2m"))
    check_hugepages(p, {0: {2048: 512}, 1: {2048: 512}})  # 1024 MiB = 512 pages per node
    with pytest.raises(PlacementError, match="host node 1 has 100 free 2 MiB hugepages, the placement needs 512: "
                                             "reserve 412 more in /sys/devices/system/node/node1/hugepages/"
                                             "hugepages-2048kB/nr_hugepages"):
        check_hugepages(p, {0: {2048: 512}, 1: {2048: 100}})
    with pytest.raises(PlacementError, match="host node 0 has 0 free"):
        check_hugepages(p, {})
    # two VMs of one plan add up
    with pytest.raises(PlacementError, match="needs 1024"):
        check_hugepages([p, p], {0: {2048: 600}, 1: {2048: 2000}})
    g = place(nehalem, R(vcpus=2, memory_mib=2048, policy="confine:0", backing="1g"))
    with pytest.raises(PlacementError, match="1 GiB hugepages"):
        check_hugepages(g, {0: {1048576: 1}})
    check_hugepages(place(nehalem, R(vcpus=2, memory_mib=2048, policy="confine:0")), {})  # 4k: nothing needed
    f = place(nehalem, R(vcpus=2, memory_mib=2048, policy="float", backing="2m"))
    check_hugepages(f, {0: {2048: 600}, 1: {2048: 500}})
    with pytest.raises(PlacementError, match="unbound guest memory needs 1024"):
        check_hugepages(f, {0: {2048: 600}})


# ----------------------------------------------------------------------------- renderers


def test_qemu_args_two_node_guest(nehalem):
    p = place(nehalem, R(vcpus=8, memory_mib=4096, policy="span:2", guest_numa="mirror"))
    assert qemu_numa_args(p) == [
        "-object", "memory-backend-ram,id=m0,size=2048M,host-nodes=0,policy=bind",
        "-object", "memory-backend-ram,id=m1,size=2048M,host-nodes=1,policy=bind",
        "-numa", "node,nodeid=0,cpus=0-3,memdev=m0",
        "-numa", "node,nodeid=1,cpus=4-7,memdev=m1",
        "-numa", "dist,src=0,dst=1,val=20",
        "-numa", "dist,src=1,dst=0,val=20",
    ]


def test_qemu_args_hugepages_noncontiguous(nehalem, opteron):
    p = place(nehalem, R(vcpus=4, memory_mib=1024, policy="spread", guest_numa="mirror", backing="2m"))
    assert qemu_numa_args(p) == [
        "-object", "memory-backend-memfd,id=m0,size=512M,hugetlb=on,hugetlbsize=2M,prealloc=on,host-nodes=0,policy=bind",
        "-object", "memory-backend-memfd,id=m1,size=512M,hugetlb=on,hugetlbsize=2M,prealloc=on,host-nodes=1,policy=bind",
        "-numa", "node,nodeid=0,cpus=0,cpus=2,memdev=m0",
        "-numa", "node,nodeid=1,cpus=1,cpus=3,memdev=m1",
        "-numa", "dist,src=0,dst=1,val=20",
        "-numa", "dist,src=1,dst=0,val=20",
    ]
    q = place(opteron, R(vcpus=4, memory_mib=1024, policy="map:0-3=0,4,8,12;mem=interleave:0,2-3"))
    assert qemu_numa_args(q) == [
        "-object", "memory-backend-ram,id=m0,size=1024M,host-nodes=0,host-nodes=2-3,policy=interleave",
        "-numa", "node,nodeid=0,cpus=0-3,memdev=m0",
    ]
    assert qemu_numa_args(place(opteron, R(vcpus=2, memory_mib=1024, policy="confine:1;mem=local"))) == []


def test_libvirt_xml(nehalem):
    p = place(nehalem, R(vcpus=4, memory_mib=2048, policy="spread", guest_numa="mirror", backing="2m"))
    dom = ET.fromstring(to_libvirt_xml(p))
    assert dom.tag == "domain"
    assert dom.find("vcpu").text == "4"
    assert [(e.get("vcpu"), e.get("cpuset")) for e in dom.findall("cputune/vcpupin")] == [
        ("0", "0"), ("1", "8"), ("2", "2"), ("3", "10")]
    assert dom.find("numatune/memory").attrib == {"mode": "strict", "nodeset": "0-1"}
    assert [e.attrib for e in dom.findall("numatune/memnode")] == [
        {"cellid": "0", "mode": "strict", "nodeset": "0"}, {"cellid": "1", "mode": "strict", "nodeset": "1"}]
    cells = dom.findall("cpu/numa/cell")
    assert [(c.get("id"), c.get("cpus"), c.get("memory"), c.get("unit")) for c in cells] == [
        ("0", "0,2", "1024", "MiB"), ("1", "1,3", "1024", "MiB")]
    assert [(s.get("id"), s.get("value")) for s in cells[1].findall("distances/sibling")] == [("0", "20"), ("1", "10")]
    assert dom.find("memoryBacking/hugepages/page").attrib == {"size": "2048", "unit": "KiB", "nodeset": "0-1"}

    f = ET.fromstring(to_libvirt_xml(place(nehalem, R(vcpus=2, memory_mib=512))))
    assert f.find("cputune") is None and f.find("numatune") is None and f.find("cpu") is None


@pytest.mark.parametrize("policy, guest_numa, backing", [
    ("span:2", "mirror", "2m"), ("spread;mem=interleave", "hidden", "1g"), ("float", 2, "4k"),
    ("confine:1;mem=preferred", "hidden", "4k"), ("compact", "hidden", "4k"),
    ("span:2;mem=preferred:1,0", "mirror", "4k"),
])
def test_libvirt_full_validates(tmp_path, nehalem, policy, guest_numa, backing):
    """libvirt's schema accepts the full domain, and it says what the placement holds: each
    vCPU's pins, the guest's NUMA cells and their memory, the hugepage backing."""
    from vhpc.core.cpulist import parse_cpu_list

    p = place(nehalem, R(vcpus=4, memory_mib=4096, policy=policy, guest_numa=guest_numa, backing=backing))
    xml = to_libvirt_xml(p, name="vhpc-test", full=True)
    validate_domain(xml)  # fails under CI=true if missing
    dom = ET.fromstring(xml)
    pins = {int(v.get("vcpu")): set(parse_cpu_list(v.get("cpuset")))
            for v in dom.findall("cputune/vcpupin")}
    assert pins == {i: set(cpus) for i, cpus in enumerate(p.vcpu_pins)}  # float: none
    cells = dom.findall("cpu/numa/cell")
    assert len(cells) == len(p.guest_nodes)
    kib = {"KiB": 1, "MiB": 1024, "GiB": 1024 ** 2}
    assert sum(int(c.get("memory")) * kib[c.get("unit", "KiB")] for c in cells) == 4096 * 1024
    page = dom.find("memoryBacking/hugepages/page")
    assert (page is None) == (backing == "4k")
    if page is not None:
        assert int(page.get("size")) == p.hugepage_kib and page.get("unit") == "KiB"


def test_describe_and_to_dict(opteron):
    p = place(opteron, R(vcpus=8, memory_mib=2048, policy="span:2", guest_numa="mirror"))
    assert describe(p) == ("span:2: vCPU 0-7→PU 0-7; guest node 0: 1024 MiB bind host 0, "
                           "guest node 1: 1024 MiB bind host 1")
    d = json.loads(json.dumps(p.to_dict()))
    assert d["vcpu_pins"][7] == [7] and d["guest_nodes"][1]["host_nodes"] == [1]
    assert isinstance(p.guest_nodes[0], GuestNode)


def test_libvirt_mixed_preferred_top_level(nehalem):
    p = place(nehalem, R(vcpus=8, memory_mib=2048, policy="span:2;mem=preferred:1,0", guest_numa="mirror"))
    assert layout(p) == [((0, 1, 2, 3), 1024, (1,), "preferred"), ((4, 5, 6, 7), 1024, (0,), "preferred")]
    dom = ET.fromstring(to_libvirt_xml(p))
    assert dom.find("numatune/memory").attrib == {"mode": "restrictive", "nodeset": "0-1"}
    assert [e.get("mode") for e in dom.findall("numatune/memnode")] == ["preferred", "preferred"]


def test_pin_map(nehalem):
    p = place(nehalem, R(vcpus=3, memory_mib=512, policy="spread"))
    assert p.pin_map() == {0: {0}, 1: {8}, 2: {2}}
    assert place(nehalem, R(vcpus=3, memory_mib=512)).pin_map() == {}
