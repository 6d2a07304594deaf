"""Options of the ``vcluster`` kind (``-e vcluster:vms=2,vcpus=1,net=ivshmem``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from vhpc import placement
from vhpc.environments.options import MAX_CPUS, MAX_MEMORY_MIB, MAX_SECONDS, EnvOptions
from vhpc.environments.vm.options import ImageFields


def _cluster_policy(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r}: use partition or a vm policy (compact, spread, span:K, ...)")
    if value != "partition":
        placement.parse_policy(value)  # raises PlacementError naming what is allowed
    return value


class VclusterOptions(ImageFields, EnvOptions):
    """``vcluster``: ``vms`` guests of ``vcpus`` vCPUs and ``memory`` MiB each, placed by
    ``policy`` (``partition``: spread over the host's sockets; or any ``vm`` policy applied to
    each VM's own share), linked by ``net`` (``virtio`` network, or ``ivshmem`` shared memory
    beside it), ``ranks_per_vm`` MPI ranks in each (default: vcpus), ``vms_per_node`` guests
    on each compute node when the executor offers several (``slurm:nodes=N``; default one per
    node when there are enough nodes, else ⌈vms / nodes⌉), ``link`` between nodes (``dgram``:
    UDP, the default; ``stream``: TCP, which QEMU 7.2 leaves to Nagle's algorithm),
    ``accel``, ``kernel``, ``boot_timeout`` (s), ``strict``.  ``vms=1`` is a cluster of one
    guest (the one-node point of a scaling curve).  ``image`` (with ``format``, ``boot``): every
    guest boots the user's image from an overlay of its own (vcluster/images.py,
    docs/images.md), over ``net=virtio``, on this host or one guest host per compute node
    (the image at the same path on each)."""

    vms: int = Field(2, ge=1, le=200)  # 200 fit the private /24
    vms_per_node: int | None = Field(None, ge=1, le=200)
    link: Literal["dgram", "stream"] = "dgram"
    vcpus: int = Field(1, ge=1, le=MAX_CPUS)
    memory: int = Field(1024, ge=128, le=MAX_MEMORY_MIB)
    policy: str = "partition"
    net: Literal["virtio", "ivshmem"] = "virtio"
    ranks_per_vm: int | None = Field(None, ge=1, le=MAX_CPUS)
    accel: Literal["auto", "kvm", "tcg"] = "auto"
    kernel: str | None = Field(None, min_length=1, max_length=4096)
    boot_timeout: float = Field(90.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    strict: bool = False
    @model_validator(mode="after")
    def _image_options(self):
        """``image=`` as ``vm`` checks it (:class:`~vhpc.environments.vm.options.ImageFields`),
        and only over the virtio network: the shared-memory device is read with vhpc's own
        guest tools.  Raises ValueError."""
        if self._image_given() and self.net != "virtio":
            raise ValueError("vcluster:image= links its guests with net=virtio only: drop "
                             "net=ivshmem")
        return self

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, v):
        return _cluster_policy(v)
