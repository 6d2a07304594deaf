"""Statistics: the one place vhpc computes them, with :mod:`vhpc.core.power` for power analysis
(analysis, campaign and report call in here).

Pure functions on numbers and arrays; no I/O, no vhpc types.  Every interval is two-sided at
``confidence`` (a fraction in (0, 1), e.g. 0.95); means and variances are in the metric's unit
(unit²), ratios are dimensionless.  Names follow the sources: two samples are ``a`` and ``b``
as :func:`scipy.stats.ttest_ind` names them (``x`` and ``y`` for a line's coordinates),
``n`` a sample's size, ``df`` degrees of freedom, ``lo``/``hi`` an interval's bounds.

Sources:

* Student-t CI of a mean: Student (1908); Montgomery & Runger, *Applied Statistics and
  Probability for Engineers*, §8.2.
* Welch's unequal-variance t-test and the Welch–Satterthwaite degrees of freedom: B. L. Welch,
  Biometrika 34 (1947) 28–35; F. E. Satterthwaite, Biometrics Bulletin 2 (1946) 110–114.
* Ratio of two means, Fieller's theorem: E. C. Fieller, J. Roy. Stat. Soc. B 16 (1954) 175–185
  (a library function; vhpc's analysis compares data with values ≤ 0 by the difference of
  means, :func:`welch_difference`, whose direction a ratio of means of either sign can flip).
* Contrasts of means (:func:`welch_contrast`): Welch's t with Satterthwaite's df over any
  number of independent samples (``vhpc diff``: four).
* Multiple comparisons: S. Holm, Scand. J. Statist. 6 (1979) 65–70
  (``statsmodels.stats.multitest.multipletests``); the one confidence level compatible with
  Holm's decisions (:func:`vhpc.core.logratio.holm_level`): after Holm rejects r of m hypotheses, the remaining
  ones are tested at α/(m − r), and every rejected one has p < α/(m − r) too.
* Ratio of positive quantities on the log scale (:func:`vhpc.core.logratio.log_welch`): Welch's t on ln values,
  interval ``exp(Δ ± t·se)`` of the ratio of geometric means; test and interval are one
  statistic, so the interval excludes 1 exactly when p < 1 − level (Hoefler & Belli,
  "Scientific Benchmarking of Parallel Computing Systems", SC'15: run times and rates are
  multiplicative, the log scale is where they are near normal).
* Equivalence: two one-sided tests (TOST), D. J. Schuirmann, J. Pharmacokinet. Biopharm. 15
  (1987) 657–680: equivalent within a margin when the interval lies inside the margin band
  (:func:`vhpc.core.logratio.decide`).
* Least-squares line: :func:`scipy.stats.linregress` (ordinary least squares, r² = Pearson r²).
* Outliers: B. Iglewicz & D. C. Hoaglin, *How to Detect and Handle Outliers*, ASQC (1993):
  modified z-score.

Power analysis (runs needed, smallest detectable effect) and proportions are in
:mod:`vhpc.core.power`; the one model a comparison is decided and shown by (Welch's t on ln
values, Holm's level, four outcomes) in :mod:`vhpc.core.logratio`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

from vhpc.core.lazy import LazyModule

# scipy is imported on first use: a command that computes no statistic (``vhpc list``, a
# one-line error, ``--dry-run``) does not pay its import (about 1 s of a 2 s start).
scipy_special = LazyModule("scipy.special")
scipy_stats = LazyModule("scipy.stats")

__all__ = [
    "RatioInterval",
    "FIELLER", "LOG_WELCH", "DIFFERENCE", "RANK", "EXACT", "NO_INTERVAL", "METHODS",
    "welch_difference", "difference_contrast", "welch_contrast", "Contrast", "hodges_lehmann",
    "shift_test", "mann_whitney_cdf", "mann_whitney_counts",
    "t_quantile", "t_sf",
    "student_t_ci", "relative_halfwidth", "imprecise_keys", "welch_test", "fieller_interval",
    "fieller_contains", "ratio_interval",
    "holm_adjust", "modified_z_outliers", "grubbs_outlier", "mean", "linear_fit", "Description",
    "describe",
]

#: ratio-interval methods (the names exported per comparison)
FIELLER = "fieller"
LOG_WELCH = "log-welch"
DIFFERENCE = "welch-difference"
RANK = "hodges-lehmann"
EXACT = "exact"
NO_INTERVAL = "none"
METHODS = {
    FIELLER: "Fieller (1954)",
    LOG_WELCH: "Welch's t on ln values: ratio of geometric means (Welch 1947)",
    DIFFERENCE: "Welch's interval of the difference of means, in the metric's unit (values ≤ 0)",
    RANK: "Hodges–Lehmann estimate with the Mann–Whitney (Moses) interval on ln values",
    EXACT: "no variation: the ratio is exact",
    NO_INTERVAL: "fewer than 2 samples: no interval",
}

#: modified z-score threshold (Iglewicz & Hoaglin 1993)
MAD_THRESHOLD = 3.5
#: 1 / Φ⁻¹(3/4): makes the MAD a consistent estimator of σ for normal data
MAD_SCALE = 1.4826
#: sqrt(π/2): makes the mean absolute deviation consistent for σ (fallback when MAD = 0)
MEANAD_SCALE = 1.253314


#: values whose magnitudes stay within [1/EXTREME, EXTREME] are computed as they are; beyond,
#: scale-free statistics are computed on values divided by a common scale (squares and sums
#: of values near 1e200 or 1e-320 would overflow to inf or underflow to 0)
EXTREME = 1e150


def common_scale(*samples: Sequence[float]) -> float:
    """1.0 when every finite non-zero value of ``samples`` has a magnitude within
    [1/EXTREME, EXTREME] (the usual case: nothing is rescaled); otherwise the largest
    magnitude, by which the values are divided before scale-free statistics (ratios,
    t-tests, CVs) are computed, so finite extremes give finite results."""
    top = 0.0
    low = math.inf
    for s in samples:
        x = np.abs(np.asarray(s, dtype=float))
        x = x[np.isfinite(x) & (x > 0)]
        if x.size:
            top, low = max(top, float(x.max())), min(low, float(x.min()))
    if top == 0.0 or (top <= EXTREME and low >= 1.0 / EXTREME):
        return 1.0
    return top


def _finite(v: float | None) -> float | None:
    """``v``, or None when it is not a finite number (a bound beyond the float range)."""
    return v if v is not None and math.isfinite(v) else None


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean (same unit as the values), None for no values."""
    return float(np.mean(np.asarray(values, dtype=float))) if len(values) else None


@dataclass(frozen=True)
class Description:
    """Descriptive statistics of one sample (values' unit): n, mean and median (None for
    n = 0), stdev (ddof = 1), Student-t CI of the mean, CV = stdev/|mean| (None for n < 2,
    mean 0 or a negative value: no ratio scale) and the count of modified-z outliers."""

    n: int
    mean: float | None = None
    median: float | None = None
    stdev: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    cv: float | None = None
    outliers: int = 0


def describe(values: Sequence[float], confidence: float = 0.95) -> Description:
    """:class:`Description` of ``values`` (:func:`student_t_ci`, :func:`modified_z_outliers`)."""
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        return Description(0)
    k = common_scale(x)
    if k != 1.0:  # finite extremes: computed on x / k, so sums and squares stay finite
        d = describe(x / k, confidence)
        with np.errstate(over="ignore"):
            big = [None if v is None else _finite(v * k)
                   for v in (d.mean, d.median, d.stdev, d.ci_low, d.ci_high)]
        return Description(n, *big, d.cv, d.outliers)
    m, med = float(x.mean()), float(np.median(x))
    if n < 2:
        return Description(n, m, med)
    sd = float(x.std(ddof=1))
    lo, hi = student_t_ci(m, sd, n, confidence)
    # a CV needs a ratio scale: none where a value is negative
    cv = sd / abs(m) if m != 0 and float(x.min()) >= 0 else None
    return Description(n, m, med, sd, lo, hi, cv, _outliers(x, med, MAD_THRESHOLD))


def linear_fit(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Ordinary least-squares line y = intercept + slope·x (``scipy.stats.linregress``).
    Returns (slope, intercept, r²).  Raises ValueError when x has fewer than 2 distinct
    values."""
    if len(set(x)) < 2:
        raise ValueError("a line needs at least 2 distinct x values")
    res = scipy_stats.linregress(x, y)
    return float(res.slope), float(res.intercept), float(res.rvalue ** 2)


def _t_ppf(q: float, df: float) -> float:
    """``scipy.stats.t.ppf(q, df)`` through the special function behind it (``stdtrit``):
    the same value without the distribution object's argument handling; edge cases (q not in
    (0, 1), df not > 0) still go through ``scipy.stats.t``."""
    if 0.0 < q < 1.0 and df > 0:
        return float(scipy_special.stdtrit(df, q))
    return float(scipy_stats.t.ppf(q, df))


def _t_sf(x: float, df: float) -> float:
    """``scipy.stats.t.sf(x, df)`` through the special function behind it (``stdtr(df, -x)``),
    so that a report's p-values do not import scipy.stats (1.1 s against 0.25 s for
    scipy.special here); edge cases (df not > 0, x not finite) still go through scipy.stats."""
    if df > 0 and math.isfinite(x):
        return float(scipy_special.stdtr(df, -x))
    return float(scipy_stats.t.sf(x, df))


def _tq(confidence: float, df: float) -> float:
    """Two-sided Student-t quantile t_{(1+c)/2, df}."""
    return _t_ppf(0.5 + confidence / 2.0, df)


def t_sf(x: float, df: float) -> float:
    """Upper tail P(T_df > x) of Student's t (``scipy.stats.t.sf``): half a two-sided p."""
    return _t_sf(x, df)


def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student-t quantile t_{(1+c)/2, df} (``scipy.stats.t.ppf``), e.g. 2.776 for
    c = 0.95, df = 4: the multiplier of a standard error in an interval at ``confidence``."""
    return _tq(confidence, df)


def student_t_ci(mean: float, stdev: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval of a mean: ``mean ± t_{(1+c)/2, n−1} · stdev / √n``.

    mean, stdev: in the metric's unit; n: sample count (≥ 2).  Returns (low, high) in the
    metric's unit (``scipy.stats.t.interval``).  Raises ValueError when n < 2.
    """
    if n < 2:
        raise ValueError(f"a confidence interval needs n >= 2 samples, got n={n}")
    if stdev == 0:
        return (mean, mean)
    scale = stdev / math.sqrt(n)
    if not (0.0 < confidence < 1.0 and scale > 0):  # edge cases as scipy answers them
        lo, hi = scipy_stats.t.interval(confidence, n - 1, loc=mean, scale=scale)
        return (float(lo), float(hi))
    # scipy.stats.t.interval's arithmetic: ppf((1 ∓ c)/2) · scale + loc
    return (_t_ppf((1.0 - confidence) / 2, n - 1) * scale + mean,
            _t_ppf((1.0 + confidence) / 2, n - 1) * scale + mean)


def relative_halfwidth(values: Sequence[float], confidence: float = 0.95) -> float | None:
    """Half-width of the Student-t CI of the mean divided by |mean| (0.02 = ±2 %).

    None when fewer than 2 values or the mean is 0 (precision undefined).
    """
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return None
    mean = float(x.mean())
    if mean == 0:
        return None
    lo, hi = student_t_ci(mean, float(x.std(ddof=1)), int(x.size), confidence)
    return (hi - lo) / 2.0 / abs(mean)


def imprecise_keys(groups: Mapping[Hashable, Sequence[float]], target: float,
                   confidence: float = 0.95) -> list[Hashable]:
    """Keys of ``groups`` whose mean is not known within ``target`` (relative half-width, see
    :func:`relative_halfwidth`); a group with an undefined precision counts as imprecise."""
    out = []
    for key, values in groups.items():
        rel = relative_halfwidth(values, confidence)
        if rel is None or rel > target:
            out.append(key)
    return out


@dataclass(frozen=True)
class Contrast:
    """Welch's t of a contrast ``Σ signᵢ · meanᵢ`` of independent samples (Welch 1947;
    Satterthwaite 1946): ``estimate`` (the values' unit), ``se`` = √Σ varᵢ/nᵢ, ``df`` the
    Welch–Satterthwaite degrees of freedom ``(Σ uᵢ)² / Σ uᵢ²/(nᵢ − 1)`` with uᵢ = varᵢ/nᵢ
    (None without variation), ``p`` the two-sided p of t = estimate / se (0 or 1 without
    variation).  Two samples (+1, −1): Welch's two-sample test; four (+1, −1, −1, +1): the
    change of a difference between two campaigns (``vhpc diff``)."""

    estimate: float
    se: float
    df: float | None
    p: float

    def interval(self, confidence: float) -> tuple[float, float]:
        """``estimate ± t_{(1+c)/2, df} · se``: excludes 0 exactly when p < 1 − confidence;
        (estimate, estimate) without variation."""
        if self.se == 0 or self.df is None:
            return (self.estimate, self.estimate)
        half = _tq(confidence, self.df) * self.se
        return (self.estimate - half, self.estimate + half)


def welch_contrast(means: Sequence[float], variances: Sequence[float], counts: Sequence[int],
                   signs: Sequence[int]) -> Contrast | None:
    """:class:`Contrast` of independent samples from their means, sample variances (ddof 1,
    unit²) and counts; None when a sample has fewer than 2 values.  The one Welch computation:
    :func:`welch_test`, :func:`difference_contrast` and the log-scale contrast
    (:func:`vhpc.core.logratio.contrast_of`) all come through here."""
    if any(n < 2 for n in counts):
        return None
    d = float(sum(sg * m for sg, m in zip(signs, means)))
    us = [v / n for v, n in zip(variances, counts)]
    se2 = sum(us)
    if se2 == 0:
        return Contrast(d, 0.0, None, 0.0 if d != 0 else 1.0)
    den = sum(u * u / (n - 1) for u, n in zip(us, counts) if u > 0)
    if den > 0 and math.isfinite(den):
        df = se2 * se2 / den
    else:  # squares of tiny u underflow: the same df from the shares u / Σu
        df = 1.0 / sum((u / se2) ** 2 / (n - 1) for u, n in zip(us, counts) if u > 0)
    se = math.sqrt(se2)
    return Contrast(d, se, df, min(1.0, 2.0 * _t_sf(abs(d) / se, df)))


def welch_test(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float,
               n_b: int) -> tuple[float | None, float | None]:
    """Two-sided Welch t-test of equal means from summary statistics (:func:`welch_contrast`
    of (+1, −1)).

    var_a, var_b: sample variances (ddof = 1, unit²); n_a, n_b: sample counts.
    ``t = (mean_a − mean_b) / √(v_a + v_b)`` with ``v = var/n``,
    ``df = (v_a + v_b)² / (v_a²/(n_a−1) + v_b²/(n_b−1))``; p = 2·P(T_df > |t|), the value of
    ``scipy.stats.ttest_ind_from_stats(equal_var=False)``.
    Returns (p, df).  Degenerate cases: n < 2 on either side → (None, None); zero variance on
    both sides → (0.0, None) when the means differ, (1.0, None) when they are equal.
    """
    c = welch_contrast((mean_a, mean_b), (var_a, var_b), (n_a, n_b), (1, -1))
    return (None, None) if c is None else (c.p, c.df)


def difference_contrast(samples: Sequence[Sequence[float]], signs: Sequence[int],
                        confidence: float = 0.95
                        ) -> tuple[float, float | None, float | None, float | None, float | None]:
    """A contrast ``Σ signᵢ · mean(sampleᵢ)`` of arithmetic means (the values' unit) with
    Welch's interval at ``confidence`` and its two-sided p (:func:`welch_contrast`): two
    samples (+1, −1) are :func:`welch_difference`; four (+1, −1, −1, +1) the change of an
    environment's difference to its baseline between two campaigns (``vhpc diff`` of a metric
    whose values can be ≤ 0).

    Returns (Δ, low, high, df, p); (Δ, None, None, None, None) when a sample has fewer than 2
    values; (Δ, Δ, Δ, None, 0 or 1) without variation.  Raises ValueError for an empty
    sample."""
    xs = [np.asarray(s, dtype=float) for s in samples]
    if any(not x.size for x in xs):
        raise ValueError("a difference of means needs values on both sides")
    d = float(sum(sg * float(x.mean()) for sg, x in zip(signs, xs)))
    c = welch_contrast([float(x.mean()) for x in xs],
                       [float(x.var(ddof=1)) if x.size > 1 else 0.0 for x in xs],
                       [int(x.size) for x in xs], signs)
    if c is None:
        return (d, None, None, None, None)
    lo, hi = c.interval(confidence)
    return (d, lo, hi, c.df, c.p)


def welch_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95
                     ) -> tuple[float, float | None, float | None, float | None, float | None]:
    """Difference of means mean(a) − mean(b) (the values' unit) with Welch's interval at
    ``confidence`` and the two-sided p of :func:`welch_test` (Welch 1947): ``Δ ± t_{df} ·
    √(s_a²/n_a + s_b²/n_b)``, Welch–Satterthwaite df; the interval and the test are one
    statistic, so it excludes 0 exactly when p < 1 − confidence (the values of
    ``scipy.stats.ttest_ind(a, b, equal_var=False)`` and its ``confidence_interval``).  For
    metrics whose values can be ≤ 0, which have no log scale.

    Returns (Δ, low, high, df, p); (Δ, None, None, None, None) with fewer than 2 values a
    side; (Δ, Δ, Δ, None, 0 or 1) without variation.  Raises ValueError for an empty side."""
    return difference_contrast((a, b), (1, -1), confidence)


def hodges_lehmann(a: Sequence[float], b: Sequence[float], confidence: float = 0.95
                   ) -> tuple[float, float | None, float | None]:
    """Hodges–Lehmann estimate of the shift a − b (median of the n_a·n_b pairwise differences;
    Hodges & Lehmann, Ann. Math. Statist. 34 (1963) 598–611) with the distribution-free
    interval that inverts the Mann–Whitney test (Moses 1953; Hollander & Wolfe,
    *Nonparametric Statistical Methods*, 2nd ed. §4.3): the k-th smallest and k-th largest
    pairwise differences, k = the largest whole number with 2·P(U ≤ k − 1) < 1 − confidence
    under :func:`mann_whitney_cdf` (the exact null distribution up to 2,500 pairs, one normal
    approximation beyond), so the interval's coverage is at least ``confidence``.  The same
    distribution gives :func:`shift_test`'s p: the interval excludes 0 exactly when that p is
    below 1 − confidence.  Applied to ln values it is the ratio's estimate and interval of
    ``--method rank``.

    Returns (shift, low, high); bounds None when the samples are too small for any interval at
    ``confidence`` (e.g. 3 a side at 95 %: the smallest two-sided p of the test is 0.1).
    Raises ValueError for an empty side."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not x.size or not y.size:
        raise ValueError("a shift needs values on both sides")
    diffs = np.sort(np.subtract.outer(x, y).ravel())
    est = float(np.median(diffs))
    nx, ny = int(x.size), int(y.size)
    k = _moses_k(nx, ny, 1.0 - confidence)
    if k < 1:
        return (est, None, None)
    return (est, float(diffs[k - 1]), float(diffs[-k]))


def shift_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p of the Mann–Whitney test of no shift between ``a`` and ``b``, from the
    distribution :func:`hodges_lehmann`'s interval inverts (:func:`mann_whitney_cdf`):
    ``min(1, 2·P(U ≤ c))`` with c the fewer of the pairwise differences a_i − b_j that are
    ≤ 0 and that are ≥ 0 (a difference of exactly 0 counts against both sides: with ties the
    test is conservative, never liberal).  So the interval at level L excludes 0 exactly when
    p < 1 − L, and a verdict read off it never disagrees with the p shown (scipy's
    ``mannwhitneyu`` switches to a tie-corrected normal approximation with ties or more than
    8 values, which the exact interval does not).  Raises ValueError for an empty side."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not x.size or not y.size:
        raise ValueError("a shift needs values on both sides")
    d = np.subtract.outer(x, y)
    c = min(int(np.count_nonzero(d <= 0)), int(np.count_nonzero(d >= 0)))
    return min(1.0, 2.0 * mann_whitney_cdf(c, int(x.size), int(y.size)))


def mann_whitney_counts(nx: int, ny: int) -> list[int]:
    """How many of the C(nx + ny, nx) equally likely rankings give each Mann–Whitney U =
    0 … nx·ny under the null (no ties): the coefficients of the Gaussian binomial
    Π_{i=1..nx} (1 − q^{ny+i}) / (1 − q^i) (Mann & Whitney, Ann. Math. Statist. 18 (1947)
    50–60), in exact integers."""
    return list(_mw_counts(nx, ny))


@functools.lru_cache(maxsize=256)
def _mw_counts(nx: int, ny: int) -> tuple[int, ...]:
    """:func:`mann_whitney_counts`, computed once per sample sizes."""
    total = nx * ny
    poly = [1] + [0] * total
    for i in range(1, nx + 1):
        step = ny + i  # multiply by (1 − q^step), then divide by (1 − q^i)
        for u in range(total, step - 1, -1):
            poly[u] -= poly[u - step]
        for u in range(i, total + 1):
            poly[u] += poly[u - i]
    return tuple(poly)


#: most pairs nx·ny for which :func:`mann_whitney_cdf` is exact (beyond: normal)
EXACT_PAIRS = 2500


def mann_whitney_cdf(c: int, nx: int, ny: int) -> float:
    """P(U ≤ c) of the Mann–Whitney U of samples of ``nx`` and ``ny`` under the null: exact
    (:func:`mann_whitney_counts`) up to :data:`EXACT_PAIRS` pairs; beyond, the normal
    approximation with continuity correction Φ((c + ½ − nx·ny/2) / √(nx·ny·(nx+ny+1)/12))
    (Hollander & Wolfe eq. 4.41).  The one distribution of ``--method rank``'s p and
    interval."""
    total = nx * ny
    if c < 0:
        return 0.0
    if c >= total:
        return 1.0
    if total > EXACT_PAIRS:
        return float(scipy_special.ndtr((c + 0.5 - total / 2) / math.sqrt(total * (nx + ny + 1) / 12.0)))
    counts = _mw_counts(nx, ny)
    return sum(counts[: c + 1]) / math.comb(nx + ny, nx)


def _moses_k(nx: int, ny: int, alpha: float) -> int:
    """The largest k with 2·P(U ≤ k − 1) < alpha under :func:`mann_whitney_cdf`: the rank of
    the pairwise difference that bounds the interval (0: no interval at this level)."""
    total = nx * ny
    if total > EXACT_PAIRS:  # invert the normal approximation, then settle on the exact k
        z = float(scipy_stats.norm.ppf(1 - alpha / 2))
        k = max(int(math.floor(total / 2 - z * math.sqrt(total * (nx + ny + 1) / 12.0))), 0)
        while k > 0 and 2 * mann_whitney_cdf(k - 1, nx, ny) >= alpha:
            k -= 1
        while k < total // 2 and 2 * mann_whitney_cdf(k, nx, ny) < alpha:
            k += 1
        return k
    counts = _mw_counts(nx, ny)
    every = math.comb(nx + ny, nx)
    k, below = 0, 0
    while k <= total // 2:
        below += counts[k]  # P(U ≤ k) · every
        if 2 * below >= alpha * every:
            break
        k += 1
    return k


def rank_min_runs(confidence: float = 0.95, most: int = 1000) -> int | None:
    """The fewest runs a side (equal sides) for which :func:`hodges_lehmann` gives an interval
    at ``confidence``: the smallest n with :func:`_moses_k` (n, n) ≥ 1, i.e. 2 / C(2n, n) ≤
    1 − confidence (the exact Mann–Whitney null's smallest two-sided p; 4 at 95 %, 5 at
    99 %); None beyond ``most``."""
    alpha = 1.0 - confidence
    for n in range(1, most + 1):
        if 2 <= alpha * math.comb(2 * n, n):  # k ≥ 1: the extreme pair bounds the interval
            return n
    return None


def _fieller_df(sa2: float, sb2: float, n_a: int, n_b: int, r: float) -> float:
    """Welch–Satterthwaite df of a − r·b."""
    denom = (sa2 * sa2 / (n_a - 1) if sa2 > 0 else 0.0)
    denom += (r**4) * sb2 * sb2 / (n_b - 1) if sb2 > 0 else 0.0
    if denom == 0:  # sa2 == 0 and r == 0
        return float(n_b - 1)
    return (sa2 + r * r * sb2) ** 2 / denom


def fieller_interval(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float,
                     n_b: int, confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """Confidence interval of the ratio R = mean_a / mean_b of two independent means.

    Fieller's theorem (Fieller 1954): the set of R with
    ``(a − R·b)² ≤ t² · (s_a² + R²·s_b²)`` where a, b are the sample means,
    ``s_a² = var_a/n_a``, ``s_b² = var_b/n_b`` and t the two-sided Student-t quantile.  Bounds:
    ``R = [ab ± t √(a² s_b² + b² s_a² − t² s_a² s_b²)] / (b² − t² s_b²)``.  Degrees of freedom:
    Welch–Satterthwaite for a − R̂·b at R̂ = a/b:
    ``df = (s_a² + R̂² s_b²)² / (s_a⁴/(n_a−1) + R̂⁴ s_b⁴/(n_b−1))``.

    Returns (low, high, df).  When ``b² ≤ t² s_b²`` the denominator is not significantly
    different from 0 and the set is unbounded: (None, None, df).  n < 2 on either side or
    b = 0: (None, None, None).  Zero variance on both sides: (R̂, R̂, None).
    """
    if n_a < 2 or n_b < 2 or mean_b == 0:
        return (None, None, None)
    a, b = mean_a, mean_b
    sa2, sb2 = var_a / n_a, var_b / n_b
    r = a / b
    if sa2 == 0 and sb2 == 0:
        return (r, r, None)
    df = _fieller_df(sa2, sb2, n_a, n_b, r)
    t = _tq(confidence, df)
    q = b * b - t * t * sb2
    if q <= 0:
        return (None, None, df)
    disc = a * a * sb2 + b * b * sa2 - t * t * sa2 * sb2
    root = t * math.sqrt(max(disc, 0.0))
    lo, hi = (a * b - root) / q, (a * b + root) / q
    return (min(lo, hi), max(lo, hi), df)


def fieller_contains(value: float, mean_a: float, var_a: float, n_a: int, mean_b: float,
                     var_b: float, n_b: int, confidence: float = 0.95) -> bool:
    """True when ``value`` lies in Fieller's confidence set of mean_a / mean_b (bounded or
    not): ``(a − value·b)² ≤ t² (s_a² + value² s_b²)`` with the df of :func:`fieller_interval`."""
    sa2, sb2 = var_a / n_a, var_b / n_b
    df = _fieller_df(sa2, sb2, n_a, n_b, mean_a / mean_b if mean_b else 0.0)
    t = _tq(confidence, df)
    return (mean_a - value * mean_b) ** 2 <= t * t * (sa2 + value * value * sb2)


@dataclass(frozen=True)
class RatioInterval:
    """A confidence interval of mean(a) / mean(b) and how it was obtained.

    low, high: bounds (dimensionless), both None when there is no interval or when Fieller's
    set is unbounded; method: one of :data:`METHODS`; df: degrees of freedom of the t quantile
    (None for bootstrap/exact/none); contains_one: whether 1 lies in the confidence set (for an
    unbounded Fieller set too), None without an interval; side: +1 when the set lies above 1,
    −1 below, 0 when it contains 1 or there is none.
    """

    low: float | None
    high: float | None
    method: str
    df: float | None = None
    contains_one: bool | None = None

    @property
    def bounded(self) -> bool:
        """True when both bounds are finite numbers."""
        return self.low is not None and self.high is not None

    @property
    def unbounded(self) -> bool:
        """True for a Fieller set without finite bounds (denominator not different from 0)."""
        return self.method == FIELLER and not self.bounded

    @property
    def side(self) -> int:
        """+1: the set lies above 1; −1: below 1; 0: contains 1 or no interval."""
        if self.contains_one is None or self.contains_one:
            return 0
        if self.bounded:
            return 1 if self.low > 1.0 else -1
        return 0


def ratio_interval(a: Sequence[float], b: Sequence[float], confidence: float = 0.95
                   ) -> RatioInterval:
    """Fieller's confidence set of mean(a) / mean(b) (:func:`fieller_interval`), for data
    with values ≤ 0, which have no log scale (positive data are compared by
    :func:`vhpc.core.logratio.log_welch`).  Fewer than 2 values on a side or mean(b) = 0 →
    ``none``; no variation on both sides → ``exact`` (R̂, R̂); else ``fieller``, possibly
    unbounded, with whether 1 lies in the set."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    k = common_scale(x, y)
    if k != 1.0:  # the ratio and its interval are scale-free: extremes computed at scale 1
        x, y = x / k, y / k
    if x.size < 2 or y.size < 2 or float(y.mean()) == 0:
        return RatioInterval(None, None, NO_INTERVAL)
    ma, mb = float(x.mean()), float(y.mean())
    va, vb = float(x.var(ddof=1)), float(y.var(ddof=1))
    if va == 0 and vb == 0:
        r = ma / mb
        return RatioInterval(r, r, EXACT, None, r == 1.0)
    lo, hi, df = fieller_interval(ma, va, x.size, mb, vb, y.size, confidence)
    inside = fieller_contains(1.0, ma, va, x.size, mb, vb, y.size, confidence)
    return RatioInterval(lo, hi, FIELLER, df, inside)


def holm_adjust(p_values: Iterable[float], alpha: float = 0.05) -> list[float]:
    """Holm–Bonferroni adjusted p-values (Holm 1979), same order as the input.

    Sort ascending p_(1) ≤ … ≤ p_(m); adjusted p_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)).
    The same operations, in the same order, as
    ``statsmodels.stats.multitest.multipletests(method="holm")`` (the tests check that the
    results are identical), without its full garbage collection on every call; an empty input
    gives an empty list.  ``alpha`` does not change the adjusted values (kept for callers).
    """
    ps = np.asarray([float(p) for p in p_values], dtype=float)
    if not ps.size:
        return []
    order = np.argsort(ps)
    adjusted = np.maximum.accumulate(ps[order] * np.arange(ps.size, 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return [float(x) for x in out]


def modified_z_outliers(values: Sequence[float], threshold: float = MAD_THRESHOLD) -> int:
    """Count outliers by the modified z-score of Iglewicz & Hoaglin (1993).

    ``M_i = 0.6745 · (x_i − median) / MAD`` with ``MAD = median(|x − median|)``; x_i is an
    outlier when ``|M_i| > 3.5``, i.e. ``|x_i − median| > 3.5 · 1.4826 · MAD``.  When MAD = 0
    the scale falls back to ``1.253314 · mean(|x − median|)``; when that is 0 too, all samples
    are equal and there is no outlier.  Returns the count (0 for fewer than 3 values).
    """
    x = np.asarray(values, dtype=float)
    return _outliers(x, float(np.median(x)), threshold) if x.size else 0


def grubbs_outlier(values: Sequence[float], alpha: float) -> bool:
    """Grubbs' two-sided test for one outlier in a normal sample (F. E. Grubbs,
    Technometrics 11 (1969) 1–21; NIST/SEMATECH e-Handbook §1.3.5.17): G = max |xᵢ − x̄| / s
    against ``(n − 1)/√n · √(t² / (n − 2 + t²))``, t the upper α/(2n) quantile of Student's t
    with n − 2 df, so a normal sample of any n is flagged with probability ``alpha``,
    whichever side the extreme value is on.  False for fewer than 3 values or no
    variation."""
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n < 3:
        return False
    sd = float(x.std(ddof=1))
    if sd == 0 or not math.isfinite(sd):
        return False
    g = float(np.max(np.abs(x - x.mean()))) / sd
    t = _t_ppf(1.0 - alpha / (2 * n), n - 2)
    return g > (n - 1) / math.sqrt(n) * math.sqrt(t * t / (n - 2 + t * t))


def _outliers(x: np.ndarray, median: float, threshold: float) -> int:
    """:func:`modified_z_outliers` of ``x`` whose median is known."""
    if x.size < 3:
        return 0
    dev = np.abs(x - median)
    mad = float(np.median(dev))
    scale = MAD_SCALE * mad if mad > 0 else MEANAD_SCALE * float(np.mean(dev))
    if scale == 0:
        return 0
    return int(np.count_nonzero(dev > threshold * scale))
