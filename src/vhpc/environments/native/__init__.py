"""The ``native`` kind: benchmarks directly on the host (the usual baseline)."""

from __future__ import annotations

from vhpc.environments.kind import BASELINE, KINDS, EnvironmentKind, EnvPlan
from vhpc.environments.native.options import NativeOptions
from vhpc.environments.options import HostFacts, check_subset
from vhpc.topology import format_list


@KINDS.register("native")
class NativeKind(EnvironmentKind):
    """Benchmarks directly on the host, optionally bound to CPUs and NUMA nodes."""

    options = NativeOptions
    summary = "benchmarks directly on the host"
    provides = frozenset({BASELINE})
    trial_s = 2.0  # the quick suite's native trials: 0.6 s median, NPB class S 0.1-3 s

    def plan(self, options: NativeOptions, host: HostFacts) -> EnvPlan:
        """Checks that the CPUs and nodes exist; the plan's text is the binding."""
        if options.cpus is not None:
            check_subset("cpus", options.cpus, host.cpus, "CPU")
        for field in ("nodes", "membind"):
            if getattr(options, field) is not None:
                check_subset(field, getattr(options, field), host.topology.node_ids, "NUMA node")
        parts = [f"cpus {format_list(options.cpus)}" if options.cpus else
                 f"any of cpus {format_list(host.cpus)}"]
        if options.nodes is not None:
            parts.append(f"numactl --cpunodebind={format_list(options.nodes)}")
        if options.nodes is not None or options.membind is not None:
            parts.append(f"--membind={format_list(options.membind or options.nodes)}")
        if host.compute_nodes > 1:  # an executor's allocation: MPI trials span its nodes
            parts.append(f"on each node; MPI ranks over up to {host.compute_nodes} nodes")
        return EnvPlan(" ".join(parts))

    def build(self, name, options: NativeOptions, plan: EnvPlan, host: HostFacts):
        """A NativeEnvironment.  Raises HostError (numactl missing)."""
        from vhpc.environments.native.environment import NativeEnvironment

        def fmt(v):
            return format_list(v) if v is not None else None

        return NativeEnvironment(name, cpus=list(options.cpus) if options.cpus else None,
                                 nodes=fmt(options.nodes), membind=fmt(options.membind),
                                 strict=options.strict)
