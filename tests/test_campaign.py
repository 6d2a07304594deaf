"""Plan order, trial outcomes, and the store's resume guarantees, on the real native
environment with the real kernels at tiny sizes."""

import sqlite3

import pytest

from vhpc.campaign import execute as campaign
from vhpc.spec import parse as spec
from vhpc.benchmarks import get
from vhpc.environments.base import RunResult
from vhpc.store import Store


def test_rounds_alternate_environment_order_and_flag_warmup():
    s = spec.from_cli(["noise", "pagefault"], ["native", "vm"], repeats=3, warmup=1)
    trials = campaign.plan(s)
    assert len(trials) == 4 * 2 * 2
    by_round = {}
    for t in trials:
        by_round.setdefault(t.round, []).append(t.environment)
    assert by_round[0] == ["native", "native", "vm", "vm"]
    assert by_round[1] == ["vm", "vm", "native", "native"]
    assert by_round[2] == by_round[0] and by_round[3] == by_round[1]
    assert [t.warmup for t in trials if t.round == 0] == [True] * 4
    assert not any(t.warmup for t in trials if t.round > 0)
    assert [t.seq for t in trials] == list(range(len(trials)))


def test_fixed_order_keeps_spec_order():
    s = spec.from_cli(["noise"], ["native", "vm"], repeats=2, warmup=0, order="fixed")
    assert [t.environment for t in campaign.plan(s)] == ["native", "vm", "native", "vm"]


def test_outcome_marks_failed_verification_invalid_not_failed():
    bench = get("stream")
    out = "VHPC-RESULT copy_bw=1 scale_bw=1 add_bw=1 triad_bw=1 valid=0\n"
    status, samples, error = campaign.outcome(bench, bench.resolve(), RunResult(3, out, "", 0, 1))
    assert status == "done" and error is None
    assert len(samples) == 4 and not any(s.valid for s in samples)


def test_outcome_failures_keep_a_reason():
    bench = get("stream")
    st, samples, err = campaign.outcome(bench, bench.resolve(),
                                        RunResult(1, "", "boom: no memory\n", 0, 1))
    assert st == "failed" and samples == [] and "no VHPC-RESULT" in err and "boom" in err
    st, _, err = campaign.outcome(bench, bench.resolve(), RunResult(None, "", "", 0, 1, timed_out=True))
    assert st == "failed" and "timed out" in err
    st, _, err = campaign.outcome(bench, bench.resolve(), RunResult(None, "", "", 0, 1, error="guest hung"))
    assert st == "failed" and err == "guest hung"


class StopAfter:
    """Progress callback that interrupts the campaign after n finished trials (like Ctrl-C)."""

    def __init__(self, n):
        self.n = n

    def start(self, total, done):
        pass

    def trial(self, row):
        pass

    def finished(self, row, status, note):
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


def test_interrupted_campaign_resumes_without_loss_or_duplicates(tmp_path, kernels_built):
    s = spec.from_cli(["pagefault:mib=2,reps=1", "stream:n=20000,ntimes=3"], ["native"],
                      repeats=2, warmup=1)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    with pytest.raises(KeyboardInterrupt):
        campaign.execute(store, cid, StopAfter(3))
    assert len(store.trials(cid, "done")) == 3
    first = {t.id: t.started for t in store.trials(cid, "done")}
    counts = campaign.execute(store, cid)
    assert counts == {"done": 3, "failed": 0}
    trials = store.trials(cid)
    assert [t.status for t in trials] == ["done"] * 6
    for t in trials:  # the trials done before the interruption were not re-run
        if t.id in first:
            assert t.started == first[t.id]
    db = sqlite3.connect(tmp_path / "vhpc.db")
    per_trial = db.execute("SELECT trial_id, COUNT(*) FROM samples GROUP BY trial_id").fetchall()
    expected = {"pagefault": 2, "stream": 4}
    kinds = {t.id: t.benchmark for t in trials}
    assert {tid: n for tid, n in per_trial} == {tid: expected[kinds[tid]] for tid in kinds}
    assert store.campaign(cid)["status"] == "finished"
    obs = store.observations(cid)
    assert sum(o.warmup for o in obs) == 2 + 4
    assert all(o.valid for o in obs)


def test_a_trial_killed_while_running_is_rerun_once(tmp_path, kernels_built):
    s = spec.from_cli(["pagefault:mib=2,reps=1"], ["native"], repeats=1, warmup=0)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    (row,) = store.unfinished(cid)
    store.mark_running(row.id)  # as if vhpc was SIGKILLed during this trial
    store.close()
    store = Store(tmp_path / "vhpc.db")
    assert [t.status for t in store.unfinished(cid)] == ["running"]
    campaign.execute(store, cid)
    (t,) = store.trials(cid)
    assert t.status == "done" and len(store.observations(cid)) == 2


def test_reparse_rederives_samples_from_raw_output(tmp_path, kernels_built):
    s = spec.from_cli(["pagefault:mib=2,reps=1"], ["native"], repeats=1, warmup=0)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    before = store.observations(cid)
    store.db.execute("DELETE FROM samples")
    assert store.observations(cid) == []
    assert campaign.reparse(store, cid) == 1
    assert store.observations(cid) == before


def test_unknown_campaign_id_is_a_clear_error(tmp_path):
    from vhpc.store import StoreError

    store = Store(tmp_path / "vhpc.db")
    with pytest.raises(StoreError, match="no campaign 'nope'.*no campaigns"):
        store.campaign("nope")


def test_cold_warm_plan_boots_per_benchmark_block():
    s = spec.from_cli(["noise", "pagefault"], ["native", "vm"], repeats=2, warmup=0,
                      protocol="cold-warm", session_trials=3)
    trials = campaign.plan(s)
    assert len(trials) == 2 * 2 * 2 * 3
    first_round = [(t.environment, t.benchmark, t.fresh) for t in trials if t.round == 0]
    assert first_round[:6] == [("native", "noise", True), ("native", "noise", False),
                               ("native", "noise", False), ("native", "pagefault", True),
                               ("native", "pagefault", False), ("native", "pagefault", False)]
    cold = spec.from_cli(["noise"], ["native", "vm"], repeats=2, warmup=0, protocol="cold")
    assert all(t.fresh for t in campaign.plan(cold))
    warm = spec.from_cli(["noise"], ["native", "vm"], repeats=2, warmup=0)
    assert not any(t.fresh for t in campaign.plan(warm))


def _adaptive_spec(tmp_path, command, **kw):
    f = tmp_path / "c.yaml"
    f.write_text(
        "custom:\n"
        "  - name: probe\n"
        f"    command: [sh, -c, '{command}']\n"
        "    metrics: [{name: v, regex: 'v (\\d+)', unit: '1', higher_is_better: true}]\n"
        "benchmarks: [probe]\nenvironments: [native]\nwarmup: 0\n"
        + "".join(f"{k}: {v}\n" for k, v in kw.items()))
    return spec.from_file(f)


def test_adaptive_repeats_stop_when_precise(tmp_path):
    s = _adaptive_spec(tmp_path, "echo v 100", repeats=3, target_ci=0.02, max_repeats=10)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    assert len(store.trials(cid)) == 3  # constant values: precise after the planned rounds


def test_adaptive_repeats_add_rounds_up_to_the_maximum(tmp_path):
    s = _adaptive_spec(tmp_path, "echo v $(od -An -N2 -tu2 /dev/urandom)", repeats=3,
                       target_ci=0.001, max_repeats=6, order="fixed")
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    trials = store.trials(cid)
    assert [t.round for t in trials] == [0, 1, 2, 3, 4, 5]
    assert all(t.status == "done" for t in trials) and [t.seq for t in trials] == list(range(6))
    assert campaign.imprecise(store.observations(cid), 0.001)  # still imprecise: stopped by the cap


def test_imprecise_uses_the_relative_t_interval():
    from vhpc.core.metrics import Observation

    def o(v, i, env="a"):
        return Observation(env, "b", "", "m", "s", False, v, True, False, i)
    # mean 10, sd sqrt(4/3) = 1.155, n 4: half-width = t(0.975, 3) = 3.182 × 1.155 / 2
    # = 1.837 → 18.4 % of the mean; a group with one sample is always imprecise
    obs = [o(v, i) for i, v in enumerate([9.0, 11.0, 9.0, 11.0])] + [o(5.0, 9, env="b")]
    assert set(campaign.imprecise(obs, 0.18)) == {("a", "b", "", "m"), ("b", "b", "", "m")}
    assert campaign.imprecise(obs[:4], 0.19) == []
