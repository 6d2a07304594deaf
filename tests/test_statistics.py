"""The analysis room against independent references (scipy's own routines, hand-worked
examples, the defining equations) — never against values taken from vhpc itself."""

import math

import numpy as np
import pytest
from scipy import stats

from vhpc import analysis
from vhpc.model import EnvInfo, Observation

ENVS = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "tcg")}


def obs(env, metric, values, higher=False, bench="b", warmup=False, valid=True, session=None):
    return [Observation(env, bench, "", metric, "u", higher, float(v), valid, warmup, i,
                        session_index=session if session is None else session + i)
            for i, v in enumerate(values)]


def test_student_t_interval_matches_scipy():
    x = np.array([10.1, 9.8, 10.4, 10.0, 9.7, 10.3])
    lo, hi = analysis.student_t_ci(x.mean(), x.std(ddof=1), len(x), 0.95)
    ref = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (lo, hi) == pytest.approx(ref, rel=1e-12)


def test_welch_p_value_matches_scipy_ttest():
    a = np.array([1.0, 1.2, 0.9, 1.1, 1.05])
    b = np.array([1.5, 1.9, 1.4, 2.2, 1.6, 1.7, 1.8])
    p, df = analysis.welch_test(a.mean(), a.var(ddof=1), len(a), b.mean(), b.var(ddof=1), len(b))
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert p == pytest.approx(ref.pvalue, rel=1e-10)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)  # Welch–Satterthwaite by hand
    assert df == pytest.approx((va + vb) ** 2 / (va**2 / 4 + vb**2 / 6))


def test_fieller_bounds_solve_the_defining_equation():
    a = np.array([12.0, 12.5, 11.8, 12.2, 12.9])
    b = np.array([10.0, 10.3, 9.9, 10.1, 10.4])
    lo, hi, df = analysis.fieller_interval(a.mean(), a.var(ddof=1), 5, b.mean(), b.var(ddof=1), 5)
    r = a.mean() / b.mean()
    assert lo < r < hi
    t = stats.t.ppf(0.975, df)
    sa2, sb2 = a.var(ddof=1) / 5, b.var(ddof=1) / 5
    for R in (lo, hi):
        assert (a.mean() - R * b.mean()) ** 2 == pytest.approx(t * t * (sa2 + R * R * sb2), rel=1e-9)


def test_fieller_is_unbounded_when_the_denominator_may_be_zero():
    lo, hi, _ = analysis.fieller_interval(1.0, 0.01, 3, 0.1, 1.0, 3)
    assert lo is None and hi is None


def holm(p):
    """Holm's step-down adjustment written out (Holm 1979)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    adj, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adj[i] = running
    return adj


def test_holm_adjustment_across_all_comparisons():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    rng = np.random.default_rng(1)
    data = []
    for m, shift in (("m1", 0.0), ("m2", 0.3), ("m3", 1.0)):
        data += obs("native", m, rng.normal(10, 1, 8)) + obs("vm", m, rng.normal(10 + shift, 1, 8))
    res = analysis.analyse(data, ENVS, "native")
    comps = sorted(res.comparisons, key=lambda c: c.metric)
    assert [c.p_adjusted for c in comps] == pytest.approx(holm([c.p_value for c in comps]))


def test_verdict_follows_the_metric_direction():
    data = (obs("native", "latency", [1.0, 1.1, 0.9, 1.0]) + obs("vm", "latency", [2.0, 2.1, 1.9, 2.0])
            + obs("native", "bw", [10, 11, 9, 10], higher=True) + obs("vm", "bw", [20, 21, 19, 20], higher=True))
    res = analysis.analyse(data, ENVS, "native")
    lat = res.comparison("b", "", "latency", "vm")
    bw = res.comparison("b", "", "bw", "vm")
    assert lat.verdict == analysis.SLOWER and lat.overhead_pct == pytest.approx(100.0)
    assert bw.verdict == analysis.FASTER and bw.overhead_pct == pytest.approx(-50.0)
    same = analysis.analyse(obs("native", "x", [1, 2, 3]) + obs("vm", "x", [1, 2, 3.1]), ENVS, "native")
    assert same.comparisons[0].verdict == analysis.NO_DIFFERENCE


def test_warmup_and_invalid_samples_are_excluded_but_counted():
    data = (obs("native", "t", [100.0], warmup=True) + obs("native", "t", [1.0, 2.0, 3.0])
            + obs("native", "t", [50.0], valid=False))
    s = analysis.analyse(data, ENVS, "native").summary("b", "", "t", "native")
    assert s.n == 3 and s.mean == pytest.approx(2.0) and s.n_invalid == 1
    assert s.median == 2.0 and s.stdev == pytest.approx(1.0)


def test_mad_rule_flags_the_crafted_outlier():
    # median 10, MAD 0.1 → modified z of 20 is 0.6745·10/0.1 ≫ 3.5; 10.2 is 1.35
    assert analysis.modified_z_outliers(np.array([9.9, 10.0, 10.1, 10.0, 10.2, 20.0])) == 1
    assert analysis.modified_z_outliers(np.array([9.9, 10.0, 10.1, 10.0, 10.2])) == 0


def test_cold_and_warm_groups_from_session_indices():
    data = obs("native", "t", [1, 1, 1]) + [
        Observation("vm", "b", "", "t", "s", False, v, True, False, 10 + i, session_index=k)
        for i, (v, k) in enumerate([(5.0, 0), (2.0, 1), (2.2, 2), (5.2, 0), (2.1, 1)])]
    res = analysis.analyse(data, ENVS, "native")
    cold = res.summary("b", "", "t", "vm", analysis.GROUP_COLD)
    warm = res.summary("b", "", "t", "vm", analysis.GROUP_WARM)
    assert cold.n == 2 and cold.mean == pytest.approx(5.1)
    assert warm.n == 3 and warm.mean == pytest.approx(2.1)
    assert res.has_cold_warm()


def test_tcg_is_always_a_finding():
    res = analysis.analyse(obs("native", "t", [1, 2, 3]) + obs("vm", "t", [1, 2, 3]), ENVS, "native")
    assert any("TCG emulation" in f.message and "vm" in f.message for f in res.findings)
