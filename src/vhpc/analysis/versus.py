"""Ratios between any two groups of an analysis, not only an environment against the baseline:
a VM's cold trials (first after a boot) against native, its warm trials against its cold ones,
one placement against another — what the seeds' stated findings compare
(:mod:`vhpc.campaign.paper_findings`).

One model, the campaign table's (:mod:`vhpc.analysis.compare`, docs/statistics.md): the ratio
of the two groups' geometric means with the interval of Welch's t on ln values, exp(Δ ± t·se)
(:func:`vhpc.core.logratio.contrast_of` on each :class:`~vhpc.analysis.results.Summary`'s
ln moments), and the verdict read off that interval (:func:`vhpc.analysis.compare.verdict_of`,
the campaign's margin).  Values ≤ 0 have no log scale: no ratio, and the verdict read off
Welch's interval of the difference of means, as in the table.  These pairs are not
Holm-adjusted (they are no verdicts of the campaign table, only the evidence a stated finding is
set beside): the level is the analysis' confidence.  The two groups are ``a`` (the one
compared) and ``b`` (its reference), as :func:`vhpc.core.stats.welch_difference` names them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from vhpc.analysis.compare import difference_verdict, verdict_of
from vhpc.analysis.results import GROUP_ALL, INCONCLUSIVE, INSUFFICIENT, Analysis, Summary
from vhpc.core import logratio, stats


@dataclass(frozen=True)
class Pair:
    """``environment``'s ``group`` trials against ``versus``'s ``versus_group`` trials for one
    (benchmark, params, metric): ``ratio`` = geometric mean / reference geometric mean
    (None for values ≤ 0: ``method`` welch-difference, the verdict read off the difference of
    means, :func:`summary_difference`), its interval ``low`` / ``high`` at ``level`` (None:
    none), ``n`` = the smaller sample count, ``method`` of the interval, ``p`` Welch's
    two-sided p on ln values (None off the log scale), ``verdict`` read off the interval in the
    metric's direction (slower / faster / equivalent / inconclusive / insufficient data),
    ``runs`` per side that would likely decide an inconclusive pair
    (:func:`vhpc.core.logratio.runs_to_decide`, None from fewer than 5 a side)."""

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
    p: float | None = None
    verdict: str = INSUFFICIENT
    level: float = 0.95
    runs: int | None = None


def summary_ratio(a: Summary, b: Summary, confidence: float = 0.95
                  ) -> tuple[float | None, float | None, float | None, str, float | None]:
    """(ratio, low, high, method, p) of ``a`` against ``b`` at ``confidence`` (module
    docstring): Welch's t on ln values from the summaries' ln moments; no interval with fewer
    than 2 values a side; no ratio (method ``welch-difference``) when a side has a value ≤ 0:
    :func:`summary_difference` then."""
    lw = logratio.contrast_of([a.log_moments(), b.log_moments()], (1, -1))
    if lw is not None:
        ratio = lw.ratio if math.isfinite(lw.ratio) else None
        lo, hi = lw.interval(confidence) if ratio is not None else (None, None)
        return ratio, lo, hi, stats.LOG_WELCH, lw.p
    if a.gmean is not None and b.gmean is not None:  # positive, but a side has n < 2
        return a.gmean / b.gmean, None, None, stats.NO_INTERVAL, None
    # values <= 0: no ratio (one of means of either sign can flip the direction); the table
    # compares such data by the difference of means (:func:`summary_difference`)
    return None, None, None, stats.DIFFERENCE, None


def summary_difference(a: Summary, b: Summary, confidence: float = 0.95
                       ) -> tuple[float | None, float | None, float | None]:
    """(mean(a) − mean(b), low, high): Welch's interval of the difference of means from the
    summaries (:func:`vhpc.core.stats.welch_contrast`, the computation of
    :func:`vhpc.core.stats.welch_difference`), as the table compares data with values ≤ 0;
    bounds None with fewer than 2 values a side."""
    if a.mean is None or b.mean is None:
        return None, None, None
    d = a.mean - b.mean
    if a.stdev is None or b.stdev is None:
        return d, None, None
    c = stats.welch_contrast((a.mean, b.mean), (a.stdev ** 2, b.stdev ** 2), (a.n, b.n), (1, -1))
    return (d, None, None) if c is None else (d, *c.interval(confidence))


def band_plan(a: Summary | None, b: Summary | None, level: float, rank: bool = False
              ) -> Callable[[float], int | None] | None:
    """The runs a side that would decide ``a`` against ``b`` (positive values, log scale) at
    ``level`` for any band: a function of the band (0.15 = ±15 %) giving
    :func:`vhpc.core.logratio.runs_to_decide` for it (``rank``: × π/3, as the table plans
    ``--method rank``), so a paper line is planned for its own band, not the table's margin.
    None off the log scale or with fewer than 2 values a side."""
    if a is None or b is None:
        return None
    lw = logratio.contrast_of([a.log_moments(), b.log_moments()], (1, -1))
    if lw is None:
        return None

    def plan(band: float) -> int | None:
        runs = logratio.runs_to_decide(lw, level, band)
        return math.ceil(runs * math.pi / 3) if rank and runs is not None else runs
    return plan


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
        if (s.benchmark, s.metric) in analysis.signed_metrics:  # declared: as the table
            ratio, lo, hi, method, p = None, None, None, stats.DIFFERENCE, None
        else:
            ratio, lo, hi, method, p = summary_ratio(s, ref, analysis.confidence)
        if method == stats.DIFFERENCE:  # values <= 0 or declared signed: as the table reads
            _, d_lo, d_hi = summary_difference(s, ref, analysis.confidence)
            verdict = difference_verdict(d_lo, d_hi, s.higher_is_better, analysis.margin,
                                         abs(ref.mean or 0.0)) \
                if s.n >= 2 and ref.n >= 2 else INSUFFICIENT
        else:
            verdict = verdict_of(lo, hi, s.higher_is_better, analysis.margin) \
                if s.n >= 2 and ref.n >= 2 else INSUFFICIENT
        if verdict == INSUFFICIENT and s.n >= 2 and ref.n >= 2:
            verdict = INCONCLUSIVE  # data, but no bounded interval (as in the table)
        runs = None
        if verdict == INCONCLUSIVE and method != stats.DIFFERENCE:
            lw = logratio.contrast_of([s.log_moments(), ref.log_moments()], (1, -1))
            if lw is not None:
                runs = logratio.runs_to_decide(lw, analysis.confidence, analysis.margin)
        out.append(Pair(s.environment, s.benchmark, s.params, s.metric, group, ref_env,
                        versus_group, s.higher_is_better, ratio, lo, hi, min(s.n, ref.n), method,
                        p, verdict, analysis.confidence, runs))
    return out
