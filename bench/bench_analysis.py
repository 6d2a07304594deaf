"""Time vhpc.analysis.analyse() on synthetic observations (a script, not a test).

Default: 4 environments × 25 metrics × 10⁴ samples = 10⁶ observations, 10 % of VM samples with
a session index 0 (cold), 1 % invalid, 1 % warm-up.  Prints the time to build the observations
(not part of analyse) and the time of analyse() itself, in seconds.

    python bench/bench_analysis.py [--envs 4] [--metrics 25] [--samples 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vhpc.analysis import analyse
from vhpc.core.metrics import EnvInfo, Observation


def build(envs: int, metrics: int, samples: int, seed: int = 1) -> tuple[list[Observation], dict[str, EnvInfo]]:
    rng = np.random.default_rng(seed)
    names = ["native"] + [f"vm{i}" for i in range(1, envs)]
    infos = {n: EnvInfo(n, "native" if n == "native" else "vm", None if n == "native" else "kvm") for n in names}
    out: list[Observation] = []
    tid = 0
    for e, env in enumerate(names):
        for m in range(metrics):
            hib = m % 2 == 1
            values = (100.0 + 5 * e) * (1 + rng.normal(0, 0.02, samples))
            invalid = rng.random(samples) < 0.01
            warm = rng.random(samples) < 0.01
            for i in range(samples):
                out.append(Observation(
                    env, f"bench{m // 5}", f"size={m % 5}", f"metric{m}", "GB/s" if hib else "s", hib,
                    float(values[i]), not invalid[i], bool(warm[i]), tid, i // 100,
                    None if env == "native" else i % 10,
                ))
                tid += 1
    return out, infos


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--metrics", type=int, default=25)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    obs, infos = build(args.envs, args.metrics, args.samples)
    t1 = time.perf_counter()
    print(f"built {len(obs):,} observations in {t1 - t0:.2f} s")
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        a = analyse(obs, infos, "native")
        times.append(time.perf_counter() - t)
    print(f"analyse(): {len(a.summaries)} summaries, {len(a.comparisons)} comparisons, "
          f"{len(a.findings)} findings")
    print(f"analyse() on {len(obs):,} observations: best {min(times):.2f} s, "
          f"median {sorted(times)[len(times) // 2]:.2f} s over {args.repeat} runs")


if __name__ == "__main__":
    main()
