"""Report room: presents an :class:`~vhpc.analysis.Analysis` — terminal table
(:mod:`.terminal`), figures (:mod:`.figures`), self-contained HTML (:mod:`.html`) and CSV/JSON
export (:mod:`.export`, which also holds the one :class:`~vhpc.report.export.Exporter` protocol of
every output format).  Imports only :mod:`vhpc.core.metrics`, :mod:`vhpc.core.records`, :mod:`vhpc.core.stats`
(method names) and :mod:`vhpc.analysis`; never runs a benchmark.

This module holds the text formatters, the summary-table rows (:func:`comparison_rows`, one
row per metric and environment) and the grouping of findings by kind (:func:`finding_groups`)
shared by the terminal table and the HTML report, so both show the same numbers the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vhpc.core import numfmt, stats
from vhpc.core.intervals import MIN_INTERVAL_RUNS, TOO_FEW, WIDE_FACTOR, too_few_text
from vhpc.analysis import Analysis, Comparison, Summary
from vhpc.analysis.results import Finding
from vhpc.analysis.families import Family, FamilySummary, families, fmt_size, sorted_keys
from vhpc.analysis.findings import runs_text
from vhpc.report.values import (WIDER, env_label, family_centre, fmt_centre, fmt_value,
                                interval_hidden)

__all__ = [
    "fmt_num",
    "fmt_mean_ci",
    "fmt_gmean_ci",
    "fmt_ratio",
    "fmt_overhead",
    "fmt_pct",
    "fmt_pct_ci",
    "fmt_p",
    "direction_mark",
    "params_label",
    "env_header",
    "env_label",
    "TCG_MARK",
    "METHOD_TAG",
    "ComparisonRow",
    "comparison_rows",
    "fmt_points",
    "fmt_family_ratio",
    "fmt_family_overhead",
    "fmt_family_level",
    "fmt_family_range",
    "fmt_family_verdict",
    "fmt_family_counts",
    "family_metric_label",
    "metric_label",
    "FindingGroup",
    "finding_groups",
    "CheckRow",
    "check_rows",
    "fmt_level",
    "HeadlineRow",
    "headline_rows",
    "MeasuredRow",
    "measured_rows",
    "common_notes",
    "fmt_halfwidth",
    "KEEP_APART",
    "check_status",
    "WIDE_FACTOR",
    "MIN_INTERVAL_RUNS",
    "TOO_FEW",
    "interval_hidden",
    "too_few_text",
    "fmt_value",
    "family_centre",
    "fmt_centre",
    "WIDER",
]


#: marker appended to the name of an environment whose results come from TCG emulation
TCG_MARK = "(TCG emulation)"


def fmt_num(value: float | None, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits, "—" for None/NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}"


def fmt_mean_ci(summary: Summary | None) -> str:
    """"mean ± CI half-width" of a summary (metric unit), "—" when absent, "n/a" when n = 0."""
    if summary is None:
        return "—"
    if summary.mean is None:
        return f"n/a (0 valid, {summary.n_invalid} invalid)"
    hw = summary.ci_halfwidth
    text = fmt_num(summary.mean) if hw is None else f"{fmt_num(summary.mean)} ± {fmt_num(hw, 2)}"
    return f"{text} (n={summary.n})"


def fmt_gmean_ci(summary: Summary | None, geometric: bool = True, interval: bool = True) -> str:
    """"geometric mean [interval] (n=…)" of a summary (metric unit): the centre whose ratio the
    comparison shows, with its Student-t interval on the ln scale (asymmetric); "—" when
    absent, "n/a" when n = 0; :func:`fmt_mean_ci` prefixed "mean" when a value is ≤ 0 or
    ``geometric`` is False (no log scale on a side: the ratio is then of arithmetic means);
    ``interval=False``: the centre and n only ("2.157 (n=3)", the terminal's narrow cell)."""
    if summary is None or summary.mean is None:
        return fmt_mean_ci(summary)
    if summary.gmean is None or not geometric:
        return f"mean {fmt_mean_ci(summary)}"
    if (summary.gmean_low is None or summary.gmean_high is None or not interval
            or interval_hidden(summary.n, summary.gmean_low, summary.gmean_high, "")):
        return f"{fmt_num(summary.gmean)} (n={summary.n})"  # n < 3 or wider than 1000 times: no bounds
    return f"{fmt_num(summary.gmean)} [{fmt_num(summary.gmean_low)}, {fmt_num(summary.gmean_high)}] (n={summary.n})"


#: short tag appended to a ratio interval that is not Welch's on ln values (the captions say
#: why: values ≤ 0 have no log scale)
METHOD_TAG = {stats.FIELLER: " (Fieller)", stats.RANK: " (ranks)"}


def fmt_level(comparison: Comparison, analysis: Analysis | None = None) -> str:
    """" at 99.6 %" when the comparison's interval is at another level than 1 − α (its Holm
    family's level, :attr:`~vhpc.analysis.Comparison.level`), else ""."""
    alpha = analysis.alpha if analysis is not None else 0.05
    if math.isclose(comparison.level, 1.0 - alpha, rel_tol=0, abs_tol=1e-12):
        return ""
    return f" at {comparison.level * 100:.4g} %"


def fmt_ratio(comparison: Comparison | None, analysis: Analysis | None = None) -> str:
    """"ratio [low, high]" (dimensionless: the ratio of geometric means and the interval the
    verdict is read off), followed by the level when it is not 1 − α (:func:`fmt_level`),
    "[unbounded]" for a Fieller set without bounds, and a tag after an interval from another
    method (:data:`METHOD_TAG`)."""
    if comparison is not None and comparison.ratio_ci_method == stats.DIFFERENCE and comparison.difference is not None:
        # a signed metric: the difference of means, in its unit
        return (f"{numfmt.difference_ci(comparison.difference, *comparison.difference_ci, comparison.unit)}"
                f"{fmt_level(comparison, analysis)} (difference)")
    if comparison is None or comparison.ratio is None:
        return "—"
    lo, hi = comparison.ratio_ci
    if lo is None or hi is None:
        if comparison.ratio_ci_method == stats.RANK:  # ranks give no interval from so few runs
            return f"{numfmt.ratio(comparison.ratio)} [too few runs for ranks]"
        if comparison.n >= 2 and comparison.n_baseline >= 2:
            return f"{numfmt.ratio(comparison.ratio)} [unbounded]"
        return numfmt.ratio(comparison.ratio)
    if interval_hidden(min(comparison.n, comparison.n_baseline), lo, hi, comparison.verdict):
        return f"{numfmt.ratio(comparison.ratio)}, {too_few_text(comparison.runs_needed)}"
    return (f"{numfmt.ratio_ci(comparison.ratio, lo, hi, comparison.margin)}{fmt_level(comparison, analysis)}"
            f"{METHOD_TAG.get(comparison.ratio_ci_method, '')}")


#: an overhead as text ("+12.3 %", "×253" from 10 times on): :func:`vhpc.core.numfmt.pct`
fmt_pct = numfmt.pct
#: an overhead with its interval in one form: :func:`vhpc.core.numfmt.pct_ci`
fmt_pct_ci = numfmt.pct_ci


def fmt_overhead(comparison: Comparison | None) -> str:
    """The overhead alone, in the form its interval takes (:func:`vhpc.core.numfmt.overhead`:
    a factor "×6.85" wherever the headline writes "×6.85 [÷1.37, ×64.4]", never "+584.7 %"
    for the same number); "—" when unknown."""
    if comparison is None or comparison.overhead_pct is None:
        return "—"
    if comparison.ratio is None or comparison.ratio <= 0:  # a ratio of arithmetic means of values <= 0
        return fmt_pct(comparison.overhead_pct)
    lo, hi = comparison.ratio_ci
    if interval_hidden(min(comparison.n, comparison.n_baseline), lo, hi, comparison.verdict):
        lo = hi = None  # no interval shown: the form of the value alone, as the headline's
    return numfmt.overhead(comparison.ratio, lo, hi, comparison.higher_is_better).split(" [")[0]


def p_adjustment(analysis: Analysis) -> str:
    """How the comparisons' p column is adjusted: ``Bonferroni`` under ``--intervals
    simultaneous`` (every family's p multiplied by its m), else ``Holm`` (step-down within each
    family); a comparison's :attr:`~vhpc.analysis.Comparison.level_kind` says which."""
    return "Bonferroni" if any(c.level_kind == "simultaneous"
                               for c in analysis.comparisons) else "Holm"


def fmt_p(comparison: Comparison | None) -> str:
    """Adjusted p-value (Holm's, or Bonferroni's: :func:`p_adjustment`), "—" when there is
    none."""
    if comparison is None or comparison.p_adjusted is None:
        return "—"
    p = comparison.p_adjusted
    if p < 1e-4:
        return f"{p:.1e}"
    return f"{p:.4f}"


def direction_mark(higher_is_better: bool) -> str:
    """"↑" (higher is better) or "↓" (lower is better)."""
    return "↑" if higher_is_better else "↓"


def params_label(benchmark: str, params: str) -> str:
    """"benchmark[params]" or "benchmark" when there are no parameters."""
    return f"{benchmark}[{params}]" if params else benchmark


def env_header(analysis: Analysis, env: str) -> str:
    """Environment label (:func:`env_label`), with :data:`TCG_MARK` when it is emulated."""
    info = analysis.environments.get(env)
    if info is not None and info.emulated:
        return f"{env_label(analysis, env)} {TCG_MARK}"
    return env_label(analysis, env)


@dataclass(frozen=True)
class ComparisonRow:
    """One row of the summary table, as text: (benchmark, params, metric) × one non-baseline
    environment.  ``first``: the first row of its (benchmark, params, metric), so renderers can
    leave repeated benchmark/metric/baseline cells blank; ``verdict`` is the raw verdict (None
    when the baseline has no data), ``note`` a remark on it (the inverse of another metric,
    Fieller's interval for values ≤ 0); ``method`` the ratio interval's method."""

    bench: str
    metric: str
    base: str
    environment: str
    env_label: str
    emulated: bool
    mean: str
    ratio: str
    method: str
    overhead: str
    p: str
    verdict: str | None
    note: str
    first: bool


def comparison_rows(analysis: Analysis, keys=None) -> list[ComparisonRow]:
    """The summary table shared by the terminal and the HTML report: one row per (benchmark,
    params, metric, non-baseline environment that has data), in report order (numbers inside
    params and metric names ascending numerically: ``lat_128`` before ``lat_1024``); a metric
    only the baseline has gets one row with empty environment cells.  ``base`` and ``mean``
    are the centres the ratio divides: geometric means with their intervals
    (:func:`fmt_gmean_ci`), so ratio = mean / baseline mean as printed; arithmetic means ±
    half-width (:func:`fmt_mean_ci`) in a campaign of one environment, which has no ratio.  keys: restrict to these
    (benchmark, params, metric) keys (default: all); check figures are never rows here
    (:func:`check_rows`)."""
    base, others = analysis.baseline, analysis.others()
    rows: list[ComparisonRow] = []
    for bench, params, metric in sorted_keys(analysis.keys() if keys is None else keys):
        if analysis.is_check(bench, metric):
            continue
        sums = {e: analysis.summary(bench, params, metric, e) for e in [base, *others]}
        s0 = next((s for s in sums.values() if s is not None), None)
        unit, hib = (s0.unit, s0.higher_is_better) if s0 else ("", False)
        envs = [e for e in others
                if sums[e] is not None or analysis.comparison(bench, params, metric, e)]
        # the centres the ratios divide: geometric means, unless the baseline has a value
        # <= 0 (every ratio of this metric is then of arithmetic means)
        geo = sums[base] is None or sums[base].gmean is not None or sums[base].mean is None
        centre = (lambda s: fmt_gmean_ci(s, geo)) if others else fmt_mean_ci
        for i, env in enumerate(envs or [None]):
            c = analysis.comparison(bench, params, metric, env) if env else None
            info = analysis.environments.get(env) if env else None
            rows.append(ComparisonRow(
                bench=params_label(bench, params),
                metric=f"{metric_label(metric)} [{unit}] {direction_mark(hib)}",
                base=centre(sums[base]), environment=env or "",
                env_label=env_header(analysis, env) if env else "",
                emulated=bool(info and info.emulated), mean=centre(sums[env]) if env else "",
                ratio=fmt_ratio(c, analysis) if env else "", method=c.ratio_ci_method if c else "",
                overhead=fmt_overhead(c) if env else "", p=fmt_p(c) if env else "",
                verdict=c.verdict if c else None, note=c.note if c else "", first=i == 0))
    return rows


def metric_label(metric: str) -> str:
    """A metric's name as a reader sees it: a size sweep's point with its unit ("lat at 4 MiB"
    for ``lat_4194304``), any other name as it is."""
    from vhpc.analysis.families import split_metric

    q, x = split_metric(metric)
    return metric if x is None else f"{q} at {fmt_size(x)}"


def family_metric_label(fam: Family) -> str:
    """"lat [us] ↓" — the family's quantity, unit and direction."""
    return f"{fam.quantity} [{fam.unit}] {direction_mark(fam.higher_is_better)}"


def fmt_points(fam: Family) -> str:
    """The points of a family as text, ascending: "21 sizes, 0 B – 1 MiB" for a size sweep,
    "ranks 2 – 16 (4 points)" for a parameter sweep, "" for a scalar."""
    if not fam.sweep:
        return ""
    xs = [x for x in fam.xs if x is not None]
    if not xs:
        return ""
    if fam.by_size:
        return f"{len(xs)} sizes, {fmt_size(min(xs))} – {fmt_size(max(xs))}"
    return f"{fam.parameter} {min(xs):g} – {max(xs):g} ({len(xs)} points)"


def fmt_family_ratio(fs: FamilySummary, margin: float | None = None) -> str:
    """"1.234 [1.100, 1.380]" — the (geometric-mean) ratio with its interval (its level, when
    not 1 − α, is named beside the overhead: :func:`fmt_family_overhead`); the ratio alone
    when there is no interval; "—" when unknown.  With ``margin`` the bounds near the band get
    the digits that decide, as the overhead's (:func:`vhpc.core.numfmt.ratio_ci`)."""
    if fs.ratio is None:
        return "—"
    if interval_hidden(fs.n_min, fs.low, fs.high, fs.verdict):
        return numfmt.ratio(fs.ratio)
    return numfmt.ratio_ci(fs.ratio, fs.low, fs.high, margin)


def fmt_family_overhead(fs: FamilySummary, level: bool = True, margin: float | None = None) -> str:
    """"+12.3 % [+8.1, +16.0]" — the overhead in the metric's direction with its interval
    (:func:`vhpc.core.numfmt.overhead`: ×/÷ factors from 10 times on), and with ``level`` its
    level when it is not 1 − α ("at 98.33 %", the family's Holm level:
    :func:`fmt_family_level`); with ``margin`` the bounds near the band get the digits that
    decide (:func:`vhpc.core.numfmt.decisive`)."""
    if fs.overhead_pct is None:
        return "—"
    if fs.ratio is None and fs.difference is not None:
        # a signed metric: the difference of means in its unit (a percentage of a baseline
        # mean that may be ≤ 0 or near 0 reads backwards or explodes)
        text = numfmt.difference_ci(*fs.difference, fs.family.unit)
    elif fs.ratio is None:
        text = numfmt.pct_ci(fs.overhead_pct, fs.overhead_low, fs.overhead_high)
    elif interval_hidden(fs.n_min, fs.low, fs.high, fs.verdict):
        return numfmt.overhead(fs.ratio, None, None, fs.family.higher_is_better) + ", " + TOO_FEW
    elif fs.method == stats.RANK and (fs.low is None or fs.high is None):
        # ranks give no interval below their minimum runs a side (4 at 95 %): say it, with it
        at = fs.level_note.removeprefix("at ").removesuffix(" %")
        need = stats.rank_min_runs(float(at) / 100 if at else 0.95)
        return (numfmt.overhead(fs.ratio, None, None, fs.family.higher_is_better) + ", "
                + TOO_FEW + (f" by ranks (≥ {need} a side)" if need else " by ranks"))
    else:
        text = numfmt.overhead(fs.ratio, fs.low, fs.high, fs.family.higher_is_better, margin)
    return f"{text} {fmt_family_level(fs)}" if level and fmt_family_level(fs) else text


def fmt_family_level(fs: FamilySummary) -> str:
    """"at 98.33 %" when the family's interval is at another level than 1 − α and printed
    (not :func:`interval_hidden`), else ""."""
    if interval_hidden(fs.n_min, fs.low, fs.high, fs.verdict):
        return ""
    return fs.level_note if fs.level_note and fs.overhead_low is not None else ""


def fmt_family_range(fs: FamilySummary) -> str:
    """"0.980 (8 B) – 1.350 (1 MiB)": the smallest and largest per-point ratio of a sweep and
    the size where each occurs, in that order; "" for a one-point family."""
    if not fs.family.sweep or fs.ratio_min is None:
        return ""
    fam = fs.family
    at = (lambda x: fam.fmt_x(x)) if fam.by_size else (lambda x: f"{fam.parameter}={fam.fmt_x(x)}")
    return (f"{numfmt.ratio(fs.ratio_min)} ({at(fs.x_min)}) – "
            f"{numfmt.ratio(fs.ratio_max)} ({at(fs.x_max)})")


def fmt_family_counts(fs: FamilySummary) -> str:
    """The verdicts of a sweep's points (each adjusted within the sweep): "slower 15,
    inconclusive 4 of 19 sizes", "equivalent 19 of 19 sizes";
    for an inconclusive scalar the runs that would likely decide ("≈12 runs each to decide",
    :func:`vhpc.analysis.findings.runs_text`); else ""."""
    if not fs.family.sweep:
        if fs.verdict == "inconclusive":  # as the finding says it
            return runs_text(fs.runs_needed, fs.n_min)
        return ""
    parts = [f"{k} {v}" for k, v in sorted(fs.counts.items(), key=lambda kv: -kv[1])]
    what = "sizes" if fs.family.by_size else "points"
    return f"{', '.join(parts)} of {fs.n_points} {what}"


@dataclass(frozen=True)
class CheckRow:
    """One check figure of one environment, as text: "benchmark[params]", "etotal [unit]",
    the environment, its value, the baseline's, the relative difference, the tolerance and
    the status (pass / fail / n/a), the trials excluded."""

    bench: str
    metric: str
    environment: str
    value: str
    reference: str
    difference: str
    tolerance: str
    status: str
    excluded: int


def check_rows(analysis: Analysis) -> list[CheckRow]:
    """The check figures of ``analysis`` (:attr:`~vhpc.analysis.Analysis.checks`) as rows:
    shown as checks, never as metrics with a verdict."""
    return [CheckRow(
        params_label(c.benchmark, c.params), f"{c.metric} [{c.unit}]" if c.unit else c.metric,
        c.environment, fmt_num(c.value, 6), fmt_num(c.reference, 6),
        "—" if c.difference is None else f"{c.difference:.2g}",
        "none: shown, not compared" if c.rtol is None else f"{c.rtol:g} (relative)", c.status,
        c.excluded)
        for c in analysis.checks]


def fmt_family_verdict(fs: FamilySummary) -> str:
    """The family's verdict, for a sweep followed by :func:`fmt_family_counts` in
    parentheses: "slower (slower at 15 of 19 sizes)"."""
    counts = fmt_family_counts(fs)
    return f"{fs.verdict} ({counts})" if counts else fs.verdict


@dataclass(frozen=True)
class FindingGroup:
    """Findings of one level and kind, shown once with the advice they share.

    ``head``: the message up to its first colon ("high variation (coefficient of variation >
    5 %)"), or the whole message of a lone finding; ``findings``: the group's findings in the
    analysis' order (each keeps its scope, message and items)."""

    level: str
    head: str
    advice: str
    findings: tuple[Finding, ...]

    def detail(self, finding: Finding) -> str:
        """``finding``'s message after the group's head ("bandwidth_MBps (CV 10.1 %), ..."), or the
        whole message when it does not start with the head."""
        prefix = self.head + ":"
        return finding.message[len(prefix):].strip() if finding.message.startswith(prefix) else finding.message


def finding_groups(findings: list[Finding]) -> list[FindingGroup]:
    """``findings`` grouped by (level, kind; the message when a finding has no kind), in the
    order each group first occurs: the terminal prints one line per group and the HTML one
    item with the group's scopes beneath it, so ten "high variation" findings do not repeat
    their advice ten times."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.level, f.kind or f.message), []).append(f)
    out = []
    for (level, _), fs in groups.items():
        head = fs[0].message if len(fs) == 1 else fs[0].message.split(":")[0]
        out.append(FindingGroup(level, head, fs[0].advice, tuple(fs)))
    return out


def _has_check(benchmark: str) -> bool:
    """Whether ``benchmark`` verifies its answer (its own verification) or is checked against
    the baseline's figure (:attr:`~vhpc.benchmarks.base.Benchmark.check`); False for a custom
    command the registry does not know (its ``check:`` shows as a check-passed finding)."""
    try:
        from vhpc import benchmarks
    except ImportError:  # pragma: no cover - the registry is part of the package
        return False
    b = benchmarks.REGISTRY.get(benchmark)
    return b is not None and (b.check is not None or (b.verification or "none") != "none")


def check_status(analysis: Analysis, fam: Family, env: str) -> str:
    """The check of ``fam``'s benchmark in ``env`` as one short cell: "fail: N invalid" when
    samples of ``env`` were excluded (verification failed, or a check-failed finding names
    ``env / benchmark[params]``), "fail: FIGURE VALUE vs BASELINE (tolerance T)" when a check
    figure's median is off (:attr:`~vhpc.analysis.Analysis.checks`), "pass" when the benchmark
    carries a check or verification and nothing failed, "" when it carries none."""
    from vhpc.analysis.findings import label

    invalid = sum(s.n_invalid for _, p, m in fam.points
                  if (s := analysis.summary(fam.benchmark, p, m, env)) is not None)
    scopes = {f"{env} / {label(fam.benchmark, p)}" for _, p, _ in fam.points}
    labels = {label(fam.benchmark, p) for _, p, _ in fam.points}
    failed = [f for f in analysis.findings if f.kind == "check-failed" and f.scope in scopes]
    params = {p for _, p, _ in fam.points}
    figures = [c for c in analysis.checks if c.benchmark == fam.benchmark
               and c.environment == env and c.params in params]  # the check figures' medians
    off = [c for c in figures if c.passed is False]
    if invalid or failed or off:
        if off and not invalid:
            c = off[0]
            return (f"fail: {c.metric} {fmt_num(c.value, 6)} vs {fmt_num(c.reference, 6)} "
                    f"(tolerance {c.rtol:g})")
        return f"fail: {invalid} invalid" if invalid else "fail"
    checked = _has_check(fam.benchmark) or any(c.passed for c in figures) or any(
        f.kind == "check-passed" and f.scope in labels for f in analysis.findings)
    return "pass" if checked else ""


@dataclass(frozen=True)
class HeadlineRow:
    """One headline row: a primary family's :class:`FamilySummary` against the baseline (its
    overhead, interval and verdict as the analysis gives them, never recomputed), what limits
    trust in it, and its check ("pass", "fail: …", "": none; :func:`check_status`)."""

    summary: FamilySummary
    trust: tuple[str, ...]
    check: str


#: parameters a study is about (seed 003 Fig. 2 contrasts threads=1 with threads=4): the
#: headline keeps each value apart instead of averaging over them
KEEP_APART = ("threads",)


def _split(fam: Family, shared: set, env: str, base: str) -> list[tuple[Family, str]]:
    """The families the headline shows for ``fam`` in ``env``, each with a note ("" or what it
    leaves out): one per point of a sweep over a :data:`KEEP_APART` parameter; a sweep whose
    points include ones where nodes or guests shared a host CPU (``shared``: (environment,
    benchmark, params) in ``env`` or the baseline) without them, said in the note; else
    ``fam``."""
    from dataclasses import replace

    if fam.sweep and fam.parameter in KEEP_APART:
        return [(replace(fam, params=p, points=((None, p, m),), parameter=""), "")
                for _, p, m in fam.points]
    hit = [pt for pt in fam.points if (env, fam.benchmark, pt[1]) in shared
           or (base, fam.benchmark, pt[1]) in shared]
    if fam.sweep and hit and len(hit) < len(fam.points):
        kept = tuple(pt for pt in fam.points if pt not in hit)
        left = ", ".join(f"{fam.parameter}={fam.fmt_x(x)}" if not fam.by_size else fam.fmt_x(x)
                         for x, _, _ in hit)
        one = len(kept) == 1  # one point left: a scalar with that point's parameters
        return [(replace(fam, points=kept, parameter="" if one else fam.parameter,
                         params=kept[0][1] if one else fam.params),
                 f"without {left}: shared CPUs (contention)")]
    return [(fam, "")]


def headline_rows(analysis: Analysis, shared=()) -> list[HeadlineRow]:
    """The headline: per primary family (:func:`vhpc.analysis.families.families`) and
    non-baseline environment, the analysis' :class:`FamilySummary`
    (:func:`vhpc.analysis.families.summarise_family`), in report order, each with its trust
    notes and check (the environment's, or the baseline's when that failed).  It never
    averages across a parameter a study is about (:data:`KEEP_APART`: one row per value), and
    a sweep's mean leaves out the points whose ranks of different nodes or guests shared a
    host CPU (``shared``: (environment, benchmark, params)), saying so in its trust notes."""
    from vhpc.analysis.families import summarise_family

    shared = set(shared)
    out = []
    for fam in families(analysis):
        if not fam.primary:
            continue
        for env in analysis.others():
            for part, note in _split(fam, shared, env, analysis.baseline):
                fs = summarise_family(analysis, part, env, () if note else shared)
                if fs is None:
                    continue
                env_check = check_status(analysis, part, env)
                base_check = check_status(analysis, part, analysis.baseline)
                check = env_check if not base_check.startswith("fail") else (
                    f"{analysis.baseline} {base_check}")
                out.append(HeadlineRow(fs, (*fs.trust, *([note] if note else [])), check))
    return out


def common_notes(notes: list[tuple[str, ...]]) -> list[str]:
    """The notes every entry of ``notes`` (two or more) shares, in the first entry's order:
    said once above a table instead of once per row."""
    if len(notes) < 2:
        return []
    return [t for t in notes[0] if all(t in n for n in notes[1:])]


@dataclass(frozen=True)
class MeasuredRow:
    """One row of a one-environment campaign's headline: benchmark[params], metric with its
    direction mark, the environment, the measured value as text ("12.34 ± 0.56"; a sweep: the
    value at its smallest and largest point), n (valid runs), the unit and the check."""

    bench: str
    metric: str
    environment: str
    value: str
    n: str
    unit: str
    check: str
    family: Family


def fmt_halfwidth(halfwidth: float) -> str:
    """An interval half-width with 2 significant digits, never in exponent form between 0.001
    and 10^9 ("190", "1.9", "0.019"), as it stands beside a mean: "31.88 ± 190"."""
    if not math.isfinite(halfwidth) or halfwidth == 0 or not 1e-3 <= abs(halfwidth) < 1e9:
        return fmt_num(halfwidth, 2)
    digits = max(0, 1 - math.floor(math.log10(abs(halfwidth))))
    return f"{round(halfwidth, digits):.{digits}f}"


def _mean_pm(s: Summary | None) -> str:
    if s is None or s.mean is None:
        return "—"
    hw = s.ci_halfwidth
    if hw is None:
        return fmt_num(s.mean)
    text = f"{fmt_num(s.mean)} ± {fmt_halfwidth(hw)}"
    return f"{text} ({WIDER})" if s.mean and hw > abs(s.mean) else text


def measured_rows(analysis: Analysis, primary_only: bool = True) -> list[MeasuredRow]:
    """What a campaign measured in each environment, without comparison (the headline of a
    one-environment campaign): one row per primary family (every non-secondary one with
    ``primary_only=False``) and environment, in report order.  A one-point family shows
    "mean ± half-width" of its confidence interval; a sweep the values at its smallest and
    largest point ("0.91 (1 B) … 345 (4 MiB)", "900 (ranks=1) … 850 (ranks=4)")."""
    out = []
    for fam in families(analysis):
        if (primary_only and not fam.primary) or fam.secondary:
            continue
        for env in analysis.environment_order():
            sums = [analysis.summary(fam.benchmark, p, m, env) for _, p, m in fam.points]
            have = [(x, s) for (x, _, _), s in zip(fam.points, sums) if s is not None]
            if not have:
                continue
            if fam.sweep:
                (first_x, first), (last_x, last) = have[0], have[-1]
                point_label = fam.fmt_x if fam.by_size else (lambda x: f"{fam.parameter}={fam.fmt_x(x)}")
                value = f"{fmt_num(first.mean)} ({point_label(first_x)}) … {fmt_num(last.mean)} ({point_label(last_x)})"
            else:
                value = _mean_pm(have[0][1])
            counts = [s.n for _, s in have]
            n = str(min(counts)) if len(set(counts)) == 1 else f"{min(counts)}–{max(counts)}"
            out.append(MeasuredRow(fam.label,
                                   f"{fam.quantity} {direction_mark(fam.higher_is_better)}",
                                   env, value, n, fam.unit, check_status(analysis, fam, env), fam))
    return out
