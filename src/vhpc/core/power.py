"""Power analysis: how many runs a comparison needs, and what its runs can detect.

Pure functions on numbers; no I/O, no vhpc types.  Effects and coefficients of variation are
dimensionless fractions (0.05 = 5 %); ``alpha`` and ``power`` are in (0, 1).

Sources:

* Power of the two-sample t-test: J. Cohen, *Statistical Power Analysis for the Behavioral
  Sciences*, 2nd ed. (1988), ch. 2 (effect size d = difference of means / pooled standard
  deviation; noncentral t, :data:`scipy.stats.nct`; cross-checked in the tests against
  ``statsmodels.stats.power.TTestIndPower``).
* Proportions: Clopper & Pearson, Biometrika 26 (1934) 404–413 (exact binomial interval,
  :meth:`scipy.stats.binomtest`).
"""

from __future__ import annotations

import functools
import math
from typing import Iterable, Sequence

import numpy as np

from vhpc.core.lazy import LazyModule
from vhpc.core.stats import common_scale

# scipy is imported on first use, as in vhpc.core.stats
spc = LazyModule("scipy.special")
sps = LazyModule("scipy.stats")

__all__ = ["POWER", "MAX_RUNS", "pooled_cv", "t_test_power", "pooled_relative_sd", "runs_needed",
           "detectable_effect", "proportion_interval"]


#: statistical power the advice aims at (Cohen 1988's conventional 80 %)
POWER = 0.8
#: above this many runs per environment an effect counts as not measurable (None)
MAX_RUNS = 2000


def pooled_cv(stdev_a: float, stdev_b: float, mean_b: float) -> float | None:
    """Pooled standard deviation of two samples relative to the baseline mean,
    ``√((s_a² + s_b²)/2) / |mean_b|`` (dimensionless; equal-n pooling, Cohen 1988 §2.2.1).
    None when ``mean_b`` is 0."""
    if mean_b == 0:
        return None
    if common_scale([stdev_a, stdev_b, mean_b]) != 1.0:  # no overflow or underflow of squares
        cv = math.hypot(stdev_a, stdev_b) / math.sqrt(2.0) / abs(mean_b)
        return cv if math.isfinite(cv) else None
    return math.sqrt((stdev_a * stdev_a + stdev_b * stdev_b) / 2.0) / abs(mean_b)


def t_test_power(d: float, n: float, alpha: float = 0.05) -> float:
    """Power of the two-sided two-sample t-test with ``n`` runs per side for Cohen's effect size
    ``d``: ``P(|T| > t_{1−α/2, 2n−2})`` with T noncentral t, df = 2n − 2, noncentrality
    ``d·√(n/2)`` (Cohen 1988 ch. 2; :data:`scipy.stats.nct`; the same quantity as
    ``statsmodels.stats.power.TTestIndPower.power``).

    Calls the special functions behind ``scipy.stats.t.ppf``, ``nct.sf`` and ``nct.cdf``
    directly (``stdtrit``, Boost's noncentral-t survival function, ``nctdtr``): the same
    values without the distribution objects' argument checks, which cost most of the time in
    the root searches of :func:`runs_needed` and :func:`detectable_effect`.  Needs n > 1."""
    df = 2.0 * n - 2.0
    crit = float(spc.stdtrit(df, 1.0 - alpha / 2.0))
    nc = d * math.sqrt(n / 2.0)
    nct_sf = _nct_sf()
    if nct_sf is None:  # a scipy without the routine: through the distribution object
        sf = float(sps.nct.sf(crit, df, nc))
    else:
        with np.errstate(over="ignore"):  # as scipy.stats.nct.sf (scipy gh-17432)
            sf = min(max(float(nct_sf(crit, df, nc)), 0.0), 1.0)
    p = float(sf + float(spc.nctdtr(df, nc, -crit)))
    return min(1.0, p) if math.isfinite(p) else 1.0


@functools.cache
def _nct_sf():
    """The Boost survival function behind scipy.stats.nct.sf (scipy >= 1.10), None when this
    scipy build lacks it."""
    try:
        from scipy.special._ufuncs import _nct_sf as nct_sf
    except ImportError:  # pragma: no cover - depends on the scipy build
        return None
    return nct_sf


def pooled_relative_sd(groups: Iterable[Sequence[float]]) -> float | None:
    """Pooled standard deviation of several samples, each relative to its own mean
    (dimensionless; ``√(Σ (n_i − 1)·s_i² / Σ (n_i − 1))`` over the values divided by their
    group mean, the pooled estimate of Cohen 1988 §2.2.1).  Groups with fewer than 2 values or
    mean 0 are skipped; None when none remains."""
    num = den = 0.0
    for g in groups:
        x = np.asarray(g, dtype=float)
        if x.size < 2 or float(x.mean()) == 0:
            continue
        r = x / float(x.mean())
        num += (x.size - 1) * float(r.var(ddof=1))
        den += x.size - 1
    return math.sqrt(num / den) if den else None


def runs_needed(effect: float, cv: float, alpha: float = 0.05, power: float = POWER) -> int | None:
    """Runs per environment a two-sided two-sample t-test needs to detect a relative difference
    of means ``effect`` (0.05 = 5 %) at level ``alpha`` with ``power``, when the pooled standard
    deviation is ``cv`` times the mean (:func:`pooled_cv`).  Cohen's d = effect / cv;
    n solves :func:`t_test_power` ``(d, n) = power`` (noncentral t, Cohen 1988 ch. 2; root by
    :func:`scipy.optimize.brentq`), rounded up, at
    least 2.  None when the effect is 0 or more than :data:`MAX_RUNS` runs would be needed.
    Raises ValueError for cv < 0 or alpha/power outside (0, 1)."""
    if cv < 0 or not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError("cv must be >= 0 and alpha, power in (0, 1)")
    effect = abs(effect)
    if effect == 0:
        return None
    if cv == 0:
        return 2
    d = effect / cv
    from scipy.optimize import brentq

    def short(n: float) -> float:
        return t_test_power(d, n, alpha) - power

    if short(MAX_RUNS) < 0:
        return None
    if short(2.0) >= 0:
        return 2
    return math.ceil(brentq(short, 2.0, MAX_RUNS, xtol=1e-6) - 1e-6)


def detectable_effect(cv: float, n: int, alpha: float = 0.05, power: float = POWER) -> float | None:
    """Smallest relative difference of means (0.05 = 5 %) that ``n`` runs per environment
    detect at ``alpha`` with ``power`` when the pooled standard deviation is ``cv`` times the
    mean: ``d · cv`` with d solving :func:`t_test_power` ``(d, n) = power`` (Cohen 1988).
    None for n < 2.  0.0 when cv is 0."""
    if n < 2:
        return None
    if cv == 0:
        return 0.0
    from scipy.optimize import brentq

    def short(d: float) -> float:
        return t_test_power(d, n, alpha) - power

    if short(0.0) >= 0:  # alpha >= power: every effect "detected"
        return 0.0
    return float(brentq(short, 0.0, 1e3)) * cv


def proportion_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Exact (Clopper–Pearson) confidence interval of a proportion k/n, e.g. an observed
    false-positive or coverage rate; None for n = 0."""
    if n == 0:
        return None
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return (float(ci.low), float(ci.high))
