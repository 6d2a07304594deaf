"""Metric pairs: a benchmark declares that two of its metrics measure one effect
(:attr:`vhpc.core.metrics.Metric.inverse_of`, ``same_as``), and the analysis gives them one
verdict; nothing is inferred from the data.

* On real native runs of vhpc's own kernels, every declared pair holds: the product (inverse)
  or the quotient (same) of the two values is one constant over the trials, to the printed
  precision.
* A custom benchmark declares a pair in its campaign entry; a partner that is no metric of it,
  or of the wrong direction, is a one-line error.
* Two undeclared metrics whose product is constant stay two comparisons.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from vhpc import benchmarks
from vhpc.analysis import analyse
from vhpc.analysis.checks import pair_specs
from vhpc.benchmarks.base import RunContext
from vhpc.benchmarks.custom import from_mapping
from vhpc.core.metrics import EnvInfo, Observation

ENVS = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}

#: (benchmark, parameters): cheap real runs (well under a second each on 2 cores)
REAL = [("npb-ep", {"class": "S", "threads": 1}), ("npb-cg", {"class": "S", "threads": 1}),
        ("linpack", {"n": 300})]
#: the kernels print 6 significant digits: a product of two such values varies by < 1e-5
PRINTED = 1e-5


@pytest.mark.parametrize("name,params", REAL)
def test_declared_pairs_hold_on_real_runs(kernels_built, name, params):
    bench = benchmarks.get(name)
    assert bench.pairs(), f"{name} declares no pair"
    resolved = bench.resolve(params)
    ctx = RunContext(kernels_built, 2)
    env = dict(os.environ, **bench.environ(resolved, ctx))
    trials = []
    for _ in range(3):
        proc = subprocess.run(bench.command(resolved, ctx), capture_output=True, text=True,
                              timeout=120, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        samples = bench.parse(resolved, proc.stdout, proc.stderr, proc.returncode)
        trials.append({s.metric: s.value for s in samples if s.valid})
    for metric, partner, kind in bench.pairs():
        assert {metric, partner} <= set(trials[0])
        per_trial = [t[metric] * t[partner] if kind == "inverse" else t[metric] / t[partner]
                     for t in trials]
        assert max(per_trial) - min(per_trial) <= 4 * PRINTED * max(per_trial), per_trial
    # the figures themselves moved between trials: the constancy above is not trivial
    assert len({t[bench.pairs()[0][1]] for t in trials}) > 1


def obs(env, metric, unit, hib, values, bench="app", first=0):
    return [Observation(env, bench, "", metric, unit, hib, v, True, False, first + i)
            for i, v in enumerate(values)]


def time_and_rate(bench: str) -> list[Observation]:
    """loop (s) and rate (1/s) with rate x loop = 500 in every trial."""
    data = []
    for env, ts, first in (("native", [10.0, 10.2, 9.9, 10.1], 0),
                           ("vm", [10.6, 10.9, 10.7, 10.8], 10)):
        data += obs(env, "loop", "s", False, ts, bench, first)
        data += obs(env, "rate", "1/s", True, [500 / t for t in ts], bench, first)
    return data


def test_undeclared_metrics_are_not_paired_from_their_values():
    a = analyse(time_and_rate("app"), ENVS, "native")
    roles = {a.comparison("app", "", m, "vm").role for m in ("loop", "rate")}
    assert not roles & {"inverse", "same"}


def test_a_custom_benchmark_declares_a_pair_in_its_campaign_entry():
    entry = {"name": "app", "command": ["true"], "metrics": [
        {"name": "loop", "regex": "loop ([0-9.]+)", "unit": "s", "direction": "lower"},
        {"name": "rate", "regex": "rate ([0-9.]+)", "unit": "1/s", "direction": "higher",
         "inverse_of": "loop"}]}
    assert from_mapping(entry).pairs() == (("rate", "loop", "inverse"),)
    pairs = pair_specs({"custom": [entry]})
    assert pairs == {"app": (("rate", "loop", "inverse"),)}
    a = analyse(time_and_rate("app"), ENVS, "native", pairs=pairs)
    loop, rate = (a.comparison("app", "", m, "vm") for m in ("loop", "rate"))
    assert {loop.role, rate.role} == {"primary", "inverse"}
    assert loop.verdict == rate.verdict
    assert loop.overhead_pct == pytest.approx(rate.overhead_pct)


@pytest.mark.parametrize("pair,needle", [
    ({"inverse_of": "nope"}, "must name another of its metrics"),
    ({"inverse_of": "rate"}, "must name another of its metrics"),
    ({"same_as": "loop"}, "needs the same direction; use inverse_of"),
])
def test_a_bad_declared_pair_is_a_one_line_error(pair, needle):
    entry = {"name": "app", "command": ["true"], "metrics": [
        {"name": "loop", "regex": "loop ([0-9.]+)", "unit": "s", "direction": "lower"},
        {"name": "rate", "regex": "rate ([0-9.]+)", "unit": "1/s", "direction": "higher",
         **pair}]}
    with pytest.raises(ValueError, match=needle) as exc:
        from_mapping(entry)
    assert "\n" not in str(exc.value)
