"""Ratios between any two groups of an analysis, not only an environment against the baseline:
a VM's cold trials (first after a boot) against native, its warm trials against its cold ones,
one placement against another — what the seeds' stated findings compare
(:mod:`vhpc.campaign.paper_findings`).

The ratio is mean(a) / mean(b) of two :class:`~vhpc.analysis.results.Summary` with its
confidence interval from the summaries' means, standard deviations and counts: Fieller's
(:func:`vhpc.core.stats.fieller_interval`) where it is bounded and, for positive means, has a
positive lower bound; else, for positive means, the delta method on the log ratio
(:func:`vhpc.core.stats.log_ratio_interval`); else none.  These pairs are not Holm-adjusted
(they are no verdicts of the campaign table, only the evidence a stated finding is set beside).
"""

from __future__ import annotations

from dataclasses import dataclass

from vhpc.analysis.results import GROUP_ALL, Analysis, Summary
from vhpc.core import stats


@dataclass(frozen=True)
class Pair:
    """``environment``'s ``group`` trials against ``versus``'s ``versus_group`` trials for one
    (benchmark, params, metric): ``ratio`` = mean / reference mean, its interval ``low`` /
    ``high`` (None: none), ``n`` = the smaller sample count, ``method`` of the interval."""

    environment: str
    benchmark: str
    params: str
    metric: str
    group: str
    versus: str
    versus_group: str
    higher_is_better: bool
    ratio: float | None
    low: float | None
    high: float | None
    n: int
    method: str


def summary_ratio(a: Summary, b: Summary, confidence: float = 0.95) -> tuple[float | None, float | None, float | None, str]:
    """(ratio, low, high, method) of mean(a) / mean(b) (module docstring)."""
    if a.mean is None or b.mean is None or b.mean == 0:
        return None, None, None, stats.NO_INTERVAL
    ratio = a.mean / b.mean
    if a.n < 2 or b.n < 2 or a.stdev is None or b.stdev is None:
        return ratio, None, None, stats.NO_INTERVAL
    va, vb = a.stdev ** 2, b.stdev ** 2
    if va == 0 and vb == 0:
        return ratio, ratio, ratio, stats.EXACT
    lo, hi, _ = stats.fieller_interval(a.mean, va, a.n, b.mean, vb, b.n, confidence)
    positive = a.mean > 0 and b.mean > 0
    if lo is not None and hi is not None and (lo > 0 or not positive):
        return ratio, lo, hi, stats.FIELLER
    if positive:
        lo, hi, _ = stats.log_ratio_interval(a.mean, va, a.n, b.mean, vb, b.n, confidence)
        return ratio, lo, hi, stats.LOG_DELTA
    return ratio, None, None, stats.NO_INTERVAL


def pairs(analysis: Analysis, group: str = GROUP_ALL, versus: str | None = None,
          versus_group: str = GROUP_ALL) -> list[Pair]:
    """Every ``group`` summary set against its reference: the summary of the same (benchmark,
    params, metric) of environment ``versus`` (None: the baseline; ``"self"``: the same
    environment) in ``versus_group``.  A summary that is its own reference, or has none, is
    left out."""
    out = []
    for s in analysis.summaries:
        if s.group != group:
            continue
        ref_env = s.environment if versus == "self" else (versus or analysis.baseline)
        if ref_env == s.environment and versus_group == group:
            continue
        ref = analysis.summary(s.benchmark, s.params, s.metric, ref_env, versus_group)
        if ref is None:
            continue
        ratio, lo, hi, method = summary_ratio(s, ref, analysis.confidence)
        out.append(Pair(s.environment, s.benchmark, s.params, s.metric, group, ref_env,
                        versus_group, s.higher_is_better, ratio, lo, hi, min(s.n, ref.n), method))
    return out
