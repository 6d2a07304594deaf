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
from vhpc.core import stats
from vhpc.analysis import FASTER, INSUFFICIENT, NO_DIFFERENCE, SLOWER, Analysis
from vhpc.core.metrics import Observation
from vhpc.report import comparison_rows, env_header
from vhpc.report import figures

__all__ = ["write_html", "render_html", "inline_svg"]

_VERDICT_CLASS = {
    SLOWER: "v-slower",
    FASTER: "v-faster",
    NO_DIFFERENCE: "v-nodiff",
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


def _rows(analysis: Analysis) -> list[dict[str, Any]]:
    """Summary-table rows (:func:`vhpc.report.comparison_rows`) with the verdict's CSS class
    and the interval method's full name."""
    out = []
    for r in comparison_rows(analysis):
        d = dict(r.__dict__)
        d["verdict_text"] = r.verdict if r.verdict is not None else ("no baseline" if r.environment else "")
        d["verdict_class"] = _VERDICT_CLASS.get(r.verdict, "v-insufficient")
        d["method_name"] = stats.METHODS.get(r.method, "")
        out.append(d)
    return out


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


def render_html(
    analysis: Analysis,
    observations: Iterable[Observation],
    campaign: Mapping[str, Any],
    fmt: str = "svg",
    max_points: int = 400,
    sections: Iterable[tuple[str, str, Markup]] = (),
    study: Markup | None = None,
) -> str:
    """The report as one HTML string (see :func:`write_html`)."""
    observations = list(observations)
    counter = itertools.count()

    def pfx() -> str:
        return f"f{next(counter)}-"

    relative = _embed(figures.relative_bars(analysis, fmt), pfx(), f"relative to {analysis.baseline}")
    cold_warm = _embed(figures.cold_warm_bars(analysis, fmt), pfx(), "cold vs warm")
    dists = [
        (title, _embed(fig, pfx(), title))
        for title, fig in figures.distributions(analysis, observations, fmt, max_points=max_points)
    ]
    fp_headers, fp_rows = _fingerprints(analysis)
    camp = dict(campaign)
    cid = camp.pop("id", None) or camp.pop("campaign_id", None) or "(unnamed)"
    date = camp.pop("date", None) or camp.pop("created", None) or camp.pop("started", None)
    command = camp.pop("command", None)
    if isinstance(command, (list, tuple)):
        command = " ".join(str(c) for c in command)
    from vhpc.report.header import spec_section

    spec = spec_section(camp.pop("spec", None))
    failures = camp.pop("failures", None) or []
    extra = [(k, _jsonish(v)) for k, v in camp.items()
             if v is not None and not isinstance(v, (dict, list, tuple))]
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
    )
    tpl = env.get_template("report.html.j2")
    return tpl.render(
        version=__version__,
        campaign_id=cid,
        campaign_date=date,
        campaign_command=command,
        campaign_extra=extra,
        baseline=analysis.baseline,
        alpha=f"{analysis.alpha:g}",
        confidence_pct=f"{analysis.confidence * 100:g}",
        emulated=analysis.emulated(),
        rows=_rows(analysis),
        base_header=env_header(analysis, analysis.baseline),
        base_emulated=analysis.environments.get(analysis.baseline) is not None
        and analysis.environments[analysis.baseline].emulated,
        relative_figure=relative,
        cold_warm_figure=cold_warm,
        distribution_figures=dists,
        max_points=max_points,
        findings=analysis.findings,
        fp_headers=fp_headers,
        fp_rows=fp_rows,
        sections=list(sections),
        spec_section=spec,
        failures=failures,
        study_section=study,
    )


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
) -> Path:
    """Write the self-contained HTML report to ``path`` and return the path.

    analysis: result of :func:`vhpc.analysis.analyse`; observations: the same observations
    (for the distribution figures; warm-up ones are not drawn); campaign: metadata shown in the
    header — ``id``, ``date`` (or ``created``), ``command`` (str or argv list); other keys are
    listed as they are.  fmt: ``"svg"`` (inline SVG, default) or ``"png"`` (``data:`` URIs);
    max_points: samples drawn per environment in each distribution figure.
    Sections: header, TCG banner (when an environment is emulated), summary table,
    relative-to-baseline figure, cold/warm figure (when sessions exist), distributions,
    extra ``sections`` ((anchor id, title, HTML Markup) built by :mod:`vhpc.report.diagnostics`:
    placement as applied, diagnostics, memory profile), findings, environment fingerprints
    (key rows × environment columns; nested values as JSON).
    Raises OSError when the file cannot be written, ValueError for an unknown fmt.
    """
    text = render_html(analysis, observations, campaign, fmt=fmt, max_points=max_points,
                       sections=sections, study=study)
    path = Path(path)
    path.write_text(text, encoding="utf-8")
    return path
