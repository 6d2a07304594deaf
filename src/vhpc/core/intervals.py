"""When an interval is too wide to print as numbers (every room that prints one: terminal,
HTML tables, findings, paper pages), so a two-run campaign never shows ×195 [÷6.9e17, ×2.6e22]
as a result.  CSV and JSON exports keep the exact bounds.  Pure functions, no I/O.
"""

from __future__ import annotations

from vhpc.core import power

__all__ = ["WIDE_FACTOR", "MIN_INTERVAL_RUNS", "TOO_FEW", "interval_hidden", "too_few_text"]

#: an interval whose high bound exceeds its low bound this many times says nothing a reader
#: can use (two runs give t(1) = 12.7 at 95 %, more at a Holm level)
WIDE_FACTOR = 1000.0
#: valid runs a side below which an interval is not printed as numbers (the sample SD of
#: two values is their difference: the interval says how far apart they were, little more)
MIN_INTERVAL_RUNS = 3
#: what a cell says instead of such an interval
TOO_FEW = "too few runs for an interval"


def interval_hidden(n_min: int, low: float | None, high: float | None,
                    decided: bool = False) -> bool:
    """Whether an interval ``low``..``high`` of a ratio (> 0) from ``n_min`` valid runs on the
    smaller side is written as :data:`TOO_FEW` instead of numbers: fewer than
    :data:`MIN_INTERVAL_RUNS` runs, or ``high`` more than :data:`WIDE_FACTOR` times ``low``.
    Never when ``decided`` (the verdict is slower, faster or equivalent: a verdict is read off
    the interval printed beside it), nor when a bound is missing (nothing to print)."""
    if decided or low is None or high is None:
        return False
    return n_min < MIN_INTERVAL_RUNS or not (low > 0 and high <= low * WIDE_FACTOR)


def too_few_text(runs_needed: int | None) -> str:
    """:data:`TOO_FEW` with the runs a side that would likely decide (the analysis' figure,
    :attr:`vhpc.analysis.Comparison.runs_needed`); without one (no plan is made from fewer than
    :data:`vhpc.core.power.MIN_PILOT` runs a side) with the pilot advice of
    :data:`vhpc.core.power.PILOT_RUNS` runs a side."""
    if runs_needed:
        return f"{TOO_FEW} (≈{runs_needed} runs each: {power.PLAN_PROMISE})"
    return f"{TOO_FEW} (run ≥ {power.PILOT_RUNS} a side to plan)"
