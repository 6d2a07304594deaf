"""Figures of an :class:`~vhpc.analysis.Analysis` with matplotlib (Agg canvas, no pyplot state).

Every function returns the rendered figure — SVG text (``fmt="svg"``, text drawn as paths so no
font is needed to display it) or PNG bytes (``fmt="png"``) — or None when there is nothing to
draw.  Nothing is written to disk and no global matplotlib state is changed.

* :func:`relative_bars` — each metric relative to the baseline (1.0 = same), grouped per
  benchmark, one bar per non-baseline environment, the comparison's CI as error bars (the seeds' "time
  relative to native" figure).
* :func:`distributions` — individual samples and a box per environment for each metric; invalid
  samples drawn hollow and red.
* :func:`cold_warm_bars` — mean of cold (first after boot) vs warm trials per environment.
* :func:`family_figure` — a sweep (one quantity over message size) as curves: the mean per
  environment against the point, and the ratio to the baseline with its interval.
* :func:`family_distribution` — every sample of a sweep per point and environment.
"""

from __future__ import annotations

import io
import math
from typing import Iterable

import matplotlib
import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from vhpc.analysis import FASTER, GROUP_COLD, GROUP_WARM, SLOWER, Analysis  # noqa: E402
from vhpc.analysis.families import Family, sorted_keys  # noqa: E402
from vhpc.core.metrics import Observation  # noqa: E402
from vhpc.core.text import mathtext, plain  # noqa: E402
from vhpc.report import TCG_MARK, direction_mark, env_header, params_label  # noqa: E402

__all__ = ["relative_bars", "distributions", "cold_warm_bars", "render", "ratio_error_bar",
           "family_figure", "family_distribution", "LOG_SPAN"]

#: values spanning more than this factor (two decades) are drawn on a log axis
LOG_SPAN = 100.0

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
_RC = {"svg.fonttype": "path", "font.size": 9, "axes.titlesize": 10}


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
    out = _new_figure(*fig.get_size_inches())
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
    with matplotlib.rc_context(_RC):
        if fmt == "svg":
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None},
                        bbox_inches="tight")
            return buf.getvalue().decode("utf-8")
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        return buf.getvalue()


def _new_figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(_RC):
        return Figure(figsize=(width, height), layout="constrained")


def _env_colors(analysis: Analysis) -> dict[str, str]:
    return {e: _COLORS[i % len(_COLORS)] for i, e in enumerate(analysis.environment_order())}


def ratio_error_bar(ratio: float, ci: tuple[float | None, float | None]) -> tuple[float, float]:
    """(below, above) error-bar lengths for a bar at ``ratio`` from the comparison's own
    interval (the one in the table and exports); 0 where a bound is missing (unbounded or
    n < 2), never negative, and never reaching below 0 for a positive ratio."""
    lo, hi = ci
    below = max(0.0, ratio - lo) if lo is not None else 0.0
    if ratio > 0:
        below = min(below, ratio)
    return below, (max(0.0, hi - ratio) if hi is not None else 0.0)


def _mean_error_bar(s) -> tuple[float, float]:
    """Student-t error bar of a mean, cut at 0 for a positive mean (a positive quantity has no
    mass below 0; the table shows the full half-width)."""
    if s.ci_low is None or s.ci_high is None:
        return 0.0, 0.0
    below = s.mean - s.ci_low
    if s.mean > 0:
        below = min(below, s.mean)
    return below, s.ci_high - s.mean


def _env_bars(ax, analysis: Analysis, bench: str, cats: list[tuple[str, str]], j: int,
              env: str, color: str, bar_w: float) -> float:
    """Draw environment ``env``'s bars (position ``j`` in each group) on ``ax``; returns its
    largest ratio (0 when it has none)."""
    emulated = analysis.environments[env].emulated
    xs, ys, lo_err, hi_err, stars = [], [], [], [], []
    for i, (params, metric) in enumerate(cats):
        c = analysis.comparison(bench, params, metric, env)
        if c is None or c.ratio is None:
            continue
        xs.append(i - 0.4 + bar_w * (j + 0.5))
        ys.append(c.ratio)
        le, he = ratio_error_bar(c.ratio, c.ratio_ci)
        lo_err.append(le)
        hi_err.append(he)
        stars.append(c.verdict in (SLOWER, FASTER))
    if not xs:
        return 0.0
    ax.bar(xs, ys, width=bar_w * 0.95, color=color, hatch="//" if emulated else None,
           edgecolor="black" if emulated else color, linewidth=0.5, yerr=[lo_err, hi_err],
           capsize=2, error_kw={"elinewidth": 0.8}, label=env_header(analysis, env))
    for xx, yy, he, st in zip(xs, ys, hi_err, stars):
        if st:
            ax.text(xx, yy + he, "*", ha="center", va="bottom", fontsize=9)
    return max(ys)


def relative_bars(analysis: Analysis, fmt: str = "svg", keys=None) -> str | bytes | None:
    """Bar chart of every metric's mean relative to the baseline (baseline = 1.0).

    One panel per benchmark (with its parameters), one group of bars per metric, one bar per
    non-baseline environment with value = ratio of means (dimensionless) and error bars = its
    confidence interval as in the table (Fieller, log-delta or BCa; absent when unbounded or
    n < 2; :func:`ratio_error_bar`; the y axis stops at 3× the tallest bar).  Tick labels
    carry ↑ (higher is better) or ↓ (lower is better); a star marks a significant verdict (Holm-adjusted
    p < alpha); TCG environments are hatched and labelled "(TCG emulation)".
    keys: restrict to these (benchmark, params, metric) keys (default: every key; the report
    passes its scalar metrics, sweeps have their own figures).
    Returns SVG text / PNG bytes, or None when there is no comparison with a ratio.
    """
    wanted = None if keys is None else set(keys)
    comps = [c for c in analysis.comparisons if c.ratio is not None
             and (wanted is None or c.key in wanted)]
    if not comps:
        return None
    others = [e for e in analysis.others() if any(c.environment == e for c in comps)]
    colors = _env_colors(analysis)
    panels: dict[str, list[tuple[str, str]]] = {}
    comp_keys = {c.key for c in comps}
    for bench, params, metric in sorted_keys(analysis.keys()):
        if (bench, params, metric) in comp_keys:
            panels.setdefault(bench, []).append((params, metric))
    nmax = max(len(v) for v in panels.values())
    width = min(18.0, max(6.0, 0.35 * nmax * max(1, len(others)) + 2.0))
    fig = _new_figure(width, 2.9 * len(panels) + 0.6)
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    bar_w = 0.8 / max(1, len(others))
    with matplotlib.rc_context(_RC):
        for ax, (bench, cats) in zip(axes, panels.items()):
            multi_params = len({p for p, _ in cats}) > 1
            x = np.arange(len(cats))
            rmax = max(_env_bars(ax, analysis, bench, cats, j, env, colors[env], bar_w)
                       for j, env in enumerate(others))
            # an interval from a few very noisy samples can be 1000× wide: cut the axis at
            # 3× the tallest bar (the table and exports keep the full interval)
            bottom, top = ax.get_ylim()
            ax.set_ylim(bottom, min(top, 3.0 * max(rmax, 1.0)))
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
            labels = []
            for params, metric in cats:
                s = next(
                    (analysis.summary(bench, params, metric, e) for e in analysis.environment_order()
                     if analysis.summary(bench, params, metric, e)),
                    None,
                )
                mark = direction_mark(s.higher_is_better) if s else ""
                lab = f"{metric} {mark}"
                if multi_params:
                    lab += f"\n{params}"
                labels.append(lab)
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=30 if len(cats) > 6 else 0, ha="right" if len(cats) > 6 else "center")
            title = bench if multi_params else params_label(bench, cats[0][0])
            ax.set_title(title)
            ax.set_ylabel(f"relative to {analysis.baseline}\n(1.0 = same; direction per metric)")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                      title="↑ higher is better\n↓ lower is better\n* significant (Holm)", title_fontsize=7)
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
    colors = _env_colors(analysis)
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
        fig = _new_figure(max(3.2, 1.2 * len(envs) + 1.5), 3.0)
        ax = fig.subplots()
        invalid_labelled = False
        with matplotlib.rc_context(_RC):
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
    fig = _new_figure(4.2 * ncols, 3.0 * nrows + 0.3)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(keys):]:
        ax.set_visible(False)
    with matplotlib.rc_context(_RC):
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
                    for side, e in zip(errs, _mean_error_bar(s)):
                        side.append(e)
                if xs:
                    ax.bar(xs, ys, width=0.38, yerr=errs, capsize=2, color=color, hatch=hatch,
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


def size_sweeps(analysis: Analysis, fmt: str = "svg", min_points: int = 3) -> list[tuple[str, str | bytes]]:
    """The seeds' "latency / bandwidth vs message size" figures (seed 001 Fig. 1-3, seed 004
    Fig. 1-5): for metrics named ``<quantity>_<bytes>`` (the MPI benchmarks' ``lat_8``,
    ``bw_avg_1048576``, ...), one line per environment of the mean against the message size
    (log-log), with 95 % CI bars.  Returns ``[(title, figure)]``, one per (benchmark, params,
    quantity) with at least ``min_points`` sizes."""
    import re

    series: dict[tuple[str, str, str], dict[str, list[tuple[int, object]]]] = {}
    for s in analysis.summaries:
        if s.group != "all" or s.mean is None:
            continue
        m = re.fullmatch(r"(.+)_(\d+)", s.metric)
        if not m:
            continue
        key = (s.benchmark, s.params, m.group(1))
        series.setdefault(key, {}).setdefault(s.environment, []).append((int(m.group(2)), s))
    colors = _env_colors(analysis)
    out = []
    for (bench, params, quantity), by_env in sorted(series.items()):
        if max(len(v) for v in by_env.values()) < min_points:
            continue
        fig = _new_figure(6.0, 3.8)
        ax = fig.add_subplot()
        unit = ""
        for env in analysis.environment_order():
            pts = sorted(by_env.get(env, []), key=lambda p: p[0])
            if not pts:
                continue
            xs = [max(x, 1) for x, _ in pts]
            ys = [s.mean for _, s in pts]
            bars = [_mean_error_bar(s) for _, s in pts]
            # log axis: the lower bar must end strictly above 0
            lo = [min(b, 0.999 * s.mean) for (b, _), (_, s) in zip(bars, pts)]
            hi = [h for _, h in bars]
            unit = pts[0][1].unit
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=3, capsize=2, color=colors[env],
                        label=env_header(analysis, env))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size [bytes] (0 B drawn at 1 B)")
        ax.set_ylabel(f"{quantity} [{unit}]")
        title = f"{params_label(bench, params)}: {quantity} vs message size"
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        out.append((title, render(fig, fmt)))
    return out


def _span_log(values: list[float]) -> bool:
    """True when positive ``values`` span more than :data:`LOG_SPAN` (two decades)."""
    pos = [v for v in values if v is not None and v > 0]
    return len(pos) > 1 and max(pos) / min(pos) > LOG_SPAN


def _size_label(x: float) -> str:
    """Compact tick label of a size in bytes: 1, 16, 256, 4K, 64K, 1M."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if x >= scale:
            return f"{x / scale:g}{suffix}"
    return f"{x:g}"


def _size_axis(ax, xs: list[float]) -> None:
    """Log2 x axis with ticks at powers of two labelled in bytes (K = KiB, M = MiB), at most
    about 10 of them."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    lo, hi = int(np.floor(np.log2(max(min(xs), 1)))), int(np.ceil(np.log2(max(max(xs), 1))))
    step = max(1, -(-(hi - lo) // 9))
    ticks = [2.0 ** e for e in range(lo, hi + 1, step)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _size_label(v)))
    ax.xaxis.set_minor_locator(NullLocator())


def _ratio_ticks(ax, lo: float, hi: float) -> None:
    """Plain tick labels (0.5, 1, 2, 5 ...) on a log ratio axis from ``lo`` to ``hi``."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ticks = [m * 10.0 ** e for e in range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 1)
             for m in (1, 2, 5) if lo <= m * 10.0 ** e <= hi]
    if len(ticks) > 8:
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")] or ticks
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


def _sweep_points(fam: Family, lookup, attr: str) -> tuple[list[float], list]:
    """(x as drawn: 0 B at 1 on a log axis; the object) for each point of the sweep ``fam``
    whose ``lookup(params, metric)`` gives an object with ``attr`` set (a summary's mean, a
    comparison's ratio); two empty lists when none has."""
    pts = [(max(x, 1), o) for x, p, m in fam.points
           if x is not None and (o := lookup(p, m)) is not None and getattr(o, attr) is not None]
    return [x for x, _ in pts], [o for _, o in pts]


def _x_axis(ax, fam: Family, xs: list[float]) -> None:
    """A size sweep's x axis (:func:`_size_axis`); a parameter sweep's: log2 with ticks at
    its values when they span a factor of 8 or more, else linear with ticks at its values."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    if fam.by_size:
        _size_axis(ax, xs)
        return
    if min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(xs))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def family_figure(analysis: Analysis, fam: Family, fmt: str = "svg") -> str | bytes | None:
    """A sweep as the seeds draw it (seed 001 Fig. 1-3, seed 004 Fig. 1-6): two panels.

    Left: the mean of ``fam``'s quantity (its unit) against the point (message size in bytes,
    log2 axis, 0 B drawn at 1 B; or the swept parameter's value, log2 when it spans a factor
    of 8), one line per environment including the baseline, error bars
    = the Student-t interval of each mean; y on a log axis when the means span more than two
    decades (:data:`LOG_SPAN`).  Right: the ratio env / baseline per point with its interval
    (the table's: Fieller, log-delta or BCa), a dashed line at 1; filled markers where the
    point's verdict is significant (Holm), hollow otherwise.  Returns SVG text / PNG bytes, or
    None when ``fam`` is not a sweep or has no mean.
    """
    if not fam.sweep:
        return None
    colors = _env_colors(analysis)
    fig = _new_figure(10.0, 3.3)
    ax, axr = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.15, 1.0]})
    means: list[float] = []
    drawn = False
    with matplotlib.rc_context(_RC):
        for env in analysis.environment_order():
            xs, sums = _sweep_points(
                fam, lambda p, m: analysis.summary(fam.benchmark, p, m, env), "mean")
            if not xs:
                continue
            ys = [s.mean for s in sums]
            means += ys
            bars = [_mean_error_bar(s) for s in sums]
            ax.errorbar(xs, ys, yerr=[[b for b, _ in bars], [h for _, h in bars]], marker="o",
                        ms=3, capsize=2, color=colors.get(env, "grey"), linewidth=1.2,
                        label=env_header(analysis, env) + (" (baseline)" if env == analysis.baseline else ""))
            drawn = True
        if not drawn:
            return None
        allx = [max(x, 1) for x in fam.xs if x is not None]
        _x_axis(ax, fam, allx)
        if _span_log(means) and min(means) > 0:
            ax.set_yscale("log")
            ax.set_ylim(bottom=min(means) / 4)  # a bar reaching 0 must not stretch the axis
        ax.set_xlabel("message size [bytes; K = KiB, M = MiB] (0 B drawn at 1)" if fam.by_size
                      else fam.parameter)
        ax.set_ylabel(f"{fam.quantity} [{fam.unit}] {direction_mark(fam.higher_is_better)}")
        ax.set_title(f"{fam.label}: {fam.quantity} vs {fam.parameter}")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        ratios: list[float] = []
        for env in analysis.others():
            xs, comps = _sweep_points(
                fam, lambda p, m: analysis.comparison(fam.benchmark, p, m, env), "ratio")
            if not xs:
                continue
            ys = [c.ratio for c in comps]
            ratios += ys
            err = [ratio_error_bar(c.ratio, c.ratio_ci) for c in comps]
            color = colors.get(env, "grey")
            axr.errorbar(xs, ys, yerr=[[b for b, _ in err], [h for _, h in err]], color=color,
                         capsize=2, linewidth=1.0, marker=None, label=env_header(analysis, env))
            sig = [c.verdict in (SLOWER, FASTER) for c in comps]
            axr.scatter([x for x, g in zip(xs, sig) if g], [y for y, g in zip(ys, sig) if g],
                        s=14, color=color, zorder=3)
            axr.scatter([x for x, g in zip(xs, sig) if not g], [y for y, g in zip(ys, sig) if not g],
                        s=14, facecolors="white", edgecolors=color, zorder=3)
        axr.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        _x_axis(axr, fam, allx)
        if ratios and min(ratios) > 0:
            # ratios on a log axis (2× and 0.5× equally far from 1); an interval from a few
            # noisy samples can be huge: the axis stops at 3× beyond the extreme ratios
            axr.set_yscale("log")
            lo, hi = min(min(ratios), 1.0) / 3.0, max(max(ratios), 1.0) * 3.0
            axr.set_ylim(lo, hi)
            _ratio_ticks(axr, lo, hi)
        axr.set_xlabel("message size [bytes]" if fam.by_size else fam.parameter)
        axr.set_ylabel(f"ratio to {analysis.baseline} (1 = same)")
        axr.set_title(f"ratio per {'size' if fam.by_size else fam.parameter} (filled: significant, Holm)")
        axr.grid(True, which="major", alpha=0.3)
        if ratios and len(analysis.others()) > 1:
            axr.legend(fontsize=7, loc="best")
    return render(fig, fmt)


def family_distribution(analysis: Analysis, observations: Iterable[Observation], fam: Family,
                        fmt: str = "svg", max_points: int = 400) -> str | bytes | None:
    """Every valid sample of ``fam`` per point and environment (a strip per point, environments
    side by side; invalid samples hollow red), points in ascending order; y in the metric's
    unit, on a log axis when the values span more than two decades.  At most ``max_points``
    samples per (point, environment) are drawn (a seeded random subset).  Warm-up samples are
    not drawn.  Returns SVG text / PNG bytes, or None when there is no sample."""
    index = {(p, m): i for i, (_, p, m) in enumerate(fam.points)}
    envs = analysis.environment_order()
    data: dict[tuple[int, str], tuple[list[float], list[float]]] = {}
    for o in observations:
        if o.warmup or o.benchmark != fam.benchmark or (o.params, o.metric) not in index:
            continue
        valid, invalid = data.setdefault((index[(o.params, o.metric)], o.environment), ([], []))
        if o.value is None or not np.isfinite(o.value):
            continue
        (valid if o.valid else invalid).append(float(o.value))
    if not data:
        return None
    envs = [e for e in envs if any(k[1] == e for k in data)] + sorted(
        {k[1] for k in data} - set(envs))
    colors = _env_colors(analysis)
    rng = np.random.default_rng(12345)
    width = min(14.0, max(4.0, 0.45 * len(fam.points) * max(1, len(envs)) ** 0.5 + 1.5))
    fig = _new_figure(width, 3.0)
    ax = fig.subplots()
    step = 0.7 / max(1, len(envs))
    values: list[float] = []
    with matplotlib.rc_context(_RC):
        for j, env in enumerate(envs):
            xs, ys, ixs, iys = [], [], [], []
            for i in range(len(fam.points)):
                valid, invalid = data.get((i, env), ([], []))
                v = np.asarray(valid)
                if v.size > max_points:
                    v = rng.choice(v, max_points, replace=False)
                off = -0.35 + step * (j + 0.5)
                xs += list(i + off + rng.uniform(-step / 4, step / 4, v.size))
                ys += list(v)
                ixs += [i + off] * len(invalid)
                iys += invalid
            values += ys
            ax.scatter(xs, ys, s=8, color=colors.get(env, "grey"), alpha=0.7,
                       label=env_header(analysis, env))
            if iys:
                ax.scatter(ixs, iys, s=14, facecolors="none", edgecolors="red",
                           label=f"{env}: invalid (excluded)")
        if _span_log(values) and min(values) > 0:
            ax.set_yscale("log")
        ax.set_xticks(range(len(fam.points)))
        ax.set_xticklabels([fam.fmt_x(x) if x is not None else m for x, _, m in fam.points],
                           rotation=45 if len(fam.points) > 8 else 0, ha="right" if len(fam.points) > 8 else "center")
        ax.set_xlim(-0.6, len(fam.points) - 0.4)
        ax.set_ylabel(f"{fam.quantity} [{fam.unit}] {direction_mark(fam.higher_is_better)}")
        ax.set_title(f"{fam.label}: {fam.quantity}, every sample")
        ax.legend(fontsize=7, loc="best")
    return render(fig, fmt)
