"""The one model a comparison is decided and shown by (docs/statistics.md): Welch's t on ln
values of two positive samples, the interval of the ratio of their geometric means at the level
Holm gives the comparison's family, and the outcome read off that interval (worse, better,
equivalent within a margin, undecided).

Pure functions on numbers; no I/O, no vhpc types.  The environment's sample is ``x`` and the
baseline's ``y``, as Welch (1947) writes the two samples; ``m`` a family's size, as Holm (1979)
writes it.  Sources: B. L. Welch, Biometrika 34 (1947)
28–35; S. Holm, Scand. J. Statist. 6 (1979) 65–70; D. J. Schuirmann, J. Pharmacokinet.
Biopharm. 15 (1987) 657–680 (TOST); T. Hoefler & R. Belli, "Scientific Benchmarking of Parallel
Computing Systems", SC'15 (run times and rates are multiplicative: compare on the log scale).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from vhpc.core import power, stats

#: outcomes of :func:`decide` (the analysis names them slower/faster by the metric's direction)
WORSE, BETTER, EQUIVALENT, UNDECIDED, NO_DATA = "worse", "better", "equivalent", "undecided", "none"


@dataclass(frozen=True)
class LogWelch:
    """Welch's two-sample t-test on ln values of two positive samples x (environment) and y
    (baseline), and the interval it gives of the ratio of their geometric means.

    ``ratio`` = exp(mean ln x − mean ln y) (dimensionless); ``log_ratio`` its ln; ``se`` =
    √(s_x²/n_x + s_y²/n_y) with s² the ln values' sample variances (ddof 1); ``df`` the
    Welch–Satterthwaite degrees of freedom (None without variation); ``p`` the two-sided
    p-value of t = log_ratio / se (0 or 1 without variation); ``n_x``, ``n_y`` the counts and
    ``sd`` the pooled standard deviation of the ln values √((s_x² + s_y²)/2) (≈ the CV), used
    for the runs needed (:func:`runs_to_decide`)."""

    ratio: float
    log_ratio: float
    se: float
    df: float | None
    p: float
    n_x: int
    n_y: int
    sd: float

    def interval(self, level: float) -> tuple[float | None, float | None]:
        """Two-sided interval of the ratio at ``level`` (e.g. 0.95): exp(log_ratio ±
        t_{(1+level)/2, df} · se); (ratio, ratio) without variation; None bounds beyond the
        float range.  Excludes 1 exactly when p < 1 − level."""
        if self.se == 0 or self.df is None:
            return (self.ratio, self.ratio)
        half = stats.t_quantile(level, self.df) * self.se
        with np.errstate(over="ignore"):
            lo = math.exp(self.log_ratio - half) if self.log_ratio - half < 700 else None
            hi = math.exp(self.log_ratio + half) if self.log_ratio + half < 700 else None
        return (lo, hi)


def log_welch(x: Sequence[float], y: Sequence[float]) -> LogWelch | None:
    """:class:`LogWelch` of samples ``x`` (environment) against ``y`` (baseline); None when a
    side has fewer than 2 values or a value is not a positive finite number (no log scale).
    The p-value is that of ``scipy.stats.ttest_ind(ln x, ln y, equal_var=False)``."""
    return log_contrast((x, y), (1, -1))


@dataclass(frozen=True)
class LogMoments:
    """The ln values of one positive sample, summarised: ``mean`` (mean of ln x), ``var``
    (their sample variance, ddof 1; None when ``n`` < 2) and ``n``.  What a two-sample
    comparison on the log scale needs of each side, so a summary that keeps these three
    numbers can be compared again without its values (:mod:`vhpc.analysis.versus`)."""

    mean: float
    var: float | None
    n: int

    @property
    def gmean(self) -> float | None:
        """The geometric mean exp(mean ln x) (the sample's unit); None beyond the float
        range.  The ratio of two samples' geometric means is :attr:`LogWelch.ratio`."""
        return math.exp(self.mean) if self.mean < 700 else None

    def interval(self, level: float) -> tuple[float | None, float | None]:
        """Student-t interval of the geometric mean at ``level``: exp(mean ± t_{(1+level)/2,
        n−1} · s/√n) of the ln values (asymmetric around :attr:`gmean`); (None, None) when n < 2;
        (gmean, gmean) without variation."""
        if self.var is None:
            return (None, None)
        half = stats.t_quantile(level, self.n - 1) * math.sqrt(self.var / self.n) if self.var > 0 else 0.0
        return tuple(math.exp(v) if v < 700 else None  # type: ignore[return-value]
                     for v in (self.mean - half, self.mean + half))


def log_moments(values: Sequence[float]) -> LogMoments | None:
    """:class:`LogMoments` of ``values``; None when there is none or a value is not a positive
    finite number (no log scale)."""
    a = np.asarray(values, dtype=float)
    if a.size == 0 or not (np.all(a > 0) and np.all(np.isfinite(a))):
        return None
    la = np.log(a)
    return LogMoments(float(la.mean()), float(la.var(ddof=1)) if a.size > 1 else None,
                      int(a.size))


def log_contrast(samples: Sequence[Sequence[float]], signs: Sequence[int]) -> LogWelch | None:
    """Welch's t of a contrast of independent samples on the log scale: ``Δ = Σ signᵢ ·
    mean(ln sampleᵢ)`` (signs ±1), ``se² = Σ s²ᵢ/nᵢ`` of the ln values, Welch–Satterthwaite
    df ``(Σ uᵢ)² / Σ uᵢ²/(nᵢ − 1)`` (Satterthwaite 1946).  Two samples (+1, −1):
    :func:`log_welch`; four (+1, −1, −1, +1): the change of a ratio between two campaigns,
    (ā_new/b̄_new)/(ā_old/b̄_old) of geometric means (``vhpc diff``).  Returns a
    :class:`LogWelch` (``n_x``/``n_y``: the smallest counts of the + and − samples, ``sd``
    the root mean square of the ln SDs); None when a sample has fewer than 2 values or a
    value that is not positive and finite.  The same numbers as :func:`contrast_of` on each
    sample's :func:`log_moments`."""
    return contrast_of([log_moments(v) for v in samples], signs)


def contrast_of(moments: Sequence[LogMoments | None], signs: Sequence[int]) -> LogWelch | None:
    """:func:`log_contrast` from each sample's :class:`LogMoments` (None or n < 2: None)."""
    if any(m is None or m.var is None for m in moments):
        return None
    c = stats.welch_contrast([m.mean for m in moments], [m.var for m in moments],
                             [m.n for m in moments], signs)
    with np.errstate(over="ignore"):
        r = math.exp(c.estimate) if c.estimate < 700 else math.inf
    plus = [m.n for m, sg in zip(moments, signs) if sg > 0]
    minus = [m.n for m, sg in zip(moments, signs) if sg < 0]
    vs = [m.var for m in moments]
    return LogWelch(r, c.estimate, c.se, c.df, float(c.p), min(plus), min(minus),
                    math.sqrt(sum(vs) / len(vs)))


#: fewest valid runs a side for the normality and outlier diagnostic of :func:`diagnose`
DIAGNOSE_FROM = 8
#: calibrated Shapiro–Wilk p (:func:`shapiro_calibrated`) below which the standardised ln
#: residuals count as not normal
NORMALITY_P = 0.05
#: null draws a calibration of :func:`shapiro_calibrated` is made of (its 5 % point to ±0.2 %)
CALIBRATION_DRAWS = 10000
#: most pooled residuals calibrated by simulation; beyond, scipy's own p (the two estimated
#: means and SDs no longer move the null distribution)
CALIBRATE_MAX = 1000
#: Grubbs' two-sided level a side (:func:`vhpc.core.stats.grubbs_outlier`): both sides ≤ 0.2 %
OUTLIER_P = 0.001
#: most pooled residuals tested by Shapiro–Wilk (``scipy.stats.shapiro`` warns that its p is
#: not accurate beyond 5000); larger samples take D'Agostino and Pearson's omnibus test
#: (``scipy.stats.normaltest``; R. B. D'Agostino & E. S. Pearson, Biometrika 60 (1973) 613–622)
SHAPIRO_MAX = 5000
#: ratio of the two sides' ln SDs from which ranks are not advised: the Mann–Whitney interval
#: assumes a pure shift and under-covers when the spreads differ (the Behrens–Fisher problem;
#: at 3:1 it covered 0.70–0.90 where Welch covers 0.95; true 3:1 spreads are flagged 77–95 %
#: of the time at 5–20 runs a side, so a rank interval covers or is flagged ≥ 0.94,
#: tests/test_stat_rates.py)
SPREAD_RATIO = 2.0


def _shapiro_coefficients(n: int) -> np.ndarray | None:
    """The Shapiro–Wilk coefficients a₁ … a_{n/2} of ``scipy.stats.shapiro`` for n values
    (Royston's algorithm AS R94, scipy's ``swilk``, which fills them in), so that
    W = (Σ aᵢ (x₍ₙ₊₁₋ᵢ₎ − x₍ᵢ₎))² / Σ (x − x̄)² for many samples at once; None where this scipy
    does not expose the routine, or its W differs from ``scipy.stats.shapiro``'s."""
    try:
        from scipy.stats._morestats import swilk
    except ImportError:  # pragma: no cover - depends on the scipy build
        return None
    x = np.sort(np.random.default_rng(n).standard_normal(n))
    a = np.zeros(n // 2)
    try:
        swilk(x - x[n // 2], a, 0)
    except Exception:  # noqa: BLE001 - a private routine: any change of it means "not here"
        return None
    w = float(((x[::-1][: n // 2] - x[: n // 2]) @ a) ** 2 / float(((x - x.mean()) ** 2).sum()))
    return a if math.isclose(w, float(stats.scipy_stats.shapiro(x).statistic), rel_tol=1e-9) else None


@functools.lru_cache(maxsize=64)
def _shapiro_null(nx: int, ny: int) -> np.ndarray:
    """Sorted Shapiro–Wilk W of :data:`CALIBRATION_DRAWS` pairs of standard normal samples of
    ``nx`` and ``ny`` values, each standardised by its own mean and SD and pooled (seeded:
    the same calibration every run); computed for all draws at once with
    :func:`_shapiro_coefficients` (one ``scipy.stats.shapiro`` call a draw otherwise)."""
    rng = np.random.default_rng(20261207)
    a, b = rng.standard_normal((CALIBRATION_DRAWS, nx)), rng.standard_normal((CALIBRATION_DRAWS, ny))
    res = np.concatenate([(a - a.mean(axis=1, keepdims=True)) / a.std(axis=1, ddof=1, keepdims=True),
                          (b - b.mean(axis=1, keepdims=True)) / b.std(axis=1, ddof=1, keepdims=True)],
                         axis=1)
    n = nx + ny
    coef = _shapiro_coefficients(n)
    if coef is None:
        return np.sort([float(stats.scipy_stats.shapiro(r).statistic) for r in res])
    res.sort(axis=1)
    num = ((res[:, ::-1][:, : n // 2] - res[:, : n // 2]) @ coef) ** 2
    den = ((res - res.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    return np.sort(num / den)


def shapiro_calibrated(lx: np.ndarray, ly: np.ndarray) -> tuple[float, str]:
    """(p, test) of normality of two samples' residuals, each side standardised by its own mean
    and SD and pooled: the Shapiro–Wilk W (``scipy.stats.shapiro``; S. S. Shapiro & M. B.
    Wilk, Biometrika 52 (1965) 591–611) against its null distribution for these sample sizes,
    simulated (:func:`_shapiro_null`; Monte Carlo p (k + 1)/(N + 1), A. C. Davison & D. V.
    Hinkley, *Bootstrap Methods*, 1997, §4.2).  Standardised residuals are lighter-tailed
    than a normal sample (each side's mean and SD are fitted), so scipy's p fired 4.1–4.5 %
    on normal data where 5 % was meant, costing power.  The null distribution does not depend
    on the sides' means or SDs, only on their sizes.  Beyond :data:`CALIBRATE_MAX` values
    scipy's p; beyond :data:`SHAPIRO_MAX` D'Agostino and Pearson's test."""
    res = np.concatenate([(lx - lx.mean()) / lx.std(ddof=1), (ly - ly.mean()) / ly.std(ddof=1)])
    if res.size > SHAPIRO_MAX:  # Shapiro–Wilk's p is not accurate beyond 5000 values
        return float(stats.scipy_stats.normaltest(res).pvalue), "D'Agostino–Pearson"
    w = stats.scipy_stats.shapiro(res)
    if res.size > CALIBRATE_MAX:
        return float(w.pvalue), "Shapiro–Wilk"
    null = _shapiro_null(int(lx.size), int(ly.size))
    k = int(np.searchsorted(null, float(w.statistic), side="right"))
    return (k + 1) / (null.size + 1), "Shapiro–Wilk"


def spreads_differ(x: Sequence[float], y: Sequence[float]) -> tuple[float, float] | None:
    """(ln SD of x, ln SD of y) when one is at least :data:`SPREAD_RATIO` times the other
    (ranks would under-cover: use Welch's interval, the default); None otherwise or with
    fewer than 3 positive values a side.  A value Grubbs' test flags as an outlier
    (:data:`OUTLIER_P`) is left out of its side's SD first: an outlier is what ranks are for,
    not a difference of spreads."""
    if min(len(x), len(y)) < 3 or log_moments(x) is None or log_moments(y) is None:
        return None

    def sd(values: Sequence[float]) -> float:
        v = np.log(np.asarray(values, dtype=float))
        if stats.grubbs_outlier(v, OUTLIER_P):
            v = np.delete(v, int(np.argmax(np.abs(v - v.mean()))))
        return float(v.std(ddof=1))
    sx, sy = sd(x), sd(y)
    if min(sx, sy) == 0:
        return (sx, sy) if max(sx, sy) > 0 else None
    return (sx, sy) if max(sx / sy, sy / sx) >= SPREAD_RATIO else None


def spread_note(x: Sequence[float], y: Sequence[float]) -> str:
    """The note of ``--method rank`` where :func:`spreads_differ`: ranks under-cover there;
    "" otherwise."""
    sd = spreads_differ(x, y)
    if sd is None:
        return ""
    return (f"spreads differ (ln SD {sd[0] * 100:.3g} % vs {sd[1] * 100:.3g} %): the rank "
            "interval may under-cover; Welch's (without --method rank) does not")


def diagnose(x: Sequence[float], y: Sequence[float], rank: bool = False) -> str:
    """A trust note on the log-normal model of a comparison of positive samples ``x`` and
    ``y``, from :data:`DIAGNOSE_FROM` valid runs a side ("" when it holds, or with fewer):
    the ln residuals, each side standardised by its own mean and SD (so sides of different
    spreads are not mistaken for a heavy tail), pooled, fail the Shapiro–Wilk test of
    normality calibrated for the sizes (:func:`shapiro_calibrated`, p < :data:`NORMALITY_P`),
    or a side holds an outlier on the log scale by Grubbs' two-sided test at
    :data:`OUTLIER_P` (:func:`vhpc.core.stats.grubbs_outlier`, calibrated for n).  On
    log-normal data it fires ≤ 6 % of the time at n = 8–50 (docs/statistics.md).  The note
    names the remedy: ``--method rank`` (Hoefler & Belli, SC'15: check normality, else use a
    nonparametric interval) where the spreads are alike; where they differ
    (:func:`spreads_differ`) ranks would under-cover, so it says so; under ``--method rank``
    that the ranks were used."""
    if min(len(x), len(y)) < DIAGNOSE_FROM:
        return ""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    sx, sy = float(lx.std(ddof=1)), float(ly.std(ddof=1))
    out = []
    if sx > 0 and sy > 0:
        p, test = shapiro_calibrated(lx, ly)
        if p < NORMALITY_P:
            out.append(f"ln residuals not normal ({test} p = {p:.2g})")
    k = sum(stats.grubbs_outlier(v, OUTLIER_P) for v in (lx, ly))
    if k:
        out.append(f"an outlier on the log scale ({k} side{'s' if k > 1 else ''}, Grubbs)")
    if not out:
        return ""
    if rank:
        remedy = "ranks used (--method rank)"
    elif spreads_differ(x, y):
        remedy = "spreads differ, where ranks under-cover too: more runs, or check the outliers"
    else:
        remedy = "compare by ranks: --method rank"
    return "; ".join(out) + f": {remedy}"


def rank_test(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Two-sided p of the Mann–Whitney test of ln x against ln y from the one distribution
    :func:`rank_ratio`'s interval inverts (:func:`vhpc.core.stats.shift_test`: exact up to
    2,500 pairs, ties counted conservatively), so ``--method rank``'s verdict never disagrees
    with its p; None with fewer than 2 values a side."""
    if min(len(x), len(y)) < 2:
        return None
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    return stats.shift_test(lx, ly)


def rank_ratio(x: Sequence[float], y: Sequence[float], level: float
               ) -> tuple[float | None, float | None, float | None]:
    """(ratio, low, high) by ranks on ln values (``--method rank``): exp of the
    Hodges–Lehmann shift of ln x − ln y and of its Mann–Whitney (Moses) interval at ``level``
    (:func:`vhpc.core.stats.hodges_lehmann`): a ratio of "typical" values whose interval needs
    no normality and shrugs off outliers; bounds None when the samples are too small for an
    interval at ``level``."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    shift, lo, hi = stats.hodges_lehmann(lx, ly, level)
    def exp(v: float | None) -> float | None:
        return math.exp(v) if v is not None and v < 700 else None
    return exp(shift), exp(lo), exp(hi)


def holm_level(p_values: Iterable[float | None], alpha: float) -> float:
    """The confidence level at which the intervals of a family agree with Holm's decisions
    (Holm 1979) at family-wise level ``alpha``: with m p-values of which Holm rejects r, the
    level is 1 − α/(m − r) (1 − α when all are rejected or m ≤ 1).  Every rejected hypothesis
    has p < α/(m − r) and every other one p ≥ α/(m − r), so an interval at this level excludes
    the null exactly when Holm rejects.  None entries are ignored."""
    ps = sorted(p for p in p_values if p is not None)
    m = len(ps)
    r = 0
    for j, p in enumerate(ps):  # step down: the j-th smallest (0-based) against α/(m − j)
        if p < alpha / (m - j):
            r += 1
        else:
            break
    return 1.0 - alpha / max(1, m - r)


def bonferroni_level(m: int, alpha: float) -> float:
    """Bonferroni's level 1 − α/m for a family of ``m`` comparisons (1 − α for m ≤ 1): the
    level that does not depend on any comparison's outcome.  Intervals at it are simultaneous
    (family-wise coverage ≥ 1 − α), and read for equivalence it is the TOST of each metric at
    α/(2m) a side, so a false ``equivalent`` anywhere in the family has probability ≤ α/2."""
    return 1.0 - alpha / max(1, m)


def decide_difference(low: float | None, high: float | None, margin: float | None) -> str:
    """:func:`decide` for the interval of a worse-positive difference (a signed metric's
    difference of means, relative to the baseline's |mean|): :data:`WORSE` above 0,
    :data:`BETTER` below 0, :data:`EQUIVALENT` inside [−margin, margin] (TOST), else
    :data:`UNDECIDED`; margin None: no scale, never equivalent."""
    if low is None or high is None:
        return NO_DATA
    if low > 0.0:
        return WORSE
    if high < 0.0:
        return BETTER
    if margin is not None and -margin <= low and high <= margin:
        return EQUIVALENT
    return UNDECIDED


def decide(low: float | None, high: float | None, margin: float) -> str:
    """The outcome read off an interval of a ratio (environment / baseline) of a quantity
    where above 1 is worse (a time): :data:`WORSE` when the interval lies above 1,
    :data:`BETTER` below 1, :data:`EQUIVALENT` when it lies inside the margin band
    [1/(1 + margin), 1 + margin] (TOST, Schuirmann 1987: the interval at level 1 − α inside
    the band is a TOST at level α/2 or stricter), :data:`UNDECIDED` otherwise, :data:`NO_DATA`
    without bounds.  For a rate pass the reciprocal interval.  ``margin`` ≥ 0 (0.05 = 5 %)."""
    if low is None or high is None:
        return NO_DATA
    if low > 1.0:
        return WORSE
    if high < 1.0:
        return BETTER
    if within_margin(low, high, margin):
        return EQUIVALENT
    return UNDECIDED


def within_margin(low: float, high: float, margin: float) -> bool:
    """True when the interval [low, high] of a ratio lies inside the margin band
    [1/(1 + margin), 1 + margin] (symmetric on the log scale): equivalence by TOST
    (Schuirmann 1987), whether or not the interval also excludes 1 (:func:`decide` then says
    worse or better, the stronger statement)."""
    return low >= 1.0 / (1.0 + margin) and high <= 1.0 + margin


def runs_to_decide(lw: LogWelch, level: float, margin: float) -> int | None:
    """Runs per side after which an undecided comparison shown at ``level`` decides (worse,
    better or equivalent within ``margin``) with probability ≥ 80 % whatever the true ratio,
    if the spread is within its upper bound (:data:`vhpc.core.power.PLAN_PROMISE`): planned
    on the pilot's uncertainty, not its point estimates (the plug-in plan decided 21–55 % of
    the time at CV 40 %, issue 59).  The spread is the pilot's pooled ln SD at its
    :data:`vhpc.core.power.PLAN_SD_CONFIDENCE` upper confidence bound (df n_x + n_y − 2;
    Browne 1995), and the ratio the hardest one for the verdict, which an undecided pilot
    never excludes (:func:`plan_runs`); at least one more than the smaller side has.

    None when a side has fewer than :data:`vhpc.core.power.MIN_PILOT` runs (a plan from so
    few is noise: :data:`vhpc.core.power.PILOT_ADVICE`) or when more than
    :data:`vhpc.core.power.MAX_RUNS` would be needed (:data:`vhpc.core.power.NO_PLAN`).
    docs/statistics.md gives the measured rates."""
    if min(lw.n_x, lw.n_y) < power.MIN_PILOT:
        return None
    sd = power.sd_upper_bound(lw.sd, lw.n_x + lw.n_y - 2)
    return plan_runs(sd, level, margin, at_least=min(lw.n_x, lw.n_y) + 1)


def plan_runs(sd: float, level: float, margin: float, log_scale: bool = True,
              at_least: int = 2) -> int | None:
    """Runs per side (≥ ``at_least``) that decide a comparison shown at ``level`` with 80 %
    probability at any true ratio when each side's ln SD is ``sd``
    (:func:`vhpc.core.power.runs_to_decide_any`: the two-sided difference at 1 − level or
    the TOST at (1 − level)/2 a side within ±ln(1 + margin)); None when more than
    :data:`vhpc.core.power.MAX_RUNS` would be needed.  ``log_scale`` False: a signed metric's
    SD relative to the baseline's |mean|, band ±margin."""
    bound = math.log1p(margin) if log_scale else margin
    return power.runs_to_decide_any(float(sd), 1.0 - level, float(bound), power.POWER,
                                    int(at_least))
