"""The fast paths of vhpc.core.stats give exactly what the library calls they replace give
(issue 31: analysis of 10^6 samples without changing any result)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from vhpc.core import stats


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
            assert stats.t_test_power(d, n, alpha) == _power_by_distributions(d, n, alpha), (d, n)


def test_power_still_matches_statsmodels():
    from statsmodels.stats.power import TTestIndPower

    for d, n in ((0.5, 20), (1.2, 8), (0.1, 500)):
        want = TTestIndPower().power(effect_size=d, nobs1=n, alpha=0.05, ratio=1.0)
        assert stats.t_test_power(d, n, 0.05) == pytest.approx(want, rel=1e-9)
