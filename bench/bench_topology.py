"""Time loading big synthetic topologies and placing on them (a script, not a test).

For each description: seconds for lstopo + parsing into the usable view (``topology.load``),
and for ``place`` with ``compact`` over every PU. The largest default is vhpc's cap
(``MAX_SYNTHETIC_PUS`` = 16384 PUs).

    python bench/bench_topology.py [--repeat 3] [DESC ...]
"""

from __future__ import annotations

import argparse
import time

from vhpc import topology
from vhpc.placement import PlacementRequest, place

DEFAULT = ["pack:2 numa:1 l3:1 core:16 pu:2", "pack:8 numa:2 l3:1 core:16 pu:2", "pack:4 numa:1 core:64 pu:64"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("desc", nargs="*", default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for desc in args.desc:
        loads, places = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            topo = topology.load(desc)
            t1 = time.perf_counter()
            place(topo, PlacementRequest(vcpus=len(topo.pus), memory_mib=1024, policy="compact", check_memory=False))
            t2 = time.perf_counter()
            loads.append(t1 - t0)
            places.append(t2 - t1)
        print(f"{desc!r:40} {len(topo.pus):6d} PUs  load {min(loads):7.3f} s  place compact {min(places):7.3f} s (best of {args.repeat})")


if __name__ == "__main__":
    main()
