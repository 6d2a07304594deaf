"""Metric families: one quantity over a parameter is one curve, not many rows.

A benchmark that sweeps a parameter (the OSU benchmarks' message size) reports one metric per
point — ``lat_8``, ``lat_1024``, ``avg_1048576`` — and a study runs one benchmark at several
values of one parameter (``ranks=2``, ``ranks=4``: seed 004's node counts); the analysis
compares every point one by one.  This module groups them back into :class:`Family` records
(benchmark, shared params, quantity → points in numeric order), marks each benchmark's *primary* family (the quantity a reader asks about) and
*secondary* ones (``min``/``max`` beside an average, verification counts such as ``iterations``
or ``residual``), and summarises each family against the baseline in one
:class:`FamilySummary`: the geometric mean of the per-point ratios with an interval, their
range, an overhead, a verdict and what limits trust in it.  :func:`headline` picks the primary
family of every (benchmark, params) and environment: the first screen of a report.

Numbers sort as numbers everywhere (:func:`natural_key`): ``lat_128`` before ``lat_1024``.

Pure computation on an :class:`~vhpc.analysis.Analysis`; the benchmark registry (a room to the
left) is read only for the declared order of metrics.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Iterable

from vhpc.analysis.compare import overhead_pct, verdict_of
from vhpc.core import stats
from vhpc.analysis.results import (
    CV_THRESHOLD, INCONCLUSIVE, INSUFFICIENT, MIN_SAMPLES, Analysis, Comparison,
)

__all__ = [
    "natural_key", "split_metric", "Family", "FamilySummary", "families", "summarise_family",
    "family_summaries", "headline", "SHARED_CPU_KINDS", "fmt_size", "sorted_keys", "SIZE",
]

#: finding kinds that say ranks or vCPUs of different nodes or guests share a host CPU
SHARED_CPU_KINDS = ("shared-cpus", "shared-cpu", "contention")

#: a metric name that carries the point of a sweep: ``<quantity>_<integer>``
_SIZED = re.compile(r"(.+)_(\d+)")
_CHUNK = re.compile(r"(\d+(?:\.\d+)?)")
#: quantities that are spread statistics beside a central one (folded when a central exists)
_SPREAD = re.compile(r"(^|_)(min|max)$")
#: units of counts and verification figures rather than performance (folded)
_SECONDARY_UNITS = ("count", "1", "")


def natural_key(text: str) -> tuple:
    """Sort key that orders the numbers inside ``text`` numerically: ``"lat_128"`` <
    ``"lat_1024"``, ``"ranks=2"`` < ``"ranks=16"``.  Text chunks compare as text (case kept),
    numeric chunks as floats; a key is a tuple of (0, text) / (1, number) pairs, so keys of any
    two strings compare without TypeError."""
    out = []
    for i, part in enumerate(_CHUNK.split(text)):
        if i % 2:
            out.append((1, float(part)))
        elif part:
            out.append((0, part))
    return tuple(out)


def split_metric(name: str) -> tuple[str, int | None]:
    """(quantity, point) of a metric name: ``"lat_1024"`` → ``("lat", 1024)``,
    ``"bw_avg_8"`` → ``("bw_avg", 8)``, ``"mflops"`` → ``("mflops", None)``."""
    m = _SIZED.fullmatch(name)
    if m:
        return m.group(1), int(m.group(2))
    return name, None


def sorted_keys(keys) -> list[tuple[str, str, str]]:
    """(benchmark, params, metric) keys in report order: benchmark, then params and metric with
    :func:`natural_key` (so message sizes and rank counts ascend numerically)."""
    return sorted(keys, key=lambda k: (k[0], natural_key(k[1]), natural_key(k[2])))


def fmt_size(size: int | float | None) -> str:
    """A message size in bytes as text with a binary prefix: 8 → "8 B", 1024 → "1 KiB",
    1048576 → "1 MiB", 1536 → "1.5 KiB"; "—" for None."""
    if size is None:
        return "—"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(size) >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


@dataclass(frozen=True)
class Family:
    """One quantity of one benchmark over its points.

    ``points``: (x, params, metric name) in ascending x.  For a sweep over message size
    (``lat_<size>``) x is the size in bytes and every point has the family's ``params``; for a
    sweep over a numeric benchmark parameter (``ranks``, ``nodes``, ``threads``: the same
    benchmark run with only that parameter changing) x is the parameter's value, each point
    has its own parameter string and ``params`` holds the ones they share; for a scalar metric
    (one point) x is None.  ``parameter``: what x is — ``"message size"``, the parameter's
    name, or "" for a scalar.  ``unit`` and ``higher_is_better`` are the metric's.
    ``primary``: the quantity a reader asks about first (the benchmark's first declared metric
    present, else the first in report order); ``secondary``: a spread statistic beside a
    central one (``min``/``max`` beside ``avg``, ``bw_max`` beside ``bw_avg``) or a
    count/verification figure (unit ``count`` or ``1``); ``check``: a check figure
    (:meth:`~vhpc.analysis.Analysis.is_check`: energy, residual, verification count), shown
    as a check, never primary and never compared.
    """

    benchmark: str
    params: str
    quantity: str
    unit: str
    higher_is_better: bool
    points: tuple[tuple[int | float | None, str, str], ...]
    primary: bool = False
    secondary: bool = False
    parameter: str = ""
    check: bool = False

    @property
    def sweep(self) -> bool:
        """True when the family has more than one point (a curve)."""
        return len(self.points) > 1

    @property
    def by_size(self) -> bool:
        """True for a sweep over message size."""
        return self.parameter == SIZE

    @property
    def metrics(self) -> list[str]:
        """Metric names in point order."""
        return [m for _, _, m in self.points]

    @property
    def keys(self) -> list[tuple[str, str, str]]:
        """(benchmark, params, metric) of every point, in point order."""
        return [(self.benchmark, p, m) for _, p, m in self.points]

    @property
    def xs(self) -> list[int | float | None]:
        """Point values in ascending order (bytes for a size sweep)."""
        return [x for x, _, _ in self.points]

    @property
    def label(self) -> str:
        """"benchmark[params]" or "benchmark" (params: the ones all points share)."""
        return f"{self.benchmark}[{self.params}]" if self.params else self.benchmark

    def fmt_x(self, value: int | float | None) -> str:
        """One point's value as text: a size with its binary prefix ("4 KiB"), else the
        number ("16"); "—" for None."""
        if value is None:
            return "—"
        return fmt_size(value) if self.by_size else f"{value:g}"


#: :attr:`Family.parameter` of a sweep over message size
SIZE = "message size"


def _declared_order(benchmark: str) -> list[str]:
    """Quantities as the benchmark declares its metrics (``lat_<size>`` → ``lat``); [] when the
    benchmark is not registered (a custom command)."""
    try:
        from vhpc import benchmarks
    except ImportError:  # pragma: no cover - the registry is part of the package
        return []
    b = benchmarks.REGISTRY.get(benchmark)
    if b is None:
        return []
    return [m.name.removesuffix("_<size>") for m in b.metrics]


def _params_dict(params: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in params.split(",") if "=" in kv)


def _number(v: str) -> int | float | None:
    try:
        f = float(v)
    except ValueError:
        return None
    return int(f) if f.is_integer() else f


def families(analysis: Analysis) -> list[Family]:
    """Every metric of ``analysis`` grouped into families, in report order: benchmark, params
    (numeric-aware), then the primary family, the other central ones, the secondary ones; each
    group in the benchmark's declared metric order, then :func:`natural_key` of the quantity.

    Two steps: metrics ``<quantity>_<size>`` of one (benchmark, params) form a size sweep;
    then one-point families of one benchmark and quantity whose parameter strings differ in
    exactly one parameter, numeric in all of them (``ranks=2`` / ``ranks=4`` / ``ranks=8``),
    form a sweep over that parameter (at least 2 points)."""
    groups: dict[tuple[str, str, str], list[tuple[int | None, str, str]]] = {}
    meta: dict[tuple[str, str, str], tuple[str, bool]] = {}
    for bench, params, metric in analysis.keys():
        q, x = split_metric(metric)
        groups.setdefault((bench, params, q), []).append((x, params, metric))
        if (bench, params, q) not in meta:
            s = next((s for e in analysis.environment_order()
                      if (s := analysis.summary(bench, params, metric, e)) is not None), None)
            meta[(bench, params, q)] = (s.unit, s.higher_is_better) if s else ("", False)
    by_bench: dict[tuple[str, str], list[str]] = {}
    for bench, params, q in groups:
        by_bench.setdefault((bench, params), []).append(q)
    out: list[Family] = []
    for (bench, params) in sorted(by_bench, key=lambda bp: (bp[0], natural_key(bp[1]))):
        qs = by_bench[(bench, params)]
        declared = _declared_order(bench)
        qs.sort(key=lambda q: (declared.index(q) if q in declared else len(declared),
                               natural_key(q)))
        central = [q for q in qs if not _SPREAD.search(q)]
        fams = []
        for q in qs:
            unit, hib = meta[(bench, params, q)]
            pts = groups[(bench, params, q)]
            pts.sort(key=lambda p: (p[0] is not None, p[0] if p[0] is not None else 0,
                                    natural_key(p[2])))
            check = all(analysis.is_check(bench, m) for _, _, m in pts)
            secondary = (check or unit in _SECONDARY_UNITS
                         or (bool(_SPREAD.search(q)) and bool(central)))
            fams.append(Family(bench, params, q, unit, hib, tuple(pts), secondary=secondary,
                               parameter=SIZE if len(pts) > 1 else "", check=check))
        first = next((f for f in fams if not f.secondary),
                     next((f for f in fams if not f.check), None))
        fams = [replace(f, primary=True, secondary=False) if f is first else f for f in fams]
        out.extend(sorted(fams, key=lambda f: (not f.primary, f.secondary, f.check)))  # stable
    return _merge_parameter_sweeps(out)


#: parameters tried first when several could be the swept one
SWEEP_PARAMS = ("nodes", "ranks", "threads", "pairs", "copies", "vms", "vcpus")


def _merge_parameter_sweeps(fams: list[Family]) -> list[Family]:
    """One-point families of one benchmark, quantity and metric whose parameter strings
    differ only in one numeric parameter → one sweep over it, placed where its first member
    was.  Members are partitioned by their other parameters (``op=barrier`` and
    ``op=allreduce`` stay apart); the parameter tried first is the first of
    :data:`SWEEP_PARAMS` that varies, then the others in name order."""
    candidates: dict[tuple, list[Family]] = {}
    for f in fams:
        if len(f.points) == 1:
            candidates.setdefault((f.benchmark, f.quantity, f.metrics[0], f.unit), []).append(f)
    merged: dict[int, Family] = {}   # id(first member) → sweep
    gone: set[int] = set()
    for members in candidates.values():
        if len(members) < 2:
            continue
        dicts = [_params_dict(f.params) for f in members]
        names = sorted(set().union(*dicts), key=lambda n: (
            SWEEP_PARAMS.index(n) if n in SWEEP_PARAMS else len(SWEEP_PARAMS), n))
        for name in names:
            values = [_number(d.get(name, "")) for d in dicts]
            if any(v is None for v in values) or len(set(values)) < 2:
                continue
            parts: dict[tuple, list[int]] = {}
            for i, d in enumerate(dicts):
                parts.setdefault(tuple(sorted((k, v) for k, v in d.items() if k != name)), []).append(i)
            groups = [ix for ix in parts.values()
                      if len(ix) > 1 and len({values[i] for i in ix}) == len(ix)]
            if not groups:
                continue
            for ix in groups:
                ix.sort(key=lambda i: values[i])
                head = members[ix[0]]
                sweep = Family(head.benchmark,
                               ",".join(f"{k}={v}" for k, v in sorted(dicts[ix[0]].items()) if k != name),
                               head.quantity, head.unit, head.higher_is_better,
                               tuple((values[i], members[i].params, members[i].metrics[0]) for i in ix),
                               primary=any(members[i].primary for i in ix),
                               secondary=all(members[i].secondary for i in ix), parameter=name,
                               check=head.check)
                first = min(ix, key=lambda i: fams.index(members[i]))
                merged[id(members[first])] = sweep
                gone.update(id(members[i]) for i in ix if i != first)
            break
    return [merged.get(id(f), f) for f in fams if id(f) not in gone]


@dataclass(frozen=True)
class FamilySummary:
    """One environment against the baseline over one :class:`Family`.

    * ``ratio``: geometric mean over the points of the per-point ratio env / baseline (each the
      :class:`~vhpc.analysis.Comparison` ratio of geometric means); for a one-point family the ratio.
    * ``low``/``high``: geometric means of the per-point interval bounds, every one at one
      level, the highest of the points' (:attr:`~vhpc.analysis.Comparison.level`: the sweep's
      Bonferroni level 1 − α/m unless Holm calls every point different), a point shown at
      another level moved to it (:func:`bounds_at`); ``level_note`` names that level.  On the
      log scale this is the mean of the per-point intervals, whose
      half-width is the mean of the per-point half-widths; as the standard deviation of a mean
      of correlated terms is at most the mean of their standard deviations (Minkowski), the
      interval is conservative whatever the correlation between sizes (all sizes come from
      the same trials).  None when some point has no bounded interval.
    * ``ratio_min``/``ratio_max`` and ``x_min``/``x_max``: the smallest and largest per-point
      ratio and the point (bytes, or the parameter's value) where each occurs.
    * ``overhead_pct``/``overhead_low``/``overhead_high``: ``ratio``/``high``/``low`` mapped by
      :func:`vhpc.analysis.compare.overhead_pct` (positive: the environment is worse in the
      metric's direction); for higher-is-better metrics the bounds swap.
    * ``verdict``: for a sweep, read off (low, high) as every verdict
      (:func:`vhpc.analysis.compare.verdict_of`: slower / faster / equivalent within the
      analysis' margin / inconclusive, also when the interval is missing although n ≥ 2),
      ``insufficient data`` when some side has fewer than 2 valid samples; for a one-point
      family the :class:`~vhpc.analysis.Comparison`'s own verdict, so the headline row and the
      per-metric row of one metric never disagree.
    * ``counts``: per-point verdicts (adjusted within the sweep, :class:`~vhpc.analysis.Comparison`),
      verdict → number of points.  ``n_points``: points compared; ``n_min``: the smallest
      valid sample count of either side over the points; ``cv_max``: the largest coefficient
      of variation of either side (None: unknown).
    * ``trust``: short notes on what limits trust (TCG emulation, n < 3, shared CPUs, noise).
    """

    family: Family
    environment: str
    ratio: float | None
    low: float | None
    high: float | None
    ratio_min: float | None
    ratio_max: float | None
    x_min: int | float | None
    x_max: int | float | None
    overhead_pct: float | None
    overhead_low: float | None
    overhead_high: float | None
    verdict: str
    counts: dict[str, int] = field(default_factory=dict)
    n_points: int = 0
    n_min: int = 0
    cv_max: float | None = None
    emulated: bool = False
    trust: tuple[str, ...] = ()
    #: the level of the interval when it is not 1 − α (the one level of its points' bounds,
    #: :func:`bounds_at`): "at 99.17 %"
    level_note: str = ""
    #: a one-point family's runs per side that would likely decide an ``inconclusive`` verdict
    #: (:attr:`~vhpc.analysis.Comparison.runs_needed`)
    runs_needed: int | None = None
    #: a signed metric's difference of means env − baseline and its interval, in the metric's
    #: unit (:attr:`~vhpc.analysis.Comparison.difference`); None for a ratio
    difference: tuple[float, float | None, float | None] | None = None
    #: how its points' ratio intervals were computed, when they share one
    #: (:attr:`~vhpc.analysis.Comparison.ratio_ci_method`: ``hodges-lehmann`` under
    #: ``--method rank``); "" when they differ or there is no ratio
    method: str = ""


def _geomean(xs: list[float]) -> float:
    """Geometric mean of ``xs`` (≥ 0); 0 when one of them is 0."""
    if any(x == 0 for x in xs):
        return 0.0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _shared_cpu_scopes(analysis: Analysis) -> list[str]:
    return [f.scope for f in analysis.findings if f.kind in SHARED_CPU_KINDS]


def summarise_family(analysis: Analysis, fam: Family, env: str,
                     shared: Iterable[tuple[str, str, str]] = ()) -> FamilySummary | None:
    """:class:`FamilySummary` of ``env`` over ``fam`` (see there for every field); None when
    ``env`` has no comparison with a ratio at any point of the family.  ``shared``:
    (environment, benchmark, params) whose trials put ranks of different nodes or guests on
    one host CPU (read from the trials by the caller); a point of ``env`` or of the baseline
    among them, or a finding of a :data:`SHARED_CPU_KINDS` kind, adds the trust note
    "CPUs shared between nodes/guests: contention, not scaling"."""
    comps: list[tuple[int | float | None, Comparison]] = []
    for x, params, metric in fam.points:
        c = analysis.comparison(fam.benchmark, params, metric, env)
        # a ratio that underflowed to 0 (1e-300 against 1e300) is still a row: its overhead
        # prints as a factor beyond the float range (numfmt), never lost as "no comparison"
        if c is not None and c.ratio is not None and c.ratio >= 0:
            comps.append((x, c))
    if not comps:
        return _signed_scalar(analysis, fam, env)
    ratios = [c.ratio for _, c in comps]
    geomean_ratio = _geomean(ratios)
    # one level for the summary: the widest of its points' (Bonferroni's 1 − α/m of the sweep
    # where a point is not called different; Holm's lower level only where every point is)
    level = max(c.level for _, c in comps)
    bounds = [bounds_at(c, level) for _, c in comps]
    if all(lo is not None and hi is not None and lo > 0 and hi > 0 for lo, hi in bounds):
        low, high = _geomean([lo for lo, _ in bounds]), _geomean([hi for _, hi in bounds])
    else:
        low = high = None
    i_min = min(range(len(comps)), key=lambda i: ratios[i])
    i_max = max(range(len(comps)), key=lambda i: ratios[i])
    n_min = min(min(c.n, c.n_baseline) for _, c in comps)
    if len(comps) == 1:  # a scalar: the row of the per-metric table, one verdict for both
        verdict = comps[0][1].verdict
    elif n_min < 2:
        verdict = INSUFFICIENT
    else:  # read off the interval shown, as every verdict
        verdict = verdict_of(low, high, fam.higher_is_better, analysis.margin)
        if verdict == INSUFFICIENT:
            verdict = INCONCLUSIVE
    counts: dict[str, int] = {}
    for _, c in comps:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    overhead = overhead_pct(geomean_ratio, fam.higher_is_better)
    overhead_bounds = (overhead_pct(low, fam.higher_is_better), overhead_pct(high, fam.higher_is_better))
    o_lo, o_hi = (overhead_bounds[1], overhead_bounds[0]) if fam.higher_is_better else overhead_bounds
    cvs = []
    for _, params, metric in fam.points:
        for e in (env, analysis.baseline):
            s = analysis.summary(fam.benchmark, params, metric, e)
            if s is not None and s.cv is not None:
                cvs.append(s.cv)
    cv_max = max(cvs) if cvs else None
    info = analysis.environments.get(env)
    base_info = analysis.environments.get(analysis.baseline)
    emulated = bool(info and info.emulated)
    trust = []
    if emulated or (base_info is not None and base_info.emulated):
        trust.append("TCG emulation, not KVM")
    if n_min < MIN_SAMPLES:
        trust.append(f"n = {n_min} < {MIN_SAMPLES}")
    scopes = [s for s in _shared_cpu_scopes(analysis)
              if s == "campaign" or s == env or s.startswith(f"{env} ") or s == analysis.baseline
              or s.startswith(f"{analysis.baseline} ")]
    shared = set(shared)
    if scopes or any((e, fam.benchmark, p) in shared
                     for _, p, _ in fam.points for e in (env, analysis.baseline)):
        trust.append("CPUs shared between nodes/guests: contention, not scaling")
    if cv_max is not None and cv_max > CV_THRESHOLD:
        trust.append(f"noisy (CV up to {cv_max * 100:.0f} %)")
    if any(c.diagnostic for _, c in comps):  # the log-normal model's check failed
        trust.append("not log-normal: try --method rank"
                     if not any(c.ratio_ci_method == "hodges-lehmann" for _, c in comps)
                     else "not log-normal (ranks used)")
    note = "" if math.isclose(level, 1.0 - analysis.alpha, rel_tol=0, abs_tol=1e-12) \
        else f"at {level * 100:.4g} %"
    methods = {c.ratio_ci_method for _, c in comps}
    return FamilySummary(fam, env, geomean_ratio, low, high, ratios[i_min], ratios[i_max],
                         comps[i_min][0], comps[i_max][0], overhead, o_lo, o_hi, verdict, counts,
                         len(comps), n_min, cv_max, emulated, tuple(trust), note,
                         comps[0][1].runs_needed if len(comps) == 1 else None,
                         method=methods.pop() if len(methods) == 1 else "")


def bounds_at(comparison: Comparison, level: float) -> tuple[float | None, float | None]:
    """``comparison``'s ratio interval at ``level``, so that a sweep's summary combines bounds at one
    level: its own where it is shown there; a Welch interval on ln values moved to ``level``
    (its half-width on the log scale is t_{level, df} · se, so it scales by the ratio of the
    two t quantiles at ``comparison.df``; unchanged without variation); (None, None) for an interval
    that cannot be moved without the samples (ranks)."""
    lo, hi = comparison.ratio_ci
    if lo is None or hi is None or math.isclose(comparison.level, level, rel_tol=0, abs_tol=1e-12):
        return lo, hi
    if comparison.ratio_ci_method != stats.LOG_WELCH or lo <= 0:
        return None, None
    if comparison.df is None:
        return lo, hi
    centre, half = (math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / 2
    half *= stats.t_quantile(level, comparison.df) / stats.t_quantile(comparison.level, comparison.df)
    return math.exp(centre - half), math.exp(centre + half)


def _signed_scalar(analysis: Analysis, fam: Family, env: str) -> FamilySummary | None:
    """The one-point family of a signed metric (compared by the difference of means, no
    ratio: :mod:`vhpc.analysis.compare`): its comparison's overhead, interval and verdict."""
    if len(fam.points) != 1:
        return None
    x, params, metric = fam.points[0]
    c = analysis.comparison(fam.benchmark, params, metric, env)
    if c is None or c.ratio is not None or c.overhead_pct is None:
        return None
    n = min(c.n, c.n_baseline)
    info = analysis.environments.get(env)
    level = "" if math.isclose(c.level, 1.0 - analysis.alpha, rel_tol=0, abs_tol=1e-12) \
        else f"at {c.level * 100:.4g} %"
    return FamilySummary(fam, env, None, None, None, None, None, x, x, c.overhead_pct,
                         c.overhead_ci[0], c.overhead_ci[1], c.verdict, {c.verdict: 1}, 1, n,
                         None, bool(info and info.emulated),
                         # declared signed (no note) or found ≤ 0 (the note says so)
                         (_no_log_scale(analysis, fam.benchmark, metric, c.note),), level,
                         c.runs_needed,
                         (c.difference, *c.difference_ci) if c.difference is not None else None)


def _no_log_scale(analysis: Analysis, benchmark: str, metric: str, note: str) -> str:
    """Why a metric is compared by the difference of means, in its own plain name: values
    ≤ 0 seen (``note``, undeclared), a metric that can be 0 (never negative), or a signed
    metric (its values can be negative)."""
    if note:
        return "difference of means: values ≤ 0"
    if (benchmark, metric) in analysis.zero_metrics:
        return "difference of means: a metric that can be 0"
    return "difference of means: a signed metric"


def family_summaries(analysis: Analysis, fams: list[Family] | None = None,
                     shared: Iterable[tuple[str, str, str]] = ()) -> list[FamilySummary]:
    """:func:`summarise_family` of every family (default :func:`families`) and non-baseline
    environment that has data, in family then environment order (``shared``: see there)."""
    fams = families(analysis) if fams is None else fams
    shared = set(shared)
    out = []
    for fam in fams:
        for env in analysis.others():
            fs = summarise_family(analysis, fam, env, shared)
            if fs is not None:
                out.append(fs)
    return out


def headline(analysis: Analysis, fams: list[Family] | None = None,
             shared: Iterable[tuple[str, str, str]] = ()) -> list[FamilySummary]:
    """The answer first: the primary family of every (benchmark, params) against the baseline,
    one :class:`FamilySummary` per non-baseline environment, in report order."""
    fams = families(analysis) if fams is None else fams
    return family_summaries(analysis, [f for f in fams if f.primary], shared)
