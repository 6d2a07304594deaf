"""Figures of an :class:`~vhpc.analysis.Analysis` with matplotlib (Agg canvas, no pyplot state).

Every function returns the rendered figure — SVG text (``fmt="svg"``, text drawn as paths so no
font is needed to display it) or PNG bytes (``fmt="png"``) — or None when there is nothing to
draw.  Nothing is written to disk and no global matplotlib state is changed.

* :func:`relative_bars` — each metric relative to the baseline (1 = same), grouped per
  benchmark, one bar per non-baseline environment from 1 to its ratio on a log axis, the
  comparison's CI as error bars (the seeds' "time relative to native" figure).
* :func:`distributions` — individual samples and a box per environment for each metric; invalid
  samples drawn hollow and red.
* :func:`cold_warm_bars` — mean of cold (first after boot) vs warm trials per environment.

Size sweeps and benchmark families are drawn in :mod:`vhpc.report.sweeps`, with the helpers
shared here (:func:`new_figure`, :data:`COLORS`, :data:`RC`, :func:`env_colors`,
:func:`mean_error_bar`, :func:`log_ticks`, :func:`render`).
"""

from __future__ import annotations

import io
import math
from typing import Iterable

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from vhpc.analysis import FASTER, GROUP_COLD, GROUP_WARM, SLOWER, Analysis
from vhpc.analysis.families import sorted_keys
from vhpc.core.metrics import Observation
from vhpc.core.text import mathtext, plain
from vhpc.report import TCG_MARK, direction_mark, env_header, params_label

__all__ = ["relative_bars", "distributions", "cold_warm_bars", "render", "ratio_error_bar",
           "bar_errors", "new_figure", "env_colors", "mean_error_bar", "log_ticks", "COLORS", "RC"]

#: one colour per environment, in the analysis's environment order (matplotlib's tab10 cycle
#: without its grey and red: red marks invalid samples)
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
#: matplotlib settings of every vhpc figure: text drawn as paths (no font needed to show an
#: SVG), 9 pt text, 10 pt titles
RC = {"svg.fonttype": "path", "font.size": 9, "axes.titlesize": 10}


def literal_text(fig: Figure) -> Figure:
    """Make every text in ``fig`` literal: titles, axis labels, legends and annotations are
    never parsed as math text (a unit ``$\\foo$`` is drawn as typed, not a parse error), and
    tick labels given as text (environment, benchmark and category names) have ``$``
    escaped.  Numeric tick labels keep matplotlib's own formatting.  Returns ``fig``."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.text import Text
    from matplotlib.ticker import (FixedFormatter, FormatStrFormatter, FuncFormatter,
                                   StrMethodFormatter)

    textual = (FixedFormatter, FuncFormatter, StrCategoryFormatter, StrMethodFormatter,
               FormatStrFormatter)  # labels that are (or may hold) text: names, categories
    ticks = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for major in (True, False):
                f = axis.get_major_formatter() if major else axis.get_minor_formatter()
                if isinstance(f, textual) and not getattr(f, "vhpc_literal", False):
                    lit = FuncFormatter(lambda x, pos=None, f=f: mathtext(f(x, pos)))
                    lit.vhpc_literal = True
                    (axis.set_major_formatter if major else axis.set_minor_formatter)(lit)
            ticks.update(id(t) for t in axis.get_ticklabels(which="both"))
    for t in fig.findobj(Text):
        if id(t) not in ticks:
            t.set_parse_math(False)
            t.set_usetex(False)
            t.set_text(plain(t.get_text()))  # no control characters (no glyph for them)
    return fig


def render(fig: Figure, fmt: str = "svg") -> str | bytes:
    """Render ``fig`` to SVG text (``fmt="svg"``) or PNG bytes (``fmt="png"``, 110 dpi).
    Text in it is drawn literally (:func:`literal_text`), never as math text.

    SVG carries no date metadata, so identical input gives identical output apart from
    matplotlib's random clip-path ids.  Raises ValueError for another format.
    """
    if fmt not in ("svg", "png"):
        raise ValueError(f"figure format must be 'svg' or 'png', got {fmt!r}")
    try:
        return _render(fig, fmt)
    except (ValueError, OverflowError):
        top = _data_extent(fig)
        if top is None:
            raise
        return _render(_cannot_draw(fig, top), fmt)


#: data beyond this magnitude cannot be drawn: matplotlib's axis margins and tick positions
#: overflow the float range (values near 1.7e308)
DRAWABLE = 1e300


def _data_extent(fig: Figure) -> float | None:
    """The largest data magnitude of ``fig``'s axes when it is beyond :data:`DRAWABLE` (or not
    finite); None when the data are drawable."""
    top = 0.0
    for ax in fig.axes:
        lim = np.abs(np.asarray(ax.dataLim.get_points(), dtype=float))
        if not np.isfinite(lim).all():
            return math.inf
        top = max(top, float(lim.max()))
    return top if top > DRAWABLE else None


def _cannot_draw(fig: Figure, top: float) -> Figure:
    """A figure of the same size that says why ``fig`` was not drawn: an honest "cannot
    draw" instead of an exception (the numbers are in the report's tables)."""
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    out = new_figure(*fig.get_size_inches())
    ax = out.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, (titles[0] + "\n" if titles else "")
            + f"not drawn: values reach {top:.3g}, beyond the range a plot can show;\n"
            "the numbers are in the tables", ha="center", va="center", fontsize=9,
            transform=ax.transAxes)
    return out


def _render(fig: Figure, fmt: str) -> str | bytes:
    # bbox_inches="tight" costs one more layout pass (12 % of a render, cProfile) but is kept:
    # constrained layout does not fit a title or axis label longer than the figure (a study
    # figure's suptitle, a long y label), which the tight box takes in instead of clipping
    literal_text(fig)
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        if fmt == "svg":
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None},
                        bbox_inches="tight")
            return buf.getvalue().decode("utf-8")
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        return buf.getvalue()


def new_figure(width: float, height: float) -> Figure:
    """An empty figure of ``width`` × ``height`` inches with vhpc's settings (:data:`RC`) and
    matplotlib's constrained layout, on no pyplot state."""
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def env_colors(analysis: Analysis) -> dict[str, str]:
    """Environment name → colour (:data:`COLORS`, cycled in the analysis's environment order),
    the same in every figure of a report."""
    return {e: COLORS[i % len(COLORS)] for i, e in enumerate(analysis.environment_order())}


def ratio_error_bar(ratio: float, ci: tuple[float | None, float | None]) -> tuple[float, float]:
    """(below, above) error-bar lengths for a bar at ``ratio`` from the comparison's own
    interval (the one in the table and exports); 0 where a bound is missing (unbounded or
    n < 2), never negative, and never reaching below 0 for a positive ratio."""
    lo, hi = ci
    below = max(0.0, ratio - lo) if lo is not None else 0.0
    if ratio > 0:
        below = min(below, ratio)
    return below, (max(0.0, hi - ratio) if hi is not None else 0.0)


def bar_errors(below: list[float], above: list[float]) -> list[list[float]]:
    """Error-bar lengths as matplotlib draws them: a point without an interval (both lengths
    0: n < 2, or no bound) gets NaN, which draws neither a bar nor a cap, so it shows no
    flat "interval" of zero height."""
    pairs = [(math.nan, math.nan) if b == 0 and a == 0 else (b, a)
             for b, a in zip(below, above)]
    return [[b for b, _ in pairs], [a for _, a in pairs]]


def mean_error_bar(summary) -> tuple[float, float]:
    """Student-t error bar of a mean, cut at 0 for a positive mean (a positive quantity has no
    mass below 0; the table shows the full half-width)."""
    if summary.ci_low is None or summary.ci_high is None:
        return 0.0, 0.0
    below = summary.mean - summary.ci_low
    if summary.mean > 0:
        below = min(below, summary.mean)
    return below, summary.ci_high - summary.mean


def log_ticks(ax, lo: float, hi: float) -> None:
    """Plain tick labels (0.5, 1, 2, 5 ...) on a log y axis from ``lo`` to ``hi`` (> 0), not
    matplotlib's ``2 × 10⁰``; ticks at 1-2-5 steps, or at every 1..9 step when the range holds
    fewer than two of those, and at most about 8.  Leaves the axis as it is unless
    0 < lo < hi < inf."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    if not (0 < lo < hi < float("inf")):
        return

    decades = range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 1)
    for mantissas in ((1, 2, 5), range(1, 10)):
        ticks = [m * 10.0 ** e for e in decades for m in mantissas if lo <= m * 10.0 ** e <= hi]
        if len(ticks) >= 2:
            break
    if len(ticks) > 8:
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")] or ticks
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


#: one bar of :func:`relative_bars`: (x, ratio, interval low, interval high, significant)
Bar = tuple[float, float, float, float, bool]


def _env_bars(ax, analysis: Analysis, bench: str, cats: list[tuple[str, str]], j: int,
              env: str, color: str, bar_w: float) -> list[Bar]:
    """Draw environment ``env``'s bars (position ``j`` in each group) on ``ax``, each from 1
    (= the baseline) to its ratio, so a bar up is above the baseline and a bar down below it;
    returns (x, ratio, interval low, interval high, significant) of every bar drawn (a bound
    missing: the ratio), for the axis and the stars (:func:`_ratio_axis`)."""
    emulated = analysis.environments[env].emulated
    xs, ys, lo_err, hi_err, stars = [], [], [], [], []
    for i, (params, metric) in enumerate(cats):
        comparison = analysis.comparison(bench, params, metric, env)
        if comparison is None or comparison.ratio is None or comparison.ratio <= 0:
            continue
        xs.append(i - 0.4 + bar_w * (j + 0.5))
        ys.append(comparison.ratio)
        le, he = ratio_error_bar(comparison.ratio, comparison.ratio_ci)
        lo_err.append(le)
        hi_err.append(he)
        stars.append(comparison.verdict in (SLOWER, FASTER))
    if not xs:
        return []
    ax.bar(xs, [y - 1.0 for y in ys], bottom=1.0, width=bar_w * 0.95, color=color,
           hatch="//" if emulated else None, edgecolor="black" if emulated else color,
           linewidth=0.5, yerr=bar_errors(lo_err, hi_err), capsize=2,
           error_kw={"elinewidth": 0.8},
           label=env_header(analysis, env))
    return [(x, y, y - le, y + he, st) for x, y, le, he, st in zip(xs, ys, lo_err, hi_err, stars)]


def _ratio_axis(ax, bars: list[Bar]) -> None:
    """A log y axis for ratios (2× and 0.5× equally far from 1, and a bar at 0.02 as visible
    as one at 50) that always shows 1 and every bar with its interval, but stops at 3× beyond
    the extreme bars: an interval from a few very noisy samples can be 1000× wide (the table
    and exports keep it whole).  Plain tick labels (:func:`log_ticks`).  Then a star beyond
    the end of each significant bar's error bar, on the bar's side of 1, inside the axis.
    ``bars``: (x, ratio, interval low, interval high, significant) as :func:`_env_bars` gives."""
    rs = [r for _, r, _, _, _ in bars] + [1.0]
    lows = [lo for _, _, lo, _, _ in bars if lo > 0] + rs
    lo = max(min(lows), min(rs) / 3.0) / 1.2
    hi = min(max([h for _, _, _, h, _ in bars] + rs), max(rs) * 3.0) * 1.2
    ax.set_yscale("log", nonpositive="clip")
    ax.set_ylim(lo, hi)
    log_ticks(ax, lo, hi)
    for x, r, low, high, significant in bars:
        if not significant:
            continue
        end = high if r >= 1.0 else low
        if lo < end < hi:  # beyond the error bar's end
            outward = r >= 1.0
        else:  # the error bar leaves the axis: inside its edge
            end, outward = (hi, False) if r >= 1.0 else (lo, True)
        ax.annotate("*", (x, end), xytext=(0, 0 if outward else -4), textcoords="offset points",
                    ha="center", va="bottom" if outward else "top", fontsize=9)


def relative_bars(analysis: Analysis, fmt: str = "svg", keys=None) -> str | bytes | None:
    """Bar chart of every metric's geometric mean relative to the baseline (baseline = 1.0).

    One panel per benchmark (with its parameters), one group of bars per metric, one bar per
    non-baseline environment from 1 to the ratio of geometric means (dimensionless) on a log
    axis, and error bars = its confidence interval as in the table (Welch's t on ln values at the
    verdict's level; Fieller's for values ≤ 0; absent
    when unbounded or n < 2; :func:`ratio_error_bar`; the axis stops at 3× beyond the extreme
    bars, :func:`_ratio_axis`).  Tick labels carry ↑ (higher is better) or ↓ (lower is
    better), slanted when they would touch; a star marks a significant verdict (Holm-adjusted
    p < alpha); TCG environments are hatched and labelled "(TCG emulation)".
    keys: restrict to these (benchmark, params, metric) keys (default: every key; the report
    passes its scalar metrics, sweeps have their own figures).
    A ratio ≤ 0 (a metric whose mean can be 0 or negative) has no place on the log axis and is
    left to the tables.  Returns SVG text / PNG bytes, or None when there is no comparison with
    a positive ratio.
    """
    wanted = None if keys is None else set(keys)
    comps = [c for c in analysis.comparisons if c.ratio is not None and c.ratio > 0
             and (wanted is None or c.key in wanted)]
    if not comps:
        return None
    others = [e for e in analysis.others() if any(c.environment == e for c in comps)]
    colors = env_colors(analysis)
    panels: dict[str, list[tuple[str, str]]] = {}
    comp_keys = {c.key for c in comps}
    for bench, params, metric in sorted_keys(analysis.keys()):
        if (bench, params, metric) in comp_keys:
            panels.setdefault(bench, []).append((params, metric))
    nmax = max(len(v) for v in panels.values())
    width = min(18.0, max(6.0, 0.35 * nmax * max(1, len(others)) + 2.0))
    fig = new_figure(width, 2.9 * len(panels) + 0.6)
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    bar_w = 0.8 / max(1, len(others))
    with matplotlib.rc_context(RC):
        for ax, (bench, cats) in zip(axes, panels.items()):
            multi_params = len({p for p, _ in cats}) > 1
            x = np.arange(len(cats))
            bars = [b for j, env in enumerate(others)
                    for b in _env_bars(ax, analysis, bench, cats, j, env, colors[env], bar_w)]
            _ratio_axis(ax, bars)
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
            labels = []
            for params, metric in cats:
                summary = next(
                    (analysis.summary(bench, params, metric, e) for e in analysis.environment_order()
                     if analysis.summary(bench, params, metric, e)),
                    None,
                )
                mark = direction_mark(summary.higher_is_better) if summary else ""
                lab = f"{metric} {mark}"
                if multi_params:
                    lab += f"\n{params}"
                labels.append(lab)
            # about 15 characters of 9 pt text per inch; the axes take the width less about
            # 3.3 inches (y label, legend), a group of bars an n-th of that
            crowded = (len(cats) > 6
                       or max(len(t) for lab in labels for t in lab.split("\n")) / 15.0
                       > (width - 3.3) / len(cats))
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=30 if crowded else 0,
                               ha="right" if crowded else "center",
                               rotation_mode="anchor" if crowded else "default")
            title = bench if multi_params else params_label(bench, cats[0][0])
            ax.set_title(title)
            ax.set_ylabel(f"relative to {analysis.baseline}\n(1 = same; direction per metric)")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                      title="↑ higher is better\n↓ lower is better\n* slower or faster", title_fontsize=7)
    return render(fig, fmt)


def distributions(
    analysis: Analysis,
    observations: Iterable[Observation],
    fmt: str = "svg",
    max_points: int = 400,
    keys=None,
) -> list[tuple[str, str | bytes]]:
    """One figure per (benchmark, params, metric): individual samples per environment
    (``keys``: only these (benchmark, params, metric) keys; default all).

    Each environment gets a box plot of its valid samples (median, quartiles, 1.5 IQR whiskers)
    and a jittered strip of individual samples: valid ones filled, invalid ones hollow red
    circles.  Warm-up samples are not drawn.  At most ``max_points`` points per environment are
    drawn (a seeded random subset; the box always uses every valid sample).  Y axis in the
    metric's unit.  Returns a list of (title, SVG text / PNG bytes) in report order.
    """
    data: dict[tuple[str, str, str], dict[str, tuple[list[float], list[float]]]] = {}
    wanted = None if keys is None else set(keys)
    for o in observations:
        if o.warmup or (wanted is not None and (o.benchmark, o.params, o.metric) not in wanted):
            continue
        d = data.setdefault((o.benchmark, o.params, o.metric), {})
        valid, invalid = d.setdefault(o.environment, ([], []))
        if o.valid and o.value is not None and np.isfinite(o.value):
            valid.append(o.value)
        elif o.value is not None and np.isfinite(o.value):
            invalid.append(o.value)
        else:
            invalid.append(np.nan)
    colors = env_colors(analysis)
    order = analysis.environment_order()
    known = sorted_keys(analysis.keys())
    keys = [k for k in known if k in data] + [k for k in data if k not in set(known)]
    if wanted is not None:
        keys = [k for k in keys if k in wanted]
    out: list[tuple[str, str | bytes]] = []
    rng = np.random.default_rng(12345)
    for key in keys:
        bench, params, metric = key
        per_env = data[key]
        envs = [e for e in order if e in per_env] + sorted(e for e in per_env if e not in order)
        s0 = next((analysis.summary(bench, params, metric, e) for e in envs if analysis.summary(bench, params, metric, e)), None)
        unit = s0.unit if s0 else ""
        hib = s0.higher_is_better if s0 else False
        fig = new_figure(max(3.2, 1.2 * len(envs) + 1.5), 3.0)
        ax = fig.subplots()
        invalid_labelled = False
        with matplotlib.rc_context(RC):
            for i, env in enumerate(envs):
                valid, invalid = per_env[env]
                v = np.asarray(valid, dtype=float)
                if v.size:
                    ax.boxplot([v], positions=[i], widths=0.5, showfliers=False,
                               medianprops={"color": "black"}, boxprops={"color": "grey"})
                    shown = v if v.size <= max_points else rng.choice(v, max_points, replace=False)
                    jitter = rng.uniform(-0.15, 0.15, shown.size)
                    ax.scatter(i + jitter, shown, s=10, color=colors.get(env, "grey"), alpha=0.7,
                               zorder=3, label=None)
                inv = np.asarray([x for x in invalid if np.isfinite(x)], dtype=float)
                if inv.size:
                    shown = inv if inv.size <= max_points else rng.choice(inv, max_points, replace=False)
                    ax.scatter(i + rng.uniform(-0.15, 0.15, shown.size), shown, s=16,
                               facecolors="none", edgecolors="red", zorder=4,
                               label=None if invalid_labelled else "invalid (excluded)")
                    invalid_labelled = True
            ax.set_xticks(range(len(envs)))
            ax.set_xticklabels([env_header(analysis, e).replace(f" {TCG_MARK}", "\n(TCG)") for e in envs])
            ax.set_xlim(-0.6, len(envs) - 0.4)
            ax.set_ylabel(f"{metric} [{unit}] {direction_mark(hib)}")
            title = f"{params_label(bench, params)}: {metric}"
            ax.set_title(title)
            if ax.get_legend_handles_labels()[1]:
                ax.legend(fontsize=7, loc="best")
        out.append((title, render(fig, fmt)))
    return out


def cold_warm_bars(analysis: Analysis, fmt: str = "svg", keys=None) -> str | bytes | None:
    """Cold vs warm mean per environment, one panel per (benchmark, params, metric).

    Cold = first trial after a VM boot (``session_index == 0``), warm = later trials.  Bars show
    means in the metric's unit with Student-t CI error bars; the baseline's overall mean is a
    dashed line when it exists.  keys: restrict to these (benchmark, params, metric) keys
    (default: all).  Only keys where some environment has cold trials with valid samples are
    drawn; returns None when there is none (a warm-only or native-only campaign).
    """
    pool = sorted_keys(analysis.keys() if keys is None else keys)
    keys = [k for k in pool
            if any((s := analysis.summary(*k, e, GROUP_COLD)) is not None and s.n > 0
                   for e in analysis.environment_order())]
    if not keys:
        return None
    ncols = min(3, len(keys))
    nrows = -(-len(keys) // ncols)
    fig = new_figure(4.2 * ncols, 3.0 * nrows + 0.3)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(keys):]:
        ax.set_visible(False)
    with matplotlib.rc_context(RC):
        for ax, (bench, params, metric) in zip(axes, keys):
            envs = [e for e in analysis.environment_order()
                    if analysis.summary(bench, params, metric, e, GROUP_COLD)
                    or analysis.summary(bench, params, metric, e, GROUP_WARM)]
            unit, hib = "", False
            for gi, (group, color, hatch) in enumerate(((GROUP_COLD, "#4c72b0", None), (GROUP_WARM, "#dd8452", ".."))):
                xs, ys, errs = [], [], ([], [])
                for i, env in enumerate(envs):
                    s = analysis.summary(bench, params, metric, env, group)
                    if s is None or s.mean is None:
                        continue
                    unit, hib = s.unit, s.higher_is_better
                    xs.append(i - 0.2 + 0.4 * gi)
                    ys.append(s.mean)
                    for side, e in zip(errs, mean_error_bar(s)):
                        side.append(e)
                if xs:
                    ax.bar(xs, ys, width=0.38, yerr=bar_errors(*errs), capsize=2, color=color,
                           hatch=hatch,
                           edgecolor="black", linewidth=0.4, label=f"{group} (session index {'0' if group == GROUP_COLD else '> 0'})")
            sb = analysis.summary(bench, params, metric, analysis.baseline)
            if sb is not None and sb.mean is not None:
                ax.axhline(sb.mean, color="black", linestyle="--", linewidth=0.8, label=f"{analysis.baseline} (all)")
            ax.set_xticks(range(len(envs)))
            ax.set_xticklabels([env_header(analysis, e).replace(f" {TCG_MARK}", "\n(TCG)") for e in envs])
            ax.set_ylabel(f"{metric} [{unit}] {direction_mark(hib)}")
            ax.set_title(f"{params_label(bench, params)}: {metric}")
            ax.legend(fontsize=7, loc="best")
    return render(fig, fmt)
