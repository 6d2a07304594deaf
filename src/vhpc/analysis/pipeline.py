""":func:`analyse`: observations → summaries → families → comparisons and checks → findings.

The family of each comparison (docs/statistics.md, "Families"): the campaign's primary metrics
(one per benchmark, :func:`vhpc.analysis.families.families`) are one Holm family; each sweep
(a quantity over message size or a parameter) is a family of its own per environment;
secondary metrics (min/max, further figures) are in none; a metric the benchmark declares the
inverse of another (a time and its rate: their product is the same in every trial) or the same
figure in another unit takes that metric's verdict (:func:`declared_pairs`); check figures
(energy, residual, verification counts) are no comparison at all but a
:class:`~vhpc.analysis.results.CheckResult`.
"""

from __future__ import annotations

from dataclasses import replace

from typing import Iterable, Mapping

from vhpc.analysis.compare import Plan, comparisons_of
from vhpc.analysis.findings import apply_rules, baseline_findings
from vhpc.analysis.results import (
    DEFAULT_MARGIN, GROUP_ALL, INVERSE, POINT, PRIMARY, SAME, SECONDARY, Analysis, CheckResult,
)
from vhpc.analysis.summaries import GroupKey, group_observations, summaries_of
from vhpc.core.metrics import EnvInfo, Observation, ObservationColumns

#: units of a registered benchmark's verification figures (HPCCG's iterations, residual):
#: check figures, never metrics
CHECK_UNITS = ("count", "1")


def _environments(seen: list[str], environments: Mapping[str, EnvInfo],
                  baseline: str) -> dict[str, EnvInfo]:
    """Described environments that appear (or are the baseline), in the mapping's order, then
    undescribed ones as ``EnvInfo(name, kind="unknown")``."""
    envs = {name: info for name, info in environments.items() if name in seen or name == baseline}
    for name in seen:
        envs.setdefault(name, EnvInfo(name=name, kind="unknown"))
    return envs


def declared_checks(benchmarks: Iterable[str]) -> dict[tuple[str, str], float | None]:
    """Check figures the benchmark registry declares (:meth:`vhpc.benchmarks.base.Benchmark.
    all_checks`: an application may carry several): (benchmark, metric) → rtol."""
    from vhpc import benchmarks as registry

    out = {}
    for name in benchmarks:
        bench = registry.REGISTRY.get(name)
        for chk in bench.all_checks() if bench is not None else ():
            out[(name, chk.metric)] = None if chk.rtol is None else float(chk.rtol)
    return out


def registered(benchmark: str) -> bool:
    """True for a benchmark of vhpc's registry (whose ``count``/``1`` figures are verification
    figures); a custom command's dimensionless metric stays a metric."""
    from vhpc import benchmarks as registry

    return benchmark in registry.REGISTRY


def registry_signed(benchmarks: Iterable[str], zero: bool | None = None
                    ) -> frozenset[tuple[str, str]]:
    """(benchmark, metric) of every metric the benchmark registry declares without a log
    scale (:attr:`vhpc.core.metrics.Metric.signed`: its values can be negative, or
    :attr:`~vhpc.core.metrics.Metric.can_be_zero`), read as a custom metric's ``signed:
    true`` is (:func:`vhpc.analysis.compare.declared_signed`); ``zero`` True: only those that
    can be 0 but not negative, False: only the signed ones."""
    from vhpc import benchmarks as registry

    def want(m) -> bool:
        if zero is None:
            return m.signed or m.can_be_zero
        return m.can_be_zero and not m.signed if zero else m.signed
    return frozenset((name, m.name) for name in benchmarks
                     for m in getattr(registry.REGISTRY.get(name), "metrics", ()) if want(m))


def declared_pairs(keys: Iterable[tuple[str, str, str]],
                   custom: Mapping[str, Iterable[tuple[str, str, str]]] | None = None
                   ) -> set[tuple[str, str, str, str, str]]:
    """(benchmark, params, metric, other, kind) for every pair of metrics a benchmark declares
    (:attr:`vhpc.core.metrics.Metric.inverse_of` → ``inverse``, ``same_as`` → ``same``: one
    effect measured twice) whose two metrics both have observations under (benchmark,
    params); the two names in sorted order.  keys: the (benchmark, params, metric) observed;
    custom: benchmark → :meth:`vhpc.benchmarks.base.Benchmark.pairs` of custom benchmarks
    (:func:`vhpc.analysis.checks.pair_specs`); the registry's are looked up.  Nothing is
    inferred from the values."""
    from vhpc import benchmarks as registry

    seen: dict[tuple[str, str], set[str]] = {}
    for bench, params, metric in keys:
        seen.setdefault((bench, params), set()).add(metric)
    declared: dict[str, tuple[tuple[str, str, str], ...]] = {}
    for bench in {b for b, _ in seen}:
        found = registry.REGISTRY.get(bench)
        declared[bench] = tuple((custom or {}).get(bench, ())) or (
            found.pairs() if found is not None else ())
    out = set()
    for (bench, params), metrics in seen.items():
        for a, b, kind in declared[bench]:
            if a in metrics and b in metrics:
                out.add((bench, params, *sorted((a, b)), SAME if kind == SAME else INVERSE))
    return out


def plan_of(stub: Analysis, pairs: set[tuple[str, str, str, str, str]]) -> Plan:
    """Each (benchmark, params, metric) that is no check figure → (family id, role, partner):
    see the module docstring."""
    from vhpc.analysis.families import families

    plan: Plan = {}
    for fam in families(stub):
        if fam.check:
            continue
        for _, params, metric in fam.points:
            if fam.sweep:
                plan[(fam.benchmark, params, metric)] = (
                    ("sweep", fam.benchmark, fam.params, fam.quantity, fam.parameter), POINT, "")
            elif fam.primary:
                plan[(fam.benchmark, params, metric)] = ("campaign", PRIMARY, "")
            else:
                plan[(fam.benchmark, params, metric)] = (None, SECONDARY, "")
    for bench, params, a, b, kind in sorted(pairs):
        ka, kb = (bench, params, a), (bench, params, b)
        if ka not in plan or kb not in plan or {INVERSE, SAME} & {plan[ka][1], plan[kb][1]}:
            continue
        # the one in a family (primary, a point) keeps its verdict; else the first by name
        keep, dup = (kb, ka) if plan[kb][1] != SECONDARY and plan[ka][1] == SECONDARY \
            else (ka, kb)
        plan[dup] = (None, kind, keep[2])
    return plan


def check_results(stub: Analysis, checks: Mapping[tuple[str, str], float | None]
                  ) -> list[CheckResult]:
    """A :class:`CheckResult` per check figure and non-baseline environment with values."""
    out = []
    for bench, params, metric in stub.keys():
        if not stub.is_check(bench, metric):
            continue
        base = stub.summary(bench, params, metric, stub.baseline)
        rtol = checks.get((bench, metric), 0.0 if base is not None and base.unit == "count"
                          else None)
        for env in stub.others():
            s = stub.summary(bench, params, metric, env)
            if s is None:
                continue
            value, ref = s.median, base.median if base is not None else None
            diff = None
            if value is not None and ref is not None:
                gap = abs(value - ref)
                diff = gap / abs(ref) if ref else (0.0 if gap == 0 else None)
            passed = None
            if rtol is not None and value is not None and ref is not None:
                passed = diff is not None and diff <= rtol
            out.append(CheckResult(bench, params, metric, s.unit, env, stub.baseline, value,
                                   ref, rtol, diff, passed, s.n, base.n if base else 0,
                                   s.n_invalid))
    return out


def analyse(observations: Iterable[Observation] | ObservationColumns,
            environments: Mapping[str, EnvInfo], baseline: str, alpha: float = 0.05,
            confidence: float | None = None, margin: float = DEFAULT_MARGIN,
            checks: Mapping[str, tuple[str, float | None]] | None = None,
            pairs: Mapping[str, Iterable[tuple[str, str, str]]] | None = None,
            intervals: str = "holm", method: str = "log-welch",
            signed: frozenset[tuple[str, str]] = frozenset()) -> Analysis:
    """Summaries, comparisons against ``baseline``, checks and findings for a campaign's
    observations.

    observations: :class:`~vhpc.core.metrics.ObservationColumns` (the store's
    :meth:`~vhpc.store.Store.observation_columns`), or any iterable of
    :class:`~vhpc.core.metrics.Observation` (consumed once, turned into columns).
    environments: name → :class:`~vhpc.core.metrics.EnvInfo`; observations of environments not in
    the mapping are analysed under ``EnvInfo(name, kind="unknown")`` and reported by a finding.
    baseline: name of the reference environment (usually ``native``).  alpha: family-wise
    significance level of the verdicts; confidence: level of the intervals of each
    environment's mean (default 1 − alpha; a comparison's interval is at its family's level).
    margin: equivalence margin (0.05: a ratio within [1/1.05, 1.05] can be ``equivalent``).
    checks: benchmark → (check metric, relative tolerance; None for an identity figure, shown
    and never compared) of custom benchmarks (the campaign spec's ``check:``,
    :func:`vhpc.analysis.checks.check_specs`); the registry's
    checks (every one of a benchmark that carries several) and its figures of unit ``count``
    or ``1`` are checks too.  pairs: benchmark → (metric, partner, ``inverse``|``same``)
    declared by custom benchmarks (:func:`vhpc.analysis.checks.pair_specs`); the registry's
    own are looked up (:func:`declared_pairs`).  intervals: ``holm`` (default) or
    ``simultaneous``; method: ``log-welch`` (default) or ``rank``; signed: (benchmark, metric)
    of custom metrics declared ``signed: true`` (:func:`vhpc.analysis.compare.declared_signed`);
    the registry's own are looked up (:func:`registry_signed`).

    Grouping: (benchmark, params, metric, environment); warm-up observations are skipped;
    invalid or non-finite values are excluded and counted.  Formulas: :mod:`vhpc.core.stats`.
    Raises ValueError when alpha or confidence is not strictly between 0 and 1 or margin < 0.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha}")
    if confidence is None:
        confidence = 1.0 - alpha
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    if not 0.0 <= margin < 10.0:
        raise ValueError(f"margin must be a fraction in [0, 10), got {margin}")
    groups = group_observations(observations)
    envs = _environments(sorted({k[3] for k in groups}), environments, baseline)
    rank = {name: i for i, name in enumerate(envs)}
    rank[baseline] = -1
    ordered: list[GroupKey] = sorted(groups, key=lambda k: (k[0], k[1], k[2], rank.get(k[3], 10**9), k[3]))
    signed = frozenset(signed) | registry_signed({k[0] for k in groups})
    zero = registry_signed({k[0] for k in groups}, zero=True)
    summaries = [replace(s, cv=None) if (s.benchmark, s.metric) in signed - zero else s
                 for s in summaries_of(ordered, groups, confidence)]  # a CV needs a ratio
    # scale: none for a metric that can be negative (stats.describe: none where one is)
    by_key = {(s.benchmark, s.params, s.metric, s.environment): s
              for s in summaries if s.group == GROUP_ALL}
    values = {k: g.array(GROUP_ALL) for k, g in groups.items()}
    checks = {**declared_checks({k[0] for k in groups}),
              **{(b, m): None if r is None else float(r)
                 for b, (m, r) in (checks or {}).items()}}
    check_metrics = frozenset(set(checks)
                              | {(k[0], k[2]) for k, g in groups.items()
                                 if g.unit in CHECK_UNITS and registered(k[0])})
    stub = Analysis(summaries=summaries, comparisons=[], findings=[], baseline=baseline,
                    environments=envs, alpha=alpha, confidence=confidence, margin=margin,
                    check_metrics=check_metrics)
    plan = plan_of(stub, declared_pairs({k[:3] for k in groups}, pairs))
    comparisons, missing = comparisons_of(ordered, by_key, values, baseline, alpha, margin, plan,
                                          intervals, method, signed)
    findings = apply_rules(envs, summaries, comparisons)
    findings += baseline_findings(baseline, any(k[3] == baseline for k in groups), missing)
    findings.sort(key=lambda f: 0 if f.level == "warn" else 1)
    return Analysis(summaries=summaries, comparisons=comparisons, findings=findings,
                    baseline=baseline, environments=envs, alpha=alpha, confidence=confidence,
                    margin=margin, checks=check_results(stub, checks),
                    check_metrics=check_metrics, signed_metrics=signed, zero_metrics=zero)
