"""vhpc.core.stats against scipy and hand-computed references; honest ratio intervals end to end."""

from __future__ import annotations

import csv
import json
import math
import statistics

import numpy as np
import pytest
from scipy import stats as sps

from vhpc.core import stats
from vhpc.analysis import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER, analyse
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report import fmt_ratio
from vhpc.report.export import write_csv, write_json

ENVS = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}

# skewed positive samples like the demo's randomaccess GUP/s (one fast trial among slow ones)
# and noise max_detour (one huge detour), for which Fieller gave [-0.083, 0.259] and
# [-1.909, 21.162]
RA_NATIVE = [0.0112, 0.0109, 0.0114, 0.0110, 0.0111]
RA_VM = [0.00031, 0.00029, 0.00450, 0.00030, 0.00032]
ND_NATIVE = [11.0, 12.5, 10.2, 11.8, 9.9]
ND_VM = [21.0, 310.0, 38.0, 26.0, 58.0]


def obs(env, values, metric="m", hib=False, bench="b"):
    return [Observation(env, bench, "", metric, "u", hib, float(v), True, False, i)
            for i, v in enumerate(values)]


def test_student_t_ci_and_precision_match_scipy():
    x = [10.1, 9.8, 10.4, 10.0, 9.9]
    lo, hi = stats.student_t_ci(statistics.fmean(x), statistics.stdev(x), 5, 0.9)
    ref = sps.t.interval(0.9, 4, loc=np.mean(x), scale=sps.sem(x))
    assert (lo, hi) == (pytest.approx(ref[0]), pytest.approx(ref[1]))
    rel = stats.relative_halfwidth(x)
    assert rel == pytest.approx(sps.t.ppf(0.975, 4) * statistics.stdev(x) / math.sqrt(5) / 10.04)
    assert stats.relative_halfwidth([3.0]) is None and stats.relative_halfwidth([-1, 1]) is None
    assert stats.imprecise_keys({"a": x, "b": [1.0], "c": [5.0, 5.0]}, 0.02) == ["a", "b"]


@pytest.mark.parametrize("vm,native", [(RA_VM, RA_NATIVE), (ND_VM, ND_NATIVE)])
def test_skewed_positive_ratio_interval_stays_positive(vm, native):
    ma, mb = statistics.fmean(vm), statistics.fmean(native)
    f_lo, _, _ = stats.fieller_interval(ma, statistics.variance(vm), 5, mb, statistics.variance(native), 5)
    assert f_lo < 0  # the case of the issue: Fieller's bound is negative
    # the comparison takes Welch's t on ln values: a positive interval around the ratio of
    # geometric means, scipy's Welch interval of the ln values exponentiated
    c = analyse(obs("vm", vm) + obs("native", native), ENVS, "native").comparisons[0]
    ci = sps.ttest_ind(np.log(vm), np.log(native), equal_var=False).confidence_interval(c.level)
    g = sps.gmean(vm) / sps.gmean(native)
    assert c.ratio_ci_method == stats.LOG_WELCH and 0 < c.ratio_ci[0] < g < c.ratio_ci[1]
    assert c.ratio_ci == (pytest.approx(math.exp(ci.low)), pytest.approx(math.exp(ci.high)))


def test_fieller_kept_where_valid_and_unbounded_otherwise():
    x, y = [11.0, 11.1, 10.9, 11.05], [10.0, 10.1, 9.9, 10.05]
    ri = stats.ratio_interval(x, y)
    assert ri.method == stats.FIELLER and ri.low > 1.0 and ri.side == 1
    # baseline with values around 0 (not a positive quantity): Fieller's set is unbounded
    ri = stats.ratio_interval([5.0, 5.5, 4.5], [-1.0, 0.5, 2.0])
    assert ri.method == stats.FIELLER and ri.unbounded and ri.low is None
    a = analyse(obs("vm", [5.0, 5.5, 4.5]) + obs("native", [-1.0, 0.5, 2.0]), ENVS, "native")
    c = a.comparisons[0]
    # the table compares such data by the difference of means (Welch), not by Fieller
    assert fmt_ratio(c).startswith("Δ +4.5") and c.ratio_ci_method == "welch-difference"
    # by hand: a = 5, s_a² = 0.25/3; b = 0.5, s_b² = 2.25/3; R̂ = 10; Welch–Satterthwaite df of
    # a − R̂b = (s_a² + R̂²s_b²)² / (s_a⁴/2 + R̂⁴s_b⁴/2) ≈ 2.004, t ≈ 4.30 (scipy's t table).
    sa2, sb2 = 0.25 / 3, 2.25 / 3
    df = (sa2 + 100 * sb2) ** 2 / (sa2**2 / 2 + 10**4 * sb2**2 / 2)
    assert df == pytest.approx(2.0044, abs=1e-4)
    t2 = sps.t.ppf(0.975, df) ** 2
    assert 0.5**2 < t2 * sb2  # b² < t² s_b²: the set is unbounded
    def inside(r):
        return (5.0 - r * 0.5) ** 2 <= t2 * (sa2 + r * r * sb2)

    # 1 lies in the gap of the two rays (4.5² = 20.25 > t²·(s_a² + s_b²) ≈ 15.4), but the set
    # holds ratios far above 1 and negative ones alike: no direction, so no verdict either way
    assert not inside(1.0) and inside(100.0) and inside(-100.0)
    assert stats.fieller_contains(1.0, 5.0, 0.25, 3, 0.5, 2.25, 3) is False
    # values <= 0: no log scale; Welch's p of the difference, by scipy
    ref = sps.ttest_ind([5.0, 5.5, 4.5], [-1.0, 0.5, 2.0], equal_var=False)
    assert c.p_value == pytest.approx(ref.pvalue) and "difference of means" in c.note
    assert c.verdict == (SLOWER if ref.confidence_interval().low > 0 else INCONCLUSIVE)


def test_no_exported_ratio_interval_has_a_negative_bound(tmp_path):
    data = (obs("native", RA_NATIVE, "gups", hib=True, bench="randomaccess")
            + obs("vm", RA_VM, "gups", hib=True, bench="randomaccess")
            + obs("native", ND_NATIVE, "max_detour", bench="noise")
            + obs("vm", ND_VM, "max_detour", bench="noise"))
    a = analyse(data, ENVS, "native")
    write_json(a, data, tmp_path / "r.json")
    write_csv(a, data, tmp_path / "s.csv", tmp_path / "c.csv")
    doc = json.loads((tmp_path / "r.json").read_text())
    with (tmp_path / "c.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(doc["comparisons"]) == len(rows) == 2
    for d, r in zip(doc["comparisons"], rows):
        assert d["ratio_ci"][0] > 0 and float(r["ratio_ci_low"]) > 0
        assert d["ratio_ci_method"] == r["ratio_ci_method"] == "log-welch"
        assert d["ratio_ci"][0] < d["ratio"] < d["ratio_ci"][1]


def test_verdict_never_contradicts_the_interval():
    rng = np.random.default_rng(11)
    seen = set()
    for k in range(120):
        n, m = rng.integers(2, 9, 2)
        shape = rng.choice(["normal", "lognormal"])
        shift = rng.choice([1.0, 1.03, 1.3, 3.0])
        if shape == "normal":
            y = rng.normal(10, rng.uniform(0.1, 6), m)
            x = rng.normal(10 * shift, rng.uniform(0.1, 6), n)
        else:
            y = rng.lognormal(0, rng.uniform(0.1, 2), m)
            x = shift * rng.lognormal(0, rng.uniform(0.1, 2), n)
        hib = bool(k % 2)
        a = analyse(obs("vm", x, hib=hib) + obs("native", y, hib=hib), ENVS, "native")
        c = a.comparisons[0]
        lo, hi = c.ratio_ci
        seen.add((c.verdict, c.ratio_ci_method))
        if c.ratio_ci_method == "welch-difference":  # values <= 0: the difference's interval
            d_lo, d_hi = c.difference_ci
            worse_lo, worse_hi = (-d_hi, -d_lo) if hib else (d_lo, d_hi)
            assert (c.verdict == SLOWER) == (worse_lo > 0)
            assert (c.verdict == FASTER) == (worse_hi < 0)
            continue
        if (x > 0).all() and (y > 0).all() and lo is not None:
            assert lo > 0
        if c.verdict in (SLOWER, FASTER):
            assert lo is not None and not lo <= 1.0 <= hi
            above = lo > 1.0
            assert (c.verdict == SLOWER) == (above != hib)
        elif lo is not None:
            assert lo <= 1.0 <= hi
            w_lo, w_hi = (1 / hi, 1 / lo) if hib else (lo, hi)
            inside = 1 / 1.05 <= w_lo and w_hi <= 1.05
            assert c.verdict == (EQUIVALENT if inside else INCONCLUSIVE)
    verdicts = {v for v, _ in seen}
    assert {SLOWER, FASTER, INCONCLUSIVE} <= verdicts
    assert {"welch-difference", "log-welch"} <= {m for _, m in seen}


def test_figure_error_bars_follow_the_interval_and_stay_above_zero():
    from vhpc.report.figures import ratio_error_bar, relative_bars

    data = (obs("native", RA_NATIVE, "gups", hib=True) + obs("vm", RA_VM, "gups", hib=True))
    c = analyse(data, ENVS, "native").comparisons[0]
    below, above = ratio_error_bar(c.ratio, c.ratio_ci)
    assert (c.ratio - below, c.ratio + above) == (pytest.approx(c.ratio_ci[0]), pytest.approx(c.ratio_ci[1]))
    assert c.ratio - below > 0
    # an interval from Fieller with a negative bound (not a positive quantity) is cut at 0
    assert ratio_error_bar(0.5, (-0.2, 0.9)) == (0.5, pytest.approx(0.4))
    assert ratio_error_bar(2.0, (None, None)) == (0.0, 0.0)
    assert "<svg" in relative_bars(analyse(data, ENVS, "native"))


def test_one_welch_computation_matches_scipy_for_two_and_four_samples():
    """welch_test, welch_difference and the four-sample difference contrast are one Welch
    computation: scipy's two-sample test (from summary statistics too, one side without
    variation) and a hand-computed four-term Welch–Satterthwaite df."""
    a, b = [3.1, 2.9, 3.4, 3.0], [2.0, 2.2, 1.9]
    ref = sps.ttest_ind(a, b, equal_var=False)
    d, lo, hi, df, p = stats.welch_difference(a, b, 0.9)
    ci = ref.confidence_interval(0.9)
    assert (d, lo, hi, p) == pytest.approx((np.mean(a) - np.mean(b), ci.low, ci.high, ref.pvalue))
    p2, df2 = stats.welch_test(5.0, 0.0, 4, 4.0, 2.0, 5)
    r2 = sps.ttest_ind_from_stats(5.0, 0.0, 4, 4.0, 2.0 ** 0.5, 5, equal_var=False)
    assert p2 == pytest.approx(r2.pvalue) and df2 == pytest.approx(4.0)  # all from one side
    c = [1.0, 1.5, 0.5, 1.2, 0.8]
    e, lo4, hi4, df4, p4 = stats.difference_contrast((a, b, c, b), (1, -1, -1, 1), 0.95)
    us = [np.var(s, ddof=1) / len(s) for s in (a, b, c, b)]
    want_df = sum(us) ** 2 / sum(u * u / (len(s) - 1) for u, s in zip(us, (a, b, c, b)))
    half = sps.t.ppf(0.975, want_df) * sum(us) ** 0.5
    assert e == pytest.approx(np.mean(a) - np.mean(c)) and df4 == pytest.approx(want_df)
    assert (lo4, hi4) == pytest.approx((e - half, e + half))
    assert p4 == pytest.approx(2 * sps.t.sf(abs(e) / sum(us) ** 0.5, want_df))
