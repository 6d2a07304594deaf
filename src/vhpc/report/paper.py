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

import fnmatch
import inspect
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import jinja2
from markupsafe import Markup

from vhpc.analysis import Analysis
from vhpc.analysis import figdata

AGREES, DISAGREES, CANNOT_TELL = "agrees", "disagrees", "cannot tell"


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
        return (f"paper found: {self.statement} ({self.source}; {self.paper}) / this host: "
                f"{self.measured} → {self.outcome}" + (f" ({self.reason})" if self.reason else ""))


def _findings_module():
    try:
        from vhpc.campaign import findings  # seed data (colleague's module)
    except ImportError:
        return None
    return findings


def stated(study: str) -> list[Any]:
    """The seed's stated findings for ``study`` ([] when none are stored)."""
    mod = _findings_module()
    if mod is None:
        return []
    for name in ("for_study", "findings_for", "of_study"):
        fn = getattr(mod, name, None)
        if callable(fn):
            return list(fn(study))
    load = getattr(mod, "load", None) or getattr(mod, "load_findings", None)
    items = load() if callable(load) else []
    if isinstance(items, dict):
        items = items.get(study, items.get("findings", []))
    items = getattr(items, "findings", items)
    return [f for f in items if _attr(f, "study") == study]


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        v = obj.get(n) if isinstance(obj, dict) else getattr(obj, n, None)
        if v is not None:
            return v
    return default


def _matches(c, f, baseline: str) -> bool:
    bench = _attr(f, "benchmark", default="*")
    metric = _attr(f, "metric", default="*")
    env = _attr(f, "environment", "env", default="*")
    return (fnmatch.fnmatchcase(c.benchmark, bench) and
            (fnmatch.fnmatchcase(c.metric, metric) or bool(re.fullmatch(metric, c.metric)))
            and fnmatch.fnmatchcase(c.environment, env))


def _call_verdict(mod, f, ratio, ci, n, tcg):
    fn = getattr(mod, "verdict", None) or getattr(mod, "judge", None)
    values = {"finding": f, "statement": f, "f": f, "ratio": ratio, "measured": ratio,
              "ci": ci, "interval": ci, "ratio_ci": ci, "n": n, "runs": n, "tcg": tcg,
              "emulated": tcg}
    params = list(inspect.signature(fn).parameters)
    try:
        res = fn(**{p: values[p] for p in params if p in values})
    except TypeError:
        res = fn(f, ratio, ci, n, tcg)
    outcome = _attr(res, "outcome", "verdict", "value") if not isinstance(res, (str, tuple)) else None
    reason = _attr(res, "reason", default="") if not isinstance(res, (str, tuple)) else ""
    if isinstance(res, tuple):
        outcome, reason = res[0], (res[1] if len(res) > 1 else "")
    elif isinstance(res, str):
        outcome = res
    outcome = str(getattr(outcome, "value", outcome)).replace("_", " ")
    return outcome, reason or ""


def _paper_value(f) -> str:
    v = _attr(f, "value", "ratio", "expected")
    d = _attr(f, "direction")
    if v is not None:
        return f"paper: {v}"
    return f"paper: {getattr(d, 'value', d)}" if d is not None else "paper: stated"


def judge(study: str, analysis: Analysis, not_makeable: str | None = None) -> list[Line]:
    """One line per stated finding of ``study``; a finding whose comparisons the campaign does
    not have is "cannot tell" (placement not makeable on this host, or not measured)."""
    mod = _findings_module()
    out = []
    for f in stated(study):
        statement = str(_attr(f, "statement", "claim", "text", "quote", default="(statement)"))
        source = " ".join(str(x) for x in (_attr(f, "seed_file", "seed", "source"),
                                          _attr(f, "where", "figure", "section")) if x)
        comps = [c for c in analysis.comparisons if c.ratio is not None and _matches(c, f, analysis.baseline)]
        if not comps:
            why = not_makeable or "not measured in this campaign"
            out.append(Line(statement, source, _paper_value(f), "no matching measurement",
                            CANNOT_TELL, f"placement not makeable: {why}" if not_makeable else why))
            continue
        verdicts = []
        for c in comps:
            tcg = bool(analysis.environments.get(c.environment) and analysis.environments[c.environment].emulated)
            verdicts.append((c, *_call_verdict(mod, f, c.ratio, c.ratio_ci, min(c.n, c.n_baseline), tcg)))
        outs = {v[1] for v in verdicts}
        outcome = DISAGREES if DISAGREES in outs else (AGREES if outs == {AGREES} else CANNOT_TELL)
        pick = next(v for v in verdicts if v[1] == outcome) if any(v[1] == outcome for v in verdicts) else verdicts[0]
        c = pick[0]
        lo, hi = c.ratio_ci
        ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
        measured = (f"{c.environment}/{c.benchmark} {c.metric}: ratio {c.ratio:.3f}{ci} (n={c.n})"
                    + (f" and {len(comps) - 1} more" if len(comps) > 1 else ""))
        reasons = sorted({v[2] for v in verdicts if v[2] and v[1] == outcome})
        out.append(Line(statement, source, _paper_value(f), measured, outcome, "; ".join(reasons)))
    return out


def references(fd: figdata.FigureData, study: str) -> dict[int, list[tuple[str, float]]]:
    """Paper values to draw beside the measurement: panel index → [(label, ratio)] for
    findings with a numeric value on a relative panel showing their metric."""
    refs: dict[int, list[tuple[str, float]]] = {}
    for f in stated(study):
        v = _attr(f, "value", "ratio", "expected")
        if not isinstance(v, (int, float)):
            continue
        metric = _attr(f, "metric", default="*")
        for i, p in enumerate(fd.panels):
            if p.relative and any(fnmatch.fnmatchcase(m, metric) for m in p.metrics):
                refs.setdefault(i, []).append((str(_attr(f, "where", "figure", default=""))[:30] or "value", float(v)))
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
