"""Property test (hypothesis): on generated hwloc v2 topologies with random disallowed and
offline PUs and nodes and memory-only (HBM) nodes, every policy either refuses in one line or
gives a plan that keeps the placement rules. The generator below writes the XML
itself and knows which PUs and nodes are usable; the rules are checked against that
knowledge, not against the code under test."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from virtxml import validate_domain

from vhpc import topology as T
from vhpc.environments.vm.backends.libvirt_xml import to_libvirt_xml
from vhpc.placement import PlacementError, PlacementRequest as R, place, plan_partition

GIB = 1 << 30


def bitmap(bits) -> str:
    """hwloc bitmap text: 32-bit hex words, most significant first."""
    bits = set(bits)
    words = max(1, (max(bits) // 32 + 1) if bits else 1)
    return ",".join(f"0x{sum(1 << (b - 32 * w) for b in bits if 32 * w <= b < 32 * (w + 1)):08x}"
                    for w in reversed(range(words)))


@dataclass
class Machine:
    xml: str
    usable_pus: set[int]
    pu_node: dict[int, int | None]  # usable PU -> its local usable CPU node
    pu_package: dict[int, int]
    memory_nodes: set[int]  # usable nodes holding memory (CPU and HBM), not the memoryless ones
    cpu_nodes: set[int]
    total_pus: int


@st.composite
def machines(draw) -> Machine:
    npk = draw(st.integers(1, 3))
    per_pk = draw(st.integers(1, 2))
    cores = draw(st.integers(1, 3))
    smt = draw(st.integers(1, 2))
    hbm = draw(st.booleans())
    total = npk * per_pk * cores * smt
    n_cpu_nodes = npk * per_pk
    node_ids = list(range(n_cpu_nodes + (npk if hbm else 0)))
    offline_pus = draw(st.sets(st.integers(0, total - 1), max_size=total // 3))
    disallowed_pus = draw(st.sets(st.integers(0, total - 1), max_size=total // 2))
    offline_nodes = draw(st.sets(st.sampled_from(node_ids), max_size=1))
    disallowed_nodes = draw(st.sets(st.sampled_from(node_ids), max_size=len(node_ids) // 2))
    memoryless = draw(st.sets(st.sampled_from(node_ids[:n_cpu_nodes]), max_size=1))  # CPU node, 0 bytes
    if not (set(range(total)) - offline_pus - disallowed_pus):
        offline_pus, disallowed_pus = set(), set()
    body, pu, core_os = [], 0, 0
    pu_node, pu_package = {}, {}
    usable_nodes = set(node_ids) - offline_nodes - disallowed_nodes
    for p in range(npk):
        pk_pus = list(range(pu, pu + per_pk * cores * smt))
        inner = []
        if hbm and (n_cpu_nodes + p) not in offline_nodes:
            n = n_cpu_nodes + p
            inner.append(f'<object type="NUMANode" os_index="{n}" subtype="HBM" cpuset="{bitmap(set(pk_pus) - offline_pus)}" '
                         f'nodeset="{bitmap({n})}" local_memory="{GIB}"/>')
        for k in range(per_pk):
            n = p * per_pk + k
            n_pus = list(range(pu, pu + cores * smt))
            if n not in offline_nodes:
                inner.append(f'<object type="NUMANode" os_index="{n}" cpuset="{bitmap(set(n_pus) - offline_pus)}" '
                             f'nodeset="{bitmap({n})}" local_memory="{0 if n in memoryless else 4 * GIB}"/>')
            for _ in range(cores):
                threads = [f'<object type="PU" os_index="{q}" cpuset="{bitmap({q})}"/>'
                           for q in range(pu, pu + smt) if q not in offline_pus]
                inner.append(f'<object type="Core" os_index="{core_os}">{"".join(threads)}</object>')
                for q in range(pu, pu + smt):
                    pu_package[q] = p
                    pu_node[q] = n if n in usable_nodes else None
                core_os += 1
                pu += smt
        body.append(f'<object type="Package" os_index="{p}" cpuset="{bitmap(set(pk_pus) - offline_pus)}">{"".join(inner)}</object>')
    online = set(range(total)) - offline_pus
    usable = online - disallowed_pus
    root = (f'<object type="Machine" os_index="0" cpuset="{bitmap(online)}" complete_cpuset="{bitmap(range(total))}" '
            f'allowed_cpuset="{bitmap(set(range(total)) - disallowed_pus)}" '
            f'nodeset="{bitmap(set(node_ids) - offline_nodes)}" complete_nodeset="{bitmap(node_ids)}" '
            f'allowed_nodeset="{bitmap(set(node_ids) - disallowed_nodes)}">')
    xml = f'<?xml version="1.0"?><topology version="2.0">{root}{"".join(body)}</object></topology>'
    return Machine(xml=xml, usable_pus=usable, pu_node={q: pu_node[q] for q in usable},
                   pu_package={q: pu_package[q] for q in usable}, memory_nodes=usable_nodes - memoryless,
                   cpu_nodes={n for n in usable_nodes if n < n_cpu_nodes}, total_pus=total)


POLICIES = st.one_of(
    st.sampled_from(["float", "compact", "spread", "compact;pin=node", "spread;mem=local"]),
    st.integers(1, 4).map(lambda k: f"span:{k}"),
    st.integers(0, 8).map(lambda n: f"confine:{n}"),
    st.lists(st.integers(0, 8), min_size=1, max_size=3, unique=True).map(lambda ns: "nodes:" + ",".join(map(str, ns))),
    st.tuples(st.integers(0, 2), st.integers(0, 8)).map(lambda t: f"confine:{t[0]};mem={t[1]}"),
)


def check_rules(m: Machine, p, policy: str) -> None:
    """The rules every plan keeps: a valid libvirt domain, only usable PUs, no PU pinned twice
    (unless pinned per node), memory on usable nodes only, every vCPU and MiB placed once, and
    the span or confine the policy asks for."""
    validate_domain(to_libvirt_xml(p, name="prop", full=True))  # libvirt's schema, and no "None"
    pcpus = {c for s in p.vcpu_pins for c in s}
    assert pcpus <= m.usable_pus, f"disallowed/offline PU pinned: {pcpus - m.usable_pus}"
    if p.vcpu_pins and "pin=node" not in policy:
        flat = [c for s in p.vcpu_pins for c in s]
        assert len(flat) == len(set(flat)) == p.vcpus, "a PU pinned twice"
    for g in p.guest_nodes:
        assert set(g.host_nodes) <= m.memory_nodes, f"memory on unusable node {g.host_nodes}"
    assert sorted(v for g in p.guest_nodes for v in g.vcpus) == list(range(p.vcpus))
    assert sum(g.memory_mib for g in p.guest_nodes) == p.memory_mib
    if policy.startswith("span:"):
        k = int(policy.split(":")[1].split(";")[0])
        assert len({m.pu_package[c] for c in pcpus}) == k
    if policy.startswith("confine:"):
        n = int(policy.split(":")[1].split(";")[0])
        assert {m.pu_node[c] for c in pcpus} == {n}


def check_refusal(exc: PlacementError) -> None:
    msg = str(exc)
    assert "\n" not in msg and "None" not in msg and msg


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(m=machines(), policy=POLICIES, vcpus=st.integers(1, 14), gn=st.sampled_from(["hidden", "mirror", 2]),
       vms=st.integers(1, 2))
def test_every_policy_keeps_the_rules(m, policy, vcpus, gn, vms):
    topo = T.from_hwloc_xml(m.xml, source="generated")
    assert len(topo.pus) == len(m.usable_pus) and topo.total_pus == m.total_pus  # no PU counted twice
    assert set(topo.cpu_node_ids) <= m.cpu_nodes
    plans = []
    for i in range(vms):
        try:
            plans.append(place(topo, R(vcpus=vcpus, memory_mib=1024, policy=policy, guest_numa=gn,
                                       vm_index=i, vms=vms, check_memory=False)))
        except PlacementError as exc:
            check_refusal(exc)
            return
    for p in plans:
        check_rules(m, p, policy)
    if vms == 2 and plans[0].pinned and "pin=node" not in policy:
        assert not set(plans[0].pcpus) & set(plans[1].pcpus)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(m=machines(), per_socket=st.integers(1, 3))
def test_partition_keeps_the_rules(m, per_socket):
    topo = T.from_hwloc_xml(m.xml, source="generated")
    try:
        plans = plan_partition(topo, per_socket, check_memory=False)
    except PlacementError as exc:
        check_refusal(exc)
        return
    assert plans
    seen: set[int] = set()
    for p in plans:
        check_rules(m, p, p.policy)
        assert not seen & set(p.pcpus)
        seen |= set(p.pcpus)
