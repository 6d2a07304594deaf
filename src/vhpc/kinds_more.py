"""The environment kinds beyond one host's native and QEMU guest: ``ssh`` (an existing machine
over OpenSSH, environments/ssh.py) and ``vcluster`` (several guests working as one machine,
environments/vcluster.py), registered in :data:`vhpc.kinds.REGISTRY` like ``native`` and ``vm``.
Parsing never touches the host or the network; reaching the machine happens when a campaign
starts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from vhpc import placement
from vhpc.core.errors import HostError
from vhpc.kinds import (MAX_CPUS, MAX_MEMORY_MIB, MAX_SECONDS, EnvKind, EnvOptions, HostFacts,
                        IndexList, register)
from vhpc.topology import format_list


class SshOptions(EnvOptions):
    """``ssh``: ``host`` (name, address or ssh_config alias), ``user``, ``port``, ``identity``
    (as ``ssh -l -p -i``), ``cpus`` / ``nodes`` / ``membind`` binding on the remote host as for
    ``native``, ``workdir`` (remote directory for vhpc's files)."""

    host: str = Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._:\[\]%-]+$")
    user: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    port: int | None = Field(None, ge=1, le=65535)
    identity: str | None = Field(None, min_length=1, max_length=4096)
    cpus: IndexList | None = None
    nodes: IndexList | None = None
    membind: IndexList | None = None
    workdir: str = Field(".cache/vhpc", min_length=1, max_length=4096)

    def placement_text(self, host: HostFacts) -> str:
        where = f"{self.user + '@' if self.user else ''}{self.host}"
        where += f":{self.port}" if self.port else ""
        parts = [f"on {where}"]
        if self.cpus:
            parts.append(f"taskset -c {format_list(self.cpus)}")
        if self.nodes is not None or self.membind is not None:
            parts.append(f"numactl --membind={format_list(self.membind or self.nodes)}")
        return " ".join(parts)


def _cluster_policy(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r}: use partition or a vm policy (compact, spread, span:K, ...)")
    if value != "partition":
        placement.parse_policy(value)  # raises PlacementError naming what is allowed
    return value


class VclusterOptions(EnvOptions):
    """``vcluster``: ``vms`` guests of ``vcpus`` vCPUs and ``memory`` MiB each, placed by
    ``policy`` (``partition``: spread over the host's sockets; or any ``vm`` policy applied to
    each VM's own share), linked by ``net`` (``virtio`` network, or ``ivshmem`` shared memory
    beside it), ``ranks_per_vm`` MPI ranks in each (default: vcpus), ``accel``, ``kernel``,
    ``boot_timeout`` (s), ``strict``."""

    vms: int = Field(2, ge=2, le=200)  # one VM is -e vm; 200 fit the private /24
    vcpus: int = Field(1, ge=1, le=MAX_CPUS)
    memory: int = Field(1024, ge=128, le=MAX_MEMORY_MIB)
    policy: str = "partition"
    net: Literal["virtio", "ivshmem"] = "virtio"
    ranks_per_vm: int | None = Field(None, ge=1, le=MAX_CPUS)
    accel: Literal["auto", "kvm", "tcg"] = "auto"
    kernel: str | None = Field(None, min_length=1, max_length=4096)
    boot_timeout: float = Field(90.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    strict: bool = False

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, v):
        return _cluster_policy(v)

    def check_host(self, host: HostFacts) -> None:
        if self.policy != "float" and self.vms * self.vcpus > len(host.cpus):
            raise HostError(f"vcluster: {self.vms} VMs x {self.vcpus} vCPUs need "
                            f"{self.vms * self.vcpus} CPUs, the host has {len(host.cpus)}: "
                            "use fewer VMs or vCPUs, or policy=float (oversubscribed)")

    def placement_text(self, host: HostFacts) -> str:
        return (f"{self.vms} VMs x {self.vcpus} vCPUs, policy {self.policy}, net {self.net}, "
                f"{self.ranks_per_vm or self.vcpus} rank(s) per VM")


register(EnvKind("ssh", SshOptions, "vhpc.factories:ssh",
                 "benchmarks on an existing machine over OpenSSH"))
register(EnvKind("vcluster", VclusterOptions, "vhpc.factories:vcluster",
                 "several guests on one host, one MPI job across them"))
