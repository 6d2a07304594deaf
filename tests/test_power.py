"""Power model (vhpc.core.stats) against Cohen's tables, a simulation and hand-computed values; the
"inconclusive" finding and its runs needed to decide."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from vhpc.core import power
from vhpc.analysis import INCONCLUSIVE, analyse
from vhpc.core.metrics import EnvInfo, Observation


# J. Cohen, Statistical Power Analysis (1988), Table 2.4.1: n per group for a two-tailed
# two-sample t-test at a = .05 and power .80: d = .2 -> 393, .5 -> 64, .8 -> 26 (the table
# comes from an approximation; the exact noncentral-t n for d = .2 is 393.4, i.e. 394).
@pytest.mark.parametrize("d, n_cohen", [(0.2, 393), (0.5, 64), (0.8, 26)])
def test_runs_needed_matches_cohens_table(d, n_cohen):
    cv = 0.04
    assert power.runs_needed(d * cv, cv, alpha=0.05) in (n_cohen, n_cohen + 1)


@pytest.mark.parametrize("d, n", [(0.2, 50), (0.5, 10), (1.0, 3), (2.0, 5), (0.05, 800)])
def test_power_matches_statsmodels(d, n):
    from statsmodels.stats.power import TTestIndPower

    ref = TTestIndPower().power(d, nobs1=n, alpha=0.05, alternative="two-sided")
    assert power.t_test_power(d, n) == pytest.approx(ref, rel=1e-6)


def test_runs_needed_has_the_power_it_claims_by_simulation():
    # 5 % effect, 4 % CV: simulate many campaigns with n runs per side and count rejections
    cv, effect = 0.04, 0.05
    n = power.runs_needed(effect, cv)
    rng = np.random.default_rng(7)
    a = rng.normal(1.0, cv, size=(20000, n))
    b = rng.normal(1.0 + effect, cv, size=(20000, n))
    p = sps.ttest_ind(a, b, axis=1).pvalue
    assert 0.78 <= float(np.mean(p < 0.05)) <= 0.86  # rounding n up gives a little more power
    p_less = sps.ttest_ind(a[:, :n - 2], b[:, :n - 2], axis=1).pvalue
    assert float(np.mean(p_less < 0.05)) < 0.8


def test_detectable_effect_inverts_runs_needed_and_normal_approximation():
    cv = 0.03
    for n in (3, 5, 10, 30):
        eff = power.detectable_effect(cv, n)
        assert power.runs_needed(eff * 1.0001, cv) == n
        # large-sample normal approximation d = (z_{.975} + z_{.8}) * sqrt(2/n), by hand:
        approx = (1.959964 + 0.841621) * math.sqrt(2.0 / n) * cv
        assert eff >= approx * 0.999  # the t test needs a little more than the normal one
    assert power.detectable_effect(cv, 1) is None
    assert power.detectable_effect(0.0, 5) == 0.0
    assert power.runs_needed(0.0, cv) is None
    assert power.runs_needed(1e-6, 0.5) is None  # not measurable in practice
    with pytest.raises(ValueError, match="cv must be >= 0"):
        power.runs_needed(0.05, -1.0)


def test_pooled_cv_and_clopper_pearson_by_hand():
    assert power.pooled_cv(3.0, 4.0, 10.0) == pytest.approx(math.sqrt(12.5) / 10.0)
    assert power.pooled_cv(1.0, 1.0, 0.0) is None
    lo, hi = power.proportion_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10))  # 0.3085
    lo, hi = power.proportion_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 10))
    assert power.proportion_interval(0, 0) is None


def _obs(env, values):
    return [Observation(environment=env, benchmark="b", params="", metric="time", unit="s",
                        higher_is_better=False, value=v, valid=True, warmup=False,
                        trial_id=i) for i, v in enumerate(values)]


ENVS = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}


def test_inconclusive_finding_names_the_runs_needed_to_decide():
    # a 6 % difference with ~5 % CV and 5 runs each: neither a difference nor within ±5 %
    x, y = [10.6, 11.2, 10.0, 10.9, 10.3], [10.0, 10.5, 9.5, 10.2, 9.8]
    a = analyse(_obs("native", y) + _obs("vm", x), ENVS, "native")
    c = a.comparisons[0]
    assert c.verdict == INCONCLUSIVE
    # planned on the pilot's uncertainty: the pooled ln SD at its 80 % upper bound
    # (χ², df 8) and the hardest ratio, half the margin (1.025), which must be told from both
    # 1 and 1.05: there a fresh campaign of the runs planned decides 80 % of the time, and one
    # of 80 % of those runs does not (simulated, scipy's t)
    import statsim

    lx, ly = np.log(x), np.log(y)
    sd = math.sqrt((np.var(lx, ddof=1) + np.var(ly, ddof=1)) / 2)
    sd_up = sd * math.sqrt(8 / sps.chi2.ppf(0.2, 8))
    rng = np.random.default_rng(3)
    half = math.log(1.05) / 2
    assert 0.78 <= statsim.decide_rate(rng, c.runs_needed, half, sd_up, 0.95, 0.05, 8000) <= 0.86
    assert statsim.decide_rate(rng, int(0.8 * c.runs_needed), half, sd_up, 0.95, 0.05, 8000) < 0.78
    f = next(f for f in a.findings if f.kind == "inconclusive")
    assert f.scope == "vm / b" and f"≈{c.runs_needed} runs each" in f.message
    assert "--repeats" in f.advice
    # from 3 runs a side no point plan: the finding says how many to run first
    few = analyse(_obs("native", y[:3]) + _obs("vm", x[:3]), ENVS, "native")
    assert few.comparisons[0].verdict == INCONCLUSIVE and few.comparisons[0].runs_needed is None
    f = next(f for f in few.findings if f.kind == "inconclusive")
    assert power.PILOT_ADVICE in f.message and "≈" not in f.message
    clear = analyse(_obs("native", [10.0, 10.1, 9.9, 10.0]) + _obs("vm", [12.0, 12.1, 11.9, 12.0]),
                    ENVS, "native")
    assert not any(f.kind == "inconclusive" for f in clear.findings)
