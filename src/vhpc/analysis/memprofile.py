"""Memory-profile study analysis (Cheng and Chen, 3PGCIC 2013, Sec. III-B, Fig. 3): how much a
workload suffers when its memory is on a remote NUMA node, explained by its memory intensity.

For each benchmark: CPI with memory local and remote → **NUMA penalty** = CPI_remote /
CPI_local; **MPKI** (last-level-cache misses per 1000 instructions, local run); a least-squares
line penalty = a + b·MPKI over the benchmarks; and the seed's intensity classes: high
(MPKI > 3), medium (1 ≤ MPKI ≤ 3), low (MPKI < 1).

When the host has no usable hardware counters (CPI unavailable) the penalty falls back to the
ratio of mean trial wall times remote / local, and says so (``basis = "time"``); MPKI then
stays unknown and no class or fit is given.  Pure computation: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from vhpc.core import stats

HIGH_MPKI = 3.0  # Cheng and Chen, 3PGCIC 2013, Sec. III-B
LOW_MPKI = 1.0


@dataclass(frozen=True)
class TrialCounters:
    """What the study needs from one stored trial: environment (``local``/``remote``),
    benchmark label, wall seconds, and CPI/MPKI (None when unavailable)."""

    environment: str
    benchmark: str
    seconds: float
    cpi: float | None
    mpki: float | None


@dataclass(frozen=True)
class ProfileRow:
    """One benchmark: penalty (dimensionless), its basis (``cpi`` or ``time``), local MPKI,
    intensity class (``high``/``medium``/``low``/None), sample counts."""

    benchmark: str
    penalty: float | None
    basis: str
    mpki: float | None
    intensity: str | None
    n_local: int
    n_remote: int


@dataclass(frozen=True)
class Fit:
    """penalty = intercept + slope·MPKI; r² and the number of benchmarks used."""

    slope: float
    intercept: float
    r2: float
    n: int


def intensity(mpki: float | None) -> str | None:
    """Seed 003's class of an MPKI value: high (> 3), medium (1..3), low (< 1)."""
    if mpki is None:
        return None
    if mpki > HIGH_MPKI:
        return "high"
    return "medium" if mpki >= LOW_MPKI else "low"


def _mean(values: list[float]) -> float | None:
    return stats.mean(values)


def profile(trials: Iterable[TrialCounters], local: str = "local",
            remote: str = "remote") -> list[ProfileRow]:
    """One :class:`ProfileRow` per benchmark having trials in both environments."""
    by: dict[str, dict[str, list[TrialCounters]]] = {}
    for t in trials:
        by.setdefault(t.benchmark, {}).setdefault(t.environment, []).append(t)
    rows = []
    for bench, envs in sorted(by.items()):
        loc, rem = envs.get(local, []), envs.get(remote, [])
        if not loc or not rem:
            continue
        cpi_l = _mean([t.cpi for t in loc if t.cpi is not None])
        cpi_r = _mean([t.cpi for t in rem if t.cpi is not None])
        if cpi_l and cpi_r:
            penalty, basis = cpi_r / cpi_l, "cpi"
        else:
            t_l, t_r = _mean([t.seconds for t in loc]), _mean([t.seconds for t in rem])
            penalty, basis = (t_r / t_l if t_l else None), "time"
        mpki = _mean([t.mpki for t in loc if t.mpki is not None])
        rows.append(ProfileRow(bench, penalty, basis, mpki, intensity(mpki), len(loc), len(rem)))
    return rows


def fit(rows: list[ProfileRow]) -> Fit | None:
    """Least-squares line of penalty against MPKI (:func:`vhpc.core.stats.linear_fit`) over rows having
    both; None with fewer than 3 such benchmarks."""
    pts = [(r.mpki, r.penalty) for r in rows if r.mpki is not None and r.penalty is not None]
    if len(pts) < 3 or len({x for x, _ in pts}) < 2:
        return None
    slope, intercept, r2 = stats.linear_fit([x for x, _ in pts], [y for _, y in pts])
    return Fit(slope, intercept, r2, len(pts))


def from_trials(rows: Iterable[Any]) -> list[TrialCounters]:
    """TrialCounters from stored trial rows (vhpc.store.TrialRow: environment, benchmark,
    params, warmup, status, started, ended and its :class:`vhpc.core.records.Diagnostics`); warm-up
    and unfinished trials skipped."""
    out = []
    for t in rows:
        if t.warmup or t.status != "done" or t.ended is None:
            continue
        perf = t.diagnostics.perf if t.diagnostics is not None else None
        label = f"{t.benchmark}[{t.params}]" if t.params else t.benchmark
        out.append(TrialCounters(t.environment, label, t.ended - t.started,
                                 perf.cpi if perf else None, perf.mpki if perf else None))
    return out
