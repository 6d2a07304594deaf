"""Comparisons against the baseline: one model decides and shows (docs/statistics.md).

Ratio of geometric means with Welch's t on ln values (:func:`vhpc.core.logratio.log_welch`); the
interval at the level of the comparison's family (Holm, :func:`vhpc.core.logratio.holm_level`);
the verdict read off that interval (:func:`verdict_of`): slower / faster / equivalent within
the margin / inconclusive.  Every number comes from :mod:`vhpc.core.stats`; a row never says
"slower" beside an interval that contains 1, nor "equivalent" beside one that leaves the
margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass
class Draft:
    """A comparison before its family is known: the two groups, their values and Welch's t on
    ln values (None when a side has fewer than 2 values or a value ≤ 0)."""

    env: Summary
    base: Summary
    x: list[float]
    y: list[float]
    lw: logratio.LogWelch | None

    @property
    def p(self) -> float | None:
        """Welch's p on ln values (the family's Holm step uses it)."""
        return self.lw.p if self.lw is not None else None


def draft(env: Summary, base: Summary, x: list[float], y: list[float]) -> Draft:
    """:class:`Draft` of ``env`` (values ``x``) against ``base`` (values ``y``)."""
    return Draft(env, base, x, y, logratio.log_welch(x, y))


def off_log_scale(x: list[float], y: list[float], level: float
                  ) -> tuple[float | None, tuple[float | None, float | None], str, float | None]:
    """(ratio, (low, high), method, df) of x / y where Welch's t on ln values has nothing to
    say: positive values with a side of fewer than 2 values give the ratio of geometric means
    (the model's centre) without an interval; values ≤ 0 have no log scale and give the ratio
    of arithmetic means with Fieller's interval at ``level`` (Fieller 1954; none with fewer
    than 2 values a side or a baseline mean of 0)."""
    gx, gy = logratio.log_moments(x), logratio.log_moments(y)
    if gx is not None and gy is not None:
        ratio = math.exp(gx.mean - gy.mean) if gx.mean - gy.mean < 700 else None
        return ratio, (None, None), stats.NO_INTERVAL, None
    mx, my = stats.mean(x), stats.mean(y)
    ratio = mx / my if mx is not None and my not in (None, 0) else None
    if ratio is None or not math.isfinite(ratio):
        return None, (None, None), stats.NO_INTERVAL, None
    if len(x) < 2 or len(y) < 2:
        return ratio, (None, None), stats.NO_INTERVAL, None
    ri = stats.ratio_interval(x, y, level)
    return ratio, (ri.low, ri.high), ri.method, ri.df


def verdict_of(low: float | None, high: float | None, higher_is_better: bool,
               margin: float) -> str:
    """The verdict read off the interval (low, high) of the ratio env / baseline
    (:func:`vhpc.core.logratio.decide`), in the metric's direction: for a rate the reciprocal
    interval, so ``slower`` always means worse for the user."""
    if low is not None and high is not None and higher_is_better:
        low, high = (1.0 / high if high > 0 else None), (1.0 / low if low > 0 else None)
    return {logratio.WORSE: SLOWER, logratio.BETTER: FASTER, logratio.EQUIVALENT: EQUIVALENT,
            logratio.UNDECIDED: INCONCLUSIVE}.get(logratio.decide(low, high, margin), INSUFFICIENT)


def finish(d: Draft, level: float, p_adjusted: float | None, margin: float, alpha: float,
           role: str, m: int) -> Comparison:
    """The :class:`Comparison` of a draft whose family gave it the confidence ``level`` and
    Holm-adjusted p: interval at ``level``, verdict read off it, runs needed when
    inconclusive."""
    env, base, lw = d.env, d.base, d.lw
    hib = env.higher_is_better
    note, runs = "", None
    if lw is not None:
        ratio = lw.ratio if math.isfinite(lw.ratio) else None
        lo, hi = lw.interval(level)
        method, df = stats.LOG_WELCH, lw.df
    else:
        ratio, (lo, hi), method, df = off_log_scale(d.x, d.y, level)
        if method == stats.FIELLER:
            note = "values ≤ 0: no log scale, Fieller's interval of the ratio of means"
    v = verdict_of(lo, hi, hib, margin) if env.n >= 2 and base.n >= 2 else INSUFFICIENT
    if v == INSUFFICIENT and env.n >= 2 and base.n >= 2:
        v = INCONCLUSIVE  # data, but no bounded interval (Fieller's set, baseline near 0)
    if v == INCONCLUSIVE and lw is not None:
        runs = logratio.runs_to_decide(lw, level, margin)
    if base.unit != env.unit:
        v, note = INSUFFICIENT, "units differ from the baseline's"
    detectable = None
    if lw is not None and lw.sd > 0:
        detectable = power.detectable_effect(lw.sd, min(env.n, base.n), alpha)
    return Comparison(
        benchmark=env.benchmark, params=env.params, metric=env.metric, unit=env.unit,
        higher_is_better=hib, environment=env.environment, baseline=base.environment,
        ratio=ratio, ratio_ci=(lo, hi), overhead_pct=overhead_pct(ratio, hib),
        p_value=d.p, p_adjusted=p_adjusted, verdict=v, n=env.n, n_baseline=base.n,
        mean=env.mean, mean_baseline=base.mean, df=df,
        overhead_ci=overhead_interval(lo, hi, hib), ratio_ci_method=method, note=note,
        runs_needed=runs, detectable=detectable, level=level, margin=margin, role=role,
        family_size=m, gmean=env.gmean, gmean_baseline=base.gmean)


def inverse_of(rep: Comparison, d: Draft, name: str, role: str = INVERSE) -> Comparison:
    """The comparison of a metric that measures ``rep``'s effect again (the same trials): its
    inverse (``role`` ``inverse``, time vs rate: ratio and interval the reciprocals of
    ``rep``'s) or a constant multiple (``same``: the same ratio and interval); ``rep``'s
    verdict: one effect, one verdict and one overhead (a time's and its rate's overhead are
    the same number)."""
    env, base = d.env, d.base
    hib = env.higher_is_better
    if role == INVERSE:
        inv = lambda v: 1.0 / v if v not in (None, 0) else None  # noqa: E731
        lo, hi = inv(rep.ratio_ci[1]), inv(rep.ratio_ci[0])
        ratio = inv(rep.ratio)
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
        gmean_baseline=base.gmean)


#: a comparison's place: (family id or None for no family, role, metric it is the inverse of)
Plan = dict[tuple[str, str, str], tuple[object, str, str]]


def comparisons_of(ordered: list[GroupKey], summaries: dict[GroupKey, Summary],
                   values: dict[GroupKey, list[float]], baseline: str, alpha: float,
                   margin: float, plan: Plan
                   ) -> tuple[list[Comparison], dict[tuple[str, str], set[str]]]:
    """Comparisons of every non-baseline group against the baseline's group of the same
    (benchmark, params, metric), for the keys in ``plan`` (check figures are not in it).

    Families: the comparisons whose plan entries share a family id (across environments for
    the campaign's primary metrics; per environment for a sweep) are Holm-adjusted together
    and shown at :func:`vhpc.core.logratio.holm_level`; a key with family None is shown at
    1 − alpha.  An ``inverse`` key takes its partner's verdict (:func:`inverse_of`).
    Returns (comparisons in ``ordered`` order, missing baseline {(benchmark, params):
    metrics})."""
    drafts: dict[GroupKey, Draft] = {}
    missing: dict[tuple[str, str], set[str]] = {}
    for k in ordered:
        benchmark, params, metric, env = k
        if env == baseline or (benchmark, params, metric) not in plan:
            continue
        bk = (benchmark, params, metric, baseline)
        if bk not in summaries:
            missing.setdefault((benchmark, params), set()).add(metric)
            continue
        drafts[k] = draft(summaries[k], summaries[bk], values[k], values[bk])
    fams: dict[object, list[GroupKey]] = {}
    for k in drafts:
        fam, role, _ = plan[k[:3]]
        if role in (INVERSE, SAME):
            continue
        fid = (fam, k[3]) if role == POINT else fam
        fams.setdefault(fid if fam is not None else ("alone", k), []).append(k)
    done: dict[GroupKey, Comparison] = {}
    for fid, keys in fams.items():
        ps = [drafts[k].p for k in keys]
        level = logratio.holm_level(ps, alpha)
        idx = [i for i, p in enumerate(ps) if p is not None]
        adj = dict(zip(idx, stats.holm_adjust([ps[i] for i in idx], alpha)))
        for i, k in enumerate(keys):
            role = plan[k[:3]][1]
            done[k] = finish(drafts[k], level, adj.get(i), margin, alpha, role, len(idx) or 1)
    for k, d in drafts.items():
        _, role, partner = plan[k[:3]]
        if role in (INVERSE, SAME):
            rep = done.get((k[0], k[1], partner, k[3]))
            done[k] = inverse_of(rep, d, partner, role) if rep is not None else \
                finish(d, 1.0 - alpha, d.p, margin, alpha, SECONDARY, 1)
    return [done[k] for k in ordered if k in done], missing
