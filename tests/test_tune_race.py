"""The race's decisions on synthetic stored samples: a candidate 30 % slower than another is
dropped, candidates within ±0.5 % of each other end equivalent within a 2 % tolerance, native's
round-to-round drift cancels, and a budget stops the race."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from vhpc.workflows.tune.race import (ELIMINATED, EQUIVALENT, LEADER, Settings, costs, next_round, replay)


@dataclass(frozen=True)
class Obs:
    environment: str
    round: int
    value: float
    benchmark: str = "b"
    params: str = ""
    metric: str = "time"
    higher_is_better: bool = False
    valid: bool = True
    warmup: bool = False


def _samples(factors: dict[str, float], rounds: int, noise: float, seed: int = 1,
             drift: float = 0.0) -> list[Obs]:
    """Times per round: native 1.0 × (1 + drift·round), each candidate ``factor`` × that, each
    value with independent relative noise."""
    rng = random.Random(seed)
    out = []
    for r in range(1, rounds + 1):
        base = 1.0 + drift * r
        out.append(Obs("native", r, base * (1 + rng.gauss(0, noise))))
        for env, f in factors.items():
            out.append(Obs(env, r, base * f * (1 + rng.gauss(0, noise))))
    return out


def test_clearly_slower_candidate_is_eliminated_and_the_other_leads():
    s = Settings(candidates=("fast", "slow"), min_rounds=3)
    obs = _samples({"fast": 1.10, "slow": 1.10 * 1.30}, rounds=6, noise=0.02)
    st = replay(obs, range(1, 7), s)
    assert st.finished and st.reason == "one remains"
    assert st.standings["fast"].status == LEADER
    slow = st.standings["slow"]
    assert slow.status == ELIMINATED and slow.p < 0.05 and 3 <= slow.round <= 6
    # the ratio to native is the geometric mean of the per-round ratios: about 1.10
    assert st.standings["fast"].ratio == pytest.approx(1.10, rel=0.03)
    lo, hi = st.standings["fast"].ci
    assert lo < st.standings["fast"].ratio < hi


def test_equivalent_candidates_stop_the_race_within_tolerance():
    s = Settings(candidates=("a", "b"), tolerance=0.02, min_rounds=3)
    obs = _samples({"a": 1.2, "b": 1.2 * 1.002}, rounds=10, noise=0.003, seed=3)
    st = replay(obs, range(1, 11), s)
    assert st.finished and st.reason == "equivalent within tolerance"
    assert {x.status for x in st.standings.values()} == {LEADER, EQUIVALENT}
    eq = next(x for x in st.standings.values() if x.status == EQUIVALENT)
    assert eq.tost_p < 0.05


def test_a_difference_larger_than_the_tolerance_is_never_called_equivalent():
    # 5 % apart with noise too large to separate them in 4 rounds: no decision, not "equivalent"
    s = Settings(candidates=("a", "b"), tolerance=0.02, min_rounds=3)
    obs = _samples({"a": 1.0, "b": 1.05}, rounds=4, noise=0.08, seed=5)
    st = replay(obs, range(1, 5), s)
    assert not st.finished
    assert all(x.status != EQUIVALENT for x in st.standings.values())


def test_native_drift_cancels_because_rounds_are_paired():
    # native gets 10 % slower every round; the candidates keep their factor to it
    s = Settings(candidates=("a", "b"), min_rounds=3)
    obs = _samples({"a": 1.5, "b": 2.0}, rounds=6, noise=0.01, drift=0.10)
    per = costs(obs, "native")
    assert all(v == pytest.approx(0.405, abs=0.05) for v in per["a"].values())  # ln 1.5
    st = replay(obs, range(1, 7), s)
    assert st.standings["a"].status == LEADER and st.standings["b"].status == ELIMINATED


def test_higher_is_better_metrics_count_as_cost_inverted():
    obs = [Obs("native", 1, 10.0, higher_is_better=True), Obs("x", 1, 5.0, higher_is_better=True)]
    assert costs(obs, "native")["x"][1] == pytest.approx(0.6931, abs=1e-3)  # half the bandwidth


def test_no_decision_before_min_rounds_and_budget_stops():
    s = Settings(candidates=("a", "b"), min_rounds=3, budget=10)
    obs = _samples({"a": 1.0, "b": 3.0}, rounds=2, noise=0.01)
    st = replay(obs, [1, 2], s)
    assert not st.rounds and not st.finished
    planned = [Obs(e, 3, 0) for e in ("native", "a", "b")]
    trials, why = next_round(st, planned, used=9, s=s)
    assert trials == [] and why == "budget spent"
    trials, why = next_round(st, planned, used=6, s=s)
    assert [t.environment for t in trials] == ["native", "a", "b"] and why is None


def test_eliminated_candidates_are_left_out_of_the_next_round():
    obs = _samples({"a": 1.0, "b": 2.0, "c": 1.01}, rounds=4, noise=0.01)
    s = Settings(candidates=("a", "b", "c"), min_rounds=3, tolerance=0.001)
    st = replay(obs, range(1, 5), s)
    assert st.standings["b"].status == ELIMINATED
    planned = [Obs(e, 5, 0) for e in ("native", "a", "b", "c")]
    trials, _ = next_round(st, planned, used=0, s=Settings(candidates=s.candidates, budget=100))
    assert "b" not in [t.environment for t in trials] and "native" in [t.environment for t in trials]


def test_per_benchmark_ratios_split_the_combined_cost():
    from vhpc.workflows.tune.race import per_benchmark

    obs = []
    for r in (1, 2, 3):
        obs += [Obs("native", r, 1.0, benchmark="x"), Obs("c", r, 2.0, benchmark="x"),
                Obs("native", r, 1.0, benchmark="y"), Obs("c", r, 1.0, benchmark="y")]
    per = per_benchmark(obs, "native", "c")
    assert per["x"][0] == pytest.approx(2.0) and per["y"][0] == pytest.approx(1.0)
    combined = costs(obs, "native")["c"]
    assert all(v == pytest.approx(0.3466, abs=1e-3) for v in combined.values())  # ln(2)/2: sqrt(2)
