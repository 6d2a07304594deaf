"""Every sentence about a comparison holds at its stated rate under real noise:
seeded simulations of log-normal campaigns (tests/statsim.py), judged by scipy.  The small
grids run in ``make test``; the ``heavy`` ones, run by ``make bench``
(``pytest -m heavy -s tests/test_stat_rates.py``), print the rates docs/statistics.md tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

import statsim
from vhpc.analysis import EQUIVALENT, FASTER, SLOWER, analyse
from vhpc.analysis.compare import verdict_of
from vhpc.campaign import paper_findings as F
from vhpc.core import logratio, power, stats
from vhpc.core.metrics import EnvInfo, Observation

RATIOS, CVS, PILOTS = (1.0, 1.1, 1.5), (0.05, 0.2, 0.4), (5, 10, 20)


def _plan_grid(pilots: int, ratios=RATIOS, cvs=CVS, sizes=PILOTS):
    return {(r, cv, n): statsim.plan_rate(r, cv, n, pilots, seed=59 + i)
            for i, (r, cv, n) in enumerate((r, cv, n) for r in ratios for cv in cvs
                                           for n in sizes)}


def test_the_printed_plan_decides_8_times_in_10_from_a_real_pilot():
    # a plug-in plan (the pilot's ratio and SD) would decide 21-55 % of the time at CV 40 %:
    # a printed plan decides >= 0.75 of the time in every cell where one is printed
    grid = _plan_grid(100)
    for cell, got in grid.items():
        if got.plans:
            assert got.rate >= 0.75, (cell, got)
    # and says "no plan" where none is honest: at CV 40 % and ±5 % about half the pilots'
    # spreads, at their upper bound, need over 2,000 runs a side (the true one needs ~1,500)
    for n in PILOTS:
        got = grid[(1.0, 0.4, n)]
        assert got.none >= 0.25 * (got.pilots - got.already), got
    assert grid[(1.0, 0.2, 10)].none == 0 and grid[(1.0, 0.2, 10)].plans


def test_the_plan_in_words_states_its_probability_and_why_there_is_none():
    assert power.plan_text(120, 10) == ("≈120 runs each: decides 8 times in 10 whatever the "
                                        "ratio, if the spread is within its 80 % bound")
    assert power.plan_text(None, 10).startswith("no plan: over 2,000 runs a side")
    assert power.plan_text(None, 4) == power.PILOT_ADVICE


@pytest.mark.heavy
def test_heavy_plan_grid():
    """The table of docs/statistics.md: 600 pilots a cell, the hardest ratio (1.025) too."""
    grid = _plan_grid(600, ratios=(1.0, 1.025, 1.1, 1.5), cvs=CVS, sizes=PILOTS)
    print("\n| ratio | CV | pilot | plans | decided | no plan | pilot decided |")
    print("|---|---|---|---|---|---|---|")
    for (r, cv, n), g in grid.items():
        rate = f"{g.rate:.3f}" if g.rate is not None else "–"
        print(f"| {r:g} | {cv * 100:g} % | {n} | {g.plans} | {rate} | {g.none} | {g.already} |")
    for cell, g in grid.items():
        if g.plans >= 20:
            assert g.rate >= 0.75, (cell, g)


# --- paper lines: the table's decision for the line's own band -------------------------------


def _claim(claim, **kw):
    return F.Finding(study="s", seed="000_ab.txt", where="Fig. 1", quote="a stated finding",
                     claim=claim, **kw)


NO_DIFFERENCE = _claim("direction", expect="no-difference", tolerance=5)
WITHIN_15 = _claim("within_pct", value=15)


def test_no_difference_found_does_not_agree_with_a_row_the_table_calls_slower():
    # 1.016 [1.007, 1.027] is "slower" in the table, so the finding must not read
    # "equivalent within ±5 % → agrees"
    assert verdict_of(1.007, 1.027, False, 0.05) == SLOWER
    outcome, why = F.verdict(NO_DIFFERENCE, 1.016, (1.007, 1.027), 10, False)
    assert outcome == F.DISAGREES and why.endswith(": slower")
    assert F.verdict(NO_DIFFERENCE, 1.01, (0.98, 1.04), 10, False)[0] == F.AGREES


def test_a_within_line_reads_one_orientation_and_plans_for_its_own_band():
    # the partition study's "within 15 %" (mops, higher is better): the page and the reason
    # read one orientation (not 0.937 [0.854, 1.029] on one and 1.067 [0.972, 1.171] on the
    # other), and the plan is for the 15 % band, not the table's ±5 % ("≈38 runs")
    asked = []

    def plan(band):
        asked.append(band)
        return 61
    outcome, why = F.verdict(WITHIN_15, 1 / 0.937, (1 / 1.029, 1 / 0.854), 10, False,
                             runs=38, higher_is_better=True, plan=plan)
    assert outcome == F.CANNOT_TELL
    assert "0.937 [0.854, 1.029]" in why and "1.067" not in why
    assert asked == [0.15] and "≈61 runs each" in why and "38" not in why
    # without a plan of its own band, the table's ±5 % plan is not passed off as one
    assert "38" not in F.verdict(WITHIN_15, 1.067, (0.972, 1.171), 10, False, runs=38)[1]


def test_paper_lines_agree_only_where_the_table_decides_so_for_their_band():
    rng = np.random.default_rng(591)
    slower = _claim("direction", expect="slower")
    within_5 = _claim("within_pct", value=5)
    agreed = 0
    for _ in range(1000):
        n = int(rng.integers(3, 21))
        ratio, cv = math.exp(rng.uniform(-0.15, 0.2)), rng.uniform(0.01, 0.3)
        sd = statsim.ln_sd(cv)
        x, y = np.exp(rng.normal(math.log(ratio), sd, n)), np.exp(rng.normal(0, sd, n))
        lw = logratio.log_welch(x, y)
        lo, hi = lw.interval(0.95)
        for f, band in ((NO_DIFFERENCE, 0.05), (WITHIN_15, 0.15), (within_5, 0.05),
                        (slower, 0.05)):
            outcome, _ = F.verdict(f, lw.ratio, (lo, hi), n, False)
            table = verdict_of(lo, hi, False, band)
            if outcome != F.AGREES:
                continue
            agreed += 1
            if f is slower:
                assert table == SLOWER
            elif f is NO_DIFFERENCE:
                assert table == EQUIVALENT
            else:  # within: equivalent, or a difference wholly inside the band
                assert table == EQUIVALENT or (table in (SLOWER, FASTER)
                                               and logratio.within_margin(lo, hi, band))
    assert agreed > 400  # the rule is exercised, not vacuous


# --- --method rank: one distribution for p, interval and verdict -----------------------------


ENVS = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm"),
        "vm2": EnvInfo("vm2", "vm", "kvm")}


def _obs(env, values):
    return [Observation(environment=env, benchmark="b", params="", metric="time", unit="s",
                        higher_is_better=False, value=float(v), valid=True, warmup=False,
                        trial_id=i) for i, v in enumerate(values)]


def test_the_rank_verdict_reads_the_p_it_shows():
    # 1.06 [1.0096, 1.1753]: a p from scipy's normal approximation (0.0505) beside the interval
    # of the exact distribution would read "slower" against its own p; verdict, p and interval
    # agree
    x = [1.05, 1.08, 1.06, 1.14, 1.05]
    y = [1.0, 0.87, 1.0, 1.03, 0.97, 1.15, 1.04]
    c = analyse(_obs("native", y) + _obs("vm", x), ENVS, "native", method="rank").comparisons[0]
    assert (c.verdict in (SLOWER, FASTER)) == (c.p_value < 0.05)
    assert (c.ratio_ci[0] > 1) == (c.p_value < 0.05)


def test_rank_verdicts_never_disagree_with_their_p_over_1000_campaigns_with_ties():
    rng = np.random.default_rng(592)
    rows = 0
    for _ in range(500):  # two environments a campaign: 1,000 rows in families of 2
        n = int(rng.integers(4, 16))
        sd = statsim.ln_sd(rng.uniform(0.02, 0.1))
        vals = {e: np.round(np.exp(rng.normal(r, sd, n)), 2)  # rounded: ties
                for e, r in (("native", 0.0), ("vm", rng.uniform(-0.05, 0.08)),
                             ("vm2", rng.uniform(-0.05, 0.08)))}
        obs = [o for e, v in vals.items() for o in _obs(e, v)]
        for c in analyse(obs, ENVS, "native", method="rank").comparisons:
            rows += 1
            decided = c.verdict in (SLOWER, FASTER)
            assert decided == (c.p_adjusted < 0.05), (c.verdict, c.p_value, c.p_adjusted,
                                                        c.ratio_ci)
    assert rows == 1000


@pytest.mark.parametrize("kind", ["normal", "log-normal", "outliers"])
def test_the_rank_interval_covers_95_percent_of_the_time(kind):
    rng = np.random.default_rng(593)
    covered, reps, shift = 0, 1500, math.log(1.04)
    for _ in range(reps):
        n, m = 8, 12
        if kind == "normal":
            a, b = rng.normal(10, 1, n), rng.normal(10, 1, m)
        elif kind == "log-normal":
            a, b = np.exp(rng.normal(0, 0.2, n)), np.exp(rng.normal(0, 0.2, m))
        else:  # one run in ten 3 times slower
            a, b = np.exp(rng.normal(0, 0.05, n)), np.exp(rng.normal(0, 0.05, m))
            a[rng.random(n) < 0.1] *= 3
            b[rng.random(m) < 0.1] *= 3
        x = a * math.exp(shift)  # a pure shift on the log scale
        _, lo, hi = stats.hodges_lehmann(np.log(x), np.log(b), 0.95)
        covered += lo <= shift <= hi
    assert covered / reps >= 0.94


@pytest.mark.parametrize("sizes", [(5, 5), (10, 10), (20, 20), (8, 16)])
def test_unequal_spreads_are_flagged_where_the_rank_interval_would_under_cover(sizes):
    # ln SD 15 % against 5 %: the Mann-Whitney interval under-covers (0.70-0.90); the note
    # "spreads differ" is then shown, so a rank interval covers or is flagged >= 0.94
    rng = np.random.default_rng(594)
    ok, reps = 0, 1000
    for _ in range(reps):
        lx, ly = rng.normal(0.05, 0.15, sizes[0]), rng.normal(0, 0.05, sizes[1])
        _, lo, hi = stats.hodges_lehmann(lx, ly, 0.95)
        flagged = bool(logratio.spread_note(np.exp(lx), np.exp(ly)))
        ok += flagged or (lo is not None and lo <= 0.05 <= hi)
    assert ok / reps >= 0.94


# --- the normality / outlier diagnostic ------------------------------------------------------


@pytest.mark.parametrize("n", [8, 20, 50])
def test_the_diagnostic_fires_at_most_6_percent_on_log_normal_data(n):
    # it fired 18-26 % (modified z-scores at 3.5 a side, pooled residuals of unequal spreads);
    # Shapiro-Wilk calibrated for the sizes, Grubbs at 0.1 % a side: 4.8-5.2 % (heavy test)
    rng = np.random.default_rng(595 + n)
    reps, fired = 2500, 0
    for _ in range(reps):  # spreads 3:1: the model still fits (Welch)
        x, y = np.exp(rng.normal(0.1, 0.15, n)), np.exp(rng.normal(0, 0.05, n))
        fired += bool(logratio.diagnose(x, y))
    assert fired / reps <= 0.06


def _skewed_fired(reps: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    fired = 0
    for _ in range(reps):  # ln values gamma with shape 4: skewness 2/√4 = 1
        x, y = np.exp(rng.gamma(4, 0.05, 20)), np.exp(rng.gamma(4, 0.05, 20))
        fired += bool(logratio.diagnose(x, y))
    return fired / reps


def test_the_diagnostic_sees_a_skewness_of_1_about_half_the_time_at_20_runs():
    # 0.505 over 12,000 draws (the heavy test); 2,000 here: a standard error of 0.011
    assert _skewed_fired(2000, 597) >= 0.47


@pytest.mark.heavy
def test_heavy_diagnostic_rates():
    """The diagnostic's rates in docs/statistics.md: 10,000 draws a cell."""
    print("\n| data | runs a side | fired |")
    print("|---|---|---|")
    for n in (8, 20, 50):
        rng = np.random.default_rng(700 + n)
        fired = sum(bool(logratio.diagnose(np.exp(rng.normal(0.1, 0.15, n)),
                                           np.exp(rng.normal(0, 0.05, n))))
                    for _ in range(10000)) / 10000
        print(f"| log-normal, ln SD 15 % vs 5 % | {n} | {fired:.3f} |")
        assert fired <= 0.06
    skewed = _skewed_fired(12000, 701)
    print(f"| ln values of skewness 1 (gamma, shape 4) | 20 | {skewed:.3f} |")
    assert skewed >= 0.5


# --- vhpc calibrate's sentences ---------------------------------------------------------------


def _bounded(ks, n: int, above: float) -> float:
    """Share of draws ``ks`` (successes of ``n``) whose Clopper-Pearson 95 % upper bound, by
    scipy, is ≤ ``above``."""
    from scipy.stats import binomtest

    upper = {int(k): binomtest(int(k), n).proportion_ci().high for k in set(ks.tolist())}
    return float(np.mean([upper[int(k)] <= above for k in ks]))


@pytest.mark.parametrize("k,n", [(0, 10), (2, 10), (0, 20)])
def test_each_calibration_sentence_holds_at_its_stated_probability(k, n):
    from vhpc.workflows.calibrate import rate_reading

    r = rate_reading(k, n, 0.05)
    rng = np.random.default_rng(598 + k + n)
    planned, need = r["planned_rate"], r["campaigns_to_bound"]
    if need is None:  # "no number of campaigns bounds it below 10 %" at the rate seen
        assert planned >= 0.1
        assert _bounded(rng.binomial(2000, planned, 1000), 2000, 0.1) == 0
        return
    # "≈N campaigns would bound it below 10 % 8 times in 10 if the true rate is α = 5 %":
    # draw N campaigns at that rate, bound by scipy's Clopper-Pearson interval
    bounded = _bounded(rng.binomial(need, planned, 4000), need, 0.1)
    assert bounded >= 0.79, bounded  # 0.8 less 1.6 standard errors (0.0063)
    # a plan from a true rate of 0 (36 campaigns) bounds it only about 16 times in 100 at α
    assert _bounded(rng.binomial(36, 0.05, 4000), 36, 0.1) < 0.2


def test_the_diagnostic_parts_against_scipy_and_grubbs_table():
    # the calibration's W for many draws at once is scipy's W
    rng = np.random.default_rng(5)
    for n in (16, 41):
        coef = logratio._shapiro_coefficients(n)
        assert coef is not None  # this scipy exposes its routine: the fast path is taken
        x = np.sort(rng.standard_normal(n))
        w = ((x[::-1][: n // 2] - x[: n // 2]) @ coef) ** 2 / ((x - x.mean()) ** 2).sum()
        assert w == pytest.approx(sps.shapiro(x).statistic, rel=1e-12)
    # Grubbs' two-sided critical value for n = 10 at 5 %: 2.290 (Grubbs 1969, Table I)
    base = np.array([-1.0, -0.8, -0.5, -0.2, 0.0, 0.1, 0.3, 0.6, 0.9])

    def g(v):
        z = np.append(base, v)
        return np.max(np.abs(z - z.mean())) / z.std(ddof=1)
    lo_v = next(v for v in np.arange(1.0, 10, 0.001) if g(v) > 2.28)
    hi_v = next(v for v in np.arange(1.0, 10, 0.001) if g(v) > 2.30)
    assert not stats.grubbs_outlier(np.append(base, lo_v), 0.05)
    assert stats.grubbs_outlier(np.append(base, hi_v), 0.05)
