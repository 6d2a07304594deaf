"""Comparisons against the baseline: one model decides and shows (docs/statistics.md).

Ratio of geometric means with Welch's t on ln values (:func:`vhpc.core.logratio.log_welch`); the
interval at the level of the comparison's family (Holm's, :func:`vhpc.core.logratio.holm_level`,
for a row Holm calls different; Bonferroni's 1 − α/m, where equivalence is read, for the rest);
the verdict read off that interval (:func:`verdict_of`): slower / faster / equivalent within
the margin / inconclusive.  Values ≤ 0 (or a metric declared signed): Welch's difference of
means (:func:`difference_verdict`); ``--method rank``: Hodges–Lehmann on ln values.  Every
number comes from :mod:`vhpc.core.stats`; a row never says "slower" beside an interval that
contains 1, nor "equivalent" beside one that leaves the margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from vhpc.core import logratio, power, stats
from vhpc.analysis.results import (
    EQUIVALENT, FASTER, INCONCLUSIVE, INSUFFICIENT, INVERSE, POINT, SAME, SECONDARY, SLOWER,
    Comparison, Summary,
)
from vhpc.analysis.summaries import GroupKey


def overhead_pct(ratio: float | None, higher_is_better: bool) -> float | None:
    """Overhead in percent from ratio = env/baseline, positive = environment worse.

    Lower-is-better: ``(ratio − 1)·100``; higher-is-better: ``(1/ratio − 1)·100`` (None when
    ratio ≤ 0).  See :class:`~vhpc.analysis.Comparison` for why rates are inverted.
    """
    if ratio is None or not math.isfinite(ratio):
        return None
    if higher_is_better:
        if ratio <= 0:
            return None
        return (1.0 / ratio - 1.0) * 100.0
    return (ratio - 1.0) * 100.0


def overhead_interval(lo: float | None, hi: float | None, hib: bool) -> tuple[float | None, float | None]:
    """The ratio interval mapped through :func:`overhead_pct` (monotone; decreasing for rates)."""
    if hib:
        return (overhead_pct(hi, True), overhead_pct(lo, True))
    return (overhead_pct(lo, False), overhead_pct(hi, False))


#: a value below this share of its sample's median counts as near 0 in a positive metric:
#: kept on the log scale, but flagged (one 1e-9 among values near 1 makes a ÷100 headline)
NEAR_ZERO = 1e-3

#: the note of a metric with values ≤ 0 that did not declare itself signed
SIGNED_NOTE = ("values ≤ 0: no log scale; compared by the difference of means (Welch) in the "
               "metric's unit, overhead relative to the baseline's |mean| (declare the metric "
               "signed: true if it can be ≤ 0)")


@dataclass
class Draft:
    """A comparison before its family is known: the two groups, their values, Welch's t on
    ln values (None when a side has fewer than 2 values or a value ≤ 0) and, for values ≤ 0
    (``signed``), Welch's difference of means (:func:`vhpc.core.stats.welch_difference`)."""

    env: Summary
    base: Summary
    x: list[float]
    y: list[float]
    lw: logratio.LogWelch | None
    signed: bool = False
    rank: bool = False
    declared: bool = False

    @property
    def p(self) -> float | None:
        """The two-sided p the family's Holm step uses: Welch's on ln values; of the
        difference of means for a signed metric; Mann–Whitney's on ln values with
        ``--method rank`` (:func:`vhpc.core.logratio.rank_test`)."""
        if self.signed:
            return stats.welch_difference(self.x, self.y)[4] if len(self.x) and len(self.y) else None
        if self.rank and self.lw is not None:
            return logratio.rank_test(self.x, self.y)
        return self.lw.p if self.lw is not None else None


def draft(env: Summary, base: Summary, x: list[float], y: list[float],
          signed: bool = False, method: str = stats.LOG_WELCH) -> Draft:
    """:class:`Draft` of ``env`` (values ``x``) against ``base`` (values ``y``); compared by
    the difference of means when ``signed`` (declared: the metric can be ≤ 0) or when a value
    is ≤ 0 (no log scale; said in the row's note); ``method`` :data:`RANK`: by ranks on ln
    values."""
    declared = signed
    signed = signed or any(v <= 0 for v in (*x, *y))
    return Draft(env, base, x, y, None if signed else logratio.log_welch(x, y), signed,
                 method == RANK, declared)


def declared_signed(spec) -> frozenset[tuple[str, str]]:
    """(benchmark, metric) of every custom metric a stored campaign spec declares ``signed:
    true`` (its values can be ≤ 0: compared by the difference of means, never on the log
    scale)."""
    out = set()
    for c in (spec or {}).get("custom") or []:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            continue
        for m in c.get("metrics") or []:
            if isinstance(m, dict) and m.get("signed") is True and isinstance(m.get("name"), str):
                out.add((c["name"], m["name"]))
    return frozenset(out)


def off_log_scale(x: list[float], y: list[float]
                  ) -> tuple[float | None, tuple[float | None, float | None], str, float | None]:
    """(ratio, (low, high), method, df) of positive x / y where Welch's t on ln values has
    nothing to say (a side of fewer than 2 values): the ratio of geometric means (the model's
    centre) without an interval.  Values ≤ 0 have no log scale and no ratio here: they are
    compared by the difference of means (:func:`draft`, ``vhpc diff`` likewise), so they give
    (None, (None, None), ``none``, None)."""
    gx, gy = logratio.log_moments(x), logratio.log_moments(y)
    if gx is not None and gy is not None:
        ratio = math.exp(gx.mean - gy.mean) if gx.mean - gy.mean < 700 else None
        return ratio, (None, None), stats.NO_INTERVAL, None
    return None, (None, None), stats.NO_INTERVAL, None


#: the model's outcomes (:func:`vhpc.core.logratio.decide`) as the table names them
_VERDICT = {logratio.WORSE: SLOWER, logratio.BETTER: FASTER, logratio.EQUIVALENT: EQUIVALENT,
            logratio.UNDECIDED: INCONCLUSIVE}


def verdict_of(low: float | None, high: float | None, higher_is_better: bool,
               margin: float) -> str:
    """The verdict read off the interval (low, high) of the ratio env / baseline
    (:func:`vhpc.core.logratio.decide`), in the metric's direction: for a rate the reciprocal
    interval, so ``slower`` always means worse for the user."""
    if low is not None and high is not None and higher_is_better:
        low, high = (1.0 / high if high > 0 else None), (1.0 / low if low > 0 else None)
    return _VERDICT.get(logratio.decide(low, high, margin), INSUFFICIENT)


def difference_verdict(low: float | None, high: float | None, higher_is_better: bool,
                       margin: float, scale: float) -> str:
    """The verdict read off Welch's interval (low, high) of the difference of means env −
    baseline of a signed metric (values can be ≤ 0), in the metric's direction: the interval
    of the worse-positive relative difference (±(low, high)/``scale``, ``scale`` = the
    baseline's |mean|) read by :func:`vhpc.core.logratio.decide_difference` (slower above 0,
    faster below, equivalent inside [−margin, margin])."""
    if low is None or high is None:
        return INSUFFICIENT
    w = overhead_of_difference(low, high, higher_is_better, scale)
    return _VERDICT.get(logratio.decide_difference(w[0], w[1], margin if scale > 0 else None),
                        INSUFFICIENT)


def overhead_of_difference(low: float, high: float, higher_is_better: bool, scale: float
                           ) -> tuple[float, float]:
    """(low, high) of a difference of means as a worse-positive fraction of ``scale`` (the
    baseline's |mean|; 0: the difference itself, in the unit)."""
    k = 1.0 / scale if scale > 0 else 1.0
    return (-high * k, -low * k) if higher_is_better else (low * k, high * k)


def difference_overhead(diff: float, low: float | None, high: float | None,
                        higher_is_better: bool, scale: float
                        ) -> tuple[float | None, tuple[float | None, float | None]]:
    """(overhead, (low, high)) in percent of a signed metric's difference of means ``diff``
    with its interval: worse-positive, relative to ``scale`` (the baseline's |mean|,
    :func:`overhead_of_difference`); None where ``scale`` is 0 (no percentage of nothing) or
    there is no interval."""
    if not scale > 0:
        return None, (None, None)
    w = overhead_of_difference(diff, diff, higher_is_better, scale)[0] * 100
    if low is None or high is None:
        return w, (None, None)
    lo, hi = overhead_of_difference(low, high, higher_is_better, scale)
    return w, (lo * 100, hi * 100)


def _near_zero(values: list[float]) -> bool:
    """True when a positive sample holds a value below :data:`NEAR_ZERO` of its median."""
    if len(values) < 2:
        return False
    xs = np.asarray(values, dtype=float)
    low = float(xs.min())
    # the upper median (the value at n // 2 of the sorted sample), as partition finds it
    med = float(np.partition(xs, len(xs) // 2)[len(xs) // 2])
    return low > 0 and low < NEAR_ZERO * med


def _shown(draft: Draft, level: float, margin: float
           ) -> tuple[float | None, tuple[float | None, float | None], str, float | None, str]:
    """(ratio, (low, high), method, df, verdict) of a positive draft at ``level``."""
    hib = draft.env.higher_is_better
    if draft.rank and draft.lw is not None:
        ratio, lo, hi = logratio.rank_ratio(draft.x, draft.y, level)
        method, df = stats.RANK, None
    elif draft.lw is not None:
        ratio = draft.lw.ratio if math.isfinite(draft.lw.ratio) else None
        lo, hi = draft.lw.interval(level)
        method, df = stats.LOG_WELCH, draft.lw.df
    else:
        ratio, (lo, hi), method, df = off_log_scale(draft.x, draft.y)
    verdict = verdict_of(lo, hi, hib, margin) if draft.env.n >= 2 and draft.base.n >= 2 else INSUFFICIENT
    if verdict == INSUFFICIENT and draft.env.n >= 2 and draft.base.n >= 2:
        verdict = INCONCLUSIVE  # data, but no interval (ranks from too few runs)
    return ratio, (lo, hi), method, df, verdict


def finish(draft: Draft, level: float, p_adjusted: float | None, margin: float, alpha: float,
           role: str, family_size: int, equivalence_level: float | None = None) -> Comparison:
    """The :class:`Comparison` of ``draft`` whose family of ``family_size`` (m) primary metrics
    gave it the confidence ``level`` (Holm's, :func:`vhpc.core.logratio.holm_level`) and
    Holm-adjusted p.  A row whose interval at ``level`` excludes 1 is ``slower`` / ``faster``
    and shown there; any other row is shown, and read for equivalence, at ``equivalence_level``
    (default ``level``; the family's Bonferroni level 1 − α/m, which no other metric's outcome
    changes, so ``equivalent`` is controlled family-wise: :func:`comparisons_of`); runs needed
    when inconclusive, planned at the level the row is shown.  ``alpha`` is the family's
    false-positive rate, ``margin`` the equivalence margin as a fraction (0.05 = ±5 %)."""
    env, base = draft.env, draft.base
    hib = env.higher_is_better
    eq_level = level if equivalence_level is None else equivalence_level
    if draft.signed:
        return _finish_signed(draft, level, eq_level, p_adjusted, margin, alpha, role, family_size)
    note, runs = "", None
    ratio, (lo, hi), method, df, verdict = _shown(draft, level, margin)
    if verdict not in (SLOWER, FASTER) and eq_level != level:
        level = eq_level
        ratio, (lo, hi), method, df, verdict = _shown(draft, level, margin)
    if verdict == INCONCLUSIVE and draft.lw is not None:
        runs = logratio.runs_to_decide(draft.lw, level, margin)
        if draft.rank and runs is not None:  # ranks need 1/ARE = π/3 times the runs of t
            runs = math.ceil(runs * math.pi / 3)
    notes = []
    if _near_zero(draft.x) or _near_zero(draft.y):
        notes.append(f"a value below {NEAR_ZERO:g} × its sample's median: near 0 in a "
                     "positive metric, check the parser (kept on the log scale)")
    diagnostic = logratio.diagnose(draft.x, draft.y, draft.rank) if draft.lw is not None else ""
    if draft.rank and draft.lw is not None and lo is None:
        notes.append(f"too few runs for a rank interval at {level * 100:.4g} %")
    if draft.rank and draft.lw is not None:
        notes.append(logratio.spread_note(draft.x, draft.y))
    note = "; ".join(n for n in notes if n)
    if base.unit != env.unit:
        verdict, note = INSUFFICIENT, "units differ from the baseline's"
    detectable = None
    if draft.lw is not None and draft.lw.sd > 0:
        detectable = power.detectable_effect(draft.lw.sd, min(env.n, base.n), alpha)
    return Comparison(
        benchmark=env.benchmark, params=env.params, metric=env.metric, unit=env.unit,
        higher_is_better=hib, environment=env.environment, baseline=base.environment,
        ratio=ratio, ratio_ci=(lo, hi), overhead_pct=overhead_pct(ratio, hib),
        p_value=draft.p, p_adjusted=p_adjusted, verdict=verdict, n=env.n, n_baseline=base.n,
        mean=env.mean, mean_baseline=base.mean, df=df,
        overhead_ci=overhead_interval(lo, hi, hib), ratio_ci_method=method, note=note,
        runs_needed=runs, detectable=detectable, level=level, margin=margin, role=role,
        family_size=family_size, gmean=env.gmean, gmean_baseline=base.gmean, diagnostic=diagnostic)


def _finish_signed(draft: Draft, level: float, eq_level: float, p_adjusted: float | None,
                   margin: float, alpha: float, role: str, family_size: int) -> Comparison:
    """:func:`finish` of a signed metric: Welch's difference of means in the metric's unit,
    the overhead relative to the baseline's |mean| (no ratio: a ratio of means of either sign
    can flip the direction)."""
    env, base = draft.env, draft.base
    hib = env.higher_is_better
    scale = abs(base.mean) if base.mean else 0.0

    def at(lvl: float):
        diff, lo, hi, df, _ = stats.welch_difference(draft.x, draft.y, lvl)
        verdict = difference_verdict(lo, hi, hib, margin, scale) if env.n >= 2 and base.n >= 2 \
            else INSUFFICIENT
        return diff, lo, hi, df, verdict

    diff, lo, hi, df, verdict = at(level)
    if verdict not in (SLOWER, FASTER) and eq_level != level:
        level = eq_level
        diff, lo, hi, df, verdict = at(level)
    runs = None
    sd = pooled_sd(draft.x, draft.y)
    if verdict == INCONCLUSIVE and scale > 0 and sd is not None \
            and min(env.n, base.n) >= power.MIN_PILOT:  # as logratio.runs_to_decide
        runs = logratio.plan_runs(power.sd_upper_bound(sd, env.n + base.n - 2) / scale, level,
                                  margin, log_scale=False, at_least=min(env.n, base.n) + 1)
    overhead, overhead_ci = difference_overhead(diff, lo, hi, hib, scale)
    note = "" if draft.declared else SIGNED_NOTE
    if base.unit != env.unit:
        verdict, note = INSUFFICIENT, "units differ from the baseline's"
    return Comparison(
        benchmark=env.benchmark, params=env.params, metric=env.metric, unit=env.unit,
        higher_is_better=hib, environment=env.environment, baseline=base.environment,
        ratio=None, ratio_ci=(None, None), overhead_pct=overhead, p_value=draft.p, p_adjusted=p_adjusted,
        verdict=verdict, n=env.n, n_baseline=base.n, mean=env.mean, mean_baseline=base.mean, df=df,
        overhead_ci=overhead_ci, ratio_ci_method=stats.DIFFERENCE, note=note, runs_needed=runs,
        level=level, margin=margin, role=role, family_size=family_size, difference=diff,
        difference_ci=(lo, hi))


def level_kind(comparison: Comparison, intervals: str = "holm") -> str:
    """What ``comparison``'s interval level is (:data:`vhpc.analysis.results.LEVEL_KINDS`): ``1-alpha``
    in a family of one; under ``--intervals simultaneous`` ``simultaneous``; else ``holm`` for
    a row Holm calls different (slower/faster: :func:`finish` keeps Holm's level only for
    those) and ``bonferroni`` for the rest."""
    if comparison.family_size <= 1:
        return "1-alpha"
    if intervals == SIMULTANEOUS:
        return "simultaneous"
    return "holm" if comparison.verdict in (SLOWER, FASTER) else "bonferroni"


def pooled_sd(x: list[float], y: list[float]) -> float | None:
    """√((s_x² + s_y²)/2) of two samples (their unit), None with fewer than 2 values a side."""
    if len(x) < 2 or len(y) < 2:
        return None
    vx, vy = stats.describe(x).stdev, stats.describe(y).stdev
    return math.sqrt((vx * vx + vy * vy) / 2.0)


def _reciprocal(value: float | None) -> float | None:
    """1/value; None for None or 0 (no ratio, or a bound at 0)."""
    return 1.0 / value if value not in (None, 0) else None


def inverse_of(rep: Comparison, draft: Draft, name: str, role: str = INVERSE) -> Comparison:
    """The comparison of a metric that measures ``rep``'s effect again (the same trials): its
    inverse (``role`` ``inverse``, time vs rate: ratio and interval the reciprocals of
    ``rep``'s) or a constant multiple (``same``: the same ratio and interval); ``rep``'s
    verdict: one effect, one verdict and one overhead (a time's and its rate's overhead are
    the same number)."""
    env, base = draft.env, draft.base
    hib = env.higher_is_better
    if role == INVERSE:
        lo, hi = _reciprocal(rep.ratio_ci[1]), _reciprocal(rep.ratio_ci[0])
        ratio = _reciprocal(rep.ratio)
    else:
        (lo, hi), ratio = rep.ratio_ci, rep.ratio
    return Comparison(
        benchmark=env.benchmark, params=env.params, metric=env.metric, unit=env.unit,
        higher_is_better=hib, environment=env.environment, baseline=base.environment,
        ratio=ratio, ratio_ci=(lo, hi), overhead_pct=overhead_pct(ratio, hib),
        p_value=rep.p_value, p_adjusted=rep.p_adjusted, verdict=rep.verdict, n=env.n,
        n_baseline=base.n, mean=env.mean, mean_baseline=base.mean, df=rep.df,
        overhead_ci=overhead_interval(lo, hi, hib), ratio_ci_method=rep.ratio_ci_method,
        note=f"{'the inverse' if role == INVERSE else 'a multiple'} of {name}: its verdict",
        runs_needed=rep.runs_needed, detectable=rep.detectable, level=rep.level,
        margin=rep.margin, role=role,
        family_size=rep.family_size, inverse_of=name, gmean=env.gmean,
        gmean_baseline=base.gmean, level_kind=rep.level_kind)


#: ``--intervals`` values: Holm's level for differences, Bonferroni's for equivalence (the
#: default: Holm finds more differences), or Bonferroni's simultaneous intervals for both
HOLM, SIMULTANEOUS = "holm", "simultaneous"
#: ``--method`` values: Welch's t on ln values (default), or ranks on ln values
RANK = "rank"

#: a comparison's place: (family id or None for no family, role, metric it is the inverse of)
Plan = dict[tuple[str, str, str], tuple[object, str, str]]


def comparisons_of(ordered: list[GroupKey], summaries: dict[GroupKey, Summary],
                   values: dict[GroupKey, list[float]], baseline: str, alpha: float,
                   margin: float, plan: Plan, intervals: str = "holm",
                   method: str = stats.LOG_WELCH,
                   signed: frozenset[tuple[str, str]] = frozenset()
                   ) -> tuple[list[Comparison], dict[tuple[str, str], set[str]]]:
    """Comparisons of every non-baseline group against the baseline's group of the same
    (benchmark, params, metric), for the keys in ``plan`` (check figures are not in it).

    Families: the comparisons whose plan entries share a family id (across environments for
    the campaign's primary metrics; per environment for a sweep) are Holm-adjusted together;
    a row Holm calls different is shown at :func:`vhpc.core.logratio.holm_level`, every other
    row at Bonferroni's 1 − α/m (:func:`vhpc.core.logratio.bonferroni_level`) and read for
    equivalence there: the TOST of each of the m metrics at α/(2m) a side, so the family-wise
    rate of a false ``equivalent`` stays ≤ α/2 and one metric's verdict does not move with
    another's outcome.  ``intervals`` :data:`SIMULTANEOUS`: every row at 1 − α/m and
    Bonferroni-adjusted p (simultaneous intervals, family-wise coverage ≥ 1 − α).  A key with
    family None is shown at 1 − alpha.  ``method`` :data:`RANK` (``--method rank``): positive
    metrics by the Hodges–Lehmann ratio with the Mann–Whitney interval on ln values, decided
    with the same four verdicts.  ``signed``: (benchmark, metric) declared signed
    (:func:`declared_signed`).  An ``inverse`` key takes its partner's verdict
    (:func:`inverse_of`).
    Returns (comparisons in ``ordered`` order, missing baseline {(benchmark, params):
    metrics})."""
    drafts: dict[GroupKey, Draft] = {}
    missing: dict[tuple[str, str], set[str]] = {}
    for k in ordered:
        benchmark, params, metric, env = k
        if env == baseline or (benchmark, params, metric) not in plan:
            continue
        base_key = (benchmark, params, metric, baseline)
        if base_key not in summaries:
            missing.setdefault((benchmark, params), set()).add(metric)
            continue
        drafts[k] = draft(summaries[k], summaries[base_key], values[k], values[base_key],
                          (benchmark, metric) in signed, method)
    by_family: dict[object, list[GroupKey]] = {}
    for k in drafts:
        fam, role, _ = plan[k[:3]]
        if role in (INVERSE, SAME):
            continue
        family_id = (fam, k[3]) if role == POINT else fam
        by_family.setdefault(family_id if fam is not None else ("alone", k), []).append(k)
    done: dict[GroupKey, Comparison] = {}
    for family_id, keys in by_family.items():
        p_values = [drafts[k].p for k in keys]
        tested = [i for i, p in enumerate(p_values) if p is not None]
        m = len(tested) or 1  # the family's size, m in Holm (1979) and Bonferroni's α/m
        eq_level = logratio.bonferroni_level(m, alpha)
        if intervals == SIMULTANEOUS:  # Bonferroni for both: simultaneous intervals
            level = eq_level
            adjusted = {i: min(1.0, p_values[i] * m) for i in tested}
        else:
            level = logratio.holm_level(p_values, alpha)
            adjusted = dict(zip(tested, stats.holm_adjust([p_values[i] for i in tested], alpha)))
        for i, k in enumerate(keys):
            role = plan[k[:3]][1]
            comparison = finish(drafts[k], level, adjusted.get(i), margin, alpha, role, m, eq_level)
            done[k] = replace(comparison, level_kind=level_kind(comparison, intervals))
    for k, drafted in drafts.items():
        _, role, partner = plan[k[:3]]
        if role in (INVERSE, SAME):
            rep = done.get((k[0], k[1], partner, k[3]))
            done[k] = inverse_of(rep, drafted, partner, role) if rep is not None else \
                finish(drafted, 1.0 - alpha, drafted.p, margin, alpha, SECONDARY, 1)
    return [done[k] for k in ordered if k in done], missing
