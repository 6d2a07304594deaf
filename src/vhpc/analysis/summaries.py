"""Grouping observations and describing each group (mean, median, CI, CV, outliers).

Numbers come from :mod:`vhpc.core.stats`; this module only decides what belongs to which group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Iterable

from vhpc.core import logratio, stats
from vhpc.analysis.results import GROUP_ALL, GROUP_COLD, GROUP_WARM, Summary
from vhpc.core.metrics import Observation

GroupKey = tuple[str, str, str, str]  # (benchmark, params, metric, environment)


@dataclass
class Group:
    """Valid values and invalid counts of one (benchmark, params, metric, environment), split
    into all / cold (session index 0) / warm (session index > 0).  Unit and direction are those
    of the group's first observation."""

    unit: str
    hib: bool
    values: dict[str, list[float]] = field(default_factory=lambda: {GROUP_ALL: []})
    invalid: dict[str, int] = field(default_factory=lambda: {GROUP_ALL: 0})
    sessions: bool = False

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


def group_observations(observations: Iterable[Observation]) -> dict[GroupKey, Group]:
    """One :class:`Group` per (benchmark, params, metric, environment); warm-up observations
    are skipped; invalid (``valid=False``) or non-finite values are counted, not kept.

    The same grouping as :meth:`Group.add` once per observation, in one loop over plain lists
    (10^6 observations: the loop is most of :func:`vhpc.analysis.analyse`'s time)."""
    groups: dict[GroupKey, Group] = {}
    # per key: [all values, all invalid, cold values, cold invalid, warm values, warm invalid]
    slots: dict[GroupKey, list] = {}
    isfinite = math.isfinite
    key_of = attrgetter("benchmark", "params", "metric", "environment")
    fields = attrgetter("warmup", "value", "valid", "session_index")
    for o in observations:
        warmup, v, valid, session_index = fields(o)
        if warmup:
            continue
        key = key_of(o)
        s = slots.get(key)
        if s is None:
            g = groups[key] = Group(o.unit, o.higher_is_better)
            s = slots[key] = [g.values[GROUP_ALL], 0, [], 0, [], 0]
        ok = valid and v is not None and isfinite(v)
        if ok:
            s[0].append(v)
        else:
            s[1] += 1
        if session_index is not None:
            j = 2 if session_index == 0 else 4
            if ok:
                s[j].append(v)
            else:
                s[j + 1] += 1
    for key, (_, bad, cold, bad_cold, warm, bad_warm) in slots.items():
        g = groups[key]
        g.invalid[GROUP_ALL] = bad
        for name, vals, n_bad in ((GROUP_COLD, cold, bad_cold), (GROUP_WARM, warm, bad_warm)):
            if vals or n_bad:  # seen at least once
                g.sessions = True
                g.values[name], g.invalid[name] = vals, n_bad
    return groups


def summarise(key: GroupKey, unit: str, hib: bool, values: list[float], n_invalid: int,
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
            out.append(summarise(k, g.unit, g.hib, g.values.get(name, []),
                                 g.invalid.get(name, 0), name, confidence))
    return out
