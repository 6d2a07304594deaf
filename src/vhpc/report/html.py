"""Self-contained HTML report of an :class:`~vhpc.analysis.Analysis` (Jinja2 template).

The file works offline: CSS inline, figures inline (SVG elements or PNG ``data:`` URIs), no
external URL, no web font, no CDN.  A tiny inline script counts the figures that rendered and
stores the result in ``<body data-figures-ok=N data-figures-total=M>`` for automated checks.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

import jinja2
from markupsafe import Markup

from vhpc import __version__
from vhpc.core import numfmt, stats
from vhpc.analysis import EQUIVALENT, FASTER, INCONCLUSIVE, INSUFFICIENT, SLOWER, Analysis
from vhpc.core.metrics import Observation
from vhpc.core.paths import write_atomic
from vhpc.analysis.families import Family, FamilySummary, families, family_summaries
from vhpc.report import (check_rows, comparison_rows, env_header, family_metric_label, finding_groups,
                         fmt_family_overhead, fmt_family_level, fmt_family_counts, fmt_family_range,
                         fmt_family_ratio, fmt_points, headline_rows, measured_rows,
                         family_centre, fmt_centre, p_adjustment, TOO_FEW)
from vhpc.report import figures, sweeps

__all__ = ["write_html", "render_html", "inline_svg"]

_VERDICT_CLASS = {
    SLOWER: "v-slower",
    FASTER: "v-faster",
    EQUIVALENT: "v-equivalent",
    INCONCLUSIVE: "v-inconclusive",
    INSUFFICIENT: "v-insufficient",
}


def inline_svg(svg: str, prefix: str) -> str:
    """Turn matplotlib's SVG document into an element safe to inline in HTML.

    Removes the XML declaration, DOCTYPE, metadata and namespace URLs (HTML5 parsing needs
    none of them), rewrites ``xlink:href`` to ``href`` (SVG 2), prefixes every ``id`` and its
    references with ``prefix`` so several figures can share one page, and adds
    ``class="figure"`` to the root element.  svg: SVG text; prefix: e.g. ``"f3-"``.
    """
    s = re.sub(r"<\?xml[^>]*\?>", "", svg)
    s = re.sub(r"<!DOCTYPE[^>]*>", "", s, flags=re.S)
    s = re.sub(r"<metadata>.*?</metadata>", "", s, flags=re.S)
    s = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", s)
    s = s.replace("xlink:href=", "href=")
    s = s.replace('id="', f'id="{prefix}')
    s = s.replace('href="#', f'href="#{prefix}')
    s = s.replace("url(#", f"url(#{prefix}")
    s = s.replace("<svg ", '<svg class="figure" role="img" ', 1)
    return s.strip()


def _embed(fig: str | bytes | None, prefix: str, alt: str) -> Markup | None:
    if fig is None:
        return None
    if isinstance(fig, bytes):
        data = base64.b64encode(fig).decode("ascii")
        return Markup(f'<img class="figure" alt="{Markup.escape(alt)}" src="data:image/png;base64,{data}">')
    return Markup(inline_svg(fig, prefix))


def embed_figure(fig: str | bytes | None, prefix: str, alt: str) -> Markup | None:
    """A figure (SVG text or PNG bytes) as inline HTML with class ``figure`` (see _embed)."""
    return _embed(fig, prefix, alt)


def _jsonish(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    return json.dumps(v, default=str) if isinstance(v, bool) else str(v)


def _rows(analysis: Analysis, keys=None) -> list[dict[str, Any]]:
    """Summary-table rows (:func:`vhpc.report.comparison_rows`, restricted to ``keys``) with
    the verdict's CSS class and the interval method's full name."""
    out = []
    for r in comparison_rows(analysis, keys):
        d = dict(r.__dict__)
        d["verdict_text"] = r.verdict if r.verdict is not None else ("no baseline" if r.environment else "")
        d["verdict_class"] = _VERDICT_CLASS.get(r.verdict, "v-insufficient")
        d["method_name"] = stats.METHODS.get(r.method, "")
        out.append(d)
    return out


def _family_row(analysis: Analysis, fs: FamilySummary, first: bool) -> dict[str, Any]:
    """One row of the headline / metrics table: a family against the baseline, as text."""
    fam = fs.family
    return {"name": fam.benchmark, "params": fam.params,
            "metric": family_metric_label(fam), "points": fmt_points(fam),
            "env_label": env_header(analysis, fs.environment), "emulated": fs.emulated,
            "centre": fmt_centre(family_centre(analysis, fam, fs.environment), fam.unit),
            "base_centre": fmt_centre(family_centre(analysis, fam, analysis.baseline), fam.unit),
            "baseline": analysis.baseline,
            "overhead": fmt_family_overhead(fs, level=False, margin=analysis.margin).split(
                ", " + TOO_FEW)[0],
            "level": fmt_family_level(fs) or (  # with why, by ranks: the runs they need
                TOO_FEW + fmt_family_overhead(fs, level=False).partition(TOO_FEW)[2]
                if TOO_FEW in fmt_family_overhead(fs, level=False) else ""),
            "ratio": fmt_family_ratio(fs, analysis.margin),
            "range": [p for p in fmt_family_range(fs).split(" – ") if p], "verdict_text": fs.verdict,
            "counts": fmt_family_counts(fs),
            "verdict_class": _VERDICT_CLASS.get(fs.verdict, "v-insufficient"),
            "trust": list(fs.trust), "first": first, "sweep": fam.sweep,
            "anchor": _anchor(fam), "signed": fs.difference is not None}


def common_trust(rows: list[dict[str, Any]]) -> list[str]:
    """The "limits trust" notes every row of ``rows`` (two or more) shares, in the first row's
    order; they are removed from the rows (each row keeps only its own) so the headline says
    them once, above the table, instead of once per row."""
    if len(rows) < 2:
        return []
    shared = [t for t in rows[0]["trust"] if all(t in r["trust"] for r in rows[1:])]
    for r in rows:
        r["trust"] = [t for t in r["trust"] if t not in shared]
    return shared


def _size_text(fam: Family, sizes: Mapping[str, Mapping[str, str]]) -> str:
    """The problem size of ``fam``'s benchmark (:func:`vhpc.report.pagefacts.size_text`): its
    points' resolved parameters but those its label and its sweep already show; "" when the
    campaign's spec did not say."""
    from vhpc.analysis.findings import label
    from vhpc.report.pagefacts import size_text

    shown = {kv.split("=")[0] for kv in fam.params.split(",")} | {fam.parameter}
    by_param = fam.sweep and not fam.by_size
    points = [(f"{fam.parameter}={fam.fmt_x(x)}" if by_param else "", sizes[k])
              for x, p, _ in fam.points if (k := label(fam.benchmark, p)) in sizes]
    return size_text(points, shown)


def _anchor(fam: Family) -> str:
    return "fam-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{fam.label}-{fam.quantity}").strip("-")


def _family_rows(analysis: Analysis, summaries: list[FamilySummary]) -> list[dict[str, Any]]:
    rows, last = [], None
    for fs in summaries:
        key = (fs.family.benchmark, fs.family.params, fs.family.quantity)
        rows.append(_family_row(analysis, fs, key != last))
        last = key
    return rows


def _cold_warm_keys(analysis: Analysis, fams: list[Family]) -> list[tuple[str, str, str]]:
    """Keys drawn in the cold/warm figure: the primary families', a sweep at its smallest,
    middle and largest point."""
    keys = []
    for fam in fams:
        if not fam.primary:
            continue
        pts = fam.points if len(fam.points) <= 3 else [fam.points[0], fam.points[len(fam.points) // 2],
                                                       fam.points[-1]]
        keys += [(fam.benchmark, p, m) for _, p, m in pts]
    return keys


def _fingerprints(analysis: Analysis) -> tuple[list[dict[str, Any]], list[tuple[str, list[str], bool]]]:
    envs = analysis.environment_order()
    headers = [{"label": env_header(analysis, e), "emulated": analysis.environments[e].emulated} for e in envs]
    rows: list[tuple[str, list[str], bool]] = []
    kinds = [analysis.environments[e].kind for e in envs]
    accels = [_jsonish(analysis.environments[e].accel) for e in envs]
    rows.append(("kind", kinds, len(set(kinds)) > 1))
    rows.append(("accel", accels, len(set(accels)) > 1))
    keys: dict[str, None] = {}
    for e in envs:
        for k in analysis.environments[e].fingerprint:
            keys.setdefault(str(k), None)
    for k in keys:
        if k in ("kind", "accel"):  # already the first two rows
            continue
        cells = [_jsonish(analysis.environments[e].fingerprint.get(k)) for e in envs]
        rows.append((k, cells, len(set(cells)) > 1))
    return headers, rows


def _headline(analysis: Analysis, rows, sizes: Mapping) -> list[dict[str, Any]]:
    """The headline's rows (:func:`vhpc.report.headline_rows` ``rows``) for the template, each
    with its own notes (what a mean leaves out), check and problem size; ``size_line`` holds
    the size in a full-width line under a benchmark's last row, once for consecutive rows of
    one benchmark with the same size (osu-coll's four operations)."""
    headline = _family_rows(analysis, [r.summary for r in rows])
    for cells, row in zip(headline, rows):
        cells["trust"], cells["check"] = list(row.trust), row.check
        cells["size"] = _size_text(row.summary.family, sizes)
    for cells, nxt in zip(headline, [*headline[1:], None]):
        cells["size_line"] = cells["size"] if nxt is None or (nxt["name"], nxt["size"]) != (
            cells["name"], cells["size"]) else ""
    return headline


def _sweep_curves(analysis: Analysis, shown: list[Family], fmt: str, shared: set,
                  study: Markup | None, prefix) -> list[dict[str, Any]]:
    """One figure per swept family of ``shown`` (:func:`vhpc.report.sweeps.family_figure`),
    the points where CPUs were ``shared`` shaded; drawn open for a primary metric's sweep
    unless the study's figure draws it already.  ``prefix()`` gives each figure's id prefix."""
    curves = []
    for fam in shown:
        contended = [x for x, p, _ in fam.points if x is not None and any(
            (e, fam.benchmark, p) in shared for e in analysis.environment_order())]
        fig = sweeps.family_figure(analysis, fam, fmt, contended) if fam.sweep else None
        if fig is not None:
            curves.append({"title": f"{fam.label}: {fam.quantity}", "anchor": _anchor(fam),
                           "shown": fam.primary and study is None,
                           "figure": _embed(fig, prefix(), f"{fam.label} {fam.quantity} vs {fam.parameter}")})
    return curves


def _measured(analysis: Analysis, sizes: Mapping) -> list[dict[str, Any]]:
    """The rows of a campaign of one environment (what was measured, no ratio): every
    metric's value per environment, ``first`` on a benchmark's first row."""
    rows = measured_rows(analysis, primary_only=False)
    return [{"bench": r.bench, "metric": r.metric, "env": r.environment, "value": r.value,
             "n": r.n, "unit": r.unit, "check": r.check, "size": _size_text(r.family, sizes),
             "first": i == 0 or r.bench != rows[i - 1].bench}
            for i, r in enumerate(rows)]


def _distribution_figures(analysis: Analysis, observations: list[Observation],
                          shown: list[Family], fmt: str, max_points: int,
                          prefix) -> list[tuple[str, str]]:
    """(title, embedded figure) of the samples' distribution, one per family of ``shown``: a
    sweep's over its parameter, a scalar metric's per environment, at most ``max_points``
    samples drawn per environment."""
    dists = []
    for fam in shown:
        if fam.sweep:
            fig = sweeps.family_distribution(analysis, observations, fam, fmt, max_points)
            items = [(f"{fam.label}: {fam.quantity}", fig)] if fig is not None else []
        else:
            items = figures.distributions(analysis, observations, fmt, max_points=max_points,
                                          keys=fam.keys[:1])
        dists += [(title, _embed(fig, prefix(), title)) for title, fig in items]
    return dists


def _point_tables(analysis: Analysis, fams: list[Family]) -> list[dict[str, Any]]:
    """Every family's per-point table but the check figures': its title, anchor, points and
    comparison rows."""
    return [{"title": f"{fam.label}: {family_metric_label(fam)}", "anchor": _anchor(fam) + "-points",
             "secondary": fam.secondary, "points": fmt_points(fam),
             "by_param": fam.sweep and not fam.by_size,
             "rows": _rows(analysis, fam.keys)}
            for fam in fams if not fam.check]


def _campaign_header(analysis: Analysis, campaign: Mapping[str, Any]) -> dict[str, Any]:
    """The campaign's header and last section for the template: its id (``id`` or
    ``campaign_id``, else ``(unnamed)``), date (``date``, ``created`` or ``started``), command
    (argv joined), spec section, failed trials, trial count and every other scalar field as
    ``(key, text)``."""
    from vhpc.report.header import spec_section

    camp = dict(campaign)
    cid = camp.pop("id", None) or camp.pop("campaign_id", None) or "(unnamed)"
    date = camp.pop("date", None) or camp.pop("created", None) or camp.pop("started", None)
    command = camp.pop("command", None)
    if isinstance(command, (list, tuple)):
        command = " ".join(str(c) for c in command)
    spec = spec_section(camp.pop("spec", None),
                        {n: e.fingerprint or {} for n, e in analysis.environments.items()})
    failures = camp.pop("failures", None) or []
    extra = [(k, _jsonish(v)) for k, v in camp.items()
             if v is not None and not isinstance(v, (dict, list, tuple))]
    return {"campaign_id": cid, "campaign_date": date, "campaign_command": command,
            "campaign_extra": extra, "spec_section": spec, "failures": failures,
            "n_trials": camp.get("trials")}


def render_html(
    analysis: Analysis,
    observations: Iterable[Observation],
    campaign: Mapping[str, Any],
    fmt: str = "svg",
    max_points: int = 400,
    sections: Iterable[tuple[str, str, Markup]] = (),
    study: Markup | None = None,
    shared: Iterable[tuple[str, str, str]] = (),
    facts: Mapping[str, Any] | None = None,
) -> str:
    """The report as one HTML string (see :func:`write_html`)."""
    observations = list(observations)
    shared = set(shared)
    counter = itertools.count()

    def prefix() -> str:  # each embedded figure's ids, in the order the page draws them
        return f"f{next(counter)}-"

    fams = families(analysis)
    sums = family_summaries(analysis, fams, shared)
    facts = facts or {}
    sizes = facts.get("sizes") or {}
    headline = _headline(analysis, headline_rows(analysis, shared), sizes)
    trust_all = common_trust(headline)  # taken out of each row's own notes
    metric_rows = _family_rows(analysis, [fs for fs in sums if not fs.family.primary
                                          and not fs.family.secondary])
    metric_trust_all = common_trust(metric_rows)
    secondary_rows = _family_rows(analysis, [fs for fs in sums if fs.family.secondary])
    shown = [f for f in fams if not f.secondary]
    curves = _sweep_curves(analysis, shown, fmt, shared, study, prefix)
    scalar_keys = [f.keys[0] for f in shown if not f.sweep]
    compare = bool(analysis.others())  # one environment: what was measured, no ratio panel
    relative = _embed(figures.relative_bars(analysis, fmt, keys=scalar_keys), prefix(),
                      f"relative to {analysis.baseline}") if scalar_keys and compare else None
    # cold vs warm only means something when the protocol boots for it (cold, cold-warm) and
    # cold trials exist (a warm campaign's first trial after a boot is no experiment)
    spec = campaign.get("spec") if isinstance(campaign.get("spec"), Mapping) else {}
    cold_warm = None if spec.get("protocol") == "warm" else _embed(
        figures.cold_warm_bars(analysis, fmt, keys=_cold_warm_keys(analysis, fams)), prefix(),
        "cold vs warm")
    dists = _distribution_figures(analysis, observations, shown, fmt, max_points, prefix)
    point_tables = _point_tables(analysis, fams)
    fp_headers, fp_rows = _fingerprints(analysis)
    return _report_template().render(
        version=__version__,
        **_campaign_header(analysis, campaign),
        baseline=analysis.baseline,
        alpha=f"{analysis.alpha:g}",
        p_adjust=p_adjustment(analysis),
        confidence_pct=f"{analysis.confidence * 100:g}",
        margin_pct=f"{analysis.margin * 100:g}",
        checks=check_rows(analysis),
        emulated=analysis.emulated(),
        headline=headline,
        ranked=any(c.ratio_ci_method == stats.RANK for c in analysis.comparisons),
        factor_note=numfmt.FACTOR_NOTE if any(
            numfmt.is_factor_text(r["overhead"]) for r in [*headline, *metric_rows, *(
                r for t in point_tables for r in t["rows"])]) else "",
        host_load=facts.get("load"),
        compare=compare,
        measured=[] if compare else _measured(analysis, sizes),
        trust_all=trust_all,
        metric_trust_all=metric_trust_all,
        metric_rows=metric_rows,
        secondary_rows=secondary_rows,
        secondary_names=sorted({f.quantity for f in fams if f.secondary and not f.check}),
        point_tables=point_tables,
        curves=curves,
        base_header=env_header(analysis, analysis.baseline),
        base_emulated=analysis.environments.get(analysis.baseline) is not None
        and analysis.environments[analysis.baseline].emulated,
        relative_figure=relative,
        cold_warm_figure=cold_warm,
        distribution_figures=dists,
        max_points=max_points,
        findings=finding_groups(analysis.findings),
        fp_headers=fp_headers,
        fp_rows=fp_rows,
        sections=list(sections),
        study_section=study,
    )


def _report_template() -> jinja2.Template:
    """The page's Jinja2 template (templates/report.html.j2), autoescaped, every name it
    uses required (StrictUndefined)."""
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
    )
    return env.get_template("report.html.j2")


def _load_template(name: str) -> str:
    return resources.files("vhpc.report").joinpath("templates", name).read_text(encoding="utf-8")


def write_html(
    analysis: Analysis,
    observations: Iterable[Observation],
    path: str | Path,
    campaign: Mapping[str, Any],
    fmt: str = "svg",
    max_points: int = 400,
    sections: Iterable[tuple[str, str, Markup]] = (),
    study: Markup | None = None,
    shared: Iterable[tuple[str, str, str]] = (),
    facts: Mapping[str, Any] | None = None,
) -> Path:
    """Write the self-contained HTML report to ``path`` and return the path.

    analysis: result of :func:`vhpc.analysis.analyse`; observations: the same observations
    (for the distribution figures; warm-up ones are not drawn); campaign: metadata shown in the
    header — ``id``, ``date`` (or ``created``), ``command`` (str or argv list); other keys are
    listed as they are.  fmt: ``"svg"`` (inline SVG, default) or ``"png"`` (``data:`` URIs);
    max_points: samples drawn per environment in each distribution figure; shared:
    (environment, benchmark, params) whose ranks of different nodes or guests shared a host
    CPU (:func:`vhpc.report.scaleout.shared_cpus`), named in the headline's "limits trust";
    facts: :class:`vhpc.report.export.ReportData` ``facts`` (problem sizes under each
    headline benchmark, this host's load beneath the headline).
    Sections, the answer first: a one-line header; the TCG banner (when an environment is
    emulated); the headline (per benchmark and environment the primary metric's overhead —
    for a sweep the geometric mean of the per-size ratios with its interval and their range
    (:mod:`vhpc.analysis.families`) — its verdict and what limits trust); the study's figure;
    one figure per sweep (curves vs message size and the ratio per size); the other metrics,
    one row per family, secondary ones (min/max, counts) and every per-size table folded; the
    relative-to-baseline figure of scalar metrics; cold vs warm (only when cold trials exist,
    folded); distributions (one figure per family, folded);
    extra ``sections`` ((anchor id, title, HTML Markup) built by :mod:`vhpc.report.diagnostics`:
    placement as applied, diagnostics, memory profile), findings, environment fingerprints
    (key rows × environment columns; nested values as JSON); the campaign (command, spec,
    protocol, failed trials) last.
    Raises OSError when the file cannot be written, ValueError for an unknown fmt.
    """
    text = render_html(analysis, observations, campaign, fmt=fmt, max_points=max_points,
                       sections=sections, study=study, shared=shared, facts=facts)
    path = Path(path)
    write_atomic(path, text)
    return path
