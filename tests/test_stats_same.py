"""The fast paths of vhpc.core.stats give exactly what the library calls they replace give
(analysis of 10^6 samples without changing any result)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from vhpc.core import power, stats


@pytest.mark.parametrize("seed", range(5))
def test_holm_is_statsmodels_holm_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    ps = list(rng.random(60) ** 3)
    ps += ps[:7] + [0.0, 1.0, 0.5, 0.5]  # ties, the ends, values whose adjustment exceeds 1
    rng.shuffle(ps)
    want = [float(x) for x in multipletests(ps, alpha=0.05, method="holm")[1]]
    assert stats.holm_adjust(ps) == want
    assert stats.holm_adjust([]) == []
    assert stats.holm_adjust([0.2]) == [0.2]


def _power_by_distributions(d, n, alpha):
    df = 2.0 * n - 2.0
    crit = float(sps.t.ppf(1.0 - alpha / 2.0, df))
    nc = d * math.sqrt(n / 2.0)
    p = float(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))
    return min(1.0, p) if math.isfinite(p) else 1.0


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
def test_power_is_the_distribution_objects_value_bit_for_bit(alpha):
    for d in (0.0, 1e-3, 0.05, 0.3, 1.0, 2.5, 10.0, 200.0):
        for n in (2, 2.5, 3, 7.3, 30, 400, 2000):
            assert power.t_test_power(d, n, alpha) == _power_by_distributions(d, n, alpha), (d, n)


def test_power_still_matches_statsmodels():
    from statsmodels.stats.power import TTestIndPower

    for d, n in ((0.5, 20), (1.2, 8), (0.1, 500)):
        want = TTestIndPower().power(effect_size=d, nobs1=n, alpha=0.05, ratio=1.0)
        assert power.t_test_power(d, n, 0.05) == pytest.approx(want, rel=1e-9)


def test_t_intervals_are_scipys_bit_for_bit():
    for n in (2, 3, 10, 57, 10_000):
        for c in (0.5, 0.9, 0.95, 0.99, 0.999):
            for mean, sd in ((0.0, 1.0), (123.456, 7.89), (-3.2, 1e-9), (1e12, 3e9)):
                lo, hi = sps.t.interval(c, n - 1, loc=mean, scale=sd / math.sqrt(n))
                assert stats.student_t_ci(mean, sd, n, c) == (float(lo), float(hi))
            for df in (1.0, 2.5, 30.0, 1e6, math.inf):
                assert stats._tq(c, df) == float(sps.t.ppf(0.5 + c / 2.0, df))
    assert math.isnan(stats._tq(0.95, math.nan))  # edge cases still go through scipy


def test_describe_counts_outliers_as_modified_z_outliers():
    rng = np.random.default_rng(3)
    for x in (rng.normal(0, 1, 500), np.r_[rng.normal(10, 1, 50), [100.0, -80.0]],
              np.ones(9), np.r_[np.ones(9), [5.0]]):
        assert stats.describe(list(x)).outliers == stats.modified_z_outliers(x)
