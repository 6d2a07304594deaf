"""Typed per-trial records passed from the measuring rooms to the store and the report.

Environments produce an :class:`AppliedPlacement` (placement as applied and read back, with
page locality) and :class:`Diagnostics` (resource usage, faults, vmstat deltas, hardware
counters) for every trial; the store keeps them as JSON with a ``version`` field in the trial's
``applied_json`` / ``diagnostics_json`` column; the report reads their fields.  This module
imports nothing from vhpc but the error base, so every room may use it (measurement never imports analysis or
report).

A value a host or guest does not expose is never invented: counter records carry
``unavailable`` (the reason) instead of numbers.

Versions: :data:`RECORD_VERSION` is written with every record.  JSON without a version (stores
written before records were typed) has the same keys and is read as version 0; a newer version
raises :class:`RecordError` with a one-line message.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from vhpc.core.errors import VhpcError

__all__ = [
    "RECORD_VERSION", "RecordError", "Record", "VcpuReadback", "MappingMemory",
    "MemoryReadback", "PageLocality", "GuestNodeReadback", "CorunnerReadback", "AppliedPlacement",
    "Rusage", "PerfCounters", "Diagnostics", "dump", "extended", "load_applied", "load_diagnostics",
]

#: version written with every record (bump when a field changes meaning or is removed)
RECORD_VERSION = 1


class RecordError(VhpcError):
    """A stored record cannot be read (written by a newer vhpc, or corrupt); one line with
    what to do."""


#: The hypervisor process id is read under its name and under ``qemu_pid`` (stores written
#: before the backends owned their dialects).
PID_ALIASES = AliasChoices("hypervisor_pid", "qemu_pid")


class Record(BaseModel):
    """Base of every record: immutable; unknown fields are kept (a newer environment may add
    some) but nothing in vhpc reads them."""

    model_config = ConfigDict(frozen=True, extra="allow")


class VcpuReadback(Record):
    """One vCPU thread read back from the host (``/proc/PID/task/TID``): ``thread`` id,
    ``allowed`` host CPUs (None when unreadable), ``last_cpu`` it ran on (proc(5) stat field
    39) and that CPU's host NUMA node ``last_node``."""

    vcpu: int
    thread: int | None = None
    allowed: list[int] | None = None
    last_cpu: int | None = None
    last_node: int | None = None


class MappingMemory(Record):
    """One large anonymous/hugepage mapping of a process (guest RAM): numa_maps policy
    (``bind:0``, ``default``), resident MiB per host node, hugepage-backed or not."""

    policy: str = ""
    node_mib: dict[int, float] = {}
    huge: bool = False


class PageLocality(Record):
    """Share of resident guest memory on the planned host nodes: ``nodes`` planned,
    ``on_nodes_mib`` resident on them, ``total_mib`` resident in the large mappings (MiB)."""

    nodes: list[int]
    on_nodes_mib: float
    total_mib: float

    @property
    def percent(self) -> float:
        """Locality in percent (0–100)."""
        return 100.0 * self.on_nodes_mib / self.total_mib if self.total_mib else 0.0


class MemoryReadback(Record):
    """A process's resident memory per host NUMA node (MiB, from ``/proc/PID/numa_maps``,
    numa(7)) and its large mappings."""

    node_mib: dict[int, float] = {}
    mappings: list[MappingMemory] = []

    def locality(self, nodes: set[int] | list[int]) -> PageLocality | None:
        """:class:`PageLocality` of the large mappings on ``nodes``; None when no node is
        planned or nothing is resident."""
        total = sum(sum(m.node_mib.values()) for m in self.mappings)
        if not nodes or not total:
            return None
        on = sum(mib for m in self.mappings for n, mib in m.node_mib.items() if n in set(nodes))
        return PageLocality(nodes=sorted(nodes), on_nodes_mib=on, total_mib=total)


class GuestNodeReadback(Record):
    """A NUMA node as the guest sees it (its sysfs): ``cpus`` list text ("" for memory-only),
    ``mem_mib``."""

    node: int
    cpus: str = ""
    mem_mib: int = 0


class CorunnerReadback(Record):
    """The co-runner VM beside a measured VM: ``load`` label, its hypervisor process id, its vCPU threads, the
    placement description."""

    load: str = ""
    hypervisor_pid: int | None = Field(None, validation_alias=PID_ALIASES)
    vcpus: list[VcpuReadback] = []
    plan: str | None = None


class RankPlacement(Record):
    """Where one MPI rank ran: one entry of a trial's ``applied.ranks``.  ``rank``; in a guest
    cluster the guest's index ``vm`` (the stored name), its host name ``guest``, the ``vcpu``
    the rank ran on and the ``host_cpu`` under that vCPU; ``node``: the Slurm node, across
    nodes.  Every field is optional: other environments and older stores write fewer."""

    rank: int | None = None
    vm: int | None = None
    guest: str | None = None
    vcpu: int | None = None
    host_cpu: int | None = None
    node: str | None = None

    @classmethod
    def read(cls, entry: Any) -> "RankPlacement | None":
        """``entry`` (a stored mapping) as a RankPlacement; None when it is no mapping or a
        field has the wrong type (a damaged row, which a report leaves out)."""
        try:
            return cls.model_validate(entry) if isinstance(entry, dict) else None
        except ValidationError:
            return None


class AppliedPlacement(Record):
    """Placement as applied, read back after a trial.

    Native: ``cpus`` the command may run on, ``numactl`` prefix used.  VM: ``accel``,
    ``hypervisor_pid`` (the process running the guest, whichever backend started it; stored
    as ``qemu_pid`` before 0.4 and still read under that name), ``session`` (boot count), ``vcpus`` read back, ``emulator_cpus`` (QEMU's other
    threads: CPU list, or a sentence when shared), ``memory`` per host node, ``page_locality``
    on the planned nodes, ``guest_numa`` (the guest's view), ``corunner``.  ``mismatches``:
    differences from the plan, one sentence each ([] when all agree).
    """

    cpus: list[int] | None = None
    numactl: list[str] | None = None
    accel: str | None = None
    hypervisor_pid: int | None = Field(None, validation_alias=PID_ALIASES)
    session: int | None = None
    vcpus: list[VcpuReadback] = []
    emulator_cpus: list[int] | str | None = None
    memory: MemoryReadback | None = None
    page_locality: PageLocality | None = None
    guest_numa: list[GuestNodeReadback] | None = None
    corunner: CorunnerReadback | None = None
    mismatches: list[str] = []


class Rusage(Record):
    """Resource usage of the benchmark's processes (getrusage(2)): CPU seconds, faults,
    context switches; ``unavailable`` = why there are none."""

    user_s: float | None = None
    sys_s: float | None = None
    minflt: float | None = None
    majflt: float | None = None
    nvcsw: float | None = None
    nivcsw: float | None = None
    unavailable: str | None = None


class PerfCounters(Record):
    """Hardware counters (``perf stat``): raw ``counts`` by event, CPI = cycles/instructions,
    MPKI = LLC misses per 1000 instructions (as Cheng and Chen, 3PGCIC 2013, count them);
    ``unavailable`` = why there are none."""

    counts: dict[str, float | None] = {}
    cpi: float | None = None
    mpki: float | None = None
    unavailable: str | None = None


class Diagnostics(Record):
    """Per-trial diagnostics.  Counters as deltas over the trial: ``guest_vmstat``
    (/proc/vmstat of the guest), ``qemu_faults`` (QEMU's minflt/majflt), ``kvm_exits`` (KVM
    debugfs); ``memory_node_mib_before``/``after``: QEMU's resident MiB per host node.
    ``unavailable``: counter name → reason, for counters the host or guest does not expose.
    ``loadavg_before``/``after``: this host's load averages around the trial."""

    rusage: Rusage | None = None
    perf: PerfCounters | None = None
    guest_vmstat: dict[str, float] | None = None
    qemu_faults: dict[str, float] | None = None
    kvm_exits: dict[str, float] | None = None
    memory_node_mib_before: dict[int, float] | None = None
    memory_node_mib_after: dict[int, float] | None = None
    #: this host's load average (1, 5, 15 min; getloadavg(3)) just before and just after the
    #: trial: how busy the machine vhpc ran on was while it measured
    loadavg_before: tuple[float, float, float] | None = None
    loadavg_after: tuple[float, float, float] | None = None
    unavailable: dict[str, str] = {}

    @classmethod
    def build(cls, **values: Any) -> Diagnostics:
        """Diagnostics from counter values, each a record, a dict, None, or
        ``{"unavailable": reason}``: every reason (also a record's ``unavailable``) is
        collected in ``unavailable``; counter dicts that are only a reason become None."""
        reasons = {}
        for key, val in list(values.items()):
            if isinstance(val, Record) and getattr(val, "unavailable", None):
                reasons[key] = str(val.unavailable)
            elif isinstance(val, dict) and set(val) == {"unavailable"}:
                reasons[key] = str(val["unavailable"])
                values[key] = val if key in ("rusage", "perf") else None
        return cls(**values, unavailable=reasons)


def dump(record: Record | dict | None) -> str | None:
    """JSON text of a record with ``"version": RECORD_VERSION`` (None for None).  A plain dict
    (an environment not yet typed) is kept as it is, with the version."""
    if record is None:
        return None
    data = record.model_dump(mode="json") if isinstance(record, Record) else dict(record)
    return json.dumps({"version": RECORD_VERSION, **data})


def extended(record: Record | dict | None, model: type[Record], **fields: Any) -> Record:
    """A ``model`` record holding ``record``'s fields (a record or a plain dict, None = none)
    plus ``fields`` (which win): for a room that adds facts to another room's record, e.g.
    the Slurm executor adding its job ids to an environment's applied placement."""
    data = record.model_dump() if isinstance(record, Record) else dict(record or {})
    return model(**{**data, **fields})


def _load(text: str | None, model: type[Record], what: str) -> Any:
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        raise RecordError(f"a stored {what} record is not JSON: the store is damaged; re-run"
                          " the campaign") from None
    version = data.pop("version", 0) if isinstance(data, dict) else 0
    if version > RECORD_VERSION:
        raise RecordError(f"a stored {what} record has version {version}, this vhpc reads up to"
                          f" {RECORD_VERSION}: upgrade vhpc to read this store")
    try:
        if model is Diagnostics and version == 0:
            return Diagnostics.build(**data)
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RecordError(f"a stored {what} record (version {version}) has an unreadable field"
                          f" {'.'.join(map(str, first['loc']))}: re-run the campaign with this"
                          " vhpc, or read it with the vhpc that wrote it") from None


def load_applied(text: str | None) -> AppliedPlacement | None:
    """:class:`AppliedPlacement` from stored JSON (any version ≤ RECORD_VERSION), None for
    NULL.  Raises :class:`RecordError` (one line) when it cannot be read."""
    return _load(text, AppliedPlacement, "applied placement")


def load_diagnostics(text: str | None) -> Diagnostics | None:
    """:class:`Diagnostics` from stored JSON (any version ≤ RECORD_VERSION), None for NULL.
    Raises :class:`RecordError` (one line) when it cannot be read."""
    return _load(text, Diagnostics, "diagnostics")


def json_ready(value: Any) -> Any:
    """``value`` with every NaN or ±inf float replaced by None, through dicts, lists and tuples
    (tuples become lists): what strict JSON (RFC 8259, ``json.dumps(allow_nan=False)``) can
    hold.  Other values pass unchanged."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value
