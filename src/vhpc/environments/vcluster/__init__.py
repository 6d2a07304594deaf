"""The ``vcluster`` kind: several guests working as one machine, one MPI job across them."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from vhpc.core.errors import HostError
from vhpc.environments.base import Environment
from vhpc.environments.kind import GUEST_CLUSTER, KINDS, EnvironmentKind, EnvPlan
from vhpc.environments.options import HostFacts
from vhpc.environments.vm import VmKind
from vhpc.environments.vcluster.options import VclusterOptions


def guests_per_node(options: VclusterOptions, nodes: int) -> int:
    """Guests each compute node holds: ``vms_per_node`` when given, else one per node when
    there are ``vms`` nodes or more, else ⌈vms / nodes⌉ (``nodes`` = 1: all on this host)."""
    if nodes <= 1:
        return options.vms
    return min(options.vms, options.vms_per_node or -(-options.vms // nodes))


@KINDS.register("vcluster")
class VclusterKind(EnvironmentKind):
    """Guests on a private segment (virtio, or ivshmem beside it); their placements are
    planned once here, one per guest."""

    options = VclusterOptions
    boots_guests = True
    llc_owner = "the guest's"
    trial_s = 40.0  # scaling at 1-3 nodes under TCG: 90 s a trial on a loaded 2-core host
    summary = "several guests on one host, one MPI job across them"
    provides = frozenset({GUEST_CLUSTER})

    #: its guests are vm guests: the same private directories over the same shared root
    hidden_host_dirs = VmKind.hidden_host_dirs
    #: and the same tools boot them
    components = VmKind.components
    #: and their image is checked alike
    dry_check = VmKind.dry_check

    def plan(self, options: VclusterOptions, host: HostFacts) -> EnvPlan:
        """One placement per guest of a host (``placement`` holds the tuple): all ``vms`` on
        this host, or — when the executor offers ``host.compute_nodes`` > 1 compute nodes — the
        :func:`guests_per_node` that each node holds (each node plans them again on its own
        topology when its guest host starts).  Raises HostError (not enough CPUs or nodes,
        shared memory across nodes) or PlacementError."""
        from vhpc.environments.vcluster.environment import plan_cluster

        per_node = guests_per_node(options, host.compute_nodes)
        nodes = -(-options.vms // per_node)
        spread = host.compute_nodes > 1
        if spread and options.net == "ivshmem" and nodes > 1:
            raise HostError("vcluster: net=ivshmem shares memory between guests of one host; "
                            f"with vms={options.vms} on {nodes} nodes use net=virtio, or "
                            f"vms_per_node={options.vms} to keep them on one node")
        if spread and nodes > host.compute_nodes:
            raise HostError(f"vcluster: vms={options.vms} at vms_per_node={per_node} need "
                            f"{nodes} nodes, the allocation has {host.compute_nodes}: raise "
                            "slurm:nodes= or vms_per_node=")
        where = " per node" if spread else ""
        if options.policy != "float" and per_node * options.vcpus > len(host.cpus):
            raise HostError(f"vcluster: {per_node} VMs x {options.vcpus} vCPUs{where} need "
                            f"{per_node * options.vcpus} CPUs, the host has {len(host.cpus)}: "
                            "use fewer VMs or vCPUs, or policy=float (oversubscribed)")
        plans = tuple(plan_cluster(host.topology, per_node, options.vcpus, options.memory,
                                   options.policy))
        spans = f", {per_node} per node on {nodes} Slurm node(s)" if spread else ""
        image = PurePath(options.image or "").name  # the whole path is in its options
        booting = (f", booting {image} in each (own overlay"
                   f"{'; the same path on every node' if spread else ''})"
                   if options.image else "")
        return EnvPlan(f"{options.vms} VMs x {options.vcpus} vCPUs{spans}, policy "
                       f"{options.policy}, net {options.net}, "
                       f"{options.ranks_per_vm or options.vcpus} rank(s) per VM{booting}", plans)

    def node_guests(self, name: str, first: int, count: int, policy: str,
                    member: dict[str, Any], vms: int | None = None,
                    seed: dict[str, str] | None = None) -> list[Environment]:
        """The guests ``first`` .. ``first + count - 1`` of vcluster ``name`` (``vms`` guests
        in all) that one compute node of an executor holds, placed on that node's own topology
        with ``policy``; ``member``: the guests' ``vm`` options fields; ``seed``: an image
        cluster's shared seed.  Nothing is booted.  Raises PlacementError/HostError/ValueError
        when the node cannot hold them (see
        :func:`vhpc.environments.vcluster.environment.node_guests`)."""
        from vhpc.environments.vcluster.environment import node_guests

        return node_guests(name, first, count, policy, member, vms, seed)

    def build(self, name, options: VclusterOptions, plan: EnvPlan, host: HostFacts):
        """A VclusterEnvironment on the planned placements."""
        from vhpc.environments.vcluster.environment import VclusterEnvironment

        return VclusterEnvironment(name, options, list(plan.placement), host.topology,
                                   spread=host.remote)
