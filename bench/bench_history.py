"""Time ``vhpc history``'s analysis, and give the change-point test's false-alarm rate and
power by seeded simulation (a script, not a test; docs/history.md quotes its output).

Default: 1,000 campaigns × 50 metrics.  Each series holds one point per campaign (the
campaign's overhead ratio, log-normal at a campaign-to-campaign CV of 5 %; half the series with
a 10 % step at the middle); the script times :func:`vhpc.analysis.history.analyse_series`
(change points with up to 199 permutations per test, segments, trend, status) and
:meth:`~vhpc.analysis.history.History.check` (the gate) over them, in seconds, best of
``--repeat``.  ``--per-campaign K`` also times :func:`vhpc.analysis.history.points` (each
campaign's own comparison of 5 runs a side, the report's analysis) over K in-memory campaigns
of the same 50 metrics and prints the cost per campaign: reading a history from stores costs
that, once per campaign, before the analysis.

``--power`` prints, for A/A series of 5, 8, 20 and 100 campaigns at CV 5 %, the share showing
a change point (the false-alarm rate, stated ≤ α; ``--aa-reps`` seeded series each), and for a
10 % step in the middle the share showing a change point and the share showing one within one
campaign of the step (the power; ``--reps`` series each).

    python bench/bench_history.py [--campaigns 1000] [--metrics 50] [--repeat 3]
                                  [--per-campaign 50] [--power [--reps 2000] [--aa-reps 10000]]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from vhpc.analysis import changepoints as cp
from vhpc.analysis.diff import CampaignData, HistoryPoint
from vhpc.analysis.history import analyse_series, points
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.core.power import proportion_interval


def rows(campaigns: int, metrics: int, seed: int = 1) -> dict:
    """Synthetic series: {((vm, bench, "", metric), "vm", "native"): [HistoryPoint, ...]}."""
    rng = np.random.default_rng(seed)
    out = {}
    for m in range(metrics):
        ln = rng.normal(math.log(1.2), 0.05, campaigns)
        if m % 2:
            ln[campaigns // 2:] += math.log(1.1)
        pts = [HistoryPoint(f"c{i}", 1.7e9 + i * 3600.0, float(math.exp(v)),
                            (math.exp(v - 0.05), math.exp(v + 0.05)), "log-welch", 5, 5,
                            "primary", "s", False, "bench")
               for i, v in enumerate(ln)]
        out[(("vm", f"b{m}", "", "time"), "vm", "native")] = pts
    return out


def campaigns_in_memory(k: int, metrics: int, seed: int = 2) -> list[CampaignData]:
    """``k`` campaigns of ``metrics`` benchmarks (one metric each), 5 runs a side."""
    rng = np.random.default_rng(seed)
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}
    out = []
    for c in range(k):
        obs, tid = [], 0
        for m in range(metrics):
            for env, level in (("native", 1.0), ("vm", 1.2)):
                for r in range(5):
                    obs.append(Observation(env, f"b{m}", "", "time", "s", False,
                                           float(level * math.exp(rng.normal(0, 0.05))), True,
                                           False, tid, r))
                    tid += 1
        spec = {"baseline": "native", "environments": [{"name": "native", "kind": "native"},
                                                       {"name": "vm", "kind": "vm"}]}
        out.append(CampaignData(f"c{c}", 1.7e9 + c * 3600.0, spec, envs, tuple(obs), "mem"))
    return out


def power_table(reps: int, aa_reps: int, alpha: float = 0.05) -> None:
    print(f"false alarms ({aa_reps} seeded A/A series each, [95 % Clopper-Pearson interval]) and "
          f"power ({reps} series each), alpha = {alpha}, CV 5 % campaign to campaign")
    for n in (5, 8, 20, 100):
        rng = np.random.default_rng(n)
        aa = sum(bool(cp.detect(rng.normal(0, 0.05, n), alpha, seed=i)) for i in range(aa_reps))
        hit = near = 0
        for i in range(reps):
            x = rng.normal(0, 0.05, n)
            x[n // 2:] += math.log(1.1)
            found = cp.detect(x, alpha, seed=i)
            hit += bool(found)
            near += any(abs(s.index - n // 2) <= 1 for s in found)
        lo, hi = proportion_interval(aa, aa_reps)
        print(f"  {n:4d} campaigns: A/A false-alarm rate {aa / aa_reps:.4f} [{lo:.4f}, {hi:.4f}]; "
              f"10 % step in the middle: a change point {hit / reps:.3f}, within one campaign "
              f"of the step {near / reps:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--campaigns", type=int, default=1000)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--per-campaign", type=int, default=0, metavar="K")
    ap.add_argument("--power", action="store_true")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--aa-reps", type=int, default=10000)
    args = ap.parse_args()
    data = rows(args.campaigns, args.metrics)
    analyse_series(rows(10, 1))  # imports (scipy) outside the timing
    best = math.inf
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        h = analyse_series(data)
        h.check()
        best = min(best, time.perf_counter() - t0)
    found = sum(bool(s.change_points) for s in h.series)
    print(f"history analysis, {args.campaigns} campaigns x {args.metrics} metrics: {best:.3f} s "
          f"(best of {args.repeat}); {found} series with a change point "
          f"({args.metrics // 2} have a 10 % step)")
    if args.per_campaign:
        cs = campaigns_in_memory(args.per_campaign, args.metrics)
        t0 = time.perf_counter()
        pts = points(cs)
        dt = time.perf_counter() - t0
        print(f"points of {args.per_campaign} campaigns x {args.metrics} metrics: {dt:.3f} s, "
              f"{dt / args.per_campaign * 1000:.1f} ms per campaign ({len(pts)} series)")
    if args.power:
        power_table(args.reps, args.aa_reps)


if __name__ == "__main__":
    main()
