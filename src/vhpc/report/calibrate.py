"""Presentation of a calibration (:func:`vhpc.workflows.calibrate.run`): terminal summary, JSON, HTML.

Input is the calibration document (a dict: ``settings``, ``campaign_ids``, ``rows``,
``placement``); nothing here runs or computes statistics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
from rich.console import Console
from rich.table import Table

from vhpc.analysis.findings import SLOWDOWN_APPLIED_SHARE
from vhpc.core.paths import write_atomic
from vhpc.core.text import markup as esc

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def pct(fraction: float | None, digits: int = 1) -> str:
    """A fraction as percent text (0.05 → "5.0 %"), "n/a" for None."""
    return "n/a" if fraction is None else f"{fraction * 100:.{digits}f} %"


def _ci(ci: Any) -> str:
    return "" if not ci else f" [{ci[0] * 100:.0f}, {ci[1] * 100:.0f}] %"


def cells(row: dict[str, Any]) -> dict[str, str]:
    """The text of one row's columns (shared by the terminal and the HTML)."""
    aa, inj, pw = row["aa"], row["injected"], row["power"]
    rec = inj["recovered_pct"]
    cis = [c["ci_pct"] for c in inj["campaigns"] if c["ci_pct"][0] is not None]
    last = f" (last CI [{cis[-1][0]:+.1f}, {cis[-1][1]:+.1f}] %)" if cis else ""
    runs = pw["runs_needed"]
    dbl = row.get("doubled") or {}
    return {
        "doubled": (f"equivalent {dbl['equivalent']}/{dbl['campaigns']}, slower "
                    f"{dbl['slower']}/{dbl['campaigns']}" if dbl.get("campaigns") else "n/a"),
        "what": f"{row['environment']} {row['benchmark']} {row['metric']}",
        "aa": f"{aa['false_positives']}/{aa['campaigns']} = {pct(aa['rate'], 0)}"
              f"{_ci(aa['rate_ci'])} (α {pct(aa['alpha'], 0)})",
        "recovered": "n/a" if rec is None else f"{rec:+.1f} %{last}",
        "applied": f"{pct(inj['applied'])} (asked {pct(inj['requested'])}"
                   + (f"; usage bound {pct(inj['applied_from_usage'])})"
                      if inj["applied_from_usage"] is not None else ")"),
        "coverage": f"{pct(inj['coverage'], 0)}{_ci(inj['coverage_ci'])}",
        "detection": pct(inj["detection"], 0),
        "power": (f"{runs if runs else '> 2000'} runs for {pct(inj['requested'], 0)}; "
                  f"{pct(pw['detectable_at_repeats'])} with {pw['repeats']}"
                  f" (rel. SD {pct(pw['relative_sd'])})"),
    }


def shortfalls(doc: dict[str, Any]) -> list[str]:
    """One sentence per row whose applied slowdown is under half the requested δ
    (:data:`vhpc.analysis.findings.SLOWDOWN_APPLIED_SHARE`, as a campaign's finding): the
    injected slowdown is smaller than asked (trials too short for the freezer's duty cycle,
    or, without the freezer, a CPU quota seldom reached) and detection is judged on less."""
    out = []
    for row in doc["rows"]:
        inj = row["injected"]
        applied = inj["applied"]
        if applied is not None and applied < SLOWDOWN_APPLIED_SHARE * inj["requested"]:
            out.append(f"{row['environment']} {row['benchmark']} {row['metric']}: "
                       f"{pct(applied)} applied of the {pct(inj['requested'])} asked; "
                       "coverage is judged against what was applied")
    return out


COLUMNS = (("what", "environment benchmark metric"), ("aa", "A/A false positives"),
           ("recovered", "recovered slowdown"), ("applied", "applied"),
           ("coverage", "CI covers applied"), ("detection", "detected"),
           ("doubled", "against 2× slowed"),
           ("power", "runs needed (80 % power) / detectable"))


def bound_text(reading: dict[str, Any]) -> str:
    """How many campaigns would bound a family-wise rate below 2α, for which true rate and
    with which probability (:func:`vhpc.workflows.calibrate.rate_reading`): "≈231 campaigns
    would bound it below 10 % 8 times in 10 if the true rate is α = 5 %"; where the rate
    seen is 2α or more, that no number would."""
    below = pct(2 * reading["alpha"], 0)
    rate = (f"α = {pct(reading['alpha'], 0)}" if reading.get("planned_on", "alpha") == "alpha"
            else f"the {pct(reading['planned_rate'], 0)} seen")
    if reading["campaigns_to_bound"] is None:
        return f"no number of campaigns bounds it below {below} if the true rate is {rate}"
    times = round(reading.get("bound_probability", 0.8) * 10)
    return (f"≈{reading['campaigns_to_bound']} campaigns would bound it below {below} {times} times "
            f"in 10 if the true rate is {rate}")


def headline(doc: dict[str, Any]) -> list[str]:
    """What the calibration can show, with the exact (Clopper–Pearson) 95 % interval of each
    rate: per (environment, benchmark) the A/A family-wise rate of ``slower``/``faster``,
    "consistent with α" unless the interval's lower bound exceeds α, and how many campaigns
    would bound it near α; the margin-edge rate of ``equivalent`` (δ = margin, must be
    ≤ α/2); and how often ``equivalent`` was given against the 2× slowed copy."""
    out = []
    for f in doc.get("family") or []:
        if f["exceeds_alpha"]:
            reading = f"exceeds α = {f['alpha']:g}: its interval lies above α"
        else:
            reading = f"consistent with α = {f['alpha']:g}; {bound_text(f)}"
        out.append(f"A/A family-wise false positives, {f['environment']} {f['benchmark']}: "
                   f"{f['false_positives']}/{f['campaigns']} campaigns = {pct(f['rate'], 0)}"
                   f"{_ci(f['rate_ci'])} ({reading})")
    edge = doc.get("margin_edge")
    if edge and edge["measured"]:
        verdict = ("exceeds α/2: its interval lies above it" if edge["exceeds_bound"]
                   else f"consistent with ≤ α/2 = {pct(edge['bound'], 1)}")
        applied = f", applied {pct(edge['applied'])}" if edge.get("applied") is not None else ""
        out.append(f"'equivalent' at the margin's edge (δ = margin = {pct(edge['margin'], 0)}"
                   f"{applied}): {edge['equivalent']}/{edge.get('campaigns', edge['comparisons'])}"
                   " campaigns gave it in any comparison = "
                   f"{pct(edge['rate'], 0)}{_ci(edge['rate_ci'])} ({verdict})")
    elif edge:
        out.append(f"'equivalent' at the margin's edge: not measured (δ {pct(edge['delta'], 0)}"
                   f" ≠ margin {pct(edge['margin'], 0)}: run with --delta equal to the margin)")
    dbl = doc.get("doubled") or {}
    if dbl.get("comparisons"):
        out.append(f"'equivalent' against a 2× slowdown: {dbl['equivalent']} of "
                   f"{dbl['comparisons']} comparisons{_ci(dbl['rate_ci'])}")
    return out


def render_terminal(doc: dict[str, Any], console: Console) -> None:
    """The two headline figures (:func:`headline`), the summary table and one line per
    environment on placement."""
    for line in headline(doc):
        console.print(esc(line), highlight=False)
    s = doc["settings"]
    table = Table(title=f"vhpc calibrate: {s['campaigns']} campaigns × {s['repeats']} repeats, "
                        f"injected slowdown δ = {pct(s['delta'])}, α = {s['alpha']:g}")
    for _, title in COLUMNS:
        table.add_column(title)
    for row in doc["rows"]:
        c = cells(row)
        table.add_row(*(esc(c[k]) for k, _ in COLUMNS))
    console.print(table)
    for line in shortfalls(doc):
        console.print(f"note: {esc(line)}")
    for env, p in doc["placement"].items():
        if p["trials"]:
            console.print(f"placement {esc(env)}: {p['matching']}/{p['trials']} trials read back "
                          f"as planned ({pct(p['rate'], 0)})")
        else:
            console.print(f"placement {esc(env)}: no placement read-back recorded")


HTML_TPL = _ENV.from_string("""<!doctype html><html><head><meta charset="utf-8">
<title>vhpc calibrate</title><style>body{font-family:sans-serif;margin:2em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;font-size:90%}
th{background:#eee}</style></head><body>
<section id="calibration"><h2>Calibration: can these numbers be trusted?</h2>
<ul id="headline">{% for line in head %}<li><b>{{ line }}</b></li>{% endfor %}</ul>
<p>{{ s.campaigns }} campaigns per environment and benchmark, {{ s.repeats }} measured rounds
(+{{ s.warmup }} warm-up) each; α = {{ s.alpha }}; injected slowdown δ = {{ delta }} (a
cgroup-v2 freezer duty cycle, the share of time frozen read back per trial), and a copy
slowed 2×. A/A: two identical copies of the environment, a "slower" or "faster" verdict is a
false positive; family-wise: a campaign with one in its Holm family (the rate must be ≤ α; it
is "consistent with α" unless its interval lies above α). At the margin's edge (δ = margin)
"equivalent" must be given at most α/2 of the time. Coverage: share of campaigns
whose overhead CI contains the applied slowdown (nominal: {{ conf }}). Intervals in
brackets: exact (Clopper–Pearson) 95 % intervals of the rates.</p>
<table><thead><tr>{% for k, t in columns %}<th>{{ t }}</th>{% endfor %}</tr></thead><tbody>
{% for c in rows %}<tr>{% for k, t in columns %}<td>{{ c[k] }}</td>{% endfor %}</tr>{% endfor %}
</tbody></table>
{% for line in notes %}<p class="note">Note: {{ line }}</p>{% endfor %}
<h3>Placement</h3><ul>{% for env, p in placement.items() %}<li>{{ env }}:
{% if p.trials %}{{ p.matching }}/{{ p.trials }} trials read back as planned{% else %}no placement
read-back recorded{% endif %}</li>{% endfor %}</ul>
<p>Campaigns (each an ordinary campaign: <code>vhpc report ID</code>):
{% for env, ids in cids.items() %}{{ env }}: {{ ids|join(", ") }}. {% endfor %}</p>
</section></body></html>
""")


def write(doc: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """Write ``calibration.json`` and ``calibration.html`` into ``folder``; returns both
    paths."""
    folder.mkdir(parents=True, exist_ok=True)
    jpath, hpath = folder / "calibration.json", folder / "calibration.html"
    write_atomic(jpath, json.dumps(doc, indent=2, default=str) + "\n")
    s = doc["settings"]
    write_atomic(hpath, HTML_TPL.render(
        s=s, delta=pct(s["delta"]), conf=pct(1 - s["alpha"], 0), columns=COLUMNS,
        head=headline(doc),
        rows=[cells(r) for r in doc["rows"]], notes=shortfalls(doc), placement=doc["placement"],
        cids=doc["campaign_ids"]))
    return jpath, hpath
