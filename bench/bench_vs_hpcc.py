#!/usr/bin/env python3
"""vhpc's own STREAM Triad and RandomAccess kernels vs HPC Challenge's on this host.

Runs Debian's ``hpcc`` with one rank through vhpc's ``hpcc`` benchmark (its wrapper and
parser), reads the array and table sizes hpcc chose for that N (``STREAM_VectorSize``,
``RandomAccess_N``), then runs ``kernels/build/vhpc-stream`` and ``vhpc-randomaccess`` with
the same sizes, one thread each (hpcc's Single tests are one process, one thread).  Each is
repeated; prints the medians and the ratio ours / hpcc for

  * Triad GB/s      vs hpcc SingleSTREAM_Triad (both 1e9 B/s, best of 10 iterations)
  * GUP/s           vs hpcc SingleRandomAccess_GUPs

A ratio near 1 says the kernels measure what HPCC measures.  Not a test: run it by hand,
    .venv/bin/python bench/bench_vs_hpcc.py [--n 6000] [--reps 3]
(N = 6000 gives 12 M-element STREAM arrays (288 MiB) and a 2^25-word table (256 MiB), both far
beyond the caches; one hpcc run takes about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess

from vhpc.benchmarks.base import RunContext, ensure_kernels, parse_result_line
from vhpc.benchmarks.quick import RANDOMACCESS, STREAM
from vhpc.benchmarks.suites import HpccBenchmark, hpcc_summary


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, **env))
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed (exit {proc.returncode}): {proc.stderr[-500:]}")
    return proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6000, help="hpcc's HPL N (sizes every test)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each program")
    args = ap.parse_args()

    bindir = ensure_kernels(["vhpc-stream", "vhpc-randomaccess"])
    ctx = RunContext(bindir, 1)
    hpcc = HpccBenchmark()
    hp = hpcc.resolve({"n": args.n, "nb": 128, "p": 1, "q": 1})

    h_triad, h_gups, sizes = [], [], None
    for _ in range(args.reps):
        proc = run(hpcc.command(hp, ctx), hpcc.environ(hp, ctx))
        samples = {s.metric: s for s in hpcc.parse(hp, proc.stdout, proc.stderr, 0)}
        kv = hpcc_summary(proc.stdout)
        sizes = int(kv["STREAM_VectorSize"]), int(kv["RandomAccess_N"])
        assert samples["single_stream_triad"].valid and samples["single_randomaccess_gups"].valid
        h_triad.append(samples["single_stream_triad"].value)
        h_gups.append(samples["single_randomaccess_gups"].value)
    vector, table = sizes
    log2 = int(math.log2(table))
    assert 1 << log2 == table, f"RandomAccess_N={table} is not a power of two"

    sp = STREAM.resolve({"n": vector, "ntimes": 10, "threads": 1})
    rp = RANDOMACCESS.resolve({"table_log2": log2})
    o_triad, o_gups = [], []
    for _ in range(args.reps):
        out = parse_result_line(run(STREAM.command(sp, ctx), STREAM.environ(sp, ctx)).stdout)
        o_triad.append(float(out["triad_bw"]))
        out = parse_result_line(run(RANDOMACCESS.command(rp, ctx),
                                    {"OMP_NUM_THREADS": "1"}).stdout)
        o_gups.append(float(out["gups"]))

    mt, mg = statistics.median(o_triad), statistics.median(o_gups)
    ht, hg = statistics.median(h_triad), statistics.median(h_gups)
    print(f"hpcc N={args.n}: STREAM vector {vector} doubles, RandomAccess table 2^{log2} words; "
          f"{args.reps} repetitions, medians, 1 thread")
    print(f"{'':24}{'vhpc':>12}{'hpcc':>12}{'ratio':>9}")
    print(f"{'STREAM Triad GB/s':24}{mt:12.3f}{ht:12.3f}{mt / ht:9.3f}")
    print(f"{'RandomAccess GUP/s':24}{mg:12.5f}{hg:12.5f}{mg / hg:9.3f}")
    print(f"runs: vhpc triad {[round(x, 2) for x in o_triad]}, hpcc {[round(x, 2) for x in h_triad]}")
    print(f"runs: vhpc gups {[round(x, 4) for x in o_gups]}, hpcc {[round(x, 4) for x in h_gups]}")


if __name__ == "__main__":
    main()
