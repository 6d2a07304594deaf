"""Seeded simulations of vhpc's statistical sentences, shared by tests/test_stat_rates.py (a
small grid in ``make test``) and its ``heavy`` tests (the full grids, ``make bench``, whose
rates docs/statistics.md tables).  Each draws log-normal campaigns, lets vhpc's own functions
say what they say, and judges the outcome with scipy, independently of the code under test."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats as sps

from vhpc.core import logratio


def ln_sd(cv: float) -> float:
    """The ln SD of a log-normal sample whose coefficient of variation is ``cv``."""
    return math.sqrt(math.log1p(cv * cv))


def decides(rng, n: int, theta: float, sd: float, level: float, margin: float) -> bool:
    """Whether a fresh campaign of ``n`` log-normal runs a side (ln SD ``sd``, true ln ratio
    ``theta``) decides at ``level``: Welch's interval of the ln ratio excludes 0 or lies in
    ±ln(1 + margin).  Drawn through the sufficient statistics (normal means, χ² variances:
    the same distribution as ``n`` values a side), judged by scipy's t quantile."""
    mx, my = rng.normal(theta, sd / math.sqrt(n)), rng.normal(0.0, sd / math.sqrt(n))
    vx = sd * sd * rng.chisquare(n - 1) / (n - 1)
    vy = sd * sd * rng.chisquare(n - 1) / (n - 1)
    ux, uy = vx / n, vy / n
    df = (ux + uy) ** 2 / (ux * ux / (n - 1) + uy * uy / (n - 1))
    half = sps.t.ppf(0.5 + level / 2, df) * math.sqrt(ux + uy)
    lo, hi = mx - my - half, mx - my + half
    edge = math.log1p(margin)
    return bool(lo > 0 or hi < 0 or (-edge <= lo and hi <= edge))


def decide_rate(rng, n: int, theta: float, sd: float, level: float, margin: float,
                reps: int) -> float:
    """Share of ``reps`` fresh campaigns that :func:`decides` says decide (vectorised)."""
    mx = rng.normal(theta, sd / math.sqrt(n), reps)
    my = rng.normal(0.0, sd / math.sqrt(n), reps)
    ux = sd * sd * rng.chisquare(n - 1, reps) / (n - 1) / n
    uy = sd * sd * rng.chisquare(n - 1, reps) / (n - 1) / n
    df = (ux + uy) ** 2 / (ux * ux / (n - 1) + uy * uy / (n - 1))
    half = sps.t.ppf(0.5 + level / 2, df) * np.sqrt(ux + uy)
    lo, hi = mx - my - half, mx - my + half
    edge = math.log1p(margin)
    return float(np.mean((lo > 0) | (hi < 0) | ((-edge <= lo) & (hi <= edge))))


@dataclass
class PlanRate:
    """What the printed plan did over ``pilots`` simulated pilots of one cell: ``plans``
    printed, ``decided`` of them (a fresh campaign of the planned runs decided), ``none``
    (no plan printed although the pilot was undecided) and ``already`` (the pilot decided)."""

    pilots: int
    plans: int = 0
    decided: int = 0
    none: int = 0
    already: int = 0

    @property
    def rate(self) -> float | None:
        """Share of printed plans that decided; None without a plan."""
        return self.decided / self.plans if self.plans else None


def plan_rate(ratio: float, cv: float, n: int, pilots: int, seed: int, level: float = 0.95,
              margin: float = 0.05) -> PlanRate:
    """:class:`PlanRate` of ``pilots`` pilots of ``n`` log-normal runs a side at true
    ``ratio`` and ``cv``: each undecided pilot's plan (:func:`vhpc.core.logratio
    .runs_to_decide`, as the table prints it), then one fresh campaign of that many runs."""
    rng = np.random.default_rng(seed)
    sd, theta = ln_sd(cv), math.log(ratio)
    out = PlanRate(pilots)
    for _ in range(pilots):
        x, y = np.exp(rng.normal(theta, sd, n)), np.exp(rng.normal(0.0, sd, n))
        lw = logratio.log_welch(x, y)
        if logratio.decide(*lw.interval(level), margin) != logratio.UNDECIDED:
            out.already += 1
            continue
        runs = logratio.runs_to_decide(lw, level, margin)
        if runs is None:
            out.none += 1
            continue
        out.plans += 1
        out.decided += decides(rng, runs, theta, sd, level, margin)
    return out


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile (scipy.special.stdtrit), for the simulations' own intervals."""
    return float(special.stdtrit(df, q))
