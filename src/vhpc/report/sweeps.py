"""Figures of benchmarks swept over a size: the seeds' "latency / bandwidth vs message size"
plots and a benchmark family's curves (matplotlib, Agg canvas, no pyplot state).

As in :mod:`vhpc.report.figures`, every function returns the rendered figure (SVG text or PNG
bytes) or None when there is nothing to draw; nothing is written to disk.

* :func:`family_figure` — a sweep (one quantity over message size) as curves: the mean per
  environment against the point, and the ratio to the baseline with its interval.
* :func:`family_distribution` — every sample of a sweep per point and environment.
"""

from __future__ import annotations

from typing import Iterable

import matplotlib
import numpy as np

from vhpc.analysis import FASTER, SLOWER, Analysis
from vhpc.analysis.families import Family
from vhpc.core.metrics import Observation
from vhpc.report import direction_mark, env_header
from vhpc.report.figures import (RC, bar_errors, env_colors, log_ticks, mean_error_bar,
                                 new_figure, ratio_error_bar, render)

__all__ = ["family_figure", "family_distribution", "size_axis", "shade_shared",
           "LOG_SPAN", "ZERO_AT"]

#: values spanning more than this factor (two decades) are drawn on a log axis
LOG_SPAN = 100.0
#: where 0 B sits on a log2 size axis: one octave left of 1 B, its tick labelled "0", so a
#: zero-byte message is never drawn on top of the 1 B point
ZERO_AT = 0.5


def _at(x: float) -> float:
    """A size as drawn on a log2 axis: 0 B at :data:`ZERO_AT`, others where they are."""
    return x if x > 0 else ZERO_AT


def _span_log(values: list[float]) -> bool:
    """True when positive ``values`` span more than :data:`LOG_SPAN` (two decades)."""
    pos = [v for v in values if v is not None and v > 0]
    return len(pos) > 1 and max(pos) / min(pos) > LOG_SPAN


def _size_label(x: float) -> str:
    """Compact tick label of a size in bytes: 0, 1, 16, 256, 4K, 64K, 1M (0 B sits at
    :data:`ZERO_AT`)."""
    if x < 1:
        return "0"
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if x >= scale:
            return f"{x / scale:g}{suffix}"
    return f"{x:g}"


def size_axis(ax, xs: list[float]) -> None:
    """Log2 x axis with ticks at powers of two labelled in bytes (K = KiB, M = MiB), at most
    about 10 of them."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    lo, hi = int(np.floor(np.log2(max(min(xs), 1)))), int(np.ceil(np.log2(max(max(xs), 1))))
    step = max(1, -(-(hi - lo) // 9))
    ticks = [2.0 ** e for e in range(lo, hi + 1, step)]
    if min(xs) < 1:  # 0 B, drawn apart from 1 B
        ticks.insert(0, ZERO_AT)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _size_label(v)))
    ax.xaxis.set_minor_locator(NullLocator())


def _sweep_points(fam: Family, lookup, attr: str) -> tuple[list[float], list]:
    """(x as drawn: 0 B at :data:`ZERO_AT` on a log axis; the object) for each point of the
    sweep ``fam``
    whose ``lookup(params, metric)`` gives an object with ``attr`` set (a summary's mean, a
    comparison's ratio); two empty lists when none has."""
    pts = [(_at(x) if fam.by_size else x, o) for x, p, m in fam.points
           if x is not None and (o := lookup(p, m)) is not None and getattr(o, attr) is not None]
    return [x for x, _ in pts], [o for _, o in pts]


def _x_axis(ax, fam: Family, xs: list[float]) -> None:
    """A size sweep's x axis (:func:`size_axis`); a parameter sweep's: log2 with ticks at
    its values when they span a factor of 8 or more, else linear with ticks at its values."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    if fam.by_size:
        size_axis(ax, xs)
        return
    if min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(xs))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def shade_shared(ax, xs: Iterable[float], label: bool = True) -> None:
    """Shade the points ``xs`` on ``ax`` (ranks of different nodes or guests shared a host
    CPU there), named once in the legend (``label``), never in text over the data."""
    for k, x in enumerate(xs):
        lo, hi = (x / 2 ** 0.3, x * 2 ** 0.3) if ax.get_xscale() == "log" else (x - 0.3, x + 0.3)
        ax.axvspan(lo, hi, color="#f4c7c3", alpha=0.6, zorder=0,
                   label="shaded: CPUs shared between nodes (contention, not scaling)"
                   if label and k == 0 else None)


def _log_error_bar(s) -> tuple[float, float]:
    """The error bar (below, above) of a geometric mean from its ln-scale interval; none (0,
    0) below 3 runs or for an interval wider than :data:`vhpc.core.intervals.WIDE_FACTOR`
    times (the table prints none then either)."""
    from vhpc.core import intervals

    if s.gmean_low is None or intervals.interval_hidden(s.n, s.gmean_low, s.gmean_high):
        return 0.0, 0.0
    return s.gmean - s.gmean_low, s.gmean_high - s.gmean


def _mean_curves(analysis: Analysis, fam: Family) -> tuple[list[tuple], list[float]]:
    """Per environment with a point of ``fam`` (in the analysis' order): (environment, x
    values, summaries), and every mean of them."""
    means: list[float] = []
    curves = []
    for env in analysis.environment_order():
        xs, sums = _sweep_points(
            fam, lambda p, m: analysis.summary(fam.benchmark, p, m, env), "mean")
        if xs:
            curves.append((env, xs, sums))
            means += [s.mean for s in sums]
    return curves, means


def _draw_means(ax, analysis: Analysis, curves: list[tuple], logy: bool, floor: float,
                colors: dict[str, str]) -> float:
    """One line per environment of ``curves``, the baseline's labelled so: means with their
    Student-t bars, or on a log axis (``logy``) geometric means with their ln-scale bars.
    Returns the lowest drawn bound (at most ``floor``) on a log axis, else ``floor``."""
    for env, xs, sums in curves:
        ys = [s.gmean if logy else s.mean for s in sums]
        bars = [_log_error_bar(s) if logy else mean_error_bar(s) for s in sums]
        if logy:
            floor = min([floor, *(y - b for y, (b, _) in zip(ys, bars) if b)])
        ax.errorbar(xs, ys, yerr=bar_errors([b for b, _ in bars], [h for _, h in bars]),
                    marker="o",
                    ms=3, capsize=2, color=colors.get(env, "grey"), linewidth=1.2,
                    label=env_header(analysis, env) + (" (baseline)" if env == analysis.baseline else ""))
    return floor


def _label_means(ax, fam: Family) -> None:
    """The means panel's axis labels (message size in bytes, 0 B left of 1 B where drawn; or
    the swept parameter), quantity with unit and direction, title and grid."""
    zero = fam.by_size and 0 in fam.xs
    ax.set_xlabel(("message size [bytes; K = KiB, M = MiB]" + (" (0 B left of 1 B)" if zero
                                                               else "")) if fam.by_size
                  else fam.parameter)
    ax.set_ylabel(f"{fam.quantity} [{fam.unit}] {direction_mark(fam.higher_is_better)}")
    ax.set_title(f"{fam.label}: {fam.quantity} vs {fam.parameter}")
    ax.grid(True, which="major", alpha=0.3)


def _draw_ratios(axr, analysis: Analysis, fam: Family, allx: list[float], shade: list[float],
                 colors: dict[str, str]) -> None:
    """The ratio panel: env / baseline per point with the table's interval, filled where the
    point's verdict is slower or faster, hollow otherwise; a dashed line at 1; a log axis 3×
    beyond the extreme ratios when every ratio is positive (2× and 0.5× equally far from 1; an
    interval from a few noisy samples can be huge); the ``shade`` points shaded."""
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
        axr.errorbar(xs, ys, yerr=bar_errors([b for b, _ in err], [h for _, h in err]),
                     color=color,
                     capsize=2, linewidth=1.0, marker=None, label=env_header(analysis, env))
        sig = [c.verdict in (SLOWER, FASTER) for c in comps]
        axr.scatter([x for x, g in zip(xs, sig) if g], [y for y, g in zip(ys, sig) if g],
                    s=14, color=color, zorder=3)
        axr.scatter([x for x, g in zip(xs, sig) if not g], [y for y, g in zip(ys, sig) if not g],
                    s=14, facecolors="white", edgecolors=color, zorder=3)
    axr.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    _x_axis(axr, fam, allx)
    if ratios and min(ratios) > 0:
        axr.set_yscale("log")
        lo, hi = min(min(ratios), 1.0) / 3.0, max(max(ratios), 1.0) * 3.0
        axr.set_ylim(lo, hi)
        log_ticks(axr, lo, hi)
    shade_shared(axr, shade, label=False)
    axr.set_xlabel("message size [bytes]" if fam.by_size else fam.parameter)
    axr.set_ylabel(f"ratio to {analysis.baseline} (1 = same)")
    axr.set_title(f"ratio per {'size' if fam.by_size else fam.parameter} (filled: slower or faster)")
    axr.grid(True, which="major", alpha=0.3)
    if ratios and len(analysis.others()) > 1:
        axr.legend(fontsize=7, loc="best")


def family_figure(analysis: Analysis, fam: Family, fmt: str = "svg",
                  shared_x: Iterable[float] = ()) -> str | bytes | None:
    """A sweep as the seed papers draw it (Youseff et al., VTDC 2006, Fig. 1-3; Lange et al.,
    VEE 2011, Fig. 1-6): two panels.

    Left: the mean of ``fam``'s quantity (its unit) against the point (message size in bytes,
    log2 axis, 0 B one octave left of 1 B; or the swept parameter's value, log2 when it spans
    a factor of 8), one line per environment including the baseline, error bars
    = the Student-t interval of each mean; y on a log axis when the means span more than two
    decades (:data:`LOG_SPAN`), then the geometric means with their ln-scale intervals (the
    table's; none from fewer than 3 runs or wider than 1000 times), the axis' floor below
    every drawn bound.  Right: the ratio env / baseline per point with its interval
    (the table's: Welch's t on ln values, Fieller's for values ≤ 0), a dashed line at 1; filled markers where the
    point's verdict is significant (Holm), hollow otherwise.  ``shared_x``: points whose ranks
    of different nodes or guests shared a host CPU, shaded in both panels.  Returns SVG text /
    PNG bytes, or None when ``fam`` is not a sweep or has no mean.
    """
    if not fam.sweep:
        return None
    colors = env_colors(analysis)
    compare = bool(analysis.others())  # one environment: its curve, no ratio panel
    fig = new_figure(10.0 if compare else 5.6, 3.3)
    if compare:
        ax, axr = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.15, 1.0]})
    else:
        ax, axr = fig.add_subplot(), None
    curves, means = _mean_curves(analysis, fam)
    # a log axis: every curve's geometric mean with its ln-scale interval (positive bounds,
    # the table's), so no whisker runs into the axis' floor
    logy = bool(means) and _span_log(means) and min(means) > 0 \
        and all(s.gmean is not None for _, _, sums in curves for s in sums)
    floor = min(means) / 4 if logy else 0.0
    with matplotlib.rc_context(RC):
        if not curves:
            return None
        floor = _draw_means(ax, analysis, curves, logy, floor, colors)
        allx = [_at(x) if fam.by_size else x for x in fam.xs if x is not None]
        _x_axis(ax, fam, allx)
        if logy:
            ax.set_yscale("log")
            ax.set_ylim(bottom=floor / 1.5)  # below every drawn interval
            log_ticks(ax, *ax.get_ylim())
        _label_means(ax, fam)
        shade = sorted(set(shared_x))
        shade_shared(ax, shade)
        ax.legend(fontsize=7, loc="best")
        if axr is None:
            return render(fig, fmt)
        _draw_ratios(axr, analysis, fam, allx, shade, colors)
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
    colors = env_colors(analysis)
    rng = np.random.default_rng(12345)
    width = min(14.0, max(4.0, 0.45 * len(fam.points) * max(1, len(envs)) ** 0.5 + 1.5))
    fig = new_figure(width, 3.0)
    ax = fig.subplots()
    step = 0.7 / max(1, len(envs))
    values: list[float] = []
    with matplotlib.rc_context(RC):
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
            log_ticks(ax, *ax.get_ylim())
        ax.set_xticks(range(len(fam.points)))
        ax.set_xticklabels([fam.fmt_x(x) if x is not None else m for x, _, m in fam.points],
                           rotation=45 if len(fam.points) > 8 else 0, ha="right" if len(fam.points) > 8 else "center")
        ax.set_xlim(-0.6, len(fam.points) - 0.4)
        ax.set_ylabel(f"{fam.quantity} [{fam.unit}] {direction_mark(fam.higher_is_better)}")
        ax.set_title(f"{fam.label}: {fam.quantity}, every sample")
        ax.legend(fontsize=7, loc="best")
    return render(fig, fmt)
