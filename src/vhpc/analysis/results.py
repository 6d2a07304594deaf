"""Result records of the analysis room: :class:`Summary`, :class:`Comparison`,
:class:`Finding` and the :class:`Analysis` that holds them (with lookups and JSON export).

Plain data; the numbers come from :mod:`vhpc.core.stats` via :mod:`vhpc.analysis.pipeline`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from vhpc.core.metrics import EnvInfo

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
    * ``ratio_ci``: (low, high) confidence interval of the ratio, ``ratio_ci_method`` says how
      (:func:`vhpc.core.stats.ratio_interval`): ``fieller`` (Fieller 1954, Welch–Satterthwaite
      ``df``) where valid; for positive quantities whose Fieller interval is unbounded or
      reaches ≤ 0, ``log-delta`` (delta method on the log ratio, always positive) or ``bca``
      (BCa bootstrap, skewed samples); ``exact`` (no variation); ``none`` (n < 2).  Both
      bounds are None without an interval and for an unbounded Fieller set (shown
      "unbounded": the baseline mean is not significantly different from 0).
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
      ``"no significant difference"`` or ``"insufficient data"``.  Slower/faster need BOTH
      p_adjusted < alpha AND the ratio's confidence set at level 1 − alpha (the interval shown
      when confidence = 1 − alpha, the default) to exclude 1, so the verdict never contradicts
      the interval; when the two disagree the verdict is "no significant difference" and
      ``note`` says why.
    * ``n``/``n_baseline``, ``mean``/``mean_baseline``: valid sample counts and means (unit).
    * Power (:func:`vhpc.core.power.runs_needed`, :func:`vhpc.core.power.detectable_effect`, two-sided
      two-sample t at alpha, 80 % power, pooled CV of both sides relative to the baseline mean):
      ``runs_needed`` per environment to detect the observed relative difference
      ``|mean/mean_baseline − 1|`` (None: no difference observed or unmeasurably small);
      ``detectable``: the smallest relative difference (0.05 = 5 %) the smaller side's n can
      detect.
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

    @property
    def key(self) -> Key:
        """(benchmark, params, metric)."""
        return (self.benchmark, self.params, self.metric)


@dataclass(frozen=True)
class Finding:
    """A diagnostic for the reader (named ``Finding`` so as not to shadow ``Warning``).

    level: ``"info"`` or ``"warn"``; kind: machine-readable category (``high-variation``,
    ``few-samples``, ``outliers``, ``tcg``, ``invalid``, ``baseline-missing``, ``underpowered``,
    ``unknown-environment``); scope: what it is about — ``"campaign"``, an environment name, or
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


