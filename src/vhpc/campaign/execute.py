"""Campaigns: plan trials from a spec, execute them in environments, store every outcome.

Protocol (docs/campaigns.md, "Protocol"):

* ``warmup`` rounds then ``repeats`` measured rounds; in each round every environment runs every
  benchmark once.  Warm-up trials are stored and flagged, never analysed.
* Order ``alternate`` (default): the environment order reverses every round (A B, B A, A B, …)
  so slow drift of the host (thermal, background load) affects all environments alike;
  ``fixed`` keeps the spec order.
* A VM is paused (QMP ``stop``) while other environments run, so it neither perturbs them nor
  loses its warm state.
* Sessions (Ibrahim et al., CCGrid 2011, Sec. VI): ``warm`` (default) keeps one boot for all
  trials, the warm-up round absorbing the cold start; ``cold`` boots a fresh VM before every VM
  trial; ``cold-warm`` runs each benchmark ``session_trials`` times in a row in a fresh boot, so
  session index 0 is the cold trial and later ones are warm (analysed as separate groups).
* Each trial has a timeout; a trial that fails (timeout, guest failure, no parseable result) is
  stored ``failed`` with its raw output and the campaign continues.
* Every planned trial is stored ``pending`` at creation; ``resume`` runs only the trials not
  yet ``done``/``failed``, so a killed campaign loses and duplicates nothing.
* One process runs a campaign at a time (:meth:`Store.own`); a campaign that stops for any
  reason but its end is ``interrupted`` (resumable).  The first trial of a benchmark in a VM
  session the plan did not ask for (resume after a kill, a guest that died) is stored with
  ``reboot`` set and analysed as a warm-up.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Protocol

from vhpc import benchmarks
from vhpc.campaign import likewise
from vhpc.core import records
from vhpc.benchmarks.base import ParseError, RunContext, ensure_kernels, kernel_build_flags
from vhpc.environments.base import Environment, EnvError, RunResult, now
from vhpc.host.knobs import HostKnobs, journal_path
from vhpc.environments.kind import EnvPlan
from vhpc.environments.options import HostFacts
from vhpc.spec.parse import CampaignSpec
from vhpc.store import DONE, FAILED, Store, StoreError, TrialRow

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


def stored_spec(store: Store, cid: str) -> CampaignSpec:
    """The validated spec of stored campaign ``cid``.  Raises StoreError ("not a vhpc store or
    damaged: campaigns CID ...") when the stored spec was edited into something invalid."""
    from pydantic import ValidationError

    from vhpc.core.errors import VhpcError
    from vhpc.spec.parse import one_line
    from vhpc.storefile import damaged

    try:
        return CampaignSpec.model_validate(store.campaign(cid)["spec"])
    except ValidationError as exc:
        raise damaged(store.path, "campaigns", cid, f"spec_json: {one_line(exc)}") from None
    except StoreError:
        raise
    except VhpcError as exc:
        raise damaged(store.path, "campaigns", cid, f"spec_json: {exc}") from None


def new_campaign_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` (UTC time plus 4 random hex digits)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def host_facts(topology_source: str | None = None) -> HostFacts:
    """Facts host-dependent checks need: usable CPUs and the topology (hwloc's lstopo for
    this host, or ``topology_source``).  Raises TopologyError."""
    return HostFacts.live(topology_source)


def placements(spec: CampaignSpec, host: HostFacts) -> dict[str, EnvPlan]:
    """Environment name → its plan on ``host`` (placement, and one line saying where its trials
    run; nothing is started), with ``host.compute_nodes`` set to the compute nodes the campaign's
    executor offers (:meth:`Executor.node_count`).  This is also the host check of a campaign:
    raises HostError/PlacementError when the host cannot give an environment what it asks for,
    BenchmarkError when a benchmark's parameters exceed an environment or resolve to different
    problems in two (:func:`vhpc.campaign.likewise.check`)."""
    from dataclasses import replace

    host = replace(host, compute_nodes=spec.executor.node_count(),
                   remote=not spec.executor.part.runs_here)
    plans = {e.name: e.plan(host) for e in spec.environments}
    likewise.check(spec, host)  # parameters each environment holds; like compared with like
    return plans


def prepare(spec: CampaignSpec, host: HostFacts | None = None) -> dict[str, Environment]:
    """Check ``spec`` against the host and build its environments (nothing is booted yet):
    the step between a valid spec and a stored campaign.  Each environment's placement is
    computed once, here.  Raises HostError/PlacementError (and EnvError/GuestImageError
    from a kind's build)."""
    host = host or host_facts()
    plans = placements(spec, host)
    return {e.name: e.build(host, plans[e.name]) for e in spec.environments}


class Progress(Protocol):
    """Callbacks the executor reports to (the CLI draws a progress bar with them); one with a
    ``stage(environment, what)`` method is also told each guest boot or reboot as it starts
    and ends (the environments' :attr:`~vhpc.environments.base.Environment.stage_hook`); one
    with a ``grow(trials)`` method is told when adaptive repeats add a round of that many
    trials."""

    def start(self, total: int, done: int) -> None:
        """The campaign starts: ``total`` trials in all, ``done`` of them already finished (a
        resumed campaign)."""

    def trial(self, row: TrialRow) -> None:
        """Trial ``row`` starts."""

    def finished(self, row: TrialRow, status: str, note: str) -> None:
        """Trial ``row`` ended with ``status`` (the store's done or failed); ``note`` is its error,
        or "invalid: verification failed", or "" when there is nothing to say."""


def sized(spec: CampaignSpec, say: Callable[[str], None] | None = None) -> CampaignSpec:
    """``spec`` with every parameter a benchmark sizes on this host once per campaign filled
    in (a benchmark's ``size_problem(params, say)``: GROMACS's ``steps=auto``, from a probe
    run), so every environment runs the same problem and the stored campaign says which;
    ``spec`` itself when nothing was left to size.  ``say``: told what is probed and chosen.
    Raises BenchmarkError when a probe fails."""
    out, changed = [], False
    for b in spec.benchmarks:
        bench = spec.benchmark(b.name)
        size = getattr(bench, "size_problem", None)
        extra = size(bench.resolve(b.params), say) if size is not None else {}
        if extra:
            b, changed = b.model_copy(update={"params": {**b.params, **extra}}), True
        out.append(b)
    return spec.model_copy(update={"benchmarks": out}) if changed else spec


def create(store: Store, spec: CampaignSpec, command: str = "") -> str:
    """Store a new campaign with its planned trials (what it leaves to be sized on this host
    sized first: :func:`sized`); returns the campaign id."""
    spec = sized(spec)
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
            envs: dict[str, Environment] | None = None,
            notify: Callable[[str], None] | None = None,
            next_round: Callable[[int], list[dict[str, Any]]] | None = None,
            spec: CampaignSpec | None = None) -> dict[str, int]:
    """Run every unfinished trial of campaign ``cid``; returns counts by status.

    ``spec``: the campaign's spec when the caller holds it (it just created the campaign from
    it); None (a resume) reads it from the store, validated once.

    ``next_round`` (``vhpc tune``'s race): called with the number of rounds stored once their
    trials ran; returns the trials of one more round (dicts as :func:`plan` gives, a subset of
    its next round) or ``[]`` to stop.  Environments stay up between rounds.

    The campaign is owned by this process meanwhile (:meth:`Store.own`): raises StoreError
    when another live process runs it; a dead owner's lock is taken over and ``notify`` (a
    one-line message printer; default: the ``vhpc`` logger) is told.  Environments are started
    lazily and always closed (QEMU killed) on return, error or KeyboardInterrupt; the campaign
    is then ``interrupted`` unless every trial ran.  A trial interrupted by a kill stays
    ``running`` and is re-run by the next ``execute`` (resume).  Raises SpecError/BenchmarkError
    before any trial runs when the stored spec cannot be executed, and StoreError (with the
    resume command) when the store fails, e.g. on a full disk.
    """
    say = notify or logging.getLogger("vhpc").warning

    def takeover(old) -> None:
        say(f"campaign {cid} was left by {old.describe()}, which is no longer running: "
            "taking it over")

    with store.own(cid, takeover):
        store.set_campaign_status(cid, "running")
        try:
            counts = _execute_owned(store, cid, progress, envs, next_round, spec)
        except BaseException as exc:
            try:
                store.set_campaign_status(cid, "interrupted")
            except StoreError:
                pass  # not writable now: the released lock marks it interrupted anyway
            if isinstance(exc, StoreError) and exc.kind in ("full", "io", "readonly", "busy"):
                raise StoreError(f"{exc}; then resume with: vhpc compare --resume {cid} --out "
                                 f"{store.path.parent}", exc.kind) from None
            raise
        if not store.unfinished(cid):
            store.set_campaign_status(cid, "finished")
        else:
            store.set_campaign_status(cid, "interrupted")
    return counts


def _execute_owned(store: Store, cid: str, progress: Progress | None,
                   envs: dict[str, Environment] | None, next_round=None,
                   spec: CampaignSpec | None = None) -> dict[str, int]:
    """:func:`execute` once the campaign is owned."""
    spec = spec if spec is not None else stored_spec(store, cid)
    if envs is None:
        host = host_facts()
        envs = prepare(spec, host)
    todo = store.unfinished(cid)
    stored = store.trials(cid)
    _check_rows(store, spec, stored)
    from vhpc.host.owned import reap_all

    for line in clean_leftovers(store, cid) + reap_all():  # what a killed vhpc left
        logging.getLogger("vhpc").info(line)
    recorded = []
    for env in envs.values():
        record = env.leftover_record(cid)  # ssh: remote trials named by the campaign
        if record is not None:
            store.set_leftover(cid, env.name, record)
            recorded.append(env.name)
    all_trials = len(stored)
    booted = store.attempted_environments(cid)  # sessions were started by an earlier run
    bindirs = kernel_dirs(spec) if todo or spec.target_ci or next_round else {}
    counts = {DONE: 0, FAILED: 0}
    if progress:
        progress.start(all_trials, all_trials - len(todo))
    staged = getattr(progress, "stage", None)
    for env in envs.values() if staged else ():  # a boot or reboot said as it starts
        env.stage_hook = (lambda what, name=env.name: staged(name, what))
    from vhpc import executors

    executor = executors.make(spec.executor, cid)
    executor.resume_hint = f"vhpc compare --resume {cid} --out {store.path.parent}"
    executor.plan_seconds, executor.plan_measured = plan_budget(store, spec, todo)
    executor.plan_trials = len(todo)
    try:
        with HostKnobs(spec.host_knobs, journal_path()), executor:
            while True:
                rounds = max((t.round for t in stored), default=-1) + 1
                planned = {t.seq: t for t in plan(spec, rounds)}
                _run_trials(store, cid, spec, envs, todo, planned, bindirs, progress, counts,
                            booted, executor)
                if next_round is not None:
                    todo = store.add_trials(cid, next_round(rounds))
                    stored += todo
                    if not todo:
                        break
                    if progress and hasattr(progress, "grow"):
                        progress.grow(len(todo))
                    continue
                if not spec.target_ci or rounds >= spec.warmup + spec.max_repeats:
                    break
                if not imprecise(store.observations(cid), spec.target_ci):
                    break
                todo = store.add_trials(cid, [asdict(t) for t in plan(spec, rounds + 1)[len(planned):]])
                stored += todo
                if progress and hasattr(progress, "grow"):
                    progress.grow(len(todo))
    finally:
        for env in envs.values():
            env.stage_hook = None
            env.close()
            if env.name in recorded:
                store.clear_leftover(cid, env.name)
    from vhpc.campaign import checks

    checks.apply(store, cid, spec)  # check: figures against the baseline's, once all ran
    return counts


def clean_leftovers(store: Store, cid: str) -> list[str]:
    """Before campaign ``cid`` runs again: kill the remote process groups and close the ssh
    ControlMaster that an earlier, killed run of it left (:meth:`Store.leftovers`), so a
    resumed trial never runs beside a survivor.  Returns one line per action."""
    from vhpc.environments.kind import KINDS

    lines = []
    for name, record in store.leftovers(cid).items():
        if record.get("kind") in KINDS:  # a record of a kind this vhpc no longer has: dropped
            lines += KINDS.get(record["kind"]).clean_leftover(record)
        store.clear_leftover(cid, name)
    return lines


def _check_rows(store: Store, spec: CampaignSpec, rows: list[TrialRow]) -> None:
    """Raise StoreError ("damaged store: ...: trials ID ...") for a stored trial whose
    environment or benchmark parameters are not in the campaign's spec (a hand-edited row)."""
    from vhpc.storefile import damaged

    bkeys = {(b.name, b.key) for b in spec.benchmarks}
    names = {e.name for e in spec.environments}
    for row in rows:
        if row.environment not in names:
            raise damaged(store.path, "trials", row.id, f"environment {row.environment!r} is "
                          "not in the campaign")
        if (row.benchmark, row.params) not in bkeys:
            raise damaged(store.path, "trials", row.id, f"benchmark {row.benchmark}"
                          f"[{row.params}] is not in the campaign")


def plan_budget(store, spec, todo) -> tuple[float | None, int]:
    """(seconds the trials ``todo`` may take, how many of them were measured before): a trial
    of a (benchmark, parameters, environment) the store has finished trials of counts twice
    their mean run time plus 30 s (:meth:`vhpc.store.Store.durations`), never more than its
    timeout; any other counts its timeout.  (None, 0) when nothing is to run.  An executor
    asks a batch system for this much time (Slurm's ``--time``)."""
    if not todo:
        return None, 0
    past = store.durations()
    total, measured = 0.0, 0
    for t in todo:
        limit = getattr(spec.benchmark(t.benchmark), "trial_timeout", None)
        cap = limit(spec.timeout) if limit else spec.timeout
        seen = past.get((t.benchmark, t.params, t.environment))
        if seen is not None and seen >= 0:
            total += min(cap, 2 * seen + 30)
            measured += 1
        else:
            total += cap
    return total, measured


def kernel_dirs(spec: CampaignSpec) -> dict[str, Any]:
    """Kernel binary directory per MPI implementation the campaign uses (built if needed,
    before any trial runs); a benchmark's ``preflight(params)`` (an application's binary and
    prepared inputs, a custom benchmark's inputs) runs here too.  Raises BenchmarkError when a
    build fails or a preflight names what is missing."""
    refuse_lacking(spec)
    need: dict[str, set[str]] = {}
    if any(getattr(e.options, "corunner", None) for e in spec.environments):
        need["openmpi"] = {"vhpc-noise", "vhpc-stream"}
    for b in spec.benchmarks:
        bench = spec.benchmark(b.name)
        binary = getattr(bench, "binary", "")
        if binary:
            need.setdefault(str(b.params.get("mpi", "openmpi")), set()).add(binary)
        preflight = getattr(bench, "preflight", None)  # applications: binary, inputs prepared
        if preflight is not None:
            preflight(bench.resolve(b.params))
        _refuse_hidden_inputs(spec, bench, bench.resolve(b.params))
    return {impl: ensure_kernels(sorted(bins), impl) for impl, bins in need.items()}


def refuse_lacking(spec: CampaignSpec) -> None:
    """Refuse a campaign whose benchmark needs what this host lacks (a benchmark's
    ``components``: linpack's LAPACKE, hpcc, lmp), before anything is built or stored, as
    ``--dry-run`` does.  Raises BenchmarkError, one line naming the benchmark, what it lacks
    and the Debian package that adds it (the same rows ``vhpc doctor`` shows)."""
    from vhpc.benchmarks.base import BenchmarkError, lacking

    for b in spec.benchmarks:
        missing = lacking(tuple(spec.benchmark(b.name).components))
        if missing:
            raise BenchmarkError(
                f"benchmark {b.name} needs {' and '.join(c.name for c in missing)}, which this "
                f"host lacks: apt-get install {' '.join(c.debian for c in missing)} "
                "(vhpc doctor lists what each benchmark needs)")


def _refuse_hidden_inputs(spec: CampaignSpec, bench, params) -> None:
    """Raise BenchmarkError when ``bench`` reads a host path that an environment of the
    campaign cannot see (under a directory its guests replace with their own tmpfs: the kind's
    :meth:`~vhpc.environments.kind.EnvironmentKind.hidden_host_dirs`), naming the path and
    what to do; before any trial, so nothing runs that would fail in the guest."""
    from vhpc.benchmarks.base import BenchmarkError

    hiding = {e.name: e.part.hidden_host_dirs(e.options) for e in spec.environments}
    dirs = list(dict.fromkeys(d for ds in hiding.values() for d in ds))
    for path in bench.host_paths(params):
        p = Path(path).resolve()
        under = [d for d in dirs if p == Path(d) or Path(d) in p.parents]
        if under:
            blind = [n for n, ds in hiding.items() if under[0] in ds]
            raise BenchmarkError(
                f"{bench.name}: {path} lies under {', '.join(dirs)}, which the guests "
                f"({', '.join(blind)}) replace with their own: move it elsewhere (inputs:), or "
                "set VHPC_CACHE outside them (prepared application inputs)")


def imprecise(observations, target: float, confidence: float = 0.95) -> list[tuple]:
    """Groups (environment, benchmark, params, metric) whose mean is not yet known to within
    ``target`` (relative Student-t half-width, e.g. 0.02 = ±2 %; :func:`vhpc.core.stats.imprecise_keys`);
    groups with fewer than two valid measured samples count as imprecise.  Used to decide
    whether to run another round (adaptive repeats instead of the seeds' fixed counts)."""
    from vhpc.core import stats

    groups: dict[tuple, list[float]] = {}
    for o in observations:
        if not o.warmup and o.valid:
            groups.setdefault((o.environment, o.benchmark, o.params, o.metric), []).append(o.value)
    return stats.imprecise_keys(groups, target, confidence)


def _loadavg() -> tuple[float, float, float] | None:
    """This host's load averages (getloadavg(3)); None where the system has none."""
    try:
        return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]
    except OSError:
        return None


def _add_rank_readback(result: RunResult, bench, params, ctx: RunContext) -> None:
    """Fold an MPI trial's per-rank placement (each rank's ``VHPC-RANK`` line, read by
    :meth:`Benchmark.readback`) and its launch diagnostics into the trial's records; ranks
    sharing a CPU they should not share join the environment's placement mismatches."""
    applied, diagnostics = bench.readback(params, ctx, result.stdout or "")
    if not applied and not diagnostics:
        return
    extra = applied.pop("mismatches", [])
    if getattr(result.applied, "ranks", None):  # the environment's own (vcluster: guest, vCPU)
        applied.pop("ranks", None)
    old = list(getattr(result.applied, "mismatches", None) or [])
    result.applied = records.extended(result.applied, records.AppliedPlacement,
                                      **applied, mismatches=old + extra)
    result.diagnostics = records.extended(result.diagnostics, records.Diagnostics, **diagnostics)


def _run_trials(store, cid, spec, envs, todo, planned, bindirs, progress, counts,
                booted: set[str], executor) -> None:
    """The trial loop of :func:`execute` (environments, host knobs and the executor are
    managed there).

    ``booted``: environments that had a session before (grows as trials run).  A session that
    starts during a trial the plan did not mark ``fresh``, in an environment that had one
    already, is unplanned: its first trial of each benchmark is stored as ``reboot``."""
    bspecs = {(b.name, b.key): b for b in spec.benchmarks}
    especs = {e.name: e for e in spec.environments}
    fingerprinted: set[str] = set()
    attached: set[str] = set()
    unplanned: dict[str, bool] = {}
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
        impl = str(params.get("mpi", "openmpi"))
        bindir = bindirs.get(impl)
        ncpus = env.benchmark_cpus()  # an application's input may depend on it
        sessions = getattr(env, "sessions", None)  # a boot from here on is this trial's
        unready = executor.prepare(env, especs[env.name])  # slurm: guest hosts on the nodes
        if unready is None and env.spans_nodes and not executor.runs_here and \
                env.name not in attached:  # its guests (an image's apps) answer only now
            attached.add(env.name)
            likewise.check_app_versions(spec, envs)
        remote = None
        if unready is None:
            bindir = env.kernel_dir(bindir, impl, getattr(bench, "binary", ""))  # ssh: remote
            remote = env.stage_files(bench.copied_inputs(params, ncpus))  # ssh, image: copies
        ctx = RunContext(bindir, ncpus, env.mpi_cpuset(), remote)
        if progress:
            progress.trial(row)
        store.mark_running(row.id)
        limit = getattr(bench, "trial_timeout", None)  # a custom benchmark's own timeout:
        timeout = limit(spec.timeout) if limit else spec.timeout
        load = _loadavg()
        result = RunResult(None, "", "", now(), 0.0, error=unready) if unready else executor.run(
            env, especs[env.name], bench.command(params, ctx), bench.environ(params, ctx),
            timeout, f"{row.benchmark}[{row.params}]")
        if load is not None:  # how busy this host was around the trial, kept in the store
            result.diagnostics = records.extended(result.diagnostics, records.Diagnostics,
                                                  loadavg_before=load, loadavg_after=_loadavg())
        if getattr(env, "sessions", None) != sessions:  # this trial booted a session
            unplanned[env.name] = env.name in booted and not planned[row.seq].fresh
        if result.session_index is not None:
            booted.add(env.name)
        _add_rank_readback(result, bench, params, ctx)
        if env.name not in fingerprinted:
            try:
                fp = executor.fingerprint(env)  # slurm: as the compute node reported it
                fp.setdefault("kernel_build", kernel_build_flags())  # -O3, -march=native?
                store.set_fingerprint(cid, env.name, fp.get("accel", env.accel), fp)
                fingerprinted.add(env.name)
            except EnvError:
                pass
        status, samples, error = outcome(bench, params, result)
        store.finish_trial(
            row.id, status, returncode=result.returncode, timed_out=result.timed_out,
            error=error, stdout=result.stdout, stderr=result.stderr, started=result.started,
            ended=result.started + result.elapsed, session_index=result.session_index,
            applied=result.applied, samples=samples, diagnostics=result.diagnostics,
            reboot=unplanned.get(env.name, False) and result.session_index == 0)
        counts[status] += 1
        if progress:
            note = error or ("invalid: verification failed" if samples and not all(
                s.valid for s in samples) else "")
            progress.finished(row, status, note)


def reparse(store: Store, cid: str) -> int:
    """Re-derive samples of every completed trial from its stored raw output (after a parser
    fix), without re-running.  Returns the number of trials re-parsed."""
    with store.own(cid):  # not while a live vhpc runs it
        return _reparse(store, cid)


def _reparse(store: Store, cid: str) -> int:
    spec = stored_spec(store, cid)
    bspecs = {(b.name, b.key): b for b in spec.benchmarks}
    n = 0
    _check_rows(store, spec, store.trials(cid))
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
    from vhpc.campaign import checks

    checks.apply(store, cid, spec)
    return n

