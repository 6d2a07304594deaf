"""Time ``vhpc tune``'s candidate generation (every policy × guest NUMA view, placed, collapsed
up to topology symmetry) on big synthetic topologies (a script, not a test).

For each description and VM size: seconds for :func:`vhpc.workflows.tune.candidates.generate` (MPI
workload, so partitions are included) and the number of candidates before/after collapsing.

    python bench/bench_tune_candidates.py [--repeat 3] [--vcpus N] [DESC ...]
"""

from __future__ import annotations

import argparse
import time

from vhpc import topology
from vhpc.workflows.tune.candidates import generate

DEFAULT = ["pack:4 numa:1 l3:1 core:4 pu:1", "pack:2 numa:4 l3:2 core:8 pu:2", "pack:8 numa:2 l3:1 core:16 pu:2"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("desc", nargs="*", default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vcpus", type=int, default=16)
    args = ap.parse_args()
    for desc in args.desc:
        topo = topology.load(desc)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            cands, skipped = generate(topo, args.vcpus, 4096, mpi=True)
            times.append(time.perf_counter() - t0)
        total = len(cands) + sum(len(c.aliases) for c in cands)
        print(f"{desc!r:40} {len(topo.pus):5d} PUs  {args.vcpus} vCPUs  generate {min(times):7.3f} s "
              f"(best of {args.repeat})  {total} placements -> {len(cands)} candidates, {len(skipped)} skipped")


if __name__ == "__main__":
    main()
