"""A seed paper's evaluation at once (``vhpc paper SEED``): every study of the seed, in the
paper's figure order, run as campaigns (or taken from the store with ``--from-store``) and
presented on one page with the figures and the paper-found / this-host lines.

:func:`plan` builds each study's spec on this host with the studies' own planner
(:func:`vhpc.campaign.studies.build`, the executor and host knobs passed through); a study this
host cannot run as the paper did is kept with its reason (refused, in one line each, before
anything runs: a study across nodes without ``--executor``, 2 MiB-backed guests without
hugepages). :func:`estimate_s` guesses how long a study's trials take from their actual
parameters (``vhpc study --dry-run`` prints the same estimate), and :func:`page` writes
``OUT/paper-SEED/index.html`` from the stored campaigns.  :func:`add_parser` and :func:`run`
are the command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhpc.core.errors import VhpcError
from vhpc.core.text import markup as esc

#: seconds a guest takes to boot (a fresh session), by accelerator: generous rules of thumb
#: (a TCG guest of vhpc's was ready in 4.2-4.7 s on a 2-core host, 2 vCPUs, 1 GiB; its kernel
#: reaches init in 1.85-2.3 s under TCG, shared/reference/vm-mechanics.md); a store's past
#: trials replace the trial estimate, not this
BOOT_S = {"kvm": 15.0, "tcg": 15.0}
#: parameters that spread work over CPUs rather than add to it (left out of the work factor)
PARALLEL = frozenset({"ranks", "threads", "copies", "pairs", "vcpus"})
#: a parameter of this name is wall-clock seconds (noise runs that long in any environment)
DURATION = "duration"
#: the work factor's bounds (a parameter far from its default is still a rule of thumb)
FACTOR = (0.02, 50.0)


@dataclass
class Item:
    """One study of the seed: its spec (None when this host cannot run it as the paper did:
    ``reason`` then, one line), ``trials`` as the study plans them."""

    name: str
    number: str
    spec: Any = None
    reason: str | None = None
    note: str | None = None
    trials: list = field(default_factory=list)


def _refusal(study, spec, executor: str | None) -> str | None:
    """Why ``spec`` of ``study`` would not run as the paper ran it here (None: it would)."""
    from vhpc.host.facts import read_hugepages
    from vhpc.placement import PlacementError, check_hugepages

    if study.spans_nodes and not executor:
        return (f"it runs across compute nodes ({study.figure.number}: {study.figure.title}) and "
                "no --executor was given; add --executor slurm:nodes=N (docs/scale-out.md)")
    if spec.host_knobs and any(k.startswith("hugepages") for k in spec.host_knobs):
        return None  # the knob reserves the pages before the guests boot
    from vhpc.campaign import execute

    if not spec.executor.part.runs_here:
        return _node_refusal(spec)  # the nodes' hugepages are theirs: checked where guests boot

    plans = execute.placements(spec, execute.host_facts())
    for name, p in plans.items():
        if p.placement is not None and getattr(p.placement, "hugepage_kib", None):
            try:
                check_hugepages(p.placement, read_hugepages())
            except PlacementError as exc:
                first = " ".join(str(exc).split())
                return (f"its guest {name} needs hugepages this host has not reserved ({first}); "
                        "add --host-knob hugepages_2m=N")
    return None


def _node_refusal(spec) -> str | None:
    """Why a compute node of ``spec``'s executor cannot hold one of its guests (None: it can,
    or the executor does not say what its nodes hold): a guest's vCPUs against the fewest CPUs
    of a node (:meth:`vhpc.executors.base.Executor.node_cpus`), one guest per node."""
    cpus = spec.executor.part.node_cpus(spec.executor.options)
    for env in spec.environments if cpus is not None else ():
        vcpus = getattr(env.options, "vcpus", None)
        if env.part.boots_guests and isinstance(vcpus, int) and vcpus > cpus:
            return (f"its guest {env.name} has vcpus={vcpus} but a node of {spec.executor} has "
                    f"{cpus} CPU(s) (sinfo): a node cannot hold it; use nodes with {vcpus} "
                    "CPUs or more")
    return node_hugepage_refusal(spec)


def node_hugepage_refusal(spec) -> str | None:
    """Why the compute nodes of ``spec``'s executor cannot back its guests with hugepages
    (None: they can, no guest asks for them, or the executor cannot say): each guest
    environment with ``backing=2m``/``1g`` (a ``vm``: one guest on the node its trial runs
    on) needs memory / page size free pages of that size on a node, on at least as many nodes
    as the executor allocates; the nodes' free pages are read on each node
    (:meth:`vhpc.executors.base.Executor.node_hugepages`).  The line names a node short of
    pages and how many it lacks."""
    kib_of = {"2m": 2048, "1g": 1048576}
    wants = [(env, kib_of[getattr(env.options, "backing", "4k")]) for env in spec.environments
             if env.part.boots_guests and getattr(env.options, "backing", "4k") in kib_of]
    if not wants:
        return None
    free = spec.executor.part.node_hugepages(spec.executor.options)
    if not free:
        return None
    nodes = spec.executor.part.node_count(spec.executor.options)
    for env, kib in wants:
        need = env.options.memory * 1024 // kib
        short = {n: f.get(kib, 0) for n, f in sorted(free.items()) if f.get(kib, 0) < need}
        if len(free) - len(short) < nodes:
            node, has = next(iter(short.items()))
            size = f"{kib // 1024} MiB" if kib < 1048576 else "1 GiB"
            return (f"guest {env.name} (backing={env.options.backing}, memory="
                    f"{env.options.memory} MiB) needs {need} free {size} "
                    f"hugepages on each of {nodes} node(s), but node {node} has {has}"
                    + (f" (and {len(short) - 1} more node(s) too few)" if len(short) > 1 else "")
                    + f": reserve {need - has} more there (/sys/kernel/mm/hugepages/"
                    f"hugepages-{kib}kB/nr_hugepages) or use backing=4k")
    return None


def plan(seed: str, topology, overrides: dict[str, list[str]], **protocol: Any) -> list[Item]:
    """The seed's studies on ``topology``; ``overrides``: study → ``-b`` items; ``protocol``:
    repeats, warmup, timeout, ``executor`` and ``host_knobs`` as ``vhpc study`` takes them,
    passed to every study."""
    from vhpc.campaign import execute, studies

    items = []
    found = studies.of_seed(seed)
    if not found:
        seeds = sorted({s.seed for _, s in studies.STUDIES.items() if s.seed})
        raise studies.StudyError(f"no study reproduces seed {seed!r}: choose one of {', '.join(seeds)}")
    executor = protocol.get("executor")
    for s in found:
        item = Item(s.name, s.figure.number, note=studies.note(s.name, topology))
        try:
            spec = studies.build(s.name, topology, overrides.get(s.name, []), **dict(protocol))
            item.reason = _refusal(s, spec, executor)
            if item.reason is None:
                item.spec = spec
                item.trials = execute.plan(spec)
        except VhpcError as exc:
            item.reason = " ".join(str(exc).split())
        items.append(item)
    return items


@dataclass
class Past:
    """What a store's finished trials say about time on this host (seconds): the mean trial
    duration per (benchmark, parameters, environment) and per (benchmark, parameters,
    environment kind, accelerator); per (kind, accelerator) the median trial and the median
    measured boot (a session's first trial started this long after the trial before it ended,
    in the same campaign; a campaign's first session: its first trial began this long after
    the campaign was created, host checks included: the guest's boot and the agent's start)."""

    exact: dict[tuple[str, str, str], float] = field(default_factory=dict)
    by_kind: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    median: dict[tuple[str, str], float] = field(default_factory=dict)
    boot: dict[tuple[str, str], float] = field(default_factory=dict)


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


#: campaigns, newest first, whose trials teach the estimate (beside the store's durations)
PAST_CAMPAIGNS = 30


def _past_seconds(store) -> Past:
    """:class:`Past` from ``store`` (an empty one without a store: the rules of thumb then),
    read through its public methods, so a damaged store raises its one-line StoreError: the
    mean per (benchmark, parameters, environment) from :meth:`~vhpc.store.Store.durations`,
    the rest from the trials of the newest :data:`PAST_CAMPAIGNS` campaigns."""
    if store is None:
        return Past()
    from vhpc.environments.kind import KINDS

    by_kind: dict[tuple, list[float]] = {}
    median: dict[tuple, list[float]] = {}
    boot: dict[tuple, list[float]] = {}
    for camp in store.campaigns()[:PAST_CAMPAIGNS]:
        envs = store.environments(camp["id"])
        kinds = {n: (e.kind, e.accel or "") for n, e in envs.items()}
        trials = [t for t in store.trials(camp["id"])
                  if t.started is not None and t.ended is not None]
        ended = {t.seq: t.ended for t in trials}
        first = min((t.started for t in trials), default=None)
        for t in trials:
            k = kinds.get(t.environment, ("", ""))
            if t.session_index == 0:  # a fresh session's first trial: the boot came before
                gap = t.started - ended.get(t.seq - 1, t.started)
                if 1.0 < gap < 600:
                    boot.setdefault(k, []).append(gap)
            if t.status == "done":
                d = t.ended - t.started
                by_kind.setdefault((t.benchmark, t.params, *k), []).append(d)
                median.setdefault(k, []).append(d)
        booting = [k for k in kinds.values() if k[0] in KINDS and KINDS.get(k[0])().boots_guests]
        gap = first - camp["created"] if first is not None else 0.0
        if booting and 1.0 < gap < 600:  # the first session booted before the first trial
            boot.setdefault(booting[0], []).append(gap)
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    return Past(store.durations(), {k: mean(v) for k, v in by_kind.items()},
                {k: _median(v) for k, v in median.items()},
                {k: _median(v) for k, v in boot.items()})


def work_factor(bench_spec) -> float:
    """How much more (or less) work a benchmark's given parameters ask for than its defaults:
    the product of value / default over the numeric parameters given (those that spread work
    over CPUs, :data:`PARALLEL`, and a :data:`DURATION` left out; a ``*_log2`` parameter
    counts as 2^(value − default)), bounded by :data:`FACTOR`.  ``linpack:n=200`` → 0.2 of
    the default ``n=1000``; a parameter whose default is 0 or auto (``hpccg:nx``) counts as
    1."""
    from vhpc import benchmarks

    declared = {p.name: p for p in benchmarks.get(bench_spec.name).params}
    f = 1.0
    for name, value in bench_spec.params.items():
        p = declared.get(name)
        if (p is None or name in PARALLEL or name == DURATION or isinstance(p.default, bool)
                or not isinstance(p.default, (int, float)) or not p.default
                or isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            continue
        f *= 2.0 ** (value - p.default) if name.endswith("_log2") else value / p.default
    return min(max(f, FACTOR[0]), FACTOR[1])


def estimate_s(spec, trials, accel: str, store=None) -> float:
    """Seconds the planned ``trials`` of ``spec`` may take here, each trial at most the spec's
    timeout, from what ``store`` measured on this host (:class:`Past`), best first: a past
    finished trial of the same benchmark, parameters and environment; of the same benchmark and
    parameters in an environment of the same kind and accelerator; the median past trial of
    that kind scaled by the benchmark's :func:`work_factor`; else the kind's rule of thumb
    (:meth:`EnvironmentKind.trial_seconds` under ``accel``), half of it fixed (starting the
    trial) and half scaled by the work factor.  Plus a given :data:`DURATION`, and a boot for
    the first session of a kind that boots guests and every fresh one: the median boot the
    store measured for that kind, else :data:`BOOT_S`."""
    from vhpc.environments.kind import KINDS

    past = _past_seconds(store)
    envs = {e.name: e for e in spec.environments}
    kinds = {n: KINDS.get(e.kind)() for n, e in envs.items()}
    factors = {b.name + "\0" + b.key: (work_factor(b), float(b.params.get(DURATION) or 0))
               for b in spec.benchmarks}
    limit = getattr(spec, "timeout", None) or float("inf")
    total = 0.0
    booted: set[str] = set()
    for t in trials:
        kind = kinds[t.environment]
        k = (envs[t.environment].kind, accel if kind.boots_guests else "")
        f, wall = factors.get(t.benchmark + "\0" + t.params, (1.0, 0.0))
        s = past.exact.get((t.benchmark, t.params, t.environment))
        if s is None:
            s = past.by_kind.get((t.benchmark, t.params, *k))
        if s is None and k in past.median:
            s = past.median[k] * f + wall
        if s is None:  # half of a rule-of-thumb trial is starting it, half is the work
            s = kind.trial_seconds(accel) * (0.5 + 0.5 * f) + wall
        total += min(s, limit)
        if kind.boots_guests and (t.fresh or t.environment not in booted):
            total += past.boot.get(k, BOOT_S.get(accel, 60.0))
            booted.add(t.environment)
    return total


def estimate_line(spec, trials, accel: str, store=None) -> str:
    """One line for ``--dry-run``: the trial count and the estimate (``about 3 min``)."""
    s = estimate_s(spec, trials, accel, store)
    when = f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"
    return (f"{len(trials)} trials ({len(spec.benchmarks)} benchmark(s) × "
            f"{len(spec.environments)} environment(s) × {spec.warmup}+{spec.repeats} rounds), "
            f"about {when} on this host (guests under {accel})")



def dry_run_estimate(spec, out: str | Path) -> str:
    """The estimate line ``vhpc study --dry-run`` prints for ``spec`` (the same as ``vhpc
    paper --dry-run`` gives the study), past trials read from ``out``'s store if it has one."""
    from vhpc.campaign import execute
    from vhpc.store import Store

    db = Path(out, "vhpc.db")
    store = Store(db) if db.is_file() else None
    return estimate_line(spec, execute.plan(spec), accelerator()[0], store)

def accelerator() -> tuple[str, str]:
    """(``"kvm"`` or ``"tcg"``, why) for the guests a run would boot here: the KVM probe's
    answer (:meth:`vhpc.environments.vm.VmKind.probe_accel`, cached per host boot), not
    whether ``/dev/kvm`` exists — a host can offer /dev/kvm and still fall back to TCG."""
    from vhpc.environments.vm import guestimage
    from vhpc.environments.vm import VmKind
    from vhpc.host.facts import qemu_version

    if qemu_version() is None:
        return "tcg", "QEMU is not installed: no guest can run (apt-get install qemu-system-x86)"
    try:
        kernel = guestimage.find_kernel()
    except guestimage.GuestImageError as exc:
        return "tcg", f"not probed: {exc}"
    probe = VmKind.probe_accel(kernel)
    return probe.accel, probe.reason


def latest_campaigns(store) -> dict[str, str]:
    """Study name → id of its newest stored campaign with at least one finished trial, else
    its newest at all (an interrupted one with nothing finished is then said so, not "not
    run")."""
    from vhpc.report.paper import study_of

    out: dict[str, str] = {}
    empty: dict[str, str] = {}
    for row in store.campaigns():  # newest first
        name = study_of(row)
        if name and name not in out and (row["done"] or 0) > 0:
            out[name] = row["id"]
        elif name:
            empty.setdefault(name, row["id"])
    return {**empty, **out}


def entry(store, cid: str, out: Path, name: str, note: str | None = None,
          margin: float | None = None) -> dict[str, Any]:
    """One study's entry on the seed page from stored campaign ``cid``: figure + lines, and
    its full report written into ``out/cid/`` (``margin``: the equivalence margin, default
    the campaign's)."""
    from vhpc.report import console as views
    from vhpc.report.paper import limits, study_block

    camp = store.campaign(cid)
    result, _ = views.analyse_stored(store, cid, margin)
    trials = store.trials(cid)
    status, why = study_status(camp["status"], trials)
    html = views.campaign_report(store, cid, out, None, quiet=True, margin=margin)
    drawn = Path(html).parent / "figure.svg"  # the campaign report drew the same figure
    block, fd, lines, _ = study_block(name, result, trials, prefix=f"{name}-", note=note,
                                      png=f"../{cid}/figure.png",
                                      svg=drawn.read_text() if drawn.is_file()
                                      and not drawn.is_symlink() else None)
    emulated = bool(result.emulated())
    return {"cid": cid, "block": block, "report": f"../{cid}/{Path(html).name}",
            "status": status, "why": why, "emulated": emulated,
            "lines": [l for l in lines if l.kind == "paper"],
            "limits": limits(fd, trials, emulated)}


#: words in a line of a failed trial's output that say why it failed (the first such line is
#: the reason the page shows); checked case-insensitively
_WHY = ("error", "cannot", "can't", "not ", "no ", "fail", "refus", "denied", "only", "exceed",
        "too ", "invalid", "unable", "killed", "timed out", "timeout", "but ")


def failure_reason(trial) -> str:
    """Why ``trial`` failed, in one line: the first line of its stderr, then of its error, that
    says why (:data:`_WHY`: "vcpus=2 but the host has 1 CPUs" rather than "srun: error: task 0
    exited": the launchers' own lines and exit codes are passed over); the last line when none
    does; "" when it stored nothing."""
    from vhpc.core.text import plain

    texts = [plain(getattr(trial, "stderr", None) or ""), plain(getattr(trial, "error", None) or "")]
    lines = [" ".join(x.split()) for t in texts for x in t.splitlines() if x.strip()]
    for line in lines:
        low = line.lower()
        launcher = low.startswith(("srun:", "slurmstepd:", "mpirun", "prterun"))
        if (any(w in low for w in _WHY) and not launcher
                and not any(g in low for g in ("exit code", "exit status", "step failed"))):
            return line[:300]
    return (lines[-1] if lines else "")[:300]


def study_status(campaign_status: str, trials) -> tuple[str, str]:
    """(status, reason) of a study's stored campaign: ``finished`` (every measured trial done),
    ``failed N of M`` (N of its M trials failed; the reason: the first failed trial's
    :func:`failure_reason`), ``interrupted`` (trials still pending or running: the campaign was
    stopped; ``vhpc compare --resume ID`` continues it) or ``not run`` (no trial)."""
    trials = list(trials)
    if not trials:
        return "not run", ""
    failed = [t for t in trials if t.status == "failed"]
    left = [t for t in trials if t.status in ("pending", "running")]
    if failed:
        return f"failed {len(failed)} of {len(trials)}", failure_reason(failed[0])
    if left or campaign_status not in ("finished", "done"):
        return "interrupted", f"{len(left)} of {len(trials)} trials not run"
    return "finished", ""


def page(seed: str, items: list[Item], store, out: str | Path,
         margin: float | None = None) -> Path:
    """Write ``out/paper-SEED/index.html``: every item from its newest stored campaign
    (``margin``: the verdicts' equivalence margin, default each campaign's)."""
    from vhpc.report.paper import write_seed_page

    out = Path(out)
    have = latest_campaigns(store)
    entries = []
    for it in items:
        e = {"name": it.name, "number": it.number, "cid": None, "block": None,
             "status": "not run", "why": it.reason and f"not run as the paper did: {it.reason}"
             or "no stored campaign"}
        if it.name in have:
            e.update(entry(store, have[it.name], out, it.name, it.note, margin))
        entries.append(e)
    return write_seed_page(seed, entries, out / f"paper-{seed}" / "index.html")


# -- the command ---------------------------------------------------------------------------
def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``paper`` sub-command (its flags) to an argparse sub-parsers object."""
    from vhpc.core.argtypes import count, number
    from vhpc.environments.options import MAX_SECONDS

    pp = sub.add_parser("paper", help="all studies of one seed paper, run and shown on one page")
    pp.add_argument("seed", help="seed number: 000, 001, 003 or 004")
    pp.add_argument("-b", "--bench", action="append", metavar="STUDY=BENCH[:k=v,...]",
                    help="replace a study's benchmarks, e.g. linpack=linpack:n=200")
    pp.add_argument("--repeats", type=count(1, 10000))
    pp.add_argument("--warmup", type=count(0, 1000))
    pp.add_argument("--timeout", type=number(0, MAX_SECONDS, lo_open=True))
    pp.add_argument("--executor", metavar="local|slurm[:k=v,...]",
                    help="passed to every study; a study across nodes (seed 004's scaling) "
                         "needs slurm:nodes=N and is refused without it")
    pp.add_argument("--host-knob", action="append", metavar="NAME=VALUE",
                    help="passed to every study, e.g. hugepages_2m=1024 for the paging study")
    pp.add_argument("--study", action="append", metavar="NAME",
                    help="run (and show) only this study of the seed; repeatable "
                         "(default: all of them; --dry-run lists their names)")
    pp.add_argument("--from-store", action="store_true",
                    help="run nothing: the page from each study's newest stored campaign")
    pp.add_argument("--out", default="vhpc-results", help="results directory (default: %(default)s)")
    pp.add_argument("--dry-run", action="store_true",
                    help="print each study's figure, trials and time estimate; start nothing")
    from vhpc.workflows.common import margin_flag

    margin_flag(pp)
    return pp


def select(items: list[Item], names: list[str], seed: str) -> list[Item]:
    """The items ``--study`` names (all of them when ``names`` is empty), in the paper's
    order; raises UsageError naming the seed's studies for a name that is not one of them."""
    from vhpc.workflows.common import UsageError

    known = [i.name for i in items]
    bad = [n for n in names if n not in known]
    if bad:
        raise UsageError(f"--study {bad[0]}: not a study of seed {seed}: choose "
                         f"{', '.join(known)}")
    return [i for i in items if not names or i.name in names]


def _overrides(items: list[str]) -> dict[str, list[str]]:
    from vhpc.workflows.common import UsageError

    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, b = item.partition("=")
        if not sep or not b:
            raise UsageError(f"-b {item!r}: give STUDY=BENCH[:k=v,...], e.g. linpack=linpack:n=200")
        out.setdefault(name.strip(), []).append(b)
    return out


def _check_flags(args) -> None:
    """Refuse a bad ``--executor`` or ``--host-knob`` at once (UsageError, one line, exit 2),
    rather than as a refusal of every study."""
    from vhpc import executors
    from vhpc.host.knobs import parse_knob
    from vhpc.workflows.common import UsageError

    try:
        if args.executor is not None:
            executors.parse(args.executor)
        for knob in args.host_knob or []:
            parse_knob(knob)
    except VhpcError as exc:
        flag = "--executor" if "executor" in str(exc) else "--host-knob"
        raise UsageError(f"{flag}: {' '.join(str(exc).split())}") from None


def run(args) -> int:
    """``vhpc paper SEED``: every study of one seed paper, run (or ``--from-store``: from the
    stored campaigns) and presented on one page.  A study this host cannot run as the paper
    did is named in one line before anything runs.  Returns the exit status."""
    from vhpc.campaign import execute, studies
    from vhpc.workflows.common import (UsageError, check_out, console, open_for, preflight,
                                       run_campaign)
    from vhpc.workflows.common import open_store as _store

    _check_flags(args)
    overrides = _overrides(args.bench or [])
    protocol = {k: v for k, v in dict(repeats=args.repeats, warmup=args.warmup,
                                      timeout=args.timeout, executor=args.executor,
                                      host_knobs=args.host_knob,
                                      margin=getattr(args, "margin", None)).items()
                if v is not None}
    host = execute.host_facts()
    items = plan(args.seed, host.topology, overrides, **protocol)
    unknown = set(overrides) - {i.name for i in items}
    if unknown:
        raise UsageError(f"-b: {', '.join(sorted(unknown))} is not a study of seed {args.seed}: "
                         f"choose {', '.join(i.name for i in items)}")
    items = select(items, getattr(args, "study", None) or [], args.seed)
    seed = studies.of_seed(args.seed)[0].seed
    say = dict(highlight=False, markup=False, soft_wrap=True)
    if not args.from_store:
        for it in items:  # before anything runs
            if it.spec is None:
                console.print(f"vhpc paper {seed}: will not run {it.name}: {it.reason}", **say)
            elif it.note:
                console.print(f"vhpc paper {seed}: {it.name} runs reduced: {it.note}", **say)
    if args.dry_run:
        store = _store(args.out, existing=True) if Path(args.out, "vhpc.db").is_file() else None
        accel, why = accelerator()
        total = 0.0
        for it in items:
            fig = studies.STUDIES.get(it.name).figure
            console.print(f"[bold]{it.name}[/] ({fig.number})", highlight=False)
            console.print(fig.describe(), **say)
            if it.spec is None:
                console.print(f"  not run: {it.reason}", **say)
                continue
            total += estimate_s(it.spec, it.trials, accel, store)
            console.print("  " + estimate_line(it.spec, it.trials, accel, store), **say)
            console.print(f"  executor {it.spec.executor}", **say)
        console.print(f"seed {seed}: {sum(1 for i in items if i.spec)} of {len(items)} studies "
                      f"to run, about {total / 60:.0f} min in all; nothing was run.", **say)
        kind = "hardware virtualization" if accel == "kvm" else "emulation"
        console.print(f"accelerator {accel} ({kind}): {why}", **say)
        return 0
    if not args.from_store and not any(it.spec for it in items):
        raise UsageError(f"vhpc paper {seed}: no study of the seed can run here as asked (see "
                         "the lines above): change the flags they name")
    rc = 0
    # one store for every study and the page (with --from-store it must exist: never made);
    # a new one only once the first study passed its preflight, so bad input creates nothing
    check_out(args.out, existing=args.from_store)
    store = _store(args.out, existing=True) if Path(args.out, "vhpc.db").is_file() else None
    if not args.from_store:
        for it in items:
            if it.spec is None:
                continue
            console.print(f"[bold]{it.name}[/] ({it.number})")
            args.resume = None
            cmd = " ".join(shlex.quote(a) for a in sys.argv) + f" # study {it.name}"
            spec, envs = it.spec, None
            if store is None:  # the first study's checks, then the store all studies share
                spec, envs = preflight(spec)
                store = open_for(args.out, envs)
            r, _ = run_campaign(args, spec, command=cmd, store=store, envs=envs)
            rc = max(rc, r)
    path = page(seed, items, store, args.out, getattr(args, "margin", None))
    console.print(f"Seed {seed} page: [bold]{esc(path)}[/]")
    return rc
