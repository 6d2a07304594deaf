"""Memory-profile study analysis: NUMA penalty, MPKI classes, fit."""

import pytest

from vhpc.analysis.memprofile import TrialCounters, fit, intensity, profile


def tc(env, bench, seconds, cpi=None, mpki=None):
    return TrialCounters(env, bench, seconds, cpi, mpki)


def test_penalty_is_remote_over_local_cpi_with_classes():
    trials = [tc("local", "cg", 1.0, 1.0, 5.0), tc("local", "cg", 1.0, 1.2, 7.0),
              tc("remote", "cg", 2.0, 1.65), tc("remote", "cg", 2.0, 1.65),
              tc("local", "ep", 1.0, 0.5, 0.1), tc("remote", "ep", 1.0, 0.5)]
    rows = {r.benchmark: r for r in profile(trials)}
    assert rows["cg"].penalty == pytest.approx(1.65 / 1.1) and rows["cg"].basis == "cpi"
    assert rows["cg"].mpki == pytest.approx(6.0) and rows["cg"].intensity == "high"
    assert rows["ep"].penalty == pytest.approx(1.0) and rows["ep"].intensity == "low"


def test_without_counters_the_penalty_is_a_time_ratio_and_says_so():
    rows = profile([tc("local", "x", 2.0), tc("remote", "x", 3.0), tc("local", "y", 1.0)])
    assert len(rows) == 1  # y has no remote trial
    assert rows[0].penalty == pytest.approx(1.5) and rows[0].basis == "time"
    assert rows[0].mpki is None and rows[0].intensity is None


def test_intensity_class_boundaries_follow_seed_003():
    assert [intensity(x) for x in (0.5, 1.0, 3.0, 3.01, None)] == ["low", "medium", "medium", "high", None]


def test_fit_recovers_a_known_line():
    rows = profile([t for m in (0.5, 2.0, 4.0, 8.0)
                    for t in (tc("local", f"b{m}", 1, 1.0, m), tc("remote", f"b{m}", 1, 1.0 + 0.1 * m))])
    f = fit(rows)
    assert f.slope == pytest.approx(0.1) and f.intercept == pytest.approx(1.0)
    assert f.r2 == pytest.approx(1.0) and f.n == 4
    assert fit(rows[:2]) is None
