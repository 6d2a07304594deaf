"""Terminal views the ``vhpc`` command prints besides the comparison table: the campaign
report (metadata, files written), the ``--dry-run`` plan, ``vhpc plan`` placements, the
memory profile, and the benchmark and campaign lists.  Presentation only: these functions
read stored results and typed plans and print or write them; they never run anything.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vhpc.core.paths import write_atomic
from vhpc.core.text import markup as esc
from vhpc.core.text import plain
from vhpc.report.values import image_label


def report_meta(store, cid: str) -> dict[str, Any]:
    """Report metadata of campaign ``cid``: id, date (UTC), command, status, spec, trial and
    failure counts, and the failed trials' errors (last 2000 characters each)."""
    camp = store.campaign(cid)
    trials = store.trials(cid)
    failed = [t for t in trials if t.status == "failed"]
    return {"id": cid,
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(camp["created"])),
            "command": camp["command"], "status": camp["status"], "spec": camp["spec"],
            "trials": len(trials), "failed": len(failed),
            "failures": [{"environment": t.environment, "benchmark": t.benchmark,
                          "round": t.round, "error": (t.error or "")[-2000:]}
                         for t in failed] or None}


def analyse_stored(store, cid: str, margin: float | None = None, intervals: str | None = None,
                   method: str | None = None):
    """(analysis, observations) of stored campaign ``cid``: :func:`vhpc.analysis.analyse` at
    the campaign's equivalence margin (its spec's ``margin``, 5 % for a campaign stored
    before there was one) unless ``margin`` is given, with its intervals (``holm`` or
    ``simultaneous``: its spec's, unless ``intervals`` is given), its ``method``
    (``log-welch`` or ``rank``, likewise), its custom checks and the custom metrics it declares
    ``signed: true``."""
    from vhpc import analysis
    from vhpc.analysis.checks import check_specs, pair_specs
    from vhpc.analysis.compare import declared_signed

    camp = store.campaign(cid)
    spec = camp["spec"]
    obs = store.observations(cid)
    if margin is None:
        margin = spec.get("margin", analysis.DEFAULT_MARGIN)
    return analysis.analyse(obs, store.environments(cid), spec["baseline"], margin=margin,
                            checks=check_specs(spec), pairs=pair_specs(spec),
                            intervals=intervals or spec.get("intervals") or "holm",
                            method=method or spec.get("method") or "log-welch",
                            signed=declared_signed(spec)), obs


def campaign_report(store, cid: str, out: str | Path, console: Console, html=None, csv=None,
                    jsn=None, quiet: bool = False, extra_sections=(), detail: bool | None = None,
                    margin: float | None = None, intervals: str | None = None,
                    method: str | None = None) -> Path:
    """Analyse stored campaign ``cid`` (:func:`analyse_stored`, ``margin``, ``intervals`` and
    ``method``: see there); write
    the HTML report, CSV and JSON (default: in ``out/cid/``); print the headline unless
    ``quiet`` (with ``detail``, ``vhpc report ID --all``, every metric before it:
    :func:`vhpc.report.terminal.render_table`); return the HTML path.  ``extra_sections``:
    more ``(anchor, title, Markup)`` HTML sections (``vhpc tune``'s race)."""
    from vhpc.report import diagnostics, export, terminal

    camp = store.campaign(cid)
    envs = store.environments(cid)
    result, obs = analyse_stored(store, cid, margin, intervals, method)
    meta = report_meta(store, cid)
    trials = store.trials(cid)
    from vhpc.analysis.checks import check_findings

    checks = check_findings(trials, camp["spec"],  # check: outcomes, and why
                            {o.trial_id for o in obs if not o.valid})
    from vhpc.analysis.findings import (empty_environment_findings, slowdown_findings,
                                        unfinished_findings)

    checks = [*unfinished_findings(trials, camp["status"], cid),  # running or interrupted
              *empty_environment_findings(trials, result.environments),  # all samples dropped
              *slowdown_findings(trials), *checks]  # a slowdown= the kernel did not apply
    result.findings[:0] = [f for f in checks if f.level == "warn"]
    result.findings += [f for f in checks if f.level != "warn"]
    from vhpc.report import pagefacts

    result.findings += pagefacts.short_region_findings(result)
    facts = {"sizes": pagefacts.problem_sizes(camp["spec"], trials),
             "load": pagefacts.host_load(trials)}
    from vhpc.report.header import vcluster_section

    vc = vcluster_section(trials)
    sections = (*diagnostics.sections(trials, envs, result), *extra_sections,
                *((("guests-ranks", "Guests and ranks (vcluster)", vc),) if vc else ()))
    study = study_outputs(result, meta, trials, Path(out) / cid)
    data = export.ReportData(result, obs, meta, sections, tuple(trials),
                             study=study[0] if study else None,
                             study_html=study[1] if study else None, facts=facts)
    written = export.export_all(data, Path(out) / cid,
                                {"html": html, "samples-csv": csv, "json": jsn})
    html_path = written["html"]
    if not quiet:
        again = f"vhpc report {cid} --all" + ("" if str(out) == "vhpc-results" else f" --out {out}")
        terminal.render_table(result, console, title=f"vhpc campaign {cid}",
                              shared=export.shared_points(trials), detail=detail,
                              notes=[f"This host: {facts['load']}"] if facts["load"] else [],
                              all_hint=again)
        if meta["failed"]:
            console.print(f"[red]{meta['failed']} of {meta['trials']} trials failed; "
                          "their errors are in the report.")
        line = f"Report: {html_path}"  # what is beside it only where the line holds it
        more = "  (CSV and JSON beside it)"
        console.print(f"Report: [bold]{esc(html_path)}[/]"
                      + (more if len(line) + len(more) <= console.width else ""))
    return html_path


def study_outputs(result, meta, trials, folder: Path, name: str | None = None,
                  note: str | None = None):
    """For a study campaign: write its figure as ``figure.svg`` and ``figure.png`` into
    ``folder`` and return (results.json entry, HTML block, finding lines); None otherwise."""
    from vhpc.report import paper, studyfig

    name = name or paper.study_of(meta)
    if name is None:
        return None
    from vhpc.report.export import report_folder

    report_folder(folder)
    block, fd, lines, svg = paper.study_block(name, result, trials, note=note, png="figure.png")
    if svg is not None:  # the figure has points: the SVG the block embeds, and a PNG
        write_atomic(folder / "figure.svg", svg)
        write_atomic(folder / "figure.png", studyfig.draw(fd, "png", paper.references(fd, name)))
    return {"name": name, **paper.figure_json(fd, lines)}, block, lines


#: Most trial rows ``--dry-run`` prints (rich renders ~1000 rows a second on a slow host);
#: the summary line still counts them all.
DRY_RUN_ROWS = 1000


def dry_run(console: Console, spec, trials, placements: dict[str, str]) -> None:
    """The planned trials of ``spec`` (``vhpc ... --dry-run``): round, environment, benchmark
    with its resolved parameters (``auto`` = derived from the environment at run time) and
    the environment's placement, then a one-line summary.  ``trials``: campaign.plan(spec);
    at most :data:`DRY_RUN_ROWS` rows are listed."""
    table = Table(title="planned trials (dry run: nothing is started)")
    for col in ("#", "round", "environment", "benchmark", "parameters", "placement"):
        table.add_column(col, overflow="fold")
    by_name = {b.name + "\0" + b.key: b for b in spec.benchmarks}
    for t in trials[:DRY_RUN_ROWS]:
        b = by_name[t.benchmark + "\0" + t.params]
        bench = spec.benchmark(t.benchmark)
        resolved = bench.resolve(b.params)
        auto = bench.auto_values(resolved, spec.environment(t.environment).part.llc_owner)
        # auto: also an n=0 the kernel sizes; ", " between parameters, so a narrow table
        # wraps between words, never inside a name ("ntime" / "s=10")
        params = ", ".join(f"{k}={auto[k] if k in auto else 'auto' if v is None else v}"
                           for k, v in resolved.items())
        rnd = f"warm-up {t.round}" if t.warmup else str(t.round - spec.warmup)
        image = getattr(spec.environment(t.environment).options, "image", None)
        table.add_row(str(t.seq), rnd + (" (new session)" if t.fresh else ""),
                      esc(image_label(t.environment, str(image) if image else None)),
                      esc(t.benchmark), esc(params), esc(placements[t.environment]))
    console.print(table)
    if len(trials) > DRY_RUN_ROWS:
        console.print(f"... and {len(trials) - DRY_RUN_ROWS} more trials in the same pattern")
    console.print(f"{len(trials)} trials: {len(spec.benchmarks)} benchmark(s) × "
                  f"{len(spec.environments)} environment(s) × {spec.warmup}+{spec.repeats} "
                  f"rounds, protocol {spec.protocol}, order {spec.order}; nothing was run.")


def memory_profile(console: Console, trials) -> None:
    """The memory-profile table (Cheng and Chen, 3PGCIC 2013, Fig. 3): penalty, MPKI, class;
    the fit if any.
    ``trials``: the campaign's stored trials."""
    from vhpc.analysis import memprofile

    rows = memprofile.profile(memprofile.from_trials(trials))
    table = Table(title="memory profile: NUMA penalty vs memory intensity")
    for col in ("benchmark", "NUMA penalty", "basis", "MPKI", "class"):
        table.add_column(col)
    for r in rows:
        table.add_row(esc(r.benchmark), f"{r.penalty:.3f}" if r.penalty else "n/a", esc(r.basis),
                      f"{r.mpki:.2f}" if r.mpki is not None else "unavailable", r.intensity or "-")
    console.print(table)
    if any(r.basis == "time" for r in rows):
        console.print("CPI is unavailable (no hardware counters): the penalty shown is the ratio "
                      "of trial wall times remote/local, and MPKI classes cannot be given.")
    f = memprofile.fit(rows)
    if f:
        console.print(f"fit: penalty = {f.intercept:.3f} + {f.slope:.3f}·MPKI (r² = {f.r2:.2f}, "
                      f"{f.n} benchmarks)")


def benchmarks(console: Console, registry: dict, markdown: bool = False) -> None:
    """``vhpc list benchmarks``: a table (or Markdown for docs/benchmarks.md)."""
    if markdown:
        from vhpc.benchmarks.catalog import render_markdown

        sys.stdout.write(render_markdown(list(registry.values())))
        return
    table = Table(title="benchmarks", show_lines=True)
    for col in ("name", "parameters (default)", "metrics", "verification", "serves"):
        table.add_column(col)
    for b in registry.values():
        params = "\n".join(f"{p.name}={'auto' if p.default is None else p.default}"
                           for p in b.params)
        metrics = "\n".join(f"{m.name} [{m.unit}] {'↑' if m.higher_is_better else '↓'}"
                            for m in b.metrics)
        table.add_row(f"[bold]{escape(b.name)}[/]\n{escape(b.summary)}", escape(params),
                      escape(metrics), escape(b.verification), escape(b.provenance))
    console.print(table)
    console.print("↑ higher is better, ↓ lower is better.  Override with -b NAME:param=value,...")


def campaigns(console: Console, rows: list[dict], where: str) -> None:
    """``vhpc list campaigns``: id, status, done/failed/total trials, command."""
    table = Table(title=esc(f"campaigns in {where}"))
    for col in ("id", "status", "done", "failed", "total", "command"):
        table.add_column(col)
    for c in rows:  # store rows are foreign text: no markup, no terminal escapes
        table.add_row(esc(c["id"]), esc(c["status"]), str(c["done"] or 0),
                      str(c["failed"] or 0), str(c["total"]), esc(plain(c["command"] or "")[:80]))
    console.print(table)
