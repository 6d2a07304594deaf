"""Result records of the analysis room: :class:`Summary`, :class:`Comparison`,
:class:`Finding` and the :class:`Analysis` that holds them (with lookups and JSON export).

Plain data; the numbers come from :mod:`vhpc.core.stats` via :mod:`vhpc.analysis.pipeline`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from vhpc.core.logratio import LogMoments
from vhpc.core.metrics import EnvInfo

GROUP_ALL = "all"
GROUP_COLD = "cold"
GROUP_WARM = "warm"

SLOWER = "slower"
FASTER = "faster"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
INSUFFICIENT = "insufficient data"
VERDICTS = (SLOWER, FASTER, EQUIVALENT, INCONCLUSIVE, INSUFFICIENT)

#: default equivalence margin: seed 004's question "is the overhead within 5 %?"
DEFAULT_MARGIN = 0.05

#: roles of a comparison in its family (:mod:`vhpc.analysis.pipeline`): the primary metric of a
#: benchmark (adjusted with the campaign's other primaries), a point of a sweep (adjusted
#: within its sweep), a secondary metric (min/max, further metrics: reported at 1 − α, in no
#: family), the inverse of another metric (time vs rate: that metric's verdict)
PRIMARY, POINT, SECONDARY, INVERSE, SAME = "primary", "point", "secondary", "inverse", "same"

#: coefficient of variation above which a group is reported as noisy (5 %)
CV_THRESHOLD = 0.05
#: fewer valid samples than this in a group triggers a finding
MIN_SAMPLES = 3

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
    * ``gmean``: geometric mean exp(mean ln x) (unit), the centre every ratio of the analysis
      divides (:class:`Comparison`, :mod:`vhpc.analysis.versus`); ``gmean_low``/``gmean_high``
      its Student-t interval on the ln scale at the analysis' confidence level (asymmetric);
      ``log_sd``: sample standard deviation of ln x (ddof 1, ≈ the CV).  All None when a value
      is ≤ 0 (no log scale); the interval and ``log_sd`` None when n < 2.
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
    gmean: float | None = None
    gmean_low: float | None = None
    gmean_high: float | None = None
    log_sd: float | None = None

    @property
    def key(self) -> Key:
        """(benchmark, params, metric)."""
        return (self.benchmark, self.params, self.metric)

    def log_moments(self) -> LogMoments | None:
        """The group's :class:`~vhpc.core.logratio.LogMoments` (mean and variance of ln x,
        n) from ``gmean``, ``log_sd`` and ``n``; None without a geometric mean."""
        if self.gmean is None or not self.gmean > 0:
            return None
        return LogMoments(math.log(self.gmean), None if self.log_sd is None else
                          self.log_sd ** 2, self.n)

    @property
    def ci_halfwidth(self) -> float | None:
        """Half-width of the confidence interval of the mean (unit of the metric), or None."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2.0


#: what a comparison's interval level is, by :attr:`Comparison.level_kind`
LEVEL_KINDS = {
    "1-alpha": "1 − α: in no family",
    "holm": "Holm's 1 − α/(m − r): a row Holm calls different",
    "bonferroni": "Bonferroni's 1 − α/m, where equivalence is read: intervals not simultaneous",
    "simultaneous": "Bonferroni's 1 − α/m for every row: simultaneous intervals",
}


@dataclass(frozen=True)
class Comparison:
    """One environment against the baseline for one (benchmark, params, metric).

    One model decides and shows (docs/statistics.md, :func:`vhpc.core.logratio.log_welch`):

    * ``ratio``: ratio of the geometric means env / baseline, exp(mean ln x − mean ln y)
      (dimensionless), the centre of the interval; None when either side has no value or a
      value is not positive (then ``ratio_ci_method`` says what was done instead).
    * ``ratio_ci``: (low, high) at ``level``, the confidence level the verdict uses:
      exp(Δ ± t·se) of Welch's t on ln values (``ratio_ci_method`` ``log-welch``; with
      ``--method rank`` ``hodges-lehmann``).  ``level`` is 1 − α for a metric in no family; in
      a family of m comparisons of which Holm rejects r, Holm's level 1 − α/(m − r)
      (:func:`vhpc.core.logratio.holm_level`) for a row Holm calls different (its interval
      excludes 1 exactly because Holm's adjusted p < α) and Bonferroni's 1 − α/m for every
      other row, where equivalence is read (:func:`vhpc.core.logratio.bonferroni_level`);
      1 − α/m for all with ``--intervals simultaneous``.  Data with a value ≤ 0 have no log
      scale: no ratio, ``welch-difference`` (``difference``/``difference_ci`` below).
    * ``overhead_pct``: the one overhead: cost of the environment, positive = worse.
      Lower-is-better: ``(ratio − 1)·100``; higher-is-better: ``(1/ratio − 1)·100`` (the extra
      time to do the same work at the lower rate); ``overhead_ci``: ``ratio_ci`` mapped alike.
    * ``p_value``: two-sided Welch t-test on ln values; ``p_adjusted``: Holm-adjusted within
      the comparison's family (= ``p_value`` outside a family).
    * ``verdict``, read off ``ratio_ci`` in the metric's direction: ``slower`` (the interval
      lies on the worse side of 1), ``faster``, ``equivalent`` (it lies inside ±``margin``:
      [1/(1+margin), 1+margin], TOST, Schuirmann 1987), ``inconclusive`` (neither;
      ``runs_needed`` says how many runs per side would likely decide) or ``insufficient
      data`` (fewer than 2 valid samples a side).
    * ``role``: ``primary`` (adjusted with the campaign's other primary metrics), ``point``
      (a point of a sweep, adjusted within it), ``secondary`` (in no family) or ``inverse``
      (the inverse of ``inverse_of``, a metric of the same benchmark: its verdict, one
      verdict for one effect) or ``same`` (a constant multiple of ``inverse_of``, such as
      LAMMPS's Matom-steps/s beside timesteps/s: its verdict too); ``family_size``: m of its
      family (1 outside one).
    * ``n``/``n_baseline``, ``mean``/``mean_baseline``: valid sample counts and arithmetic
      means (unit); ``gmean``/``gmean_baseline``: the geometric means (unit) whose ratio is
      ``ratio`` (None off the log scale: then ``ratio`` = mean / mean_baseline).
      ``detectable``: the smallest relative difference (0.05 = 5 %) the smaller
      side's n detects at 80 % power.
    * ``difference``/``difference_ci``: for a signed metric (values can be ≤ 0;
      ``ratio_ci_method`` ``welch-difference``), mean − mean_baseline in ``unit`` and Welch's
      interval at ``level`` (``ratio`` None; ``overhead_pct`` the worse-positive difference
      relative to |mean_baseline|); None otherwise.
    * ``level_kind``: what ``level`` is: ``1-alpha``, ``holm``, ``bonferroni`` or
      ``simultaneous`` (:data:`LEVEL_KINDS`).
    * ``diagnostic``: from 8 valid runs a side, what the log-normal model's check found (ln
      residuals not normal by Shapiro–Wilk, outliers on the log scale) and the remedy
      (:func:`vhpc.core.logratio.diagnose`); "" when it holds or was not checked.
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
    ratio_ci_method: str = "none"
    note: str = ""
    runs_needed: int | None = None
    detectable: float | None = None
    level: float = 0.95
    margin: float = DEFAULT_MARGIN
    role: str = SECONDARY
    family_size: int = 1
    inverse_of: str = ""
    gmean: float | None = None
    gmean_baseline: float | None = None
    difference: float | None = None
    difference_ci: tuple[float | None, float | None] = (None, None)
    #: which level ``level`` is (:data:`LEVEL_KINDS`): ``1-alpha`` (no family), ``holm`` (a
    #: row Holm calls different), ``bonferroni`` (read for equivalence at 1 − α/m), or
    #: ``simultaneous`` (``--intervals simultaneous``: every row of the family at 1 − α/m)
    level_kind: str = "1-alpha"
    diagnostic: str = ""

    @property
    def key(self) -> Key:
        """(benchmark, params, metric)."""
        return (self.benchmark, self.params, self.metric)


@dataclass(frozen=True)
class CheckResult:
    """A check figure (energy, residual, verification count): a figure a run prints to prove
    it computed the right thing, never a metric with a ratio verdict.  One per (benchmark,
    params, metric, environment ≠ baseline).

    ``value``/``reference``: medians of the environment's and the baseline's valid values
    (unit); ``rtol``: the declared relative tolerance (None: none declared, the values are
    shown); ``difference``: |value − reference| / |reference| (None for a reference of 0 with a
    value ≠ 0); ``passed``: difference ≤ rtol (None without a tolerance or a value);
    ``excluded``: the environment's trials whose samples are invalid (a check that failed per
    trial, :mod:`vhpc.campaign.checks`, or a failed verification), never averaged in."""

    benchmark: str
    params: str
    metric: str
    unit: str
    environment: str
    baseline: str
    value: float | None
    reference: float | None
    rtol: float | None
    difference: float | None
    passed: bool | None
    n: int = 0
    n_baseline: int = 0
    excluded: int = 0

    @property
    def key(self) -> Key:
        """(benchmark, params, metric)."""
        return (self.benchmark, self.params, self.metric)

    @property
    def status(self) -> str:
        """"pass", "fail" or "n/a" (no tolerance declared, or no value on a side)."""
        return "n/a" if self.passed is None else ("pass" if self.passed else "fail")


@dataclass(frozen=True)
class Finding:
    """A diagnostic for the reader (named ``Finding`` so as not to shadow ``Warning``).

    level: ``"info"`` or ``"warn"``; kind: machine-readable category (``high-variation``,
    ``few-samples``, ``outliers``, ``tcg``, ``invalid``, ``baseline-missing``, ``inconclusive``,
    ``constant-figure``, ``unknown-environment``); scope: what it is about — ``"campaign"``, an environment name, or
    ``"<environment> / <benchmark>[<params>]"`` (metrics are named in the message);
    message: what was observed; advice: what to do about it; items: every item the message
    aggregates (the message names the first few and counts the rest).
    """

    level: str
    scope: str
    message: str
    advice: str
    kind: str = ""
    items: tuple[str, ...] = ()


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
    alpha: family-wise significance level of the verdicts; confidence: level of the
    per-environment intervals of means (comparisons carry their own ``level``); margin: the
    equivalence margin (0.05 = ±5 %); checks: one :class:`CheckResult` per check figure and
    non-baseline environment.
    """

    summaries: list[Summary]
    comparisons: list[Comparison]
    findings: list[Finding]
    baseline: str
    environments: dict[str, EnvInfo]
    alpha: float = 0.05
    confidence: float = 0.95
    margin: float = DEFAULT_MARGIN
    checks: list[CheckResult] = field(default_factory=list)
    #: (benchmark, metric) of every check figure: no comparison, no family, no table head
    check_metrics: frozenset = frozenset()
    #: (benchmark, metric) declared signed (custom ``signed: true``, the registry's
    #: ``Metric.signed``): compared by the difference of means wherever two groups are
    signed_metrics: frozenset = frozenset()
    #: those of :attr:`signed_metrics` that are never negative but can be 0 (the registry's
    #: ``Metric.can_be_zero``): named "can be 0", not "signed"
    zero_metrics: frozenset = frozenset()
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

    def is_check(self, benchmark: str, metric: str) -> bool:
        """True when ``metric`` of ``benchmark`` is a check figure, not a metric."""
        return (benchmark, metric) in self.check_metrics

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
            d["difference_ci"] = list(c.difference_ci)
            d.update(env_extra(c.environment))
            comparisons.append(d)
        out = {
            "baseline": self.baseline,
            "alpha": self.alpha,
            "confidence": self.confidence,
            "margin": self.margin,
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
            "checks": [dict(asdict(c), status=c.status) for c in self.checks],
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


