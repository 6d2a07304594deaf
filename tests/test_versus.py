"""Pairs between any two groups (analysis.versus, the evidence of the paper lines) use the one
model the campaign table uses: the ratio of geometric means with the interval of Welch's t on
ln values, and the verdict read off that interval.  Expected values come from scipy
(``scipy.stats.ttest_ind(..., equal_var=False)`` on ln values and its confidence interval),
not from the code under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from vhpc.analysis import analyse, versus
from vhpc.core.metrics import EnvInfo, Observation

#: fixed samples of a 20x bandwidth drop: native 40, 20, 60 GB/s; the VM at 2.0, 2.4, 1.6
NATIVE = (40.0, 20.0, 60.0)
VM = (2.0, 2.4, 1.6)
#: a second VM at 10 % under the first one's bandwidth, not Holm-adjusted with anything
VM2 = (1.9, 2.1, 1.5)


def _analysis(groups: dict[str, tuple[float, ...]], unit="GB/s", hib=True, metric="triad_bw"):
    obs = [Observation(env, "stream", "", metric, unit, hib, v, valid=True, warmup=False,
                       trial_id=i * 100 + j, session_index=None)
           for i, (env, vals) in enumerate(groups.items()) for j, v in enumerate(vals)]
    envs = {n: EnvInfo(n, "native" if n == "native" else "vm",
                       None if n == "native" else "kvm", {}) for n in groups}
    return analyse(obs, envs, "native")


def _scipy_ratio(x, y, level=0.95):
    """(ratio, low, high, p) of geometric means x / y from scipy's Welch test on ln values."""
    res = sps.ttest_ind(np.log(x), np.log(y), equal_var=False)
    ci = res.confidence_interval(level)
    delta = float(np.mean(np.log(x)) - np.mean(np.log(y)))
    return math.exp(delta), math.exp(ci.low), math.exp(ci.high), float(res.pvalue)


def test_a_pair_between_two_vms_is_the_ratio_of_geometric_means_with_welchs_log_interval():
    a = _analysis({"native": NATIVE, "vm": VM, "vm2": VM2})
    (p,) = [p for p in versus.pairs(a, versus="vm") if p.environment == "vm2"]
    ratio, lo, hi, pv = _scipy_ratio(VM2, VM)
    assert p.ratio == pytest.approx(ratio, rel=1e-9)
    assert (p.low, p.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert p.p == pytest.approx(pv, rel=1e-9)
    assert p.method == "log-welch" and p.level == 0.95
    # not the arithmetic ratio of means (1.8333 / 2.0 = 0.9167): the geometric one, 0.9088
    assert p.ratio != pytest.approx(np.mean(VM2) / np.mean(VM), rel=1e-4)
    # the interval [0.71, 1.16] contains 1 and leaves ±5 %: inconclusive, as the table reads it
    assert lo < 1 < hi and p.verdict == "inconclusive"


def test_a_pair_against_the_baseline_is_the_tables_comparison():
    """One number per effect: the pair of an environment against the baseline (one metric, so
    no Holm family: level 1 − α) carries the same ratio, interval and verdict as the table."""
    a = _analysis({"native": NATIVE, "vm": VM})
    (c,) = a.comparisons
    (p,) = versus.pairs(a)
    ratio, lo, hi, pv = _scipy_ratio(VM, NATIVE)
    assert c.level == pytest.approx(0.95)
    assert p.verdict == c.verdict
    assert (p.ratio, p.low, p.high, p.p) == pytest.approx((c.ratio, *c.ratio_ci, c.p_value),
                                                         rel=1e-12)
    # the 20x bandwidth drop, t = 8.5 on the log scale, p 0.0063: slower
    assert p.ratio == pytest.approx(ratio, rel=1e-9) and p.p == pytest.approx(pv, rel=1e-9)
    assert p.high == pytest.approx(hi, rel=1e-9) and p.high < 1 and p.verdict == "slower"


def test_a_pair_of_cold_against_warm_decides_equivalent_within_the_margin():
    vals = (1.00, 1.01, 0.99, 1.00, 1.005, 0.995)
    obs = [Observation("vm", "npb-is", "", "time", "s", False, v * (1.01 if s == 0 else 1.0),
                       valid=True, warmup=False, trial_id=i, session_index=s)
           for i, (v, s) in enumerate(zip(vals * 2, (0,) * 6 + (1,) * 6))]
    obs += [Observation("native", "npb-is", "", "time", "s", False, v, valid=True,
                        warmup=False, trial_id=100 + i, session_index=None)
            for i, v in enumerate(vals)]
    envs = {"native": EnvInfo("native", "native", None, {}), "vm": EnvInfo("vm", "vm", "kvm", {})}
    a = analyse(obs, envs, "native")
    (p,) = versus.pairs(a, "cold", "self", "warm")
    ratio, lo, hi, _ = _scipy_ratio([v * 1.01 for v in vals], list(vals))
    assert p.ratio == pytest.approx(ratio, rel=1e-9) and p.low == pytest.approx(lo, rel=1e-9)
    # [1.0047, 1.0153]: above 1, so slower (a 1 % effect measured precisely), not equivalent
    assert lo > 1 and p.verdict == "slower"


def test_a_pair_with_values_at_or_below_zero_is_read_by_the_difference_of_means():
    """No log scale for values ≤ 0: no ratio (one of means of either sign can flip the
    direction); the verdict read off Welch's interval of the difference of means, as the table
    reads it; checked against scipy."""
    x, y = (-1.0, 2.0, 3.0, 4.0), (2.0, 2.2, 1.8, 2.1)
    a = _analysis({"native": (5.0,) * 4, "vm": y, "vm2": x}, unit="J", hib=False,
                  metric="delta")
    (p,) = [p for p in versus.pairs(a, versus="vm") if p.environment == "vm2"]
    assert p.method == "welch-difference" and p.ratio is None and p.p is None
    s_x = a.summary("stream", "", "delta", "vm2")
    s_y = a.summary("stream", "", "delta", "vm")
    d, lo, hi = versus.summary_difference(s_x, s_y)
    ci = sps.ttest_ind(x, y, equal_var=False).confidence_interval()
    assert (d, lo, hi) == pytest.approx((np.mean(x) - np.mean(y), ci.low, ci.high))
    assert p.verdict == ("faster" if ci.high < 0 else "slower" if ci.low > 0 else "inconclusive")


@pytest.mark.parametrize("lo, hi", [(0.97, 1.04), (0.951, 1.04), (0.953, 1.049), (0.96, 1.051),
                                    (1.01, 1.04), (0.9, 1.2)])
def test_a_within_pct_line_agrees_exactly_when_the_interval_is_in_the_tables_band(lo, hi):
    """Seed 004's "within 5 %" on a paper line and ``--margin 5%`` in the table are one band,
    [1/1.05, 1.05] (0.95238..): 0.951 is outside it, 0.953 inside; [1.01, 1.04] is within 5 %
    too, though the table calls it slower (the interval excludes 1, the stronger word)."""
    from vhpc.analysis.compare import verdict_of
    from vhpc.campaign import paper_findings as F

    f = F.Finding(study="noise", seed="004_2f6700c948358fb8.txt", where="Sec. 6",
                  quote="a quote of ten chars", claim="within_pct", value=5)
    agrees = F.verdict(f, 1.0, (lo, hi), 5, False)[0] == F.AGREES
    assert agrees == (1 / 1.05 <= lo and hi <= 1.05)
    assert verdict_of(lo, hi, False, 0.05) == ("slower" if lo > 1 else "equivalent" if agrees
                                               else "inconclusive")


def test_a_pair_with_one_run_a_side_is_the_ratio_of_geometric_means_without_verdict():
    a = _analysis({"native": NATIVE, "vm": VM, "vm2": (1.9,)})
    (p,) = [p for p in versus.pairs(a, versus="vm") if p.environment == "vm2"]
    assert p.ratio == pytest.approx(1.9 / sps.gmean(VM), rel=1e-12)
    assert (p.low, p.high, p.p, p.verdict) == (None, None, None, "insufficient data")
