"""Analysis room: statistics on stored observations, comparisons against a baseline environment.

Pure computation: imports only :mod:`vhpc.model` and numerical libraries, performs no I/O.

Entry point: :func:`analyse` turns observations (one metric value of one trial each) into an
:class:`Analysis` holding

* :class:`Summary` per (benchmark, params, metric, environment, group) — mean, median, standard
  deviation, Student-t confidence interval of the mean, coefficient of variation, outlier count;
* :class:`Comparison` per (benchmark, params, metric, environment ≠ baseline) — ratio of means
  with a Fieller confidence interval, overhead in percent, Welch's t-test p-value, Holm-adjusted
  p-value and a verdict;
* :class:`Finding` — diagnostics the reader must see (noise, too few samples, outliers, TCG
  emulation, invalid samples, missing baseline).

Rules applied everywhere:

* warm-up observations are ignored entirely (neither analysed nor counted);
* invalid observations (``valid=False``: the benchmark's own verification failed) and
  non-finite values (NaN, ±inf) are excluded from statistics and counted in ``n_invalid``;
* values keep the metric's own unit; ratios and percentages are dimensionless.

Sources of the formulas:

* Student-t CI of a mean: any statistics textbook, e.g. Montgomery & Runger, *Applied Statistics
  and Probability for Engineers*, §8.2.
* Welch's unequal-variance t-test and the Welch–Satterthwaite degrees of freedom: B. L. Welch,
  "The generalization of 'Student's' problem when several different population variances are
  involved", Biometrika 34 (1947) 28–35; F. E. Satterthwaite, Biometrics Bulletin 2 (1946) 110–114.
* Ratio of two means: E. C. Fieller, "Some problems in interval estimation", J. Roy. Stat. Soc. B
  16 (1954) 175–185.
* Multiple comparisons: S. Holm, "A simple sequentially rejective multiple test procedure",
  Scand. J. Statist. 6 (1979) 65–70.
* Outliers: B. Iglewicz & D. C. Hoaglin, *How to Detect and Handle Outliers*, ASQC Basic
  References in Quality Control vol. 16 (1993): modified z-score.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

from vhpc.model import EnvInfo, Observation

__all__ = [
    "Analysis",
    "Comparison",
    "Finding",
    "Summary",
    "analyse",
    "modified_z_outliers",
    "student_t_ci",
    "welch_test",
    "fieller_interval",
    "overhead_pct",
    "holm_adjust",
    "GROUP_ALL",
    "GROUP_COLD",
    "GROUP_WARM",
    "VERDICTS",
    "CV_THRESHOLD",
    "MIN_SAMPLES",
]

GROUP_ALL = "all"
GROUP_COLD = "cold"
GROUP_WARM = "warm"

SLOWER = "slower"
FASTER = "faster"
NO_DIFFERENCE = "no significant difference"
INSUFFICIENT = "insufficient data"
VERDICTS = (SLOWER, FASTER, NO_DIFFERENCE, INSUFFICIENT)

#: coefficient of variation above which a group is reported as noisy (5 %)
CV_THRESHOLD = 0.05
#: fewer valid samples than this in a group triggers a finding
MIN_SAMPLES = 3
#: modified z-score threshold (Iglewicz & Hoaglin 1993)
MAD_THRESHOLD = 3.5
#: 1 / Φ⁻¹(3/4): makes the MAD a consistent estimator of σ for normal data
MAD_SCALE = 1.4826
#: sqrt(π/2): makes the mean absolute deviation consistent for σ (fallback when MAD = 0)
MEANAD_SCALE = 1.253314

Key = tuple[str, str, str]  # (benchmark, params, metric)


# --------------------------------------------------------------------------------------------
# data types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one group of valid samples.

    Identity: (benchmark, params, metric, environment, group) where ``group`` is ``"all"`` (every
    non-warm-up trial), ``"cold"`` (``session_index == 0``: first trial after a VM boot) or
    ``"warm"`` (``session_index > 0``).  Cold/warm groups exist only for environments whose
    observations carry a ``session_index``.

    Units: ``mean``, ``median``, ``stdev``, ``ci_low``, ``ci_high`` are in ``unit``; ``cv`` is a
    dimensionless fraction (0.05 = 5 %); ``n``, ``n_invalid`` and ``outliers`` are counts.

    * ``n``: valid, finite samples used in the statistics; ``n_invalid``: samples excluded
      because the benchmark's verification failed or the value was not finite.
    * ``mean``/``median``: None when n = 0.
    * ``stdev``: sample standard deviation (ddof = 1); None when n < 2.
    * ``ci_low``/``ci_high``: Student-t confidence interval of the mean at the analysis'
      confidence level, ``mean ± t_{(1+c)/2, n-1} · stdev/√n``; None when n < 2.
    * ``cv``: stdev / |mean|; None when n < 2 or mean = 0.
    * ``outliers``: count of samples with modified z-score above 3.5 (see
      :func:`modified_z_outliers`, Iglewicz & Hoaglin 1993).
    """

    benchmark: str
    params: str
    metric: str
    unit: str
    higher_is_better: bool
    environment: str
    n: int
    n_invalid: int
    mean: float | None
    median: float | None
    stdev: float | None
    ci_low: float | None
    ci_high: float | None
    cv: float | None
    outliers: int
    group: str = GROUP_ALL

    @property
    def key(self) -> Key:
        """(benchmark, params, metric)."""
        return (self.benchmark, self.params, self.metric)

    @property
    def ci_halfwidth(self) -> float | None:
        """Half-width of the confidence interval of the mean (unit of the metric), or None."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2.0


@dataclass(frozen=True)
class Comparison:
    """One environment against the baseline for one (benchmark, params, metric).

    * ``ratio`` = mean_env / mean_baseline (dimensionless); None when either mean is missing or
      the baseline mean is 0.
    * ``ratio_ci``: (low, high) confidence interval of the ratio by Fieller's theorem
      (Fieller 1954) for two independent means with Welch–Satterthwaite degrees of freedom
      ``df`` (see :func:`fieller_interval`).  Both bounds are None when the denominator's
      confidence interval contains 0 (the interval is then unbounded or the complement of an
      interval) or when n < 2 on either side.
    * ``overhead_pct``: cost of the environment in the metric's own direction, positive = the
      environment is worse for the user.  Lower-is-better (time, latency):
      ``(ratio − 1)·100`` — "takes 12 % longer".  Higher-is-better (bandwidth, Gflop/s):
      ``(1/ratio − 1)·100`` — the extra time needed to move the same data or do the same work at
      the lower rate, so that 12 % means the same thing for time and for rate metrics.
      ``overhead_ci`` is ``ratio_ci`` mapped through the same monotone function.
    * ``p_value``: two-sided Welch t-test of equal means (Welch 1947).  Degenerate cases: zero
      variance on both sides gives p = 0 when the means differ and p = 1 when they are equal;
      n < 2 on either side gives None.
    * ``p_adjusted``: Holm–Bonferroni adjustment over ALL comparisons of the analysis that have
      a p-value (Holm 1979); None when ``p_value`` is None.
    * ``verdict``: ``"slower"`` (environment significantly worse in the metric's direction:
      longer time, higher latency, lower bandwidth), ``"faster"`` (significantly better),
      ``"no significant difference"`` (p_adjusted ≥ alpha) or ``"insufficient data"``.
    * ``n``/``n_baseline``, ``mean``/``mean_baseline``: valid sample counts and means (unit).
    """

    benchmark: str
    params: str
    metric: str
    unit: str
    higher_is_better: bool
    environment: str
    baseline: str
    ratio: float | None
    ratio_ci: tuple[float | None, float | None]
    overhead_pct: float | None
    p_value: float | None
    p_adjusted: float | None
    verdict: str
    n: int = 0
    n_baseline: int = 0
    mean: float | None = None
    mean_baseline: float | None = None
    df: float | None = None
    overhead_ci: tuple[float | None, float | None] = (None, None)

    @property
    def key(self) -> Key:
        """(benchmark, params, metric)."""
        return (self.benchmark, self.params, self.metric)


@dataclass(frozen=True)
class Finding:
    """A diagnostic for the reader (named ``Finding`` so as not to shadow ``Warning``).

    level: ``"info"`` or ``"warn"``; kind: machine-readable category (``high-variation``,
    ``few-samples``, ``outliers``, ``tcg``, ``invalid``, ``baseline-missing``,
    ``unknown-environment``); scope: what it is about — ``"campaign"``, an environment name, or
    ``"<environment> / <benchmark>[<params>]"`` (metrics are named in the message);
    message: what was observed; advice: what to do about it.
    """

    level: str
    scope: str
    message: str
    advice: str
    kind: str = ""


@dataclass
class Analysis:
    """Everything :func:`analyse` derived from one campaign's observations.

    summaries: one :class:`Summary` per (benchmark, params, metric, environment, group), ordered
    by (benchmark, params, metric), then environment (baseline first, then the order of the
    ``environments`` mapping), then group (all, cold, warm).
    comparisons: one :class:`Comparison` per (benchmark, params, metric, non-baseline
    environment) for which the baseline has observations, same order.
    findings: list of :class:`Finding`, warnings first.
    baseline: name of the baseline environment; environments: name → :class:`EnvInfo` for every
    environment that appears (unknown names get ``EnvInfo(name, kind="unknown")``);
    alpha: significance level of the verdicts; confidence: level of all intervals.
    """

    summaries: list[Summary]
    comparisons: list[Comparison]
    findings: list[Finding]
    baseline: str
    environments: dict[str, EnvInfo]
    alpha: float = 0.05
    confidence: float = 0.95
    _summary_index: dict = field(default_factory=dict, repr=False, compare=False)
    _comparison_index: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._summary_index = {
            (s.benchmark, s.params, s.metric, s.environment, s.group): s for s in self.summaries
        }
        self._comparison_index = {
            (c.benchmark, c.params, c.metric, c.environment): c for c in self.comparisons
        }

    # -- lookups ------------------------------------------------------------------------------

    def keys(self) -> list[Key]:
        """Distinct (benchmark, params, metric) in report order."""
        seen: dict[Key, None] = {}
        for s in self.summaries:
            seen.setdefault(s.key, None)
        return list(seen)

    def environment_order(self) -> list[str]:
        """Environment names in report order: baseline first (if present), then the others."""
        names = list(self.environments)
        if self.baseline in names:
            names.remove(self.baseline)
            names.insert(0, self.baseline)
        return names

    def others(self) -> list[str]:
        """Non-baseline environment names in report order."""
        return [e for e in self.environment_order() if e != self.baseline]

    def emulated(self) -> list[str]:
        """Names of environments whose results come from TCG emulation."""
        return [e for e in self.environment_order() if self.environments[e].emulated]

    def summary(
        self, benchmark: str, params: str, metric: str, environment: str, group: str = GROUP_ALL
    ) -> Summary | None:
        """The :class:`Summary` for this identity, or None."""
        return self._summary_index.get((benchmark, params, metric, environment, group))

    def comparison(
        self, benchmark: str, params: str, metric: str, environment: str
    ) -> Comparison | None:
        """The :class:`Comparison` of ``environment`` against the baseline, or None."""
        return self._comparison_index.get((benchmark, params, metric, environment))

    def has_cold_warm(self) -> bool:
        """True when any cold/warm summary exists."""
        return any(s.group != GROUP_ALL for s in self.summaries)

    # -- export ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (only str/int/float/bool/None/list/dict; NaN/inf become None).

        Summaries and comparisons carry the environment's ``accel`` and ``emulated`` flag.
        """

        def env_extra(name: str) -> dict[str, Any]:
            info = self.environments.get(name)
            return {
                "accel": info.accel if info else None,
                "emulated": bool(info.emulated) if info else False,
            }

        summaries = []
        for s in self.summaries:
            d = asdict(s)
            d.update(env_extra(s.environment))
            summaries.append(d)
        comparisons = []
        for c in self.comparisons:
            d = asdict(c)
            d["ratio_ci"] = list(c.ratio_ci)
            d["overhead_ci"] = list(c.overhead_ci)
            d.update(env_extra(c.environment))
            comparisons.append(d)
        out = {
            "baseline": self.baseline,
            "alpha": self.alpha,
            "confidence": self.confidence,
            "environments": {
                name: {
                    "name": info.name,
                    "kind": info.kind,
                    "accel": info.accel,
                    "emulated": bool(info.emulated),
                    "fingerprint": info.fingerprint,
                }
                for name, info in self.environments.items()
            },
            "summaries": summaries,
            "comparisons": comparisons,
            "findings": [asdict(f) for f in self.findings],
        }
        return _json_clean(out)


def _json_clean(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (np.floating,)):
        v = float(x)
        return v if math.isfinite(v) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, dict):
        return {str(k): _json_clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_clean(v) for v in x]
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    return str(x)


# --------------------------------------------------------------------------------------------
# formulas (public so that tests and other rooms can check them one by one)
# --------------------------------------------------------------------------------------------


def student_t_ci(
    mean: float, stdev: float, n: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Student-t confidence interval of a mean: ``mean ± t_{(1+c)/2, n−1} · stdev / √n``.

    mean, stdev: in the metric's unit; n: sample count (≥ 2); confidence in (0, 1).
    Returns (low, high) in the metric's unit.  Raises ValueError when n < 2.
    Source: Student (1908); Montgomery & Runger §8.2.
    """
    if n < 2:
        raise ValueError(f"a confidence interval needs n >= 2 samples, got n={n}")
    half = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1)) * stdev / math.sqrt(n)
    return (mean - half, mean + half)


def modified_z_outliers(values: np.ndarray, threshold: float = MAD_THRESHOLD) -> int:
    """Count outliers by the modified z-score of Iglewicz & Hoaglin (1993).

    ``M_i = 0.6745 · (x_i − median) / MAD`` with ``MAD = median(|x − median|)``; x_i is an
    outlier when ``|M_i| > 3.5``, i.e. ``|x_i − median| > 3.5 · 1.4826 · MAD``.
    When MAD = 0 (more than half the samples equal the median) the scale falls back to
    ``1.253314 · mean(|x − median|)`` (the mean-absolute-deviation variant, consistent for σ of
    a normal distribution); when that is 0 too, all samples are equal and there is no outlier.

    values: 1-D array of samples (any unit); returns the count (int, 0 for fewer than 3 values).
    """
    x = np.asarray(values, dtype=float)
    if x.size < 3:
        return 0
    med = np.median(x)
    dev = np.abs(x - med)
    mad = np.median(dev)
    if mad > 0:
        scale = MAD_SCALE * mad
    else:
        scale = MEANAD_SCALE * float(np.mean(dev))
        if scale == 0:
            return 0
    return int(np.count_nonzero(dev > threshold * scale))


def welch_test(
    mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int
) -> tuple[float | None, float | None]:
    """Two-sided Welch t-test of equal means from summary statistics.

    var_a, var_b: sample variances (ddof = 1, unit²); n_a, n_b: sample counts.
    ``t = (mean_a − mean_b) / √(var_a/n_a + var_b/n_b)``,
    ``df = (v_a + v_b)² / (v_a²/(n_a−1) + v_b²/(n_b−1))`` with ``v = var/n`` (Welch 1947,
    Satterthwaite 1946); p = 2 · P(T_df > |t|).
    Returns (p, df).  Degenerate cases: n < 2 on either side → (None, None); zero variance on
    both sides → (0.0, None) when the means differ, (1.0, None) when they are equal.
    """
    if n_a < 2 or n_b < 2:
        return (None, None)
    va, vb = var_a / n_a, var_b / n_b
    se2 = va + vb
    if se2 == 0:
        return ((0.0 if mean_a != mean_b else 1.0), None)
    t = (mean_a - mean_b) / math.sqrt(se2)
    denom = 0.0
    if va > 0:
        denom += va * va / (n_a - 1)
    if vb > 0:
        denom += vb * vb / (n_b - 1)
    df = se2 * se2 / denom
    p = float(2.0 * stats.t.sf(abs(t), df))
    return (min(1.0, p), df)


def fieller_interval(
    mean_a: float,
    var_a: float,
    n_a: int,
    mean_b: float,
    var_b: float,
    n_b: int,
    confidence: float = 0.95,
) -> tuple[float | None, float | None, float | None]:
    """Confidence interval of the ratio R = mean_a / mean_b of two independent means.

    Fieller's theorem (Fieller 1954): the interval is the set of R with
    ``(a − R·b)² ≤ t² · (s_a² + R²·s_b²)`` where a, b are the sample means,
    ``s_a² = var_a/n_a`` and ``s_b² = var_b/n_b`` their squared standard errors and t the
    two-sided quantile of Student's t at ``confidence``.  The bounds are the roots of
    ``(b² − t² s_b²) R² − 2ab R + (a² − t² s_a²) = 0``:
    ``R = [ab ± t √(a² s_b² + b² s_a² − t² s_a² s_b²)] / (b² − t² s_b²)``.
    Degrees of freedom: Welch–Satterthwaite for the linear combination a − R̂·b at the point
    estimate R̂ = a/b: ``df = (s_a² + R̂² s_b²)² / (s_a⁴/(n_a−1) + R̂⁴ s_b⁴/(n_b−1))``.

    var_a, var_b: sample variances (ddof = 1); means in the same unit; result dimensionless.
    Returns (low, high, df).  When ``g = t² s_b² / b² ≥ 1`` the denominator's confidence
    interval contains 0 and the set is unbounded: (None, None, df).  n < 2 on either side or
    b = 0: (None, None, None).  Zero variance on both sides: (R̂, R̂, None).
    """
    if n_a < 2 or n_b < 2 or mean_b == 0:
        return (None, None, None)
    a, b = mean_a, mean_b
    sa2, sb2 = var_a / n_a, var_b / n_b
    r = a / b
    if sa2 == 0 and sb2 == 0:
        return (r, r, None)
    denom = 0.0
    if sa2 > 0:
        denom += sa2 * sa2 / (n_a - 1)
    if sb2 > 0:
        denom += (r**4) * sb2 * sb2 / (n_b - 1)
    if denom == 0:  # sa2 == 0 and r == 0
        df = float(n_b - 1)
    else:
        df = (sa2 + r * r * sb2) ** 2 / denom
    t = float(stats.t.ppf(0.5 + confidence / 2.0, df))
    q = b * b - t * t * sb2
    if q <= 0:
        return (None, None, df)
    disc = a * a * sb2 + b * b * sa2 - t * t * sa2 * sb2
    root = t * math.sqrt(max(disc, 0.0))
    lo, hi = (a * b - root) / q, (a * b + root) / q
    return (min(lo, hi), max(lo, hi), df)


def holm_adjust(p_values: Iterable[float], alpha: float = 0.05) -> list[float]:
    """Holm–Bonferroni adjusted p-values (Holm 1979), same order as the input.

    Sort ascending p_(1) ≤ … ≤ p_(m); adjusted p_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)).
    Rejecting where adjusted p < alpha controls the family-wise error rate at alpha.
    Computed with ``statsmodels.stats.multitest.multipletests(method="holm")``; an empty input
    gives an empty list.
    """
    ps = [float(p) for p in p_values]
    if not ps:
        return []
    _, padj, _, _ = multipletests(ps, alpha=alpha, method="holm")
    return [float(x) for x in padj]


def overhead_pct(ratio: float | None, higher_is_better: bool) -> float | None:
    """Overhead in percent from ratio = env/baseline, positive = environment worse.

    Lower-is-better: ``(ratio − 1)·100``; higher-is-better: ``(1/ratio − 1)·100`` (None when
    ratio ≤ 0).  See :class:`Comparison` for why rates are inverted.
    """
    if ratio is None or not math.isfinite(ratio):
        return None
    if higher_is_better:
        if ratio <= 0:
            return None
        return (1.0 / ratio - 1.0) * 100.0
    return (ratio - 1.0) * 100.0


# --------------------------------------------------------------------------------------------
# analyse
# --------------------------------------------------------------------------------------------


class _Acc:
    """Accumulator for one (benchmark, params, metric, environment)."""

    __slots__ = ("unit", "hib", "values", "invalid", "cold", "warm", "cold_inv", "warm_inv", "sess")

    def __init__(self, unit: str, hib: bool) -> None:
        self.unit = unit
        self.hib = hib
        self.values: list[float] = []
        self.invalid = 0
        self.cold: list[float] = []
        self.warm: list[float] = []
        self.cold_inv = 0
        self.warm_inv = 0
        self.sess = False


def _summarise(
    key: tuple[str, str, str, str],
    unit: str,
    hib: bool,
    values: list[float],
    n_invalid: int,
    group: str,
    confidence: float,
) -> tuple[Summary, float | None]:
    """Summary of one group plus its sample variance (None when n < 2)."""
    benchmark, params, metric, env = key
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    mean = median = stdev = lo = hi = cv = var = None
    outliers = 0
    if n >= 1:
        mean = float(x.mean())
        median = float(np.median(x))
    if n >= 2:
        var = float(x.var(ddof=1))
        stdev = math.sqrt(var)
        lo, hi = student_t_ci(mean, stdev, n, confidence)
        cv = stdev / abs(mean) if mean != 0 else None
        outliers = modified_z_outliers(x)
    s = Summary(
        benchmark=benchmark,
        params=params,
        metric=metric,
        unit=unit,
        higher_is_better=hib,
        environment=env,
        n=n,
        n_invalid=n_invalid,
        mean=mean,
        median=median,
        stdev=stdev,
        ci_low=lo,
        ci_high=hi,
        cv=cv,
        outliers=outliers,
        group=group,
    )
    return s, var


def _label(benchmark: str, params: str) -> str:
    return f"{benchmark}[{params}]" if params else benchmark


def analyse(
    observations: Iterable[Observation],
    environments: Mapping[str, EnvInfo],
    baseline: str,
    alpha: float = 0.05,
    confidence: float = 0.95,
) -> Analysis:
    """Summaries, comparisons against ``baseline`` and findings for a campaign's observations.

    observations: any iterable of :class:`~vhpc.model.Observation` (consumed once; ~1 s per
    10⁶ observations).  environments: name → :class:`~vhpc.model.EnvInfo`; observations of
    environments not in the mapping are analysed under ``EnvInfo(name, kind="unknown")`` and
    reported by a finding.  baseline: name of the reference environment (usually ``native``).
    alpha: significance level applied to Holm-adjusted p-values; confidence: level of every
    confidence interval (Student-t for means, Fieller for ratios).

    Grouping: (benchmark, params, metric, environment); warm-up observations are skipped;
    invalid or non-finite values are excluded and counted.  Unit and direction of a group are
    taken from its first observation.  Holm's adjustment runs over all comparisons with a
    p-value.  See the module docstring for the sources of each formula.

    Raises ValueError when alpha or confidence is not strictly between 0 and 1.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")

    # -- one pass: dict of accumulators ------------------------------------------------------
    groups: dict[tuple[str, str, str, str], _Acc] = {}
    isfinite = math.isfinite
    for o in observations:
        if o.warmup:
            continue
        key = (o.benchmark, o.params, o.metric, o.environment)
        acc = groups.get(key)
        if acc is None:
            acc = groups[key] = _Acc(o.unit, o.higher_is_better)
        v = o.value
        si = o.session_index
        ok = o.valid and v is not None and isfinite(v)
        if ok:
            acc.values.append(v)
        else:
            acc.invalid += 1
        if si is not None:
            acc.sess = True
            if si == 0:
                if ok:
                    acc.cold.append(v)
                else:
                    acc.cold_inv += 1
            else:
                if ok:
                    acc.warm.append(v)
                else:
                    acc.warm_inv += 1

    # -- environments and order ----------------------------------------------------------------
    envs: dict[str, EnvInfo] = {}
    findings: list[Finding] = []
    seen_envs = sorted({k[3] for k in groups})
    for name, info in environments.items():
        if name in seen_envs or name == baseline:
            envs[name] = info
    for name in seen_envs:
        if name not in envs:
            envs[name] = EnvInfo(name=name, kind="unknown")
            findings.append(
                Finding(
                    "info",
                    name,
                    f"environment {name!r} has observations but no description (kind, accelerator,"
                    " fingerprint)",
                    "check that the campaign store records every environment it ran",
                    kind="unknown-environment",
                )
            )
    env_rank = {name: i for i, name in enumerate(envs)}
    env_rank[baseline] = -1

    ordered = sorted(groups, key=lambda k: (k[0], k[1], k[2], env_rank.get(k[3], 10**9), k[3]))

    # -- summaries -----------------------------------------------------------------------------
    summaries: list[Summary] = []
    variances: dict[tuple[str, str, str, str], float | None] = {}
    by_key_env: dict[tuple[str, str, str, str], Summary] = {}
    for k in ordered:
        acc = groups[k]
        s, var = _summarise(k, acc.unit, acc.hib, acc.values, acc.invalid, GROUP_ALL, confidence)
        summaries.append(s)
        variances[k] = var
        by_key_env[k] = s
        if acc.sess:
            if acc.cold or acc.cold_inv:
                summaries.append(
                    _summarise(k, acc.unit, acc.hib, acc.cold, acc.cold_inv, GROUP_COLD, confidence)[0]
                )
            if acc.warm or acc.warm_inv:
                summaries.append(
                    _summarise(k, acc.unit, acc.hib, acc.warm, acc.warm_inv, GROUP_WARM, confidence)[0]
                )

    # -- comparisons ---------------------------------------------------------------------------
    raw: list[dict[str, Any]] = []
    missing_baseline: dict[tuple[str, str], set[str]] = {}
    for k in ordered:
        benchmark, params, metric, env = k
        if env == baseline:
            continue
        bk = (benchmark, params, metric, baseline)
        sb = by_key_env.get(bk)
        if sb is None:
            missing_baseline.setdefault((benchmark, params), set()).add(metric)
            continue
        se = by_key_env[k]
        hib = se.higher_is_better
        ratio = None
        if se.mean is not None and sb.mean is not None and sb.mean != 0:
            ratio = se.mean / sb.mean
        p = df = None
        lo = hi = None
        if se.n >= 2 and sb.n >= 2:
            va, vb = variances[k], variances[bk]
            p, _ = welch_test(se.mean, va, se.n, sb.mean, vb, sb.n)
            lo, hi, df = fieller_interval(se.mean, va, se.n, sb.mean, vb, sb.n, confidence)
        if hib:
            oci = (overhead_pct(hi, True), overhead_pct(lo, True))
        else:
            oci = (overhead_pct(lo, False), overhead_pct(hi, False))
        unit_note = sb.unit != se.unit
        raw.append(
            dict(
                benchmark=benchmark,
                params=params,
                metric=metric,
                unit=se.unit,
                higher_is_better=hib,
                environment=env,
                baseline=baseline,
                ratio=ratio,
                ratio_ci=(lo, hi),
                overhead_pct=overhead_pct(ratio, hib),
                p_value=p,
                n=se.n,
                n_baseline=sb.n,
                mean=se.mean,
                mean_baseline=sb.mean,
                df=df,
                overhead_ci=oci,
                unit_mismatch=unit_note,
            )
        )

    # Holm over every comparison that has a p-value
    idx = [i for i, r in enumerate(raw) if r["p_value"] is not None]
    adjusted: dict[int, float] = {}
    if idx:
        padj = holm_adjust([raw[i]["p_value"] for i in idx], alpha)
        adjusted = dict(zip(idx, padj))

    comparisons: list[Comparison] = []
    for i, r in enumerate(raw):
        unit_mismatch = r.pop("unit_mismatch")
        pa = adjusted.get(i)
        if pa is None or r["ratio"] is None:
            verdict = INSUFFICIENT
        elif pa < alpha:
            worse = (r["mean"] < r["mean_baseline"]) if r["higher_is_better"] else (
                r["mean"] > r["mean_baseline"]
            )
            verdict = SLOWER if worse else FASTER
        else:
            verdict = NO_DIFFERENCE
        if unit_mismatch:
            verdict = INSUFFICIENT
            findings.append(
                Finding(
                    "warn",
                    f"{r['environment']} / {_label(r['benchmark'], r['params'])}",
                    f"metric {r['metric']} is reported in different units by {r['environment']}"
                    f" and {baseline}: not compared",
                    "fix the benchmark parser so that it always reports one unit",
                    kind="unit-mismatch",
                )
            )
        comparisons.append(Comparison(p_adjusted=pa, verdict=verdict, **r))

    findings.extend(_findings(summaries, envs, baseline, missing_baseline, groups))
    findings.sort(key=lambda f: 0 if f.level == "warn" else 1)
    return Analysis(
        summaries=summaries,
        comparisons=comparisons,
        findings=findings,
        baseline=baseline,
        environments=envs,
        alpha=alpha,
        confidence=confidence,
    )


def _fmt_list(items: list[str], limit: int = 6) -> str:
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" and {len(items) - limit} more"


def _findings(
    summaries: list[Summary],
    envs: dict[str, EnvInfo],
    baseline: str,
    missing_baseline: dict[tuple[str, str], set[str]],
    groups: dict,
) -> list[Finding]:
    """Diagnostics, aggregated per (environment, benchmark, params) so the list stays short."""
    out: list[Finding] = []
    for name, info in envs.items():
        if info.emulated:
            out.append(
                Finding(
                    "warn",
                    name,
                    f"results of {name} come from TCG emulation, not hardware virtualization:"
                    " overheads are not KVM overheads",
                    "run on a host where /dev/kvm is usable (check permissions and that"
                    " virtualization is enabled) to measure virtualization overhead",
                    kind="tcg",
                )
            )
    if baseline not in {k[3] for k in groups}:
        out.append(
            Finding(
                "warn",
                "campaign",
                f"baseline environment {baseline!r} has no observations: nothing can be compared",
                "run the baseline in the same campaign or choose another baseline with --baseline",
                kind="baseline-missing",
            )
        )
    else:
        for (benchmark, params), metrics in missing_baseline.items():
            out.append(
                Finding(
                    "warn",
                    _label(benchmark, params),
                    f"baseline {baseline!r} has no observations for {_label(benchmark, params)}"
                    f" (metric(s) {_fmt_list(sorted(metrics))}): no comparison",
                    "run this benchmark in the baseline environment too, or choose another"
                    " baseline with --baseline",
                    kind="baseline-missing",
                )
            )

    noisy: dict[tuple[str, str, str], list[str]] = {}
    few: dict[tuple[str, str, str], list[str]] = {}
    outl: dict[tuple[str, str, str], list[str]] = {}
    inval: dict[tuple[str, str, str], list[str]] = {}
    for s in summaries:
        if s.group != GROUP_ALL:
            continue
        scope = (s.environment, s.benchmark, s.params)
        if s.cv is not None and s.cv > CV_THRESHOLD:
            noisy.setdefault(scope, []).append(f"{s.metric} (CV {s.cv * 100:.1f} %)")
        if s.n < MIN_SAMPLES:
            few.setdefault(scope, []).append(f"{s.metric} (n={s.n})")
        if s.outliers:
            outl.setdefault(scope, []).append(f"{s.metric} ({s.outliers} of {s.n})")
        if s.n_invalid:
            inval.setdefault(scope, []).append(f"{s.metric} ({s.n_invalid})")

    def scope_str(sc: tuple[str, str, str]) -> str:
        return f"{sc[0]} / {_label(sc[1], sc[2])}"

    for sc, items in noisy.items():
        out.append(
            Finding(
                "warn",
                scope_str(sc),
                f"high variation (coefficient of variation > {CV_THRESHOLD * 100:.0f} %):"
                f" {_fmt_list(items)}",
                "add repeats (--repeats), pin vCPUs and threads, and quiet the host (no other"
                " jobs, fixed CPU frequency) before trusting small differences",
                kind="high-variation",
            )
        )
    for sc, items in few.items():
        out.append(
            Finding(
                "warn",
                scope_str(sc),
                f"too few valid samples (< {MIN_SAMPLES}): {_fmt_list(items)}",
                "increase --repeats: confidence intervals and tests need at least 3 samples,"
                " better 10 or more",
                kind="few-samples",
            )
        )
    for sc, items in inval.items():
        out.append(
            Finding(
                "warn",
                scope_str(sc),
                f"invalid samples (verification failed or value not finite), excluded:"
                f" {_fmt_list(items)}",
                "check the raw output with `vhpc report ID --json`",
                kind="invalid",
            )
        )
    for sc, items in outl.items():
        out.append(
            Finding(
                "info",
                scope_str(sc),
                f"outliers (modified z-score > {MAD_THRESHOLD}): {_fmt_list(items)}",
                "check for noise on the host (other jobs, frequency changes, interrupts) and look"
                " at the distribution figure",
                kind="outliers",
            )
        )
    return out
