"""Report sections built from stored trials: placement as applied, per-trial diagnostics
(CPI/MPKI and the counters that were available), and the memory-profile study.

Input is what the store holds (``vhpc.store.TrialRow`` with its typed
:class:`~vhpc.core.records.AppliedPlacement` and :class:`~vhpc.core.records.Diagnostics` records); output is ``(anchor, title, Markup)`` tuples for
:func:`vhpc.report.html.write_html`.  Nothing here runs or measures anything.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Iterable, Mapping

import jinja2
from markupsafe import Markup

from vhpc.analysis import memprofile
from vhpc.core import stats
from vhpc.core.metrics import EnvInfo
from vhpc.core.records import AppliedPlacement, Diagnostics
from vhpc.report.html import embed_figure

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)

PLACEMENT_TPL = _ENV.from_string("""
<p>Read back from the host after each trial (vCPU thread affinity from
<code>/proc/PID/task/TID</code>, memory per host NUMA node from <code>/proc/PID/numa_maps</code>)
and from inside the guest (<code>/sys/devices/system/node</code>); compared with the plan.</p>
{% for e in envs %}
<h3>{{ e.name }}{% if e.emulated %} <span class="tcg-tag">TCG emulation</span>{% endif %}</h3>
<p><b>plan:</b> {{ e.plan }}</p>
{% if e.vcpus %}
<table class="placement"><thead><tr><th>vCPU</th><th>planned pCPUs</th><th>allowed (read back)</th>
<th>last ran on pCPU</th><th>host node</th></tr></thead><tbody>
{% for v in e.vcpus %}<tr class="{{ 'diff' if v.mismatch else '' }}"><td>{{ v.vcpu }}</td><td>{{ v.planned }}</td>
<td>{{ v.allowed }}</td><td>{{ v.last_cpu }}</td><td>{{ v.last_node }}</td></tr>{% endfor %}
</tbody></table>
{% endif %}
{% if e.cpus %}<p><b>CPUs allowed:</b> {{ e.cpus }}{% if e.numactl %}; <code>{{ e.numactl }}</code>{% endif %}</p>{% endif %}
{% if e.memory %}<p><b>QEMU process memory resident per host node</b> (the guest's RAM and
QEMU's own, e.g. TCG's code cache, so it can exceed the guest's memory{% if e.guest_mib %} of {{ e.guest_mib }} MiB{% endif %}):
{% for n, mib in e.memory %}node {{ n }}: {{ mib }} MiB{% if not loop.last %}, {% endif %}{% endfor %}
{% if e.locality is not none %}; <b>page locality</b> (on the planned nodes): {{ e.locality }} %{% endif %}</p>{% endif %}
{% if e.guest_numa %}<p><b>guest's view:</b>
{% for g in e.guest_numa %}node {{ g.node }}: vCPUs {{ g.cpus or "none" }}, {{ g.mem_mib }} MiB{% if not loop.last %}; {% endif %}{% endfor %}</p>{% endif %}
{% if e.mismatches %}<p class="warn">Placement differs from the plan in {{ e.mismatch_trials }} trial(s):
{{ e.mismatches|join("; ") }}</p>{% elif e.vcpus %}<p>Read-back matches the plan in every trial.</p>{% endif %}
{% endfor %}
""")

DIAG_TPL = _ENV.from_string("""
<p>Means over measured (non-warm-up) trials. Values the host or guest does not expose are
marked unavailable, with the reason below; nothing is estimated.</p>
<details class="diag"{% if rows | length <= 12 %} open{% endif %}><summary>{{ rows | length }} rows, one per environment and benchmark: {{ columns | join(", ") }}</summary>
<table class="diag"><thead><tr><th>environment</th><th>benchmark</th><th>trials</th>
{% for c in columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for r in rows %}<tr><td>{{ r.env }}</td><td>{{ r.bench }}</td><td class="num">{{ r.n }}</td>
{% for v in r.cells %}<td class="num">{{ v }}</td>{% endfor %}</tr>{% endfor %}
</tbody></table></details>
{% if reasons %}<ul>{% for r in reasons %}<li>{{ r }}</li>{% endfor %}</ul>{% endif %}
""")

PROFILE_TPL = _ENV.from_string("""
<p>NUMA penalty = CPI with memory on a remote node / CPI with local memory; MPKI = last-level
cache misses per 1000 instructions (seed 003 Fig. 3); classes high (MPKI &gt; 3), medium (1–3),
low (&lt; 1).{% if time_basis %} <b>CPI was unavailable</b>: the penalty is the ratio of trial
wall times, and MPKI classes cannot be given.{% endif %}</p>
<table><thead><tr><th>benchmark</th><th>penalty</th><th>basis</th><th>MPKI</th><th>class</th></tr></thead><tbody>
{% for r in rows %}<tr><td>{{ r.benchmark }}</td><td class="num">{{ "%.3f"|format(r.penalty) if r.penalty else "n/a" }}</td>
<td>{{ r.basis }}</td><td class="num">{{ "%.2f"|format(r.mpki) if r.mpki is not none else "unavailable" }}</td>
<td>{{ r.intensity or "-" }}</td></tr>{% endfor %}</tbody></table>
{% if fit %}<p>fit: penalty = {{ "%.3f"|format(fit.intercept) }} + {{ "%.3f"|format(fit.slope) }}·MPKI
(r² = {{ "%.2f"|format(fit.r2) }}, {{ fit.n }} benchmarks)</p>{% endif %}
{% if figure %}<figure>{{ figure }}</figure>{% endif %}
""")


def _fmt(x: float | None, digits: int = 3) -> str:
    return "unavailable" if x is None else f"{x:.{digits}g}"


def _mean(values: list[float | None]) -> float | None:
    return stats.mean([v for v in values if v is not None])


def _vcpu_rows(a: AppliedPlacement, pins: list) -> list[dict[str, Any]]:
    rows = []
    for v in a.vcpus:
        planned = pins[v.vcpu] if v.vcpu < len(pins) else None
        rows.append({"vcpu": v.vcpu, "planned": planned or "any (float)", "allowed": v.allowed,
                     "last_cpu": v.last_cpu, "last_node": v.last_node,
                     "mismatch": planned is not None and planned != v.allowed})
    return rows


def _locality(a: AppliedPlacement, plan: Mapping[str, Any]) -> str | None:
    """Page locality in percent as text: the trial's record, or (stores written before the
    record had it) recomputed from its memory read-back and the plan's bound nodes."""
    loc = a.page_locality
    if loc is None and a.memory is not None:
        bound = {n for g in plan.get("guest_nodes", []) for n in g.get("host_nodes", [])}
        loc = a.memory.locality(bound)
    return f"{loc.percent:.1f}" if loc is not None else None


def placement_section(trials: Iterable[Any], envs: Mapping[str, EnvInfo]) -> Markup | None:
    """Per environment: the plan, each vCPU's planned / read-back pCPUs and node, memory per
    host node with page locality (% of resident guest RAM on the planned nodes), the guest's
    NUMA view and every mismatch, from the trials' :class:`~vhpc.core.records.AppliedPlacement`.
    None when no trial recorded a placement."""
    last: dict[str, AppliedPlacement] = {}
    mism: dict[str, list[str]] = {}
    mism_trials: dict[str, int] = {}
    for t in trials:
        if t.applied is None:
            continue
        last[t.environment] = t.applied
        if t.applied.mismatches:
            mism_trials[t.environment] = mism_trials.get(t.environment, 0) + 1
            for m in t.applied.mismatches:
                if m not in mism.setdefault(t.environment, []):
                    mism[t.environment].append(m)
    if not last:
        return None
    out = []
    for name, a in last.items():
        info = envs.get(name)
        fp = info.fingerprint if info else {}
        plan = fp.get("plan") or {}
        vcpus = _vcpu_rows(a, plan.get("vcpu_pins") or [])
        memory = ([(n, f"{mib:.0f}") for n, mib in sorted(a.memory.node_mib.items())]
                  if a.memory and a.memory.node_mib else [])
        out.append({
            "name": name, "emulated": bool(info and info.emulated),
            "plan": fp.get("placement") or (f"host CPUs {a.cpus}" if a.cpus is not None else "-"),
            "vcpus": vcpus, "cpus": a.cpus if not vcpus else None,
            "numactl": " ".join(a.numactl) if a.numactl else None,
            "memory": memory, "locality": _locality(a, plan) if memory else None,
            "guest_mib": fp.get("memory_mib"),
            "guest_numa": a.guest_numa,
            "mismatches": mism.get(name, []), "mismatch_trials": mism_trials.get(name, 0),
        })
    return Markup(PLACEMENT_TPL.render(envs=out))


def _field(record: Any, name: str) -> float | None:
    return getattr(record, name, None) if record is not None else None


#: diagnostics table: column title → value of one trial's :class:`~vhpc.core.records.Diagnostics`
DIAG_COLUMNS: tuple[tuple[str, Callable[[Diagnostics], float | None]], ...] = (
    ("user s", lambda d: _field(d.rusage, "user_s")),
    ("sys s", lambda d: _field(d.rusage, "sys_s")),
    ("minor faults", lambda d: _field(d.rusage, "minflt")),
    ("guest pgfault", lambda d: (d.guest_vmstat or {}).get("pgfault")),
    ("guest numa_miss", lambda d: (d.guest_vmstat or {}).get("numa_miss")),
    ("QEMU minor faults", lambda d: (d.qemu_faults or {}).get("minflt")),
    ("CPI", lambda d: _field(d.perf, "cpi")),
    ("MPKI", lambda d: _field(d.perf, "mpki")),
)


def diagnostics_section(trials: Iterable[Any]) -> Markup | None:
    """Mean diagnostics per (environment, benchmark) with the reasons for unavailable ones."""
    groups: dict[tuple[str, str], list[Diagnostics]] = {}
    reasons: dict[str, set[str]] = {}
    for t in trials:
        if t.warmup or t.diagnostics is None:
            continue
        label = f"{t.benchmark}[{t.params}]" if t.params else t.benchmark
        groups.setdefault((t.environment, label), []).append(t.diagnostics)
        for key, why in t.diagnostics.unavailable.items():
            reasons.setdefault(f"{key} ({t.environment})", set()).add(why)
    if not groups:
        return None
    rows = []
    for (env, bench), diags in sorted(groups.items()):
        rows.append({"env": env, "bench": bench, "n": len(diags),
                     "cells": [_fmt(_mean([f(d) for d in diags])) for _, f in DIAG_COLUMNS]})
    return Markup(DIAG_TPL.render(
        columns=[c for c, _ in DIAG_COLUMNS], rows=rows,
        reasons=[f"{k}: {'; '.join(sorted(v))}" for k, v in sorted(reasons.items())]))


def memory_profile_section(trials: Iterable[Any]) -> Markup | None:
    """The memory-profile table and scatter with its fit, when the campaign has ``local``
    and ``remote`` environments (``vhpc study memory-profile``); else None."""
    rows = memprofile.profile(memprofile.from_trials(trials))
    if not rows:
        return None
    fit = memprofile.fit(rows)
    figure = None
    pts = [(r.mpki, r.penalty, r.benchmark) for r in rows if r.mpki is not None and r.penalty]
    if pts:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5.5, 3.8))
        ax = fig.add_subplot()
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color="#1f77b4")
        for x, y, label in pts:
            ax.annotate(label, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        if fit:
            xs = [0, max(p[0] for p in pts)]
            ax.plot(xs, [fit.intercept + fit.slope * x for x in xs], "--", color="gray")
        for x in (memprofile.LOW_MPKI, memprofile.HIGH_MPKI):
            ax.axvline(x, color="lightgray", lw=0.8)
        ax.set_xlabel("MPKI (LLC misses per 1000 instructions)")
        ax.set_ylabel("NUMA penalty (CPI remote / local)")
        from vhpc.report.figures import literal_text

        buf = io.StringIO()
        literal_text(fig)  # benchmark names are text, never math text
        fig.savefig(buf, format="svg", bbox_inches="tight")
        figure = embed_figure(buf.getvalue(), "mp-", "memory profile")
    return Markup(PROFILE_TPL.render(rows=rows, fit=fit, figure=figure,
                                     time_basis=any(r.basis == "time" for r in rows)))


def sections(trials: list[Any], envs: Mapping[str, EnvInfo],
             analysis: Any = None) -> list[tuple[str, str, Markup]]:
    """All extra report sections that have content, in report order."""
    out = []
    # sweeps over message size are drawn by the report itself (html.render_html: one figure per
    # metric family)
    for anchor, title, body in (
        ("placement", "Placement as applied", placement_section(trials, envs)),
        ("diagnostics", "Diagnostics and counters", diagnostics_section(trials)),
        ("memory-profile", "Memory profile", memory_profile_section(trials)),
    ):
        if body is not None:
            out.append((anchor, title, body))
    return out
