"""Campaigns: plan trials from a spec, execute them in environments, store every outcome.

Protocol (docs/protocol.md):

* ``warmup`` rounds then ``repeats`` measured rounds; in each round every environment runs every
  benchmark once.  Warm-up trials are stored and flagged, never analysed.
* Order ``alternate`` (default): the environment order reverses every round (A B, B A, A B, …)
  so slow drift of the host (thermal, background load) affects all environments alike;
  ``fixed`` keeps the spec order.
* A VM is paused (QMP ``stop``) while other environments run, so it neither perturbs them nor
  loses its warm state.
* Sessions (seed 000 Sec. VI): ``warm`` (default) keeps one boot for all trials, the warm-up
  round absorbing the cold start; ``cold`` boots a fresh VM before every VM trial;
  ``cold-warm`` runs each benchmark ``session_trials`` times in a row in a fresh boot, so
  session index 0 is the cold trial and later ones are warm (analysed as separate groups).
* Each trial has a timeout; a trial that fails (timeout, guest failure, no parseable result) is
  stored ``failed`` with its raw output and the campaign continues.
* Every planned trial is stored ``pending`` at creation; ``resume`` runs only the trials not
  yet ``done``/``failed``, so a killed campaign loses and duplicates nothing.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import asdict
from typing import Any, Protocol

from vhpc import benchmarks, kinds
from vhpc.benchmarks.base import ParseError, RunContext, ensure_kernels
from vhpc.environments.base import Environment, EnvError, RunResult
from vhpc.environments.build import corunner_argv  # noqa: F401  (co-runner loads, tests)
from vhpc.errors import VhpcError
from vhpc.environments.knobs import HostKnobs, journal_path
from vhpc.environments.native import NativeEnvironment
from vhpc.environments.vm import VmEnvironment
from vhpc.kinds import HostFacts
from vhpc.spec import CampaignSpec, EnvSpec
from vhpc.store import DONE, FAILED, Store, TrialRow

#: One trial of the plan is the same record as a stored trial (before it has an id).
PlannedTrial = TrialRow


def plan(spec: CampaignSpec, rounds: int | None = None) -> list[TrialRow]:
    """Ordered trials for ``spec`` (id None, status pending): ``rounds`` (default warmup +
    repeats) rounds × environments × benchmarks.  Deterministic, so the plan of n+1 rounds
    extends the plan of n rounds (adaptive repeats append rounds this way).

    With ``order="alternate"`` odd rounds run the environments in reverse order.
    """
    names = [e.name for e in spec.environments]
    per_block = spec.session_trials if spec.protocol == "cold-warm" else 1
    out: list[TrialRow] = []
    for r in range(spec.warmup + spec.repeats if rounds is None else rounds):
        order = names[::-1] if spec.order == "alternate" and r % 2 else names
        for env in order:
            for b in spec.benchmarks:
                for k in range(per_block):
                    fresh = spec.protocol == "cold" or (spec.protocol == "cold-warm" and k == 0)
                    out.append(TrialRow(None, len(out), r, r < spec.warmup, env, b.name, b.key,
                                        fresh=fresh))
    return out


def new_campaign_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` (UTC time plus 4 random hex digits)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def host_facts(topology_source: str | None = None) -> HostFacts:
    """Facts host-dependent checks need: usable CPUs and the topology (hwloc's lstopo for
    this host, or ``topology_source``).  Raises TopologyError."""
    from vhpc import topology

    return HostFacts(tuple(sorted(os.sched_getaffinity(0))), topology.load(topology_source))


def placements(spec: CampaignSpec, host: HostFacts) -> dict[str, str]:
    """Environment name → one line saying where its trials run on ``host`` (computed from the
    topology; nothing is started).  This is also the host check of a campaign: raises
    HostError/PlacementError when the host cannot give an environment what it asks for."""
    out = {}
    for e in spec.environments:
        try:
            e.options.check_host(host)
            out[e.name] = e.options.placement_text(host)
        except VhpcError as exc:
            raise type(exc)(f"environment {e.name}: {exc}") from None
    return out


def prepare(spec: CampaignSpec, host: HostFacts | None = None) -> dict[str, Environment]:
    """Check ``spec`` against the host and build its environments (nothing is booted yet):
    the step between a valid spec and a stored campaign.  Raises HostError/PlacementError
    (and EnvError/GuestImageError from a kind's factory)."""
    host = host or host_facts()
    placements(spec, host)
    return {e.name: make_environment(e, host) for e in spec.environments}


def make_environment(es: EnvSpec, host: HostFacts | None = None) -> Environment:
    """Build the environment ``es`` describes with its kind's factory (kinds.REGISTRY).
    May probe the host (QEMU, guest kernel).  Raises HostError/PlacementError."""
    host = host or host_facts()
    try:
        es.options.check_host(host)
    except VhpcError as exc:
        raise type(exc)(f"environment {es.name}: {exc}") from None
    return kinds.get(es.kind).build(es.name, es.options, host)


def env_cpus(env: Environment) -> int:
    """CPUs a benchmark may use in ``env`` (vCPUs in a VM, allowed host CPUs natively)."""
    if isinstance(env, VmEnvironment):
        return env.vcpus
    if isinstance(env, NativeEnvironment) and env.cpus:
        return len(env.cpus)
    return len(os.sched_getaffinity(0))


class Progress(Protocol):
    """Callbacks the executor reports to (the CLI draws a progress bar with them)."""

    def start(self, total: int, done: int) -> None: ...
    def trial(self, row: TrialRow) -> None: ...
    def finished(self, row: TrialRow, status: str, note: str) -> None: ...


def create(store: Store, spec: CampaignSpec, command: str = "") -> str:
    """Store a new campaign with its planned trials; returns the campaign id."""
    cid = new_campaign_id()
    trials = [asdict(t) for t in plan(spec)]
    store.create_campaign(cid, spec.model_dump_json(), command, trials,
                          [{"name": e.name, "kind": e.kind} for e in spec.environments])
    return cid


def outcome(bench: benchmarks.Benchmark, params: dict[str, Any],
            result: RunResult) -> tuple[str, list, str | None]:
    """(status, samples, error) for a finished command: ``failed`` without samples when the
    environment failed, the trial timed out or the output has no parseable result; else
    ``done`` (samples carry their own validity)."""
    if result.error:
        return FAILED, [], result.error
    if result.timed_out:
        return FAILED, [], "trial timed out (raise --timeout or use a smaller size)"
    try:
        samples = bench.parse(params, result.stdout, result.stderr, result.returncode)
    except ParseError as exc:
        tail = (result.stderr.strip().splitlines() or [""])[-1][:300]
        return FAILED, [], f"{exc} (exit status {result.returncode}{': ' + tail if tail else ''})"
    return DONE, samples, None


def execute(store: Store, cid: str, progress: Progress | None = None,
            envs: dict[str, Environment] | None = None) -> dict[str, int]:
    """Run every unfinished trial of campaign ``cid``; returns counts by status.

    Environments are started lazily and always closed (QEMU killed) on return, error or
    KeyboardInterrupt.  A trial interrupted by a kill stays ``running`` and is re-run by the
    next ``execute`` (resume).  Raises SpecError/BenchmarkError before any trial runs when the
    stored spec cannot be executed.
    """
    spec = CampaignSpec.model_validate(store.campaign(cid)["spec"])
    if envs is None:
        host = host_facts()
        envs = {e.name: make_environment(e, host) for e in spec.environments}
    todo = store.unfinished(cid)
    all_trials = len(store.trials(cid))
    bindirs = kernel_dirs(spec) if todo or spec.target_ci else {}
    counts = {DONE: 0, FAILED: 0}
    if progress:
        progress.start(all_trials, all_trials - len(todo))
    try:
        with HostKnobs(spec.host_knobs, journal_path()):
            while True:
                rounds = max((t.round for t in store.trials(cid)), default=-1) + 1
                planned = {t.seq: t for t in plan(spec, rounds)}
                _run_trials(store, cid, spec, envs, todo, planned, bindirs, progress, counts)
                if not spec.target_ci or rounds >= spec.warmup + spec.max_repeats:
                    break
                if not imprecise(store.observations(cid), spec.target_ci):
                    break
                todo = store.add_trials(cid, [asdict(t) for t in plan(spec, rounds + 1)[len(planned):]])
                if progress and hasattr(progress, "grow"):
                    progress.grow(len(todo))
    finally:
        for env in envs.values():
            env.close()
    if not store.unfinished(cid):
        store.set_campaign_status(cid, "finished")
    return counts


def kernel_dirs(spec: CampaignSpec) -> dict[str, Any]:
    """Kernel binary directory per MPI implementation the campaign uses (built if needed,
    before any trial runs).  Raises BenchmarkError when a build fails."""
    need: dict[str, set[str]] = {}
    if any(getattr(e.options, "corunner", None) for e in spec.environments):
        need["openmpi"] = {"vhpc-noise", "vhpc-stream"}
    for b in spec.benchmarks:
        binary = getattr(spec.benchmark(b.name), "binary", "")
        if binary:
            need.setdefault(str(b.params.get("mpi", "openmpi")), set()).add(binary)
    return {impl: ensure_kernels(sorted(bins), impl) for impl, bins in need.items()}


def imprecise(observations, target: float, confidence: float = 0.95) -> list[tuple]:
    """Groups (environment, benchmark, params, metric) whose mean is not yet known to within
    ``target`` (relative 95 % Student-t half-width, e.g. 0.02 = ±2 %); groups with fewer than
    two valid measured samples count as imprecise.  Used to decide whether to run another
    round (adaptive repeats instead of the seeds' fixed counts)."""
    import math
    import statistics

    from scipy import stats

    groups: dict[tuple, list[float]] = {}
    for o in observations:
        if not o.warmup and o.valid:
            groups.setdefault((o.environment, o.benchmark, o.params, o.metric), []).append(o.value)
    out = []
    for key, values in groups.items():
        n = len(values)
        if n < 2:
            out.append(key)
            continue
        mean = statistics.fmean(values)
        half = stats.t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
        if mean == 0 or half / abs(mean) > target:
            out.append(key)
    return out


def _run_trials(store, cid, spec, envs, todo, planned, bindirs, progress, counts) -> None:
    """The trial loop of :func:`execute` (environments and host knobs are managed there)."""
    bspecs = {(b.name, b.key): b for b in spec.benchmarks}
    fingerprinted: set[str] = set()
    current: Environment | None = None
    for row in todo:
        env = envs[row.environment]
        if current is not None and current is not env:
            current.pause()
        current = env
        if planned[row.seq].fresh:
            env.new_session()
        bench = spec.benchmark(row.benchmark)
        params = bench.resolve(bspecs[(row.benchmark, row.params)].params)
        ctx = RunContext(bindirs.get(str(params.get("mpi", "openmpi"))), env_cpus(env))
        if progress:
            progress.trial(row)
        store.mark_running(row.id)
        result = env.run(bench.command(params, ctx), bench.environ(params, ctx),
                         timeout=spec.timeout, key=f"{row.benchmark}[{row.params}]")
        if env.name not in fingerprinted:
            try:
                store.set_fingerprint(cid, env.name, env.accel, env.fingerprint())
                fingerprinted.add(env.name)
            except EnvError:
                pass
        status, samples, error = outcome(bench, params, result)
        store.finish_trial(
            row.id, status, returncode=result.returncode, timed_out=result.timed_out,
            error=error, stdout=result.stdout, stderr=result.stderr, started=result.started,
            ended=result.started + result.elapsed, session_index=result.session_index,
            applied=result.applied, samples=samples, diagnostics=result.diagnostics)
        counts[status] += 1
        if progress:
            note = error or ("invalid: verification failed" if samples and not all(
                s.valid for s in samples) else "")
            progress.finished(row, status, note)


def reparse(store: Store, cid: str) -> int:
    """Re-derive samples of every completed trial from its stored raw output (after a parser
    fix), without re-running.  Returns the number of trials re-parsed."""
    spec = CampaignSpec.model_validate(store.campaign(cid)["spec"])
    bspecs = {(b.name, b.key): b for b in spec.benchmarks}
    n = 0
    for row in store.trials(cid):
        if row.stdout is None or row.status not in (DONE, FAILED):
            continue
        bench = spec.benchmark(row.benchmark)
        params = bench.resolve(bspecs[(row.benchmark, row.params)].params)
        result = RunResult(row.returncode, row.stdout or "", row.stderr or "", row.started or 0,
                           0.0, error=row.error if row.returncode is None else None)
        status, samples, error = outcome(bench, params, result)
        store.replace_samples(row.id, status, samples, error)
        n += 1
    return n

