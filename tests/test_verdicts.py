"""The verdicts agree with their numbers (docs/statistics.md): one model (Welch's t
on ln values, the interval at the family's Holm level, the verdict read off it), four outcomes,
the right family, checks that are not metrics, one overhead, a slowdown that holds.

Expected values come from scipy and statsmodels directly, never from vhpc's own statistics."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from vhpc.analysis import (EQUIVALENT, FASTER, INCONCLUSIVE, INSUFFICIENT, SLOWER, analyse)
from vhpc.core import logratio as vstats
from vhpc.core.metrics import EnvInfo, Observation

ENVS = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}
ROOT = Path(__file__).resolve().parents[1]


def obs(env, values, metric="time", unit="s", hib=False, bench="b", params="", trial0=0):
    return [Observation(env, bench, params, metric, unit, hib, float(v), True, False, trial0 + i)
            for i, v in enumerate(values)]


def scipy_interval(x, y, level):
    """exp of scipy's Welch interval of mean(ln x) − mean(ln y) at ``level``."""
    r = stats.ttest_ind(np.log(x), np.log(y), equal_var=False)
    ci = r.confidence_interval(level)
    return math.exp(ci.low), math.exp(ci.high), r.pvalue


def read_verdict(lo, hi, hib, margin):
    """The four outcomes, re-derived here from the printed interval (the rule, not vhpc's code)."""
    if hib:
        lo, hi = 1 / hi, 1 / lo
    if lo > 1:
        return SLOWER
    if hi < 1:
        return FASTER
    if lo >= 1 / (1 + margin) and hi <= 1 + margin:
        return EQUIVALENT
    return INCONCLUSIVE


# ------------------------------------------------------------------ one model


@pytest.mark.parametrize("x,y", [([18, 14, 24], [2.2, 1.9, 2.4]), ([2.0, 2.4, 1.6], [40, 20, 60]),
                                 ([10.1, 10.6, 9.6, 10.3, 9.9], [10.0, 10.5, 9.5, 10.2, 9.8])])
def test_interval_and_test_are_one_statistic(x, y):
    lw = vstats.log_welch(x, y)
    lo, hi, p = scipy_interval(x, y, 0.95)
    assert lw.p == pytest.approx(p, rel=1e-9)
    assert lw.interval(0.95) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert lw.ratio == pytest.approx(stats.gmean(x) / stats.gmean(y), rel=1e-12)
    # the interval at level 1 − p has 1 on its edge: excludes 1 exactly when p < 1 − level
    edge = lw.interval(1 - p)
    assert min(abs(edge[0] - 1), abs(edge[1] - 1)) < 1e-9


def test_the_issue_samples_read_as_their_intervals_say():
    """native 40, 20, 60 GB/s vs 2.0, 2.4, 1.6 (Fieller's [0.021, 23.2] and p 0.16 before):
    on the log scale t ≈ 8.5, p ≈ 0.007; ten benchmarks of 2.2, 1.9, 2.4 µs vs 18, 14, 24
    (Holm p 0.35 before); one equal within 1 %."""
    data = obs("native", [40, 20, 60], "bw", "GB/s", True, "bw") + \
        obs("vm", [2.0, 2.4, 1.6], "bw", "GB/s", True, "bw")
    for k in range(10):
        data += obs("native", [2.2, 1.9, 2.4], "lat", "us", False, f"lat{k}")
        data += obs("vm", [18, 14, 24], "lat", "us", False, f"lat{k}")
    data += obs("native", [100.0, 100.2, 99.8], bench="eq") + obs("vm", [100.3, 100.5, 100.1], bench="eq")
    a = analyse(data, ENVS, "native", margin=0.05)
    ps = {c.benchmark: stats.ttest_ind(np.log([o.value for o in data if o.environment == "vm"
                                                and o.benchmark == c.benchmark]),
                                        np.log([o.value for o in data if o.environment == "native"
                                                and o.benchmark == c.benchmark]),
                                        equal_var=False).pvalue for c in a.comparisons}
    holm = dict(zip(ps, multipletests(list(ps.values()), 0.05, "holm")[1]))
    rejected = dict(zip(ps, multipletests(list(ps.values()), 0.05, "holm")[0]))
    assert ps["bw"] == pytest.approx(0.0063, abs=5e-4)
    verdicts = {}
    for c in a.comparisons:
        assert c.role == "primary" and c.family_size == 12
        assert c.p_adjusted == pytest.approx(holm[c.benchmark], rel=1e-9)
        lo, hi = c.ratio_ci
        assert read_verdict(lo, hi, c.higher_is_better, 0.05) == c.verdict  # agrees with interval
        assert (c.verdict in (SLOWER, FASTER)) == bool(rejected[c.benchmark])  # and with Holm
        verdicts[c.benchmark] = c.verdict
    assert verdicts["bw"] == SLOWER and verdicts["eq"] == EQUIVALENT
    assert all(verdicts[f"lat{k}"] == SLOWER for k in range(10))
    bw = a.comparison("bw", "", "bw", "vm")
    x, y = [2.0, 2.4, 1.6], [40, 20, 60]
    lo, hi, _ = scipy_interval(x, y, bw.level)
    assert bw.ratio_ci == (pytest.approx(lo), pytest.approx(hi))


@pytest.mark.parametrize("seed", range(12))
def test_holm_level_agrees_with_holm_on_every_comparison(seed):
    """Random families: the interval at :func:`holm_level` excludes 1 exactly when
    statsmodels' Holm rejects."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 9))
    samples = []
    for _ in range(m):
        shift = float(rng.choice([0.0, 0.05, 0.2, 0.6]))
        y = np.exp(rng.normal(0, 0.1, 4))
        x = np.exp(rng.normal(shift, 0.1, 4))
        samples.append((x, y))
    ps = [stats.ttest_ind(np.log(x), np.log(y), equal_var=False).pvalue for x, y in samples]
    reject = multipletests(ps, 0.05, "holm")[0]
    level = vstats.holm_level(ps, 0.05)
    for (x, y), rej in zip(samples, reject):
        lo, hi, _ = scipy_interval(x, y, level)
        assert (lo > 1 or hi < 1) == bool(rej)


def test_an_adjusted_interval_names_its_level_where_it_is_shown():
    """Three primary metrics, none different: Holm rejects none, so the family's intervals are
    at 1 − 0.05/3 and say so in the table and the headline."""
    from vhpc.analysis.families import headline
    from vhpc.report import fmt_family_overhead, fmt_ratio

    data = []
    for k in range(3):
        data += obs("native", [1.0, 1.1, 0.9], bench=f"b{k}") + \
            obs("vm", [1.02, 1.12, 0.91], bench=f"b{k}")
    a = analyse(data, ENVS, "native")
    for c in a.comparisons:
        assert c.level == pytest.approx(1 - 0.05 / 3)
        lo, hi, _ = scipy_interval([1.02, 1.12, 0.91], [1.0, 1.1, 0.9], 1 - 0.05 / 3)
        assert c.ratio_ci == (pytest.approx(lo), pytest.approx(hi))
        assert fmt_ratio(c, a).endswith("at 98.33 %")
    assert all(fmt_family_overhead(fs).endswith("at 98.33 %") for fs in headline(a))


def test_equivalent_needs_the_whole_interval_inside_the_margin_and_inconclusive_says_runs():
    x, y = [10.1, 10.6, 9.6, 10.3, 9.9], [10.0, 10.5, 9.5, 10.2, 9.8]
    lo, hi, _ = scipy_interval(x, y, 0.95)  # [0.956, 1.067]
    for margin, want in ((0.05, INCONCLUSIVE), (0.07, EQUIVALENT), (0.06, INCONCLUSIVE)):
        c = analyse(obs("vm", x) + obs("native", y), ENVS, "native", margin=margin).comparisons[0]
        assert c.verdict == want == read_verdict(lo, hi, False, margin)
    a = analyse(obs("vm", x) + obs("native", y), ENVS, "native")
    c = a.comparisons[0]
    assert c.runs_needed and c.runs_needed > 5
    from vhpc.analysis.families import headline
    from vhpc.report import fmt_family_counts

    (fs,) = headline(a)  # the headline says it beside the verdict
    assert fmt_family_counts(fs).startswith(f"≈{c.runs_needed} runs each: decides 8 times in 10")
    assert any(f.kind == "inconclusive" and f"≈{c.runs_needed} runs" in f.message
               for f in analyse(obs("vm", x) + obs("native", y), ENVS, "native").findings)
    # rates: the band maps through the direction (a 3 % lower bandwidth is within 5 %)
    bw = dict(metric="bw", unit="GB/s", hib=True)
    c = analyse(obs("vm", [97.0, 97.1, 96.9], **bw) + obs("native", [100.0, 100.1, 99.9], **bw),
                ENVS, "native").comparisons[0]
    assert c.verdict == SLOWER  # excludes 1 on the worse side: a difference, however small
    c = analyse(obs("vm", [99.9, 100.2, 99.8], **bw) + obs("native", [100.0, 100.1, 99.9], **bw),
                ENVS, "native").comparisons[0]
    assert c.verdict == EQUIVALENT


def test_no_significant_difference_is_gone_everywhere():
    hits = []
    for base in ("src", "docs", "tests", "README.md"):
        root = ROOT / base
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()
                                               and p.suffix in (".py", ".md", ".j2", ".yaml")]
        for p in files:
            if p.name == "findings.yaml" or p == Path(__file__):
                continue  # findings.yaml quotes the seed papers verbatim
            if "no significant difference" in p.read_text(errors="replace").lower():
                hits.append(str(p.relative_to(ROOT)))
    assert hits == []


# ------------------------------------------------------------------ the right family


def test_secondary_metrics_and_checks_stay_out_of_the_family():
    """bw_avg (primary) with bw_max (secondary) and an energy check: the primary's p is its
    own (a family of one), not adjusted over the secondary metric or the check (the issue:
    GROMACS's energy check alone turned p 0.039 into 0.058)."""
    x, y = [9.0, 9.5, 8.7, 9.2], [10.0, 10.4, 9.8, 10.1]
    data = obs("vm", x, "bw_avg", "MB/s", True) + obs("native", y, "bw_avg", "MB/s", True)
    data += obs("vm", [11, 12, 13, 12], "bw_max", "MB/s", True) + \
        obs("native", [12, 12, 13, 11], "bw_max", "MB/s", True)
    data += obs("vm", [-1.0, -1.0, -1.0, -1.0], "epot", "kJ/mol") + \
        obs("native", [-1.0, -1.0, -1.0, -1.0], "epot", "kJ/mol")
    a = analyse(data, ENVS, "native", checks={"b": ("epot", 1e-3)})
    p = stats.ttest_ind(np.log(x), np.log(y), equal_var=False).pvalue
    prim = a.comparison("b", "", "bw_avg", "vm")
    assert prim.role == "primary" and prim.family_size == 1
    assert prim.p_adjusted == pytest.approx(p, rel=1e-9)
    sec = a.comparison("b", "", "bw_max", "vm")
    assert sec.role == "secondary" and sec.level == pytest.approx(0.95)
    assert a.comparison("b", "", "epot", "vm") is None  # a check: no ratio verdict at all
    (chk,) = a.checks
    assert (chk.metric, chk.value, chk.reference, chk.rtol, chk.status) == (
        "epot", -1.0, -1.0, 1e-3, "pass")


def test_a_sweep_is_adjusted_within_itself_not_across_the_campaign():
    """An OSU-like sweep of 24 sizes beside 3 benchmarks: each point's p is Holm-adjusted over
    the 24 points of its sweep only (the issue: 93 comparisons made every per-size p 1.0)."""
    rng = np.random.default_rng(3)
    data, xs = [], {}
    for i, size in enumerate(2 ** k for k in range(24)):
        y = list(np.exp(rng.normal(0, 0.05, 4)))
        x = list(np.exp(rng.normal(0.3 if i % 2 else 0.0, 0.05, 4)))
        data += obs("native", y, f"lat_{size}", "us", bench="osu") + \
            obs("vm", x, f"lat_{size}", "us", bench="osu")
        xs[f"lat_{size}"] = (x, y)
    for k in range(3):
        data += obs("native", [1.0, 1.1, 0.9], bench=f"s{k}") + obs("vm", [1.5, 1.6, 1.4], bench=f"s{k}")
    a = analyse(data, ENVS, "native")
    ps = {m: stats.ttest_ind(np.log(x), np.log(y), equal_var=False).pvalue for m, (x, y) in xs.items()}
    rej, adj = multipletests(list(ps.values()), 0.05, "holm")[:2]
    for m, p_adj, r in zip(ps, adj, rej):
        c = a.comparison("osu", "", m, "vm")
        assert c.role == "point" and c.family_size == 24
        assert c.p_adjusted == pytest.approx(p_adj, rel=1e-9)
        assert (c.verdict == SLOWER) == bool(r)
    # over the whole campaign (27 comparisons) fewer points would be found
    wide = multipletests(list(ps.values()) + [0.01] * 3, 0.05, "holm")[0][:24]
    assert sum(rej) >= sum(wide) and sum(rej) >= 10
    assert {a.comparison(f"s{k}", "", "time", "vm").family_size for k in range(3)} == {3}


def test_a_time_and_its_rate_get_one_verdict_and_one_overhead():
    """LAMMPS's loop_time (s, lower) and timesteps_per_s (higher), product = 1000 steps in
    every trial, declared inverses by the benchmark (and matom_steps_per_s the same rate in
    other units): one effect, so one verdict ("slower" beside "no significant difference"
    would contradict itself) and the same overhead."""
    t_vm, t_nat = [10.6, 10.9, 10.7], [10.0, 10.2, 9.9]
    data = []
    for env, ts, first in (("vm", t_vm, 0), ("native", t_nat, 10)):
        data += obs(env, ts, "loop_time", "s", False, "lammps", trial0=first)
        data += obs(env, [1000 / t for t in ts], "timesteps_per_s", "1/s", True, "lammps",
                    trial0=first)
        data += obs(env, [32.0 / t for t in ts], "matom_steps_per_s", "Matom-steps/s", True,
                    "lammps", trial0=first)  # 32,000 atoms x 1000 steps: a multiple of the rate
    a = analyse(data, ENVS, "native")
    m = a.comparison("lammps", "", "matom_steps_per_s", "vm")
    t = a.comparison("lammps", "", "loop_time", "vm")
    r = a.comparison("lammps", "", "timesteps_per_s", "vm")
    roles = [t.role, r.role, m.role]  # one primary; the others measure its effect again
    assert roles.count("primary") == 1 and set(roles) - {"primary"} <= {"inverse", "same"}
    assert t.verdict == r.verdict == m.verdict
    assert m.overhead_pct == pytest.approx(t.overhead_pct)
    assert t.overhead_pct == pytest.approx(r.overhead_pct)
    assert t.overhead_ci[0] == pytest.approx(r.overhead_ci[0])
    lo, hi, _ = scipy_interval(t_vm, t_nat, t.level)
    assert t.ratio_ci == (pytest.approx(lo), pytest.approx(hi))
    assert r.ratio_ci == (pytest.approx(1 / hi), pytest.approx(1 / lo))


def test_checks_never_head_a_table_and_show_values_and_tolerance():
    from rich.console import Console

    from vhpc.report import check_rows, comparison_rows
    from vhpc.report.terminal import render_table

    data = obs("native", [5.0, 5.1, 4.9], "ns_day", "ns/day", True, "gmx") + \
        obs("vm", [2.5, 2.6, 2.4], "ns_day", "ns/day", True, "gmx")
    data += obs("native", [-3000.0, -3000.0, -3000.0], "epot", "kJ/mol", False, "gmx") + \
        obs("vm", [-3100.0, -3100.0, -3100.0], "epot", "kJ/mol", False, "gmx")
    a = analyse(data, ENVS, "native", checks={"gmx": ("epot", 5e-3)})
    assert [r.metric.split()[0] for r in comparison_rows(a)] == ["ns_day"]
    (row,) = check_rows(a)
    assert (row.status, row.value, row.reference, row.tolerance) == (
        "fail", "-3100", "-3000", "0.005 (relative)")
    con = Console(record=True, width=80)
    render_table(a, con)
    out = " ".join(con.export_text().split())
    # the headline's check cell names it; it is no row of its own
    assert "check fail: epot -3100 vs -3000 (tolerance 0.005)" in out
    assert "epot [kJ/mol]" not in out


def test_every_check_of_an_application_is_a_check():
    """GROMACS carries several checks (potential energy, temperature, reciprocal Coulomb):
    none is a metric with a verdict, each a check with its declared tolerance."""
    from vhpc import benchmarks

    declared = {c.metric: c.rtol for c in benchmarks.get("gromacs").all_checks()}
    assert len(declared) >= 2
    data = obs("native", [5.0, 5.1, 4.9], "ns_per_day", "ns/day", True, "gromacs") + \
        obs("vm", [4.0, 4.1, 3.9], "ns_per_day", "ns/day", True, "gromacs")
    for m in declared:
        data += obs("native", [-100.0] * 3, m, "kJ/mol", False, "gromacs") + \
            obs("vm", [-100.0] * 3, m, "kJ/mol", False, "gromacs")
    a = analyse(data, ENVS, "native")
    assert [c.metric for c in a.comparisons] == ["ns_per_day"]
    assert {c.metric: c.rtol for c in a.checks} == declared
    assert {c.status for c in a.checks} == {"pass"}


def test_verification_counts_are_checks():
    data = obs("native", [10.0, 10.1], "time_s", "s", bench="hpccg") + \
        obs("vm", [12.0, 12.1], "time_s", "s", bench="hpccg")
    data += obs("native", [150, 150], "iterations", "count", bench="hpccg") + \
        obs("vm", [150, 150], "iterations", "count", bench="hpccg")
    # a custom command's dimensionless metric is a metric, not a check
    data += obs("native", [2.0, 2.1], "speedup", "1", True, "mine") + \
        obs("vm", [1.0, 1.1], "speedup", "1", True, "mine")
    a = analyse(data, ENVS, "native")
    assert a.comparison("hpccg", "", "iterations", "vm") is None
    assert [(c.metric, c.rtol, c.status) for c in a.checks] == [("iterations", 0.0, "pass")]
    assert a.comparison("mine", "", "speedup", "vm").verdict == SLOWER


# ------------------------------------------------------------------ one number per effect


def test_the_finding_quotes_the_overhead_of_the_table():
    """A rate at 24 % of the baseline's: the table, the headline and the finding quote one
    overhead, (1/ratio − 1)·100 = +317.9 % (never "observed 76.1 %")."""
    from vhpc.analysis.families import headline
    from vhpc.report import fmt_overhead

    bw = dict(metric="bw", unit="GB/s", hib=True)
    native = [9.0, 12.0, 6.0]
    a = analyse(obs("vm", [2.0, 3.5, 1.3], **bw) + obs("native", native, **bw), ENVS, "native")
    c = a.comparisons[0]
    gm = stats.gmean([2.0, 3.5, 1.3]) / stats.gmean(native)
    assert c.overhead_pct == pytest.approx((1 / gm - 1) * 100)
    # its interval reaches past 10 times: the table writes it as the headline does, a factor
    assert fmt_overhead(c) == f"×{1 / gm:.3g}"
    (fs,) = headline(a)
    assert fs.overhead_pct == pytest.approx(c.overhead_pct)
    # an inconclusive one: its finding quotes the same overhead and interval
    a = analyse(obs("vm", [4, 12, 2.5], **bw) + obs("native", native, **bw), ENVS, "native")
    c = a.comparisons[0]
    assert c.verdict == INCONCLUSIVE
    f = next(f for f in a.findings if f.kind == "inconclusive")
    lo, hi = c.overhead_ci
    assert f"overhead {c.overhead_pct:+.1f} % [{lo:+.1f}, {hi:+.1f}]" in f.message


def test_insufficient_data_stays_insufficient():
    a = analyse(obs("vm", [1.5]) + obs("native", [1.0, 1.1, 0.9]), ENVS, "native")
    assert a.comparisons[0].verdict == INSUFFICIENT


# ------------------------------------------------------------------ --margin


def test_margin_flag_parses_percentages_and_refuses_the_rest():
    from vhpc.cli import main
    from vhpc.workflows.common import percent

    assert percent("5%") == pytest.approx(0.05) and percent("12.5") == pytest.approx(0.125)
    for cmd in (["compare"], ["run", "x.yaml"], ["study", "noise"], ["report", "x"],
                ["paper", "000"], ["diff", "a", "b"]):
        assert main([*cmd, "--margin", "five", "--dry-run"] if cmd[0] != "report"
                    and cmd[0] != "diff" else [*cmd, "--margin", "five"]) == 2


# ------------------------------------------------------------------ the campaign on fixed samples


def test_verdicts_yaml_on_fixed_samples(tmp_path):
    """``vhpc run docs/examples/verdicts.yaml --margin 5%``: the 20× bandwidth drop and the
    ten 8.4× metrics are slower, the one within 1 % equivalent, every verdict as its printed
    interval says."""
    import json

    state = tmp_path / "state"
    state.mkdir()
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "run",
                        str(ROOT / "docs/examples/verdicts.yaml"), "--margin", "5%", "--out",
                        str(out)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "VHPC_VERDICTS_STATE": str(state), "COLUMNS": "200"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    comps = json.loads((folder / "results.json").read_text())["comparisons"]
    got = {c["benchmark"]: c for c in comps}
    assert got["bw"]["verdict"] == SLOWER and got["eq"]["verdict"] == EQUIVALENT
    assert all(got[f"lat{k}"]["verdict"] == SLOWER for k in range(10))
    for c in comps:
        lo, hi = c["ratio_ci"]
        assert read_verdict(lo, hi, c["higher_is_better"], 0.05) == c["verdict"]
    lo, hi, _ = scipy_interval([2.0, 2.4, 1.6], [40, 20, 60], got["bw"]["level"])
    assert got["bw"]["ratio_ci"] == [pytest.approx(lo), pytest.approx(hi)]


#: two custom benchmarks whose byte-size figure is a declared check: by naming a metric
#: (``check: {metric: ...}``) and by its own regex (``check: {name, regex}``); the time and
#: the size differ by CPU (the baseline on CPU 0, "other" on CPU 1)
CHECKED = r"""
repeats: 2
warmup: 0
order: fixed
environments:
  - native: {cpus: 0}
  - native: {name: other, cpus: 1}
custom:
  - name: rootfs
    command:
      - python3
      - -c
      - &script |
        import os
        cpu = min(os.sched_getaffinity(0))
        print(f"time: {(1.0 + cpu) * (1 + os.getpid() % 7 / 100)}")
        print(f"root: {1000 + 200 * cpu}")
    metrics:
      - {name: time, regex: 'time: (\S+)', unit: s, direction: lower}
      - {name: root_bytes, regex: 'root: (\d+)', unit: B, direction: higher}
    check: {metric: root_bytes, rtol: 0.5}
  - name: ident
    command: [python3, -c, *script]
    metrics: [{name: time, regex: 'time: (\S+)', unit: s, direction: lower}]
    check: {name: size_bytes, regex: 'root: (\d+)', unit: B, rtol: 0.5}
  - name: image
    command: [python3, -c, *script]
    metrics: [{name: time, regex: 'time: (\S+)', unit: s, direction: lower}]
    check: {name: image_bytes, regex: 'root: (\d+)', unit: B}
benchmarks: [rootfs, ident, image]
"""


def test_a_declared_custom_check_gets_no_verdict_anywhere(tmp_path):
    """A byte-size figure declared as a custom benchmark's check (three forms: a metric with a
    tolerance, its own regex with one, and an identity figure without) is a check in
    every view that shows verdicts: the run's JSON and CSV, ``vhpc report --all``, the HTML
    report's tables, and ``vhpc diff`` with its history (``rootfs`` once got a ratio
    verdict)."""
    import csv
    import json

    spec = tmp_path / "c.yaml"
    spec.write_text(CHECKED)
    out = tmp_path / "out"
    env = {**os.environ, "COLUMNS": "200"}
    cli = [sys.executable, "-m", "vhpc.cli"]
    for _ in range(2):
        r = subprocess.run(cli + ["run", str(spec), "--out", str(out)], capture_output=True,
                           text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    a, b = sorted(p.name for p in out.iterdir() if p.is_dir())
    checks = {"root_bytes", "size_bytes", "image_bytes"}
    doc = json.loads((out / b / "results.json").read_text())
    assert {c["metric"] for c in doc["comparisons"]} == {"time"}
    # without rtol an identity figure: shown (1200 vs 1000 B), never compared nor failed
    assert {(c["metric"], c["status"], c["rtol"], c["excluded"]) for c in doc["checks"]} == {
        ("root_bytes", "pass", 0.5, 0), ("size_bytes", "pass", 0.5, 0),
        ("image_bytes", "n/a", None, 0)}
    assert all(s["valid"] for s in doc["samples"] if s["benchmark"] == "image")
    with (out / b / "comparisons.csv").open() as fh:
        assert {row["metric"] for row in csv.DictReader(fh)} == {"time"}
    html = (out / b / "report.html").read_text()
    head, _, tail = html.partition('<section id="checks">')
    assert tail and not any(f"{m} [B]" in head for m in checks)  # only under "Checks"
    r = subprocess.run(cli + ["report", b, "--out", str(out), "--all"], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0 and "time [s]" in r.stdout
    assert not any(f"{m} [B]" in r.stdout for m in checks), r.stdout
    r = subprocess.run(cli + ["diff", a, b, "--out", str(out), "--history", "2"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (ddir,) = [p for p in out.iterdir() if p.name.startswith("diff-")]
    diff = json.loads((ddir / "diff.json").read_text())
    assert {o["metric"] for o in diff["overhead"]} == {"time"}
    assert {h["metric"] for h in diff["history"]} == {"time"}


def test_a_figure_that_never_varies_but_differs_is_pointed_at_the_check_declaration():
    """A custom figure constant in each environment and different between them (a root
    file-system size left under ``metrics:``) keeps its exact verdict, and an info finding
    says how to declare it an identity figure; a timing that varies gets no such note."""
    data = obs("vm", [1200.0] * 3, "root_bytes", "B", True) + \
        obs("native", [1000.0] * 3, "root_bytes", "B", True)
    data += obs("vm", [2.0, 2.1, 1.9], "time") + obs("native", [1.0, 1.1, 0.9], "time")
    a = analyse(data, ENVS, "native")
    (f,) = [f for f in a.findings if f.kind == "constant-figure"]
    assert "root_bytes" in f.message and "time" not in f.message
    assert "check: {metric: NAME}" in f.advice and f.level == "info"


def test_a_sweeps_summary_combines_bounds_at_one_level_and_names_it():
    """Three sizes of a sweep: one clearly slower (shown at Holm's level), two near equal
    (shown at Bonferroni's 1 − α/3): the one-line summary takes every point's bounds at
    1 − α/3, the highest of them, computed here by scipy, and says so."""
    from vhpc.analysis.families import headline

    ys = {8: [10.0, 10.4, 9.8, 10.1, 9.9], 64: [12.0, 12.3, 11.8, 12.1, 12.2],
          512: [20.0, 20.5, 19.6, 20.2, 19.9]}
    xs = {8: [30.0, 31.0, 29.5, 30.4, 30.2], 64: [12.1, 12.5, 11.7, 12.4, 12.0],
          512: [20.3, 20.1, 19.8, 20.6, 20.0]}
    data = []
    for s in ys:
        data += obs("native", ys[s], f"lat_{s}", "us", bench="osu") + \
            obs("vm", xs[s], f"lat_{s}", "us", bench="osu")
    a = analyse(data, ENVS, "native")
    levels = {s: a.comparison("osu", "", f"lat_{s}", "vm").level for s in ys}
    bonferroni = 1 - 0.05 / 3
    assert levels[64] == pytest.approx(bonferroni) and levels[8] < bonferroni  # two levels
    assert a.comparison("osu", "", "lat_8", "vm").level_kind == "holm"
    assert a.comparison("osu", "", "lat_64", "vm").level_kind == "bonferroni"
    (fs,) = headline(a)
    bounds = [scipy_interval(xs[s], ys[s], bonferroni)[:2] for s in ys]
    assert fs.low == pytest.approx(math.prod(lo for lo, _ in bounds) ** (1 / 3), rel=1e-9)
    assert fs.high == pytest.approx(math.prod(hi for _, hi in bounds) ** (1 / 3), rel=1e-9)
    assert fs.level_note == "at 98.33 %"


def test_simultaneous_intervals_say_bonferroni_in_the_p_column(tmp_path):
    """Under --intervals simultaneous the adjusted p is Bonferroni's: the --all table's and
    the page's column head say so; by default they say Holm."""
    from rich.console import Console

    from vhpc.report import html as report_html
    from vhpc.report.terminal import render_metrics

    data = obs("native", [1.0, 1.1, 0.9], bench="b1") + obs("vm", [1.5, 1.6, 1.4], bench="b1") \
        + obs("native", [1.0, 1.1, 0.9], bench="b2") + obs("vm", [1.0, 1.1, 0.95], bench="b2")
    for intervals, head, level in (("holm", "p (Holm)", "Holm's where it says slower"),
                                   ("simultaneous", "p (Bonferroni)", "for every row, simul")):
        a = analyse(data, ENVS, "native", intervals=intervals)
        console = Console(record=True, width=200)
        console.print(render_metrics(a))
        text = console.export_text()
        assert head in text and ({"p (Holm)", "p (Bonferroni)"} - {head}).pop() not in text
        assert level in " ".join(text.split())  # the caption names the levels
        page = report_html.render_html(a, [], {})
        assert f"<th>{head}</th>" in page
