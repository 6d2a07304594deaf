"""How vhpc writes an overhead and a ratio, in every room that prints one (terminal, HTML
tables, findings, paper pages), so a number reads the same everywhere and never overflows a
cell.

An overhead is a percentage while the environment is within a factor of :data:`FACTOR_FROM`
of the baseline; beyond it (an emulated guest 3,600 times slower, or an interval from two runs
that spans nine orders of magnitude) it is the cost factor ``1 + overhead/100`` written with
×/÷: "×3,596" is 3,596 times the baseline's time (or 1/3,596 of its rate), "÷1.3" a
1.3-times-better result.  A value and its interval are always written in one of the two forms,
so the centre reads against its bounds.  No nonzero value is printed as the neutral one
("+0.0", "×1.00"): it gets the digits that tell it apart, so a verdict that the interval
excludes 0 % can be read off the printed bounds.  Pure functions, no I/O.
"""

from __future__ import annotations

import math

__all__ = ["FACTOR_FROM", "FACTOR_NOTE", "sci", "factor", "cost_ci", "overhead", "is_factor_text",
           "pct", "pct_ci", "ratio", "ratio_ci"]

#: an overhead is written as a cost factor (×/÷) once the factor reaches this many times,
#: either way (+900 % or −90 %); below it a percentage reads best and keeps one decimal
FACTOR_FROM = 10.0
#: the sentence every page and terminal prints once a factor is shown
FACTOR_NOTE = ("×N / ÷N: N times worse / better than the baseline (N times its time or 1/N "
               "of its rate), written so from 10 times on")


def sci(value: float) -> str:
    """``value`` with 2 significant digits in compact scientific form: 3.7e9, 9.9e-6, -1.2e5;
    "inf", "-inf", or "—" for nan."""
    if not math.isfinite(value):
        return "—" if math.isnan(value) else f"{value:g}"
    mant, exp = f"{value:.1e}".split("e")
    return f"{mant}e{int(exp)}"


def _magnitude(v: float) -> str:
    """A factor ≥ 1 as text: 3 significant digits below 100 (1.32, 12.5), whole with
    thousands separators below 100,000 (253, 3,596), else :func:`sci` (3.7e9); a value just
    above 1 gets the digits that tell it from 1 (1.0004)."""
    if v < 100:
        text = f"{v:.3g}"
        digits = 3
        while float(text) == 1.0 and v != 1.0 and digits < 9:
            digits += 1
            text = f"{v:.{digits}g}"
        return text
    if v < 99_999.5:  # what rounds to 100,000 is 1.0e5, as its neighbours above
        return f"{v:,.0f}"
    return sci(v)


#: a cost factor beyond what a float holds: an infinite one, or one whose reciprocal is
#: (a subnormal ratio such as 1e-310, or one that underflowed to 0): the ratio of two finite
#: positive doubles underflows only below 5e-324, so the factor is then beyond 1e308 indeed
HUGE_WORSE, HUGE_BETTER = "×>1e308", "÷>1e308"


def factor(cost: float, zero: str = HUGE_BETTER) -> str:
    """A cost factor (≥ 0) with ×/÷: 253.3 → "×253", 0.758 → "÷1.32", 1 → "×1",
    1e-5 → "÷1.0e5"; inf → "×>1e308", a subnormal or 0 → "÷>1e308" (or ``zero`` for 0, when
    the caller knows a tighter bound); "—" when nan or < 0."""
    if math.isnan(cost) or cost < 0:
        return "—"
    if cost == 0:
        return zero
    if math.isinf(cost):
        return HUGE_WORSE
    if cost >= 1:
        return "×" + _magnitude(cost)
    if math.isinf(1 / cost):
        return HUGE_BETTER
    return "÷" + _magnitude(1 / cost)


def _percent(x: float, unit: bool) -> str:
    if math.isnan(x):
        return "—"
    text = f"{x:+.1f}"
    if float(text) == 0 and x != 0:  # never a nonzero bound as "+0.0"
        text = f"{x:+.2g}"
    return text + " %" if unit else text


def decisive(value: float, edges: tuple[float, ...], digits: int, unit: bool = False,
             sign: bool = True) -> str:
    """``value`` with ``digits`` decimals, or more (up to 6) until the printed number lies on the
    same side of every edge in ``edges`` as ``value`` does (a bound of 4.98 % against a 5 %
    margin prints +4.98, not +5.0, beside one of 5.02 %): the digits that decide a verdict
    read off the bound."""
    def text(d: int) -> str:
        return f"{value:+.{d}f}" if sign else f"{value:.{d}f}"

    out = text(digits)
    for d in range(digits, 7):
        out = text(d)
        shown = float(out)
        if all((shown > e) == (value > e) and (shown < e) == (value < e) for e in edges):
            break
    return out + (" %" if unit else "")


def band_edges(margin: float | None) -> tuple[float, ...]:
    """The overheads (percent) a verdict's interval is read against: 0, the margin +100·m and
    the band's other edge −100·m/(1 + m) (the ratio 1/(1 + m)); () without a margin."""
    if margin is None:
        return ()
    return (0.0, 100.0 * margin, -100.0 * margin / (1.0 + margin))


def _far(*fs: float | None) -> bool:
    """Whether cost factors ``fs`` are written as factors: none negative or nan, and one at or
    beyond :data:`FACTOR_FROM` times either way (0 and inf included)."""
    real = [f for f in fs if f is not None]
    return all(f >= 0 for f in real) and any(
        f >= FACTOR_FROM or f <= 1 / FACTOR_FROM for f in real)


def cost_ci(cost: float, low: float | None = None, high: float | None = None,
            margin: float | None = None, zero: str = HUGE_BETTER) -> str:
    """An overhead given as cost factors (the environment's time over the baseline's, or the
    baseline's rate over the environment's; > 1: worse) with its interval, all in one form:
    "+12.3 % [+8.1, +16.0]", or as factors when any is :data:`FACTOR_FROM` times or more
    ("÷1.32 [÷1.8e5, ×1.0e5]"); just the value when a bound is missing.  A factor ≤ 0 (a
    ratio of arithmetic means of values ≤ 0) stays a percentage; nan is "—".  ``zero``: the
    text of a factor of 0 (:func:`factor`).  With ``margin`` (the verdict's equivalence
    margin) a bound near 0 or the band's edges gets the digits that put it on its side of
    them (:func:`decisive`)."""
    bounds = (low, high) if low is not None and high is not None else ()
    if _far(cost, *bounds):
        return " ".join([factor(cost, zero)]
                        + ([f"[{factor(low, zero)}, {factor(high, zero)}]"] if bounds else []))
    text = _percent((cost - 1) * 100, True)
    if bounds:
        edges = band_edges(margin)
        lo_t, hi_t = (_percent((b - 1) * 100, False) if not edges
                      else decisive((b - 1) * 100, edges, 1) for b in bounds)
        text += f" [{lo_t}, {hi_t}]"
    return text


#: −100 % as a factor: (r − 1)·100 rounds to −100 only for a ratio r below about 1e-16
PCT_FLOOR = "÷>1e15"


def pct(percent: float, unit: bool = True) -> str:
    """An overhead (percent, > 0: worse) as text: "+12.3 %" (``unit=False``: "+12.3", an
    interval's bound), or the factor from :data:`FACTOR_FROM` times on (+25,229 % → "×253",
    −99.999 % → "÷1.0e5": :func:`factor`); −100 % → "÷>1e15" (a percentage rounds to −100
    only below a ratio of about 1e-16)."""
    if _far(1 + percent / 100):
        return factor(1 + percent / 100, PCT_FLOOR)
    return _percent(percent, unit)


def pct_ci(percent: float, low: float | None, high: float | None) -> str:
    """An overhead in percent with its interval, by :func:`cost_ci`: "+12.3 % [+8.1, +16.0]",
    "÷1.32 [÷1.8e5, ×1.0e5]" for −24.2 % [−99.9994, +10,120,729].  Where the ratios are at
    hand, :func:`overhead` is exact beyond 10¹⁵ times (a percentage then rounds to −100)."""
    c = (lambda v: None if v is None else 1 + v / 100)
    return cost_ci(1 + percent / 100, c(low), c(high), zero=PCT_FLOOR)


def overhead(ratio: float, low: float | None, high: float | None, higher_is_better: bool,
             margin: float | None = None) -> str:
    """The overhead of ``ratio`` = environment / baseline (interval ``low``..``high``) in the
    metric's direction, by :func:`cost_ci`: the cost factor is the ratio for a time, its
    reciprocal for a rate (bounds swapped), as in
    :func:`vhpc.analysis.compare.overhead_pct`; ``margin``: see :func:`cost_ci`."""
    if not higher_is_better:
        return cost_ci(ratio, low, high, margin=margin)
    inv = (lambda v: None if v is None else (1 / v if v else math.inf))
    return cost_ci(inv(ratio), inv(high), inv(low), margin=margin)


def is_factor_text(text: str) -> bool:
    """Whether ``text`` (an overhead as :func:`pct` or :func:`pct_ci` wrote it) is in the
    factor form, so the page must say what ×/÷ mean (:data:`FACTOR_NOTE`)."""
    return text[:1] in ("×", "÷")


def ratio(value: float) -> str:
    """A ratio (dimensionless) as text: 3 decimals between 0.01 and 10 (1.319, 0.020), 4
    significant digits up to 1,000 (96.6, 157.7), else :func:`sci` (9.9e-6, 1.8e5), so a
    bound never reads 0.000 nor runs to 11 digits; a value that would print as 1.000 but is
    not 1 gets the digits that tell it apart."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if not 0.01 <= abs(value) < 1000:
        return sci(value)
    if abs(value) >= 10:
        return f"{value:.4g}"
    text, digits = f"{value:.3f}", 3
    while float(text) == 1.0 and value != 1.0 and digits < 9:
        digits += 1
        text = f"{value:.{digits}f}"
    return text


def ratio_ci(value: float, low: float | None, high: float | None,
             margin: float | None = None) -> str:
    """"1.319 [9.9e-6, 1.8e5]": a ratio and its interval by :func:`ratio`; the ratio alone
    when a bound is missing.  With ``margin`` a bound between 0.01 and 10 gets the digits that
    put it on its side of 1 and of the band [1/(1 + m), 1 + m] (1.0498 against 1.0502 at
    5 %, not 1.050 twice: :func:`decisive`)."""
    if low is None or high is None:
        return ratio(value)
    if margin is None:
        return f"{ratio(value)} [{ratio(low)}, {ratio(high)}]"
    edges = (1.0, 1.0 + margin, 1.0 / (1.0 + margin))
    bound = (lambda b: decisive(b, edges, 3, sign=False) if 0.01 <= b < 10 else ratio(b))
    return f"{ratio(value)} [{bound(low)}, {bound(high)}]"


def difference_ci(difference: float, low: float | None, high: float | None, unit: str = "") -> str:
    """A signed metric's difference of means with its interval, in the metric's unit:
    ``Δ -1 [-2.447, +0.4471] J`` (4 significant digits, signs always shown; no bounds when
    either is None)."""
    bounds = f" [{low:+.4g}, {high:+.4g}]" if low is not None and high is not None else ""
    return f"Δ {difference:+.4g}{bounds} {unit}".rstrip()
