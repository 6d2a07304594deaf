"""``vhpc tune``: the command-line face of the race (flags, dry-run listing, printing).

Exit status as every vhpc command: 0 done, 2 bad input (one line), 130 interrupted (resume
with ``vhpc tune --resume ID``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vhpc.core.paths import write_atomic
from vhpc.core.text import markup as esc
from vhpc.workflows import parts

__all__ = ["add_parser", "cmd_tune"]


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``tune`` sub-command to an argparse sub-parsers object."""
    from vhpc.core.argtypes import count, number, path_arg, percent  # ranged, ASCII digits only
    from vhpc.environments.options import MAX_SECONDS

    t = sub.add_parser("tune", help="race candidate VM placements and recommend the cheapest "
                       "(docs/tune.md)")
    t.add_argument("-b", "--bench", action="append", metavar="BENCH[:k=v,...]",
                   help=parts.bench_help("the workload (repeatable)"))
    t.add_argument("--vcpus", type=count(1, 4096), default=2, help="vCPUs of the VM (default %(default)s)")
    t.add_argument("--memory", type=count(1, 1 << 24), default=1024, help="MiB of the VM (default %(default)s)")
    t.add_argument("--candidates", action="append", metavar="NAME[,NAME...]",
                   help="race only these candidates (names as --dry-run lists them)")
    t.add_argument("--budget", type=count(1, 1_000_000), default=60,
                   help="most trials in all, native and warm-up included (default %(default)s)")
    t.add_argument("--alpha", type=number(0, 0.5, lo_open=True, hi_open=True), default=0.05, help="test level (default %(default)s)")
    t.add_argument("--tolerance", type=percent(0, 100, lo_open=True, hi_open=True), default=0.02,
                   metavar="PCT", help="equivalence margin in %% of cost, e.g. 2%% (default 2%%)")
    t.add_argument("--min-rounds", type=count(2, 10000), default=3,
                   help="measured rounds before the first elimination (default %(default)s)")
    t.add_argument("--warmup", type=count(0, 1000), default=1, help="warm-up rounds (default %(default)s)")
    t.add_argument("--timeout", type=number(0, MAX_SECONDS, lo_open=True), help="seconds per trial (default 600)")
    t.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto")
    t.add_argument("--host-knob", action="append", metavar="NAME=VALUE",
                   help="as for compare; hugepages_2m=N adds the 2m-backed candidates")
    t.add_argument("--topology", help="hwloc XML or synthetic description (with --dry-run)")
    t.add_argument("--dry-run", action="store_true", help="list the candidates, run nothing")
    t.add_argument("--json", metavar="FILE", help="also write the result as JSON here")
    t.add_argument("--resume", metavar="ID", help="continue an interrupted race")
    t.add_argument("--out", default="vhpc-results", type=path_arg,
                   help="results directory (default %(default)s)")
    t.set_defaults(func=cmd_tune)
    return t


def _check(args) -> None:
    from vhpc.workflows.tune.candidates import TuneError

    if not args.resume and not args.bench:
        raise TuneError("give the workload with -b BENCH (e.g. -b stream), or --resume ID")
    if args.topology and not args.dry_run:
        raise TuneError("--topology describes another machine: add --dry-run to list its "
                        "candidates (races run on this host)")
    if not 0 < args.alpha < 0.5:
        raise TuneError(f"--alpha {args.alpha}: give a level between 0 and 0.5, e.g. 0.05")
    if not 0 < args.tolerance < 1:
        raise TuneError(f"--tolerance {args.tolerance * 100:g}%: give a percentage between 0 "
                        "and 100, e.g. 2%")
    if args.min_rounds < 2 or args.warmup < 0 or args.budget < 1:
        raise TuneError("--min-rounds must be at least 2, --warmup at least 0 and --budget at least 1")


def _candidates(args, topo):
    """(candidates, skipped, listed-only) for the flags on ``topo``."""
    from vhpc import benchmarks
    from vhpc.host.facts import read_hugepages
    from vhpc.environments.kind import BASELINE, kind_name
    from vhpc.spec.parse import from_cli
    from vhpc.workflows.tune import candidates as cm

    parsed = from_cli(args.bench, [kind_name(BASELINE)], host_knobs=args.host_knob)
    mpi = all(cm.is_mpi(benchmarks.get(b.name), benchmarks.get(b.name).resolve(b.params))
              for b in parsed.benchmarks)
    knob = any(k.startswith("hugepages_2m") for k in parsed.host_knobs)
    offer = cm.HostOffer(free_hugepages={} if args.topology else read_hugepages(),
                         hugepages_knob=knob, vcluster=True)
    cands, skipped = cm.generate(topo, args.vcpus, args.memory, offer, mpi=mpi)
    cands = _accepted(cands, skipped, parsed, args)
    if args.candidates:
        cands = cm.restrict(cands, [w for c in args.candidates for w in c.split(",") if w.strip()])
    return cands, skipped


def _accepted(cands, skipped, parsed, args):
    """The candidates whose environment ``vhpc compare`` accepts on this host (or on
    ``--topology``): each is checked as a campaign's environments are before it is stored
    (:func:`vhpc.campaign.execute.placements`: more memory than the host has, pins it lacks);
    the others are added to ``skipped`` with the reason.  Never offers what a race would
    store and then refuse."""
    from vhpc.campaign import execute
    from vhpc.core.errors import VhpcError
    from vhpc.spec.parse import campaign, env
    from vhpc.workflows.tune.candidates import Skipped

    host = execute.host_facts(args.topology)
    out = []
    for c in cands:
        try:
            execute.placements(campaign(list(parsed.benchmarks),
                                        [env(c.kind, c.env, **c.options(args.memory))]), host)
        except VhpcError as exc:
            skipped.append(Skipped(c.name, " ".join(str(exc).split())))
            continue
        out.append(c)
    return out


def _dry_run(con: Console, topo, cands, skipped, args) -> int:
    from vhpc.host import counters

    con.print(f"topology: {topo.summary()} ({topo.source})", highlight=False, markup=False)
    con.print(f"{len(cands)} candidate(s) for {args.vcpus} vCPUs, {args.memory} MiB "
              "(equivalent placements collapsed, '=' lists the same placement's other names):",
              highlight=False, markup=False)
    from vhpc.workflows.tune.output import candidate_lines

    for line in candidate_lines(cands):
        con.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    for s in skipped:
        con.print(f"  not a candidate: {s.name}: {s.reason}", highlight=False, markup=False,
                  soft_wrap=True)
    ok, why = counters.perf_status()
    con.print("prior: MPKI from native trials' counters orders the candidates" if ok else
              f"prior: none ({why}): all candidates would be raced in listing order",
              highlight=False, markup=False)
    runnable = [c for c in cands if c.runnable]
    first = (args.warmup + args.min_rounds) * (len(runnable) + 1) * len(args.bench)
    con.print(f"race: {len(runnable)} candidate(s) + native; the first {first} trials are the "
              f"warm-up and {args.min_rounds} rounds; budget {args.budget}. Nothing was run.",
              highlight=False, markup=False)
    return 0


def _new_race(args, con):
    """Check the candidates and the campaign as compare would, then open the store and start
    the race; returns (campaign id, definition, store, environments by name).  Nothing is
    stored (no store is created) when a check fails."""
    from vhpc import topology
    from vhpc.placement import PlacementError, PlacementRequest, place
    from vhpc.workflows.tune import run as runmod
    from vhpc.workflows.tune.candidates import TuneError
    from vhpc.workflows.tune.race import Settings
    from vhpc.workflows.common import check_out, open_for, preflight

    topo = topology.load(None)
    cands, skipped = _candidates(args, topo)
    racing = [c for c in cands if c.runnable]
    for c in cands:
        if not c.runnable:
            con.print(f"not raced: {c.name}: {c.note}", highlight=False, markup=False)
    if not racing:
        raise TuneError("no runnable candidate: list them with --dry-run and pick with --candidates")
    try:
        compact = place(topo, PlacementRequest(vcpus=args.vcpus, memory_mib=args.memory,
                                               policy="compact"))
        native_cpus = compact.pcpus
    except PlacementError:
        native_cpus = None
    settings = Settings(alpha=args.alpha, tolerance=args.tolerance, budget=args.budget,
                        min_rounds=args.min_rounds, candidates=tuple(c.env for c in racing))
    d = runmod.Definition(args.vcpus, args.memory, f"{topo.summary()} ({topo.source})",
                          tuple(racing), settings, args.warmup)
    spec = runmod.build_spec(args.bench, d, native_cpus, args.host_knob, args.timeout, args.accel)
    runmod.check_budget(spec, d)
    check_out(args.out)  # a bad --out, then compare's checks: bad input creates no store
    spec, envs = preflight(spec)
    store = open_for(args.out, envs)
    cid = runmod.start(store, spec, d, args.out, " ".join(shlex.quote(a) for a in sys.argv))
    con.print(f"Race [bold]{esc(cid)}[/]: {len(racing)} candidate(s) + native, budget {args.budget} "
              f"trials → {esc(args.out)}/")
    return cid, d, store, envs


def _round_printer(con, d):
    seen: set[int] = set()

    def show(st) -> None:
        from vhpc.workflows.tune.output import status_text

        for r in st.rounds:
            if r.round in seen:
                continue
            seen.add(r.round)
            parts = [f"{d.candidate(x.env).name} {x.ratio:.3f} {status_text(x)}"
                     for x in r.standings if x.ratio is not None and
                     (x.status != "eliminated" or x.round == r.round)]
            con.print(f"round {r.round}: " + "; ".join(parts), highlight=False, markup=False)
    return show


class _Progress:
    """Trial progress for :func:`vhpc.campaign.execute`: a rich bar whose total grows by one
    round at a time (the race decides each next round); failures are printed."""

    def __init__(self, con: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=con)
        self.task = None

    def start(self, total, done):
        self.bar.start()
        self.task = self.bar.add_task("trials", total=total, completed=done)

    def trial(self, row):
        self.bar.update(self.task, description=esc(f"{row.environment} {row.benchmark} round {row.round}"))

    def grow(self, n):
        self.bar.update(self.task, total=self.bar.tasks[0].total + n)

    def finished(self, row, status, note):
        self.bar.advance(self.task)
        if note:
            self.bar.console.print(f"{row.environment} {row.benchmark}: {status}: "
                                   f"{note.splitlines()[0][:160]}", highlight=False, markup=False)

    def stop(self):
        self.bar.stop()


def _progress(con):
    return _Progress(con)


def _race(args):
    """(store, definition) of the race ``args.resume`` in ``args.out``.  Raises StoreError for
    an unknown id and TuneError for a campaign that is not a race (``vhpc compare --resume``)."""
    from vhpc.store import Store
    from vhpc.workflows.tune import run as runmod

    store = Store(Path(args.out) / "vhpc.db", existing=True)
    store.campaign(args.resume)  # a valid id of this store before it names a folder
    return store, runmod.load(args.out, args.resume)


def _dry_resume(con: Console, args) -> int:
    """``vhpc tune --dry-run --resume ID``: the stored race's candidates, nothing run."""
    from vhpc.workflows.tune.output import candidate_lines

    _, d = _race(args)
    con.print(f"race {args.resume} on {d.topology}: {len(d.candidates)} candidate(s) for "
              f"{d.vcpus} vCPUs, {d.memory_mib} MiB; vhpc tune --resume {args.resume} "
              "continues it:", highlight=False, markup=False, soft_wrap=True)
    for line in candidate_lines(d.candidates):
        con.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    return 0


def cmd_tune(args) -> int:
    """Run ``vhpc tune`` (see :func:`add_parser`); returns the exit status."""
    from vhpc import topology
    from vhpc.workflows.tune import run as runmod

    from vhpc.workflows.common import safe_console

    con = safe_console(Console(width=None if sys.stdout.isatty() else 160))
    _check(args)
    if args.dry_run and args.resume:  # the stored race, checked as a resume checks it
        return _dry_resume(con, args)
    if args.dry_run:
        topo = topology.load(args.topology)
        cands, skipped = _candidates(args, topo)
        return _dry_run(con, topo, cands, skipped, args)
    if args.resume:
        store, d = _race(args)
        cid = args.resume
        con.print(f"Resuming race [bold]{esc(cid)}[/]")
        envs = None
    else:
        cid, d, store, envs = _new_race(args, con)
    show = _round_printer(con, d)
    progress = _progress(con)
    try:
        st = runmod.run(store, cid, d, progress=progress, envs=envs, on_round=show)
    except KeyboardInterrupt:
        if progress is not None:
            progress.stop()
        con.print(f"vhpc: interrupted; the trials so far are stored. Resume with: "
                  f"vhpc tune --resume {cid} --out {args.out}", highlight=False, markup=False)
        return 130
    if progress is not None:
        progress.stop()
    show(st)
    print_result(con, store, cid, d, st, args.out, args.json)
    return 0


def print_result(con: Console, store, cid: str, d, st, out: str, json_path: str | None) -> None:
    """The table, recommendation, XML, QEMU args and flavor specs; JSON and HTML files."""
    from vhpc.workflows.tune import output, race, run as runmod

    intensity, prior_text = runmod.prior(store.trials(cid), d.settings.baseline)
    rec = output.recommend(d, st, intensity)
    emulated = output.emulated(store, cid)
    table = Table(title=esc(f"vhpc tune {cid}: {st.reason}"))
    obs = store.observations(cid)
    per = {e: race.per_benchmark(obs, d.settings.baseline, e) for e in d.settings.candidates}
    benches = sorted({b for v in per.values() for b in v})
    benches = benches if len(benches) > 1 else []  # one benchmark: the combined column says it
    for col in ("candidate", *benches, "ratio to native [95 % CI]", "status"):
        table.add_column(col)
    for e in race.order_by_prior(d.settings.candidates, lambda e: d.candidate(e).local, intensity):
        x = st.standings[e]
        cells = [output.ratio_text(*per[e].get(b, (None, None))) for b in benches]
        table.add_row(esc(d.candidate(e).name), *map(esc, cells), esc(output.ratio_text(x.ratio, x.ci)),
                      esc(output.status_text(x)))
    con.print(table)
    con.print(f"ratio: geometric mean over rounds of candidate/native (same round), 95 % CI; "
              f"eliminated: Welch t-test on the per-round log ratios vs the leader, Holm-adjusted "
              f"p < {d.settings.alpha:g}; equivalent: TOST within ±{d.settings.tolerance:.1%}",
              highlight=False, markup=False)
    if emulated:
        con.print(output.EMULATED, style="yellow", highlight=False, markup=False)
    con.print(prior_text, highlight=False, markup=False)
    folder = Path(out) / cid
    if rec is not None:
        c = rec.candidate
        con.print(f"Recommendation: {c.name} — {rec.confidence}", highlight=False, markup=False)
        for x in output.exports(c):  # a document below its title, arguments on its line
            sep = "\n" if isinstance(x.value, str) else " "
            con.print(f"{x.title}:{sep}{x.text}", highlight=False, markup=False)
        con.print("OpenStack flavor extra specs: " + " ".join(
            f"{k}={v}" for k, v in output.flavor_specs(c).items()), highlight=False, markup=False)
    else:
        con.print("No recommendation: no candidate produced valid results (see vhpc report "
                  f"{cid} --out {out})", highlight=False, markup=False)
    data = output.to_json(d, st, rec, prior_text, cid, emulated)
    for row in data["candidates"]:
        row["per_benchmark"] = {b: {"ratio": r, "ci": list(c) if c else None}
                                for b, (r, c) in per[row["environment"]].items()}
    for path in filter(None, [folder / "tune-result.json", json_path]):
        write_atomic(path, json.dumps(data, indent=1))
    page = output.write_html(folder / "tune.html",
                             output.html_section(d, st, rec, prior_text, emulated=emulated), cid)
    con.print(f"Report: {page} (JSON: {folder / 'tune-result.json'}; vhpc report {cid} "
              "re-analyses every trial)", highlight=False, markup=False)
