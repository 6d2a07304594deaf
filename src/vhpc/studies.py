"""Studies: named campaign templates that reproduce the seed papers' experiments on this host.

Each template turns (host topology, benchmarks, repeats) into a :class:`CampaignSpec`, or
raises :class:`StudyError` saying why this host cannot run it and what to do instead.

| study | seed figure | environments |
|---|---|---|
| ``socket-span`` | 000 Fig. 2 | native on the same cores, and a VM spanning 1..S sockets (``span:K``) |
| ``cold-warm`` | 000 Fig. 4-6 | native and a VM, ``cold-warm`` protocol |
| ``vcpu-mapping`` | 003 Fig. 4 | VMs with vCPUs on 1, 2, 4 NUMA nodes (``nodes:LIST``) |
| ``memory-profile`` | 003 Fig. 3 | memory local vs remote (numactl), natively or in a guest with 2 virtual nodes |
"""

from __future__ import annotations

from typing import Any

from vhpc import topology as topology_room
from vhpc.spec import CampaignSpec, from_cli

STUDIES = {
    "socket-span": "VM spanning 1..S sockets vs native on the same cores (seed 000 Fig. 2)",
    "cold-warm": "first trial after boot vs later ones (seed 000 Fig. 4-6)",
    "vcpu-mapping": "vCPUs on 1 / 2 / 4 NUMA nodes (seed 003 Fig. 4)",
    "memory-profile": "NUMA penalty CPI_remote/CPI_local vs MPKI (seed 003 Fig. 3)",
}


class StudyError(ValueError):
    """This study cannot run as asked on this host; the message says what to do."""


def build(name: str, topo: topology_room.Topology, benches: list[str], in_vm: bool = False,
          **protocol: Any) -> CampaignSpec:
    """The campaign spec of study ``name`` on ``topo``.  Raises StudyError (unknown study,
    host too small) or SpecError (bad benchmark or protocol value)."""
    if name not in STUDIES:
        raise StudyError(f"unknown study {name!r}: choose one of {', '.join(STUDIES)}")
    return globals()["_" + name.replace("-", "_")](topo, benches, in_vm, protocol)


def _cold_warm(topo, benches, in_vm, protocol):
    protocol.setdefault("warmup", 0)
    return from_cli(benches or ["stream", "pagefault"], ["native", "vm"],
                    protocol="cold-warm", **protocol)


def _socket_span(topo, benches, in_vm, protocol):
    per_pkg = min(len(p.cores) for p in topo.packages)
    envs = []
    for k in range(1, len(topo.packages) + 1):
        cpus = [topo.cores[c].pus[0] for pkg in topo.packages[:k] for c in pkg.cores]
        envs.append(f"native:name=native-{k}s,cpus={topology_room.format_list(cpus)}")
        envs.append(f"vm:name=vm-span{k},vcpus={per_pkg * k},policy=span:{k},numa=mirror")
    protocol.setdefault("baseline", "native-1s")
    return from_cli(benches or ["stream"], envs, **protocol)


def _vcpu_mapping(topo, benches, in_vm, protocol):
    nodes = topo.node_ids
    if len(nodes) < 2:
        raise StudyError(f"vcpu-mapping needs at least 2 NUMA nodes; this host has {len(nodes)}: "
                         "run it on a multi-socket host, or preview the placements with "
                         "'vhpc plan --topology ... --policy nodes:0,1'")
    vcpus = min(len(topo.pus_of_node(n)) for n in nodes)
    envs = ["native"]
    for k in (1, 2, 4):
        if k <= len(nodes):
            envs.append(f"vm:name=vm-{k}node,vcpus={vcpus},policy=nodes:"
                        + ",".join(map(str, nodes[:k])) + (";mem=local" if k > 1 else ""))
    return from_cli(benches or ["stream", "randomaccess"], envs, **protocol)


def _memory_profile(topo, benches, in_vm, protocol):
    benches = benches or ["stream", "randomaccess", "pagefault", "noise"]
    if in_vm:
        envs = ["vm:name=local,numa=2,policy=spread,guest_bind=0:0",
                "vm:name=remote,numa=2,policy=spread,guest_bind=0:1"]
    else:
        nodes = topo.node_ids
        if len(nodes) < 2:
            raise StudyError(
                f"memory-profile needs at least 2 NUMA nodes; this host has {len(nodes)}. Run it "
                "on a multi-node host, or add --in-vm to exercise the machinery in a guest with 2 "
                "virtual NUMA nodes (its penalty is meaningless: both map to one host node)")
        a, b = nodes[0], nodes[1]
        envs = [f"native:name=local,nodes={a}", f"native:name=remote,nodes={a},membind={b}"]
    protocol.setdefault("baseline", "local")
    return from_cli(benches, envs, **protocol)
