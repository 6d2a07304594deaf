"""Study templates build the seed experiments' campaigns for a topology, or say why not."""

import pytest

from vhpc.campaign import studies
from vhpc import topology

OPTERON = "pack:4 numa:1 l3:1 core:4 pu:1"


def envs(spec):
    return [(e.name, e.options.given()) for e in spec.environments]


def test_socket_span_on_the_seed_opteron():
    s = studies.build("socket-span", topology.load(OPTERON), [])
    assert envs(s) == [
        ("native-1s", {"cpus": "0-3"}), ("vm-span1", {"vcpus": 4, "policy": "span:1", "numa": "mirror"}),
        ("native-2s", {"cpus": "0-7"}), ("vm-span2", {"vcpus": 8, "policy": "span:2", "numa": "mirror"}),
        ("native-3s", {"cpus": "0-11"}), ("vm-span3", {"vcpus": 12, "policy": "span:3", "numa": "mirror"}),
        ("native-4s", {"cpus": "0-15"}), ("vm-span4", {"vcpus": 16, "policy": "span:4", "numa": "mirror"}),
    ]
    assert s.baseline == "native-1s"


def test_vcpu_mapping_uses_1_2_4_nodes():
    s = studies.build("vcpu-mapping", topology.load(OPTERON), ["stream"])
    assert [e.options.given().get("policy") for e in s.environments] == [
        None, "nodes:0", "nodes:0,1;mem=local", "nodes:0,1,2,3;mem=local"]


def test_memory_profile_binds_memory_remote_natively_or_in_a_guest():
    s = studies.build("memory-profile", topology.load("pack:2 numa:1 l3:1 core:2 pu:1"), ["stream"])
    assert envs(s) == [("local", {"nodes": "0"}), ("remote", {"nodes": "0", "membind": "1"})]
    g = studies.build("memory-profile", topology.load("pack:1 numa:1 core:2 pu:1"), ["stream"], in_vm=True)
    assert [e.options.given()["guest_bind"] for e in g.environments] == ["0:0", "0:1"]


def test_single_node_hosts_get_a_clear_message():
    one = topology.load("pack:1 numa:1 core:2 pu:1")
    with pytest.raises(studies.StudyError, match="needs at least 2 NUMA nodes.*--in-vm"):
        studies.build("memory-profile", one, [])
    with pytest.raises(studies.StudyError, match="unknown study"):
        studies.build("nope", one, [])


def test_cold_warm_study_uses_the_cold_warm_protocol():
    s = studies.build("cold-warm", topology.load(OPTERON), [])
    assert s.protocol == "cold-warm" and s.warmup == 0


def test_message_size_and_collective_studies_use_the_mpi_benchmarks():
    two = topology.load("pack:1 numa:1 core:2 pu:1")
    p2p = studies.build("mpi-p2p", two, [])
    assert [b.name for b in p2p.benchmarks] == ["osu-latency", "osu-bw", "osu-bibw", "osu-multi-lat"]
    coll = studies.build("collectives", topology.load("pack:1 numa:1 core:4 pu:1"), [])
    assert {(b.params["op"], b.params["ranks"]) for b in coll.benchmarks} == {
        (op, r) for op in ("barrier", "allreduce", "bcast", "alltoall") for r in (2, 4)}
    assert coll.environments[1].options.given() == {"vcpus": 4}


def test_paging_study_compares_4k_and_2m_backed_guests_and_passes_host_knobs():
    s = studies.build("paging", topology.load(OPTERON), [], host_knobs=["hugepages_2m=1024"])
    assert [(e.name, e.options.given().get("backing")) for e in s.environments] == [
        ("native", None), ("vm-4k", "4k"), ("vm-2m", "2m")]
    assert s.host_knobs == {"hugepages_2m": "1024"}


def test_every_study_builds_on_a_multi_socket_host():
    for name in studies.STUDIES:
        assert studies.build(name, topology.load("pack:2 numa:1 l3:1 core:2 pu:1"), []).benchmarks


def test_co_run_study_places_the_corunner_on_the_same_and_the_other_node():
    s = studies.build("co-run", topology.load("pack:2 numa:1 l3:1 core:4 pu:1"), ["stream"])
    envs = {e.name: e.options.given() for e in s.environments}
    assert envs["alone"] == {"vcpus": 2, "policy": "map:0-1=0,1"}
    assert envs["co-high-same"]["corunner_policy"] == "map:0-1=2,3"
    assert envs["co-high-other"]["corunner_policy"] == "map:0-1=4,5"
    assert {o.get("corunner") for o in envs.values()} == {None, "low", "medium", "high"}
    assert s.baseline == "alone"
    one = studies.build("co-run", topology.load("pack:1 numa:1 core:2 pu:1"), [])
    assert [e.name for e in one.environments] == ["alone", "co-low-same", "co-medium-same",
                                                  "co-high-same"]


def test_oversubscription_runs_p_jobs_single_and_four_threaded():
    s = studies.build("oversubscription", topology.load("pack:1 numa:1 core:8 pu:1"), [])
    assert {(b.name, b.params["copies"], b.params["threads"]) for b in s.benchmarks} == {
        (f"npb-{k}", 8, t) for k in ("cg", "ep", "is", "mg", "ft") for t in (1, 4)}
    assert s.environments[1].options.given() == {"vcpus": 8}
