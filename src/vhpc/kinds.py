"""Environment kinds: one immutable, typed options model per kind, in one registry.

``REGISTRY`` maps a kind name (``native``, ``vm``; later ``vcluster``, ``ssh``) to an
:class:`EnvKind`: its options model (a frozen pydantic model, validated at the edge, never
touching the host) and the dotted path of the factory that builds the
:class:`~vhpc.environments.base.Environment` when a campaign starts.  A new kind slots in with
one :func:`register` call; the spec parser, ``--dry-run`` and the campaign find it there.

Each options model parses every field from its CLI text (``-e vm:pin=0,1``) or its YAML value
once, into typed values (CPU lists as tuples of ints, the placement policy as a parsed
:class:`~vhpc.placement.Policy`), and serialises back to the same text (``given()``), so a
stored campaign spec reloads to equal objects.  Checks that need the host (does CPU 5 exist,
does the VM fit) are :meth:`EnvOptions.check_host`, called when a campaign starts or is
dry-run, with host facts passed in as data (:class:`HostFacts`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, InstanceOf, PlainSerializer,
                      model_validator)

from vhpc import placement
from vhpc.core.errors import HostError
from vhpc.topology import Topology, format_list, parse_list

if TYPE_CHECKING:
    from vhpc.environments.base import Environment

#: Upper bounds that keep every number finite and every plan small (no host has more).
MAX_CPUS = 4096
MAX_MEMORY_MIB = 1 << 24   # 16 TiB
MAX_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True)
class HostFacts:
    """What host-dependent checks need, read once when a campaign starts (or is dry-run):
    ``cpus``: host CPUs this process may use (sched_getaffinity, ascending);
    ``topology``: the host :class:`~vhpc.topology.Topology` (hwloc)."""

    cpus: tuple[int, ...]
    topology: Topology

    @classmethod
    def live(cls, topology_source: str | None = None) -> "HostFacts":
        """The facts of the host this process runs on: its usable CPUs (sched_getaffinity)
        and topology (hwloc, or ``topology_source``).  Raises TopologyError."""
        import os

        from vhpc import topology

        return cls(tuple(sorted(os.sched_getaffinity(0))), topology.load(topology_source))


# ---------------------------------------------------------------------------- typed fields


def _index_list(value: Any) -> tuple[int, ...]:
    """A cpulist (``"0-3,8"``, ``3``, ``[0, 1]``) → sorted unique ints (topology.parse_list)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a list of numbers like 0-3,8")
    if isinstance(value, int):
        value = str(value)
    elif isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                  for v in value):
        value = ",".join(map(str, value))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a list of numbers like 0-3,8")
    out = parse_list(value)
    if out and out[-1] >= MAX_CPUS:
        raise ValueError(f"{value!r}: index {out[-1]} is beyond {MAX_CPUS - 1}")
    return out


def _ordered_list(value: Any) -> tuple[int, ...]:
    """Like :func:`_index_list` but in the order given (``pin=1,0``: vCPU 0 on CPU 1)."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} is not auto, none or a CPU list like 0-1 or 0,2")
    return tuple(c for part in value.split(",") for c in _index_list(part))


def _pin(value: Any) -> str | tuple[int, ...]:
    if value in ("auto", "none"):
        return value
    try:
        return _ordered_list(value)
    except ValueError:
        raise ValueError(f"pin={value!r}: use auto, none or a CPU list like 0-1 or 0,2") from None


def _policy(value: Any) -> placement.Policy:
    if isinstance(value, placement.Policy):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a placement policy: use float, compact, spread, "
                         "span:K, confine:N, nodes:LIST or map:... (docs/placement.md)")
    return placement.parse_policy(value)


def guest_numa(value: Any) -> str | int:
    """Guest NUMA nodes: ``hidden`` (one), ``mirror`` or a count 1..MAX_CPUS (1 → hidden).
    Raises ValueError saying what is allowed."""
    if value in ("hidden", "mirror"):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CPUS:
        return "hidden" if value == 1 else value
    raise ValueError(f"numa={value!r}: use hidden, mirror or a number of guest nodes 1..{MAX_CPUS}")


def _guest_bind(value: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return _index_list(value[0]), _index_list(value[1])
    cpu, sep, mem = str(value).partition(":") if isinstance(value, (str, int)) else ("", "", "")
    if not sep or not cpu or not mem:
        raise ValueError(f"guest_bind={value!r}: use CPUNODES:MEMNODES, e.g. 0:1 "
                         "(numactl --cpunodebind=0 --membind=1 inside the guest)")
    return _index_list(cpu), _index_list(mem)


IndexList = Annotated[tuple[int, ...], BeforeValidator(_index_list),
                      PlainSerializer(format_list, return_type=str)]
Pin = Annotated[str | tuple[int, ...], BeforeValidator(_pin),
                PlainSerializer(lambda v: v if isinstance(v, str) else ",".join(map(str, v)),
                                return_type=str)]
PolicyField = Annotated[InstanceOf[placement.Policy], BeforeValidator(_policy),
                        PlainSerializer(lambda p: p.text, return_type=str)]
GuestNuma = Annotated[str | int, BeforeValidator(guest_numa)]
GuestBind = Annotated[tuple[tuple[int, ...], tuple[int, ...]], BeforeValidator(_guest_bind),
                      PlainSerializer(lambda b: f"{format_list(b[0])}:{format_list(b[1])}",
                                      return_type=str)]


# ---------------------------------------------------------------------------- models


class EnvOptions(BaseModel):
    """Base of the per-kind options models: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def given(self) -> dict[str, Any]:
        """The options the user set, in their text form (``{"pin": "0,1"}``)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def check_host(self, host: HostFacts) -> None:
        """Raise HostError (or PlacementError) when this host cannot provide these options."""

    def placement_text(self, host: HostFacts) -> str:
        """One line: where this environment's benchmarks will run on ``host`` (``--dry-run``)."""
        return "unpinned"


def _check_subset(field: str, values: tuple[int, ...], have, what: str) -> None:
    missing = sorted(set(values) - set(have))
    if missing:
        raise HostError(f"{field}={format_list(values)}: this host has no {what} "
                        f"{format_list(missing)} (it has {what}s {format_list(have)})")


class Slowdown(BaseModel):
    """Advanced options of ``native`` and ``vm`` for ``vhpc calibrate`` (docs/calibrate.md):
    ``slowdown`` δ (0.05 = 5 %) slows every trial by CPU bandwidth control
    (environments/throttled.py); ``slowdown_cpus`` the CPUs the workload keeps busy
    (default: the environment's CPUs)."""

    slowdown: float | None = Field(None, ge=0, lt=10, allow_inf_nan=False)
    slowdown_cpus: int | None = Field(None, ge=1, le=MAX_CPUS)


class NativeOptions(EnvOptions, Slowdown):
    """``native``: ``cpus`` (host CPU list, sched_setaffinity), ``nodes`` (host NUMA nodes for
    CPUs and memory, numactl --cpunodebind/--membind), ``membind`` (memory nodes only),
    ``strict`` (fail a trial whose binding does not read back as planned), and
    :class:`Slowdown`'s."""

    cpus: IndexList | None = None
    nodes: IndexList | None = None
    membind: IndexList | None = None
    strict: bool = False

    def check_host(self, host: HostFacts) -> None:
        if self.cpus is not None:
            _check_subset("cpus", self.cpus, host.cpus, "CPU")
        for field in ("nodes", "membind"):
            if getattr(self, field) is not None:
                _check_subset(field, getattr(self, field), host.topology.node_ids, "NUMA node")

    def placement_text(self, host: HostFacts) -> str:
        parts = [f"cpus {format_list(self.cpus)}" if self.cpus else
                 f"any of cpus {format_list(host.cpus)}"]
        if self.nodes is not None:
            parts.append(f"numactl --cpunodebind={format_list(self.nodes)}")
        if self.nodes is not None or self.membind is not None:
            parts.append(f"--membind={format_list(self.membind or self.nodes)}")
        return " ".join(parts)


class VmOptions(EnvOptions, Slowdown):
    """``vm`` (QEMU guest; environments/vm.py): vcpus, memory (MiB), pin (auto | none | CPU
    list, vCPU i on the i-th) or policy (docs/placement.md), numa (hidden | mirror | count),
    backing (4k | 2m | 1g), accel (auto | kvm | tcg), kernel (path), boot_timeout (s), strict,
    guest_bind (CPUNODES:MEMNODES inside the guest), corunner (low | medium | high) placed by
    corunner_policy; backend (qemu | libvirt: a transient libvirt domain, docs/libvirt.md),
    uri (libvirt connection), domain_xml (the user's own domain XML file)."""

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
    backend: Literal["qemu", "libvirt"] | None = None  # None: qemu, or libvirt for domain_xml
    uri: str | None = Field(None, min_length=1, max_length=4096)
    domain_xml: str | None = Field(None, min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _pin_or_policy(self):
        if self.pin is not None and self.policy is not None:
            raise ValueError("give either pin= or policy=, not both")
        for opt in ("domain_xml", "uri"):
            if getattr(self, opt) and not self.libvirt or (
                    getattr(self, opt) and self.backend == "qemu"):
                raise ValueError(f"{opt}= needs backend=libvirt")
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

    @property
    def libvirt(self) -> bool:
        """True when the guest runs through libvirtd (``backend=libvirt`` or ``domain_xml``)."""
        return self.backend == "libvirt" or (self.backend is None and self.domain_xml is not None)

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
            _check_subset("pin", cpus, host_cpus, "CPU")
        text = f"map:0-{self.vcpus - 1}=" + ",".join(map(str, cpus))
        return placement.Policy(kind="map", text=text, vcpu_map=tuple(
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

    def check_host(self, host: HostFacts) -> None:
        if self.domain_xml:  # the user's domain defines the placement; libvirt checks it
            return
        topo = host.topology
        total = sum(n.memory_bytes or 0 for n in topo.nodes) >> 20
        if topo.memory_known and total and self.memory > total:
            raise HostError(f"memory={self.memory} MiB but the host has {total} MiB: "
                            "give less memory")
        placement.place(topo, self.request(host.cpus))
        if self.corunner is not None:
            placement.place(host.topology, self.corunner_request())

    def placement_text(self, host: HostFacts) -> str:
        if self.domain_xml:
            return f"as given in {self.domain_xml} (libvirt)"
        text = placement.describe(placement.place(host.topology, self.request(host.cpus)))
        if self.corunner is not None:
            text += (f"; co-runner ({self.corunner}): "
                     + placement.describe(placement.place(host.topology, self.corunner_request())))
        return text


# ---------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class EnvKind:
    """One environment kind: ``name``; ``options``: its options model; ``factory``:
    ``"module:function"`` building the Environment as ``function(name, options, host)``
    (imported only when a campaign starts, so parsing never loads environment code);
    ``summary``: one line for help texts."""

    name: str
    options: type[EnvOptions]
    factory: str
    summary: str = ""

    def build(self, name: str, options: EnvOptions, host: HostFacts) -> "Environment":
        """Construct the environment (may probe the host: QEMU, guest kernel)."""
        module, _, func = self.factory.partition(":")
        make: Callable[..., Environment] = getattr(importlib.import_module(module), func)
        return make(name, options, host)


REGISTRY: dict[str, EnvKind] = {}


def register(kind: EnvKind) -> None:
    """Add an environment kind (a later registration of the same name replaces it)."""
    REGISTRY[kind.name] = kind


def get(name: str) -> EnvKind:
    """The kind called ``name``; raises ValueError listing the known kinds."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown environment {name!r}: choose one of "
                         f"{', '.join(REGISTRY)}") from None


register(EnvKind("native", NativeOptions, "vhpc.factories:native",
                 "benchmarks directly on the host"))
register(EnvKind("vm", VmOptions, "vhpc.factories:vm",
                 "benchmarks in a QEMU guest sharing the host's root"))


from vhpc import kinds_more  # noqa: E402,F401  (registers ssh and vcluster)
