"""Report room: presents an :class:`~vhpc.analysis.Analysis` — terminal table
(:mod:`.terminal`), figures (:mod:`.figures`), self-contained HTML (:mod:`.html`) and CSV/JSON
export (:mod:`.export`, which also holds the one :class:`~vhpc.report.export.Exporter` protocol of
every output format).  Imports only :mod:`vhpc.core.metrics`, :mod:`vhpc.core.records`, :mod:`vhpc.core.stats`
(method names) and :mod:`vhpc.analysis`; never runs a benchmark.

This module holds the text formatters and the summary-table rows (:func:`comparison_rows`, one
row per metric and environment) shared by the terminal table and the HTML report, so both show
the same numbers the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vhpc.core import stats
from vhpc.analysis import Analysis, Comparison, Summary

__all__ = [
    "fmt_num",
    "fmt_mean_ci",
    "fmt_ratio",
    "fmt_overhead",
    "fmt_p",
    "direction_mark",
    "params_label",
    "env_header",
    "TCG_MARK",
    "METHOD_TAG",
    "ComparisonRow",
    "comparison_rows",
]

#: marker appended to the name of an environment whose results come from TCG emulation
TCG_MARK = "(TCG emulation)"


def fmt_num(x: float | None, digits: int = 4) -> str:
    """``x`` with ``digits`` significant digits, "—" for None/NaN."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.{digits}g}"


def fmt_mean_ci(s: Summary | None) -> str:
    """"mean ± CI half-width" of a summary (metric unit), "—" when absent, "n/a" when n = 0."""
    if s is None:
        return "—"
    if s.mean is None:
        return f"n/a (0 valid, {s.n_invalid} invalid)"
    hw = s.ci_halfwidth
    text = fmt_num(s.mean) if hw is None else f"{fmt_num(s.mean)} ± {fmt_num(hw, 2)}"
    return f"{text} (n={s.n})"


#: short tag appended to a ratio interval that is not Fieller's (explained in the captions)
METHOD_TAG = {stats.LOG_DELTA: " (log)", stats.BCA: " (BCa)"}


def fmt_ratio(c: Comparison | None) -> str:
    """"ratio [low, high]" (dimensionless), "[unbounded]" for a Fieller set without bounds
    (the baseline mean is not significantly different from 0), and " (log)" / " (BCa)" after
    an interval from the log-delta method or the BCa bootstrap (see :data:`METHOD_TAG`)."""
    if c is None or c.ratio is None:
        return "—"
    lo, hi = c.ratio_ci
    if lo is None or hi is None:
        if c.n >= 2 and c.n_baseline >= 2:
            return f"{c.ratio:.3f} [unbounded]"
        return f"{c.ratio:.3f}"
    return f"{c.ratio:.3f} [{_bound(lo)}, {_bound(hi)}]{METHOD_TAG.get(c.ratio_ci_method, '')}"


def _bound(x: float) -> str:
    """3 decimals, or 2 significant digits below 0.01 so a small positive bound never reads
    as 0.000."""
    return f"{x:.3f}" if abs(x) >= 0.01 or x == 0 else f"{x:.2g}"


def fmt_overhead(c: Comparison | None) -> str:
    """Overhead in percent with sign ("+12.3 %"), "—" when unknown."""
    if c is None or c.overhead_pct is None:
        return "—"
    return f"{c.overhead_pct:+.1f} %"


def fmt_p(c: Comparison | None) -> str:
    """Holm-adjusted p-value, "—" when there is none."""
    if c is None or c.p_adjusted is None:
        return "—"
    p = c.p_adjusted
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
    """Environment name, with :data:`TCG_MARK` when it is emulated."""
    info = analysis.environments.get(env)
    if info is not None and info.emulated:
        return f"{env} {TCG_MARK}"
    return env


@dataclass(frozen=True)
class ComparisonRow:
    """One row of the summary table, as text: (benchmark, params, metric) × one non-baseline
    environment.  ``first``: the first row of its (benchmark, params, metric), so renderers can
    leave repeated benchmark/metric/baseline cells blank; ``verdict`` is the raw verdict (None
    when the baseline has no data), ``note`` why a verdict is "no significant difference"
    although one criterion suggests a difference; ``method`` the ratio interval's method."""

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


def comparison_rows(analysis: Analysis) -> list[ComparisonRow]:
    """The summary table shared by the terminal and the HTML report: one row per (benchmark,
    params, metric, non-baseline environment that has data), in report order; a metric only the
    baseline has gets one row with empty environment cells."""
    base, others = analysis.baseline, analysis.others()
    rows: list[ComparisonRow] = []
    for bench, params, metric in analysis.keys():
        sums = {e: analysis.summary(bench, params, metric, e) for e in [base, *others]}
        s0 = next((s for s in sums.values() if s is not None), None)
        unit, hib = (s0.unit, s0.higher_is_better) if s0 else ("", False)
        envs = [e for e in others
                if sums[e] is not None or analysis.comparison(bench, params, metric, e)]
        for i, env in enumerate(envs or [None]):
            c = analysis.comparison(bench, params, metric, env) if env else None
            info = analysis.environments.get(env) if env else None
            rows.append(ComparisonRow(
                bench=params_label(bench, params), metric=f"{metric} [{unit}] {direction_mark(hib)}",
                base=fmt_mean_ci(sums[base]), environment=env or "",
                env_label=env_header(analysis, env) if env else "",
                emulated=bool(info and info.emulated), mean=fmt_mean_ci(sums[env]) if env else "",
                ratio=fmt_ratio(c) if env else "", method=c.ratio_ci_method if c else "",
                overhead=fmt_overhead(c) if env else "", p=fmt_p(c) if env else "",
                verdict=c.verdict if c else None, note=c.note if c else "", first=i == 0))
    return rows
