"""``vhpc calibrate``: how far can this host's measurements be trusted?

For each environment (e.g. ``native``, ``vm``) and benchmark, K ordinary campaigns run three
copies of the same environment, interleaved as every campaign is (``order=alternate``):

* ``a`` and ``b`` — identical: **A/A**.  A ``slower`` or ``faster`` verdict between them is a
  false positive: per metric, and family-wise (a campaign with any ``slower``/``faster`` among
  the comparisons of its Holm family, the benchmark's primary metric or its sweep), whose rate
  must stay ≤ α (:mod:`vhpc.analysis`).
* ``slowed`` — the same environment slowed by a known physical amount δ (``slowdown=δ``: a
  cgroup-v2 freezer duty cycle, :mod:`vhpc.environments.slowdown`), the slowdown actually
  applied read back per trial: **injected slowdown**.  ``slowed`` vs ``a`` gives the recovered
  effect (overhead and its CI), whether the CI covers the applied slowdown, and whether the
  verdict is "slower" (detection).
* ``doubled`` — the same environment slowed 2× (``slowdown=1``): ``equivalent`` must never be
  given against it, at the campaign's margin.
* **power**: the pooled relative standard deviation of the A/A samples gives the runs per
  environment needed to detect δ at α with 80 % power, and the smallest effect detectable with
  ``repeats`` runs (:func:`vhpc.core.power.runs_needed`, :func:`vhpc.core.power.detectable_effect`).
* **placement**: the share of trials whose placement read back as planned (no mismatches).

Every statistic comes from :mod:`vhpc.core.stats`; the campaigns are stored like any other (``vhpc
list campaigns``), so each can be reported on its own.  Nothing on the host is changed but the
throttle cgroups, which are removed after each trial (and swept after a ``kill -9``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from vhpc import analysis, benchmarks
from vhpc.campaign import execute
from vhpc.core import power, stats
from vhpc.spec import parse as specmod
from vhpc.analysis import EQUIVALENT, FASTER, SLOWER
from vhpc.benchmarks.base import RunContext
from vhpc.core.errors import SpecError, VhpcError
from vhpc.workflows import parts
from vhpc.environments.options import HostFacts
from vhpc.spec.parse import BenchSpec, CampaignSpec, EnvSpec
from vhpc.store import Store

A, B, SLOWED, DOUBLED = "a", "b", "slowed", "doubled"
#: the slowdown of the ``doubled`` copy: 2× as long
TWICE = 1.0


@dataclass(frozen=True)
class Settings:
    """What to calibrate: ``benchmarks`` and ``environments`` (typed specs; one environment
    of kind native or vm each, its name ignored, without ``slowdown``), ``campaigns`` K ≥ 1,
    ``repeats`` ≥ 2 measured rounds per campaign, ``delta`` the injected slowdown (0.05 = 5 %),
    ``alpha`` the significance level, ``warmup`` rounds and the per-trial ``timeout`` (s)."""

    benchmarks: tuple[BenchSpec, ...]
    environments: tuple[EnvSpec, ...]
    campaigns: int = 20
    repeats: int = 3
    delta: float = 0.05
    alpha: float = 0.05
    warmup: int = 1
    timeout: float = 600.0

    def check(self) -> None:
        """Raise SpecError (one line) for values that cannot calibrate anything."""
        if self.campaigns < 1:
            raise SpecError("--campaigns must be at least 1")
        if self.repeats < 2:
            raise SpecError("--repeats must be at least 2 (a CI needs two runs per side)")
        if not 0 < self.delta < 10:
            raise SpecError("--delta must be in (0, 10), e.g. 0.05 for 5 %")
        if not 0 < self.alpha < 1:
            raise SpecError("--alpha must be in (0, 1), e.g. 0.05")
        from vhpc.environments.options import Slowdown

        for e in self.environments:
            if not issubclass(e.part.options, Slowdown):
                raise SpecError(f"-e {e.kind}: calibrate slows a copy of the environment, which "
                                "this kind cannot be (no slowdown=): use an environment that "
                                f"takes slowdown= ({' and '.join(parts.slowable_kinds())} do)")
            if {"slowdown", "slowdown_cpus"} & e.options.model_fields_set:
                raise SpecError(f"-e {e.kind}: calibrate slows its copy itself: drop "
                                "slowdown=/slowdown_cpus=")


def busy_cpus(bench: benchmarks.Benchmark, params: dict[str, Any], ncpus: int) -> int:
    """CPUs a benchmark keeps busy: its MPI launch's ranks × OpenMP threads (kernels,
    applications, custom MPI commands: :meth:`~vhpc.benchmarks.base.Benchmark.launch`), else its
    OpenMP threads, else 1 (a serial kernel), with unset counts meaning all ``ncpus`` of the
    environment."""
    ctx = RunContext(None, ncpus)
    launch = bench.launch(params, ctx)
    if launch is not None:
        return max(1, int(launch.ranks) * int(launch.threads))
    value = getattr(bench, "value", None)
    threads = value(params, bench.threads_param, ctx) if getattr(bench, "threads_param",
                                                                 None) else 1
    return max(1, int(threads))


def label(e: EnvSpec) -> str:
    """The environment as the user wrote it, without its name (``vm:vcpus=2``)."""
    given = e.options.given()
    return e.kind + (":" + ",".join(f"{k}={v}" for k, v in given.items()) if given else "")


def campaign_spec(s: Settings, e: EnvSpec, b: BenchSpec, host: HostFacts) -> CampaignSpec:
    """The spec of one calibration campaign: ``a``, ``b``, ``slowed`` and ``doubled`` copies of
    ``e`` running ``b``, baseline ``a``.  Raises SpecError (HostError for an environment this host
    cannot give)."""
    bench = benchmarks.get(b.name)
    inner = e.build(host)
    try:
        ncpus = inner.benchmark_cpus()
    finally:
        inner.close()
    busy = busy_cpus(bench, bench.resolve(b.params), ncpus)
    opts = e.options.given()
    envs = [specmod.env(e.kind, A, **opts), specmod.env(e.kind, B, **opts),
            specmod.env(e.kind, SLOWED, **opts, slowdown=s.delta, slowdown_cpus=busy),
            specmod.env(e.kind, DOUBLED, **opts, slowdown=TWICE, slowdown_cpus=busy)]
    return specmod.campaign([b], envs, "calibrate", repeats=s.repeats, warmup=s.warmup,
                            baseline=A, timeout=s.timeout)


@dataclass
class Outcome:
    """One metric of one (environment, benchmark) over the K campaigns: A/A verdicts, the
    injected slowdown's recovered overhead (percent, with CI) against the kernel-applied one,
    and the relative A/A samples for the power model."""

    environment: str
    benchmark: str
    metric: str
    unit: str
    aa_false: int = 0
    aa_total: int = 0
    injected: list[dict[str, Any]] = field(default_factory=list)
    #: verdicts against the 2× slowed copy
    doubled: list[str] = field(default_factory=list)
    aa_groups: list[list[float]] = field(default_factory=list)


def _by_env(obs, names):
    return [o for o in obs if o.environment in names]


@dataclass
class Family:
    """A/A family-wise false positives of one (environment, benchmark): campaigns with any
    ``slower``/``faster`` verdict in the Holm family, of the campaigns analysed."""

    environment: str
    benchmark: str
    false: int = 0
    total: int = 0


def _applied(store: Store, cid: str, env: str = SLOWED) -> tuple[float | None, float | None]:
    """Mean slowdown applied to the trials of ``env`` (and the CPU quota's usage-based bound,
    None with the freezer)."""
    vals, upper = [], []
    for t in store.trials(cid, "done"):
        th = getattr(t.diagnostics, "throttle", None) if t.diagnostics else None
        if t.environment == env and not t.warmup and th:
            vals.append(th["applied"])
            if th.get("applied_from_usage") is not None:
                upper.append(th["applied_from_usage"])
    return stats.mean(vals), stats.mean(upper)


def analyse_campaign(store: Store, cid: str, env_item: str, alpha: float,
                     out: dict[tuple, Outcome], fams: dict[tuple, Family] | None = None) -> None:
    """Fold one calibration campaign into ``out`` (keyed by (environment, benchmark, metric))
    and its A/A family-wise outcome into ``fams`` (keyed by (environment, benchmark))."""
    from vhpc.analysis.results import POINT, PRIMARY

    obs = store.observations(cid)
    envs = store.environments(cid)
    margin = store.campaign(cid)["spec"].get("margin", analysis.DEFAULT_MARGIN)
    aa = analysis.analyse(_by_env(obs, {A, B}), envs, A, alpha=alpha, margin=margin)
    inj = analysis.analyse(_by_env(obs, {A, SLOWED}), envs, A, alpha=alpha, margin=margin)
    twice = analysis.analyse(_by_env(obs, {A, DOUBLED}), envs, A, alpha=alpha, margin=margin)
    applied, upper = _applied(store, cid)
    if fams is not None:
        for bench in {c.benchmark for c in aa.comparisons}:
            family = [c for c in aa.comparisons if c.benchmark == bench
                      and c.role in (PRIMARY, POINT)]
            if not family:
                continue
            f = fams.setdefault((env_item, bench), Family(env_item, bench))
            f.total += 1
            f.false += any(c.verdict in (SLOWER, FASTER) for c in family)
    for c in twice.comparisons:
        out.setdefault((env_item, c.benchmark, c.metric),
                       Outcome(env_item, c.benchmark, c.metric, c.unit)).doubled.append(c.verdict)
    for c in aa.comparisons:
        o = out.setdefault((env_item, c.benchmark, c.metric),
                           Outcome(env_item, c.benchmark, c.metric, c.unit))
        o.aa_total += 1
        o.aa_false += c.verdict in (SLOWER, FASTER)
        for name in (A, B):
            vals = [x.value for x in obs if x.environment == name and x.metric == c.metric
                    and not x.warmup and x.valid]
            o.aa_groups.append(vals)
    for c in inj.comparisons:
        o = out.setdefault((env_item, c.benchmark, c.metric),
                           Outcome(env_item, c.benchmark, c.metric, c.unit))
        lo, hi = c.overhead_ci
        o.injected.append({
            "campaign": cid, "overhead_pct": c.overhead_pct, "ci_pct": [lo, hi],
            "method": c.ratio_ci_method, "verdict": c.verdict, "applied": applied,
            "applied_from_usage": upper,
            "covers_applied": (lo is not None and hi is not None and applied is not None
                               and lo <= applied * 100 <= hi)})


def summarise(o: Outcome, s: Settings) -> dict[str, Any]:
    """The JSON row of one :class:`Outcome`: A/A false-positive rate with its Clopper–Pearson
    interval, injected slowdown (mean recovered overhead, mean applied, coverage and detection
    rates), and power (pooled relative SD, runs needed for δ, detectable effect at
    ``repeats``)."""
    inj = o.injected
    covered = sum(bool(i["covers_applied"]) for i in inj)
    detected = sum(i["verdict"] == SLOWER for i in inj)
    cv = power.pooled_relative_sd(o.aa_groups)
    equivalent = sum(v == EQUIVALENT for v in o.doubled)
    return {
        "environment": o.environment, "benchmark": o.benchmark, "metric": o.metric,
        "unit": o.unit,
        "aa": {"false_positives": o.aa_false, "campaigns": o.aa_total,
               "rate": o.aa_false / o.aa_total if o.aa_total else None,
               "rate_ci": power.proportion_interval(o.aa_false, o.aa_total),
               "alpha": s.alpha},
        "injected": {
            "requested": s.delta,
            "applied": stats.mean([i["applied"] for i in inj if i["applied"] is not None]),
            "applied_from_usage": stats.mean([i["applied_from_usage"] for i in inj
                                              if i["applied_from_usage"] is not None]),
            "recovered_pct": stats.mean([i["overhead_pct"] for i in inj
                                         if i["overhead_pct"] is not None]),
            "coverage": covered / len(inj) if inj else None,
            "coverage_ci": power.proportion_interval(covered, len(inj)),
            "detection": detected / len(inj) if inj else None,
            "campaigns": inj},
        "doubled": {"slowdown": TWICE, "campaigns": len(o.doubled),
                    "equivalent": equivalent,
                    "slower": sum(v == SLOWER for v in o.doubled)},
        "power": {"relative_sd": cv, "power": power.POWER,
                  "runs_needed": power.runs_needed(s.delta, cv, s.alpha) if cv is not None
                  else None,
                  "detectable_at_repeats": power.detectable_effect(cv, s.repeats, s.alpha)
                  if cv is not None else None,
                  "repeats": s.repeats},
    }


def rate_reading(k: int, n: int, alpha: float) -> dict[str, Any]:
    """What ``k`` false positives in ``n`` campaigns can show about a rate meant to stay ≤
    ``alpha``: the rate, its exact (Clopper–Pearson) 95 % interval, ``exceeds_alpha`` only when
    the interval's lower bound is above α ("consistent with α" otherwise: 0/10 has the
    interval [0, 31 %], which cannot tell 5 % from 30 %), and ``campaigns_to_bound``: how many
    campaigns would put the upper bound below 2α with probability
    :data:`vhpc.core.power.BOUND_PROBABILITY` if the true rate were ``planned_rate``: the rate
    seen, or α where less was seen (``planned_on`` "seen" or "alpha": a rate of 0 is no
    plan, issue 59); None when that rate is 2α or more (nothing bounds it below 2α)
    (:func:`vhpc.core.power.campaigns_to_bound`)."""
    ci = power.proportion_interval(k, n)
    rate = k / n if n else None
    seen = rate is not None and rate > alpha
    at = rate if seen else alpha
    return {"false_positives": k, "campaigns": n, "rate": rate, "rate_ci": ci, "alpha": alpha,
            "exceeds_alpha": bool(ci and ci[0] > alpha),
            "planned_rate": at, "planned_on": "seen" if seen else "alpha",
            "bound_probability": power.BOUND_PROBABILITY,
            "campaigns_to_bound": power.campaigns_to_bound(at, min(1.0, 2 * alpha))}


def margin_of(store: Store, cids: dict[str, list[str]]) -> float:
    """The equivalence margin the calibration campaigns were analysed at (their spec's)."""
    for ids in cids.values():
        for cid in ids:
            return store.campaign(cid)["spec"].get("margin", analysis.DEFAULT_MARGIN)
    return analysis.DEFAULT_MARGIN


def margin_edge(outcomes, s: Settings, margin: float) -> dict[str, Any]:
    """The margin-edge case: how often ``equivalent`` was given against the copy slowed by
    δ when δ equals the margin (the TOST's boundary, where the rate must be ≤ α/2; Schuirmann
    1987), counted by campaign: the comparisons of one campaign (its metrics, environments)
    share its runs and are not independent, so a campaign counts once, as ``equivalent``
    when any of its comparisons said so (the family-wise rate, which Bonferroni's level
    keeps ≤ α/2), with the Clopper–Pearson interval of that share of campaigns.
    ``comparisons``: how many comparisons they held.  ``measured`` False when δ ≠ margin (then
    run with ``--delta`` equal to the margin) or nothing was compared.  ``applied``: the
    mean slowdown the kernel applied, which may fall short of δ (then the case is not quite
    at the edge)."""
    rows = [i for o in outcomes for i in o.injected]
    applied = [i["applied"] for i in rows if i["applied"] is not None]
    by_campaign: dict[Any, bool] = {}
    for i, r in enumerate(rows):
        key = r.get("campaign", i)  # a record without its campaign counts alone
        by_campaign[key] = by_campaign.get(key, False) or r["verdict"] == EQUIVALENT
    k, n = sum(by_campaign.values()), len(by_campaign)
    at_edge = abs(s.delta - margin) < 1e-12 and n > 0
    return {"measured": at_edge, "delta": s.delta, "margin": margin, "equivalent": k,
            "campaigns": n, "comparisons": len(rows), "rate": k / n if at_edge else None,
            "rate_ci": power.proportion_interval(k, n) if at_edge else None,
            "bound": s.alpha / 2, "applied": stats.mean(applied),
            "exceeds_bound": bool(at_edge and power.proportion_interval(k, n)[0] > s.alpha / 2)}


def doubled_total(outcomes) -> dict[str, Any]:
    """``equivalent`` verdicts against the 2× slowed copy over every comparison, with the
    Clopper–Pearson interval of their rate (a count of 0 says little when the CV is high)."""
    verdicts = [v for o in outcomes for v in o.doubled]
    k = sum(v == EQUIVALENT for v in verdicts)
    return {"equivalent": k, "comparisons": len(verdicts),
            "rate_ci": power.proportion_interval(k, len(verdicts))}


def placement_rate(store: Store, cids: list[str]) -> dict[str, Any]:
    """Trials with a placement read-back, and how many read back as planned (no mismatch)."""
    total = matching = 0
    for cid in cids:
        for t in store.trials(cid, "done"):
            if t.applied is not None:
                total += 1
                matching += not t.applied.mismatches
    return {"trials": total, "matching": matching,
            "rate": matching / total if total else None}


class CalibrationError(VhpcError):
    """No calibration trial succeeded: there is nothing to calibrate (exit 2, one line)."""


def check_some_succeeded(store: Store, cids: list[str]) -> None:
    """Raise :class:`CalibrationError` naming the failures when no trial of the calibration
    campaigns ``cids`` finished (``done``): an empty calibration is not a result."""
    done = failed = 0
    first = ""
    for cid in cids:
        for t in store.trials(cid):
            done += t.status == "done"
            if t.status == "failed":
                failed += 1
                first = first or " ".join(str(t.error or "").split())[:160]
    if not done:
        raise CalibrationError(f"no calibration trial succeeded ({failed} failed; first: "
                               f"{first or 'no error recorded'}): fix the cause (a --timeout "
                               "too short?) and calibrate again; the trials are stored (vhpc "
                               f"list campaigns --out {store.path.parent})")


def run(store: Store | Callable[[], Store], s: Settings, command: str = "",
        say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every calibration campaign (K per environment × benchmark) in ``store`` (or the
    store a function opens, called once every check passed, so bad settings create none) and
    return the calibration (the JSON document: settings, campaign ids, rows, placement).
    Raises SpecError for bad settings before anything runs; EnvError when an environment (or
    CPU bandwidth control) is unusable; CalibrationError when no trial succeeded."""
    s.check()
    host = execute.host_facts()
    specs = {(label(e), b.label): campaign_spec(s, e, b, host)
             for e in s.environments for b in s.benchmarks}
    for spec in specs.values():  # CPU bandwidth control usable here? (EnvError otherwise)
        env = spec.environments[-1].build(host)
        try:
            env.preflight()
            if getattr(env, "preflight_note", ""):  # no freezer: said before the run
                say(f"vhpc calibrate: {env.preflight_note}")
        finally:
            env.close()
    for spec in specs.values():  # kernels built (or a missing tool named) before storing
        execute.kernel_dirs(spec)
    store = store if isinstance(store, Store) else store()
    out: dict[tuple, Outcome] = {}
    fams: dict[tuple, Family] = {}
    cids: dict[str, list[str]] = {label(e): [] for e in s.environments}
    for k in range(s.campaigns):
        for (e, b), spec in specs.items():
            cid = execute.create(store, spec, command)
            say(f"calibration campaign {k + 1}/{s.campaigns}: {e} {b} ({cid})")
            execute.execute(store, cid)
            cids[e].append(cid)
            analyse_campaign(store, cid, e, s.alpha, out, fams)
    from vhpc.host import cpu_bandwidth, freezer

    cpu_bandwidth.sweep_stale()
    freezer.sweep_stale()
    check_some_succeeded(store, [c for ids in cids.values() for c in ids])
    return {"settings": {"benchmarks": [b.label for b in s.benchmarks],
                         "environments": [label(e) for e in s.environments],
                         "campaigns": s.campaigns, "repeats": s.repeats, "delta": s.delta,
                         "alpha": s.alpha, "warmup": s.warmup},
            "campaign_ids": cids,
            "rows": [summarise(o, s) for o in out.values()],
            "family": [rate_reading(f.false, f.total, s.alpha)
                       | {"environment": f.environment, "benchmark": f.benchmark}
                       for f in fams.values()],
            "margin_edge": margin_edge(out.values(), s, margin_of(store, cids)),
            "doubled": doubled_total(out.values()),
            "placement": {e: placement_rate(store, ids) for e, ids in cids.items()}}
