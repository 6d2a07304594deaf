""":func:`analyse`: observations → summaries → comparisons → findings, in one pass each."""

from __future__ import annotations

from typing import Iterable, Mapping

from vhpc.analysis.compare import comparisons_of
from vhpc.analysis.findings import apply_rules, baseline_findings
from vhpc.analysis.results import GROUP_ALL, Analysis
from vhpc.analysis.summaries import GroupKey, group_observations, summaries_of
from vhpc.core.metrics import EnvInfo, Observation


def _environments(seen: list[str], environments: Mapping[str, EnvInfo],
                  baseline: str) -> dict[str, EnvInfo]:
    """Described environments that appear (or are the baseline), in the mapping's order, then
    undescribed ones as ``EnvInfo(name, kind="unknown")``."""
    envs = {name: info for name, info in environments.items() if name in seen or name == baseline}
    for name in seen:
        envs.setdefault(name, EnvInfo(name=name, kind="unknown"))
    return envs


def analyse(observations: Iterable[Observation], environments: Mapping[str, EnvInfo],
            baseline: str, alpha: float = 0.05, confidence: float | None = None) -> Analysis:
    """Summaries, comparisons against ``baseline`` and findings for a campaign's observations.

    observations: any iterable of :class:`~vhpc.core.metrics.Observation` (consumed once).
    environments: name → :class:`~vhpc.core.metrics.EnvInfo`; observations of environments not in the
    mapping are analysed under ``EnvInfo(name, kind="unknown")`` and reported by a finding.
    baseline: name of the reference environment (usually ``native``).  alpha: significance
    level of the verdicts (Holm-adjusted Welch p and the ratio's confidence set at 1 − alpha);
    confidence: level of every interval shown (default 1 − alpha, so the verdict and the
    interval beside it are the same decision).

    Grouping: (benchmark, params, metric, environment); warm-up observations are skipped;
    invalid or non-finite values are excluded and counted.  Formulas: :mod:`vhpc.core.stats`.
    Raises ValueError when alpha or confidence is not strictly between 0 and 1.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha}")
    if confidence is None:
        confidence = 1.0 - alpha
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    groups = group_observations(observations)
    envs = _environments(sorted({k[3] for k in groups}), environments, baseline)
    rank = {name: i for i, name in enumerate(envs)}
    rank[baseline] = -1
    ordered: list[GroupKey] = sorted(groups, key=lambda k: (k[0], k[1], k[2], rank.get(k[3], 10**9), k[3]))
    summaries = summaries_of(ordered, groups, confidence)
    by_key = {(s.benchmark, s.params, s.metric, s.environment): s
              for s in summaries if s.group == GROUP_ALL}
    values = {k: g.values[GROUP_ALL] for k, g in groups.items()}
    comparisons, missing, _ = comparisons_of(ordered, by_key, values, baseline, confidence, alpha)
    findings = apply_rules(envs, summaries, comparisons)
    findings += baseline_findings(baseline, any(k[3] == baseline for k in groups), missing)
    findings.sort(key=lambda f: 0 if f.level == "warn" else 1)
    return Analysis(summaries=summaries, comparisons=comparisons, findings=findings,
                    baseline=baseline, environments=envs, alpha=alpha, confidence=confidence)
