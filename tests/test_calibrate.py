"""`vhpc calibrate` on the host: A/A campaigns (family-wise false positives), an injected
freezer slowdown recovered against the share of time frozen, a 2× slowdown never called
equivalent, the power model, placement; no cgroup left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import binomtest

from vhpc.host import cpu_bandwidth as throttle
from vhpc.host import freezer
from vhpc.store import Store


def _groups() -> set[str]:
    return {str(p) for base in (throttle.CGROUP_ROOT, throttle.CGROUP_ROOT / "cpu",
                                throttle.CGROUP_ROOT / "cpuacct", throttle.CGROUP_ROOT / "unified")
            for prefix in (throttle.PREFIX, freezer.PREFIX) for p in base.glob(prefix + "*")}


def _leaked(before: set[str]) -> set[str]:
    """New throttle or freezer groups owned by this test process or by a process that has
    ended (the CLI's); groups of other live processes (another vhpc on the host) are theirs."""
    out = set()
    for g in _groups() - before:
        name = g.rsplit("/", 1)[1]
        owner = int(name.split("-")[2])
        if owner == os.getpid() or not os.path.exists(f"/proc/{owner}"):
            out.add(g)
    return out


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "vhpc.cli", *args], capture_output=True,
                          text=True, timeout=900, env={**os.environ, "COLUMNS": "250"})


# Alone, after the parallel pass: the slowed copy's quota (8.3 ms of CPU per 10 ms) bites only
# when the copy gets more CPU than that, which beside 3 workers on 2 CPUs it does not (the share
# applied then reads 0).  Two campaigns a copy: every figure below is checked per campaign.
@pytest.mark.serial
def test_calibrate_pagefault_native(tmp_path, kernels_built):
    before = _groups()
    out = tmp_path / "cal"
    # the default 64 MiB regions: trials of many 50 ms freeze periods, so where a trial ends
    # in its period hardly moves the share applied (16 MiB gave 0.18-0.25 of an asked 0.2
    # over runs here once the harness got faster, 64 MiB 0.214-0.215)
    r = _cli("calibrate", "-b", "pagefault:mib=64", "-e", "native", "--campaigns", "2",
             "--repeats", "3", "--delta", "0.2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "A/A family-wise false positives" in r.stdout and "against a 2× slowdown" in r.stdout
    doc = json.loads((out / "calibration.json").read_text())
    assert (out / "calibration.html").read_text().count("<tr>") >= 3
    assert doc["settings"]["campaigns"] == 2 and doc["settings"]["delta"] == 0.2
    cids = doc["campaign_ids"]["native"]
    assert len(cids) == 2
    store = Store(out / "vhpc.db")
    rows = {row["metric"]: row for row in doc["rows"]}
    assert set(rows) == {"private_us", "shared_us"}
    covered = 0
    for metric, row in rows.items():
        assert row["aa"]["campaigns"] == 2 and 0 <= row["aa"]["false_positives"] <= 2
        inj = row["injected"]
        assert len(inj["campaigns"]) == 2
        for c in inj["campaigns"]:
            # the freezer took away the share asked, whatever else ran on the host
            assert c["applied"] == pytest.approx(0.2, abs=0.03)
            assert c["applied_from_usage"] is None  # a CPU quota's bound: none here
            lo, hi = c["ci_pct"]
            assert c["covers_applied"] == (lo <= c["applied"] * 100 <= hi)
            covered += c["covers_applied"]
        # the power model's relative SD, recomputed from the stored A/A samples by hand
        groups = []
        for cid in cids:
            for env in ("a", "b"):
                v = np.array([o.value for o in store.observations(cid) if o.environment == env
                              and o.metric == metric and not o.warmup and o.valid])
                groups.append(v / v.mean())
        pooled = np.sqrt(sum((len(g) - 1) * g.var(ddof=1) for g in groups)
                         / sum(len(g) - 1 for g in groups))
        assert row["power"]["relative_sd"] == pytest.approx(pooled, rel=1e-9)
        assert row["power"]["repeats"] == 3
        assert row["power"]["runs_needed"] is None or row["power"]["runs_needed"] >= 2
        # against the copy slowed 2×: never "equivalent"
        assert row["doubled"]["campaigns"] == 2 and row["doubled"]["equivalent"] == 0
    # nominal coverage is 95 %; on this shared 2-CPU host it is lower (docs/calibrate.md): at
    # least one of the four intervals must contain the slowdown the kernel applied
    assert covered >= 1
    # every trial of every copy ran and read back its placement as planned
    (fam,) = doc["family"]  # pagefault's Holm family: its primary metric, private_us
    assert fam["campaigns"] == 2 and 0 <= fam["false_positives"] <= 2
    ci = binomtest(fam["false_positives"], 2).proportion_ci(method="exact")
    assert fam["rate_ci"] == pytest.approx([ci.low, ci.high])
    assert fam["exceeds_alpha"] == (ci.low > 0.05)
    assert "consistent with α" in r.stdout or "exceeds α" in r.stdout
    # δ = 20 % is not the margin (5 %): the margin-edge case says it was not measured
    assert doc["margin_edge"]["measured"] is False and "not measured" in r.stdout
    assert doc["placement"]["native"]["trials"] == 2 * 4 * 4
    assert doc["placement"]["native"]["rate"] == 1.0
    for cid in cids:
        names = {t.environment for t in store.trials(cid)}
        assert names == {"a", "b", "slowed", "doubled"}
    assert not _leaked(before)


def test_calibrate_bad_input_is_one_line(tmp_path):
    for args, what in ((["--repeats", "1"], "--repeats"), (["--delta", "0"], "--delta"),
                       (["-e", "native:slowdown=0.1"], "slowdown"),
                       (["-e", "ssh:host=x"], "native and vm")):
        r = _cli("calibrate", "-b", "pagefault", *args, "--out", str(tmp_path))
        assert r.returncode == 2, r.stderr
        assert what in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_native_binding_mismatch_rules_by_hand():
    from vhpc.environments.native.environment import binding_mismatches

    proc = {"pid": 7, "comm": "bench", "cpus": "1", "pages_per_node": {"1": 960, "0": 40}}
    assert binding_mismatches([proc], {1}, {1}) == []  # 96 % on node 1
    off = dict(proc, pages_per_node={"1": 940, "0": 60})  # 94 %
    assert any("94 %" in m for m in binding_mismatches([off], {1}, {1}))
    wide = dict(proc, cpus="0-1")
    assert any("CPUs 0-1" in m for m in binding_mismatches([wide], {1}, set()))
    assert binding_mismatches([], {1}, {1}) == []  # nothing sampled: unverified, not a mismatch


def test_native_membind_reads_back_pages_and_strict_fails_a_planted_mismatch(tmp_path,
                                                                            kernels_built):
    """On this host's node 0 (every host has one): the read-back sees the pages there; a plan
    that names node 0 while numactl binds elsewhere cannot be planted on a 1-node host, so the
    planted mismatch is the 2-node guest test's (tests/test_vm_numa_binding.py)."""
    from vhpc.environments.native.environment import NativeEnvironment

    env = NativeEnvironment("n", membind="0", strict=True)
    # -t 200: a second or more, so the wrapper's sampling sees the arrays resident even on a
    # loaded host (a 0.2 s run could end between two samples: "binding not verified")
    r = env.run([str(kernels_built / "vhpc-stream"), "-n", "2000000", "-t", "200"],
                {"OMP_NUM_THREADS": "1"}, timeout=120)
    assert r.ok, (r.stderr, r.error)
    assert r.applied.mismatches == [] and r.applied.page_locality.percent == 100.0
    assert r.applied.processes[0]["comm"] == "vhpc-stream"
    assert r.applied.page_locality.total_mib >= 40  # 3 arrays of 15.3 MiB, sampled resident


@pytest.mark.vm
def test_vm_slowdown_throttles_qemu_and_puts_it_back(kernels_built):
    from conftest import qemu_pids
    from vhpc.environments.slowdown import ThrottledEnvironment
    from vhpc.spec.parse import env as env_spec

    groups = _groups()
    env = ThrottledEnvironment(env_spec("vm", vcpus=1, memory=512).build(), 0.5, cpus=1)
    try:
        env.start()
        pid = env.inner.guest.pid
        home = open(f"/proc/{pid}/cgroup").read()
        r = env.run([str(kernels_built / "vhpc-noise"), "-d", "1"], timeout=120)
        assert r.ok, (r.error, r.stderr)
        th = r.diagnostics.throttle
        assert th["requested"] == 0.5 and th["method"] == "freezer" and th["applied"] > 0.4
        assert open(f"/proc/{pid}/cgroup").read() == home  # QEMU is back in its own cgroup
    finally:
        env.close()
    # this guest's QEMU is gone (other QEMUs on the host may belong to other users)
    assert pid not in qemu_pids() and not _leaked(groups)


def test_no_freezer_and_no_cpu_bandwidth_control_is_a_one_line_error_before_anything_runs(tmp_path,
                                                                         monkeypatch):
    from vhpc.workflows import calibrate
    from vhpc.spec import parse as spec
    from vhpc.environments.base import EnvError

    monkeypatch.setattr(throttle, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.setattr(freezer, "CGROUP_ROOT", tmp_path / "no-cgroups")
    store = Store(tmp_path / "vhpc.db")
    s = calibrate.Settings((spec.bench("pagefault"),), (spec.env("native"),), campaigns=2,
                           repeats=2)
    with pytest.raises(EnvError, match="freezer .* or CPU bandwidth control"):
        calibrate.run(store, s, say=lambda m: None)
    assert store.campaigns() == []


def test_an_injected_slowdown_barely_applied_is_named(tmp_path):
    from rich.console import Console

    from vhpc.report import calibrate as page

    def row(metric, applied):
        return {"environment": "native", "benchmark": "pagefault", "metric": metric, "unit": "us",
                "aa": {"false_positives": 0, "campaigns": 3, "rate": 0.0, "rate_ci": [0.0, 0.7],
                       "alpha": 0.05},
                "injected": {"requested": 0.2, "applied": applied, "applied_from_usage": 0.3,
                             "recovered_pct": 3.0, "coverage": 0.0, "coverage_ci": [0.0, 0.7],
                             "detection": 0.0,
                             "campaigns": [{"ci_pct": [-1.0, 7.0]}]},
                "power": {"relative_sd": 0.05, "power": 0.8, "runs_needed": 4,
                          "detectable_at_repeats": 0.3, "repeats": 3}}

    doc = {"settings": {"campaigns": 3, "repeats": 3, "warmup": 1, "delta": 0.2, "alpha": 0.05},
           "campaign_ids": {"native": ["c1"]},
           "placement": {"native": {"trials": 0, "matching": 0, "rate": None}},
           # 0.09 is under half of 0.2, 0.15 is not
           "rows": [row("private_us", 0.09), row("shared_us", 0.15)]}
    _, html = page.write(doc, tmp_path)
    text = html.read_text()
    assert text.count('class="note"') == 1
    assert "private_us: 9.0 % applied of the 20.0 % asked" in text
    # no trial read its placement back: said so, as in the terminal, not "0/0 as planned"
    words = " ".join(text.split())
    assert "native: no placement read-back recorded" in words and "0/0" not in text
    con = Console(record=True, width=250)
    page.render_terminal(doc, con)
    out = con.export_text()
    assert "note: native pagefault private_us: 9.0 % applied" in out
    assert "shared_us: 15.0 % applied" not in out
    assert "placement native: no placement read-back recorded" in out


def test_what_a_calibration_can_show_by_hand():
    from vhpc.report.calibrate import headline
    from vhpc.workflows.calibrate import Outcome, Settings, margin_edge, rate_reading

    # 0 of 10: Clopper–Pearson [0, 1 − 0.025^(1/10)] = [0, 30.8 %]: consistent with α; a rate
    # of 0 is no plan (36 campaigns would bound 0 below 10 %, but at α = 5 % they do so 16
    # times in 100): planned at α, it takes about 230 for 8 times in 10
    r = rate_reading(0, 10, 0.05)
    assert r["rate_ci"][1] == pytest.approx(1 - 0.025 ** 0.1) and not r["exceeds_alpha"]
    assert r["planned_on"] == "alpha" and 225 <= r["campaigns_to_bound"] <= 250
    # 2 of 10: planned on the 20 % seen, which no number of campaigns bounds below 10 %
    r2 = rate_reading(2, 10, 0.05)
    assert r2["planned_on"] == "seen" and r2["campaigns_to_bound"] is None
    # 5 of 10: the interval [18.7, 81.3] % lies above α: exceeds
    r5 = rate_reading(5, 10, 0.05)
    assert r5["rate_ci"][0] == pytest.approx(binomtest(5, 10).proportion_ci().low)
    assert r5["exceeds_alpha"]
    # the margin edge: δ = margin, 2 metrics × 10 campaigns, 1 equivalent: counted by
    # campaign (its comparisons share its runs), 1 of 10 campaigns
    o = Outcome("native", "b", "t", "s",
                injected=[{"verdict": "equivalent" if i == 0 else "inconclusive",
                           "applied": 0.05, "campaign": f"c{i % 10}"} for i in range(20)])
    s = Settings(benchmarks=(), environments=(), delta=0.05)
    e = margin_edge([o], s, 0.05)
    assert e["measured"] and e["rate"] == pytest.approx(0.1) and e["bound"] == 0.025
    assert e["campaigns"] == 10 and e["comparisons"] == 20
    assert e["rate_ci"] == pytest.approx(list(binomtest(1, 10).proportion_ci()))
    assert not e["exceeds_bound"]
    assert margin_edge([o], s, 0.1)["measured"] is False
    doc = {"family": [r | {"environment": "native", "benchmark": "b"}], "margin_edge": e,
           "rows": [], "doubled": {"equivalent": 0, "comparisons": 10,
                                   "rate_ci": rate_reading(0, 10, 0.05)["rate_ci"]}}
    text = "\n".join(headline(doc))
    assert ("0/10 campaigns = 0 % [0, 31] % (consistent with α = 0.05; "
            f"≈{r['campaigns_to_bound']} campaigns would bound it below 10 % 8 times in 10 if "
            "the true rate is α = 5 %)") in text
    assert ("'equivalent' at the margin's edge (δ = margin = 5 %, applied 5.0 %): 1/10 "
            "campaigns gave it in any comparison") in text
    assert "against a 2× slowdown: 0 of 10 comparisons [0, 31] %" in text
