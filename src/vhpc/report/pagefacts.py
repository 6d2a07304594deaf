"""Facts every page states beside the answer: each benchmark's problem size (its resolved
parameters), this host's load around the trials, and a finding where a timed region is too
short to time.  Read from the stored campaign (its spec, its trials' diagnostics) and the
analysis; nothing is run or measured here."""

from __future__ import annotations

import re
import statistics
from typing import Any, Iterable, Mapping

from vhpc.analysis import Analysis
from vhpc.analysis.results import Finding
from vhpc.core.errors import VhpcError

__all__ = ["problem_sizes", "size_text", "host_load", "short_region_findings", "SHORT_REGION_S"]

#: A timed region shorter than this (seconds) is reported: with Linux's CONFIG_HZ=250 (Debian's
#: default) a timer tick lands every 4 ms, so one tick or one OS detour (docs/benchmarks.md:
#: noise) in a region under 100 ms is more than 4 % of it, near the 5 % at which the analysis
#: already calls a group noisy (CV_THRESHOLD); a region of 1-2 ms (NPB class S) is mostly
#: start-up and interruptions.
SHORT_REGION_S = 0.1


#: a parameter value a run printed is shown only when it is this plain (a number or a word)
_PLAIN = re.compile(r"[\w.+-]{1,24}")


def problem_sizes(spec: Mapping[str, Any] | None,
                  trials: Iterable[Any] = ()) -> dict[str, dict[str, str]]:
    """benchmark[params] label → its resolved parameters, name → value as text, declared
    defaults filled in; a benchmark the registry does not know or cannot resolve shows what
    was given.  ``spec``: the stored campaign spec (JSON form).

    A value the run decided (``auto``, or HPCCG's ``nx=0``: sized from the cache where it ran)
    is the one the trials' ``VHPC-RESULT`` line printed under the parameter's name, marked
    "(auto)", and per environment where they differ ("57 native, 45 vm (auto)": a guest sees
    another cache); ``auto`` when no trial printed it.  ``trials``: the stored trials (their
    benchmark, params, environment, status and stdout)."""
    from vhpc import benchmarks
    from vhpc.analysis.findings import label

    printed = _printed(trials)
    out: dict[str, dict[str, str]] = {}
    for b in (spec or {}).get("benchmarks") or []:
        if not isinstance(b, Mapping) or not isinstance(b.get("name"), str):
            continue
        given = b.get("params") if isinstance(b.get("params"), Mapping) else {}
        key = label(b["name"], ",".join(f"{k}={v}" for k, v in sorted(given.items())))
        try:
            bench = benchmarks.get(b["name"])
            resolved = bench.resolve(given)
            auto = set(bench.auto_values(resolved, "where it ran"))  # HPCCG's nx=0
        except (VhpcError, ValueError):  # a custom command, or parameters it no longer takes
            resolved, auto = dict(given), set()
        runs = printed.get(key, {})
        sizes = {}
        for k, v in resolved.items():
            if v == "":  # an unset text parameter (pagefault's file=) says nothing
                continue
            seen = {env: vals[k] for env, vals in runs.items() if k in vals}
            derived = v is None or k in auto  # the run decides it
            if not derived or not seen:
                sizes[k] = "auto" if derived else str(v)
            elif len(set(seen.values())) == 1:
                sizes[k] = f"{next(iter(seen.values()))} (auto)"
            else:
                sizes[k] = ", ".join(f"{x} {env}" for env, x in seen.items()) + " (auto)"
        out[key] = sizes
    return out


def _printed(trials: Iterable[Any]) -> dict[str, dict[str, dict[str, str]]]:
    """label → environment → the ``VHPC-RESULT`` pairs of its first finished trial that has
    one (plain values only, :data:`_PLAIN`)."""
    from vhpc.analysis.findings import label
    from vhpc.benchmarks.base import parse_result_line

    out: dict[str, dict[str, dict[str, str]]] = {}
    for t in trials:
        key, env = label(str(t.benchmark), str(t.params)), str(t.environment)
        if getattr(t, "status", "") != "done" or env in out.get(key, {}):
            continue
        try:
            pairs = parse_result_line(getattr(t, "stdout", None) or "")
        except ValueError:  # ParseError, no result line: nothing printed to show
            continue
        out.setdefault(key, {})[env] = {k: v for k, v in pairs.items() if _PLAIN.fullmatch(v)}
    return out


def size_text(points: list[tuple[str, Mapping[str, str]]], leave_out: Iterable[str] = ()) -> str:
    """One text for the problem sizes of a family's ``points`` ((point label such as
    "ranks=2" or "", sizes by name)): parameters in ``leave_out`` (those the benchmark's label
    and the sweep already show) left out; one that is the same at every point "name=value";
    one that differs its values by point ("nx: 72 at ranks=1; 57 at ranks=2"); consecutive
    parameters with the same text share it ("nx=ny=nz=57 (auto)")."""
    skip = set(leave_out)
    names = list(dict.fromkeys(k for _, sizes in points for k in sizes if k not in skip))
    texts = []
    for k in names:
        vals = list(dict.fromkeys((x, sizes.get(k, "—")) for x, sizes in points))
        if len({v for _, v in vals}) == 1:
            texts.append((k, "=" + vals[0][1]))
        else:
            texts.append((k, ": " + "; ".join(f"{v} at {x}" if x else v for x, v in vals)))
    groups: list[tuple[list[str], str]] = []
    for k, text in texts:
        if groups and groups[-1][1] == text:
            groups[-1][0].append(k)
        else:
            groups.append(([k], text))
    return ", ".join("=".join(ks) + text for ks, text in groups)


def host_load(trials: Iterable[Any]) -> str | None:
    """This host's 1-minute load average around the measured trials, from their stored
    diagnostics, before and after each ("load average 1.9 – 10.8 (median 6.2) around 40
    trials, 2 CPUs"); None when
    no trial stored one (campaigns from before it was recorded)."""
    import os

    loads = []
    for t in trials:
        d = getattr(t, "diagnostics", None)
        for v in (getattr(d, "loadavg_before", None), getattr(d, "loadavg_after", None)):
            if v:
                loads.append(float(v[0]))
    if not loads:
        return None
    n = sum(1 for t in trials if getattr(getattr(t, "diagnostics", None), "loadavg_before", None))
    return (f"load average {min(loads):.1f} – {max(loads):.1f} (median "
            f"{statistics.median(loads):.1f}) around {n} trials, "
            f"{os.cpu_count() or '?'} CPUs")


def _floor(benchmark: str, metric: str) -> float:
    """The shortest timed region (s) ``benchmark``'s ``metric`` should last: the benchmark's
    own ``timed_floors`` (GROMACS's timed window: 2 s, vhpc.benchmarks.apps.sizing.FLOOR_S),
    else :data:`SHORT_REGION_S`."""
    from vhpc import benchmarks

    try:
        floors = getattr(benchmarks.get(benchmark), "timed_floors", {})
    except VhpcError:  # BenchmarkError: a custom benchmark the registry does not hold
        floors = {}
    return float(floors.get(metric, SHORT_REGION_S))


def _seconds(x: float) -> str:
    return f"{x * 1000:.3g} ms" if x < 1 else f"{x:.3g} s"


def short_region_findings(analysis: Analysis) -> list[Finding]:
    """One ``short-region`` finding (info) per benchmark[params] whose timed region — a metric
    in seconds where lower is better — lasted under its floor (:func:`_floor`: the benchmark's
    own, else :data:`SHORT_REGION_S`) on average in some environment, naming the shortest: a
    warning under a benchmark's own floor (GROMACS's window: ratios of 0.37-40 to a direct run
    were measured below it), a note under the general one."""
    from vhpc.analysis.findings import label

    short: dict[str, tuple[float, float, str]] = {}
    for s in analysis.summaries:
        if s.group != "all" or s.unit != "s" or s.higher_is_better or s.mean is None:
            continue
        floor = _floor(s.benchmark, s.metric)
        if not 0 < s.mean < floor:
            continue
        key = label(s.benchmark, s.params)
        if key not in short or s.mean < short[key][0]:
            short[key] = (s.mean, floor, f"{s.metric} {_seconds(s.mean)} in {s.environment}")
    return [Finding("info" if floor == SHORT_REGION_S else "warn", key,
                    f"timed region under {_seconds(floor)}: {what}",
                    "a 4 ms timer tick or one OS detour is then several per cent of it: give a "
                    "larger problem (class=, steps=, n=; GROMACS: leave steps= out, it is sized "
                    "to a 3 s window) before trusting small differences",
                    kind="short-region")
            for key, (_, floor, what) in short.items()]
