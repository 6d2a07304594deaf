"""A study's figure filled from an :class:`~vhpc.analysis.Analysis`: the points (x, y and the
interval per point) that :mod:`vhpc.report.studyfig` draws and ``results.json`` stores.

:func:`figure_data` applies a :class:`~vhpc.campaign.figures.FigureSpec` (sources explained
there): per panel, the summaries (or, for a relative panel, the comparisons against the
baseline) whose benchmark and metric match, grouped into series; numeric x values sorted,
others in report order.  y is the mean with its Student-t interval (on a panel the paper drew
with a log y axis: the geometric mean with its interval on the ln scale, as the table gives it,
whose bounds never fall to 0), or the ratio to the baseline with its interval (as in the table:
the ratio of geometric means, Welch's t on ln values).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from vhpc.analysis.results import GROUP_ALL, GROUP_COLD, GROUP_WARM, Analysis
from vhpc.campaign.figures import FigureSpec, Panel


#: x label of an environment's trials on a cold/warm axis when it has no VM sessions (native)
ALL_TRIALS = "all trials (no VM boot)"


@dataclass(frozen=True)
class Point:
    """One point: ``x`` (number or label), ``y``, its interval ``low``/``high`` (None when
    n < 2 or unbounded), ``n`` samples, ``emulated`` (TCG)."""

    x: float | str
    y: float
    low: float | None
    high: float | None
    n: int
    emulated: bool = False


@dataclass
class Series:
    """One series of a panel: its ``label`` and points in x order."""

    label: str
    points: list[Point] = field(default_factory=list)


@dataclass
class PanelData:
    """One drawn panel: titles, axis labels and scales, ``relative`` (y = ratio to
    ``baseline``), ``unit`` of y, its series."""

    title: str
    xlabel: str
    ylabel: str
    xlog: bool
    ylog: bool
    relative: bool
    numeric_x: bool
    unit: str
    series: list[Series]
    metrics: list[str] = field(default_factory=list)
    bench: str = "*"
    baseline_name: str = ""
    fit: dict | None = None  # memory profile: {"slope", "intercept", "r2", "n"}
    vlines: list[float] = field(default_factory=list)  # class boundaries on x


@dataclass
class FigureData:
    """A study's figure filled with data: seed, figure number, title, baseline, panels;
    ``emulated`` when any environment ran under TCG."""

    seed: str
    number: str
    title: str
    baseline: str
    panels: list[PanelData]
    emulated: bool = False

    @property
    def caption(self) -> str:
        """"seed 000 Fig. 2: title"."""
        return f"seed {self.seed} {self.number}: {self.title}"

    def empty(self) -> bool:
        """True when no panel holds a point."""
        return not any(s.points for p in self.panels for s in p.series)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: seed, figure, title, baseline, panels with x/y axes and series of
        points (x, y, low, high, n)."""
        return {"seed": self.seed, "figure": self.number, "title": self.title,
                "baseline": self.baseline, "emulated": self.emulated,
                "panels": [{"title": p.title, "x": {"label": p.xlabel, "log": p.xlog,
                                                     "numeric": p.numeric_x},
                            "y": {"label": p.ylabel, "log": p.ylog, "unit": p.unit,
                                  "relative_to": p.baseline_name if p.relative else None},
                            "fit": p.fit,
                            "series": [{"label": s.label, "points": [asdict(pt) for pt in s.points]}
                                       for s in p.series]}
                           for p in self.panels]}


def _num(v: str) -> float | str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    return int(f) if f.is_integer() else f


def _params(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)


def _param(bench: str, params: str, name: str) -> str | None:
    """Parameter ``name`` of a trial: its override in ``params`` (stored parameter strings
    hold only overrides), else the benchmark's declared default (None: neither)."""
    v = _params(params).get(name)
    if v is not None:
        return v
    from vhpc import benchmarks

    b = benchmarks.REGISTRY.get(bench)
    default = next((p.default for p in (b.params if b else ()) if p.name == name), None)
    return None if default is None else str(default)


def _source(src: str, bench: str, params: str, metric: str, env: str, group: str,
            ymatch: re.Match) -> str | None:
    """The value of one source (module docstring of vhpc.campaign.figures) for a summary."""
    parts = []
    for one in src.split("&"):
        kind, _, arg = one.partition(":")
        if kind == "env":
            if arg:
                m = re.search(arg, env)
                if not m:
                    return None
                parts.append(m.group(1) if m.groups() else m.group(0))
            else:
                parts.append(env)
        elif kind == "param":
            v = _param(bench, params, arg)
            parts.append(f"{arg}={v}" if len(src.split("&")) > 1 and v is not None else v)
            if v is None:
                return None
        elif kind == "metric":
            parts.append(ymatch.group(1) if ymatch.groups() else metric)
        elif kind == "benchmark":
            parts.append(bench)
        elif kind == "group":
            parts.append(group)
        else:
            raise ValueError(f"unknown figure source {one!r}")
    return " / ".join(parts)


def figure_data(spec: FigureSpec, analysis: Analysis) -> FigureData:
    """Fill ``spec`` from ``analysis`` (module docstring)."""
    out = FigureData(spec.seed, spec.number, spec.title, analysis.baseline, [],
                     emulated=bool(analysis.emulated()))
    for panel in spec.panels:
        out.panels.extend(_panel(panel, analysis))
    return out


def _panel(panel: Panel, analysis: Analysis) -> list[PanelData]:
    ymatch_re = re.compile(panel.y)
    labels = dict(panel.labels)
    by_group = "group" in (panel.x, panel.series)
    groups = (GROUP_COLD, GROUP_WARM) if by_group else (GROUP_ALL,)
    # cold/warm x: an environment without sessions (native) is drawn with all its trials
    sessions = {s.environment for s in analysis.summaries if s.group != GROUP_ALL}
    if by_group:
        labels.setdefault(GROUP_ALL, ALL_TRIALS)
    split: dict[str, dict[str, list[Point]]] = {}
    units: dict[str, str] = {}
    metrics: dict[str, list[str]] = {}
    envs = analysis.environments
    raw_of: dict[str, str] = {}
    m = re.fullmatch(r"[\w|]+", panel.y) or re.search(r"\(([\w|]+)\)", panel.y)
    alts = (m.group(1) if m and m.groups() else m.group(0)).split("|") if m else []
    for s in analysis.summaries:
        if s.mean is None or (s.group not in groups and not (
                by_group and s.group == GROUP_ALL and s.environment not in sessions)):
            continue
        if not fnmatch.fnmatchcase(s.benchmark, panel.bench):
            continue
        m = ymatch_re.fullmatch(s.metric)
        if not m:
            continue
        if panel.relative:
            if s.environment == analysis.baseline:
                continue
            c = analysis.comparison(s.benchmark, s.params, s.metric, s.environment)
            if c is None or c.ratio is None:
                continue
            y, lo, hi = c.ratio, c.ratio_ci[0], c.ratio_ci[1]
        elif panel.ylog and s.gmean is not None:  # a log axis: the geometric mean and its
            # interval on the ln scale (the table's), whose bounds stay above 0
            y, lo, hi = s.gmean, s.gmean_low, s.gmean_high
        else:
            y, lo, hi = s.mean, s.ci_low, s.ci_high
        args = (s.benchmark, s.params, s.metric, s.environment, s.group, m)
        x = _source(panel.x, *args)
        series = _source(panel.series, *args)
        key = _source(panel.split, *args) if panel.split else ""
        if key and panel.split.startswith("param:") and "&" not in panel.split:
            key = f"{panel.split[6:]}={key}"  # "threads=4", not a bare "4", in the title
        if x is None or series is None or key is None:
            continue
        raw_of.setdefault(labels.get(x, x), x)
        x = labels.get(x, x)
        info = envs.get(s.environment)
        split.setdefault(key, {}).setdefault(series, []).append(
            Point(_num(x), y, lo, hi, s.n, bool(info and info.emulated)))
        units.setdefault(key, s.unit)
        metrics.setdefault(key, [])
        if s.metric not in metrics[key]:
            metrics[key].append(s.metric)
    out = []
    for key, by_series in split.items():
        numeric = all(isinstance(p.x, (int, float)) for pts in by_series.values() for p in pts)
        order: dict[Any, Any] = {}
        for pts in by_series.values():
            for p in pts:
                raw = raw_of.get(p.x, p.x)
                order.setdefault(p.x, (alts.index(raw), 0) if raw in alts else (len(alts), len(order)))
        series = [Series(label, sorted(pts, key=(lambda p: p.x) if numeric else (lambda p: order[p.x])))
                  for label, pts in by_series.items()]
        title = " — ".join(t for t in (panel.title, key) if t)
        unit = units[key]
        ylabel = (f"{panel.ylabel}: ratio to {analysis.baseline}" if panel.relative
                  else (f"{key} [{unit}]" if panel.split and panel.split.startswith("metric") else panel.ylabel))
        pd = PanelData(title, panel.xlabel, ylabel, panel.xlog and numeric, panel.ylog,
                       panel.relative, numeric, "" if panel.relative else unit, series,
                       metrics[key], panel.bench, analysis.baseline)
        out.append(pd)
    return out


def memory_profile_data(spec: FigureSpec, trials, baseline: str = "local") -> FigureData:
    """Seed 003 Fig. 3 from stored trials: NUMA penalty (CPI remote / local, or the wall-time
    ratio when CPI is unavailable) against MPKI, one series per intensity class, the fitted
    line; without MPKI the penalty per benchmark as bars."""
    from vhpc.analysis import memprofile

    rows = memprofile.profile(memprofile.from_trials(trials))
    out = FigureData(spec.seed, spec.number, spec.title, baseline, [])
    if not rows:
        return out
    with_mpki = [r for r in rows if r.mpki is not None and r.penalty]
    by: dict[str, list[Point]] = {}
    if with_mpki:
        for r in with_mpki:
            by.setdefault(r.intensity or "unclassified", []).append(
                Point(r.mpki, r.penalty, None, None, min(r.n_local, r.n_remote)))
        f = memprofile.fit(rows)
        panel = PanelData("NUMA penalty vs MPKI", "MPKI (LLC misses per 1000 instructions)",
                          "NUMA penalty (CPI remote / local)", False, False, False, True, "",
                          [Series(k, sorted(v, key=lambda p: p.x)) for k, v in by.items()],
                          ["cpi"], "*", baseline,
                          fit={"slope": f.slope, "intercept": f.intercept, "r2": f.r2, "n": f.n} if f else None,
                          vlines=[memprofile.LOW_MPKI, memprofile.HIGH_MPKI])
    else:
        pts = [Point(r.benchmark, r.penalty, None, None, min(r.n_local, r.n_remote))
               for r in rows if r.penalty]
        panel = PanelData("NUMA penalty per benchmark (CPI unavailable: wall-time ratio)",
                          "benchmark", "NUMA penalty (time remote / local)", False, False, False,
                          False, "", [Series("penalty", pts)], ["seconds"], "*", baseline)
    out.panels.append(panel)
    return out
