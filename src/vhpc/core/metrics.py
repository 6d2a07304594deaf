"""Plain data types shared by every room (no behaviour, no I/O).

Terms follow docs/design.md: a *metric* has a name, a unit and a direction; a *sample* is one
metric value from one trial; an *observation* is a stored sample with the context the analysis
needs (environment, benchmark, parameters, trial position); :class:`ObservationColumns` holds
many observations as numpy columns, the form the analysis groups without a loop per
observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Iterable, Iterator, Sequence

import numpy as np


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

    ``signed``: the metric's values can be negative (a difference), so it has no log scale:
    the analysis compares it by the difference of means in its unit (Welch), whatever values
    a campaign happened to see, and gives it no coefficient of variation (docs/statistics.md).
    ``can_be_zero``: the values are never negative but can be 0 (a share or a count that is 0
    when nothing happened): no log scale either, compared as a signed metric is, but named
    for what it is ("can be 0"), not "signed".
    """

    name: str
    unit: str
    higher_is_better: bool
    description: str = ""
    inverse_of: str = ""
    same_as: str = ""
    signed: bool = False
    can_be_zero: bool = False


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


#: the text columns of :class:`ObservationColumns` (codes into its ``names``)
TEXT_COLUMNS = ("environment", "benchmark", "params", "metric", "unit")
_FIELDS = ("environment", "benchmark", "params", "metric", "unit", "higher_is_better", "value",
           "valid", "warmup", "trial_id", "round", "session_index")


def _codes(column: Sequence[str], index: dict[str, int]) -> np.ndarray:
    """int32 codes of ``column``'s strings in ``index`` (new strings appended to it, in order
    of first appearance)."""
    for s in dict.fromkeys(column):
        index.setdefault(s, len(index))
    return np.fromiter(map(index.__getitem__, column), np.int32, count=len(column))


@dataclass(frozen=True, eq=False)
class ObservationColumns:
    """Observations as columns, one row per stored sample, in the store's order.

    Text columns (``environment``, ``benchmark``, ``params``, ``metric``, ``unit``) are int32
    codes into ``names`` (one table for all five); ``higher_is_better``, ``valid``, ``warmup``:
    bool; ``value``: float64 (NaN where a value was None); ``trial_id``, ``round``: int64;
    ``session_index``: float64, NaN for None (no sessions: native).  All of one length.
    """

    names: tuple[str, ...]
    environment: np.ndarray
    benchmark: np.ndarray
    params: np.ndarray
    metric: np.ndarray
    unit: np.ndarray
    higher_is_better: np.ndarray
    value: np.ndarray
    valid: np.ndarray
    warmup: np.ndarray
    trial_id: np.ndarray
    round: np.ndarray
    session_index: np.ndarray

    def __len__(self) -> int:
        return len(self.value)

    @classmethod
    def from_columns(cls, columns: Sequence[Sequence[Any]]) -> "ObservationColumns":
        """From twelve equal-length sequences in :class:`Observation`'s field order (text,
        text, text, text, text, bool, number or None, bool, bool, int, int, int or None)."""
        index: dict[str, int] = {}
        text = [_codes(columns[i], index) for i in range(5)]
        return cls(tuple(index), *text,
                   np.asarray(columns[5], dtype=bool),
                   np.array(columns[6], dtype=np.float64),
                   np.asarray(columns[7], dtype=bool), np.asarray(columns[8], dtype=bool),
                   np.asarray(columns[9], dtype=np.int64),
                   np.asarray(columns[10], dtype=np.int64),
                   np.array(columns[11], dtype=np.float64))

    @classmethod
    def from_observations(cls, observations: Iterable[Observation]) -> "ObservationColumns":
        """The columns of any iterable of :class:`Observation` (consumed once)."""
        rows = list(map(attrgetter(*_FIELDS), observations))
        if not rows:
            return cls.from_columns([[] for _ in _FIELDS])
        return cls.from_columns(list(zip(*rows)))

    def text(self, column: str) -> list[str]:
        """One text column as strings."""
        names = self.names
        return [names[c] for c in getattr(self, column).tolist()]

    def __iter__(self) -> Iterator[Observation]:
        """The rows as :class:`Observation` (values as floats, NaN where a value was None)."""
        cols = [self.text(c) for c in TEXT_COLUMNS]
        value = self.value.tolist()
        session = [None if s != s else int(s) for s in self.session_index.tolist()]
        for row in zip(*cols, self.higher_is_better.tolist(), value, self.valid.tolist(),
                       self.warmup.tolist(), self.trial_id.tolist(), self.round.tolist(),
                       session):
            yield Observation(*row)
