"""Report room: presents an :class:`~vhpc.analysis.Analysis` — terminal table
(:mod:`.terminal`), figures (:mod:`.figures`), self-contained HTML (:mod:`.html`) and CSV/JSON
export (:mod:`.export`).  Imports only :mod:`vhpc.model` and :mod:`vhpc.analysis`; never runs a
benchmark.

This module holds the small text formatters shared by the terminal table and the HTML report,
so both show the same numbers the same way.
"""

from __future__ import annotations

import math

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


def fmt_ratio(c: Comparison | None) -> str:
    """"ratio [low, high]" (dimensionless), with "unbounded" for a Fieller set without bounds."""
    if c is None or c.ratio is None:
        return "—"
    lo, hi = c.ratio_ci
    if lo is None or hi is None:
        if c.n >= 2 and c.n_baseline >= 2:
            return f"{c.ratio:.3f} [unbounded]"
        return f"{c.ratio:.3f}"
    return f"{c.ratio:.3f} [{lo:.3f}, {hi:.3f}]"


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
