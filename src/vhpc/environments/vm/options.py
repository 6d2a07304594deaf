"""Options of the ``vm`` kind (``-e vm:vcpus=4,policy=span:2,backing=2m``): the one place each
is validated, and the placement request they make."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator

from vhpc import placement
from vhpc.core.errors import HostError
from vhpc.environments.vm.backends.base import BACKENDS
from vhpc.environments.options import (MAX_CPUS, MAX_MEMORY_MIB, MAX_SECONDS, EnvOptions,
                                       GuestBind, GuestNuma, Pin, PolicyField, Slowdown,
                                       check_subset)

#: Co-runner loads by memory intensity (seed 003 Fig. 5's low / medium / high co-runners):
#: a CPU spin with no memory traffic, STREAM in a cache-sized array, STREAM in a large array.
CORUNNERS = {
    "low": ["vhpc-noise", "-d", "86400"],
    "medium": ["vhpc-stream", "-n", "100000", "-t", "250"],
    "high": ["vhpc-stream", "-n", "20000000", "-t", "250"],
}


def corunner_argv(level: str) -> list[str]:
    """The co-runner command for intensity ``level`` (a key of :data:`CORUNNERS`), with the
    kernel binary's path in this host's build (benchmarks.base.kernel_dir)."""
    from vhpc.benchmarks.base import kernel_dir

    binary, *args = CORUNNERS[level]
    return [str(kernel_dir() / binary), *args]


#: Image formats vhpc boots, and the file suffixes that name them.
SUFFIX_FORMATS = {".qcow2": "qcow2", ".raw": "raw", ".img": "raw", ".ext4": "raw"}


def image_format(path: str, given: str | None) -> str:
    """``given`` (``qcow2``/``raw``), else the format the file's suffix names
    (:data:`SUFFIX_FORMATS`).  Raises ValueError when neither says."""
    if given:
        return given
    fmt = SUFFIX_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ValueError(f"image={path}: the name does not say its format: add format=qcow2 "
                         "or format=raw")
    return fmt


#: Environment variable listing libvirt URIs allowed beyond the local qemu drivers (comma
#: separated); ``vhpc --allow-uri URI`` sets it for one command.
ALLOW_URI_ENV = "VHPC_ALLOW_URI"
#: set to "1" for one command by ``vhpc --allow-system-image``; read by the image check before
#: boot (vm/userimage_check.py), which refuses a system file as a guest disk without it
ALLOW_SYSTEM_IMAGE_ENV = "VHPC_ALLOW_SYSTEM_IMAGE"


def check_uri(uri: str) -> str:
    """``uri`` if it names a local QEMU driver of libvirt (``qemu:///system`` or
    ``qemu:///session``, with at most a ``socket=`` path), or is allowed explicitly
    (``vhpc --allow-uri URI``, ``$VHPC_ALLOW_URI``).  A campaign file is not trusted to pick
    remote or external transports: ``qemu+ext:///system?command=X`` runs X.  Raises
    ValueError."""
    allowed = {u.strip() for u in os.environ.get(ALLOW_URI_ENV, "").split(",") if u.strip()}
    if uri in allowed:
        return uri
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if (parts.scheme == "qemu" and not parts.netloc and parts.path in ("/system", "/session")
            and not parts.fragment and all(k == "socket" and v.startswith("/") for k, v in query)
            and "\x00" not in uri):
        return uri
    raise ValueError(f"uri={uri!r}: only the local QEMU drivers (qemu:///system, "
                     "qemu:///session, optionally ?socket=/PATH) are allowed; to use another "
                     f"connection, pass --allow-uri '{uri}' to vhpc")


class ImageFields(BaseModel):
    """The options of guests booting the user's own image, shared by ``vm`` and ``vcluster``
    (docs/images.md): ``image`` (its absolute path: ``~`` expanded, a relative one taken from
    the current directory, a campaign file's from the file's folder, so a resume finds it),
    ``format`` (when the name does not say) and ``boot``."""

    image: str | None = Field(None, min_length=1, max_length=4096)
    format: Literal["qcow2", "raw"] | None = None
    boot: Literal["auto", "firmware", "uefi", "kernel"] = "auto"

    @field_validator("image")
    @classmethod
    def _absolute_image(cls, v):
        return None if v is None else os.path.abspath(os.path.expanduser(v))

    def _image_given(self) -> bool:
        """Whether ``image=`` is given; ``format=`` and ``boot=`` need it, its format must be
        known, and it brings its own kernel (no ``kernel=``, a field of the kinds' models).
        Raises ValueError."""
        if self.image is None:
            for opt in ("format", "boot"):
                if getattr(self, opt) != type(self).model_fields[opt].get_default():
                    raise ValueError(f"{opt}= needs image=FILE")
            return False
        image_format(self.image, self.format)  # the name or format= must say
        if self.kernel is not None:
            raise ValueError(f"image={self.image} boots its own kernel: drop kernel=")
        return True

    @property
    def guest_sees_host_files(self) -> bool:
        """False with ``image=``: the user's guests get the inputs copied in over ssh."""
        return self.image is None


class VmOptions(ImageFields, EnvOptions, Slowdown):
    """``vm`` (QEMU guest; environments/vm.py): vcpus, memory (MiB), pin (auto | none | CPU
    list, vCPU i on the i-th) or policy (docs/placement.md), numa (hidden | mirror | count),
    backing (4k | 2m | 1g), accel (auto | kvm | tcg), kernel (path), boot_timeout (s), strict,
    guest_bind (CPUNODES:MEMNODES inside the guest), corunner (low | medium | high) placed by
    corunner_policy; backend (a registered hypervisor backend, :data:`BACKENDS`: qemu, the
    default, or libvirt: a transient libvirt domain, docs/libvirt.md, the default when
    domain_xml is given), uri (libvirt connection), domain_xml (the user's own domain XML
    file); image (the user's own disk image, qcow2 or raw, booted with its own kernel through
    an overlay and reached over ssh: docs/images.md), format (qcow2 | raw, when the image's
    name does not say), boot (auto | firmware | uefi | kernel: its bootloader started by
    SeaBIOS or by OVMF's UEFI, or its kernel given directly; auto: kernel for a bare root
    filesystem, uefi for a GPT disk with an EFI system partition, else firmware).  A backend's own
    options (``HypervisorBackend.own_options``) need that backend."""

    vcpus: int = Field(2, ge=1, le=MAX_CPUS)
    memory: int = Field(1024, ge=128, le=MAX_MEMORY_MIB)
    pin: Pin | None = None
    policy: PolicyField | None = None
    numa: GuestNuma = "hidden"
    backing: Literal["4k", "2m", "1g"] = "4k"
    accel: Literal["auto", "kvm", "tcg"] = "auto"
    kernel: str | None = Field(None, min_length=1, max_length=4096)
    boot_timeout: float = Field(90.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    strict: bool = False
    guest_bind: GuestBind | None = None
    corunner: Literal["low", "medium", "high"] | None = None
    corunner_policy: PolicyField = Field(default_factory=lambda: placement.parse_policy("float"))
    backend: str | None = Field(None, min_length=1, max_length=64)  # None: see backend_name
    uri: str | None = Field(None, min_length=1, max_length=4096)
    domain_xml: str | None = Field(None, min_length=1, max_length=4096)
    @field_validator("uri")
    @classmethod
    def _local_uri(cls, v):
        return None if v is None else check_uri(v)

    @field_validator("backend")
    @classmethod
    def _registered_backend(cls, name: str | None) -> str | None:
        if name is not None and name not in BACKENDS:
            known = [repr(n) for n in BACKENDS.names()]
            listed = " or ".join([", ".join(known[:-1]), known[-1]] if len(known) > 1 else known)
            raise ValueError(f"Input should be {listed} (got {name!r})")
        return name

    @model_validator(mode="after")
    def _pin_or_policy(self):
        if self.pin is not None and self.policy is not None:
            raise ValueError("give either pin= or policy=, not both")
        chosen = BACKENDS.get(self.backend_name)
        for owner, backend in BACKENDS.items():
            for opt in backend.own_options:
                if getattr(self, opt) is not None and opt not in chosen.own_options:
                    raise ValueError(f"{opt}= needs backend={owner}")
        for opt, advice in chosen.unsupported_options.items():
            # compared with the default, not the fields set: a stored spec has them all set
            if getattr(self, opt) != type(self).model_fields[opt].get_default(
                    call_default_factory=True):
                raise ValueError(f"{opt}= is not supported with backend={self.backend_name}: "
                                 f"{advice}")
        self._image_options()
        if self.domain_xml:
            # compared with the defaults, not the fields set: a stored spec has them all set
            given = sorted(k for k in ("vcpus", "memory", "pin", "policy", "numa", "backing",
                                       "accel", "corunner")
                           if getattr(self, k) != type(self).model_fields[k].get_default(
                               call_default_factory=True))
            if given:
                raise ValueError(f"domain_xml={self.domain_xml} defines the guest: drop "
                                 f"{', '.join(given)}")
        return self

    def _image_options(self) -> None:
        """:meth:`ImageFields._image_given`'s checks; an image defines no domain.  Raises
        ValueError."""
        if self._image_given() and self.domain_xml is not None:
            raise ValueError("give either image= or domain_xml=, not both")

    @property
    def backend_name(self) -> str:
        """The hypervisor backend (a name in :data:`BACKENDS`): ``backend`` as given, else
        ``libvirt`` when ``domain_xml`` is given, else ``qemu``."""
        if self.backend is not None:
            return self.backend
        return "libvirt" if self.domain_xml is not None else "qemu"

    def resolved_policy(self, host_cpus: tuple[int, ...]) -> placement.Policy:
        """The placement policy on a host whose usable CPUs are ``host_cpus``: ``policy``
        as given, or the ``pin`` option (default auto: vCPU i on the i-th host CPU) as a
        ``map`` policy.  Raises HostError when the pins do not exist or do not fit."""
        if self.policy is not None:
            return self.policy
        pin = self.pin if self.pin is not None else "auto"
        if pin == "none":
            return placement.parse_policy("float")
        if pin == "auto":
            if self.vcpus > len(host_cpus):
                raise HostError(f"vcpus={self.vcpus} but the host has {len(host_cpus)} CPUs: "
                                "use fewer vcpus or pin=none to let vCPUs float (oversubscribed)")
            cpus = host_cpus[:self.vcpus]
        else:
            cpus = pin
            if len(cpus) != self.vcpus:
                raise HostError(f"pin={','.join(map(str, cpus))} lists {len(cpus)} host CPUs for "
                                f"{self.vcpus} vCPUs: give one per vCPU")
            check_subset("pin", cpus, host_cpus, "CPU")
        text = f"map:0-{self.vcpus - 1}=" + ",".join(map(str, cpus))
        return placement.Policy(name="map", text=text, vcpu_map=tuple(
            ((v,), (c,), None) for v, c in enumerate(cpus)))

    def request(self, host_cpus: tuple[int, ...]) -> placement.PlacementRequest:
        """The placement request for this VM (policy already parsed)."""
        return placement.PlacementRequest(vcpus=self.vcpus, memory_mib=self.memory,
                                          policy=self.resolved_policy(host_cpus),
                                          guest_numa=self.numa, backing=self.backing)

    def corunner_request(self) -> placement.PlacementRequest | None:
        """The co-runner VM's placement request (same size, ``corunner_policy``), or None."""
        if self.corunner is None:
            return None
        return placement.PlacementRequest(vcpus=self.vcpus, memory_mib=self.memory,
                                          policy=self.corunner_policy)

