#!/usr/bin/env python3
"""Harness overhead: a native trial through vhpc vs the same kernel run by hand.

"By hand" is subprocess.run of the kernel binary.  "Through vhpc" is a whole campaign of N
trials (plan, environment run with rusage and perf probing, parse, one SQLite transaction per
trial), divided by N.  Prints the medians and the per-trial overhead in milliseconds; the last
line is the steady state (median time from one trial's start to the next's, so the campaign's
one-time start — imports, spec, lock — is left out).

By-hand runs are timed before and after the campaign (the median of both), so a load that
drifts during the run weighs on both sides.

Usage: .venv/bin/python bench/bench_harness.py [--trials 30]
"""

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from vhpc.campaign import execute as campaign
from vhpc.spec import parse as spec
from vhpc.benchmarks.base import ensure_kernels
from vhpc.store import Store

BENCH = "pagefault:mib=1,reps=1"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=30)
    args = ap.parse_args()
    bindir = ensure_kernels(["vhpc-pagefault"])
    argv = [str(bindir / "vhpc-pagefault"), "-m", "1", "-r", "1"]
    by_hand: list[float] = []

    def run_by_hand() -> None:
        for _ in range(args.trials):
            t0 = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            by_hand.append(time.perf_counter() - t0)

    run_by_hand()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "vhpc.db")
        s = spec.from_cli([BENCH], ["native"], repeats=args.trials, warmup=0)
        cid = campaign.create(store, s)
        t0, wall0 = time.perf_counter(), time.time()
        campaign.execute(store, cid)
        total = time.perf_counter() - t0
        rows = sorted(store.trials(cid), key=lambda t: t.started)
        per_trial = [t.ended - t.started for t in rows]
        gaps = [b.started - a.started for a, b in zip(rows, rows[1:])]
        start = rows[0].started - wall0  # execute() until the first trial's command starts
    run_by_hand()  # before and after the campaign: drift of the load counts on both sides
    hand = statistics.median(by_hand)
    print(f"kernel by hand:          median {hand * 1e3:.1f} ms per run ({len(by_hand)} runs)")
    print(f"command inside vhpc:     median {statistics.median(per_trial) * 1e3:.1f} ms per trial")
    print(f"whole vhpc trial cycle:  {total / args.trials * 1e3:.1f} ms per trial "
          f"(plan, run, parse, store)")
    print(f"harness overhead:        {(total / args.trials - hand) * 1e3:.1f} ms per trial")
    print(f"  of which one-time start: {start / args.trials * 1e3:.1f} ms per trial ({start:.2f} s "
          f"from execute() to the first trial: spec, host facts, fingerprints, imports)")
    cycle = statistics.median(gaps)
    print(f"steady-state trial cycle: median {cycle * 1e3:.1f} ms from one trial's start to the "
          f"next's; overhead {(cycle - hand) * 1e3:.1f} ms (without the campaign's one-time start)")
    print(f"steady-state minimum:     {(min(gaps) - min(by_hand)) * 1e3:.1f} ms (shortest cycle − "
          f"shortest run by hand: the least load-sensitive figure)")


if __name__ == "__main__":
    main()
