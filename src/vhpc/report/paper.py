"""What the paper found beside what this host measured, and the whole-seed page.

* :func:`study_of` — the study a stored campaign ran (from its command line).
* :func:`study_figure` — the study's :class:`~vhpc.analysis.figdata.FigureData`.
* :func:`judge` — one :class:`Line` per stated finding of the study (statements from
  :mod:`vhpc.campaign.findings`, seed data): the paper's value, this host's measurement and
  agrees / disagrees / cannot tell with the reason (too few runs, TCG emulation, placement
  not makeable here).
* :func:`study_block` — figure (inline SVG) + finding lines as HTML, used by the campaign
  report and by :func:`write_seed_page` (one page: a seed's studies in the paper's order).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import jinja2
from markupsafe import Markup

from vhpc.analysis import Analysis, figdata

from vhpc.campaign import findings
from vhpc.campaign.findings import AGREES, CANNOT_TELL, DISAGREES


def study_of(meta: dict[str, Any] | None) -> str | None:
    """Study name of a campaign from its stored command (``vhpc study NAME ...``, or the
    ``# study NAME`` tag ``vhpc paper`` appends), or None."""
    from vhpc.campaign.studies import STUDIES

    cmd = (meta or {}).get("command") or ""
    m = re.search(r"(?:^|\s)(?:#\s*)?study\s+([\w.-]+)", cmd)
    return m.group(1) if m and m.group(1) in STUDIES else None


def study_figure(name: str, analysis: Analysis, trials: Iterable[Any] = ()) -> figdata.FigureData | None:
    """The declared figure of study ``name`` filled from ``analysis`` (memory-profile: from
    the stored trials); None when the study declares none."""
    from vhpc.campaign.studies import STUDIES

    spec = STUDIES.get(name).figure
    if spec is None:
        return None
    if spec.kind == "memprofile":
        return figdata.memory_profile_data(spec, list(trials), analysis.baseline)
    return figdata.figure_data(spec, analysis)


@dataclass(frozen=True)
class Line:
    """One stated finding judged on this host."""

    statement: str
    source: str
    paper: str
    measured: str
    outcome: str
    reason: str

    def text(self) -> str:
        """The line as plain text ("paper found: ... / this host: ... → outcome (reason)")."""
        return (f"paper found: {self.statement} ({self.source}; {self.paper}) / this host: "
                f"{self.measured} → {self.outcome}" + (f" ({self.reason})" if self.reason else ""))


def stated(study: str) -> list[findings.Finding]:
    """The seed's stated findings for ``study`` ([] when none are stored)."""
    return findings.for_study(study)


def _worse_ratio(ratio: float, ci: tuple[float | None, float | None], higher_is_better: bool
                 ) -> tuple[float, tuple[float | None, float | None]]:
    """A ratio and its interval in the "worse is higher" sense the findings use: inverted for
    higher-is-better metrics (a VM at half the bandwidth is ratio 2)."""
    lo, hi = ci
    if not higher_is_better:
        return ratio, (lo, hi)
    inv = (lambda v: 1 / v if v else None)
    return 1 / ratio, (inv(hi), inv(lo))


@dataclass(frozen=True)
class Evidence:
    """One measurement a finding is set beside: ``environment``/``benchmark`` ``metric`` against
    ``versus`` (an environment), the worse-is-higher ``ratio`` and interval ``ci``, ``n`` (the
    smaller side), ``emulated`` (either side ran under TCG)."""

    environment: str
    benchmark: str
    metric: str
    versus: str
    ratio: float
    ci: tuple[float | None, float | None]
    n: int
    emulated: bool
    unbounded: bool = False


def evidence(f: findings.Finding, analysis: Analysis) -> list[Evidence]:
    """The measurements of ``analysis`` that statement ``f`` compares (its metric, benchmark,
    environment and groups; against the baseline: the campaign's comparisons, otherwise
    :func:`vhpc.analysis.versus.pairs`)."""
    from vhpc.analysis import versus

    if f.against_baseline:
        rows = [(c.environment, c.benchmark, c.metric, analysis.baseline, c.higher_is_better,
                 c.ratio, c.ratio_ci, min(c.n, c.n_baseline), c.ratio_ci_method)
                for c in analysis.comparisons]
    else:
        rows = [(p.environment, p.benchmark, p.metric, p.versus, p.higher_is_better, p.ratio,
                 (p.low, p.high), p.n, p.method)
                for p in versus.pairs(analysis, f.group, f.versus, f.versus_group)]
    out = []
    for env, bench, metric, ref, hib, ratio, ci, n, method in rows:
        if ratio is None or not (findings.matches(f.metric, metric)
                                 and findings.matches(f.benchmark, bench)
                                 and findings.matches(f.environment, env)):
            continue
        worse, wci = _worse_ratio(ratio, ci, hib)
        emulated = any(analysis.environments.get(e) is not None and analysis.environments[e].emulated
                       for e in (env, ref))
        unbounded = method == "fieller" and None in ci
        out.append(Evidence(env, bench, metric, ref, worse, wci, n, emulated, unbounded))
    return out


def judge(study: str, analysis: Analysis, not_makeable: str | None = None) -> list[Line]:
    """One line per stated finding of ``study`` (:func:`vhpc.campaign.findings.verdict` on
    each measurement :func:`evidence` finds; one disagreement decides); a finding with no
    matching measurement is "cannot tell"."""
    out = []
    for f in stated(study):
        source = f"seed {f.seed[:3]}, {f.where}"
        found = evidence(f, analysis)
        if not found:
            why = not_makeable or "not measured in this campaign"
            if not not_makeable and f.environment and not any(
                    findings.matches(f.environment, e) for e in analysis.environments):
                why = (f"no environment {f.environment} in this campaign (a placement this "
                       "host may not make)")
            out.append(Line(f.quote, source, f"paper: {f.stated()}", "no matching measurement",
                            CANNOT_TELL, f"placement not makeable: {why}" if not_makeable else why))
            continue
        verdicts = [(e, *findings.verdict(f, e.ratio, e.ci, e.n, e.emulated,
                                          placement_ok=not_makeable is None,
                                          unbounded=e.unbounded)) for e in found]
        outs = {v[1] for v in verdicts}
        outcome = DISAGREES if DISAGREES in outs else (AGREES if outs == {AGREES} else CANNOT_TELL)
        e, _, reason = next(v for v in verdicts if v[1] == outcome)
        group = "" if f.group == "all" else f" ({f.group})"
        ref = e.versus + ("" if f.versus_group == "all" else f" ({f.versus_group})")
        measured = (f"{e.environment}{group} vs {ref}, {e.benchmark} {e.metric}: {reason}"
                    + (f" and {len(found) - 1} more" if len(found) > 1 else ""))
        reasons = sorted({v[2] for v in verdicts if v[1] == outcome and v[1] == CANNOT_TELL})
        out.append(Line(f.quote, source, f"paper: {f.stated()}", measured, outcome,
                        "; ".join(reasons)))
    return out


def references(fd: figdata.FigureData, study: str) -> dict[int, list[tuple[str, float]]]:
    """Paper values to draw beside the measurement: panel index → [(label, ratio)] for
    overhead findings (ratio 1 + value/100) on a relative panel showing their metric."""
    refs: dict[int, list[tuple[str, float]]] = {}
    for f in stated(study):
        if f.claim != "overhead_pct":
            continue
        for i, p in enumerate(fd.panels):
            if p.relative and f.against_baseline and any(findings.matches(f.metric, m) for m in p.metrics):
                refs.setdefault(i, []).append((f.where[:30], 1 + f.value / 100))
    return refs


_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)

BLOCK_TPL = _ENV.from_string("""
<div class="study" id="study-{{ name }}">
<h3>{{ caption }}</h3>
{% if figure %}<figure class="wide study-figure">{{ figure }}</figure>
{% if png %}<p class="caption">PNG: <a href="{{ png }}">{{ png }}</a></p>{% endif %}
{% else %}<p class="caption">Nothing to draw: the campaign has no data for this figure's axes.</p>{% endif %}
<h4>What the paper found / this host</h4>
{% if lines %}<ul class="paper-findings">
{% for l in lines %}<li class="finding-line o-{{ l.outcome|replace(' ', '-') }}"><b>paper found:</b> {{ l.statement }}
<span class="src">({{ l.source }}; {{ l.paper }})</span> — <b>this host:</b> {{ l.measured }} →
<span class="outcome">{{ l.outcome }}</span>{% if l.reason %} ({{ l.reason }}){% endif %}</li>
{% endfor %}</ul>
{% else %}<p class="no-findings">No stated findings are stored for this study.</p>{% endif %}
</div>
""")


def study_block(name: str, analysis: Analysis, trials: Iterable[Any] = (), *, prefix: str = "s-",
                note: str | None = None, png: str | None = None) -> tuple[Markup, figdata.FigureData | None, list[Line]]:
    """(HTML block, figure data, finding lines) of study ``name`` for a campaign."""
    from vhpc.campaign.studies import STUDIES
    from vhpc.report import studyfig
    from vhpc.report.html import embed_figure

    fd = study_figure(name, analysis, trials)
    svg = studyfig.draw(fd, "svg", references(fd, name)) if fd else None
    lines = judge(name, analysis, note)
    spec = STUDIES.get(name).figure
    caption = f"Seed {spec.seed} {spec.number}: {spec.title}" if spec else name
    html = BLOCK_TPL.render(name=name, caption=caption, figure=embed_figure(svg, prefix, caption),
                            png=png if svg else None, lines=lines)
    return Markup(html), fd, lines


def figure_json(fd: figdata.FigureData | None, lines: list[Line]) -> dict[str, Any]:
    """The ``study_figure`` entry of results.json: the figure's data and the finding lines."""
    return {"figure": fd.to_dict() if fd else None,
            "paper_findings": [dict(asdict(l), line=l.text()) for l in lines]}


PAGE_TPL = _ENV.from_string("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vhpc: seed {{ seed }} re-run on this host</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1400px; padding: 0 1rem; color: #222; }
h2 { border-bottom: 1px solid #ccc; } svg.figure, img.figure { max-width: 100%; height: auto; }
.o-agrees .outcome { color: #1b7f2a; font-weight: bold; } .o-disagrees .outcome { color: #b00020; font-weight: bold; }
.o-cannot-tell .outcome { color: #8a6d00; font-weight: bold; } .src, .caption { color: #555; font-size: .85rem; }
.banner { background: #b00020; color: #fff; padding: .6rem 1rem; border-radius: 4px; }
table { border-collapse: collapse; font-size: .85rem; } th, td { border: 1px solid #ddd; padding: .2rem .5rem; }
</style></head><body>
<h1>Seed {{ seed }}: the paper's evaluation re-run on this host</h1>
<p>{{ title }}</p>
<table class="seed-studies"><thead><tr><th>study</th><th>figure</th><th>campaign</th><th>status</th></tr></thead><tbody>
{% for e in entries %}<tr><td><a href="#study-{{ e.name }}">{{ e.name }}</a></td><td>{{ e.number }}</td><td>{{ e.cid or "—" }}</td><td>{{ e.status }}</td></tr>{% endfor %}
</tbody></table>
{% if emulated %}<div class="banner">Some results come from TCG emulation, not hardware virtualization: their overheads are not KVM overheads.</div>{% endif %}
{% for e in entries %}
<section id="sec-{{ e.name }}"><h2>{{ e.name }}{% if e.cid %} — campaign {{ e.cid }}{% if e.report %} (<a href="{{ e.report }}">full report</a>){% endif %}{% endif %}</h2>
{% if e.block %}{{ e.block }}{% else %}<p>Not run: {{ e.status }}</p>{% endif %}
</section>
{% endfor %}
<script>
window.addEventListener("load", function () {
  var figs = document.querySelectorAll("img.figure, svg.figure"), ok = 0;
  for (var i = 0; i < figs.length; i++) { try { var f = figs[i];
    if (f.tagName.toLowerCase() === "img") { if (f.complete && f.naturalWidth > 0) ok++; }
    else { var b = f.getBBox(); if (b && b.width > 0) ok++; } } catch (e) {} }
  document.body.dataset.figuresOk = String(ok); document.body.dataset.figuresTotal = String(figs.length);
});
</script>
</body></html>
""")


SEED_TITLES = {"000": "Xen on NUMA hosts: socket span, cold/warm, partitioning, page faults, problem size",
               "001": "MPI and Linpack under Xen", "003": "NUMA-aware placement: oversubscription, memory profile, vCPU mapping, co-runners",
               "004": "virtualized HPC at scale: collectives, scaling, paging, noise"}


def write_seed_page(seed: str, entries: list[dict[str, Any]], path: str | Path) -> Path:
    """One HTML page for seed ``seed``: ``entries`` (name, number, cid, status, block Markup,
    report link, emulated) in the paper's order.  Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = [{"number": "", "cid": None, "status": "", "block": None, "report": None,
                "emulated": False, **e} for e in entries]
    path.write_text(PAGE_TPL.render(seed=seed, title=SEED_TITLES.get(seed, ""), entries=entries,
                                    emulated=any(e.get("emulated") for e in entries)), encoding="utf-8")
    return path
