"""What every environment kind's options share: host facts, typed option fields, the base model.

Each kind's options model (``environments/<kind>/options.py``) parses every field from its CLI
text (``-e vm:pin=0,1``) or its YAML value once, into typed values (CPU lists as tuples of ints,
the placement policy as a parsed :class:`~vhpc.placement.Policy`), and serialises back to the
same text (``given()``), so a stored campaign spec reloads to equal objects.  This is the one
place an option is validated.  Checks that need the host (does CPU 5 exist, does the VM fit)
are the kind's :meth:`~vhpc.environments.kind.EnvironmentKind.plan`, called once per
environment when a campaign starts or is dry-run, with host facts passed in as data
(:class:`HostFacts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, InstanceOf, PlainSerializer

from vhpc import placement
from vhpc.core.errors import HostError
from vhpc.topology import Topology, format_list, parse_list

#: Upper bounds that keep every number finite and every plan small (no host has more).
MAX_CPUS = 4096
MAX_MEMORY_MIB = 1 << 24   # 16 TiB
MAX_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True)
class HostFacts:
    """What host-dependent checks need, read once when a campaign starts (or is dry-run):
    ``cpus``: host CPUs this process may use (sched_getaffinity, ascending);
    ``topology``: the host :class:`~vhpc.topology.Topology` (hwloc); ``compute_nodes``: the compute
    nodes an environment may spread over (the executor's allocation, ``slurm:nodes=N``; 1 =
    this host only); ``remote``: the trials run on an executor's compute nodes, not on this
    host.  Under an executor that does not run here, ``cpus`` and ``topology`` stand for each
    compute node's."""

    cpus: tuple[int, ...]
    topology: Topology
    compute_nodes: int = 1
    remote: bool = False

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

    @property
    def guest_sees_host_files(self) -> bool:
        """Its guests (where it boots any) read the host's files through the shared root, so
        a host path they cannot see there is refused before a campaign runs; False where
        inputs are copied into the guest instead (``vm:image=``).  True by default."""
        return True



def check_subset(field: str, values: tuple[int, ...], have, what: str) -> None:
    """Refuse ``values`` of option ``field`` that are not among this host's ``have`` (``what``:
    "CPU", "NUMA node").  Raises HostError naming the missing ones and those the host has."""
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


