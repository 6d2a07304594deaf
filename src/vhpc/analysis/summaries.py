"""Grouping observations and describing each group (mean, median, CI, CV, outliers).

Numbers come from :mod:`vhpc.core.stats`; this module only decides what belongs to which group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from vhpc.core import logratio, stats
from vhpc.analysis.results import GROUP_ALL, GROUP_COLD, GROUP_WARM, Summary
from vhpc.core.metrics import Observation, ObservationColumns

GroupKey = tuple[str, str, str, str]  # (benchmark, params, metric, environment)


@dataclass
class Group:
    """Valid values and invalid counts of one (benchmark, params, metric, environment), split
    into all / cold (session index 0) / warm (session index > 0).  Unit and direction are those
    of the group's first observation.  ``arrays``: the same valid values as float64 arrays
    where :func:`group_observations` made the group (so the statistics convert nothing);
    :meth:`add` leaves it empty."""

    unit: str
    hib: bool
    values: dict[str, list[float]] = field(default_factory=lambda: {GROUP_ALL: []})
    invalid: dict[str, int] = field(default_factory=lambda: {GROUP_ALL: 0})
    sessions: bool = False
    arrays: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def array(self, name: str = GROUP_ALL) -> np.ndarray | list[float]:
        """The valid values of group ``name`` (all, cold, warm): the array, else the list."""
        return self.arrays[name] if name in self.arrays else self.values.get(name, [])

    def add(self, value: float | None, ok: bool, session_index: int | None) -> None:
        """Count one observation in ``all`` and, when it has a session index, cold or warm."""
        if ok:
            self.values[GROUP_ALL].append(value)
        else:
            self.invalid[GROUP_ALL] += 1
        if session_index is not None:
            self.sessions = True
            name = GROUP_COLD if session_index == 0 else GROUP_WARM
            self.values.setdefault(name, [])
            self.invalid.setdefault(name, 0)
            if ok:
                self.values[name].append(value)
            else:
                self.invalid[name] += 1


def group_observations(observations: Iterable[Observation] | ObservationColumns
                       ) -> dict[GroupKey, Group]:
    """One :class:`Group` per (benchmark, params, metric, environment), in order of each
    group's first observation; warm-up observations are skipped; invalid (``valid=False``) or
    non-finite values are counted, not kept.  Values keep the observations' order.

    The same grouping as :meth:`Group.add` once per observation, done on numpy columns
    (:class:`~vhpc.core.metrics.ObservationColumns`; any other iterable is turned into them
    first): a stable sort by group key, then one slice per group."""
    cols = observations if isinstance(observations, ObservationColumns) \
        else ObservationColumns.from_observations(observations)
    key = np.zeros(len(cols), dtype=np.int64)
    for name in ("benchmark", "params", "metric", "environment"):
        codes = getattr(cols, name)
        width = int(codes.max()) + 1 if len(codes) else 1
        if int(key.max(initial=0)) >= np.iinfo(np.int64).max // width:  # keep codes dense
            key = np.unique(key, return_inverse=True)[1].astype(np.int64)
        key = key * width + codes
    rows = np.flatnonzero(~cols.warmup)
    key = key[rows]
    order = np.argsort(key, kind="stable")
    rows, key = rows[order], key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else key
    ends = np.r_[starts[1:], len(rows)]
    value = cols.value[rows]
    ok = cols.valid[rows] & np.isfinite(value)
    session = cols.session_index[rows]
    cold, warm = session == 0, session > 0
    names = cols.names
    groups: dict[GroupKey, Group] = {}
    for s, e in sorted(zip(starts.tolist(), ends.tolist()), key=lambda se: rows[se[0]]):
        first = rows[s]
        g = groups[(names[cols.benchmark[first]], names[cols.params[first]],
                    names[cols.metric[first]], names[cols.environment[first]])] = Group(
            names[cols.unit[first]], bool(cols.higher_is_better[first]))
        v, k = value[s:e], ok[s:e]
        g.arrays[GROUP_ALL] = v[k]
        g.values[GROUP_ALL] = g.arrays[GROUP_ALL].tolist()
        g.invalid[GROUP_ALL] = int(e - s - np.count_nonzero(k))
        for name, part in ((GROUP_COLD, cold[s:e]), (GROUP_WARM, warm[s:e])):
            n = int(np.count_nonzero(part))
            if n:  # seen at least once
                g.sessions = True
                good = part & k
                g.arrays[name] = v[good]
                g.values[name] = g.arrays[name].tolist()
                g.invalid[name] = n - int(np.count_nonzero(good))
    return groups


def summarise(key: GroupKey, unit: str, hib: bool, values: Sequence[float], n_invalid: int,
              group: str, confidence: float) -> Summary:
    """:class:`Summary` of one group of valid values (metric unit) at ``confidence``
    (:func:`vhpc.core.stats.describe`; the geometric mean and its interval from
    :func:`vhpc.core.logratio.log_moments`)."""
    benchmark, params, metric, env = key
    d = stats.describe(values, confidence)
    lm = logratio.log_moments(values)
    g_lo, g_hi = lm.interval(confidence) if lm is not None else (None, None)
    return Summary(benchmark=benchmark, params=params, metric=metric, unit=unit,
                   higher_is_better=hib, environment=env, n=d.n, n_invalid=n_invalid,
                   mean=d.mean, median=d.median, stdev=d.stdev, ci_low=d.ci_low,
                   ci_high=d.ci_high, cv=d.cv, outliers=d.outliers, group=group,
                   gmean=lm.gmean if lm is not None else None, gmean_low=g_lo, gmean_high=g_hi,
                   log_sd=math.sqrt(lm.var) if lm is not None and lm.var is not None else None)


def summaries_of(ordered: list[GroupKey], groups: dict[GroupKey, Group],
                 confidence: float) -> list[Summary]:
    """Summaries in ``ordered`` order: for each key the ``all`` group, then cold and warm when
    the group has session indices and samples (valid or invalid) in them."""
    out: list[Summary] = []
    for k in ordered:
        g = groups[k]
        names = [GROUP_ALL] + ([GROUP_COLD, GROUP_WARM] if g.sessions else [])
        for name in names:
            if name != GROUP_ALL and not (g.values.get(name) or g.invalid.get(name)):
                continue
            out.append(summarise(k, g.unit, g.hib, g.array(name),
                                 g.invalid.get(name, 0), name, confidence))
    return out
