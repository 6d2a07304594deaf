"""Parsing what the kernel reports about placement, and comparing it with the plan."""

from vhpc import placement, topology
from vhpc.host.numa import guest_nodes, parse_numa_maps
from vhpc.environments.vm.environment import placement_mismatches
from vhpc.spec.parse import env as env_spec

NUMA_MAPS = """\
7f0000000000 bind:1 anon=65536 dirty=65536 active=0 N1=65000 N0=536 kernelpagesize_kB=4
7f1000000000 interleave:0-1 anon=1024 dirty=1024 N0=512 N1=512 kernelpagesize_kB=2048
55d000000000 default file=/usr/bin/qemu-system-x86_64 mapped=800 N0=800 kernelpagesize_kB=4
"""


def test_numa_maps_sum_pages_per_node_with_page_sizes():
    info = parse_numa_maps(NUMA_MAPS)
    # node 1: 65000 4 KiB pages + 512 2 MiB pages; node 0: 536 + 800 small, 512 huge
    assert info["node_mib"] == {0: (536 + 800) * 4 / 1024 + 512 * 2, 1: 65000 * 4 / 1024 + 512 * 2}
    assert [m["policy"] for m in info["mappings"]] == ["bind:1", "interleave:0-1"]
    assert info["mappings"][1]["huge"] is True


def test_guest_nodes_from_sysfs_including_memory_only_nodes():
    sysfs = {"/sys/devices/system/node/online": "0-2\n",
             "/sys/devices/system/node/node0/cpulist": "0-1\n",
             "/sys/devices/system/node/node0/meminfo": "Node 0 MemTotal:  131072 kB\n",
             "/sys/devices/system/node/node1/cpulist": "2-3\n",
             "/sys/devices/system/node/node1/meminfo": "Node 1 MemTotal:  262144 kB\n",
             "/sys/devices/system/node/node2/cpulist": "\n",
             "/sys/devices/system/node/node2/meminfo": "Node 2 MemTotal:   65536 kB\n"}
    assert guest_nodes(sysfs.get) == [
        {"node": 0, "cpus": "0-1", "mem_mib": 128},
        {"node": 1, "cpus": "2-3", "mem_mib": 256},
        {"node": 2, "cpus": "", "mem_mib": 64},
    ]
    assert guest_nodes({}.get) == []


def test_mismatches_name_vcpus_memory_and_guest_nodes():
    topo = topology.load("pack:2 numa:1 l3:1 core:2 pu:1")
    plan = placement.place(topo, placement.PlacementRequest(vcpus=2, memory_mib=1024,
                                                            policy="confine:1"))
    good_vcpus = [{"vcpu": 0, "allowed": [2]}, {"vcpu": 1, "allowed": [3]}]
    assert [list(p) for p in plan.vcpu_pins] == [[2], [3]]
    info = parse_numa_maps(NUMA_MAPS)
    out = placement_mismatches(plan, [{"vcpu": 0, "allowed": [0, 1, 2, 3]}, good_vcpus[1]],
                               info, [{"node": 0, "cpus": "0", "mem_mib": 512}])
    assert "vCPU 0 may run on [0, 1, 2, 3], planned [2]" in out
    assert any("MiB of guest memory on host node 0, planned 1" in m for m in out)
    assert "guest node 0 has vCPUs 0, planned 0-1" in out
    assert placement_mismatches(plan, good_vcpus, None, [{"node": 0, "cpus": "0-1", "mem_mib": 1}]) == []


def test_pin_option_is_a_map_policy():
    def text(pin, vcpus):
        return env_spec("vm", vcpus=vcpus, pin=pin).options.resolved_policy((0, 1)).text

    assert text("auto", 2) == "map:0-1=0,1"
    assert text("1,0", 2) == "map:0-1=1,0"
    assert text("none", 3) == "float"
