"""Plain data types shared by every room (no behaviour, no I/O).

Terms follow docs/design.md: a *metric* has a name, a unit and a direction; a *sample* is one
metric value from one trial; an *observation* is a stored sample with the context the analysis
needs (environment, benchmark, parameters, trial position).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Metric:
    """What a benchmark reports.

    name: identifier such as ``triad_bw``; unit: such as ``GB/s``, ``us``, ``s``;
    higher_is_better: direction used for overhead and verdicts.

    Declared pairs (one effect measured twice, so the analysis gives both one verdict):
    ``inverse_of`` names the metric of the same benchmark whose per-trial product with this one
    is a constant (a rate and its time: LAMMPS's ``timesteps_per_s`` and ``loop_time``, opposite
    directions); ``same_as`` names the metric whose per-trial quotient with this one is a
    constant (one rate in two units, the same direction).  Empty: no partner.  The benchmark
    declares them; nothing is inferred from the data.
    """

    name: str
    unit: str
    higher_is_better: bool
    description: str = ""
    inverse_of: str = ""
    same_as: str = ""


@dataclass(frozen=True)
class Sample:
    """One metric value parsed from one trial's raw output. ``valid`` is False when the
    benchmark's own verification failed: such samples are stored and reported, never averaged."""

    metric: str
    value: float
    unit: str
    higher_is_better: bool
    valid: bool = True


@dataclass(frozen=True)
class Observation:
    """A stored sample with its context, as the analysis room consumes it.

    params: canonical parameter string ``"k=v,k=v"`` (sorted keys, may be empty).
    warmup: warm-up trials are stored but excluded from statistics.
    session_index: position of the trial within its VM session (0 = cold, first after boot);
    None for environments without sessions (native).
    """

    environment: str
    benchmark: str
    params: str
    metric: str
    unit: str
    higher_is_better: bool
    value: float
    valid: bool
    warmup: bool
    trial_id: int
    round: int = 0
    session_index: int | None = None


@dataclass(frozen=True)
class EnvInfo:
    """An environment as analysed and reported: its name, kind (``native``/``vm``), the
    accelerator (``kvm``, ``tcg`` or None for native) and its fingerprint (CPU model, kernel,
    QEMU version, placement as applied, host knobs)."""

    name: str
    kind: str
    accel: str | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)

    @property
    def emulated(self) -> bool:
        """True when results come from TCG emulation, not hardware virtualization."""
        return self.accel == "tcg"
