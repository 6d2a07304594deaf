"""Presentation of ``vhpc diff`` (:class:`vhpc.analysis.diff.Diff`): terminal tables, JSON,
a self-contained HTML page, and the history figure (ratio with its interval against date, one
panel per metric).  Formats only; every number comes from the analysis room.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping

import jinja2
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vhpc.core import numfmt
from vhpc.core.paths import write_atomic
from vhpc.core.text import markup as esc
from vhpc.core.text import plain
from vhpc.analysis.diff import (
    FAIL, IMPROVEMENT, NOTHING_CHECKED, PASS, REGRESSION, Diff, HistoryPoint, RowKey,
)
from vhpc.report import METHOD_TAG, direction_mark, fmt_num, fmt_pct_ci, params_label
from vhpc.report.figures import new_figure, ratio_error_bar, render
from vhpc.report.html import embed_figure

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "?"


def _ratio(r: float | None, ci: tuple[float | None, float | None], method: str = "",
           difference: float | None = None, unit: str = "") -> str:
    """A ratio with its interval and method tag; a signed metric's ``difference`` (no
    ratio) in its ``unit``: ``Δ -1 [-2.447, +0.4471] J``."""
    if r is None and difference is not None:
        return numfmt.difference_ci(difference, *ci, unit)
    if r is None:
        return "—"
    tag = METHOD_TAG.get(method, '') if None not in ci else ""
    return numfmt.ratio_ci(r, *ci) + tag


def _pct(x: float | None, ci: tuple[float | None, float | None] | None = None) -> str:
    if x is None:
        return "—"
    return fmt_pct_ci(x, *(ci or (None, None)))


def _p(p: float | None) -> str:
    return "—" if p is None else (f"{p:.1e}" if p < 1e-4 else f"{p:.4f}")


def _value(v: str | None) -> str:
    return "not recorded" if v is None else v


def overhead_cells(result: Diff) -> list[dict[str, str]]:
    """One dict of texts per overhead row (terminal and HTML show the same)."""
    out = []
    for o in result.overhead:
        out.append({
            "bench": params_label(o.benchmark, o.params),
            "metric": f"{o.metric} [{o.unit}] {direction_mark(o.higher_is_better)}",
            "env": f"{o.environment}/{o.baseline}",
            "ratio_a": _ratio(o.ratio_a, o.difference_a_ci if o.ratio_a is None else o.ratio_a_ci,
                              "", o.difference_a, o.unit),
            "ratio_b": _ratio(o.ratio_b, o.difference_b_ci if o.ratio_b is None else o.ratio_b_ci,
                              "", o.difference_b, o.unit),
            "q": _ratio(o.q, o.difference_ci if o.q is None else o.q_ci, o.method, o.difference,
                        o.unit),
            "change": _pct(o.change_pct, o.change_ci),
            "p": _p(o.p_adjusted),
            "verdict": o.verdict,
            "tolerance": "—" if o.tolerance is None else f"{o.tolerance * 100:g} %",
            "status": o.status,
            "note": o.note,
        })
    return out


def raw_cells(result: Diff) -> list[dict[str, str]]:
    """One row of text cells per raw comparison of ``d`` (:attr:`Diff.raw`), keyed by column:
    bench, metric (with unit and direction), env, a and b (mean, or geometric mean, with n), ratio
    (with its interval and method) and change (percent, with its interval)."""
    return [{
        "bench": params_label(r.benchmark, r.params),
        "metric": f"{r.metric} [{r.unit}] {direction_mark(r.higher_is_better)}",
        "env": r.environment,
        "a": f"{'' if r.geometric else 'mean '}{fmt_num(r.mean_a)} (n={r.n_a})",
        "b": f"{'' if r.geometric else 'mean '}{fmt_num(r.mean_b)} (n={r.n_b})",
        "ratio": _ratio(r.ratio, r.difference_ci if r.ratio is None else r.ratio_ci, r.method,
                        r.difference, r.unit),
        "change": _pct(r.change_pct, r.change_ci),
    } for r in result.raw]


OVERHEAD_COLUMNS = (("bench", "benchmark"), ("metric", "metric"), ("env", "env/baseline"),
                    ("ratio_a", "ratio A [CI]"), ("ratio_b", "ratio B [CI]"),
                    ("q", "B/A [CI] or Δ"), ("change", "overhead change [CI]"),
                    ("p", "p (Holm)"),
                    ("verdict", "verdict"), ("tolerance", "tolerance"), ("status", "status"))
RAW_COLUMNS = (("bench", "benchmark"), ("metric", "metric"), ("env", "environment"),
               ("a", "geo. mean A"), ("b", "geo. mean B"), ("ratio", "B/A [CI] or Δ"),
               ("change", "change [CI]"))

_STYLE = {REGRESSION: "red", IMPROVEMENT: "green", FAIL: "bold red", PASS: "green",
          NOTHING_CHECKED: "bold yellow"}


def _side(tag: str, campaign: Any) -> str:
    """``A = <id> (<date>, <store>)``: one side of the diff, as its header line names it."""
    return f"{tag} = {campaign.id} ({_date(campaign.created)}, {campaign.source})"


#: Below this console width a diff's rows are printed as blocks (:func:`_print_rows`): the
#: overhead table's eleven columns need about 150 characters before rich truncates its cells.
TABLE_WIDTH = 150


def _cell(key: str, value: str) -> str:
    """``value`` as console markup: a verdict or status in its colour, other text escaped."""
    return f"[{_STYLE[value]}]{value}[/]" if key in ("verdict", "status") and value in _STYLE \
        else esc(value)


def _print_rows(console: Console, title: str, columns: tuple[tuple[str, str], ...],
                cells: list[dict[str, str]]) -> None:
    """A table of ``cells`` (one dict per row, keyed as ``columns``' first items) under
    ``title``; on a console narrower than :data:`TABLE_WIDTH` one block per row instead: the
    first three columns (benchmark · metric · environment) as its heading, then each other
    column as ``title value``, whole items packed into lines that fit, so no cell is cut."""
    if console.width >= TABLE_WIDTH:
        t = Table(title=esc(title))
        for _, name in columns:
            t.add_column(name)
        for c in cells:
            t.add_row(*(_cell(k, c[k]) for k, _ in columns))
        console.print(t)
        return
    from rich.cells import cell_len

    console.print(f"[bold]{esc(title)}[/]", highlight=False)
    for c in cells:
        console.print(esc(" · ".join(c[k] for k, _ in columns[:3])), highlight=False)
        lines: list[list[tuple[str, str]]] = [[]]  # (column key, its title) per line
        used = 2
        for key, name in columns[3:]:
            width = cell_len(f"{name} {c[key]}") + 3
            if lines[-1] and used + width > console.width:
                lines.append([])
                used = 2
            lines[-1].append((key, name))
            used += width
        for line in lines:
            console.print("  " + " · ".join(f"{esc(name)} {_cell(key, c[key])}"
                                            for key, name in line), highlight=False, soft_wrap=True)


def render_terminal(result: Diff, console: Console) -> None:
    """Fingerprint changes first, then the overhead changes, raw figures, unmatched rows and
    the PASS/FAIL summary."""
    console.print(f"[bold]vhpc diff[/]  {esc(_side('A', result.a))}", highlight=False)
    console.print(f"           {esc(_side('B', result.b))}", highlight=False)
    if result.fingerprint:
        t = Table(title="What changed (fingerprints, environment options, protocol)")
        for col in ("scope", "field", "A", "B"):
            t.add_column(col)
        for f in result.fingerprint:
            t.add_row(*(escape(x) for x in (f.scope, f.key, _value(f.a), _value(f.b))))
        console.print(t)
    else:
        console.print("Fingerprints: no recorded difference between A and B")
    if result.overhead:
        _print_rows(console, f"Overhead change (ratio to {result.a.baseline}, B over A)",
                    OVERHEAD_COLUMNS, overhead_cells(result))
        notes = [(c["env"], c["bench"], c["metric"], c["note"]) for c in overhead_cells(result) if c["note"]]
        for env, bench, metric, note in notes:
            console.print(plain(f"  note {env} {bench} {metric}: {note}"), highlight=False,
                          markup=False)
    _print_rows(console, "Raw figures (geometric mean B over A; \"mean\": arithmetic, a metric "
                "that can be ≤ 0, compared by B − A)", RAW_COLUMNS, raw_cells(result))
    for u in result.unmatched:
        console.print(f"[yellow]unmatched[/] {escape(u.environment)} "
                      f"{escape(params_label(u.benchmark, u.params))} {escape(u.metric)}: "
                      f"{escape(u.reason)}", highlight=False)
    for tag, f in result.findings:  # e.g. a slowdown= the kernel did not apply
        console.print(f"[bold yellow]{esc(f.level)}[/] campaign {tag} ({esc(f.scope)}): "
                      f"{esc(f.message)} → {esc(f.advice)}", highlight=False)
    if result.overhead:  # the caption explains the overhead table; without one it has nothing to say
        console.print(f"B/A of the ratios (geometric means): Welch's t on ln values; a metric "
                      f"that can be ≤ 0: Δ, the change of its difference of means (B − A, "
                      f"Welch's t, its unit); the "
                      f"interval at {result.confidence:.0%} or the Holm level of B's primary metrics "
                      "(note); overhead change > 0: B's overhead worse in the metric's "
                      f"direction; verdict read off the interval: regression/improvement "
                      f"(excludes 1; Δ: 0), equivalent (within ±{result.margin * 100:g} %), inconclusive; "
                      f"α = {result.alpha:g}", highlight=False)
    if result.outcome is not None:
        status, sentence = result.outcome
        names = ", ".join(f"{o.environment} {o.benchmark} {o.metric}" for o in result.failures)
        console.print(f"[{_STYLE[status]}]{status}[/]: {esc(sentence)}"
                      f"{': ' + esc(names) if names else ''}", highlight=False)


def write_json(result: Diff, path: Path, history: Mapping[RowKey, list[HistoryPoint]] | None = None) -> Path:
    """Write ``d`` as JSON (:meth:`Diff.to_dict`) to ``path`` through the safe writer, with a
    ``history`` list when ``history`` is given (one entry per (environment, benchmark, params,
    metric) row: each earlier campaign's ratio, interval, method and n); returns ``path``.  Raises
    OutputPathError when ``path`` cannot be written (:func:`vhpc.core.paths.write_atomic`)."""
    doc = result.to_dict()
    if history:
        doc["history"] = [{"environment": k[0], "benchmark": k[1], "params": k[2], "metric": k[3],
                           "points": [{"campaign": p.campaign, "created": p.created,
                                       "ratio": p.ratio, "ci": list(p.ci), "method": p.method,
                                       "n": p.n} for p in pts]}
                          for k, pts in history.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc, indent=2, default=str) + "\n")
    return path


def history_figures(history: Mapping[RowKey, list[HistoryPoint]], baseline: str,
                    fmt: str = "svg") -> list[tuple[str, str | bytes]]:
    """One figure per (environment, benchmark, params, metric): the ratio to the baseline with
    its interval against the campaign date (1 = no overhead).  Rows with fewer than 2
    campaigns are left out."""
    out: list[tuple[str, str | bytes]] = []
    for (env, bench, params, metric), pts in history.items():
        pts = [p for p in pts if p.ratio is not None]
        if len(pts) < 2:
            continue
        fig = new_figure(6.0, 2.8)
        ax = fig.add_subplot(1, 1, 1)
        xs = [date2num(_dt(p.created)) for p in pts]
        ys = [p.ratio for p in pts]
        bars = [ratio_error_bar(p.ratio, p.ci) for p in pts]
        ax.errorbar(xs, ys, yerr=[[b[0] for b in bars], [b[1] for b in bars]], fmt="o-",
                    capsize=3, color="#1f77b4")
        ax.axhline(1.0, color="#888", linewidth=0.8, linestyle="--")
        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        title = f"{env}/{baseline}: {params_label(bench, params)} {metric}"
        ax.set_title(title)
        ax.set_ylabel(f"{metric} ratio to {baseline}")
        ax.set_xlabel("campaign date")
        out.append((title, render(fig, fmt)))
    return out


def _dt(t: float):
    import datetime

    return datetime.datetime.fromtimestamp(t)


HTML_TPL = _ENV.from_string("""<!doctype html><html><head><meta charset="utf-8">
<title>vhpc diff {{ a.id }} {{ b.id }}</title><style>body{font-family:sans-serif;margin:2em}
table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:4px 8px;
font-size:90%}th{background:#eee}.FAIL,.regression{color:#b00;font-weight:bold}
.PASS,.improvement{color:#070}.NOTHING-CHECKED{color:#8a6d00;font-weight:bold}svg.figure,img.figure{max-width:100%}</style></head><body>
<h1>vhpc diff</h1>
<p>A = <b>{{ a.id }}</b> ({{ a.date }}, {{ a.source }}); B = <b>{{ b.id }}</b>
({{ b.date }}, {{ b.source }}); baseline {{ a.baseline }}; α = {{ alpha }};
tolerance: {{ tolerance }}.</p>
{% if summary %}<p class="{{ summary_class }}">{{ summary }}</p>{% endif %}
<section id="fingerprint"><h2>What changed</h2>
{% if fingerprint %}<table><thead><tr><th>scope</th><th>field</th><th>A</th><th>B</th></tr>
</thead><tbody>{% for f in fingerprint %}<tr><td>{{ f.scope }}</td><td>{{ f.key }}</td>
<td>{{ f.a }}</td><td>{{ f.b }}</td></tr>{% endfor %}</tbody></table>
{% else %}<p>No recorded difference between the fingerprints.</p>{% endif %}</section>
<section id="overhead"><h2>Overhead change</h2>
{% if not overhead %}<p>No environment besides the baseline {{ a.baseline }} is in both
campaigns, so there is no overhead to compare: the raw figures below are the comparison.</p>
{% else %}<p>Ratio = environment / {{ a.baseline }} (geometric means) in each campaign; B/A is
their quotient with the interval the verdict is read off (Welch's t on the ln values of the four
samples; for a metric that can be ≤ 0, Δ: the change of its difference of means in its unit,
Welch's t on the four samples, as the table compares it), at {{ conf }} or at the Holm level
of B's primary metrics as the note says;
docs/statistics.md); the overhead change is positive when B's overhead is worse in the metric's
direction. Verdicts: regression/improvement when the interval excludes 1 (Δ: 0), equivalent when
it lies within ±{{ margin }}, inconclusive otherwise. FAIL = a regression larger than the tolerance.</p>
<table><thead><tr>{% for k, t in ocols %}<th>{{ t }}</th>{% endfor %}<th>note</th></tr>
</thead><tbody>{% for c in overhead %}<tr>{% for k, t in ocols %}
<td class="{{ c[k] }}">{{ c[k] }}</td>{% endfor %}<td>{{ c.note }}</td></tr>{% endfor %}
</tbody></table>{% endif %}</section>
<section id="raw"><h2>Raw figures</h2><table><thead><tr>{% for k, t in rcols %}
<th>{{ t }}</th>{% endfor %}</tr></thead><tbody>{% for c in raw %}<tr>{% for k, t in rcols %}
<td>{{ c[k] }}</td>{% endfor %}</tr>{% endfor %}</tbody></table></section>
<section id="unmatched"><h2>Unmatched rows</h2>{% if unmatched %}<ul>{% for u in unmatched %}
<li>{{ u.environment }} {{ u.benchmark }}{% if u.params %}[{{ u.params }}]{% endif %}
{{ u.metric }}: {{ u.reason }}</li>{% endfor %}</ul>{% else %}<p>None: every row is in
both campaigns.</p>{% endif %}</section>
{% if findings %}<section id="findings"><h2>Findings</h2><ul>{% for tag, f in findings %}
<li class="{{ f.level }}"><b>{{ f.level }}</b> campaign {{ tag }} ({{ f.scope }}):
{{ f.message }} → {{ f.advice }}</li>{% endfor %}</ul></section>{% endif %}
{% if figures %}<section id="history"><h2>History</h2><p>Ratio to {{ a.baseline }} with its
interval per campaign of the same spec ({{ ncampaigns }} campaigns).</p>
{% for title, fig in figures %}<figure>{{ fig }}<figcaption>{{ title }}</figcaption></figure>
{% endfor %}</section>{% endif %}
</body></html>
""")


def _campaign_fields(campaign) -> dict:
    """A campaign's fields for the page's template, with its creation date written out."""
    return {**campaign.__dict__, "date": _date(campaign.created)}


def write_html(result: Diff, path: Path, history: Mapping[RowKey, list[HistoryPoint]] | None = None) -> Path:
    """The diff as one self-contained HTML page (figures inline SVG)."""
    figs = history_figures(history or {}, result.a.baseline)
    ncampaigns = len({p.campaign for pts in (history or {}).values() for p in pts})
    summary, cls = "", ""
    if result.outcome is not None:
        status, sentence = result.outcome
        summary, cls = f"{status}: {sentence}", status.replace(" ", "-")
    html = HTML_TPL.render(
        a=_campaign_fields(result.a), b=_campaign_fields(result.b), alpha=f"{result.alpha:g}", conf=f"{result.confidence:.0%}",
        margin=f"{result.margin * 100:g} %",
        tolerance=result.tolerance.describe() if result.tolerance else "none (no PASS/FAIL)",
        summary=summary, summary_class=cls,
        fingerprint=[{"scope": f.scope, "key": f.key, "a": _value(f.a), "b": _value(f.b)}
                     for f in result.fingerprint],
        ocols=OVERHEAD_COLUMNS, overhead=overhead_cells(result), rcols=RAW_COLUMNS, raw=raw_cells(result),
        unmatched=result.unmatched, ncampaigns=ncampaigns, findings=result.findings,
        figures=[(t, embed_figure(f, f"h{i}-", t)) for i, (t, f) in enumerate(figs)])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, html)
    return path
