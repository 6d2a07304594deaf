#!/usr/bin/env python3
"""Harness overhead: a native trial through vhpc vs the same kernel run by hand, and where the
difference goes.

"By hand" is subprocess.run of the kernel binary.  "Through vhpc" is a whole campaign of N
trials (plan, environment run with rusage and perf probing, parse, one SQLite transaction per
trial, the progress bar ``vhpc compare`` shows, drawn to a console that discards it), divided
by N.  Prints the medians and the per-trial overhead in milliseconds; the steady state is the
median time from one trial's start to the next's, so the campaign's one-time start (imports,
spec, lock) is left out.

The breakdown times each step of the trial cycle where the harness calls it (the functions
are wrapped for the campaign only): starting the trial's process (its session and process
group, the ``sh`` gate), the guard that kills the group if vhpc dies, the sweep of the session
when the trial ends, waiting for the output (the kernel's own run time is in it: the by-hand
median is subtracted), resource usage, parse, the store's writes, the progress bar and the
load average; "the rest" is the cycle less all of them.  A freezer cgroup is set up only for
an environment with ``slowdown=`` (vhpc.environments.slowdown), so it has no line here.

By-hand runs are timed before and after the campaign (the median of both), so a load that
drifts during the run weighs on both sides.  CPU time (getrusage(2)) is printed beside the
wall-clock figures: vhpc's own CPU per trial, and its children's (the kernel and the ``sh``
gate) against the by-hand runs' children; waiting for a busy core adds wall time but no CPU
time, so these are the figures a loaded host moves least.

Usage: .venv/bin/python bench/bench_harness.py [--trials 30] [--no-progress]
"""

import argparse
import io
import resource
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console

from vhpc.benchmarks.base import ensure_kernels
from vhpc.campaign import execute as campaign
from vhpc.host import counters, owned
from vhpc.spec import parse as spec
from vhpc.store import Store
from vhpc.workflows.common import RichProgress

BENCH = "pagefault:mib=1,reps=1"

spent: dict[str, float] = defaultdict(float)
#: (owner, name, the function before it was wrapped)
wrapped: list = []


def timed(owner, name: str, label: str) -> None:
    """Wrap ``owner.name`` so that its time adds to ``spent[label]``."""
    fn = getattr(owner, name)
    wrapped.append((owner, name, fn))

    def wrapper(*args, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            spent[label] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


STEPS = [
    (subprocess.Popen, "__init__", "process start (fork/exec, new session, sh gate)"),
    (owned.GroupGuard, "__init__", "guard: watch the group"),
    (owned.GroupGuard, "done", "guard: let go of the group"),
    (owned, "kill_session", "session sweep at the end (/proc scan, kill)"),
    (subprocess.Popen, "communicate", "output capture (incl. the kernel's run)"),
    (counters, "children_usage", "resource usage (getrusage)"),
    (counters, "perf_status", "perf probe (cached)"),
    (campaign, "outcome", "parse"),
    (Store, "mark_running", "store: mark running (1 transaction)"),
    (Store, "finish_trial", "store: finish trial (1 transaction)"),
    (RichProgress, "trial", "progress bar"),
    (RichProgress, "finished", "progress bar"),
    (campaign, "_loadavg", "load average"),
]


def cpu(who: int) -> float:
    """User + system CPU seconds of ``who`` (getrusage(2): RUSAGE_SELF or RUSAGE_CHILDREN)."""
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--no-progress", action="store_true", help="run without the progress bar")
    args = ap.parse_args()
    bindir = ensure_kernels(["vhpc-pagefault"])
    argv = [str(bindir / "vhpc-pagefault"), "-m", "1", "-r", "1"]
    by_hand: list[float] = []
    hand_cpu = [0.0]  # the by-hand runs' children's CPU seconds, all runs

    def run_by_hand() -> None:
        c0 = cpu(resource.RUSAGE_CHILDREN)
        for _ in range(args.trials):
            t0 = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            by_hand.append(time.perf_counter() - t0)
        hand_cpu[0] += cpu(resource.RUSAGE_CHILDREN) - c0

    run_by_hand()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "vhpc.db")
        s = spec.from_cli([BENCH], ["native"], repeats=args.trials, warmup=0)
        envs = campaign.prepare(s)  # the preflight ``vhpc compare`` runs before the campaign
        cid = campaign.create(store, s)
        progress = None if args.no_progress else RichProgress(
            Console(file=io.StringIO(), force_terminal=True, width=100))
        for owner, name, label in STEPS:
            timed(owner, name, label)
        t0, wall0 = time.perf_counter(), time.time()
        self0, kids0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
        campaign.execute(store, cid, progress=progress, envs=envs, spec=s)
        total = time.perf_counter() - t0
        own_cpu = cpu(resource.RUSAGE_SELF) - self0
        kids_cpu = cpu(resource.RUSAGE_CHILDREN) - kids0
        if progress is not None:
            progress.stop()  # as the CLI does: the live display gives stdout back
        snapshot = dict(spent)
        rows = sorted(store.trials(cid), key=lambda t: t.started)
        per_trial = [t.ended - t.started for t in rows]
        gaps = [b.started - a.started for a, b in zip(rows, rows[1:])]
        start = rows[0].started - wall0  # execute() until the first trial's command starts
    for owner, name, fn in wrapped:  # unwrap: the by-hand runs are timed bare
        setattr(owner, name, fn)
    run_by_hand()  # before and after the campaign: drift of the load counts on both sides
    hand = statistics.median(by_hand)
    n = args.trials
    print(f"kernel by hand:          median {hand * 1e3:.1f} ms per run ({len(by_hand)} runs)")
    print(f"command inside vhpc:     median {statistics.median(per_trial) * 1e3:.1f} ms per trial")
    print(f"whole vhpc trial cycle:  {total / n * 1e3:.1f} ms per trial "
          f"(plan, run, parse, store)")
    print(f"harness overhead:        {(total / n - hand) * 1e3:.1f} ms per trial")
    print(f"  of which one-time start: {start / n * 1e3:.1f} ms per trial ({start:.2f} s "
          f"from execute() to the first trial: leftovers swept, kernels checked, imports)")
    cycle = statistics.median(gaps)
    print(f"steady-state trial cycle: median {cycle * 1e3:.1f} ms from one trial's start to the "
          f"next's; overhead {(cycle - hand) * 1e3:.1f} ms (without the campaign's one-time start)")
    print(f"steady-state minimum:     {(min(gaps) - min(by_hand)) * 1e3:.1f} ms (shortest cycle − "
          f"shortest run by hand: the least load-sensitive figure)")
    print(f"CPU time per trial:       vhpc's own {own_cpu / n * 1e3:.2f} ms (with the wrapped "
          f"steps' timers); children {kids_cpu / n * 1e3:.2f} ms against "
          f"{hand_cpu[0] / len(by_hand) * 1e3:.2f} ms by hand (the sh gate's part, and any probe "
          f"the campaign ran: "
          f"{(kids_cpu / n - hand_cpu[0] / len(by_hand)) * 1e3:.2f} ms)")
    print(f"where a trial's time goes (mean over {n} trials, ms; one-time work such as the perf "
          "probe is spread over them):")
    lines = {}
    for _, _, label in STEPS:
        lines[label] = snapshot.get(label, 0.0) / n * 1e3
    capture = "output capture (incl. the kernel's run)"
    lines[capture] -= hand * 1e3
    known = sum(lines.values())
    for label, ms in lines.items():
        shown = label.replace("(incl. the kernel's run)", "(less the by-hand run)")
        print(f"  {shown:<52} {ms:7.2f}")
    rest = total / n * 1e3 - hand * 1e3 - known
    print(f"  {'the rest (start-up, resolve, command line, loop)':<52} {rest:7.2f}")


if __name__ == "__main__":
    main()
