"""Statistics of the analysis room against independent reference values."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from scipy import special, stats

from vhpc.analysis import (
    FASTER,
    EQUIVALENT,
    INCONCLUSIVE,
    INSUFFICIENT,
    SLOWER,
    analyse,
    fieller_interval,
    holm_adjust,
    modified_z_outliers,
    overhead_pct,
    welch_test,
)
from vhpc.core.metrics import EnvInfo, Observation

ENVS = {
    "native": EnvInfo("native", "native"),
    "vm": EnvInfo("vm", "vm", "kvm", {"cpu": "x"}),
    "emu": EnvInfo("emu", "vm", "tcg"),
}


def obs(env, values, metric="time", unit="s", hib=False, bench="b", params="n=1", valid=True,
        warmup=False, sessions=None, start=0):
    """Observations of one group; sessions: list of session_index per value (or None)."""
    out = []
    for i, v in enumerate(values):
        out.append(
            Observation(
                environment=env, benchmark=bench, params=params, metric=metric, unit=unit,
                higher_is_better=hib, value=v, valid=valid, warmup=warmup, trial_id=start + i,
                session_index=None if sessions is None else sessions[i],
            )
        )
    return out


# Welch's t-test examples from Wikipedia, "Welch's t-test", Examples 1 and 2.
A1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
A2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
B1 = [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8]
B2 = [21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5, 23.6,
      21.5, 22.5, 23.5, 21.5, 21.8]


# ---------------------------------------------------------------- summaries


def test_summary_matches_independent_reference():
    x = [10.1, 9.8, 10.4, 10.0, 9.9, 10.3, 10.2]
    a = analyse(obs("native", x), ENVS, "native")
    s = a.summary("b", "n=1", "time", "native")
    assert s.n == 7 and s.n_invalid == 0 and s.group == "all"
    assert s.mean == pytest.approx(statistics.fmean(x))
    assert s.median == pytest.approx(statistics.median(x))
    assert s.stdev == pytest.approx(statistics.stdev(x))
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert (s.ci_low, s.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert s.cv == pytest.approx(statistics.stdev(x) / statistics.fmean(x))
    assert s.unit == "s" and s.higher_is_better is False


def test_confidence_level_is_applied():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    s = analyse(obs("native", x), ENVS, "native", confidence=0.99).summary("b", "n=1", "time", "native")
    lo, hi = stats.t.interval(0.99, 4, loc=3.0, scale=stats.sem(x))
    assert s.ci_low == pytest.approx(lo) and s.ci_high == pytest.approx(hi)


def test_single_sample_has_no_interval():
    s = analyse(obs("native", [4.2]), ENVS, "native").summary("b", "n=1", "time", "native")
    assert s.n == 1 and s.mean == 4.2 and s.median == 4.2
    assert s.stdev is None and s.ci_low is None and s.ci_high is None and s.cv is None


def test_warmup_excluded_and_invalid_counted():
    data = (
        obs("native", [1000.0, 2000.0], warmup=True)
        + obs("native", [10.0, 11.0, 12.0], start=2)
        + obs("native", [500.0, 600.0], valid=False, start=5)
        + obs("native", [float("nan"), float("inf")], start=7)
    )
    s = analyse(data, ENVS, "native").summary("b", "n=1", "time", "native")
    assert s.n == 3
    assert s.n_invalid == 4  # 2 failed verification + 2 non-finite; warm-ups are not counted
    assert s.mean == pytest.approx(11.0)


def test_all_invalid_group_is_reported_not_averaged():
    a = analyse(obs("native", [5.0, 6.0]) + obs("vm", [1.0, 2.0], valid=False), ENVS, "native")
    s = a.summary("b", "n=1", "time", "vm")
    assert s.n == 0 and s.n_invalid == 2 and s.mean is None
    c = a.comparison("b", "n=1", "time", "vm")
    assert c.verdict == INSUFFICIENT and c.ratio is None and c.p_value is None
    assert any(f.kind == "invalid" and "vhpc report ID --json" in f.advice for f in a.findings)


# ---------------------------------------------------------------- outliers (MAD)


def test_mad_outliers_crafted():
    # base: median 10.0; |x - median| sorted = 0,0,0,.1,.1,.1,.1,.2,d -> MAD = 0.1
    # threshold 3.5 * 1.4826 * 0.1 = 0.51891
    base = [9.8, 9.9, 9.9, 10.0, 10.0, 10.0, 10.1, 10.1]
    assert modified_z_outliers(np.array(base + [10.51])) == 0  # deviation 0.51 < 0.519
    assert modified_z_outliers(np.array(base + [10.53])) == 1  # deviation 0.53 > 0.519
    x = base + [50.0]
    assert modified_z_outliers(np.array(x)) == 1
    assert modified_z_outliers(np.array(base + [9.0])) == 1  # both tails
    # MAD = 0: fallback to 1.253314 * mean absolute deviation (= 1.253314 * 4/5 = 1.0027)
    assert modified_z_outliers(np.array([1.0, 1.0, 1.0, 1.0, 5.0])) == 1
    assert modified_z_outliers(np.array([3.0] * 6)) == 0
    a = analyse(obs("native", x), ENVS, "native")
    assert a.summary("b", "n=1", "time", "native").outliers == 1
    assert any(f.kind == "outliers" for f in a.findings)


# ---------------------------------------------------------------- Welch


def _hand_welch(x, y):
    """t, df and p from the textbook formulas; p via the regularised incomplete beta function
    (P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2)), not via scipy.stats.t."""
    va, vb = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    t = (statistics.fmean(x) - statistics.fmean(y)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    p = special.betainc(df / 2, 0.5, df / (df + t * t))
    return t, df, p


@pytest.mark.parametrize("x,y,p_book,df_book", [(A1, A2, 0.021, 24.99), (B1, B2, 0.149, 9.90)])
def test_welch_against_textbook_and_hand(x, y, p_book, df_book):
    p, df = welch_test(statistics.fmean(x), statistics.variance(x), len(x),
                       statistics.fmean(y), statistics.variance(y), len(y))
    assert p == pytest.approx(p_book, abs=6e-4)
    assert df == pytest.approx(df_book, abs=0.01)
    _, df_h, p_h = _hand_welch(x, y)
    assert p == pytest.approx(p_h, rel=1e-9) and df == pytest.approx(df_h, rel=1e-12)
    # and through analyse(): Welch on ln values (one comparison, so Holm leaves p unchanged)
    _, _, p_ln = _hand_welch(np.log(x), np.log(y))
    a = analyse(obs("vm", x) + obs("native", y), ENVS, "native")
    c = a.comparison("b", "n=1", "time", "vm")
    assert c.p_value == pytest.approx(p_ln, rel=1e-9)
    assert c.p_adjusted == pytest.approx(c.p_value)


def test_welch_degenerate_cases():
    assert welch_test(1.0, 0.0, 3, 2.0, 0.0, 3) == (0.0, None)
    assert welch_test(1.0, 0.0, 3, 1.0, 0.0, 3) == (1.0, None)
    assert welch_test(1.0, 0.1, 1, 2.0, 0.1, 5) == (None, None)
    a = analyse(obs("vm", [2.0, 2.0, 2.0]) + obs("native", [1.0, 1.0, 1.0]), ENVS, "native")
    c = a.comparison("b", "n=1", "time", "vm")
    assert c.p_value == 0.0 and c.verdict == SLOWER and c.ratio == 2.0 and c.ratio_ci == (2.0, 2.0)
    a = analyse(obs("vm", [1.0, 1.0, 1.0]) + obs("native", [1.0, 1.0, 1.0]), ENVS, "native")
    c = a.comparison("b", "n=1", "time", "vm")
    assert c.p_value == 1.0 and c.verdict == EQUIVALENT and c.ratio_ci == (1.0, 1.0)
    a = analyse(obs("vm", [1.5]) + obs("native", [1.0, 1.1, 0.9]), ENVS, "native")
    c = a.comparison("b", "n=1", "time", "vm")
    assert c.verdict == INSUFFICIENT and c.p_value is None and c.p_adjusted is None
    # one centre for every ratio: the geometric means', also without an interval
    from scipy.stats import gmean
    assert c.ratio == pytest.approx(1.5 / gmean([1.0, 1.1, 0.9]), rel=1e-12)
    assert c.ratio_ci == (None, None)
    assert any(f.kind == "few-samples" and "--repeats" in f.advice for f in a.findings)


# ---------------------------------------------------------------- Fieller


def test_fieller_defining_property_and_containment():
    x, y = A2, A1  # ratio mean(A2)/mean(A1) ≈ 1.09
    a_, b_ = statistics.fmean(x), statistics.fmean(y)
    va, vb = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    lo, hi, df = fieller_interval(a_, statistics.variance(x), len(x), b_, statistics.variance(y), len(y))
    r = a_ / b_
    # Welch–Satterthwaite df of a − R̂·b, by hand
    df_h = (va + r * r * vb) ** 2 / (va**2 / (len(x) - 1) + r**4 * vb**2 / (len(y) - 1))
    assert df == pytest.approx(df_h)
    t = stats.t.ppf(0.975, df_h)
    for bound in (lo, hi):
        assert (a_ - bound * b_) ** 2 == pytest.approx(t * t * (va + bound * bound * vb), rel=1e-9)
    assert lo < r < hi
    # the Fieller interval is not symmetric around R̂ (it is for the delta method): check it is
    # wider on the side away from zero when the denominator is uncertain
    assert (hi - r) > (r - lo)
    # positive data are compared on the log scale (tests/test_verdicts.py); data with a value
    # <= 0 by Welch's difference of means (a ratio of means of either sign can flip the
    # direction), at the comparison's level: scipy's Welch interval and p
    shift = [v - min(y) for v in y]  # the baseline now has a 0
    c = analyse(obs("vm", x) + obs("native", shift), ENVS, "native").comparison("b", "n=1", "time", "vm")
    ref = stats.ttest_ind(x, shift, equal_var=False)
    assert c.ratio_ci_method == "welch-difference" and c.p_value == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert c.difference_ci == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_fieller_unbounded_when_denominator_ci_contains_zero():
    lo, hi, df = fieller_interval(5.0, 1.0, 5, 0.5, 4.0, 3)  # baseline mean 0.5 ± huge
    assert lo is None and hi is None and df is not None
    a = analyse(obs("vm", [5.0, 5.5, 4.5]) + obs("native", [-1.0, 0.5, 2.0]), ENVS, "native")
    assert a.comparison("b", "n=1", "time", "vm").ratio_ci == (None, None)


# ---------------------------------------------------------------- Holm


def test_holm_hand_worked_example():
    # sorted: .01*3 = .03; .03*2 = .06; .04*1 = .04 -> max(.06, .04) = .06
    assert holm_adjust([0.01, 0.04, 0.03]) == [pytest.approx(0.03), pytest.approx(0.06), pytest.approx(0.06)]
    assert holm_adjust([0.5, 0.9]) == [pytest.approx(1.0), pytest.approx(1.0)]
    assert holm_adjust([]) == []


def _hand_holm(ps):
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    adj, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adj[i] = running
    return adj


def test_holm_runs_across_the_primary_metrics_of_the_campaign():
    rng = np.random.default_rng(7)
    data = []
    for k, shift in enumerate([0.0, 0.02, 0.05, 0.3]):  # one benchmark each: 4 primary metrics
        data += obs("native", list(10 + rng.normal(0, 0.2, 6)), metric=f"m{k}", bench=f"b{k}")
        data += obs("vm", list(10 * (1 + shift) + rng.normal(0, 0.2, 6)), metric=f"m{k}", bench=f"b{k}")
        data += obs("emu", list(10 * (1 + 2 * shift) + rng.normal(0, 0.2, 6)), metric=f"m{k}", bench="c")
    data += obs("native", list(10 + rng.normal(0, 0.2, 6)), metric="m0", bench="c")
    a = analyse(data, ENVS, "native")
    with_p = [c for c in a.comparisons if c.p_value is not None]
    assert len(with_p) == 5  # 4 vm comparisons + 1 emu comparison (other emu metrics lack a baseline)
    assert {c.role for c in with_p} == {"primary"} and {c.family_size for c in with_p} == {5}
    expected = _hand_holm([c.p_value for c in with_p])
    assert [c.p_adjusted for c in with_p] == [pytest.approx(e) for e in expected]
    assert any(f.kind == "baseline-missing" and "c[n=1]" in f.message for f in a.findings)


# ---------------------------------------------------------------- verdict and overhead direction


def test_verdict_direction_lower_is_better():
    a = analyse(obs("vm", [11.0, 11.1, 10.9, 11.05]) + obs("native", [10.0, 10.1, 9.9, 10.05]), ENVS, "native")
    c = a.comparison("b", "n=1", "time", "vm")
    assert c.verdict == SLOWER
    assert c.overhead_pct == pytest.approx((c.ratio - 1) * 100) and c.overhead_pct > 0
    a = analyse(obs("vm", [9.0, 9.1, 8.9, 9.05]) + obs("native", [10.0, 10.1, 9.9, 10.05]), ENVS, "native")
    c = a.comparison("b", "n=1", "time", "vm")
    assert c.verdict == FASTER and c.overhead_pct < 0


def test_verdict_direction_higher_is_better():
    bw = dict(metric="bw", unit="GB/s", hib=True)
    a = analyse(obs("vm", [8.0, 8.1, 7.9, 8.05], **bw) + obs("native", [10.0, 10.1, 9.9, 10.05], **bw), ENVS, "native")
    c = a.comparison("b", "n=1", "bw", "vm")
    assert c.verdict == SLOWER  # lower bandwidth is worse for the user
    gm = stats.gmean([8.0, 8.1, 7.9, 8.05]) / stats.gmean([10.0, 10.1, 9.9, 10.05])
    assert c.ratio == pytest.approx(gm)
    assert c.overhead_pct == pytest.approx((1 / gm - 1) * 100)
    lo, hi = c.ratio_ci
    assert c.overhead_ci == (pytest.approx((1 / hi - 1) * 100), pytest.approx((1 / lo - 1) * 100))
    a = analyse(obs("vm", [12.0, 12.1, 11.9, 12.05], **bw) + obs("native", [10.0, 10.1, 9.9, 10.05], **bw), ENVS, "native")
    c = a.comparison("b", "n=1", "bw", "vm")
    assert c.verdict == FASTER and c.overhead_pct < 0


def test_not_significant_and_alpha():
    x = [10.0, 10.5, 9.5, 10.2, 9.8]
    y = [10.1, 10.6, 9.6, 10.3, 9.9]
    # scipy: Welch on ln values, 95 % interval of the ratio [0.9557, 1.0674]
    ci = stats.ttest_ind(np.log(y), np.log(x), equal_var=False).confidence_interval(0.95)
    c = analyse(obs("vm", y) + obs("native", x), ENVS, "native").comparison("b", "n=1", "time", "vm")
    assert c.ratio_ci == (pytest.approx(math.exp(ci.low)), pytest.approx(math.exp(ci.high)))
    assert c.verdict == INCONCLUSIVE and c.p_adjusted >= 0.05 and c.runs_needed > 5  # > +5 %
    c = analyse(obs("vm", y) + obs("native", x), ENVS, "native", margin=0.1).comparison(
        "b", "n=1", "time", "vm")
    assert c.verdict == EQUIVALENT  # inside [1/1.1, 1.1]
    # the same data is "slower" when alpha is above its p-value
    c2 = analyse(obs("vm", y) + obs("native", x), ENVS, "native", alpha=0.999).comparison("b", "n=1", "time", "vm")
    assert c2.verdict == SLOWER
    with pytest.raises(ValueError, match="alpha"):
        analyse([], ENVS, "native", alpha=1.5)
    with pytest.raises(ValueError, match="confidence"):
        analyse([], ENVS, "native", confidence=0)


def test_overhead_pct_function():
    assert overhead_pct(1.25, False) == pytest.approx(25.0)
    assert overhead_pct(0.8, True) == pytest.approx(25.0)
    assert overhead_pct(None, True) is None and overhead_pct(0.0, True) is None


# ---------------------------------------------------------------- cold / warm


def test_cold_warm_groups():
    vm_vals = [20.0, 10.0, 10.2, 21.0, 10.1, 9.9]
    sess = [0, 1, 2, 0, 1, 2]
    data = obs("vm", vm_vals, sessions=sess) + obs("native", [10.0, 10.1, 9.9, 10.0])
    a = analyse(data, ENVS, "native")
    cold = a.summary("b", "n=1", "time", "vm", "cold")
    warm = a.summary("b", "n=1", "time", "vm", "warm")
    assert cold.n == 2 and cold.mean == pytest.approx(20.5)
    assert warm.n == 4 and warm.mean == pytest.approx(10.05)
    assert a.summary("b", "n=1", "time", "vm").n == 6
    # native has no sessions: no cold/warm groups for it
    assert a.summary("b", "n=1", "time", "native", "cold") is None
    assert a.has_cold_warm()
    # comparisons are made on the "all" group only
    assert len(a.comparisons) == 1
    assert not analyse(obs("native", [1.0, 2.0]), ENVS, "native").has_cold_warm()


# ---------------------------------------------------------------- findings, export


def test_findings():
    data = (
        obs("native", [10.0, 10.1, 9.9, 10.0])
        + obs("emu", [30.0, 36.0, 27.0, 33.0])  # CV ≈ 12 %
        + obs("ghost", [1.0, 1.0, 1.0])
    )
    a = analyse(data, ENVS, "native")
    kinds = {f.kind for f in a.findings}
    assert {"tcg", "high-variation", "unknown-environment"} <= kinds
    tcg = next(f for f in a.findings if f.kind == "tcg")
    assert tcg.message == (
        "results of emu come from TCG emulation, not hardware virtualization: overheads are not KVM overheads"
    )
    assert tcg.level == "warn" and tcg.scope == "emu"
    hv = next(f for f in a.findings if f.kind == "high-variation")
    assert hv.scope == "emu / b[n=1]" and "time" in hv.message and "--repeats" in hv.advice
    assert a.environments["ghost"].kind == "unknown"
    assert a.environment_order()[0] == "native"
    assert a.emulated() == ["emu"]
    # warnings are listed before infos
    levels = [f.level for f in a.findings]
    assert levels == sorted(levels, key=lambda x: 0 if x == "warn" else 1)


def test_baseline_absent_from_campaign():
    a = analyse(obs("vm", [1.0, 2.0, 3.0]), ENVS, "native")
    assert a.comparisons == []
    assert any(f.kind == "baseline-missing" and f.scope == "campaign" for f in a.findings)


def test_to_dict_is_strict_json():
    data = obs("native", [1.0, 1.0]) + obs("vm", [2.0]) + obs("emu", [3.0, 3.5, 2.5])
    d = analyse(data, ENVS, "native").to_dict()
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    assert back["baseline"] == "native"
    assert {s["environment"] for s in back["summaries"]} == {"native", "vm", "emu"}
    emu = next(c for c in back["comparisons"] if c["environment"] == "emu")
    assert emu["accel"] == "tcg" and emu["emulated"] is True
    assert back["environments"]["vm"]["fingerprint"] == {"cpu": "x"}
