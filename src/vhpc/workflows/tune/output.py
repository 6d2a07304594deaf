"""Presenting a race: the recommendation, the placement as libvirt XML / QEMU arguments /
OpenStack flavor extra specs, the terminal table, JSON, and an HTML section with the race figure.

Pure presentation: everything comes in as data (definition, race state, prior); nothing runs.

OpenStack flavor extra specs follow the Nova documentation ("Flavors", extra specs
``hw:cpu_policy``, ``hw:numa_nodes``, ``hw:numa_cpus.N``, ``hw:numa_mem.N``,
``hw:mem_page_size``): Nova chooses the host nodes itself, so the specs carry the guest's
shape (dedicated pCPUs or not, guest NUMA nodes with their vCPUs and MiB, page size), not the
host node numbers of the libvirt XML.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vhpc import placement
from vhpc.core.cpulist import format_cpu_list
from vhpc.core.paths import write_atomic
from vhpc.environments.kind import KINDS
from vhpc.workflows.tune.candidates import Candidate
from vhpc.workflows.tune.race import (CONTENDER, ELIMINATED, EQUIVALENT, FAILED, LEADER, RaceState, order_by_prior)
from vhpc.workflows.tune.run import Definition

if TYPE_CHECKING:  # a type only: exports are asked of the kinds
    from vhpc.environments.vm.backends.base import PlacementExport

__all__ = ["Recommendation", "recommend", "shape", "ratio_text", "flavor_specs", "exports",
           "status_text", "to_json", "html_section", "race_figure", "candidate_lines"]


@dataclass(frozen=True)
class Recommendation:
    """The chosen candidate and a one-line ``confidence`` (why it was chosen, how sure)."""

    candidate: Candidate
    confidence: str


def recommend(d: Definition, st: RaceState, intensity: str | None) -> Recommendation | None:
    """The leader; among candidates equivalent to it, the first in the prior's order (Cheng and
    Chen, 3PGCIC 2013; :func:`vhpc.workflows.tune.race.order_by_prior`), else the leader.  None
    when nothing finished."""
    lead = st.leader
    if lead is None:
        return None
    s = d.settings
    ties = [e for e, x in st.standings.items() if x.status in (LEADER, EQUIVALENT)]
    if st.reason == "equivalent within tolerance" and intensity is not None:
        lead = order_by_prior(ties, lambda e: d.candidate(e).local, intensity)[0]
    c = d.candidate(lead)
    if len(s.candidates) == 1:
        why = "the only candidate raced (--candidates): its cost relative to native is measured, not compared"
    elif st.reason == "one remains":
        why = (f"every other candidate was significantly worse (Welch on the log cost ratio, "
               f"Holm, alpha={s.alpha:g})")
    elif st.reason == "equivalent within tolerance":
        why = (f"{len(ties)} candidates are equivalent within ±{s.tolerance:.0%} (TOST, "
               f"alpha={s.alpha:g})" + ("; chosen by the memory-intensity prior" if
                                        intensity is not None and len(ties) > 1 else
                                        "; chosen as the lowest measured cost"))
    else:
        left = [e for e, x in st.standings.items() if x.status == CONTENDER]
        why = (f"{st.reason}: lowest measured cost, not yet separated from "
               f"{', '.join(d.candidate(e).name for e in left) or 'nothing'}: more budget "
               "would decide")
    return Recommendation(c, why)


def flavor_specs(c: Candidate) -> dict[str, str]:
    """OpenStack flavor extra specs for the candidate's (first) VM (module docstring)."""
    p = c.placements[0]
    specs = {"hw:cpu_policy": "dedicated" if p.pinned and c.oversubscribed == 1 else "shared",
             "hw:mem_page_size": "2MB" if p.backing == "2m" else "1GB" if p.backing == "1g"
             else "small"}
    bound = any(g.policy != "default" for g in p.guest_nodes)
    if len(p.guest_nodes) > 1 or bound:
        specs["hw:numa_nodes"] = str(len(p.guest_nodes))
        if len(p.guest_nodes) > 1:
            for g in p.guest_nodes:
                specs[f"hw:numa_cpus.{g.id}"] = format_cpu_list(g.vcpus)
                specs[f"hw:numa_mem.{g.id}"] = str(g.memory_mib)
    return specs


def exports(c: Candidate, name: str = "vhpc-tuned") -> list[PlacementExport]:
    """The candidate's VMs as each registered hypervisor backend would start them outside vhpc
    (:meth:`~vhpc.environments.vm.backends.base.HypervisorBackend.export_placement`: libvirt
    domain XML, QEMU arguments, ...), in the registry's order; ``name`` names the guests."""
    return [x for _, kind in KINDS.items()
            for x in kind().export_placement(c.placements, name, c.pool)]


def status_text(x) -> str:
    """``leader`` / ``eliminated at round r (p=…)`` / ``equivalent`` / ``contender`` / failed."""
    if x.status == ELIMINATED:
        return f"eliminated at round {x.round} (p={x.p:.3g})"
    if x.status == EQUIVALENT:
        return f"equivalent (TOST p={x.tost_p:.3g})" if x.tost_p is not None else "equivalent"
    if x.status == FAILED:
        return f"failed at round {x.round} (no valid results)" if x.round is not None else "failed"
    if x.status == CONTENDER and x.n == 0:
        return "not measured"
    return x.status


def ratio_text(ratio: float | None, ci: tuple[float, float] | None) -> str:
    """``1.234 [1.100, 1.380]`` (``–`` when unmeasured)."""
    if ratio is None:
        return "–"
    return f"{ratio:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _ratio(x) -> str:
    return ratio_text(x.ratio, x.ci)


def shape(p: placement.Placement, topo=None) -> str:
    """A short description of one VM's placement: vCPUs per host PU set size, guest nodes and
    where their memory is, e.g. ``8 vCPUs pinned 1:1; 2 guest nodes: 512 MiB bind host 0, ...``."""
    if not p.pinned:
        cpu = f"{p.vcpus} vCPUs unpinned"
    else:
        width = {len(s) for s in p.vcpu_pins}
        cpu = (f"{p.vcpus} vCPUs pinned 1:1 on PUs {format_cpu_list(p.pcpus)}" if width == {1}
               else f"{p.vcpus} vCPUs on PUs {format_cpu_list(p.pcpus)} (each may use "
                    f"{'/'.join(map(str, sorted(width)))} PUs)")
    mem = ", ".join(f"{g.memory_mib} MiB " + (f"{g.policy} host {format_cpu_list(g.host_nodes)}"
                                              if g.policy != "default" else "unbound")
                    for g in p.guest_nodes)
    nodes = f"{len(p.guest_nodes)} guest node{'s' if len(p.guest_nodes) > 1 else ''}"
    return f"{cpu}; {nodes}: {mem}" + ("" if p.backing == "4k" else f"; {p.backing} pages")


def candidate_lines(cands) -> list[str]:
    """``--dry-run`` listing: one line per candidate with its aliases, placement and notes."""
    out = []
    for c in cands:
        also = f" (= {', '.join(c.aliases)})" if c.aliases else ""
        where = shape(c.placements[0])
        if c.vms > 1:
            p0 = c.placements[0]
            pus = " | ".join(format_cpu_list(p.pcpus) or "any" for p in c.placements)
            mem = " | ".join(format_cpu_list(p.host_nodes) or "unbound" for p in c.placements)
            where = (f"{c.vms} VMs × {p0.vcpus} vCPUs pinned on PUs {pus}; {p0.memory_mib} MiB "
                     f"each on host nodes {mem}")
        note = f"  [{c.note}]" if c.note else ""
        out.append(f"{c.name}{also}: {where}{note}")
    return out


#: the label every TCG result carries (docs: TCG is not KVM)
EMULATED = ("TCG emulation: these ratios are emulation costs, not hardware virtualization "
            "overheads (vhpc host says why KVM is unusable)")


def to_json(d: Definition, st: RaceState, rec: Recommendation | None, prior_text: str,
            cid: str, emulated: bool = False) -> dict:
    """Everything the terminal shows, as JSON-able data (``emulated``: the VMs ran under TCG)."""
    def row(e):
        x = st.standings[e]
        return {"candidate": d.candidate(e).name, "environment": e, "ratio": x.ratio,
                "ci": list(x.ci) if x.ci else None, "status": x.status, "round": x.round,
                "p": x.p, "tost_p": x.tost_p, "trials": x.n, "aliases": list(d.candidate(e).aliases)}
    out = {"campaign": cid, "vcpus": d.vcpus, "memory_mib": d.memory_mib,
           "topology": d.topology, "settings": d.settings.to_dict(), "stopped": st.reason,
           "prior": prior_text, "emulated": emulated, "candidates": [row(e) for e in d.settings.candidates],
           "rounds": [{"round": r.round, "standings": [
               {"environment": x.env, "ratio": x.ratio, "ci": list(x.ci) if x.ci else None,
                "status": x.status} for x in r.standings]} for r in st.rounds],
           "recommendation": None}
    if rec is not None:
        c = rec.candidate
        out["recommendation"] = {"candidate": c.name, "confidence": rec.confidence,
                                 **{x.key: x.json_value() for x in exports(c)},
                                 "flavor_extra_specs": flavor_specs(c),
                                 "placement": [p.to_dict() for p in c.placements]}
    return out


def race_figure(d: Definition, st: RaceState) -> bytes | None:
    """PNG of the race: per candidate its ratio to native after each decision round with the
    95 % CI band; an eliminated candidate's line ends at its round (marked ×)."""
    if not st.rounds:
        return None
    from vhpc.report.figures import render  # the report room's renderer (Agg, no pyplot)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    for i, env in enumerate(d.settings.candidates):
        pts = [(r.round, x) for r in st.rounds for x in r.standings
               if x.env == env and x.ratio is not None and (x.status != ELIMINATED or x.round == r.round)]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        line, = ax.plot(xs, [p[1].ratio for p in pts], marker="o", label=d.candidate(env).name)
        band = [(p[0], p[1].ci) for p in pts if p[1].ci]
        if band:
            ax.fill_between([b[0] for b in band], [b[1][0] for b in band], [b[1][1] for b in band],
                            color=line.get_color(), alpha=0.18)
        if st.standings[env].status == ELIMINATED:
            ax.plot([xs[-1]], [pts[-1][1].ratio], marker="x", markersize=12, color=line.get_color())
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xlabel("round")
    ax.set_ylabel("cost relative to native (geometric mean)")
    ax.set_title(f"placement race: {len(d.candidates)} candidates, {st.reason}")
    ax.legend(fontsize=7)
    return render(fig, "png")


def html_section(d: Definition, st: RaceState, rec: Recommendation | None, prior_text: str,
                 wrap: bool = True, emulated: bool = False) -> str:
    """An HTML fragment: table, recommendation, race figure (inline PNG), libvirt XML, QEMU
    arguments and flavor extra specs; in ``<section id="tune"><h2>`` unless ``wrap`` is False
    (the campaign report adds its own).  Works offline (no CDN)."""
    e = html.escape
    rows = "".join(f"<tr><td>{e(d.candidate(x).name)}</td><td>{e(_ratio(st.standings[x]))}</td>"
                   f"<td>{e(status_text(st.standings[x]))}</td></tr>" for x in d.settings.candidates)
    png = race_figure(d, st)
    img = (f'<img alt="race" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
           if png else "<p>No decision round yet.</p>")
    parts = [f'<p>{e(d.topology)}; {d.vcpus} vCPUs, '
             f'{d.memory_mib} MiB; stopped: {e(st.reason)}. {e(prior_text)}</p>',
             "<table><tr><th>candidate</th><th>ratio to native [95 % CI]</th><th>status</th></tr>"
             f"{rows}</table>", img]
    if emulated:
        parts.insert(1, f"<p><b>{e(EMULATED)}</b></p>")
    if rec is not None:
        c = rec.candidate
        parts += [f"<p><b>Recommendation: {e(c.name)}</b> — {e(rec.confidence)}</p>",
                  *(f"<h3>{e(x.title)}</h3><pre>{e(x.text)}</pre>" for x in exports(c)),
                  f"<h3>OpenStack flavor extra specs</h3><pre>{e(json.dumps(flavor_specs(c), indent=1))}</pre>"]
    body = "".join(parts)
    return f'<section id="tune"><h2>Placement race</h2>{body}</section>' if wrap else body


def write_html(path: Path, section: str, cid: str) -> Path:
    """A self-contained page holding :func:`html_section` (``<out>/<id>/tune.html``)."""
    write_atomic(path, f"<!doctype html><html><head><meta charset='utf-8'><title>vhpc tune {cid}"
                    "</title><style>body{font-family:sans-serif;max-width:60em;margin:auto}"
                    "td,th{padding:2px 8px;border-bottom:1px solid #ddd}pre{background:#f6f6f6;"
                    f"padding:6px;overflow:auto}}</style></head><body>{section}</body></html>")
    return path


def emulated(store, cid: str) -> bool:
    """Whether any environment of campaign ``cid`` ran under TCG (stored fingerprints)."""
    return any(e.accel == "tcg" for e in store.environments(cid).values())


def report_sections(store, cid: str, out) -> list:
    """The race's section for the campaign report (``vhpc report ID``) —
    ``[(anchor, title, Markup)]`` — when campaign ``cid`` is a race (``<out>/<id>/tune.json``
    exists), else ``[]``."""
    if not (Path(out) / cid / "tune.json").is_file():
        return []
    from markupsafe import Markup

    from vhpc.workflows.tune import run as runmod

    d = runmod.load(out, cid)
    st = runmod.state(store, cid, d)
    intensity, prior_text = runmod.prior(store.trials(cid), d.settings.baseline)
    rec = recommend(d, st, intensity)
    return [("tune", "Placement race", Markup(html_section(
        d, st, rec, prior_text, wrap=False, emulated=emulated(store, cid))))]
