"""Comparisons against the baseline: ratio with its interval, overhead, Welch p, Holm, verdict.

Every number comes from :mod:`vhpc.core.stats`.  The verdict and the interval are decided together
(:func:`verdict`), so a row never says "slower" beside an interval that contains 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vhpc.core import power, stats
from vhpc.analysis.results import (
    FASTER, INSUFFICIENT, NO_DIFFERENCE, SLOWER, Comparison, Summary,
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
    """A comparison before Holm's adjustment: the fields of :class:`Comparison` that do not
    depend on the other comparisons, plus the decision interval at level 1 − alpha."""

    fields: dict
    decision: stats.RatioInterval
    unit_mismatch: bool


def draft(env: Summary, base: Summary, x: list[float], y: list[float], confidence: float,
          alpha: float) -> Draft:
    """Ratio mean(x)/mean(y) with its interval (:func:`vhpc.core.stats.ratio_interval`), Welch's p
    and the overhead for one environment (``env``, values ``x``) against the baseline
    (``base``, values ``y``)."""
    ratio = env.mean / base.mean if env.mean is not None and base.mean not in (None, 0) else None
    if ratio is not None and not math.isfinite(ratio):
        ratio = None  # beyond the float range: cannot compute
    p = None
    k = stats.common_scale(x, y)
    if env.n >= 2 and base.n >= 2 and k != 1.0:  # finite extremes: the test is scale-free
        dx, dy = stats.describe([v / k for v in x]), stats.describe([v / k for v in y])
        if dx.n >= 2 and dy.n >= 2:
            p, _ = stats.welch_test(dx.mean, dx.stdev**2, dx.n, dy.mean, dy.stdev**2, dy.n)
    elif env.n >= 2 and base.n >= 2:
        p, _ = stats.welch_test(env.mean, env.stdev**2, env.n, base.mean, base.stdev**2, base.n)
    shown = stats.ratio_interval(x, y, confidence)
    decision = shown
    if not math.isclose(confidence, 1.0 - alpha) and shown.method != stats.NO_INTERVAL:
        decision = stats.ratio_interval(x, y, 1.0 - alpha, method=shown.method)
    hib = env.higher_is_better
    fields = dict(**power_fields(env, base, ratio, alpha),
        benchmark=env.benchmark, params=env.params, metric=env.metric, unit=env.unit,
        higher_is_better=hib, environment=env.environment, baseline=base.environment,
        ratio=ratio, ratio_ci=(shown.low, shown.high), overhead_pct=overhead_pct(ratio, hib),
        p_value=p, n=env.n, n_baseline=base.n, mean=env.mean, mean_baseline=base.mean,
        df=shown.df, overhead_ci=overhead_interval(shown.low, shown.high, hib),
        ratio_ci_method=shown.method,
    )
    return Draft(fields, decision, base.unit != env.unit)


def power_fields(env: Summary, base: Summary, ratio: float | None, alpha: float) -> dict:
    """``runs_needed`` (to detect the observed relative difference) and ``detectable`` (with
    the smaller n) from the pooled CV of both sides (:mod:`vhpc.core.power`)."""
    if env.stdev is None or base.stdev is None or not base.mean or ratio is None:
        return {}
    cv = power.pooled_cv(env.stdev, base.stdev, base.mean)
    if cv is None:
        return {}
    return {"runs_needed": power.runs_needed(ratio - 1.0, cv, alpha),
            "detectable": power.detectable_effect(cv, min(env.n, base.n), alpha)}


def verdict(p_adjusted: float | None, ratio: float | None, decision: stats.RatioInterval,
            higher_is_better: bool, alpha: float, m: int) -> tuple[str, str]:
    """(verdict, note) from the Holm-adjusted p and the ratio's confidence set at 1 − alpha.

    Slower/faster only when p_adjusted < alpha and the set excludes 1 (its side gives the
    direction: above 1 is worse for lower-is-better metrics); otherwise "no significant
    difference", with a note when the two criteria disagree.  m: number of comparisons Holm
    adjusted over (for the note).
    """
    if p_adjusted is None or ratio is None:
        return INSUFFICIENT, ""
    side = decision.side
    if p_adjusted < alpha and side:
        worse = side < 0 if higher_is_better else side > 0
        return (SLOWER if worse else FASTER), ""
    if p_adjusted < alpha and decision.unbounded and decision.contains_one is False:
        return NO_DIFFERENCE, (f"Welch p (Holm) < {alpha:g} and the {decision.method} set excludes"
                               " 1, but it is unbounded (the baseline mean is not different from"
                               " 0): no direction")
    if p_adjusted < alpha:
        return NO_DIFFERENCE, (f"Welch p (Holm) < {alpha:g} but the {decision.method} interval"
                               " contains 1")
    if side:
        return NO_DIFFERENCE, (f"interval excludes 1 but p (Holm over {m} comparisons)"
                               f" = {p_adjusted:.3g} ≥ {alpha:g}")
    return NO_DIFFERENCE, ""


def comparisons_of(ordered: list[GroupKey], summaries: dict[GroupKey, Summary],
                   values: dict[GroupKey, list[float]], baseline: str, confidence: float,
                   alpha: float) -> tuple[list[Comparison], dict[tuple[str, str], set[str]], list[Comparison]]:
    """Comparisons of every non-baseline group against the baseline's group of the same
    (benchmark, params, metric), Holm-adjusted over all that have a p-value.

    Returns (comparisons, missing baseline {(benchmark, params): metrics}, comparisons whose
    units differ from the baseline's — marked insufficient)."""
    drafts: list[Draft] = []
    missing: dict[tuple[str, str], set[str]] = {}
    for k in ordered:
        benchmark, params, metric, env = k
        if env == baseline:
            continue
        bk = (benchmark, params, metric, baseline)
        if bk not in summaries:
            missing.setdefault((benchmark, params), set()).add(metric)
            continue
        drafts.append(draft(summaries[k], summaries[bk], values[k], values[bk], confidence, alpha))
    idx = [i for i, d in enumerate(drafts) if d.fields["p_value"] is not None]
    adjusted = dict(zip(idx, stats.holm_adjust([drafts[i].fields["p_value"] for i in idx], alpha)))
    out, mismatched = [], []
    for i, d in enumerate(drafts):
        pa = adjusted.get(i)
        v, note = verdict(pa, d.fields["ratio"], d.decision, d.fields["higher_is_better"], alpha,
                          len(idx))
        if d.unit_mismatch:
            v, note = INSUFFICIENT, "units differ from the baseline's"
        c = Comparison(p_adjusted=pa, verdict=v, note=note, **d.fields)
        out.append(c)
        if d.unit_mismatch:
            mismatched.append(c)
    return out, missing, mismatched
