"""The report's header as readable tables: the campaign spec (environments with their options
and placement, benchmarks with parameters, protocol) and, for ``vcluster`` trials, a per-guest
table (guest, vCPU → host CPU, host node, memory per node) and a per-rank table (rank, guest,
vCPU, host CPU, node).  The raw spec JSON is only shown inside a collapsed ``<details>``."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

import jinja2
from markupsafe import Markup

from vhpc.core.records import RankPlacement

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)

SPEC_TPL = _ENV.from_string("""
<div class="spec">
<h3>Environments</h3>
<table class="spec-envs"><thead><tr><th>name</th><th>kind</th><th>options</th><th>placement</th></tr></thead><tbody>
{% for e in envs %}<tr><td>{{ e.name }}{% if e.name == baseline %} (baseline){% endif %}</td><td>{{ e.kind }}</td>
<td>{{ e.options or "defaults" }}</td><td>{{ e.placement or "—" }}</td></tr>{% endfor %}
</tbody></table>
<h3>Benchmarks</h3>
<table class="spec-benches"><thead><tr><th>benchmark</th><th>parameters</th></tr></thead><tbody>
{% for name, sets in benches %}<tr><td>{{ name }}</td><td>{% for p in sets %}{% if not loop.first %} <span class="sep">|</span> {% endif %}<span class="nowrap">{{ p or "defaults" }}</span>{% endfor %}</td></tr>{% endfor %}
</tbody></table>
<h3>Protocol</h3>
<p class="spec-protocol">{% for k, v in protocol %}{% if not loop.first %} · {% endif %}<b>{{ k }}</b> {{ v }}{% endfor %}</p>
<details class="raw-spec"><summary>campaign spec as JSON</summary><pre>{{ raw }}</pre></details>
</div>
""")

#: campaign fields stored as fractions and written as percentages (``margin: 5%``)
PERCENT_KEYS = ("margin", "target_ci")

#: environment options that say where it runs (the placement column); the rest are options
PLACEMENT_KEYS = ("policy", "numa", "backing", "cpus", "nodes", "membind", "guest_bind",
                  "vms", "ranks_per_vm", "corunner_policy", "vcpus")


def _text(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items())
    return str(v)


def spec_section(spec: Mapping[str, Any] | None,
                 fingerprints: Mapping[str, Mapping[str, Any]] | None = None) -> Markup | None:
    """The campaign spec: its environments (a table), its benchmarks (one row per benchmark,
    its parameter sets side by side), its protocol (one line) and the raw JSON collapsed; None
    without a spec.  ``fingerprints``: environment name → its stored fingerprint; an option the
    fingerprint records with another value shows the value in force beside the spec's
    (``boot_timeout=900.0 in force (the spec's 90.0)``: an image's is 900 s unless given,
    where the option's default reads 90)."""
    if not spec:
        return None
    envs = []
    for e in spec.get("environments", []):
        fp = (fingerprints or {}).get(str(e.get("name"))) or {}
        opts = {k: (f"{_text(fp[k])} in force (the spec's {_text(v)})"
                    if isinstance(fp.get(k), (str, int, float)) and fp[k] != v
                    and isinstance(v, (str, int, float)) else v)
                for k, v in (e.get("options") or {}).items()}
        opts = {k: v for k, v in opts.items() if v not in (None, "", [], {})}
        place = {k: opts.pop(k) for k in PLACEMENT_KEYS if k in opts}
        envs.append({"name": e.get("name"), "kind": e.get("kind"),
                     "options": ", ".join(f"{k}={_text(v)}" for k, v in opts.items()),
                     "placement": ", ".join(f"{k}={_text(v)}" for k, v in place.items())})
    benches: dict[str, list[str]] = {}  # one row per benchmark, its parameter sets in order
    for b in spec.get("benchmarks", []):
        benches.setdefault(str(b.get("name")), []).append(
            ", ".join(f"{k}={_text(v)}" for k, v in (b.get("params") or {}).items()))
    protocol = [(k, f"{v * 100:g}%" if k in PERCENT_KEYS and isinstance(v, (int, float))
                 else _text(v)) for k, v in spec.items()
                if k not in ("environments", "benchmarks", "custom") and v not in (None, {}, [])]
    return Markup(SPEC_TPL.render(envs=envs, benches=list(benches.items()), protocol=protocol,
                                  baseline=spec.get("baseline"),
                                  raw=json.dumps(spec, indent=1, sort_keys=True, default=str)))


VCLUSTER_TPL = _ENV.from_string("""
{% for e in envs %}
<h3>{{ e.name }} ({{ e.trial }})</h3>
<table class="vc-guests"><thead><tr><th>guest</th><th>vCPU</th><th>→ host CPU (allowed)</th>
<th>last ran on</th><th>host node</th><th>memory per host node [MiB]</th></tr></thead><tbody>
{% for g in e.guests %}{% for v in g.vcpus %}<tr><td>{{ g.name if loop.first else "" }}</td><td>{{ v.vcpu }}</td>
<td>{{ v.allowed }}</td><td>{{ v.last_cpu }}</td><td>{{ v.last_node }}</td>
<td>{{ g.memory if loop.first else "" }}</td></tr>{% else %}<tr><td>{{ g.name }}</td><td colspan="4">not read back</td><td>{{ g.memory }}</td></tr>{% endfor %}{% endfor %}
</tbody></table>
{% if e.ranks %}
<table class="vc-ranks"><thead><tr><th>rank</th>{% if e.slurm %}<th>Slurm node</th>{% endif %}<th>guest</th><th>vCPU</th><th>host CPU</th><th>host node</th></tr></thead><tbody>
{% for r in e.ranks %}<tr><td>{{ r.rank }}</td>{% if e.slurm %}<td>{{ r.slurm_node }}</td>{% endif %}<td>{{ r.guest }}</td><td>{{ r.vcpu }}</td><td>{{ r.host_cpu }}</td><td>{{ r.node }}</td></tr>{% endfor %}
</tbody></table>
{% else %}<p>No rank placement was read back (not an MPI trial, or the guests' rank logs were empty).</p>{% endif %}
{% endfor %}
""")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def vcluster_section(trials: Iterable[Any]) -> Markup | None:
    """Per-guest and per-rank tables of each ``vcluster`` environment, from its last stored
    trial that read back its guests (an MPI one preferred, for the ranks); None when no trial
    has per-guest read-back."""
    chosen: dict[str, Any] = {}
    for t in trials:
        a = getattr(t, "applied", None)
        if a is None or not _get(a, "vms"):
            continue
        if t.environment not in chosen or _get(a, "ranks") or not _get(chosen[t.environment].applied, "ranks"):
            chosen[t.environment] = t
    if not chosen:
        return None
    envs = []
    for name, t in chosen.items():
        a = t.applied
        guests, node_of = [], {}
        for i, vm in enumerate(_get(a, "vms") or []):
            vm = vm or {}
            vcpus = []
            for v in _get(vm, "vcpus") or []:
                node_of[(i, _get(v, "vcpu"))] = _get(v, "last_node")
                allowed = _get(v, "allowed")
                vcpus.append({"vcpu": _get(v, "vcpu"), "allowed": _text(allowed) if allowed else "—",
                              "last_cpu": _get(v, "last_cpu", "—"), "last_node": _get(v, "last_node", "—")})
            mem = _get(_get(vm, "memory") or {}, "node_mib") or {}
            guests.append({"name": f"vm{i}", "vcpus": vcpus,
                           "memory": ", ".join(f"node {n}: {float(m):.0f}" for n, m in sorted(mem.items())) or "—"})
        placed = [RankPlacement.read(r) for r in _get(a, "ranks") or []]
        ranks = [{"rank": r.rank, "guest": f"vm{r.vm}" + (f" ({r.guest})" if r.guest else ""),
                  "vcpu": r.vcpu, "host_cpu": "—" if r.host_cpu is None else r.host_cpu,
                  "node": node_of.get((r.vm, r.vcpu), "—"),
                  "slurm_node": r.node or "—"}  # the Slurm node across nodes
                 for r in placed if r is not None]
        envs.append({"name": name, "trial": f"{t.benchmark} round {t.round}", "guests": guests,
                     "ranks": ranks, "slurm": any(r.node for r in placed if r is not None)})
    return Markup(VCLUSTER_TPL.render(envs=envs))
