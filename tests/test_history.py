"""``vhpc history`` (docs/history.md): the change-point test's false-alarm rate on seeded A/A
series of 5, 20 and 100 points, the gate's on A/A campaigns, its detection of a step; a
history of store-API-written campaigns whose fingerprints differ in QEMU version (the change
point labelled with the versions, the gate's exit status and its JUnit XML read by
junitparser); bad input; and a real history of campaigns on this host with ``slowdown=``
raised from the fifth on."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import junitparser
import numpy as np
import pytest
from scipy import stats as sps

from test_diff import make_campaign  # the store-API writer of hand-chosen campaigns
from vhpc.analysis import changepoints as cp
from vhpc.cli import main
from vhpc.store import Store

ALPHA = 0.05


def _at_or_below(count: int, reps: int, rate: float) -> bool:
    """Whether ``count`` false alarms in ``reps`` seeded series are at or below ``rate``: no
    more than a rate of exactly ``rate`` gives with probability 0.999 (binomial)."""
    return count <= sps.binom.ppf(0.999, reps, rate)


# --------------------------------------------------------------------------------------------
# the method, by seeded simulation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, reps", [(5, 300), (20, 300), (100, 200)])
def test_aa_series_show_a_change_at_or_below_the_stated_rate(n, reps):
    """Series without change (campaign-to-campaign CV 5 %): the share showing any change point
    is at most α.  A 5-point series cannot show one at all (smallest p 2/C(5,2) = 0.2)."""
    rng = np.random.default_rng(20260 + n)
    alarms = sum(bool(cp.detect(rng.normal(0.0, 0.05, n), ALPHA, permutations=199, seed=i))
                 for i in range(reps))
    assert _at_or_below(alarms, reps, ALPHA), (alarms, reps)
    if n == 5:
        assert alarms == 0


def test_smallest_p_and_campaigns_needed_follow_the_permutation_count():
    assert cp.smallest_p(8) == pytest.approx(2 / 70)  # C(8, 4) = 70
    assert cp.smallest_p(7) == pytest.approx(2 / 35)
    assert cp.campaigns_needed(0.05) == 8 and cp.campaigns_needed(0.01) == 10
    # a perfectly separated 8-point series reaches it exactly (every order enumerated)
    p, tau = cp.permutation_test([0, 0.01, -0.01, 0.02, 1, 1.01, 0.99, 1.02])
    assert (p, tau) == (pytest.approx(2 / 70), 4)
    # noise: 2 × the per-side runs a t-test needs for a 5 % step at CV 20 %
    assert cp.campaigns_needed(0.05, 0.2, 0.05) > 100


def test_a_ten_percent_step_at_cv_five_percent_is_found_where_it_is():
    """20 campaigns, a 10 % step after the 10th: a change point within one campaign of it in
    most seeded series (the power docs/history.md gives, by bench/bench_history.py --power),
    and few others: binary segmentation tests each half again at α, and a first split one or
    two campaigns off the step leaves the step to the next test."""
    rng = np.random.default_rng(7)
    found, total = 0, 0
    for i in range(100):
        x = rng.normal(0.0, 0.05, 20) + np.r_[np.zeros(10), np.full(10, math.log(1.1))]
        idx = [s.index for s in cp.detect(x, ALPHA, permutations=199, seed=i)]
        found += any(abs(j - 10) <= 1 for j in idx)
        total += len(idx)
    assert found >= 50, found
    assert total <= 1.5 * found, (total, found)


@pytest.mark.parametrize("k", [3, 5, 10])
def test_the_gate_fails_an_aa_campaign_at_or_below_the_stated_rate(k):
    """The latest campaign drawn like the k earlier ones: FAIL (worse beyond a margin of 0,
    the strictest) in at most α of seeded cases; a 30 % regression at CV 5 % fails."""
    rng = np.random.default_rng(k)
    reps = 2000
    fails = sum(cp.gate(x[:-1], x[-1], False, 0.0).p < ALPHA
                for x in rng.normal(0.0, 0.05, (reps, k + 1)))
    assert _at_or_below(fails, reps, ALPHA), fails
    hits = sum(cp.gate(x[:-1], x[-1] + math.log(1.3), False, 0.05).p < ALPHA
               for x in rng.normal(0.0, 0.05, (200, k + 1)))
    assert hits >= 180 if k >= 5 else hits >= 100, hits
    # a rate (higher is better) regresses when it falls
    t = cp.gate([0.0, 0.01, -0.01, 0.0], math.log(0.7), True, 0.05)
    assert t.p < 1e-3 and t.bound(0.95) > 0.05


def test_an_aa_series_shows_a_trend_at_or_below_the_stated_rate():
    """The trend says rising/falling (its Theil–Sen interval excludes 0) in at most α of seeded
    series without one; a steady 3 %/campaign rise at CV 1 % reads as rising."""
    from vhpc.analysis.history import _trend

    rng = np.random.default_rng(11)
    reps = 400
    moved = sum(_trend(rng.normal(0, 0.05, 12), 0.95).direction != "flat" for _ in range(reps))
    assert _at_or_below(moved, reps, ALPHA), moved
    t = _trend(np.log(1.03) * np.arange(12) + rng.normal(0, 0.01, 12), 0.95)
    assert t.direction == "rising" and t.ci[0] < 3.0 < t.ci[1]


# --------------------------------------------------------------------------------------------
# a history of store-API-written campaigns: QEMU updated between the 4th and 5th
# --------------------------------------------------------------------------------------------


def _qemu_history(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """Eight campaigns in two stores (the cluster's and a laptop's, say): vm/native ≈ 2 before
    the update to QEMU 8.2.1, ≈ 3 after; native's fingerprint unchanged."""
    s1, s2 = Store(tmp_path / "a" / "vhpc.db"), Store(tmp_path / "b" / "vhpc.db")
    rng = np.random.default_rng(3)
    ids = []
    for i in range(8):
        level = 20.0 if i < 4 else 30.0
        vm = list(level * np.exp(rng.normal(0, 0.02, 4)))
        native = list(10.0 * np.exp(rng.normal(0, 0.02, 4)))
        qemu = "7.2.0" if i < 4 else "8.2.1"
        cid = f"C{i + 1}"
        make_campaign(s1 if i % 2 else s2, cid,
                      {"native": {"pagefault": {"private_us": native}},
                       "vm": {"pagefault": {"private_us": vm}}},
                      created=1.75e9 + i * 86400, fingerprint={"vm": {"qemu_version": qemu}})
        ids.append(cid)
    s1.close(), s2.close()
    return tmp_path / "a", tmp_path / "b", ids


def test_a_qemu_update_is_the_change_point_and_its_label(tmp_path, capsys):
    a, b, ids = _qemu_history(tmp_path)
    out = tmp_path / "out"
    js = tmp_path / "h.json"
    assert main(["history", "--store", str(a), "--store", str(b), "--out", str(out),
                 "--json", str(js)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(js.read_text())
    (s,) = doc["series"]
    assert [p["campaign"] for p in s["points"]] == ids  # time order across both stores
    (c,) = s["change_points"]
    assert c["index"] == 4 and c["campaign"] == "C5" and c["p"] == pytest.approx(2 / 70)
    assert {"scope": "vm", "key": "qemu_version", "a": "7.2.0", "b": "8.2.1"} in c["fingerprint"]
    # between consecutive campaigns: the update is the only fingerprint change recorded
    assert [(x["index"], x["campaign"]) for x in s["changes"]] == [(4, "C5")]
    assert c["change"] == pytest.approx(1.5, rel=0.05)
    lo, hi = c["change_ci"]
    assert lo < 1.5 < hi
    assert "change at #5 C5" in text and "vm qemu_version 7.2.0 → 8.2.1" in text
    html = (out / "history" / "history.html").read_text()
    assert 'id="history"' in html and "<svg" in html and "qemu_version" in html


def test_the_gate_fails_the_update_against_the_old_model_and_passes_it_against_the_new(
        tmp_path, capsys):
    a, b, ids = _qemu_history(tmp_path)
    stores = ["--store", str(a), "--store", str(b), "--out", str(tmp_path / "out")]
    junit = tmp_path / "gate.xml"
    old = [x for c in ids[:4] + ids[7:] for x in ("--campaign", c)]
    assert main(["history", *stores, *old, "--check", "--junit", str(junit)]) == 1
    assert "FAIL" in capsys.readouterr().out
    xml = junitparser.JUnitXml.fromfile(str(junit))
    (suite,) = list(xml)
    assert suite.name == "vhpc history" and suite.tests == 1 and suite.failures == 1
    (case,) = list(suite)
    assert case.classname == "pagefault" and case.name == "vm/native private_us"
    assert isinstance(case.result[0], junitparser.Failure)
    new = [x for c in ids[4:] for x in ("--campaign", c)]
    assert main(["history", *stores, *new, "--check", "--junit", str(junit)]) == 0
    (case,) = list(next(iter(junitparser.JUnitXml.fromfile(str(junit)))))
    assert case.is_passed
    # all eight: the model is the regime since the change at C5, so C8 passes
    assert main(["history", *stores, "--check"]) == 0
    # the same store twice (a folder and its vhpc.db) is read once: no doubled points
    js = tmp_path / "twice.json"
    assert main(["history", "--store", str(a), "--store", str(a / "vhpc.db"), "--store", str(b),
                 "--out", str(tmp_path / "out"), "--json", str(js)]) == 0
    assert len(json.loads(js.read_text())["series"][0]["points"]) == 8


def test_a_short_series_says_so_and_a_gate_with_nothing_to_check_exits_2(tmp_path, capsys):
    a, b, ids = _qemu_history(tmp_path)
    args = ["history", "--store", str(a), "--store", str(b), "--out", str(tmp_path / "o")]
    few = [x for c in ids[:3] for x in ("--campaign", c)]
    assert main([*args, *few, "--json", str(tmp_path / "s.json")]) == 0
    (s,) = json.loads((tmp_path / "s.json").read_text())["series"]
    assert s["status"] == "too short" and s["needed"] == 8
    assert "needs at least 8 campaigns" in capsys.readouterr().out
    # --since/--until take whole days: C1 and C2 of the eight (one a day), in local time
    day = lambda i: time.strftime("%Y-%m-%d", time.localtime(1.75e9 + i * 86400))  # noqa: E731
    assert main([*args, "--since", day(0), "--until", day(1), "--json",
                 str(tmp_path / "w.json")]) == 0
    (s,) = json.loads((tmp_path / "w.json").read_text())["series"]
    assert [p["campaign"] for p in s["points"]] == ["C1", "C2"]
    capsys.readouterr()
    two = [x for c in ids[:2] for x in ("--campaign", c)]
    assert main([*args, *two, "--check"]) == 2  # one earlier campaign: nothing checked
    assert "NOTHING CHECKED" in capsys.readouterr().out


@pytest.mark.parametrize("extra, says", [
    (["--junit", "x.xml"], "--check"),
    (["--since", "yesterday"], "not a date"),
    (["--campaign", "nope"], "none of the stores"),
    (["--benchmark", "stream"], "passes the filters"),
    (["--since", "2030-01-02", "--until", "2030-01-01"], "after --until"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, says):
    a, b, _ = _qemu_history(tmp_path)
    assert main(["history", "--store", str(a), "--out", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_no_store_is_created_by_a_history(tmp_path, capsys):
    assert main(["history", "--out", str(tmp_path / "none")]) == 2
    assert not (tmp_path / "none" / "vhpc.db").exists()


# --------------------------------------------------------------------------------------------
# end to end: real campaigns on this host
# --------------------------------------------------------------------------------------------


@pytest.mark.serial
def test_real_history_finds_the_raised_slowdown(kernels_built, tmp_path, capsys):
    """Eight real campaigns (a few seconds each, in this process): native, and a second native
    environment ``guest`` on CPU 0 standing in for the VM (which runs under slow TCG emulation
    here), with ``slowdown=4`` (5× the time, a cgroup freezer duty cycle of 50 ms periods) on
    ``guest`` from the fifth on.  The history finds one change point, at campaign 5, and names
    ``option.slowdown``; the gate fails campaign 8 against 1–4 and passes it against 5–7.
    ``mib=32``: the fault-latency window spans several freezer periods (4 MiB fits between two
    freezes and the slowdown does not show); its three passes a trial keep the slowed
    campaigns alike enough for the gate (with one pass, the slowed ratio ranged ×4 to ×7)."""
    out = ["--out", str(tmp_path / "out")]
    ids = []
    for i in range(8):
        guest = "native:name=guest,cpus=0" + (",slowdown=4" if i >= 4 else "")
        assert main(["compare", "-b", "pagefault:mib=32", "-e", "native", "-e", guest,
                     "--repeats", "3", "--warmup", "0", "--no-report", *out]) == 0
        ids.append(capsys.readouterr().out.split("Campaign ", 1)[1].split(":", 1)[0].strip())
    js = tmp_path / "h.json"
    assert main(["history", "--json", str(js), *out]) == 0
    text = capsys.readouterr().out
    (s,) = json.loads(js.read_text())["series"]
    assert [c["index"] for c in s["change_points"]] == [4], text
    assert any(f["key"] == "option.slowdown" and f["b"] == "4.0"
               for f in s["change_points"][0]["fingerprint"])
    assert "option.slowdown" in text
    pick = lambda sel: [x for c in sel for x in ("--campaign", c)]  # noqa: E731
    # a margin the slowdown (5x) is far beyond and the slowed campaigns' spread well inside:
    # at the default ±5 % the gate's own false-alarm rate (α) would fail the second call
    # now and then, as it states
    wide = ["--margin", "50%"]
    assert main(["history", "--check", *wide, *pick(ids[:4] + ids[7:]), *out]) == 1
    assert main(["history", "--check", *wide, *pick(ids[4:]), *out]) == 0
