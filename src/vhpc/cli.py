"""The ``vhpc`` command.  Thin: parses arguments, calls the rooms, prints.

Exit status: 0 success, 1 campaign finished with failed trials, 2 bad input (one-line error
saying what to change), 130 interrupted (everything measured so far is stored; resume with
``vhpc compare --resume ID``).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
from pathlib import Path

from vhpc import __version__
from vhpc.core import plugin_metadata  # noqa: F401 - first: before any pydantic model
from vhpc.core import argtypes
from vhpc.core.argtypes import count, number, percent
from vhpc.environments.options import MAX_SECONDS
from vhpc.core.errors import SpecError, VhpcError
from vhpc.core.text import markup as esc
from vhpc.environments.kind import KINDS
from vhpc.benchmarks import quick_suite
from vhpc.workflows import parts
from vhpc.workflows.common import (UsageError, campaign_flags as _campaign_flags,
                                   check_out, console, count as _count, dry_run as _dry_run,
                                   err_console, margin_flag,
                                   open_store as _store, run_campaign,
                                   spec_from_flags as _spec_from_flags)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, wrapping only at spaces: a benchmark or option name with a
    hyphen (``osu-latency``, ``--dry-run``) is never split across lines."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one-line UsageErrors (exit 2 via :func:`main`) and whose help
    wraps at spaces only (:class:`_HelpFormatter`); sub-command parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        # main prints "vhpc: error: " before the line: name only the sub-command, if any
        where = self.prog.removeprefix("vhpc").strip()
        raise UsageError(f"{where + ': ' if where else ''}{message} (see {self.prog} --help)")


def cmd_compare(args) -> int:
    """``vhpc compare``: a campaign from the flags (or ``--resume``), run or only planned
    (``--dry-run``); the exit status of the campaign.  Raises UsageError for ``--dry-run``
    with ``--resume``."""
    spec = None if args.resume else _spec_from_flags(args)
    if args.dry_run:
        if spec is None:
            raise UsageError("--dry-run plans a new campaign: drop --resume")
        return _dry_run(spec, args.out, args)
    return run_campaign(args, spec)[0]


def cmd_run(args) -> int:
    """``vhpc run FILE``: the campaign of a YAML/TOML campaign file, run or only planned
    (``--dry-run``); the exit status of the campaign."""
    from vhpc.spec import parse as specmod

    spec = specmod.from_file(args.spec)
    return _dry_run(spec, args.out, args) if args.dry_run else run_campaign(args, spec)[0]


def cmd_study(args) -> int:
    """``vhpc study NAME`` (or ``list``): the study's campaign for this host's topology, run or
    only planned (``--dry-run``, which also describes the figure); memory-profile adds its
    CPI/MPKI view.  The exit status of the campaign."""
    from vhpc.campaign import execute, studies
    from vhpc.report import console as views

    if args.name == "list":
        for name, s in studies.STUDIES.items():
            console.print(f"[bold]{name:16}[/] {s.summary}")
        return 0
    fig = studies.STUDIES.get(args.name).figure if args.name in studies.STUDIES else None
    if args.dry_run and fig is not None:
        console.print(fig.describe(), highlight=False, markup=False)
    host = execute.host_facts()
    if studies.note(args.name, host.topology):
        console.print(studies.note(args.name, host.topology), highlight=False, markup=False)
    spec = studies.build(args.name, host.topology, args.bench or [], in_vm=args.in_vm,
                         host_knobs=args.host_knob, repeats=args.repeats, warmup=args.warmup,
                         timeout=args.timeout, executor=args.executor, margin=args.margin)
    if args.dry_run:
        _dry_run(spec, args.out, args)
        return 0
    args.resume = None
    rc, cid = run_campaign(args, spec)
    if args.name == "memory-profile":
        views.memory_profile(console, _store(args.out).trials(cid))
    return rc


def cmd_paper(args) -> int:
    """``vhpc paper SEED`` (vhpc.workflows.paper)."""
    from vhpc.workflows import paper

    return paper.run(args)


def cmd_calibrate(args) -> int:
    """``vhpc calibrate``: A/A false positives, an injected slowdown recovered, power,
    placement (docs/calibrate.md)."""
    from vhpc.workflows import calibrate
    from vhpc.spec import parse as specmod
    from vhpc.report import calibrate as calibrate_report

    taken: list[str] = []
    s = calibrate.Settings(tuple(specmod.parse_bench(b) for b in args.bench or quick_suite()),
                           tuple(specmod.parse_env(e, taken) for e in args.env or specmod.default_environments()),
                           campaigns=args.campaigns, repeats=args.repeats, delta=args.delta,
                           alpha=args.alpha, warmup=args.warmup, timeout=args.timeout)
    check_out(args.out)  # a bad --out before the checks; the store once they passed
    doc = calibrate.run(lambda: _store(args.out), s, " ".join(shlex.quote(a) for a in sys.argv),
                        say=lambda m: console.print(m, highlight=False, markup=False))
    calibrate_report.render_terminal(doc, console)
    jpath, hpath = calibrate_report.write(doc, Path(args.out))
    console.print(f"Calibration: [bold]{esc(hpath)}[/]  (JSON: {esc(jpath)})")
    return 0


def cmd_report(args) -> int:
    """``vhpc report ID``: a stored campaign's terminal report and its HTML/CSV/JSON files,
    after re-parsing the raw output with ``--reparse``."""
    from vhpc.campaign import execute
    from vhpc.report import console as views

    from vhpc.report.export import check_writable

    for flag in ("html", "csv", "json"):
        check_writable(getattr(args, flag), f"--{flag}")
    store = _store(args.out, existing=True)
    store.campaign(args.id)
    if args.reparse:
        n = execute.reparse(store, args.id)
        console.print(f"Re-parsed {n} trials from their stored raw output")
    from vhpc.workflows.tune.output import report_sections as race

    views.campaign_report(store, args.id, args.out, console, args.html, args.csv, args.json,
                          extra_sections=race(store, args.id, args.out),
                          detail=True if args.all else None, margin=args.margin,
                          intervals=args.intervals, method=args.method)
    return 0


def cmd_list(args) -> int:
    """``vhpc list benchmarks`` (the registry, or its Markdown table) or ``vhpc list
    campaigns`` (the store's campaigns)."""
    from vhpc.report import console as views

    if args.what == "benchmarks":
        from vhpc.benchmarks import REGISTRY

        views.benchmarks(console, REGISTRY, markdown=args.markdown)
        return 0
    views.campaigns(console, _store(args.out, existing=True).campaigns(),
                    f"{args.out}/vhpc.db")
    return 0


def cmd_plan(args) -> int:
    """``vhpc plan``: the placement of one or more VMs (or ``--partition`` VMs per socket) on a
    topology, printed in each environment kind's words; runs nothing.  Raises SpecError for a
    bad ``--numa`` and PlacementError when neither ``--vcpus`` nor ``--partition`` is given,
    or the placement does not fit."""
    from vhpc import placement, topology
    from vhpc.environments.options import guest_numa

    try:
        numa = guest_numa(args.numa)
    except ValueError as exc:
        raise SpecError(f"--numa: {exc}") from None
    topo = topology.load(args.topology)
    if args.partition:
        plans = placement.plan_partition(topo, args.partition, args.vcpus, args.memory,
                                         backing=args.backing, guest_numa=numa)
    else:
        if args.vcpus is None:
            raise placement.PlacementError("give --vcpus N (or --partition VMS_PER_SOCKET)")
        reqs = [placement.PlacementRequest(vcpus=args.vcpus, memory_mib=args.memory,
                                           policy=args.policy, guest_numa=numa,
                                           backing=args.backing, vm_index=i, vms=args.vms)
                for i in range(args.vms)]
        plans = placement.plan_vms(topo, reqs)
    def dialects(p, name):  # each kind shows the plan in its tools' words (a vm's backends)
        return [line for _, kind in KINDS.items() for line in kind().placement_dialects(p, name)]

    console.print(placement.render_plans(topo, plans, dialects), highlight=False, markup=False,
                  soft_wrap=True)
    return 0


def _compare_parser(sub) -> None:
    """The ``compare`` subcommand's flags."""
    c = sub.add_parser("compare", help="run benchmarks natively and in VMs and compare (the main job)")
    c.add_argument("-b", "--bench", action="append", metavar="BENCH[:k=v,...]",
                   help=parts.bench_help())
    c.add_argument("-e", "--env", action="append", metavar="ENV[:k=v,...]",
                   help=parts.kinds_help())
    c.add_argument("--repeats", type=count(1, 10000), help="measured rounds (default 5)")
    c.add_argument("--warmup", type=count(0, 1000), help="warm-up rounds, stored but not analysed (default 1)")
    c.add_argument("--baseline", help="environment the others are compared to (default native)")
    c.add_argument("--timeout", type=number(0, MAX_SECONDS, lo_open=True), help="seconds per trial before it is killed (default 600)")
    c.add_argument("--order", choices=("alternate", "fixed"), help="environment order across rounds")
    c.add_argument("--protocol", choices=("warm", "cold", "cold-warm"),
                   help="VM sessions: warm = one boot (default), cold = a boot per trial, "
                        "cold-warm = a boot per benchmark block, first trial cold, later warm")
    c.add_argument("--session-trials", type=count(2, 1000), metavar="N",
                   help="cold-warm: trials per benchmark in each session (default 3)")
    c.add_argument("--target-ci", type=percent(0, 100, lo_open=True, hi_open=True), metavar="PCT",
                   help="adaptive repeats: after --repeats rounds, add rounds until every mean's "
                        "95 %% CI half-width is within PCT %% of it (or --max-repeats)")
    c.add_argument("--max-repeats", type=count(1, 10000), metavar="N",
                   help="with --target-ci: at most N measured rounds (default 30)")
    c.add_argument("--strict-placement", action="store_true",
                   help="fail a VM trial whose placement does not read back as planned "
                        "(default: a warning in the report)")
    c.add_argument("--host-knob", action="append", metavar="NAME=VALUE",
                   help="change a host setting for this campaign only, restored afterwards "
                        "(thp, thp_defrag, numa_balancing, hugepages_2m, hugepages_1g, governor)")
    c.add_argument("--executor", metavar=parts.executor_metavar(), help=parts.executor_help())
    c.add_argument("--resume", metavar="ID", help="continue an interrupted campaign")
    _campaign_flags(c, starts=True)


def _calibrate_parser(sub) -> None:
    """``vhpc calibrate`` and its flags (docs/calibrate.md)."""
    cal = sub.add_parser("calibrate", help="how far this host's results can be trusted: A/A "
                         "false positives, an injected slowdown recovered, runs needed")
    cal.add_argument("-b", "--bench", action="append", metavar="BENCH[:k=v,...]",
                     help=parts.bench_help())
    cal.add_argument("-e", "--env", action="append", metavar="ENV[:k=v,...]",
                     help=parts.calibrate_env_help())
    cal.add_argument("--campaigns", type=_count(1, 10000), default=20,
                     help="campaigns per environment and benchmark (default %(default)s)")
    cal.add_argument("--repeats", type=_count(2, 10000), default=3,
                     help="measured rounds per campaign (default %(default)s)")
    cal.add_argument("--warmup", type=_count(0, 1000), default=1,
                     help="warm-up rounds (default %(default)s)")
    cal.add_argument("--delta", type=number(0, 10, lo_open=True, hi_open=True), default=0.05, help="injected slowdown, a fraction "
                     "(default %(default)s = 5 %%)")
    cal.add_argument("--alpha", type=number(0, 1, lo_open=True, hi_open=True), default=0.05, help="significance level (default "
                     "%(default)s)")
    cal.add_argument("--timeout", type=number(0, MAX_SECONDS, lo_open=True), default=600.0, help="seconds per trial")
    _campaign_flags(cal)


def build_parser() -> argparse.ArgumentParser:
    """The `vhpc` argument parser (argparse errors become one-line UsageErrors).  Its length
    is a table of flags, one ``add_argument`` a line: compare and calibrate build theirs in
    :func:`_compare_parser` and :func:`_calibrate_parser`, and paper, tune, diff, history and
    image in their workflow's ``add_parser``."""
    p = _Parser(prog="vhpc", allow_abbrev=False,  # a command's --all is no --allow-...
                description="What does virtualization cost your HPC workload on this host, "
                            "and which VM placement is cheapest?")
    p.add_argument("--version", action="version", version=f"vhpc {__version__}")
    for flag in parts.global_flags():  # each kind's, kept under its variable's name
        if flag.metavar:
            p.add_argument(flag.flag, action="append", metavar=flag.metavar, default=[],
                           dest=flag.env, help=flag.help)
        else:
            p.add_argument(flag.flag, action="store_true", dest=flag.env, help=flag.help)
    p.add_argument("--share", action="store_true",
                   help="create results (store, raw outputs, reports) readable by others as "
                        "the umask allows; default: private, files 0600 and folders 0700 "
                        "(also $VHPC_SHARE_RESULTS=1)")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("doctor", help="what this host has and lacks for each environment kind and "
                   "benchmark, with the package to install")
    h = sub.add_parser("host", help="host topology, accelerator probe, QEMU, guest kernel, knobs")
    h.add_argument("--topology", help="hwloc XML file or synthetic description instead of this host")
    h.add_argument("--no-probe", action="store_true", help="skip the KVM probe")
    h.add_argument("--reprobe", action="store_true", help="probe KVM again instead of using the cached result")
    h.add_argument("--ssh", metavar="[USER@]HOST[:PORT]",
                   help="report on a remote machine over OpenSSH instead (docs/scale-out.md)")

    _compare_parser(sub)

    r = sub.add_parser("run", help="run a campaign described in a YAML file")
    r.add_argument("spec", help="campaign file (YAML)")
    r.add_argument("--resume", metavar="ID", help=argparse.SUPPRESS)
    _campaign_flags(r, starts=True)
    r.set_defaults(resume=None)

    rep = sub.add_parser("report", help="re-analyse a stored campaign (no re-run)")
    rep.add_argument("id")
    rep.add_argument("--html", help="HTML report path")
    rep.add_argument("--csv", help="samples CSV path")
    rep.add_argument("--json", help="JSON export path")
    rep.add_argument("--reparse", action="store_true", help="re-derive samples from stored raw output first")
    rep.add_argument("--all", action="store_true",
                     help="print every metric (the per-metric table) before the headline")
    _campaign_flags(rep)
    margin_flag(rep)

    st = sub.add_parser("study", help="run a seed paper's experiment as a campaign "
                        "('vhpc study list' lists them)")
    st.add_argument("name", help="a study name ('vhpc study list' shows them)")
    st.add_argument("-b", "--bench", action="append", metavar="BENCH[:k=v,...]",
                    help=parts.bench_help("benchmark replacing the study's own (repeatable; "
                                          "default: the study's, shown by --dry-run)"))
    parts.study_protocol_flags(st, "the study's")
    st.add_argument("--host-knob", action="append", metavar="NAME=VALUE",
                    help="as for compare, e.g. hugepages_2m=1024 for the paging study")
    st.add_argument("--executor", metavar=parts.executor_metavar(),
                    help="as for compare; the scaling study needs slurm:nodes=N")
    st.add_argument("--in-vm", action="store_true",
                    help="memory-profile: run inside a guest with 2 virtual NUMA nodes")
    _campaign_flags(st, starts=True)

    from vhpc.workflows.paper import add_parser as add_paper

    add_paper(sub)

    pl = sub.add_parser("plan", help="plan a VM placement on this host or another topology")
    pl.add_argument("--topology", help="hwloc XML file, synthetic description (e.g. "
                    "'pack:4 numa:1 l3:1 core:4 pu:1') or seed machine name; default: this host")
    pl.add_argument("--vcpus", type=_count(1, 4096), help="vCPUs per VM")
    pl.add_argument("--memory", type=_count(1, 1 << 24), default=1024, help="MiB per VM (default %(default)s)")
    pl.add_argument("--policy", default="compact", help="float, compact, spread, span:K, confine:N, "
                    "nodes:LIST, map:... (docs/placement.md; default %(default)s)")
    pl.add_argument("--numa", default="hidden", help="guest NUMA nodes: hidden, mirror or a count")
    pl.add_argument("--backing", default="4k", choices=("4k", "2m", "1g"), help="page backing")
    pl.add_argument("--vms", type=_count(1, 256), default=1, help="identical VMs sharing the policy's CPUs")
    pl.add_argument("--partition", type=_count(1, 256), metavar="VMS_PER_SOCKET",
                    help="partition the host: this many VMs on each socket (seed 000 Fig. 8)")

    _calibrate_parser(sub)
    ls = sub.add_parser("list", help="list benchmarks or stored campaigns")
    ls.add_argument("what", choices=("benchmarks", "campaigns"))
    ls.add_argument("--markdown", action="store_true", help="benchmarks as Markdown (docs/benchmarks.md)")
    _campaign_flags(ls)

    from vhpc.workflows.tune.cli import add_parser as add_tune

    add_tune(sub)
    from vhpc.workflows import diff, history, image

    diff.add_parser(sub)
    history.add_parser(sub)
    image.add_parser(sub)
    return p


def _sigterm(signum, frame):
    raise KeyboardInterrupt


#: Command name → handler (each returns the exit status).
def cmd_tune(args) -> int:
    """``vhpc tune``: race candidate placements (vhpc.workflows.tune, docs/tune.md)."""
    from vhpc.workflows.tune.cli import cmd_tune as tune

    return tune(args)


def cmd_diff(args) -> int:
    """``vhpc diff A B`` (vhpc.workflows.diff, docs/diff.md)."""
    from vhpc.workflows import diff

    return diff.run(args)


def cmd_history(args) -> int:
    """``vhpc history`` (vhpc.workflows.history, docs/history.md)."""
    from vhpc.workflows import history

    return history.run(args)


def cmd_image(args) -> int:
    """``vhpc image build`` (vhpc.workflows.image, docs/images.md)."""
    from vhpc.workflows import image

    return image.run(args)


def cmd_doctor(args) -> int:
    """``vhpc doctor`` (vhpc.workflows.host)."""
    from vhpc.workflows import host

    return host.doctor(args)


def cmd_host(args) -> int:
    """``vhpc host`` (vhpc.workflows.host)."""
    from vhpc.workflows import host

    return host.host(args)


COMMANDS = {"host": cmd_host, "compare": cmd_compare, "run": cmd_run, "report": cmd_report,
            "study": cmd_study, "plan": cmd_plan, "list": cmd_list, "tune": cmd_tune,
            "calibrate": cmd_calibrate, "diff": cmd_diff, "doctor": cmd_doctor,
            "paper": cmd_paper, "image": cmd_image, "history": cmd_history}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vhpc`` command; returns the exit status: a :class:`VhpcError`
    (bad input) is printed as one line and gives 2; anything else is a bug and propagates
    with its traceback."""
    signal.signal(signal.SIGTERM, _sigterm)
    from vhpc.core.paths import private_results

    try:
        try:
            args = build_parser().parse_args(
                argtypes.negative_values(list(sys.argv[1:] if argv is None else argv)))
        except SystemExit:  # --help, --version or a usage error: plugins said after it
            _say_plugins(None)
            raise
        _say_plugins(args.command)
        given = {}
        for flag in parts.global_flags():
            value = getattr(args, flag.env)
            if flag.metavar:
                given[flag.env] = value and ",".join(
                    [os.environ.get(flag.env) or "", *value]).strip(",")
            else:
                given[flag.env] = "1" if value else ""
        saved = {k: os.environ.get(k) for k, v in given.items() if v}
        os.environ.update({k: v for k, v in given.items() if v})  # for this command only
        try:
            with private_results(args.share or None):
                return _dispatch(args)
        finally:
            for k, v in saved.items():  # in-process callers keep their environment
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    except VhpcError as exc:
        line = " ".join(str(exc).split())
        err_console.print(f"vhpc: error: {line}", highlight=False, markup=False, soft_wrap=True)
        return 2


#: Commands that measure: a plugin that failed to load stops them (exit 2), since a campaign's
#: kinds, backends, executors, benchmarks or studies may be the plugin's; the other commands go
#: on without it, saying so.
NEEDS_PLUGINS = frozenset({"compare", "run", "study", "paper", "tune", "calibrate"})


def _say_plugins(command: str | None) -> None:
    """One stderr line per plugin part skipped for a name clash and per plugin that failed to
    load (core.registry.load_plugins); raises HostError with the first failure when
    ``command`` (None: no command parsed) is one of :data:`NEEDS_PLUGINS`."""
    from vhpc.core import registry
    from vhpc.core.errors import HostError

    registry.load_all()  # every registry the parser made: a clash shows before the command
    for line in registry.plugin_clashes():
        err_console.print(f"vhpc: {line}", highlight=False, markup=False, soft_wrap=True)
    failures = registry.plugin_failures()
    if failures and command in NEEDS_PLUGINS:
        more = f" (and {len(failures) - 1} more plugin(s))" if len(failures) > 1 else ""
        raise HostError(failures[0] + more)
    for line in failures:
        err_console.print(f"vhpc: {line}; {command or 'vhpc'} goes on without it",
                          highlight=False, markup=False, soft_wrap=True)


def sweep_cgroups() -> list[Path | str]:
    """Thaw and remove the freezer and CPU-quota groups of a vhpc that died (``kill -9``
    during ``slowdown=``), at every start, as host-knob journals are recovered: a daemon a
    trial left in a frozen group must not stay frozen until some later ``slowdown=``; kill
    what a killed ``vhpc image build`` left running and undo its journal (loop devices,
    mounts, build folders: :func:`vhpc.host.contained.sweep_stale`).  Best effort (nothing to
    do without cgroups or root); returns the groups removed and a line per thing undone."""
    from vhpc.host import contained, cpu_bandwidth, freezer

    return [*freezer.sweep_stale(), *cpu_bandwidth.sweep_stale(), *contained.sweep_stale()]


def _dispatch(args) -> int:
    """:func:`main` once the arguments are parsed (results private unless ``--share``)."""
    try:
        from vhpc.host.knobs import journal_path, recover

        for left in recover(journal_path()):  # only journals whose vhpc is no longer running
            err_console.print(f"vhpc: {left.describe()}", highlight=False, markup=False,
                              soft_wrap=True)
        for line in sweep_cgroups():
            logging.getLogger("vhpc").info(str(line))
        return COMMANDS[args.command](args)
    except VhpcError as exc:
        line = " ".join(str(exc).split())
        err_console.print(f"vhpc: error: {line}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err_console.print("vhpc: interrupted")
        return 130
    except OSError as exc:  # results that cannot be written: full, read-only, no permission
        from vhpc.storefile import describe_os_error

        if describe_os_error(exc) is None:
            raise
        err_console.print(f"vhpc: error: {describe_os_error(exc)}", highlight=False,
                          markup=False, soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
