"""Power analysis: how many runs a comparison needs, and what its runs can detect.

Pure functions on numbers; no I/O, no vhpc types.  Effects and coefficients of variation are
dimensionless fractions (0.05 = 5 %); ``alpha`` and ``power`` are in (0, 1).

Sources:

* Power of the two-sample t-test: J. Cohen, *Statistical Power Analysis for the Behavioral
  Sciences*, 2nd ed. (1988), ch. 2 (effect size d = difference of means / pooled standard
  deviation; noncentral t, :data:`scipy.stats.nct`; cross-checked in the tests against
  ``statsmodels.stats.power.TTestIndPower``).
* Power of the two one-sided tests (TOST) of equivalence: the two one-sided noncentral-t
  rejection probabilities combined as ``P(both) ≥ P₁ + P₂ − 1`` (Bonferroni's inequality; the
  noncentral-t approximation of D. Labes, H. Schütz, B. Lang, R package PowerTOST, method
  "nct"), a lower bound of the power, so the runs it plans are, if anything, a few too many.
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
scipy_special = LazyModule("scipy.special")
scipy_stats = LazyModule("scipy.stats")

__all__ = ["POWER", "MAX_RUNS", "MIN_PILOT", "PILOT_RUNS", "PILOT_ADVICE", "pooled_cv", "t_test_power",
           "tost_power", "runs_needed", "runs_needed_tost", "pooled_relative_sd",
           "detectable_effect", "proportion_interval", "campaigns_to_bound", "PLAN_SD_CONFIDENCE",
           "sd_upper_bound", "decide_power", "runs_to_decide_any", "NO_PLAN", "PLAN_PROMISE", "plan_text",
           "BOUND_PROBABILITY", "bound_probability"]


#: statistical power the advice aims at (Cohen 1988's conventional 80 %)
POWER = 0.8
#: above this many runs per environment an effect counts as not measurable (None)
MAX_RUNS = 2000
#: fewest valid runs a side a plan of runs is made from: a standard deviation from 2–4 runs
#: is so uncertain (its 95 % interval from 3 runs spans 0.52–6.3 × the estimate) that a point
#: plan from it spans two orders of magnitude across identical pilots (post-hoc power:
#: Hoenig & Heisey, Am. Stat. 55, 2001)
MIN_PILOT = 5
#: runs a side advised for a pilot from which a plan can be made (twice :data:`MIN_PILOT`:
#: the standard deviation's 95 % interval then spans 0.69–1.8 × the estimate)
PILOT_RUNS = 10
#: what to say instead of a plan below :data:`MIN_PILOT` runs a side
PILOT_ADVICE = f"too few runs to plan: run ≥ {PILOT_RUNS} a side"
#: confidence of the upper bound on the spread that a plan of runs assumes (R. H. Browne,
#: "On the use of a pilot sample for sample size determination", Stat. Med. 14 (1995)
#: 1933–1940: planning on the pilot SD's 80 % upper confidence limit gives the planned power
#: in at least 80 % of pilots, where the SD itself gives it in about half)
PLAN_SD_CONFIDENCE = 0.8
#: what a printed plan promises (:func:`runs_to_decide_any`; measured in docs/statistics.md)
PLAN_PROMISE = "decides 8 times in 10 whatever the ratio, if the spread is within its 80 % bound"
#: what to say where no plan is honest although the pilot is large enough (:data:`MAX_RUNS`)
NO_PLAN = (f"no plan: over {MAX_RUNS:,} runs a side would be needed at the spread's 80 % upper "
           "bound (a wider --margin needs fewer)")


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
    crit = float(scipy_special.stdtrit(df, 1.0 - alpha / 2.0))
    nc = d * math.sqrt(n / 2.0)
    nct_sf = _nct_sf()
    if nct_sf is None:  # a scipy without the routine: through the distribution object
        sf = float(scipy_stats.nct.sf(crit, df, nc))
    else:
        with np.errstate(over="ignore"):  # as scipy.stats.nct.sf (scipy gh-17432)
            sf = min(max(float(nct_sf(crit, df, nc)), 0.0), 1.0)
    p = float(sf + float(scipy_special.nctdtr(df, nc, -crit)))
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


def tost_power(theta: float, sd: float, n: float, alpha: float, bound: float) -> float:
    """Power of the two one-sided tests (TOST, Schuirmann 1987) of equivalence with ``n`` runs
    per side: both ``H₀: θ ≤ −bound`` and ``H₀: θ ≥ bound`` rejected, each one-sided at
    ``alpha``, when the true difference of means is ``theta`` and each side's standard
    deviation ``sd`` (all in one unit: for vhpc's verdicts ln values, ``bound`` = ln(1 +
    margin)).  The interval at level 1 − 2·alpha inside (−bound, bound) is this test.

    ``P₁ + P₂ − 1`` (a lower bound of P(both), module docstring) with
    ``Pᵢ = P(T > t_{1−α, 2n−2})``, T noncentral t of noncentrality ``(bound ± θ)/(sd·√(2/n))``,
    clipped to [0, 1].  Needs n > 1 and sd > 0."""
    df = 2.0 * n - 2.0
    crit = float(scipy_special.stdtrit(df, 1.0 - alpha))
    se = sd * math.sqrt(2.0 / n)
    total = -1.0
    for nc in ((bound + theta) / se, (bound - theta) / se):
        total += 1.0 - float(scipy_special.nctdtr(df, nc, crit))
    return min(1.0, max(0.0, total))


def _smallest_n(ok, lo: int = 2, hi: int = MAX_RUNS) -> int | None:
    """The smallest whole n in [``lo``, ``hi``] with ``ok(n)`` (``ok`` monotone in n), by
    bisection; None when even ``hi`` is not enough."""
    if not ok(hi):
        return None
    if ok(lo):
        return lo
    while hi - lo > 1:  # ok(hi) and not ok(lo)
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def runs_needed_tost(theta: float, sd: float, bound: float, alpha: float,
                     power: float = POWER) -> int | None:
    """Runs per side the two one-sided tests need to show equivalence within ±``bound`` with
    ``power`` (:func:`tost_power`, each one-sided test at ``alpha``) when the true difference
    is ``theta`` and the standard deviation ``sd`` (one unit for all three).  None when
    ``|theta| ≥ bound`` (equivalence is then false) or more than :data:`MAX_RUNS` runs would
    be needed; 2 when ``sd`` is 0.  Raises ValueError for sd < 0, bound ≤ 0 or alpha/power
    outside (0, 1)."""
    if sd < 0 or bound <= 0 or not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError("sd must be >= 0, bound > 0 and alpha, power in (0, 1)")
    if abs(theta) >= bound:
        return None
    if sd == 0:
        return 2
    return _smallest_n(lambda n: tost_power(theta, sd, n, alpha, bound) >= power)


def plan_text(runs: int | None, n: int) -> str:
    """A plan of runs in words, the one wording of every page: "≈N runs each: " and
    :data:`PLAN_PROMISE`; from fewer than :data:`MIN_PILOT` runs a side (``n``, the smaller
    side) :data:`PILOT_ADVICE`; without a plan (``runs`` None) :data:`NO_PLAN`."""
    if n < MIN_PILOT:
        return PILOT_ADVICE
    return f"≈{runs} runs each: {PLAN_PROMISE}" if runs else NO_PLAN


def sd_upper_bound(sd: float, df: float, confidence: float = PLAN_SD_CONFIDENCE) -> float:
    """One-sided upper confidence bound of a normal standard deviation estimated as ``sd``
    (any unit) with ``df`` degrees of freedom: ``sd · √(df / χ²_{1−c, df})`` (the χ²
    interval of a variance, e.g. Montgomery & Runger §8.3; ``scipy.stats.chi2.ppf``); ``sd``
    itself for df ≤ 0."""
    if df <= 0 or sd == 0:
        return sd
    return sd * math.sqrt(df / float(scipy_stats.chi2.ppf(1.0 - confidence, df)))


#: quantiles of the sample variance's χ² distribution :func:`decide_power` averages over
_CHI2_POINTS = 64


def decide_power(theta, sd: float, n: float, alpha: float, bound: float) -> np.ndarray:
    """Probability that the interval at level 1 − ``alpha`` of a difference from ``n`` runs a
    side decides (lies above or below 0, or inside (−bound, bound)) when the true difference
    is ``theta`` (array) and each side's standard deviation ``sd``, all in one unit (for
    vhpc's verdicts ln values, ``bound`` = ln(1 + margin)).  Exact for the pooled t interval
    d ± h, h = t_{1−α/2, 2n−2} · ŝ · √(2/n): given ŝ the interval is undecided exactly when
    max(bound − h, 0) < |d| ≤ h (empty once h ≤ bound/2: every outcome then decides), d is
    normal about ``theta`` and independent of ŝ, and ŝ² ~ sd² χ²_{2n−2}/(2n−2) is averaged
    over :data:`_CHI2_POINTS` equally likely quantiles (the integration of exact TOST power,
    K. F. Phillips, J. Pharmacokinet. Biopharm. 18 (1990) 137–144).  Welch's interval, which
    vhpc shows, has a few fewer df; the simulations of docs/statistics.md measure it.
    Vectorised over ``theta``; needs n > 1 and sd > 0."""
    th = np.abs(np.asarray(theta, dtype=float))[:, None]
    df = 2.0 * n - 2.0
    se = sd * math.sqrt(2.0 / n)
    q = (np.arange(_CHI2_POINTS) + 0.5) / _CHI2_POINTS
    s_hat = sd * np.sqrt(scipy_special.chdtri(df, 1.0 - q) / df)  # chdtri: inverse of the upper tail
    h = (float(scipy_special.stdtrit(df, 1.0 - alpha / 2.0)) * s_hat * math.sqrt(2.0 / n))[None, :]
    a = np.minimum(np.maximum(bound - h, 0.0), h)
    def cdf(v: np.ndarray) -> np.ndarray:  # of the difference d, normal about θ
        return scipy_special.ndtr((v - th) / se)
    undecided = (cdf(h) - cdf(a)) + (cdf(-a) - cdf(-h))
    return 1.0 - undecided.mean(axis=1)


#: points of [0, bound] on which :func:`runs_to_decide_any` looks for the hardest difference
_GRID = 65


@functools.lru_cache(maxsize=4096)
def runs_to_decide_any(sd: float, alpha: float, bound: float, power: float = POWER,
                       at_least: int = 2) -> int | None:
    """Runs per side (≥ ``at_least``) after which an interval at level 1 − ``alpha`` decides
    with probability ≥ ``power`` whatever the true difference, when each side's standard
    deviation is ``sd`` (the unit of ``bound``): the smallest n with min over θ of
    :func:`decide_power` ≥ ``power``.  The hardest difference lies in [0, bound] (near
    bound/2: half the margin must be told from both 0 and the margin); it is found on a grid
    of that range.  An undecided interval always covers [0, bound] on one side (it
    holds 0 and leaves the band), so no pilot can rule that hardest difference out: the plan
    does not depend on the pilot's ratio.  None when more than :data:`MAX_RUNS` are needed;
    ``at_least`` when sd is 0.  Raises ValueError for sd < 0 or alpha/power outside (0, 1)."""
    if sd < 0 or not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError("sd must be >= 0 and alpha, power in (0, 1)")
    if sd == 0:
        return max(2, at_least)
    if bound <= 0:
        return None  # without a band a true difference of 0 is never decided
    grid = np.linspace(0.0, bound, _GRID)
    return _smallest_n(lambda n: float(decide_power(grid, sd, n, alpha, bound).min()) >= power,
                       max(2, at_least))


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


#: probability with which :func:`campaigns_to_bound` bounds a rate (as a plan's power)
BOUND_PROBABILITY = 0.8


def bound_probability(rate: float, above: float, n: int, confidence: float = 0.95) -> float:
    """Probability that ``n`` trials bound a proportion whose true value is ``rate``: that
    the exact (Clopper–Pearson) upper bound at ``confidence`` of k successes of n, k
    binomial(n, rate), is ≤ ``above``: P(K ≤ k*) with k* the most successes whose bound
    still is (the bound grows with k; ``scipy.stats.beta.ppf`` and ``binom.cdf``)."""
    if n < 1:
        return 0.0
    ks = np.arange(n + 1)
    upper = np.where(ks < n, scipy_stats.beta.ppf(1 - (1 - confidence) / 2, ks + 1, n - ks), 1.0)
    ok = np.nonzero(upper <= above)[0]
    if not ok.size:
        return 0.0
    return float(scipy_stats.binom.cdf(int(ok.max()), n, rate))


def campaigns_to_bound(rate: float, above: float, confidence: float = 0.95,
                       probability: float = BOUND_PROBABILITY, most: int = 20000) -> int | None:
    """How many trials (campaigns) bound a proportion below ``above`` with ``probability``
    when its true value is ``rate`` (:func:`bound_probability`: the exact Clopper–Pearson
    upper bound at ``confidence`` ≤ ``above``): the smallest such n, found by doubling then
    bisection on the smallest n past which the probability stays ≥ ``probability`` on a
    check of the next few n (the probability saw-tooths with n, a binomial's discreteness).
    A true rate of 0 is bounded for sure once the bound of 0 successes is (36 campaigns for
    10 %); at α = 5 % the same 10 % takes about 230.  None when ``rate`` ≥ ``above`` (no
    number of campaigns bounds a rate below itself) or more than ``most`` are needed.
    Raises ValueError unless 0 ≤ rate ≤ 1 and 0 < above ≤ 1."""
    if not (0 <= rate <= 1 and 0 < above <= 1):
        raise ValueError("need 0 <= rate <= 1 and 0 < above <= 1")
    if rate >= above:
        return None

    def ok(n: int) -> bool:  # ≥ probability at n and the next few (the saw-tooth's dips)
        return all(bound_probability(rate, above, m, confidence) >= probability
                   for m in range(n, n + 5))
    hi = 2
    while not ok(hi):
        hi *= 2
        if hi > most:
            return None
    return _smallest_n(ok, 1, hi)


def proportion_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Exact (Clopper–Pearson) confidence interval of a proportion k/n, e.g. an observed
    false-positive or coverage rate; None for n = 0."""
    if n == 0:
        return None
    ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return (float(ci.low), float(ci.high))
