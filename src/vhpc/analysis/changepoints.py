"""Change points in a series of overheads, at a stated false-alarm rate, and the CI gate's
judgement of a new campaign against the model of the earlier ones (``vhpc history``,
docs/history.md).

Pure functions on numbers (ln of overhead ratios, one value per campaign, oldest first); no
I/O, no vhpc types.

**Change points** (:func:`detect`): binary segmentation with a permutation test at each step,
the scheme of E-Divisive means (D. S. Matteson & N. A. James, "A nonparametric approach for
multiple change point analysis of multivariate data", JASA 109 (2014) 334–345), which
performance-testing tools use on noisy benchmark series (D. Daly et al., "Change Point Detection
in Software Performance Testing", ICPE 2020; MongoDB's signal-processing-algorithms and the
Hunter tool, M. Fleming et al., ICPE 2023).  The statistic of each step is the standardized
CUSUM of the mean, the likelihood-ratio statistic of one shift in the mean of a series
(D. V. Hinkley, Biometrika 57 (1970) 1–17; M. Csörgő & L. Horváth, *Limit Theorems in
Change-Point Analysis*, Wiley 1997, §1.4):

    T = max over m ≤ τ ≤ n − m of  √(τ (n − τ) / n) · |mean(x[:τ]) − mean(x[τ:])|

and its p-value is the share of permutations of the segment whose T is at least the observed
one (J. Antoch & M. Hušková, "Permutation tests in change point analysis", Stat. Probab. Lett.
53 (2001) 37–46): exact (every permutation) up to :data:`EXACT_UP_TO` points, else Monte Carlo
with ``permutations`` seeded shuffles, p = (1 + #{T* ≥ T}) / (1 + R), which is itself a valid
test (Phipson & Smyth, Stat. Appl. Genet. Mol. Biol. 9 (2010) art. 39).  The CUSUM replaces
E-Divisive's energy distance because a shift in the mean overhead is the change asked about
and it costs O(n) per permutation (1,000 campaigns × 50 metrics in well under 2 s,
bench/bench_history.py) where the energy distance costs O(n²).

False-alarm rate: under no change the points of a series are exchangeable, so the first test
rejects with probability ≤ α, and binary segmentation reports a change only after the first
test rejects: a series without change shows one or more change points with probability ≤ α
(tests/test_history.py simulates A/A series of 5, 20 and 100 points).  A permutation p-value
cannot be below 2 / C(n, ⌊n/2⌋) (the permutations that keep the best split's two sets, and its
mirror), so a series shorter than :func:`campaigns_needed` (8 at α = 0.05) can show no change
at all: it is reported as too short, with the campaigns needed.

**The gate** (:func:`gate`): the latest campaign's ln ratio y against the k earlier ones of the
current regime (since their last change point), modelled as independent draws N(μ, σ²): the
one-sided test of "worse by more than the margin", t = (w − ln(1 + margin)) / (s √(1 + 1/k))
with w = ±(y − ȳ) in the metric's worse direction and k − 1 degrees of freedom — the Student-t
prediction interval of one new observation (G. J. Hahn & W. Q. Meeker, *Statistical
Intervals*, Wiley 1991, §4.7).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from vhpc.core import power, stats

#: a segment of at most this many points is tested against every permutation (8! = 40,320)
EXACT_UP_TO = 8
#: Monte Carlo permutations per test above EXACT_UP_TO points (the default R of E-Divisive's
#: reference implementation, ecp::e.divisive, James & Matteson, J. Stat. Softw. 62 (2014))
DEFAULT_PERMUTATIONS = 199
#: shuffles drawn at a time, and the exceedances after which the test stops (Besag & Clifford)
BATCH, STOP_AFTER = 50, 10
#: fewest points on each side of a change point
MIN_SEGMENT = 2
#: fewest earlier campaigns the gate judges against (k − 1 = 2 degrees of freedom)
MIN_EARLIER = 3


@dataclass(frozen=True)
class Split:
    """One change point: ``index`` is the position of the first point after the change (0-based,
    in the whole series), ``p`` the permutation p-value of the test that found it, ``start`` /
    ``end`` the segment that test looked at (half-open)."""

    index: int
    p: float
    start: int
    end: int


def scan(x: np.ndarray, min_size: int = MIN_SEGMENT) -> tuple[np.ndarray, np.ndarray]:
    """The standardized CUSUM statistic of each row of ``x`` (shape (R, n) or (n,)): the
    maximum over τ in [min_size, n − min_size] of |n·S_τ − τ·S_n| / √(τ (n − τ) n), which is
    √(τ(n−τ)/n)·|mean left − mean right| (S the cumulative sums), and the τ attaining it.
    Returns (stat, tau) arrays of shape (R,) (or 0-d).  Raises ValueError when n < 2·min_size."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    if n < 2 * min_size:
        raise ValueError(f"a scan needs at least {2 * min_size} points, got {n}")
    stat = _centred_scan(x - x.mean(axis=-1, keepdims=True), min_size)
    best = np.argmax(stat, axis=-1)
    return np.take_along_axis(stat, best[..., None], axis=-1)[..., 0], best + min_size


def _centred_scan(x: np.ndarray, min_size: int) -> np.ndarray:
    """The statistic at every τ of rows that sum to 0 (S_n = 0): |S_τ|·√(n / (τ(n − τ)))."""
    n = x.shape[-1]
    tau = np.arange(min_size, n - min_size + 1)
    stat = np.cumsum(x, axis=-1)[..., min_size - 1:n - min_size]
    np.abs(stat, out=stat)
    stat *= np.sqrt(n / (tau * (n - tau)))
    return stat


def _max_scan(x: np.ndarray, min_size: int) -> np.ndarray:
    """:func:`scan`'s statistic (not τ) of each row of ``x`` whose rows sum to 0."""
    return _centred_scan(x, min_size).max(axis=-1)


@lru_cache(maxsize=EXACT_UP_TO + 1)
def _all_permutations(n: int) -> np.ndarray:
    """Every order of n points up to reversal (those whose first index is below their last):
    a reversed order has the same statistic (S_τ of the reverse is −S_{n−τ} of a centred
    series, and √(n/(τ(n−τ))) is symmetric), so the share of orders at or above T is the same
    over half of them.  Shape (n!/2, n)."""
    return np.array([p for p in itertools.permutations(range(n)) if p[0] < p[-1]],
                    dtype=np.intp)


def permutation_test(x: Sequence[float], permutations: int = DEFAULT_PERMUTATIONS,
                     rng: np.random.Generator | None = None,
                     min_size: int = MIN_SEGMENT) -> tuple[float, int]:
    """(p-value, τ) of one change in the mean of ``x`` (see the module docstring): exact over
    all n! orders for n ≤ :data:`EXACT_UP_TO`, else up to ``permutations`` shuffles drawn from
    ``rng`` (default: seeded 0, so a report is reproducible) in batches, stopping once
    :data:`STOP_AFTER` of them reach the observed statistic: p = h / l after l shuffles with
    h = STOP_AFTER exceedances, else (1 + count) / (1 + permutations) — Besag & Clifford,
    "Sequential Monte Carlo p-values", Biometrika 78 (1991) 301–304, a valid p-value that spends
    few shuffles where there is no change.  Raises ValueError when len(x) < 2·min_size."""
    a = np.asarray(x, dtype=float)
    n = a.size
    obs, tau = scan(a, min_size)
    a = a - a.mean()  # a permutation keeps the sum: every shuffle sums to 0 too
    tol = 1e-9 * max(float(obs), 1e-300)  # ties within rounding count as ≥ (conservative)
    if n <= EXACT_UP_TO:
        perm_stats = _max_scan(a[_all_permutations(n)], min_size)
        return float(np.count_nonzero(perm_stats >= obs - tol)) / perm_stats.size, int(tau)
    rng = rng if rng is not None else np.random.default_rng(0)
    done = count = 0
    while done < permutations:
        batch = min(BATCH, permutations - done)
        perm_stats = _max_scan(rng.permuted(np.broadcast_to(a, (batch, n)), axis=1), min_size)
        hits = np.cumsum(perm_stats >= obs - tol)
        if count + hits[-1] >= STOP_AFTER:  # the h-th exceedance at shuffle l: p = h / l
            l_h = done + 1 + int(np.searchsorted(hits, STOP_AFTER - count))
            return STOP_AFTER / l_h, int(tau)
        count += int(hits[-1])
        done += batch
    return (1.0 + count) / (1.0 + permutations), int(tau)


def detect(x: Sequence[float], alpha: float = 0.05, permutations: int = DEFAULT_PERMUTATIONS,
           seed: int = 0, min_size: int = MIN_SEGMENT) -> list[Split]:
    """Change points of ``x`` by binary segmentation (Vostrikova 1981; Matteson & James 2014):
    test the whole series (:func:`permutation_test`); where p ≤ ``alpha``, split at τ and test
    both halves alike, until no segment of at least 2·min_size points rejects.  Returns the
    :class:`Split` list sorted by index ([] for no change).  A series without change yields
    [] with probability ≥ 1 − alpha (module docstring).  NaN values are not allowed (the
    caller leaves out campaigns without a ratio).  ``min_size`` is the fewest points a segment
    keeps (a count of campaigns).  Raises ValueError for alpha outside (0, 1)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    a = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    out: list[Split] = []
    todo = [(0, a.size)]
    while todo:
        start, end = todo.pop()
        if end - start < 2 * min_size or np.ptp(a[start:end]) == 0:
            continue
        p, tau = permutation_test(a[start:end], permutations, rng, min_size)
        if p <= alpha:
            out.append(Split(start + tau, p, start, end))
            todo += [(start, start + tau), (start + tau, end)]
    return sorted(out, key=lambda s: s.index)


def smallest_p(n: int) -> float:
    """The smallest p-value a permutation test of ``n`` points can give: 2 / C(n, ⌊n/2⌋) (the
    orders that keep the best split's two sets, and its mirror image); 1.0 below
    2·:data:`MIN_SEGMENT` points."""
    if n < 2 * MIN_SEGMENT:
        return 1.0
    return min(1.0, 2.0 / math.comb(n, n // 2))


def campaigns_needed(alpha: float, sd: float | None = None, margin: float | None = None) -> int:
    """Fewest campaigns in a series for :func:`detect` to be able to report a change at
    ``alpha``: the smallest n with :func:`smallest_p` (n) ≤ alpha (8 at α = 0.05, 10 at 0.01).
    With ``sd`` (the series' standard deviation of ln ratios about its segment means) and
    ``margin`` (0.05 = 5 %), at least twice the campaigns per side that a two-sample t-test at
    a known split needs to detect a step of ln(1 + margin) with 80 % power
    (:func:`vhpc.core.power.runs_needed`): the scan, which must also find the split, needs
    no fewer.  Raises ValueError for alpha outside (0, 1)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = 2 * MIN_SEGMENT
    while smallest_p(n) > alpha:
        n += 1
    if sd is not None and margin and sd > 0:
        per_side = power.runs_needed(math.log1p(margin), sd, alpha)
        n = max(n, 2 * per_side) if per_side is not None else max(n, 2 * power.MAX_RUNS)
    return n


def residual_sd(x: Sequence[float], splits: Sequence[Split]) -> float | None:
    """Standard deviation of ``x`` about the means of the segments ``splits`` cut it into
    (degrees of freedom n − number of segments); None with fewer than one degree of freedom."""
    a = np.asarray(x, dtype=float)
    bounds = [0, *(s.index for s in splits), a.size]
    resid = np.concatenate([a[i:j] - a[i:j].mean() for i, j in zip(bounds, bounds[1:]) if j > i])
    dof = a.size - (len(bounds) - 1)
    return float(math.sqrt(np.sum(resid ** 2) / dof)) if dof >= 1 else None


@dataclass(frozen=True)
class GateTest:
    """The latest campaign against the k earlier ones (module docstring): ``change`` = exp(y −
    ȳ), the latest ratio over the model's geometric mean (dimensionless); ``worse`` its ln in the
    metric's worse direction; ``se`` = s·√(1 + 1/k) (ln units), ``df`` = k − 1; ``p`` the
    one-sided p-value of "worse by more than ln(1 + margin)"."""

    change: float
    worse: float
    se: float
    df: int
    p: float
    k: int

    def bound(self, level: float) -> float:
        """One-sided lower bound of the worse change at ``level``, as a fraction (0.05 = 5 %
        worse): exp(worse − t_{level, df}·se) − 1; it exceeds the margin exactly when p < 1 −
        level."""
        t = stats.t_quantile(2 * level - 1, self.df)  # two-sided c ↔ one-sided (1 + c)/2
        return math.expm1(self.worse - t * self.se)


def gate(earlier: Sequence[float], latest: float, higher_is_better: bool,
         margin: float) -> GateTest | None:
    """:class:`GateTest` of ``latest`` (ln ratio) against ``earlier`` (ln ratios of the current
    regime, oldest first); None with fewer than :data:`MIN_EARLIER` earlier values.  A model
    without variation (s = 0) gives p 0 or 1."""
    a = np.asarray(earlier, dtype=float)
    k = a.size
    if k < MIN_EARLIER:
        return None
    d = float(latest - a.mean())
    worse = -d if higher_is_better else d
    s = float(a.std(ddof=1))
    se = s * math.sqrt(1.0 + 1.0 / k)
    excess = worse - math.log1p(margin)
    p = (0.0 if excess > 0 else 1.0) if se == 0 else stats.t_sf(excess / se, k - 1)
    return GateTest(math.exp(d), worse, se, k - 1, p, k)
