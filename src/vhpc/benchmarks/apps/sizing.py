"""Steps for a timed window long enough to time: an application left at ``steps=auto`` is
sized once per campaign, before any trial, from a short probe run on this host, and the steps
found are stored in the campaign's parameters, so every environment times the same problem
and step count (docs/applications.md, "How long a run is timed").

The probe runs the trial's own command natively (``probe_steps`` steps, counters reset half
way) and reads the timed window it reports.  A loaded host stretches that window by how much
of the CPUs the probe got, so the seconds per step are scaled by the probe's CPU share (the
CPU seconds its processes used, from ``getrusage(RUSAGE_CHILDREN)``, over its wall seconds
times the CPUs it kept busy): what the step takes on this host when it has the CPUs to itself.
The result is cached, when the probe had its CPUs (:data:`CALM_SHARE`), per host and problem
(``apps/step-seconds.json`` in vhpc's cache, keyed by host name, CPU model, CPU count, the
prepared input's content hash, ranks and threads), so a second campaign does not probe again;
a cache entry that is not a finite positive number is probed again.
"""

from __future__ import annotations

import json
import math
import os
import resource
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping

from vhpc.benchmarks.base import BenchmarkError

#: The window a sized run aims at (s): 1.5 x :data:`FLOOR_S`, headroom for a host that runs
#: faster than when it was probed.
TARGET_S = 3.0
#: A timed window under this (s) is reported on the page (vhpc.report.pagefacts): we
#: measured 1-rank GROMACS windows of 0.05-0.6 s whose ratios to a direct run of the same
#: input spread from 0.37 to 40; 2 s holds a 4 ms timer tick (CONFIG_HZ=250) and the 1 ms
#: resolution of md.log's Time line under 0.25 % of the window.
FLOOR_S = 2.0
#: Bounds of a sized run: the probe's CPU share is floored here (a probe that got almost no
#: CPU says little), and the steps are capped (a cached or measured value can never ask for
#: a run of days).
MIN_SHARE, MAX_STEPS = 0.05, 1_000_000
#: Plausible seconds per MD step, for a cached value to be believed (else it is probed again):
#: 100 ns is far below one step of the smallest system on the fastest node, an hour far above
#: the slowest (a cached 1e-300 would ask for the step cap, hours of run).
MIN_STEP_S, MAX_STEP_S = 1e-7, 3600.0
#: A probe that got less of its CPUs than this ran on a busy host: its scaled step time sizes
#: the campaign at hand and is never cached (a busy host's share undoes load only roughly)
CALM_SHARE = 0.9
#: Largest cache file read (bytes).
MAX_CACHE = 256 << 10
CACHE_NAME = "step-seconds.json"


def steps_for(step_s: float, quantum: int, timed: Callable[[int], int]) -> int:
    """The fewest steps, a multiple of ``quantum`` and at least two of them, whose timed part
    (``timed(steps)`` steps: for mdrun's ``-resetstep steps/2`` the second half) lasts
    :data:`TARGET_S` at ``step_s`` seconds per step; at most :data:`MAX_STEPS`.  Raises
    ValueError for a ``step_s`` that is not a finite positive number."""
    if not (math.isfinite(step_s) and step_s > 0):
        raise ValueError(f"seconds per step {step_s!r}: give a finite positive number")
    need = math.ceil(TARGET_S / step_s)  # timed steps
    steps = max(2 * quantum, quantum * math.ceil(2 * need / quantum))
    while timed(steps) < need and steps < MAX_STEPS:
        steps += quantum
    return min(steps, MAX_STEPS)


def host_key() -> str:
    """This host as the cache names it: host name, CPU model and allowed CPU count."""
    from vhpc.host.facts import cpu_model

    return f"{socket.gethostname()}|{cpu_model() or '?'}|{len(os.sched_getaffinity(0))}"


def _cache_path() -> Path:
    from vhpc.benchmarks.apps.common import apps_dir
    from vhpc.core.paths import trusted_folder

    return trusted_folder(apps_dir(), "the application cache") / CACHE_NAME


def cached(key: str) -> float | None:
    """Seconds per step cached under ``key``; None (probed again) when there is none, the
    cache file is not to be believed (a link, another user's or writable by others:
    :func:`vhpc.core.paths.read_cache_text`) or not a JSON object, or the value lies outside
    [:data:`MIN_STEP_S`, :data:`MAX_STEP_S`]."""
    from vhpc.core.paths import read_cache_text

    text = read_cache_text(_cache_path(), MAX_CACHE)  # no link, this user's file, 0600
    try:
        data = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    value = data.get(key) if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if MIN_STEP_S <= value <= MAX_STEP_S else None


def remember(key: str, step_s: float) -> None:
    """Cache ``step_s`` under ``key`` (atomically, 0600; other keys kept when the file is
    sound)."""
    from vhpc.core.paths import cache_lock, read_cache_text, write_atomic

    path = _cache_path()
    with cache_lock(path.with_name(f".{CACHE_NAME}.lock")):
        try:
            data = json.loads(read_cache_text(path, MAX_CACHE) or "{}")
        except (ValueError, RecursionError):
            data = {}
        if not isinstance(data, dict) or len(data) > 1000:
            data = {}
        data[key] = step_s
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True))


def probe(argv: list[str], env: Mapping[str, str], busy: int, timeout: float,
          window: Callable[[str, str, int], float]) -> tuple[float, float]:
    """Run ``argv`` once (with ``env`` added, in a fresh working directory) and return (the
    timed window ``window(stdout, stderr, returncode)`` read from its output in seconds, the
    run's CPU share: CPU seconds of its processes / (wall seconds x ``busy`` CPUs), within
    [:data:`MIN_SHARE`, 1]).  Every process it started is killed when it returns, times out or
    is interrupted (its session: :func:`vhpc.host.owned.kill_session`).  Raises BenchmarkError
    when it cannot run or times out; ``window`` raises for output without a valid window."""
    from vhpc.host.owned import kill_session

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vhpc-probe-") as wd:
        try:
            proc = subprocess.Popen(argv, cwd=wd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, text=True,
                                    env={**os.environ, **env}, start_new_session=True)
        except OSError as exc:
            raise BenchmarkError(f"the sizing probe did not start ({exc}): give steps= "
                                 "explicitly") from None
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except BaseException as exc:  # timed out or interrupted: its whole session dies
            kill_session(proc.pid)  # the ranks too (Open MPI gives each a group of its own)
            proc.kill()
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # a process outside the session holds a pipe
                pass
            if isinstance(exc, subprocess.TimeoutExpired):
                raise BenchmarkError(f"the sizing probe did not finish in {timeout:g} s: give "
                                     "steps= explicitly") from None
            raise
        kill_session(proc.pid)  # what it left running after it exited
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    share = cpu / (wall * max(1, busy)) if wall > 0 else 1.0
    return window(stdout, stderr, proc.returncode), min(1.0, max(MIN_SHARE, share))
