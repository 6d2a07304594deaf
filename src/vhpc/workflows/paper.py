"""A seed paper's evaluation at once (``vhpc paper SEED``): every study of the seed, in the
paper's figure order, run as campaigns (or taken from the store with ``--from-store``) and
presented on one page with the figures and the paper-found / this-host lines.

:func:`plan` builds each study's spec on this host with the studies' own planner
(:func:`vhpc.campaign.studies.build`, the executor and host knobs passed through); a study this
host cannot run as the paper did is kept with its reason (refused, in one line each, before
anything runs: a study across nodes without ``--executor``, 2 MiB-backed guests without
hugepages). :func:`vhpc.workflows.estimate.estimate` says how long a study's trials may take
here (``vhpc study --dry-run`` prints the same estimate), and :func:`page` writes
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
from vhpc.workflows import parts
from vhpc.workflows.common import node_hugepage_refusal
from vhpc.workflows.estimate import accelerator, estimate, estimate_line, fmt_duration

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




def plan(seed: str, topology, overrides: dict[str, list[str]], **protocol: Any) -> list[Item]:
    """The seed's studies on ``topology``; ``overrides``: study → ``-b`` items; ``protocol``:
    repeats, warmup, timeout (seconds per trial), ``executor`` and ``host_knobs`` as ``vhpc study``
    takes them, passed to every study.  Raises StudyError when no study reproduces ``seed``, naming
    the seeds that have one."""
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
            execute.refuse_lacking(spec)  # linpack without LAPACKE: the other studies run
            item.reason = _refusal(s, spec, executor)
            if item.reason is None:
                item.spec = spec
                item.trials = execute.plan(spec)
        except VhpcError as exc:
            item.reason = " ".join(str(exc).split())
        items.append(item)
    return items


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
    from vhpc.core.argtypes import path_arg

    pp = sub.add_parser("paper", help="all studies of one seed paper, run and shown on one page")
    pp.add_argument("seed", help="seed number: 000, 001, 003 or 004")
    pp.add_argument("-b", "--bench", action="append", metavar="STUDY=BENCH[:k=v,...]",
                    help=parts.bench_help("replace a study's benchmarks, e.g. "
                                          "linpack=linpack:n=200"))
    parts.study_protocol_flags(pp, "every study's")
    pp.add_argument("--executor", metavar=parts.executor_metavar(),
                    help="passed to every study; a study across nodes (seed 004's scaling) "
                         "needs slurm:nodes=N and is refused without it")
    pp.add_argument("--host-knob", action="append", metavar="NAME=VALUE",
                    help="passed to every study, e.g. hugepages_2m=1024 for the paging study")
    pp.add_argument("--study", action="append", metavar="NAME",
                    help="run (and show) only this study of the seed; repeatable "
                         "(default: all of them; --dry-run lists their names)")
    pp.add_argument("--from-store", action="store_true",
                    help="run nothing: the page from each study's newest stored campaign")
    pp.add_argument("--out", default="vhpc-results", type=path_arg,
                    help="results directory (default: %(default)s)")
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
    did is named in one line before anything runs.  Returns the exit status.  Raises
    UsageError for a ``-b`` study that is not the seed's, or when no study of the seed can run
    here as asked."""
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
        from vhpc.workflows.common import err_console, rank_runs_note

        planned = next((it.spec for it in items if it.spec is not None), None)
        note = rank_runs_note(planned, getattr(args, "method", None))
        if note:  # before the runs are spent (every study shares the repeats)
            err_console.print(f"vhpc paper {seed}: {note}", **say)
        for it in items:  # before anything runs
            if it.spec is None:
                console.print(f"vhpc paper {seed}: will not run {it.name}: {it.reason}", **say)
            elif it.note:
                console.print(f"vhpc paper {seed}: {it.name} runs reduced: {it.note}", **say)
    if args.dry_run:
        store = _store(args.out, existing=True) if Path(args.out, "vhpc.db").is_file() else None
        accel, why = accelerator()
        total, low, high = 0.0, 0.0, 0.0
        for it in items:
            fig = studies.STUDIES.get(it.name).figure
            console.print(f"[bold]{it.name}[/] ({fig.number})", highlight=False)
            console.print(fig.describe(), **say)
            if it.spec is None:
                console.print(f"  not run: {it.reason}", **say)
                continue
            e = estimate(it.spec, it.trials, accel, store)
            total, low, high = total + e.seconds, low + e.low, high + e.high
            console.print("  " + estimate_line(it.spec, it.trials, accel, store, e), **say)
            console.print(f"  executor {it.spec.executor}", **say)
        console.print(f"seed {seed}: {sum(1 for i in items if i.spec)} of {len(items)} studies "
                      f"to run, about {fmt_duration(total)} in all ({fmt_duration(low, high)}); "
                      "nothing was run.", **say)
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
