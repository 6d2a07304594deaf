"""Time vhpc.analysis.analyse() on synthetic observations (a script, not a test).

Default: 4 environments × 25 metrics × 10⁴ samples = 10⁶ observations, 10 % of VM samples with
a session index 0 (cold), 1 % invalid, 1 % warm-up.  The observations are built as the store's
columns (:meth:`vhpc.store.Store.observation_columns`, what the report analyses).  Prints the
time to build them (not part of analyse), the one-time import of what analyse() loads on its
first call (scipy, statsmodels), and the time of analyse() itself, in seconds.
``--objects`` hands analyse() a list of Observation objects instead (turned into columns
inside, which is then part of the time).

    python bench/bench_analysis.py [--envs 4] [--metrics 25] [--samples 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vhpc.analysis import analyse
from vhpc.core.metrics import EnvInfo, Observation, ObservationColumns


def build(envs: int, metrics: int, samples: int, seed: int = 1
          ) -> tuple[ObservationColumns, dict[str, EnvInfo]]:
    """The observations as columns (the same values, for one seed, as the list this script
    built before it built columns) and the environments."""
    rng = np.random.default_rng(seed)
    names = ["native"] + [f"vm{i}" for i in range(1, envs)]
    infos = {n: EnvInfo(n, "native" if n == "native" else "vm", None if n == "native" else "kvm")
             for n in names}
    table: list[str] = list(names)
    index = {n: i for i, n in enumerate(table)}

    def code(s: str) -> int:
        if s not in index:
            index[s] = len(table)
            table.append(s)
        return index[s]

    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "environment", "benchmark", "params", "metric", "unit", "higher_is_better", "value",
        "valid", "warmup", "session_index")}
    i = np.arange(samples)
    for e, env in enumerate(names):
        for m in range(metrics):
            hib = m % 2 == 1
            values = (100.0 + 5 * e) * (1 + rng.normal(0, 0.02, samples))
            invalid = rng.random(samples) < 0.01
            warm = rng.random(samples) < 0.01
            for name, text in (("environment", env), ("benchmark", f"bench{m // 5}"),
                               ("params", f"size={m % 5}"), ("metric", f"metric{m}"),
                               ("unit", "GB/s" if hib else "s")):
                cols[name].append(np.full(samples, code(text), dtype=np.int32))
            cols["higher_is_better"].append(np.full(samples, hib))
            cols["value"].append(values)
            cols["valid"].append(~invalid)
            cols["warmup"].append(warm)
            cols["session_index"].append(np.full(samples, np.nan) if env == "native"
                                         else (i % 10).astype(np.float64))
    n = envs * metrics * samples
    c = {k: np.concatenate(v) for k, v in cols.items()}
    return ObservationColumns(tuple(table), c["environment"], c["benchmark"], c["params"],
                              c["metric"], c["unit"], c["higher_is_better"], c["value"],
                              c["valid"], c["warmup"], np.arange(n, dtype=np.int64),
                              np.tile(i // 100, envs * metrics).astype(np.int64),
                              c["session_index"]), infos


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--metrics", type=int, default=25)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--objects", action="store_true",
                    help="hand analyse() a list of Observation objects, not columns")
    args = ap.parse_args()
    t0 = time.perf_counter()
    obs, infos = build(args.envs, args.metrics, args.samples)
    data: ObservationColumns | list[Observation] = list(obs) if args.objects else obs
    t1 = time.perf_counter()
    print(f"built {len(obs):,} observations in {t1 - t0:.2f} s"
          f"{' (as objects)' if args.objects else ' (as columns)'}")
    # a small campaign through every path analyse() takes, so the imports and first-call set-up
    # of what it loads stay out of the timed runs: 2600 runs a side put 5200 ln residuals
    # through the large-sample normality test (logratio.SHAPIRO_MAX), as the timed data do
    small, _ = build(2, 2, 2600)
    analyse(small, infos, "native")
    print(f"first call's imports (scipy, statsmodels): {time.perf_counter() - t1:.2f} s")
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        a = analyse(data, infos, "native")
        times.append(time.perf_counter() - t)
    print(f"analyse(): {len(a.summaries)} summaries, {len(a.comparisons)} comparisons, "
          f"{len(a.findings)} findings")
    print(f"analyse() on {len(obs):,} observations: best {min(times):.2f} s, "
          f"median {sorted(times)[len(times) // 2]:.2f} s over {args.repeat} runs")


if __name__ == "__main__":
    main()
