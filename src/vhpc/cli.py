"""The ``vhpc`` command.  Thin: parses arguments, calls the rooms, prints.

Exit status: 0 success, 1 campaign finished with failed trials, 2 bad input (one-line error
saying what to change), 130 interrupted (everything measured so far is stored; resume with
``vhpc compare --resume ID``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from vhpc import __version__

DEFAULT_OUT = "vhpc-results"
QUICK = ["stream", "randomaccess", "pingpong", "noise", "pagefault"]

import os

# Piped output (CI logs, `| less`) gets a wide table instead of rich's 80-column default.
_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
console = Console(width=_WIDTH)
err_console = Console(stderr=True)


class RichProgress:
    """Campaign progress: a bar with done/total, elapsed time and ETA; failures are printed."""

    def __init__(self, con: Console):
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), console=con, transient=False)
        self.task = None

    def start(self, total, done):
        self.bar.start()
        self.task = self.bar.add_task("trials", total=total, completed=done)

    def trial(self, row):
        kind = "warm-up" if row.warmup else f"round {row.round}"
        self.bar.update(self.task, description=f"{row.environment} {row.benchmark} ({kind})")

    def grow(self, n):
        self.bar.update(self.task, total=self.bar.tasks[0].total + n)
        self.bar.console.print(f"adaptive repeats: adding a round ({n} trials) to reach the "
                               "target precision")

    def finished(self, row, status, note):
        self.bar.advance(self.task)
        if note:
            first = note.splitlines()[0][:160]
            self.bar.console.print(f"[yellow]{row.environment} {row.benchmark}: {status}: {first}")

    def stop(self):
        self.bar.stop()


def _store(out: str):
    from vhpc.store import Store

    return Store(Path(out) / "vhpc.db")


def _report(store, cid: str, out: str, html=None, csv=None, jsn=None, quiet=False) -> Path:
    """Analyse a stored campaign; print the table; write HTML, CSV and JSON; return the HTML path."""
    from vhpc import analysis
    from vhpc.report import export, html as html_report, terminal

    camp = store.campaign(cid)
    envs = store.environments(cid)
    obs = store.observations(cid)
    result = analysis.analyse(obs, envs, camp["spec"]["baseline"])
    folder = Path(out) / cid
    folder.mkdir(parents=True, exist_ok=True)
    html_path = Path(html) if html else folder / "report.html"
    trials = store.trials(cid)
    import time as _time

    meta = {"id": cid, "date": _time.strftime("%Y-%m-%d %H:%M:%S UTC", _time.gmtime(camp["created"])),
            "command": camp["command"],
            "status": camp["status"], "spec": camp["spec"],
            "trials": len(trials), "failed": sum(t.status == "failed" for t in trials),
            "failures": None if not any(t.status == "failed" for t in trials) else [{"environment": t.environment, "benchmark": t.benchmark,
                          "round": t.round, "error": (t.error or "")[-2000:]}
                         for t in trials if t.status == "failed"]}
    from vhpc.report import diagnostics
    from vhpc.tune.cli import report_sections as tune_sections

    html_report.write_html(result, obs, html_path, meta,
                           sections=[*diagnostics.sections(trials, envs, result),
                                     *tune_sections(store, cid, out)])
    export.write_csv(result, obs, Path(csv) if csv else folder / "samples.csv",
                     folder / "comparisons.csv")
    export.write_json(result, obs, Path(jsn) if jsn else folder / "results.json", trials)
    if not quiet:
        terminal.render_table(result, console, title=f"vhpc campaign {cid}")
        if meta["failed"]:
            console.print(f"[red]{meta['failed']} of {meta['trials']} trials failed; "
                          "their errors are in the report.")
        console.print(f"Report: [bold]{html_path}[/]  (CSV and JSON beside it)")
    return html_path


def cmd_compare(args, spec=None) -> int:
    from vhpc import campaign, spec as specmod

    store = _store(args.out)
    if args.resume:
        cid = args.resume
        store.campaign(cid)  # raises StoreError for an unknown id
        store.check_not_owned(cid)  # another live vhpc runs it: refuse before printing anything
        console.print(f"Resuming campaign [bold]{cid}[/]")
    else:
        if spec is None:
            spec = specmod.from_cli(args.bench or QUICK, args.env or ["native", "vm"],
                                    strict_placement=args.strict_placement,
                                    target_ci=args.target_ci / 100 if args.target_ci else None,
                                    max_repeats=args.max_repeats,
                                    repeats=args.repeats, warmup=args.warmup,
                                    baseline=args.baseline, timeout=args.timeout, order=args.order,
                                    protocol=args.protocol, session_trials=args.session_trials,
                                    host_knobs=args.host_knob,
                                    executor=getattr(args, "executor", None))
        for e in spec.environments:
            env = campaign.make_environment(e)  # validate options before anything is stored
            if hasattr(env, "preflight"):  # ssh: the host answers and accepts the key
                try:
                    env.preflight()
                finally:
                    env.close()
        from vhpc import executors

        executor = executors.make(spec.executor)
        if hasattr(executor, "preflight"):  # slurm: commands installed, controller answers
            executor.preflight()
        cid = campaign.create(store, spec, " ".join(shlex.quote(a) for a in sys.argv))
        console.print(f"Campaign [bold]{cid}[/]: {len(spec.benchmarks)} benchmark(s) × "
                      f"{len(spec.environments)} environment(s) × {spec.warmup}+{spec.repeats} "
                      f"rounds → {args.out}/")
    progress = RichProgress(console)
    try:
        counts = campaign.execute(store, cid, progress, notify=lambda m: err_console.print(
            f"vhpc: {m}", highlight=False, markup=False, soft_wrap=True))
    except KeyboardInterrupt:
        progress.stop()
        done = len(store.trials(cid, "done")) + len(store.trials(cid, "failed"))
        err_console.print(f"vhpc: interrupted; {done} trials are stored. Resume with: "
                          f"vhpc compare --resume {cid} --out {args.out}")
        return 130
    finally:
        progress.stop()
    _report(store, cid, args.out)
    return 1 if counts.get("failed") else 0


def cmd_run(args) -> int:
    from vhpc import spec as specmod

    return cmd_compare(args, spec=specmod.from_file(args.spec))


def cmd_study(args) -> int:
    from vhpc import studies, topology

    if args.name == "list":
        for name, what in studies.STUDIES.items():
            console.print(f"[bold]{name:16}[/] {what}")
        return 0
    topo = topology.load(None)
    if studies.note(args.name, topo):
        console.print(studies.note(args.name, topo))
    spec = studies.build(args.name, topo, args.bench or [], in_vm=args.in_vm,
                         host_knobs=args.host_knob,
                         **{k: v for k, v in (("repeats", args.repeats), ("warmup", args.warmup),
                                              ("timeout", args.timeout),
                                              ("executor", args.executor)) if v is not None})
    args.resume = None
    rc = cmd_compare(args, spec=spec)
    if args.name == "memory-profile":
        print_memory_profile(_store(args.out), _store(args.out).campaigns()[0]["id"])
    return rc


def print_memory_profile(store, cid: str) -> None:
    """The memory-profile table (seed 003 Fig. 3): penalty, MPKI, class; the fit if any."""
    from rich.table import Table

    from vhpc import memprofile

    rows = memprofile.profile(memprofile.from_trials(store.trials(cid)))
    table = Table(title="memory profile: NUMA penalty vs memory intensity")
    for col in ("benchmark", "NUMA penalty", "basis", "MPKI", "class"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.benchmark, f"{r.penalty:.3f}" if r.penalty else "n/a", r.basis,
                      f"{r.mpki:.2f}" if r.mpki is not None else "unavailable", r.intensity or "-")
    console.print(table)
    if any(r.basis == "time" for r in rows):
        console.print("CPI is unavailable (no hardware counters): the penalty shown is the ratio "
                      "of trial wall times remote/local, and MPKI classes cannot be given.")
    f = memprofile.fit(rows)
    if f:
        console.print(f"fit: penalty = {f.intercept:.3f} + {f.slope:.3f}·MPKI (r² = {f.r2:.2f}, "
                      f"{f.n} benchmarks)")


def cmd_report(args) -> int:
    from vhpc import campaign

    store = _store(args.out)
    store.campaign(args.id)
    if args.reparse:
        n = campaign.reparse(store, args.id)
        console.print(f"Re-parsed {n} trials from their stored raw output")
    _report(store, args.id, args.out, args.html, args.csv, args.json)
    return 0


def cmd_list(args) -> int:
    from rich.table import Table

    if args.what == "benchmarks":
        from vhpc.benchmarks import REGISTRY

        if args.markdown:
            from vhpc.benchmarks.catalog import render_markdown

            sys.stdout.write(render_markdown(list(REGISTRY.values())))
            return 0

        table = Table(title="benchmarks", show_lines=True)
        for col in ("name", "parameters (default)", "metrics", "verification", "serves"):
            table.add_column(col)
        for b in REGISTRY.values():
            params = "\n".join(f"{p.name}={'auto' if p.default is None else p.default}" for p in b.params)
            metrics = "\n".join(f"{m.name} [{m.unit}] {'↑' if m.higher_is_better else '↓'}" for m in b.metrics)
            table.add_row(f"[bold]{escape(b.name)}[/]\n{escape(b.summary)}", escape(params),
                          escape(metrics), escape(b.verification), escape(b.provenance))
        console.print(table)
        console.print("↑ higher is better, ↓ lower is better.  Override with -b NAME:param=value,...")
        return 0
    store = _store(args.out)
    table = Table(title=f"campaigns in {args.out}/vhpc.db")
    for col in ("id", "status", "done", "failed", "total", "command"):
        table.add_column(col)
    for c in store.campaigns():
        table.add_row(c["id"], c["status"], str(c["done"] or 0), str(c["failed"] or 0),
                      str(c["total"]), (c["command"] or "")[:80])
    console.print(table)
    return 0


def cmd_host(args) -> int:
    from vhpc.environments import guestimage, hostinfo, qemu

    from vhpc import topology

    if args.ssh:
        return remote_host_report(args.ssh)
    topo = topology.load(args.topology)
    console.print(topology.render_text(topo), highlight=False, markup=False, soft_wrap=True)
    if args.topology:
        return 0
    fp = hostinfo.fingerprint()
    console.print(f"CPU model     {fp['cpu_model']}  ({fp['host_cpus']} CPUs)")
    console.print(f"host kernel   {fp['host_kernel']}")
    console.print(f"QEMU          {hostinfo.qemu_version() or 'not installed (apt-get install qemu-system-x86)'}")
    try:
        kernel = guestimage.find_kernel()
        console.print(f"guest kernel  {kernel.image} ({kernel.release})")
    except guestimage.GuestImageError as exc:
        kernel = None
        console.print(f"guest kernel  none: {exc}")
    if args.no_probe or kernel is None or hostinfo.qemu_version() is None:
        console.print("accelerator   not probed")
    else:
        probe = qemu.probe_kvm(kernel, use_cache=not args.reprobe)
        style = "green" if probe.accel == "kvm" else "yellow"
        console.print(f"accelerator   [{style}]{probe.accel}[/]: {probe.reason}")
        if probe.accel == "tcg":
            console.print("              VM results on this host are TCG emulation, not hardware "
                          "virtualization overheads.")
    console.print("host knobs    " + json.dumps(fp["knobs"]))
    return 0


def remote_host_report(target: str) -> int:
    """``vhpc host --ssh [USER@]HOST[:PORT]``: the remote machine's topology and fingerprint."""
    from vhpc.environments import ssh

    lines = ssh.host_report(target)
    for line in lines:
        console.print(line, highlight=False, markup=False)
    return 0


def cmd_plan(args) -> int:
    from vhpc import placement, topology
    from vhpc.environments.vm import parse_guest_numa

    topo = topology.load(args.topology)
    numa = parse_guest_numa(args.numa)
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
    console.print(placement.render_plans(topo, plans), highlight=False, markup=False, soft_wrap=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vhpc", description="What does virtualization cost your HPC "
                                "workload on this host, and which VM placement is cheapest?")
    p.add_argument("--version", action="version", version=f"vhpc {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def campaign_flags(sp):
        sp.add_argument("--out", default=DEFAULT_OUT, help="results directory (default: %(default)s)")

    h = sub.add_parser("host", help="host topology, accelerator probe, QEMU, guest kernel, knobs")
    h.add_argument("--topology", help="hwloc XML file or synthetic description instead of this host")
    h.add_argument("--no-probe", action="store_true", help="skip the KVM probe")
    h.add_argument("--reprobe", action="store_true", help="probe KVM again instead of using the cached result")
    h.add_argument("--ssh", metavar="[USER@]HOST[:PORT]",
                   help="report on a remote machine over OpenSSH instead (docs/scale-out.md)")
    h.set_defaults(func=cmd_host)

    c = sub.add_parser("compare", help="run benchmarks natively and in VMs and compare (the main job)")
    c.add_argument("-b", "--bench", action="append", metavar="BENCH[:k=v,...]",
                   help=f"benchmark (repeatable; default: the quick suite {', '.join(QUICK)})")
    c.add_argument("-e", "--env", action="append", metavar="ENV[:k=v,...]",
                   help="environment: native[:cpus=LIST] or vm[:vcpus=N,memory=MiB,pin=auto|none|LIST,"
                        "accel=auto|kvm|tcg,name=NAME] (repeatable; default: -e native -e vm)")
    c.add_argument("--repeats", type=int, help="measured rounds (default 5)")
    c.add_argument("--warmup", type=int, help="warm-up rounds, stored but not analysed (default 1)")
    c.add_argument("--baseline", help="environment the others are compared to (default native)")
    c.add_argument("--timeout", type=float, help="seconds per trial before it is killed (default 600)")
    c.add_argument("--order", choices=("alternate", "fixed"), help="environment order across rounds")
    c.add_argument("--protocol", choices=("warm", "cold", "cold-warm"),
                   help="VM sessions: warm = one boot (default), cold = a boot per trial, "
                        "cold-warm = a boot per benchmark block, first trial cold, later warm")
    c.add_argument("--session-trials", type=int, metavar="N",
                   help="cold-warm: trials per benchmark in each session (default 3)")
    c.add_argument("--target-ci", type=float, metavar="PCT",
                   help="adaptive repeats: after --repeats rounds, add rounds until every mean's "
                        "95 %% CI half-width is within PCT %% of it (or --max-repeats)")
    c.add_argument("--max-repeats", type=int, metavar="N",
                   help="with --target-ci: at most N measured rounds (default 30)")
    c.add_argument("--strict-placement", action="store_true",
                   help="fail a VM trial whose placement does not read back as planned "
                        "(default: a warning in the report)")
    c.add_argument("--host-knob", action="append", metavar="NAME=VALUE",
                   help="change a host setting for this campaign only, restored afterwards "
                        "(thp, thp_defrag, numa_balancing, hugepages_2m, hugepages_1g, governor)")
    c.add_argument("--executor", metavar="local|slurm[:k=v,...]",
                   help="where trials run: local (default) or slurm[:partition=P,nodes=N,time=T,"
                        "account=A], each trial a job step in one allocation (docs/scale-out.md)")
    c.add_argument("--resume", metavar="ID", help="continue an interrupted campaign")
    campaign_flags(c)
    c.set_defaults(func=cmd_compare)

    r = sub.add_parser("run", help="run a campaign described in a YAML file")
    r.add_argument("spec", help="campaign file (YAML)")
    r.add_argument("--resume", metavar="ID", help=argparse.SUPPRESS)
    campaign_flags(r)
    r.set_defaults(func=cmd_run, resume=None)

    rep = sub.add_parser("report", help="re-analyse a stored campaign (no re-run)")
    rep.add_argument("id")
    rep.add_argument("--html", help="HTML report path")
    rep.add_argument("--csv", help="samples CSV path")
    rep.add_argument("--json", help="JSON export path")
    rep.add_argument("--reparse", action="store_true", help="re-derive samples from stored raw output first")
    campaign_flags(rep)
    rep.set_defaults(func=cmd_report)

    st = sub.add_parser("study", help="run a seed paper's experiment as a campaign "
                        "('vhpc study list' lists them)")
    st.add_argument("name", help="a study name ('vhpc study list' shows them)")
    st.add_argument("-b", "--bench", action="append", metavar="BENCH[:k=v,...]")
    st.add_argument("--repeats", type=int)
    st.add_argument("--warmup", type=int)
    st.add_argument("--timeout", type=float)
    st.add_argument("--host-knob", action="append", metavar="NAME=VALUE",
                    help="as for compare, e.g. hugepages_2m=1024 for the paging study")
    st.add_argument("--executor", metavar="local|slurm[:k=v,...]",
                    help="as for compare; the scaling study needs slurm:nodes=N")
    st.add_argument("--in-vm", action="store_true",
                    help="memory-profile: run inside a guest with 2 virtual NUMA nodes")
    campaign_flags(st)
    st.set_defaults(func=cmd_study)

    pl = sub.add_parser("plan", help="plan a VM placement on this host or another topology")
    pl.add_argument("--topology", help="hwloc XML file, synthetic description (e.g. "
                    "'pack:4 numa:1 l3:1 core:4 pu:1') or seed machine name; default: this host")
    pl.add_argument("--vcpus", type=int, help="vCPUs per VM")
    pl.add_argument("--memory", type=int, default=1024, help="MiB per VM (default %(default)s)")
    pl.add_argument("--policy", default="compact", help="float, compact, spread, span:K, confine:N, "
                    "nodes:LIST, map:... (docs/placement.md; default %(default)s)")
    pl.add_argument("--numa", default="hidden", help="guest NUMA nodes: hidden, mirror or a count")
    pl.add_argument("--backing", default="4k", choices=("4k", "2m", "1g"), help="page backing")
    pl.add_argument("--vms", type=int, default=1, help="identical VMs sharing the policy's CPUs")
    pl.add_argument("--partition", type=int, metavar="VMS_PER_SOCKET",
                    help="partition the host: this many VMs on each socket (seed 000 Fig. 8)")
    pl.set_defaults(func=cmd_plan)

    ls = sub.add_parser("list", help="list benchmarks or stored campaigns")
    ls.add_argument("what", choices=("benchmarks", "campaigns"))
    ls.add_argument("--markdown", action="store_true", help="benchmarks as Markdown (docs/benchmarks.md)")
    campaign_flags(ls)
    ls.set_defaults(func=cmd_list)

    from vhpc.tune.cli import add_parser as add_tune

    add_tune(sub)
    return p


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vhpc`` command; returns the exit status."""
    from vhpc.benchmarks import BenchmarkError
    from vhpc.environments.base import EnvError
    from vhpc.environments.guestimage import GuestImageError
    from vhpc.spec import SpecError
    from vhpc.store import StoreError

    from vhpc.environments.knobs import KnobError

    errors: tuple[type[BaseException], ...] = (SpecError, BenchmarkError, StoreError, EnvError,
                                               GuestImageError, KnobError)
    try:
        from vhpc.placement import PlacementError
        from vhpc.topology import TopologyError

        from vhpc.studies import StudyError

        from vhpc.errors import VhpcError

        errors += (PlacementError, TopologyError, StudyError, VhpcError)
    except ImportError:
        pass
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    from vhpc.environments.knobs import journal_path, recover

    for left in recover(journal_path()):  # only journals whose vhpc is no longer running
        err_console.print(f"vhpc: {left.describe()}", highlight=False, markup=False, soft_wrap=True)
    try:
        return args.func(args)
    except errors as exc:
        err_console.print(f"vhpc: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err_console.print("vhpc: interrupted")
        return 130
    except OSError as exc:  # results that cannot be written: full, read-only, no permission
        from vhpc.store import describe_os_error

        if describe_os_error(exc) is None:
            raise
        err_console.print(f"vhpc: error: {describe_os_error(exc)}", highlight=False,
                          markup=False, soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
