"""What the ``vhpc`` sub-commands share: the consoles, the one-line usage error, the results
store of ``--out``, argument types and flags, the campaign progress bar, and running a campaign
from a spec (create or resume, execute, report).  The ``cli`` room dispatches to these; the
workflows (``paper``, ``diff``, ``host``, ``tune``) use them without importing the cli."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from pathlib import Path

from rich.console import Console, RenderHook
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                           SpinnerColumn, TextColumn, TimeElapsedColumn)
from rich.text import Text

from vhpc.core.errors import VhpcError
from vhpc.core.text import markup as esc
from vhpc.core.text import plain
from vhpc.workflows.estimate import dry_run_estimate

DEFAULT_OUT = "vhpc-results"

class _Plain:
    """A renderable whose text segments lose terminal escapes and control characters (the
    styles rich adds, and rich's own control segments, are kept)."""

    def __init__(self, inner):
        self.inner = inner

    def __rich_console__(self, con, options):
        from rich.segment import Segment

        for seg in con.render(self.inner, options):
            if seg.control or not seg.text:
                yield seg
            else:
                yield Segment(plain(seg.text), seg.style)


class NoForeignEscapes(RenderHook):
    """Render hook: whatever a console prints, foreign text in it (benchmark output, store
    rows, paths) reaches the terminal without its escape sequences (``ESC[2J``, OSC titles)."""

    def process_renderables(self, renderables):
        """Wrap each renderable so its text segments are stripped of escapes."""
        return [_Plain(r) for r in renderables]


def safe_console(con: Console) -> Console:
    """``con`` with :class:`NoForeignEscapes` installed; returns it."""
    con.push_render_hook(NoForeignEscapes())
    return con


# Piped output (CI logs, `| less`) gets a wide table instead of rich's 80-column default.
_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
console = safe_console(Console(width=_WIDTH))
err_console = safe_console(Console(stderr=True))


class UsageError(VhpcError):
    """A command line argparse rejects (unknown flag, missing value, bad number)."""


def _clock(seconds: float) -> str:
    """``0:05:21``: seconds as h:mm:ss."""
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class TrialClock(ProgressColumn):
    """The bar's last column: ``ETA 0:04:10`` while the trial under way is within what the
    trials before it took (the mean of those of its environment and benchmark, else of its
    environment, in this run); once it runs beyond that, or with nothing to go by, its own
    elapsed time instead (``trial 0:05:21, ≈0:00:40 expected``), and during a boot the boot's
    (``boot 0:02:33``): an ETA from the rate so far would stand still meanwhile."""

    def __init__(self, owner: "RichProgress"):
        super().__init__()
        self.owner = owner

    def render(self, task) -> Text:
        """The clock's text for ``task`` (a rich task): ``boot H:MM:SS`` while a guest boots,
        ``done`` at the end, ``ETA -:--:--`` before the first trial, the running trial's own time
        (with the expected time when known) once it runs past the expected time or no ETA is known,
        else ``ETA H:MM:SS`` from rich's estimate."""
        o, now = self.owner, time.monotonic()
        if o.stage_started is not None:
            return Text(f"boot {_clock(now - o.stage_started)}")
        if task.finished:
            return Text("done")
        if o.trial_started is None:
            return Text("ETA -:--:--")
        took, expected = now - o.trial_started, o.expected()
        if expected is None or took > expected or task.time_remaining is None:
            return Text(f"trial {_clock(took)}"
                        + (f", ≈{_clock(expected)} expected" if expected is not None else ""))
        return Text(f"ETA {_clock(task.time_remaining)}")


class RichProgress:
    """Campaign progress: a bar with done/total, elapsed time and :class:`TrialClock` (the ETA,
    or the running trial's or boot's own time); failures are printed, and a line for every
    boot or reboot of a guest (:meth:`stage`, the environments' stage hook while the campaign
    runs).  Names, parameters and benchmark output are shown as text, never read as markup.
    The bar is redrawn :data:`REFRESH_HZ` times a second by rich's thread while trials run:
    each redraw took 0.45 ms of CPU, beside the benchmark being measured."""

    #: redraws a second (rich's default is 10); the clock columns show whole seconds
    REFRESH_HZ = 2

    def __init__(self, con: Console):
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), TrialClock(self),
                            console=con, transient=False,
                            refresh_per_second=self.REFRESH_HZ)
        self.task = None
        self.trial_started: float | None = None
        self.stage_started: float | None = None
        self.stage_what: str | None = None
        self.row = None
        #: (environment, benchmark) → seconds of the trials finished in this run
        self.took: dict[tuple[str, str], list[float]] = {}

    def start(self, total, done):
        """Show the bar: ``total`` trials, ``done`` of them already finished (a resumed campaign)."""
        self.bar.start()
        self.task = self.bar.add_task("trials", total=total, completed=done)

    def _describe(self, row) -> str:
        kind = "warm-up" if row.warmup else f"round {row.round}"
        return f"{row.environment} {row.benchmark} ({kind})"

    def trial(self, row):
        """Trial ``row`` starts: the bar names its environment, benchmark and round (or warm-up),
        and its clock starts."""
        self.row, self.trial_started, self.stage_started = row, time.monotonic(), None
        self.bar.update(self.task, description=esc(self._describe(row)))

    def expected(self) -> float | None:
        """Seconds the trial under way may take: the mean of this run's finished trials of its
        environment and benchmark, else of its environment; None before any."""
        if self.row is None:
            return None
        mine = self.took.get((self.row.environment, self.row.benchmark)) or [
            d for (e, _), ds in self.took.items() if e == self.row.environment for d in ds]
        return sum(mine) / len(mine) if mine else None

    def stage(self, env: str, what: str) -> None:
        """An environment's stage (a guest's boot or reboot, or its end: ``what`` starting
        with "ready"): the bar's description and clock follow it until the guest is ready,
        then a line of its own says it ("vm: reboot (session 2) of the guest: ready after
        10 s")."""
        if what.startswith("ready"):
            self.bar.console.print(f"{env}: {self.stage_what or 'boot'}: {what}", markup=False,
                                   highlight=False)
            self.stage_started = self.stage_what = None
            if self.row is not None:
                self.bar.update(self.task, description=esc(self._describe(self.row)))
                self.trial_started = time.monotonic()  # the trial's own time starts now
            return
        self.stage_started, self.stage_what = time.monotonic(), what
        self.bar.update(self.task, description=esc(f"{env}: {what}"))

    def grow(self, n):
        """Adaptive repeats added ``n`` trials: the bar's total grows by ``n`` and a line says why."""
        self.bar.update(self.task, total=self.bar.tasks[0].total + n)
        self.bar.console.print(f"adaptive repeats: adding a round ({n} trials) to reach the "
                               "target precision")

    def finished(self, row, status, note):
        """Trial ``row`` ended with ``status``: its time (seconds) joins :attr:`took`, the bar
        advances, and a non-empty ``note`` is printed as one yellow line (its first line, 160
        characters at most)."""
        if self.trial_started is not None:
            self.took.setdefault((row.environment, row.benchmark), []).append(
                time.monotonic() - self.trial_started)
        self.trial_started = self.stage_started = None
        self.bar.advance(self.task)
        if note:
            first = (plain(note).splitlines() or [""])[0][:160]
            self.bar.console.print(f"{row.environment} {row.benchmark}: {status}: {first}",
                                   style="yellow", markup=False, highlight=False)

    def stop(self):
        """Stop redrawing the bar and leave its last state on the terminal."""
        self.bar.stop()


from vhpc.core import argtypes  # noqa: E402  the one typed parser of flags
from vhpc.core.argtypes import count  # noqa: E402,F401  re-exported: diff and the flags take count from here


def open_store(out: str, existing: bool = False):
    """The store of results folder ``out`` (created if missing; with ``existing``, as for
    read-only commands, it must exist and nothing is created).  Raises StoreError (one line)
    when ``out`` is not a folder, holds no store (``existing``) or a file that is not a vhpc
    store, or cannot be created or opened."""
    from vhpc.store import Store

    return Store(Path(out) / "vhpc.db", existing=existing)


def check_out(out: str, existing: bool = False) -> None:
    """Check that ``out`` can hold a store (:meth:`vhpc.store.Store.check`), creating nothing:
    the first step of a command that will write one, before its preflight."""
    from vhpc.store import Store

    Store.check(Path(out) / "vhpc.db", existing)


def preflight(spec) -> tuple:
    """Everything a new campaign checks before it is stored (nothing is created or started):
    the host check and environments (:func:`vhpc.campaign.execute.prepare`), each
    environment's preflight (its note printed), the executor's preflight, the compute nodes'
    hugepages, the kernels built (or a missing tool named) and the problem sizes a benchmark
    probes (:func:`vhpc.campaign.execute.sized`).  Returns (the sized spec, the environments
    by name); they are closed again when a check fails, which raises its VhpcError."""
    from vhpc import executors
    from vhpc.campaign import execute, likewise

    envs = execute.prepare(spec)  # host checks and environments, before anything is stored
    try:
        for env in envs.values():
            with preparing(env):  # an image: checked, its kernel copied out, booted once
                env.preflight()  # ssh: the host answers and accepts the key
            if getattr(env, "preflight_note", ""):  # what cannot run as asked: before the run
                err_console.print(f"vhpc: {plain(env.preflight_note)}", highlight=False,
                                  markup=False, soft_wrap=True)
        executors.make(spec.executor).preflight()  # slurm: commands installed, controller up
        likewise.check_app_versions(spec, envs)  # LAMMPS x against LAMMPS y is no overhead
        _refuse_node_hugepages(spec)
        execute.kernel_dirs(spec)  # kernels built (or a missing tool named) before storing
        spec = execute.sized(spec, lambda m: err_console.print(  # gromacs steps=auto: probed
            f"vhpc: {plain(m)}", highlight=False, markup=False, soft_wrap=True))
    except BaseException:
        _close(envs)
        raise
    return spec, envs


#: seconds a preparation must take before its end is said in a line of its own
SAID_AFTER_S = 2.0


@contextlib.contextmanager
def preparing(env, con: Console | None = None):
    """Around an environment's preflight: for one that boots a user's image (``image=``), a
    spinner with the elapsed time from the first second, naming each stage as the environment
    begins it (:meth:`~vhpc.environments.base.Environment.stage`: the image checked, its
    kernel copied out, the first boot, minutes under TCG), a line with each stage's time once
    it took :data:`SAID_AFTER_S` or more, and one with the whole time; nothing for the others
    (their preflight is quick).  Exceptions pass through."""
    image = getattr(getattr(env, "options", None), "image", None)
    if not image:
        yield
        return
    con = con or err_console
    first = (f"preparing image {Path(str(image)).name} (its guests boot on the compute nodes "
             "at the first trial)" if getattr(env, "spread", False) else
             f"preparing image {Path(str(image)).name}")
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                   console=con, transient=True)
    start = time.monotonic()
    current = [first, start]  # the stage under way and when it began

    def said(now: float) -> None:
        took = now - float(current[1])
        if took >= SAID_AFTER_S:
            bar.console.print(f"{env.name}: {current[0]}: {took:.0f} s", highlight=False,
                              markup=False, soft_wrap=True)

    def stage(what: str) -> None:
        if what.startswith("ready"):  # the boot's end: said with the whole time below
            return
        now = time.monotonic()
        said(now)
        current[:] = [what, now]
        bar.update(task, description=esc(f"{env.name}: {what}"))

    with bar:
        task = bar.add_task(esc(f"{env.name}: {first}"), total=None)
        env.stage_hook = stage
        try:
            yield
        finally:
            env.stage_hook = None
    end = time.monotonic()
    said(end)
    if end - start >= SAID_AFTER_S:
        con.print(f"{env.name}: ready after {end - start:.0f} s", highlight=False,
                  markup=False, soft_wrap=True)


def _close(envs: dict) -> None:
    for env in envs.values():
        env.close()


def open_for(out: str, envs: dict):
    """:func:`open_store` of ``out`` for a campaign whose environments ``envs`` (from
    :func:`preflight`) passed their checks; they are closed when it fails."""
    try:
        return open_store(out)
    except BaseException:
        _close(envs)
        raise


#: argparse type of ``--margin``: ``"5%"`` or ``"5"`` → 0.05, from 0 to below 100 %, the range
#: a campaign file's ``margin:`` takes too (:func:`vhpc.core.argtypes.percent`)
percent = argtypes.percent(0, 100, hi_open=True)



def margin_flag(sp, intervals: bool = True) -> None:
    """``--margin PCT``: the equivalence margin of the verdicts, and (``intervals``) the
    ``--intervals`` a family's rows show (docs/statistics.md)."""
    sp.add_argument("--margin", type=percent, metavar="PCT",
                    help="equivalence margin of the verdicts: a ratio whose whole interval "
                         "lies within ±PCT is 'equivalent' (default: the campaign's, 5%%)")
    if not intervals:
        return
    sp.add_argument("--intervals", choices=("holm", "simultaneous"),
                    help="holm (default): a family's slower/faster at Holm's level, the rest "
                         "at 1 − α/m; simultaneous: every row at 1 − α/m (Bonferroni), "
                         "intervals that hold together")
    sp.add_argument("--method", choices=("log-welch", "rank"),
                    help="log-welch (default): Welch's t on ln values; rank: Hodges–Lehmann "
                         "ratio with the Mann–Whitney interval on ln values (no normality "
                         "assumed; needs more runs: at 95 %% at least 4 a side)")


#: the family-wise significance level the verdicts use (vhpc.analysis.Analysis.alpha)
ALPHA = 0.05


def rank_runs_note(spec, method: str | None = None) -> str | None:
    """What ``--method rank`` (``method``, else the spec's) cannot give with ``spec``'s runs,
    said before they are spent: the Mann–Whitney interval needs
    :func:`vhpc.core.stats.rank_min_runs` runs a side at 1 − α (4 at 95 %), and at 1 − α/m
    for the m primary metrics (one per benchmark and non-baseline environment, one Holm
    family: the level of a row that is not called slower/faster); with fewer, such rows get
    no interval and read ``inconclusive``.  None when the runs suffice or the method is
    log-welch."""
    from vhpc.core import stats

    if spec is None or (method or spec.method) != "rank":
        return None
    m = len(spec.benchmarks) * max(1, len(spec.environments) - 1)
    need = stats.rank_min_runs(1 - ALPHA)
    family = stats.rank_min_runs(1 - ALPHA / m)
    if need is None or family is None or spec.repeats >= family:
        return None
    at = f"{(1 - ALPHA / m) * 100:.4g} %"
    family_text = f"{at} (1 − α/m, m = {m} primary metrics)"
    if spec.repeats < need:
        why = (f"{spec.repeats} run(s) a side give no interval: it needs ≥ {need} a side at "
               f"{(1 - ALPHA) * 100:g} %" + (f", ≥ {family} at {family_text}" if m > 1 else "")
               + "; every verdict would read inconclusive")
    else:
        why = (f"{spec.repeats} runs a side give no interval at {family_text}, the level of a "
               f"row not called slower/faster (it needs ≥ {family}): such a row would read "
               "inconclusive")
    return f"--method rank: {why}; use --repeats {family} or more, or --method log-welch"


def with_margin(spec, margin: float | None, intervals: str | None = None,
                method: str | None = None):
    """``spec`` with its equivalence margin set to ``margin`` (a fraction), its ``intervals``
    and its ``method`` (None keeps each)."""
    update = {k: v for k, v in (("margin", margin), ("intervals", intervals),
                                ("method", method)) if v is not None}
    if spec is None or not update:
        return spec
    return spec.model_copy(update=update)


def campaign_flags(sp, starts=False):
    """--out; with ``starts`` (compare, run, study: the commands that start a campaign and
    report it), also --dry-run, --no-report and --margin."""
    sp.add_argument("--out", default=DEFAULT_OUT, type=argtypes.path_arg,
                    help="results directory (default: %(default)s)")
    if starts:
        margin_flag(sp)
        sp.add_argument("--dry-run", action="store_true",
                        help="print the planned trials (round, environment, benchmark with "
                             "its parameters, placement) and start nothing")
        sp.add_argument("--no-report", action="store_true",
                        help="store the results and write no report (scripted sweeps: "
                             "'vhpc report ID' writes it later, from the store)")


def spec_from_flags(args):
    """The campaign of ``vhpc compare``'s flags (an argparse namespace): ``-b`` or the quick suite,
    ``-e`` or :func:`vhpc.spec.parse.default_environments`, and the repeat, timeout (seconds),
    order, protocol and host-knob flags (:func:`vhpc.spec.parse.from_cli`).  Raises SpecError for
    values it refuses."""
    from vhpc.benchmarks import quick_suite
    from vhpc.spec import parse as specmod

    return specmod.from_cli(args.bench or quick_suite(),
                            args.env or list(specmod.default_environments()),
                            strict_placement=args.strict_placement,
                            target_ci=args.target_ci,
                            max_repeats=args.max_repeats, repeats=args.repeats,
                            warmup=args.warmup, baseline=args.baseline, timeout=args.timeout,
                            order=args.order, protocol=args.protocol,
                            session_trials=args.session_trials, host_knobs=args.host_knob,
                            executor=getattr(args, "executor", None))

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


def _refuse_node_hugepages(spec) -> None:
    """Raise HostError (one line naming the node) when compute nodes of ``spec``'s executor
    cannot back its guests with the hugepages they ask for
    (:func:`node_hugepage_refusal`); nothing on the local executor, whose
    guests' hugepages are checked on this host."""
    if spec.executor.part.runs_here:
        return
    from vhpc.core.errors import HostError

    why = node_hugepage_refusal(spec)
    if why:
        raise HostError(f"executor {spec.executor}: {why}")


def dry_run(spec, out: str | None = None, args=None) -> int:
    """Print the plan of ``spec`` with placements on this host and, with ``out`` (the results
    folder, whose store's past trials it reads), how long it may take; start nothing.
    ``args``: the command's flags, whose ``--margin``, ``--intervals`` and ``--method`` apply
    as they would to the run (a rank method's runs are checked here too).  The environments'
    own inputs are checked as a real run checks them (a user's image:
    :meth:`~vhpc.environments.kind.EnvironmentKind.dry_check`).  Raises their VhpcError."""
    from vhpc.campaign import execute
    from vhpc.report import console as views

    if args is not None:
        spec = with_margin(spec, getattr(args, "margin", None), getattr(args, "intervals", None),
                           getattr(args, "method", None))

    _refuse_node_hugepages(spec)
    execute.refuse_lacking(spec)
    note = rank_runs_note(spec)
    if note:
        err_console.print(f"vhpc: {note}", highlight=False, markup=False, soft_wrap=True)
    plans = execute.placements(spec, execute.host_facts())
    if spec.executor.part.runs_here:  # on compute nodes their own files are checked there
        for e in spec.environments:  # what the real run checks before its first trial
            e.part.dry_check(e.options)
    views.dry_run(console, spec, execute.plan(spec), {n: p.text for n, p in plans.items()})
    if out is not None:
        console.print(dry_run_estimate(spec, out), highlight=False, markup=False)
    return 0


def run_campaign(args, spec=None, command: str | None = None, store=None,
                 envs: dict | None = None) -> tuple[int, str]:
    """Create (or resume, ``--resume``) and execute a campaign, then report it (with
    ``--no-report``: print the ``vhpc report`` command instead); returns (exit status: 1 when
    a trial failed, campaign id).  ``command``: stored instead of this process's argv;
    ``store``: the store of ``args.out`` when the caller holds it already (``vhpc paper``);
    ``envs``: the environments of ``spec`` when the caller ran :func:`preflight` already
    (``spec`` is then the spec it returned).
    A new campaign's checks all run before a store is created or written."""
    from vhpc.campaign import execute
    from vhpc.report import console as views

    spec = with_margin(spec, getattr(args, "margin", None), getattr(args, "intervals", None),
                       getattr(args, "method", None))
    if args.resume:
        store = store or open_store(args.out, existing=True)
        cid = args.resume
        store.campaign(cid)  # raises StoreError for an unknown id
        store.check_not_owned(cid)  # another live vhpc runs it: refuse before printing anything
        console.print(f"Resuming campaign [bold]{esc(cid)}[/]")
    else:
        if store is None:
            check_out(args.out)  # a bad --out before the preflight's minutes
        note = rank_runs_note(spec)
        if note:  # before the runs are spent
            err_console.print(f"vhpc: {note}", highlight=False, markup=False, soft_wrap=True)
        if envs is None:  # bad input is refused here, before any store exists
            spec, envs = preflight(spec)
        store = store or open_for(args.out, envs)
        cid = execute.create(store, spec, command or " ".join(shlex.quote(a) for a in sys.argv))
        console.print(f"Campaign [bold]{esc(cid)}[/]: {len(spec.benchmarks)} benchmark(s) × "
                      f"{len(spec.environments)} environment(s) × {spec.warmup}+{spec.repeats} "
                      f"rounds\n  stored in {esc(args.out)}/")  # a path of its own: no wrap
    progress = RichProgress(console)
    try:
        counts = execute.execute(store, cid, progress, envs=envs, spec=spec,
                                  notify=lambda m: err_console.print(
                                      f"vhpc: {plain(m)}", highlight=False, markup=False,
                                      soft_wrap=True))
    except KeyboardInterrupt:
        progress.stop()
        done = len(store.trials(cid, "done")) + len(store.trials(cid, "failed"))
        err_console.print(f"vhpc: interrupted; {done} trials are stored. Resume with: "
                          f"vhpc compare --resume {cid} --out {plain(args.out)}", markup=False,
                          highlight=False)
        return 130, cid
    finally:
        progress.stop()
    failed = counts.get("failed", 0)
    if getattr(args, "no_report", False):  # the analysis and figures: seconds a campaign
        console.print(f"Stored{f' ({failed} failed trials)' if failed else ''}; no report "
                      f"(--no-report): vhpc report {esc(cid)} --out {esc(args.out)}",
                      highlight=False)
    else:
        views.campaign_report(store, cid, args.out, console,
                              margin=getattr(args, "margin", None))
    return (1 if failed else 0), cid
