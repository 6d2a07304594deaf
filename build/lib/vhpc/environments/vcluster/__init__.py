"""The ``vcluster`` kind: several guests working as one machine, one MPI job across them."""

from __future__ import annotations

from vhpc.core.errors import HostError
from vhpc.environments.kind import KINDS, EnvironmentKind, EnvPlan
from vhpc.environments.options import HostFacts
from vhpc.environments.vcluster.options import VclusterOptions


@KINDS.register("vcluster")
class VclusterKind(EnvironmentKind):
    """Guests on a private segment (virtio, or ivshmem beside it); their placements are
    planned once here, one per guest."""

    options = VclusterOptions
    summary = "several guests on one host, one MPI job across them"

    def plan(self, options: VclusterOptions, host: HostFacts) -> EnvPlan:
        """One placement per guest (``placement`` holds the tuple).  Raises HostError (not
        enough CPUs) or PlacementError."""
        from vhpc.environments.vcluster.environment import plan_cluster

        if options.policy != "float" and options.vms * options.vcpus > len(host.cpus):
            raise HostError(f"vcluster: {options.vms} VMs x {options.vcpus} vCPUs need "
                            f"{options.vms * options.vcpus} CPUs, the host has {len(host.cpus)}: "
                            "use fewer VMs or vCPUs, or policy=float (oversubscribed)")
        plans = tuple(plan_cluster(host.topology, options.vms, options.vcpus, options.memory,
                                   options.policy))
        return EnvPlan(f"{options.vms} VMs x {options.vcpus} vCPUs, policy {options.policy}, "
                       f"net {options.net}, {options.ranks_per_vm or options.vcpus} rank(s) "
                       "per VM", plans)

    def build(self, name, options: VclusterOptions, plan: EnvPlan, host: HostFacts):
        """A VclusterEnvironment on the planned placements."""
        from vhpc.environments.vcluster.environment import VclusterEnvironment

        return VclusterEnvironment(name, options, list(plan.placement), host.topology)
