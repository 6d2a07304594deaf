"""Draw a study's figure (:class:`~vhpc.analysis.figdata.FigureData`) with matplotlib, in the
seed paper's axes: numeric x as lines with CI bars (log axes where the paper used them),
categorical x as grouped bars with CI error bars; a relative panel has a dashed line at 1.0; the
paper's stated values (``references``) are drawn beside the measurement as dotted lines
labelled "paper: ...".  The title carries the seed figure number; TCG series are hatched or
dashed and labelled.  A y axis whose positive values span more than two decades (:data:`DECADES`)
is logarithmic; a point from fewer than :data:`MIN_N` samples is drawn hollow (a bar: pale)
without an interval, and the panel says so; node counts whose ranks shared a host CPU
(``shared_x``) are shaded and marked "shared CPUs: contention, not scaling".
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np

from vhpc.analysis.figdata import FigureData, PanelData
from vhpc.core import intervals
from vhpc.report.figures import COLORS, RC, log_ticks, new_figure, render
from vhpc.report.sweeps import shade_shared, size_axis

__all__ = ["draw"]


def _err(p) -> tuple[float, float]:
    below = p.y - p.low if p.low is not None and math.isfinite(p.low) else 0.0
    above = p.high - p.y if p.high is not None and math.isfinite(p.high) else 0.0
    if p.y > 0:
        below = min(max(below, 0.0), 0.999 * p.y)
    return max(below, 0.0), max(above, 0.0)


#: fewest samples for an interval to be drawn (seed findings need 3 as well)
MIN_N = 3
#: a y axis spanning more than this many decades is drawn on a log scale
DECADES = 2.0


def _span_decades(pd: PanelData) -> float:
    ys = [p.y for s in pd.series for p in s.points if p.y > 0]
    return math.log10(max(ys) / min(ys)) if len(ys) > 1 else 0.0


def _few(p, logy: bool = False) -> bool:
    """Whether ``p`` is drawn without an interval (hollow or pale): fewer than :data:`MIN_N`
    runs; on a log axis (``logy``) also an interval with a bound ≤ 0 (no place on it: the
    figure data gives log-scale panels the geometric interval, whose bounds are positive) or
    one wider than :data:`vhpc.core.intervals.WIDE_FACTOR` times (the table prints none)."""
    if p.n < MIN_N:
        return True
    if not logy or p.low is None or p.high is None:
        return False
    return not (p.low > 0 and p.high <= p.low * intervals.WIDE_FACTOR)


#: a bar panel's linear y axis stops at this multiple of its tallest bar: wider intervals (two
#: runs under TCG reach 10^5 times the bar) are cut at the edge and said so, rather than
#: flattening every bar
CLIP = 3.0


#: categories that have an order of their own (co-runner intensity, sizes, NPB classes): a
#: categorical axis made only of them is drawn in this order, not as the data came
ORDINAL = {w: i for i, w in enumerate(("none", "idle", "low", "medium", "mid", "high",
                                       "small", "large", "s", "w", "a", "b", "c", "d", "e"))}


def natural_order(cats: list) -> list:
    """``cats`` in their natural order where each is a word of :data:`ORDINAL` (low < medium <
    high), else as given."""
    if cats and all(str(c).lower() in ORDINAL for c in cats):
        return sorted(cats, key=lambda c: ORDINAL[str(c).lower()])
    return cats


def series_colors(fd: FigureData) -> dict[str, str]:
    """Series label → colour, one per label across every panel of the figure: the baseline's
    series (its label starts with the figure's baseline name) first colour, the others in the
    order they first appear; so a colour means one environment on the whole figure."""
    labels: list[str] = []
    for pd in fd.panels:
        for s in pd.series:
            if s.label not in labels:
                labels.append(s.label)
    base = [l for l in labels if fd.baseline and l.startswith(fd.baseline)]
    rest = [l for l in labels if l not in base]
    return {l: COLORS[i % len(COLORS)] for i, l in enumerate(base + rest)}


def _draw_bars(ax, pd: PanelData, colors: dict[str, str] | None = None,
               clip: bool = True, logy: bool = False) -> None:
    """Grouped bars, one group per x value (:func:`natural_order`), one bar per series, each
    series in its colour (``colors``: label → colour); a TCG point's bar is hatched."""
    cats: list = []
    for s in pd.series:
        for p in s.points:
            if p.x not in cats:
                cats.append(p.x)
    cats = natural_order(cats)
    n = max(1, len(pd.series))
    w = 0.8 / n
    idx = {c: k for k, c in enumerate(cats)}
    for i, s in enumerate(pd.series):
        xs = [idx[p.x] - 0.4 + w * (i + 0.5) for p in s.points]
        # a point from too few runs has no interval: NaN draws no bar and no cap (0 drew a
        # flat cap on the point)
        errs = np.array([(np.nan, np.nan) if _few(p, logy) else _err(p) for p in s.points]).T \
            if s.points else None
        tcg = [p.emulated for p in s.points]
        tag = " (TCG)" if tcg and all(tcg) else (" (hatched: TCG)" if any(tcg) else "")
        color = (colors or {}).get(s.label, COLORS[i % len(COLORS)])
        bars = ax.bar(xs, [p.y for p in s.points], width=w * 0.95, yerr=errs, capsize=2,
                      color=color, edgecolor=color,
                      linewidth=0.5, label=s.label + tag)
        for patch, emulated, p in zip(bars.patches, tcg, s.points):
            if emulated:
                patch.set_hatch("//")
                patch.set_edgecolor("black")
            if _few(p, logy):
                patch.set_alpha(0.35)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([str(c) for c in cats], rotation=20 if len(cats) > 4 else 0,
                       ha="right" if len(cats) > 4 else "center")
    tallest = max((p.y for s in pd.series for p in s.points), default=0.0)
    highest = max((p.high for s in pd.series for p in s.points  # drawn bars only
                   if p.high is not None and math.isfinite(p.high) and not _few(p, logy)),
                  default=0.0)
    if clip and not pd.ylog and tallest > 0 and highest > CLIP * tallest:
        ax.set_ylim(min(0.0, ax.get_ylim()[0]), CLIP * tallest)
        ax.text(0.99, 0.98, "interval bars cut at the top", transform=ax.transAxes,
                ha="right", va="top", fontsize=7, color="#555")


def _draw_curves(ax, pd: PanelData, logy: bool, colors: dict[str, str] | None) -> None:
    """A numeric-x panel's series as lines with interval bars (dashed for TCG), a point
    without an interval hollow (:func:`_few`); a log x axis leaves out x ≤ 0 (message size 0)
    from the drawing, kept in the data."""
    for i, s in enumerate(pd.series):
        pts = [p for p in s.points if not pd.xlog or p.x > 0]
        if not pts:
            continue
        xs = [p.x for p in pts]
        ys = [p.y for p in pts]
        errs = np.array([(np.nan, np.nan) if _few(p, logy) else _err(p) for p in pts]).T
        tcg = any(p.emulated for p in pts)
        color = (colors or {}).get(s.label, COLORS[i % len(COLORS)])
        ax.errorbar(xs, ys, yerr=errs, marker="o", ms=4, capsize=2, color=color,
                    linestyle="--" if tcg else "-", label=s.label + (" (TCG)" if tcg else ""))
        few = [p for p in pts if _few(p, logy)]
        if few:  # hollow: no interval from fewer than MIN_N samples
            ax.plot([p.x for p in few], [p.y for p in few], "o", ms=6, color=color,
                    markerfacecolor="white", zorder=3)


def _numeric_extras(ax, pd: PanelData) -> None:
    """What a numeric-x panel draws beside its curves: the fitted line (gray, dashed, its r²
    in the legend), vertical guide lines and the shaded node counts whose CPUs were shared."""
    if pd.fit:
        xs = [p.x for s in pd.series for p in s.points]
        if xs:
            xx = [0.0, max(xs) * 1.1]
            ax.plot(xx, [pd.fit["intercept"] + pd.fit["slope"] * x for x in xx], "--",
                    color="gray", label=f"fit (r² = {pd.fit['r2']:.2f})")
    for v in pd.vlines:
        ax.axvline(v, color="lightgray", lw=0.8)
    shade_shared(ax, getattr(pd, "shared_x", []))


def _numeric_x_ticks(ax, pd: PanelData) -> None:
    """A numeric x axis' ticks: message sizes (1, 16, 256, 4K, ...) on a log axis, one point's
    own tick (not matplotlib's ±5 % around it), whole ticks for counts (ranks, nodes)."""
    distinct = sorted({p.x for s in pd.series for p in s.points})
    if pd.xlog:  # every log-x panel is one of message sizes
        size_axis(ax, [x for x in distinct if x > 0] or [1])
    elif len(distinct) == 1:
        (x,) = distinct
        half = 1.0 if float(x).is_integer() or x == 0 else abs(x) / 2
        ax.set_xticks([x])
        ax.set_xlim(x - half, x + half)
    elif all(float(x).is_integer() for x in distinct):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_references(ax, pd: PanelData, refs: list[tuple]) -> None:
    """The paper's values (``refs``: (label, value[, categories])) as red dotted lines
    labelled "paper: …": over the named categories' bars only where a categorical panel has
    them all, else across the panel."""
    for label, value, *cats in refs:
        where = [c for c in (cats[0] if cats else ()) if not pd.numeric_x]
        ticks = {t.get_text(): t.get_position()[0] for t in ax.get_xticklabels()}
        if where and all(str(c) in ticks for c in where):  # over its own bars only
            for k, c in enumerate(where):
                x = ticks[str(c)]
                ax.hlines(value, x - 0.45, x + 0.45, color="#b00020", lw=1.2, ls=":",
                          label=f"paper: {label}" if k == 0 else None)
        else:
            ax.axhline(value, color="#b00020", lw=1.0, ls=":", label=f"paper: {label}")


def _log_y_axis(ax, pd: PanelData) -> None:
    """A log y axis from below the smallest value (a bar from 0 has no place on a log axis)
    and below every drawn interval, so no whisker runs into the axis' floor, to twice the
    highest value or bound (factors 3 and 1.5 below, 2 above: room, not a convention)."""
    drawn = [p for s in pd.series for p in s.points if not _few(p, True)]
    ys = [p.y for s in pd.series for p in s.points]
    tops = [p.high for p in drawn if p.high is not None and math.isfinite(p.high)]
    lows = [p.low for p in drawn if p.low is not None and math.isfinite(p.low)]
    ax.set_yscale("log")
    ax.set_ylim(min([min(ys) / 3, *(lo / 1.5 for lo in lows)]), max([*ys, *tops]) * 2)
    log_ticks(ax, *ax.get_ylim())


def _few_legend_entry(ax, pd: PanelData, logy: bool) -> None:
    """Where a point is drawn without an interval, a legend entry saying why: "hollow" (a
    curve) or "pale" (a bar): n < MIN_N, or an interval too wide for the log axis."""
    if any(_few(p, logy) for s in pd.series for p in s.points):
        wide = any(_few(p, logy) and p.n >= MIN_N for s in pd.series for p in s.points)
        ax.plot([], [], "o" if pd.numeric_x else "s", color="gray", markerfacecolor="white",
                alpha=1.0 if pd.numeric_x else 0.35,
                label=f"{'hollow' if pd.numeric_x else 'pale'}: n < {MIN_N}"
                      + (f" or interval > ×{intervals.WIDE_FACTOR:,.0f}" if wide else "")
                      + ", no interval")


def _labels_and_legend(ax, pd: PanelData) -> None:
    """Axis labels (the unit in brackets; a log x axis says when it left 0 B out), the
    panel's title, the grid, and the legend: under a numeric panel's axes, where it hides no
    line; where matplotlib finds room on a bar panel."""
    dropped = pd.numeric_x and pd.xlog and any(p.x <= 0 for s in pd.series for p in s.points)
    ax.set_xlabel(pd.xlabel + (" (0 B left out: no place on a log axis)" if dropped else ""))
    ax.set_ylabel(pd.ylabel + (f" [{pd.unit}]" if pd.unit and "[" not in pd.ylabel else ""))
    if pd.title:
        ax.set_title(pd.title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    labels = ax.get_legend_handles_labels()[1]
    if labels and pd.numeric_x:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                  ncol=1 if any(len(t) > 30 for t in labels) else min(3, len(labels)),
                  frameon=False)
    elif labels:
        ax.legend(fontsize=7, loc="best")


def _draw_panel(ax, pd: PanelData, refs: list[tuple[str, float]],
                colors: dict[str, str] | None = None) -> None:
    """One panel on ``ax``: curves (numeric x) or grouped bars (categories), the line at 1 of
    a relative panel, the paper's values, the y axis (logarithmic where the panel asks or its
    positive values span more than :data:`DECADES` decades, else from 0 for curves), the
    legend entry of points without an interval, labels and legend."""
    positive = all(p.y > 0 for s in pd.series for p in s.points)
    logy = positive and (pd.ylog or _span_decades(pd) > DECADES)
    if pd.numeric_x:
        _draw_curves(ax, pd, logy, colors)
        _numeric_extras(ax, pd)
        _numeric_x_ticks(ax, pd)
    else:  # a log axis has room for every interval: bars are cut only on a linear one
        _draw_bars(ax, pd, colors, clip=not logy, logy=logy)
    if pd.relative:
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
    _draw_references(ax, pd, refs)
    if logy:
        _log_y_axis(ax, pd)
    elif positive and pd.numeric_x:  # a linear axis starts at 0: one point is not zoomed to ±5 %
        ax.set_ylim(bottom=0)
    _few_legend_entry(ax, pd, logy)
    _labels_and_legend(ax, pd)


def draw(fd: FigureData, fmt: str = "svg",
         references: dict[int, list[tuple]] | None = None) -> str | bytes | None:
    """The figure as SVG text or PNG bytes; None when it has no point.  ``references``:
    panel index → [(label, paper's value[, categories])] drawn as dotted lines (relative
    panels), over the named categories' bars only when given."""
    panels = [p for p in fd.panels if any(s.points for s in p.series)]
    if not panels:
        return None
    ncols = min(2, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = new_figure(5.2 * ncols, 3.4 * nrows + 0.5)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    colors = series_colors(fd)
    with matplotlib.rc_context(RC):
        for i, (ax, pd) in enumerate(zip(axes, panels)):
            _draw_panel(ax, pd, (references or {}).get(fd.panels.index(pd), []), colors)
        title = f"Seed {fd.seed} {fd.number}: {fd.title}"
        if fd.emulated:
            title += " — TCG emulation, not hardware virtualization"
        fig.suptitle(title, fontsize=10)
    return render(fig, fmt)
