"""``vhpc paper`` never degrades silently: --executor and --host-knob reach every
study, a study it cannot run as the paper did is refused in one line before anything runs, and
the dry-run's trials and time estimate come from the studies' own planner and parameters (the
same estimate ``vhpc study --dry-run`` prints)."""

import re

import pytest

from vhpc import cli, topology
from vhpc.campaign import execute as campaign, studies
from vhpc.spec.parse import bench
from vhpc.workflows import estimate, paper

TWO = topology.load("pack:1 numa:1 core:2 pu:1")
#: load averages of an idle host: measured durations stand as stored
IDLE = (0.0, 0.0, 0.0)


def _cli(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, " ".join(out.out.split()), out.err


def test_paper_004_without_executor_refuses_scaling_in_one_line(capsys, tmp_path):
    rc, out, _ = _cli(capsys, "paper", "004", "--dry-run", "--repeats", "2", "--out", str(tmp_path))
    assert rc == 0
    first = out.split("scaling (Fig. 1-6)")[0]
    assert re.search(r"vhpc paper 004: will not run scaling: it runs across compute nodes .* no "
                     r"--executor was given; add --executor slurm:nodes=N", first)
    assert "not run: it runs across compute nodes" in out
    assert not (tmp_path / "vhpc.db").exists()


def test_paper_004_with_a_slurm_executor_plans_scaling_across_nodes(capsys, tmp_path):
    rc, out, _ = _cli(capsys, "paper", "004", "--dry-run", "--repeats", "2",
                      "--executor", "slurm:nodes=3", "--out", str(tmp_path))
    assert rc == 0
    assert "will not run scaling" not in out
    block = out.split("scaling (Fig. 1-6)")[1].split("executor slurm:nodes=3")[0]
    # HPCCG at 1, 2, 3 nodes; 4 collectives at 2 and 3 ranks; one ping-pong = 12 benchmarks,
    # × native and vm × (1 warm-up + 2) rounds
    assert "72 trials (12 benchmark(s) × 2 environment(s) × 1+2 rounds)" in block


def test_every_study_gets_the_executor_and_host_knobs():
    items = paper.plan("004", TWO, {}, repeats=2, executor="slurm:nodes=2")
    assert {"scaling", "collectives", "paging", "noise"} <= {i.name for i in items}
    for it in items:
        if it.name in ("scaling", "collectives", "paging", "noise"):
            assert it.reason is None, it.reason
        if it.reason is None:
            assert str(it.spec.executor) == "slurm:nodes=2"
    scaling = next(i for i in items if i.name == "scaling")
    ranks = sorted(b.params["ranks"] for b in scaling.spec.benchmarks if b.name == "hpccg")
    assert ranks == [1, 2]  # the scaling study across the 2 nodes, not one point
    local = paper.plan("004", TWO, {}, repeats=2, host_knobs=["hugepages_2m=1024"])
    for it in local:
        if it.name in ("collectives", "paging", "noise"):
            assert it.spec.host_knobs == {"hugepages_2m": "1024"}, it.reason
    # knobs cannot reach Slurm's nodes: said per study, in one line, not dropped
    remote = paper.plan("004", TWO, {}, repeats=2, executor="slurm:nodes=2",
                        host_knobs=["hugepages_2m=1024"])
    assert all(it.spec is None and "host knobs cannot be set" in it.reason for it in remote)


def test_paging_without_hugepages_is_refused_before_anything_runs(monkeypatch):
    import vhpc.host.facts as facts

    monkeypatch.setattr(facts, "read_hugepages", lambda *a, **k: {0: {2048: 0}})
    (item,) = [i for i in paper.plan("004", TWO, {}, repeats=2) if i.name == "paging"]
    assert item.spec is None and item.trials == []
    assert "needs hugepages" in item.reason and "--host-knob hugepages_2m=N" in item.reason
    (ok,) = [i for i in paper.plan("004", TWO, {}, repeats=2, host_knobs=["hugepages_2m=600"])
             if i.name == "paging"]
    assert ok.reason is None and ok.trials


def test_the_estimate_follows_the_benchmark_parameters():
    def spec_of(n):
        return studies.build("linpack", TWO, [f"linpack:n={n}"], repeats=2, warmup=0)

    assert estimate.work_factor(bench("linpack", n=200)) == pytest.approx(200 / 1000)
    assert estimate.work_factor(bench("hpccg", max_iter=298, ranks=4)) == pytest.approx(2.0)  # ranks: parallel
    assert estimate.work_factor(bench("randomaccess", table_log2=22)) == pytest.approx(4.0)
    from vhpc.environments.kind import KINDS

    native, vm = (KINDS.get(k)().trial_seconds("kvm") for k in ("native", "vm"))
    small, big = spec_of(200), spec_of(1000)
    # 2 rounds × (native + vm), half of each trial scaled by the work; one guest boot (warm)
    assert estimate.estimate_s(small, campaign.plan(small), "kvm", load=IDLE) == pytest.approx(
        2 * (native + vm) * (0.5 + 0.5 * 0.2) + estimate.BOOT_S["kvm"])
    assert estimate.estimate_s(big, campaign.plan(big), "kvm", load=IDLE) == pytest.approx(
        2 * (native + vm) + estimate.BOOT_S["kvm"])
    # a wall-clock duration adds its seconds in any environment
    noise = studies.build("noise", TWO, ["noise:duration=30"], repeats=2, warmup=0)
    longer = studies.build("noise", TWO, ["noise:duration=60"], repeats=2, warmup=0)
    trials = campaign.plan(noise)
    assert (estimate.estimate_s(longer, campaign.plan(longer), "tcg", load=IDLE)
            - estimate.estimate_s(noise, trials, "tcg", load=IDLE)) == pytest.approx(30 * len(trials))


def test_the_estimate_prefers_past_trials_of_the_same_parameters(tmp_path):
    from vhpc.store import Store

    spec = studies.build("linpack", TWO, ["linpack:n=300"], repeats=2, warmup=0)
    trials = campaign.plan(spec)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, spec, "vhpc study linpack")
    store.db.execute("UPDATE trials SET status='done', started=100, ended=103 WHERE campaign_id=?",
                     (cid,))
    store.db.commit()
    # 4 trials of 3 s each as stored, and the guest's one boot under TCG
    assert estimate.estimate_s(spec, trials, "tcg", store, load=IDLE) == pytest.approx(3.0 * 4 + estimate.BOOT_S["tcg"])
    cold = studies.build("linpack", TWO, ["linpack:n=300"], repeats=2, warmup=0, protocol="cold")
    assert estimate.estimate_s(cold, campaign.plan(cold), "tcg", store, load=IDLE) == pytest.approx(
        3.0 * 4 + 2 * estimate.BOOT_S["tcg"])  # a boot before each of the 2 VM trials


def test_study_dry_run_prints_the_same_estimate_as_paper(capsys, tmp_path):
    args = ("--dry-run", "--repeats", "2", "--out", str(tmp_path))
    rc, study_out, _ = _cli(capsys, "study", "linpack", "-b", "linpack:n=200", *args)
    assert rc == 0
    rc, paper_out, _ = _cli(capsys, "paper", "001", "-b", "linpack=linpack:n=200", *args)
    assert rc == 0
    line = re.search(r"\d+ trials \(1 benchmark\(s\) × 2 environment\(s\) × 1\+2 rounds\), about "
                     r"\d+ (?:s|min) \([^)]*\) on this host", study_out)
    assert line and line.group(0) in paper_out


def test_paper_command_lives_in_the_workflow_module():
    import inspect

    src = inspect.getsource(cli)
    assert "add_paper(sub)" in src and '"--from-store"' not in src
    assert "paper.run(args)" in inspect.getsource(cli.cmd_paper)


def test_a_study_this_host_reduces_is_said_before_anything_runs(capsys, tmp_path):
    from vhpc.campaign.execute import host_facts

    note = studies.note("partition", host_facts().topology)
    rc, out, _ = _cli(capsys, "paper", "000", "--dry-run", "--out", str(tmp_path))
    assert rc == 0
    first = out.split("socket-span (Fig. 2)")[0]
    if note:  # this host has fewer sockets or cores than the paper's
        assert f"vhpc paper 000: partition runs reduced: {' '.join(note.split())}" in first
    else:
        assert "runs reduced" not in first


def test_paper_study_runs_only_the_named_studies(capsys, tmp_path):
    """``--study`` (repeatable) narrows the seed to the named studies, in the dry run as in a
    run; an unknown name is one line naming the seed's studies, exit 2; --help lists it."""
    with pytest.raises(SystemExit):
        cli.main(["paper", "--help"])
    assert "--study NAME" in capsys.readouterr().out
    rc, out, _ = _cli(capsys, "paper", "003", "--dry-run", "--repeats", "2", "--study", "co-run",
                      "--out", str(tmp_path))
    assert rc == 0 and "co-run (Fig. 5)" in out and "oversubscription" not in out
    assert "seed 003: 1 of 1 studies to run" in out
    rc, _, err = _cli(capsys, "paper", "003", "--dry-run", "--study", "scaling", "--out",
                      str(tmp_path))
    assert rc == 2 and "--study scaling: not a study of seed 003: choose oversubscription" in err


def test_a_study_status_says_failed_with_the_reason_from_stderr():
    from types import SimpleNamespace as T

    srun = ("srun: error: vhpc2: task 0: Exited with exit code 2\n"
            "vhpc: error: vm: vcpus=2 but the host has 1 CPUs: give vcpus=1\n")
    trials = [T(status="done", stderr="", error=None),
              T(status="failed", stderr=srun, error="slurm step failed (srun exit 1)"),
              T(status="failed", stderr="", error="timed out after 600 s")]
    status, why = paper.study_status("finished", trials)
    assert status == "failed 2 of 3"
    assert why == "vhpc: error: vm: vcpus=2 but the host has 1 CPUs: give vcpus=1"
    assert paper.study_status("finished", trials[:1]) == ("finished", "")
    assert paper.study_status("interrupted", [trials[0], T(status="pending", stderr="", error=None)]
                              )[0] == "interrupted"
    assert paper.study_status("finished", []) == ("not run", "")


def test_the_estimate_uses_past_trials_of_the_same_kind_and_the_measured_boot(tmp_path):
    """A past campaign's trials of the same benchmark and parameters in an environment of the
    same kind (another name) give the trial time; the gap before a session's first trial the
    boot."""
    from vhpc.store import Store

    spec = studies.build("linpack", TWO, ["linpack:n=300"], repeats=2, warmup=0)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, spec, "vhpc study linpack")
    store.db.execute("UPDATE environments SET name = name || '-old' WHERE campaign_id=?", (cid,))
    store.db.execute("UPDATE environments SET accel='tcg' WHERE campaign_id=? AND kind='vm'", (cid,))
    store.db.execute("UPDATE trials SET environment = environment || '-old', status='done', "
                     "started = seq * 100 + 7, ended = seq * 100 + 10, session_index = "
                     "CASE WHEN environment LIKE 'vm%' THEN 0 ELSE NULL END WHERE campaign_id=?",
                     (cid,))
    store.db.commit()
    # each trial 3 s as stored; the VM's boot: its first trial began 97 s after the one before
    assert estimate.estimate_s(spec, campaign.plan(spec), "tcg", store, load=IDLE) == pytest.approx(3.0 * 4 + 97)


def test_a_guest_larger_than_a_node_is_refused_before_anything_runs(monkeypatch):
    """Under slurm the dry run asks what a node holds (sinfo's CPUs per node): a guest with
    more vCPUs than a node has CPUs is refused with the reason, as the page then says."""
    from vhpc import executors

    slurm = executors.EXECUTORS.get("slurm")
    monkeypatch.setattr(slurm, "node_cpus", classmethod(lambda cls, options: 1))
    items = {i.name: i for i in paper.plan("004", TWO, {}, repeats=2, executor="slurm:nodes=3")}
    guests = [i for i in items.values()
              if i.reason and "but a node of slurm:nodes=3 has 1 CPU(s) (sinfo)" in i.reason]
    assert guests and all(i.spec is None and i.trials == [] for i in guests)
    assert re.search(r"its guest \S+ has vcpus=\d+", guests[0].reason)
    monkeypatch.setattr(slurm, "node_cpus", classmethod(lambda cls, options: 64))
    assert all("(sinfo)" not in (i.reason or "") for i in
               paper.plan("004", TWO, {}, repeats=2, executor="slurm:nodes=3"))


def test_paging_under_slurm_is_refused_when_a_node_lacks_hugepages(monkeypatch):
    """The paging study's 2 MiB-backed guest under slurm: the nodes' own free hugepages (read
    there; faked here) decide, and the page's reason names the node short of them."""
    from vhpc import executors

    slurm = executors.EXECUTORS.get("slurm")
    monkeypatch.setattr(slurm, "node_cpus", classmethod(lambda cls, options: 64))
    free = {"vhpc1": {2048: 100000}, "vhpc2": {2048: 3}, "vhpc3": {2048: 100000}}
    monkeypatch.setattr(slurm, "node_hugepages", classmethod(lambda cls, options: free))
    items = {i.name: i for i in paper.plan("004", TWO, {}, repeats=2, executor="slurm:nodes=3")}
    reason = items["paging"].reason or ""
    assert items["paging"].spec is None and "but node vhpc2 has 3:" in reason, reason
    assert "2 MiB hugepages on each of 3 node(s)" in reason and "backing=4k" in reason
    free["vhpc2"] = {2048: 100000}
    items = {i.name: i for i in paper.plan("004", TWO, {}, repeats=2, executor="slurm:nodes=3")}
    assert items["paging"].reason is None and items["paging"].trials


def test_the_seed_page_first_table_puts_the_paper_beside_this_host(tmp_path):
    """The first table: per stated finding the paper's number beside this host's and the
    outcome; a failed study's status with its reason; a study not run with why."""
    from vhpc.report.paper import Line, write_seed_page

    line = Line("VM overhead of HPCCG is small", "seed 004, Sec. 5", "paper: overhead ≤ 10 %",
                "vm vs native, hpccg: overhead +31.0 % [+20.1, +43.0], n = 3", "disagrees", "")
    path = write_seed_page("004", [
        {"name": "scaling", "number": "Fig. 1-6", "cid": "c1", "status": "failed 2 of 24",
         "why": "vcpus=2 but the host has 1 CPUs", "lines": [line], "block": "<p>b</p>"},
        {"name": "paging", "number": "Fig. 12-13", "status": "not run",
         "why": "not run as the paper did: its guest vm-4k needs hugepages"}],
        tmp_path / "index.html")
    html = path.read_text()
    first = html.split('id="headline"')[1].split("</table>")[0]
    assert "paper: overhead ≤ 10 %" in first and "overhead +31.0 % [+20.1, +43.0], n = 3" in first
    assert re.search(r"<b>failed 2 of 24</b><div class=\"why\">vcpus=2 but the host has 1 CPUs",
                     first)
    assert "<b>not run</b>" in first and "needs hugepages" in first


def test_node_cpus_read_from_sinfo_of_the_default_partition(tmp_path, monkeypatch):
    """What a node holds comes from sinfo: the fewest CPUs of the default partition's nodes
    (marked *); no sinfo answer: nothing known (None), the executor's own checks then."""
    from vhpc import executors
    from vhpc.executors.slurm.nodes import partition_nodes

    fake = tmp_path / "sinfo"
    fake.write_text("#!/bin/sh\nprintf 'n1 debug* 4 idle\\nn2 debug* 2 idle\\nb1 big 64 idle\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    slurm = executors.EXECUTORS.get("slurm")
    assert [r[0] for r in partition_nodes(None)] == ["n1", "n2"]
    assert slurm.node_cpus(executors.parse("slurm:nodes=2").options) == 2
    fake.write_text("#!/bin/sh\nexit 1\n")
    assert slurm.node_cpus(executors.parse("slurm:nodes=2").options) is None


def test_the_estimate_scales_past_trials_by_the_load_then_and_now(tmp_path):
    """A trial stored at load 9 on 2 CPUs (one of it the campaign's own: 8 beside it) took
    (8 + 1) / 2 = 4.5 times an idle host's time; at load 3 now it takes (3 + 1) / 2 = 2
    times: 9 s stored → 4 s each.  The range runs from the fastest trial at half today's
    lowest load to the slowest at twice the highest plus one."""
    from vhpc.core import records
    from vhpc.store import Store

    spec = studies.build("linpack", TWO, ["linpack:n=300"], repeats=2, warmup=0)
    native = spec.model_copy(update={"environments": spec.environments[:1]})
    trials = campaign.plan(native)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, native, "vhpc study linpack")
    for t, d in zip(store.trials(cid), (9.0, 18.0)):
        diag = records.Diagnostics(loadavg_before=(9.0, 9.0, 9.0), loadavg_after=(9.0, 9.0, 9.0))
        store.finish_trial(t.id, "done", returncode=0, timed_out=False, error=None, stdout="",
                           stderr="", started=100.0, ended=100.0 + d, session_index=None,
                           applied=None, samples=[], diagnostics=diag)
    e = estimate.estimate(native, trials, "tcg", store, load=(3.0, 3.0, 3.0), cpus=2)
    idle = (2.0, 4.0)  # 9 and 18 s at a slowdown of 4.5
    assert e.seconds == pytest.approx(2 * 3.0 * 2)  # median 3 s idle, x2 at load 3, 2 trials
    assert e.low == pytest.approx(2 * idle[0] * max(1, (1.5 + 1) / 2))
    assert e.high == pytest.approx(2 * idle[1] * (3.0 * 2 + 1 + 1) / 2)
    assert e.measured == 2 and "at today's load" in e.text() and e.text().startswith("about 12 s")
    assert estimate.slowdown(0.5, 2) == 1.0 and estimate.slowdown(None) == 1.0


def test_a_dry_run_of_a_custom_benchmark_estimates(tmp_path, capsys):
    """The estimate looks a campaign's own benchmarks up in the campaign, not only in the
    registry: ``vhpc run FILE --dry-run`` of a custom command exits 0 with an estimate."""
    f = tmp_path / "c.yaml"
    f.write_text("repeats: 2\nwarmup: 0\nenvironments: [native]\nbenchmarks: [c]\n"
                 "custom:\n  - name: c\n    command: [\"true\"]\n"
                 "    metrics: [{name: t, regex: 'x (\\S+)', unit: s, direction: lower}]\n")
    rc, out, err = _cli(capsys, "run", str(f), "--dry-run", "--out", str(tmp_path))
    assert rc == 0, err
    assert re.search(r"2 trials \(1 benchmark\(s\) × 1 environment\(s\) × 0\+2 rounds\), "
                     r"about \d+ s \(\d+–\d+ s, a rule of thumb", out), out
    assert estimate.fmt_duration(40, 180) == "40 s–3 min"
    assert estimate.fmt_duration(240, 1140) == "4–19 min"


def test_the_estimate_counts_an_images_measured_boot_and_scales_guest_trials_from_native(tmp_path):
    """A past campaign of the same benchmark natively (3 s a trial) and in a guest (60 s a
    trial: 20 times native's) that booted the image ``grub.qcow2`` in 166 s (its first trial's
    ``boot_seconds``): a new campaign on that image with another benchmark measured only
    natively costs 166 s for the boot and native × 20 for its guest trials, all measured here:
    nothing guessed.  Another image's boot is guessed, and the estimate says so."""
    from vhpc.core import records
    from vhpc.spec.parse import bench, campaign as spec_of, env
    from vhpc.store import Store

    store = Store(tmp_path / "vhpc.db")
    old = spec_of([bench("stream"), bench("randomaccess")],
                  [env("native"), env("vm", image="/images/grub.qcow2")], repeats=2, warmup=0)
    cid = campaign.create(store, old, "old")
    store.set_fingerprint(cid, "vm", "tcg", {"image": {"path": "/images/grub.qcow2"}})
    t0 = 1000.0
    for t in store.trials(cid):
        vm = t.environment == "vm"
        d = (60.0 if vm else 3.0) if t.benchmark == "stream" else 3.0
        if vm and t.benchmark == "randomaccess":
            continue  # the guest never ran randomaccess: no measurement of it in a guest
        applied = records.AppliedPlacement(session=0).model_copy(
            update={"boot_seconds": 166.0}) if vm and t.seq == min(
                x.seq for x in store.trials(cid) if x.environment == "vm") else None
        store.finish_trial(t.id, "done", returncode=0, timed_out=False, error=None, stdout="",
                           stderr="", started=t0, ended=t0 + d,
                           session_index=(0 if applied else 1) if vm else None,
                           applied=applied, samples=[])
        t0 += d
    new = spec_of([bench("randomaccess")], [env("native"), env("vm", image="/x/grub.qcow2")],
                  repeats=2, warmup=0)
    e = estimate.estimate(new, campaign.plan(new), "tcg", store, load=IDLE)
    # 2 native trials of 3 s, 2 guest trials of 3 s × 20, one boot of 166 s, and the
    # campaign's start as measured (none: every past campaign booted a guest)
    assert e.seconds == pytest.approx(2 * 3.0 + 2 * 3.0 * 20 + 166.0)
    assert e.guessed == ()  # the ratio and the boot were measured here
    # another image: its boot is guessed, and said so
    other = spec_of([bench("stream")], [env("native"), env("vm", image="/x/uefi.qcow2")],
                    repeats=2, warmup=0)
    e = estimate.estimate(other, campaign.plan(other), "tcg", store, load=IDLE)
    assert e.guessed == ("vm boots: none of uefi.qcow2 measured here",)
    assert "guessed: vm boots: none of uefi.qcow2 measured here" in e.text()
    assert e.seconds == pytest.approx(2 * 3.0 + 2 * 60.0 + estimate.IMAGE_BOOT_S["tcg"])
