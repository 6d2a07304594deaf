"""Presentation of ``vhpc history`` (:class:`vhpc.analysis.history.History`, docs/history.md):
one terminal line per series, JSON, a self-contained HTML page whose series figures draw the
overhead per campaign with its interval, the segments between change points and a marker at
each change labelled with what changed in the fingerprints, and the CI gate's JUnit XML (the
schema Jenkins and GitLab read, written with :mod:`xml.etree.ElementTree`).  Formats only;
every number comes from the analysis room.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import jinja2
from rich.console import Console

from vhpc.analysis.changepoints import campaigns_needed
from vhpc.analysis.fingerprints import FingerprintChange
from vhpc.analysis.history import (
    FAIL, JUDGED, PASS, TOO_NOISY, TOO_SHORT, ChangePoint, History, Series,
)
from vhpc.core import numfmt
from vhpc.core.paths import write_atomic
from vhpc.core.records import json_ready
from vhpc.core.text import markup as esc
from vhpc.report import direction_mark, params_label
from vhpc.report.figures import new_figure, ratio_error_bar, render
from vhpc.report.html import embed_figure

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "?"


def _overhead(ratio: float, ci: tuple[float | None, float | None], hib: bool) -> str:
    return numfmt.overhead(ratio, *ci, hib)


def _value(v: str | None) -> str:
    return "—" if v is None else v


def change_label(fp: tuple[FingerprintChange, ...], limit: int = 2) -> str:
    """What changed at a change point, most likely cause first: ``vm option.slowdown — → 2.0;
    qemu_version 7.2.0 → 8.2.1`` (at most ``limit`` fields, then ``+N more``); "no recorded
    change" when the fingerprints agree."""
    if not fp:
        return "no recorded change"
    parts = [f"{'' if f.scope in ('campaign', 'all environments') else f.scope + ' '}{f.key} "
             f"{_value(f.a)} → {_value(f.b)}" for f in fp[:limit]]
    more = f"; +{len(fp) - limit} more" if len(fp) > limit else ""
    return "; ".join(parts) + more


def series_title(series: Series) -> str:
    """The series' one-line name: ``environment/baseline benchmark[params] metric``."""
    return f"{series.environment}/{series.baseline} {params_label(series.benchmark, series.params)} {series.metric}"


def _change_text(series: Series, c: ChangePoint) -> str:
    before = _overhead(c.before.ratio, (None, None), series.higher_is_better)
    after = _overhead(c.after.ratio, (None, None), series.higher_is_better)
    return (f"change at #{c.index + 1} {c.campaign} ({before} → {after}, p {c.p:.3g}): "
            f"{change_label(c.fingerprint)}")


def series_line(series: Series) -> str:
    """The terminal line of one series: the latest overhead with its interval, the trend, and
    the last change point with what changed (or the status of a series too short/noisy)."""
    p = series.latest
    head = (f"{series_title(series)} {direction_mark(series.higher_is_better)}: latest "
            f"{_overhead(p.ratio, p.ci, series.higher_is_better)} (n={p.n}, {len(series.points)} "
            f"campaigns)")
    trend = "" if series.trend is None else (
        f"; trend {series.trend.direction} {series.trend.pct:+.1f} %/campaign "
        f"[{series.trend.ci[0]:+.1f}, {series.trend.ci[1]:+.1f}]")
    if series.change_points:
        tail = "; " + _change_text(series, series.change_points[-1])
    elif series.status == TOO_SHORT:
        tail = f"; too short to show a change: needs at least {series.needed} campaigns"
    elif series.status == TOO_NOISY:
        tail = (f"; no change found, but too noisy (series CV {_pct(series.sd)}) to find a step "
                f"of the margin: needs at least {series.needed} campaigns")
    else:
        tail = "; no change point"
    gate = ""
    if series.gate is not None:
        gate = f"; gate {series.gate.status}" + (f" ({series.gate.note})" if series.gate.note
                                                 else f" ({_gate_text(series)})")
    return head + trend + tail + gate


def _pct(sd: float | None) -> str:
    return "?" if sd is None else f"{math.expm1(sd) * 100:.1f} %"


def _gate_text(series: Series) -> str:
    g = series.gate
    assert g is not None and g.test is not None and g.bound is not None
    worse = math.expm1(g.test.worse) * 100
    return (f"{worse:+.1f} % worse than campaigns #{g.model[0] + 1}–#{g.model[1]}, lower bound "
            f"{g.bound * 100:+.1f} % at {g.level * 100:.4g} %, p (Holm) {g.p_adjusted:.3g}")


def legend(history: History) -> str:
    """The sentence every page states the history's rates in."""
    text = (f"Change points: binary segmentation with a permutation test of the CUSUM of the "
            f"ln overhead ratio (E-Divisive scheme, Matteson & James 2014), false-alarm rate ≤ "
            f"{history.alpha * 100:g} % per series; a series needs at least "
            f"{campaigns_needed(history.alpha)} campaigns to show a change; intervals at {history.confidence:.0%}.")
    if history.checked:
        text += (f" Gate: the latest campaign against the earlier ones since their last change "
                 f"(Student-t prediction), FAIL when the overhead grew by more than the margin "
                 f"±{history.margin * 100:g} % at α = {history.alpha:g}, Holm over the series.")
    return text


def render_terminal(history: History, console: Console) -> None:
    """One line per series, then the legend, skipped campaigns and the gate's outcome."""
    console.print(f"[bold]vhpc history[/]  {len(history.campaigns)} campaigns, "
                  f"{_date(history.campaigns[0].created)} – {_date(history.campaigns[-1].created)}",
                  highlight=False)
    for s in history.series:
        style = "bold red" if s.gate and s.gate.status == FAIL else ""
        line = esc(series_line(s))
        console.print(f"[{style}]{line}[/]" if style else line, highlight=False)
    console.print(esc(legend(history)), highlight=False)
    for line in history.skipped:
        console.print(f"[yellow]skipped[/] {esc(line)}", highlight=False)
    if history.checked:
        status = history.exit_status
        text = {1: f"FAIL: {len(history.failures)} series regressed beyond the margin: "
                   + ", ".join(series_title(s) for s in history.failures),
                0: "PASS: no series regressed beyond the margin",
                2: "NOTHING CHECKED: no series had enough earlier campaigns for the gate"}[status]
        console.print(f"[{ {1: 'bold red', 0: 'green', 2: 'bold yellow'}[status] }]"
                      f"{esc(text)}[/]", highlight=False)


def to_dict(history: History) -> dict[str, Any]:
    """The history as a plain JSON-able dict (NaN/inf as None)."""
    return json_ready({
        "alpha": history.alpha, "margin": history.margin, "confidence": history.confidence,
        "permutations": history.permutations, "seed": history.seed, "checked": history.checked,
        "exit_status": history.exit_status, "skipped": history.skipped,
        "campaigns": [{"id": c.id, "created": c.created, "source": c.source}
                      for c in history.campaigns],
        "series": [{
            "environment": s.environment, "kind": s.kind, "baseline": s.baseline,
            "benchmark": s.benchmark, "params": s.params, "metric": s.metric, "unit": s.unit,
            "higher_is_better": s.higher_is_better, "status": s.status, "needed": s.needed,
            "sd": s.sd, "points": [asdict(p) for p in s.points],
            "segments": [asdict(g) for g in s.segments],
            "change_points": [asdict(c) for c in s.change_points],
            "changes": [{"index": i, "campaign": s.points[i].campaign,
                         "fingerprint": [asdict(f) for f in fp]} for i, fp in s.changes],
            "trend": None if s.trend is None else asdict(s.trend),
            "gate": None if s.gate is None else asdict(s.gate),
            "line": series_line(s),
        } for s in history.series],
    })


def write_json(history: History, path: Path) -> Path:
    """Write ``h`` as JSON (:func:`to_dict`) to ``path`` through the safe writer; returns ``path``.
    Raises OutputPathError when ``path`` cannot be written (:func:`vhpc.core.paths.write_atomic`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(to_dict(history), indent=2, default=str) + "\n")
    return path


def junit_xml(history: History) -> str:
    """The gate as JUnit XML: one ``testsuite`` ``vhpc history``, one ``testcase`` per series
    (classname the benchmark with its parameters, name ``environment/baseline metric``): a
    ``failure`` where the gate FAILs, ``skipped`` where the series could not be checked."""
    cases = [s for s in history.series if s.gate is not None]
    suite = ET.Element("testsuite", name="vhpc history", tests=str(len(cases)),
                       failures=str(len(history.failures)), errors="0",
                       skipped=str(sum(1 for s in cases if s.gate.status not in (PASS, FAIL))))
    for s in cases:
        case = ET.SubElement(suite, "testcase", classname=params_label(s.benchmark, s.params),
                             name=f"{s.environment}/{s.baseline} {s.metric}")
        if s.gate.status == FAIL:
            ET.SubElement(case, "failure", message=_gate_text(s), type="regression").text = \
                series_line(s)
        elif s.gate.status != PASS:
            ET.SubElement(case, "skipped", message=s.gate.note)
        ET.SubElement(case, "system-out").text = series_line(s)
    root = ET.Element("testsuites", name="vhpc", tests=suite.get("tests", "0"),
                      failures=suite.get("failures", "0"), errors="0")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(history: History, path: Path) -> Path:
    """Write the gate as JUnit XML (:func:`junit_xml`) to ``path`` through the safe writer; returns
    ``path``.  Raises OutputPathError when ``path`` cannot be written
    (:func:`vhpc.core.paths.write_atomic`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, junit_xml(history))
    return path


#: colours: points and their intervals, segment means, change markers
_POINT, _SEGMENT, _MARK = "#1f77b4", "#2ca02c", "#d62728"


def series_figure(series: Series, fmt: str = "svg") -> str | bytes:
    """Overhead ratio per campaign (x: campaign order, labelled by date and id) with its
    interval, each segment's geometric mean with its interval as a band, 1 = no overhead
    dashed, and a marker at each change point labelled with what changed."""
    fig = new_figure(9.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(1, len(series.points) + 1))
    ys = [p.ratio for p in series.points]
    bars = [ratio_error_bar(p.ratio, p.ci) for p in series.points]
    ax.errorbar(xs, ys, yerr=[[b[0] for b in bars], [b[1] for b in bars]], fmt="o", capsize=3,
                color=_POINT, label="campaign ratio [interval]", zorder=3)
    for segment in series.segments:
        start, end = segment.start + 0.7, segment.end + 0.3
        ax.hlines(segment.ratio, start, end, color=_SEGMENT, linewidth=1.6,
                  label="segment mean [interval]" if segment.start == 0 else None)
        if None not in segment.ci:
            ax.fill_between([start, end], segment.ci[0], segment.ci[1], color=_SEGMENT, alpha=0.15, linewidth=0)
    ax.axhline(1.0, color="#888", linewidth=0.8, linestyle="--")
    top = max(hi if hi is not None else r for r, (_, hi) in zip(ys, (p.ci for p in series.points)))
    for change in series.change_points:
        x = change.index + 0.5
        ax.axvline(x, color=_MARK, linewidth=1.4, linestyle="-",
                   label="change point" if change is series.change_points[0] else None)
        ax.annotate(f"#{change.index + 1}: {change_label(change.fingerprint, 1)}", (x, top),
                    xytext=(4, -2), textcoords="offset points", color=_MARK, fontsize=8,
                    va="top", ha="left")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"#{i} {time.strftime('%m-%d %H:%M', time.localtime(p.created))}"
                        for i, p in zip(xs, series.points)], rotation=30, ha="right", fontsize=7)
    ax.set_xlim(0.4, len(xs) + 0.6)
    ax.set_xlabel("campaign (order, date)")
    ax.set_ylabel(f"{series.metric} ratio to {series.baseline} {direction_mark(series.higher_is_better)}")
    ax.set_title(series_title(series))
    ax.legend(loc="lower right", fontsize=7)
    return render(fig, fmt)


HTML_TPL = _ENV.from_string("""<!doctype html><html><head><meta charset="utf-8">
<title>vhpc history</title><style>body{font-family:sans-serif;margin:2em}
table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:4px 8px;
font-size:90%}th{background:#eee}.FAIL{color:#b00;font-weight:bold}.PASS{color:#070}
svg.figure,img.figure{max-width:100%}figure{margin:0 0 1.5em 0}</style></head><body>
<h1>vhpc history</h1>
<p>{{ ncampaigns }} campaigns, {{ first }} – {{ last }}.{% if summary %}
<b class="{{ summary_class }}">{{ summary }}</b>{% endif %}</p>
<section id="history"><h2>Overhead over time</h2>
<p class="legend">{{ legend }}</p>
{% for s in series %}<figure id="series-{{ loop.index }}">{{ s.figure }}
<figcaption>{{ s.line }}</figcaption></figure>
{% endfor %}
<h3>Series</h3><table><thead><tr><th>series</th><th>campaigns</th><th>latest overhead [CI]</th>
<th>trend %/campaign [CI]</th><th>status</th><th>last change point</th><th>gate</th></tr></thead>
<tbody>{% for s in series %}<tr><td>{{ s.title }}</td><td>{{ s.n }}</td><td>{{ s.latest }}</td>
<td>{{ s.trend }}</td><td>{{ s.status }}</td><td>{{ s.change }}</td>
<td class="{{ s.gate }}">{{ s.gate }}</td></tr>{% endfor %}</tbody></table>
<h3>What changed at each change point</h3>{% if changes %}<table><thead><tr><th>series</th>
<th>at campaign</th><th>overhead before → after [CI]</th><th>after/before [CI]</th><th>p</th>
<th>scope</th><th>field</th><th>before</th><th>after</th></tr></thead><tbody>
{% for c in changes %}{% for f in c.fp or [none] %}<tr>{% if loop.first %}
{% for v in (c.title, c.at, c.levels, c.change, c.p) %}<td rowspan="{{ c.fp|length or 1 }}">{{ v }}</td>{% endfor %}{% endif %}
{% if f %}<td>{{ f.scope }}</td><td>{{ f.key }}</td><td>{{ f.a or '—' }}</td>
<td>{{ f.b or '—' }}</td>{% else %}<td colspan="4">no recorded fingerprint change</td>{% endif %}
</tr>{% endfor %}{% endfor %}</tbody></table>{% else %}<p>No change point in any series.</p>
{% endif %}
<h3>Fingerprint changes between consecutive campaigns</h3>{% if between %}<table><thead>
<tr><th>series</th><th>between</th><th>scope</th><th>field</th><th>before</th><th>after</th>
</tr></thead><tbody>{% for r in between %}<tr><td>{{ r.title }}</td><td>{{ r.at }}</td>
<td>{{ r.f.scope }}</td><td>{{ r.f.key }}</td><td>{{ r.f.a or '—' }}</td><td>{{ r.f.b or '—' }}</td>
</tr>{% endfor %}</tbody></table>{% else %}<p>None recorded: every campaign's fingerprint is
the same as the one before it.</p>{% endif %}
{% if skipped %}<h3>Left out</h3><ul>{% for line in skipped %}<li>{{ line }}</li>{% endfor %}
</ul>{% endif %}</section>
</body></html>
""")


def _ratio_ci(r: float, ci: tuple[float | None, float | None]) -> str:
    return numfmt.ratio_ci(r, *ci)


def write_html(history: History, path: Path) -> Path:
    """The history as one self-contained HTML page (figures inline SVG)."""
    rows, changes = [], []
    for i, s in enumerate(history.series):
        last = s.change_points[-1] if s.change_points else None
        rows.append({
            "title": series_title(s), "n": len(s.points), "line": series_line(s),
            "latest": _overhead(s.latest.ratio, s.latest.ci, s.higher_is_better),
            "trend": "—" if s.trend is None else
            f"{s.trend.direction} {s.trend.pct:+.1f} [{s.trend.ci[0]:+.1f}, {s.trend.ci[1]:+.1f}]",
            "status": s.status if s.status == JUDGED else f"{s.status}: needs {s.needed} campaigns",
            "change": "none" if last is None else _change_text(s, last),
            "gate": "—" if s.gate is None else s.gate.status,
            "figure": embed_figure(series_figure(s), f"s{i}-", series_title(s)),
        })
        for c in s.change_points:
            changes.append({
                "title": series_title(s), "at": f"#{c.index + 1} {c.campaign}",
                "levels": f"{_overhead(c.before.ratio, c.before.ci, s.higher_is_better)} → "
                          f"{_overhead(c.after.ratio, c.after.ci, s.higher_is_better)}",
                "change": _ratio_ci(c.change, c.change_ci), "p": f"{c.p:.3g}",
                "fp": list(c.fingerprint)})
    between = [{"title": series_title(s), "at": f"#{i} → #{i + 1} {s.points[i].campaign}",
                "f": f} for s in history.series for i, fp in s.changes for f in fp]
    summary, cls = "", ""
    if history.checked:
        status = history.exit_status
        summary = {1: f"FAIL: {len(history.failures)} series regressed beyond the margin",
                   0: "PASS: no series regressed beyond the margin",
                   2: "NOTHING CHECKED: no series had enough earlier campaigns"}[status]
        cls = {1: "FAIL", 0: "PASS", 2: ""}[status]
    html = HTML_TPL.render(
        ncampaigns=len(history.campaigns), first=_date(history.campaigns[0].created),
        last=_date(history.campaigns[-1].created), legend=legend(history), series=rows, changes=changes,
        skipped=history.skipped, summary=summary, summary_class=cls, between=between)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, html)
    return path
