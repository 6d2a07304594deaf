#!/usr/bin/env python3
"""The test suite's time split by file, slowest first (a script, not a test).

Reads the JUnit XML that ``make test`` writes (``.pytest-times.xml``: both passes, the
parallel one and the serial one), sums each test file's test times (set-up and tear-down
included, as pytest reports them) and prints one line per file: seconds, tests, share of the
sum.  The sum is CPU-side test time over every worker, not the wall time of the run (3 workers
overlap); then each pass's wall time, and the last ``make test-fresh``'s time for ``make
demo`` in a fresh Debian root (``.fresh-demo-time``).  ``--run`` runs the suite first, as
``make test`` does; without it and without the file it says how to make one.

    python bench/bench_suite.py [--xml .pytest-times.xml ...] [--top 25] [--run]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

DEFAULT = [".pytest-times.xml", ".pytest-times-serial.xml"]


def per_file(paths: list[Path]) -> dict[str, tuple[float, int]]:
    """test file → (seconds, tests) summed over the JUnit XML files ``paths``."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("file") or (case.get("classname", "").split(".")[-1] + ".py")
            name = name.rsplit("/", 1)[-1]
            out[name][0] += float(case.get("time") or 0.0)
            out[name][1] += 1
    return {k: (v[0], int(v[1])) for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--xml", nargs="*", default=DEFAULT, help="JUnit XML files of a run")
    ap.add_argument("--top", type=int, default=25, help="files shown (the rest summed)")
    ap.add_argument("--run", action="store_true", help="run the suite first (make test)")
    args = ap.parse_args()
    if args.run:
        subprocess.run(["make", "test"], check=False)
    paths = [Path(p) for p in args.xml if Path(p).exists()]
    if not paths:
        print(f"no {' or '.join(args.xml)}: run 'make test' (it writes them) or give --run")
        return 0  # not a failure of make bench: the other figures stand
    files = sorted(per_file(paths).items(), key=lambda kv: -kv[1][0])
    total = sum(s for s, _ in (v for _, v in files)) or 1.0
    print(f"test time by file (from {', '.join(map(str, paths))}; summed over workers):")
    for name, (secs, n) in files[:args.top]:
        print(f"  {name:<34} {secs:8.1f} s  {n:4d} tests  {100 * secs / total:5.1f}%")
    rest = files[args.top:]
    if rest:
        print(f"  {f'{len(rest)} other files':<34} {sum(v[0] for _, v in rest):8.1f} s")
    print(f"  {'all':<34} {total:8.1f} s  {sum(v[1] for _, v in files):4d} tests")
    walls = {p.name: wall_time(p) for p in paths}
    print("make test's passes, wall time: " + ", ".join(f"{n} {w:.0f} s" for n, w in walls.items())
          + f"; together {sum(walls.values()):.0f} s (goal: 480 s on a quiet 2-core host)")
    fresh = Path(".fresh-demo-time")
    print("make demo in a fresh Debian 12 root, clone to headline (make test-fresh): "
          + (fresh.read_text().strip() if fresh.exists() else "not run here yet")
          + " (goal: 180 s on a quiet 2-core host)")
    return 0


def wall_time(path: Path) -> float:
    """Seconds the pytest run that wrote the JUnit XML ``path`` took from start to end (its
    ``testsuite`` element's ``time``: wall time, not the sum of its tests)."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return float(suite.get("time") or 0.0) if suite is not None else 0.0


if __name__ == "__main__":
    sys.exit(main())
