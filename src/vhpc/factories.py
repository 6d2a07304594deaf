"""Factories of the environment kinds in :mod:`vhpc.kinds`: typed options → Environment.

Called when a campaign starts (never while a spec is parsed); constructing a ``vm`` probes
the host (QEMU installed, a guest kernel), so errors here are user errors
(:class:`~vhpc.core.errors.HostError`) raised before anything is stored.
"""

from __future__ import annotations

from vhpc.benchmarks.base import kernel_dir
from vhpc.core.errors import HostError, VhpcError
from vhpc.environments.native.environment import NativeEnvironment
from vhpc.environments.vm.environment import VmEnvironment
from vhpc.kinds import HostFacts, NativeOptions, VmOptions
from vhpc.kinds_more import SshOptions, VclusterOptions
from vhpc.topology import format_list

#: Co-runner loads by memory intensity (seed 003 Fig. 5's low / medium / high co-runners):
#: a CPU spin with no memory traffic, STREAM in a cache-sized array, STREAM in a large array.
CORUNNERS = {
    "low": ["vhpc-noise", "-d", "86400"],
    "medium": ["vhpc-stream", "-n", "100000", "-t", "250"],
    "high": ["vhpc-stream", "-n", "20000000", "-t", "250"],
}


def corunner_argv(level: str) -> list[str]:
    """The co-runner command for intensity ``level`` (a key of :data:`CORUNNERS`)."""
    binary, *args = CORUNNERS[level]
    return [str(kernel_dir() / binary), *args]


def throttled(env, o, cpus: int):
    """``env`` wrapped in a ThrottledEnvironment (environments/throttled.py) when ``o`` has
    ``slowdown=``; ``cpus``: the busy CPUs assumed without ``slowdown_cpus``."""
    if o.slowdown is None:
        if o.slowdown_cpus is not None:
            raise HostError(f"environment {env.name}: slowdown_cpus= needs slowdown=")
        return env
    from vhpc.environments.slowdown import ThrottledEnvironment

    return ThrottledEnvironment(env, o.slowdown, o.slowdown_cpus or cpus)


def native(name: str, o: NativeOptions, host: HostFacts):
    """A :class:`NativeEnvironment` (throttled with ``slowdown=``).  Raises HostError
    (numactl missing)."""
    try:
        env = NativeEnvironment(
            name, cpus=list(o.cpus) if o.cpus else None,
            nodes=format_list(o.nodes) if o.nodes is not None else None,
            membind=format_list(o.membind) if o.membind is not None else None, strict=o.strict)
    except ValueError as exc:
        raise HostError(f"environment {name}: {exc}") from None
    return throttled(env, o, len(o.cpus) if o.cpus else len(host.cpus))


def vm(name: str, o: VmOptions, host: HostFacts):
    """A :class:`VmEnvironment` placed on ``host`` (throttled with ``slowdown=``).  Raises
    HostError (no QEMU, no guest kernel) or PlacementError (a placement this host cannot
    give)."""
    if o.slowdown is not None and o.libvirt:
        raise HostError(f"environment {name}: slowdown= needs the qemu backend")
    return throttled(_vm(name, o, host), o, o.vcpus)


def _vm(name: str, o: VmOptions, host: HostFacts):
    """:func:`vm` before the optional slowdown."""
    extra = {}
    if o.corunner is not None:
        extra = dict(corunner_argv=corunner_argv(o.corunner), corunner_label=o.corunner,
                     corunner_policy=o.corunner_policy)
    if o.guest_bind is not None:
        extra["guest_bind"] = f"{format_list(o.guest_bind[0])}:{format_list(o.guest_bind[1])}"
    try:
        if o.libvirt:
            return _libvirt(name, o, host, extra)
        return VmEnvironment(
            name, vcpus=o.vcpus, memory=o.memory, policy=o.resolved_policy(host.cpus),
            numa=o.numa, backing=o.backing, accel=o.accel, kernel=o.kernel,
            boot_timeout=o.boot_timeout, strict=o.strict, topo=host.topology, **extra)
    except VhpcError:
        raise
    except ValueError as exc:
        raise HostError(f"environment {name}: {exc}") from None


def _libvirt(name: str, o: VmOptions, host: HostFacts, extra: dict):
    """A LibvirtEnvironment (environments/libvirt.py): the same placement, or the user's
    ``domain_xml`` with only what the spec set besides it."""
    from vhpc.environments.vm.backends.libvirt import LibvirtEnvironment

    common = dict(kernel=o.kernel, boot_timeout=o.boot_timeout, strict=o.strict, **extra)
    if o.domain_xml:
        return LibvirtEnvironment(name, uri=o.uri, domain_xml=o.domain_xml, **common)
    return LibvirtEnvironment(name, uri=o.uri, vcpus=o.vcpus, memory=o.memory,
                              policy=o.resolved_policy(host.cpus), numa=o.numa,
                              backing=o.backing, accel=o.accel, topo=host.topology, **common)


def ssh(name: str, o: SshOptions, host: HostFacts):
    """An SshEnvironment (environments/ssh.py).  Raises HostError (no ssh client)."""
    from vhpc.environments.ssh.environment import SshEnvironment

    fmt = (lambda v: format_list(v) if v is not None else None)
    try:
        return SshEnvironment(name, host=o.host, user=o.user, port=o.port, identity=o.identity,
                              cpus=fmt(o.cpus), nodes=fmt(o.nodes), membind=fmt(o.membind),
                              workdir=o.workdir)
    except VhpcError:
        raise
    except ValueError as exc:
        raise HostError(f"environment {name}: {exc}") from None


def vcluster(name: str, o: VclusterOptions, host: HostFacts):
    """A VclusterEnvironment (environments/vcluster.py) placed on ``host``.  Raises HostError
    or PlacementError."""
    from vhpc.environments.vcluster.environment import VclusterEnvironment

    try:
        return VclusterEnvironment(name, vms=o.vms, vcpus=o.vcpus, memory=o.memory,
                                   policy=o.policy, net=o.net, ranks_per_vm=o.ranks_per_vm,
                                   accel=o.accel, kernel=o.kernel, boot_timeout=o.boot_timeout,
                                   strict=o.strict, topo=host.topology)
    except VhpcError:
        raise
    except ValueError as exc:
        raise HostError(f"environment {name}: {exc}") from None
