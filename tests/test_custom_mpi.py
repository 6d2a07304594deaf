"""custom: benchmarks with the keys mpi:, inputs:, env: and check:. An MPI application (Debian's
lmp) launched as vhpc's kernels are, inputs staged per rank, and a check: that makes the
samples of an environment computing something else invalid, with the reason in the findings."""

from __future__ import annotations

import re

import pytest

from conftest import require_tool
from vhpc.analysis.checks import check_findings
from vhpc.campaign import checks
from vhpc.campaign import execute as campaign
from vhpc.spec import parse as spec
from vhpc.spec.parse import SpecError
from vhpc.store import Store

LJ = """\
variable        dt index 0.005
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 4 0 4 0 4
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 1.44 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    delay 0 every 20 check no
fix             1 all nve
timestep        ${dt}
thermo          50
run             50
"""

METRICS = """\
    metrics:
      - {name: steps_per_s, regex: '([0-9.]+) timesteps/s', unit: timesteps/s, direction: higher}
      - {name: loop_time, regex: 'Loop time of ([0-9.]+)', unit: s, direction: lower}
    check: {name: etotal, regex: '^\\s+50\\s+\\S+\\s+\\S+\\s+\\S+\\s+(\\S+)', rtol: 1.0e-4}
"""


def _campaign(tmp_path, body: str):
    (tmp_path / "in.lj").write_text(LJ)
    f = tmp_path / "c.yaml"
    f.write_text(body.replace("IN", str(tmp_path / "in.lj")))
    s = spec.from_file(f)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    return s, store, cid


def test_custom_mpi_lmp_two_ranks_bound_and_read_back(tmp_path):
    require_tool("lmp")
    require_tool("mpirun")
    s, store, cid = _campaign(tmp_path, (
        "repeats: 1\nwarmup: 0\nbenchmarks: [lj]\nenvironments: [native]\ncustom:\n"
        "  - name: lj\n    command: lmp -in in.lj -log none\n    mpi: {ranks: 2}\n"
        "    inputs: [IN]\n    env: {VHPC_TEST_MARK: staged}\n" + METRICS))
    (t,) = store.trials(cid)
    assert t.status == "done" and t.error is None, (t.error, (t.stderr or "")[-1500:])
    assert "on 2 procs for 50 steps with 256 atoms" in t.stdout  # LAMMPS ran 2 ranks
    ranks = t.applied.ranks
    assert [r["rank"] for r in ranks] == [0, 1]
    assert not set(ranks[0]["cpus"]) & set(ranks[1]["cpus"])  # each rank on its own core
    assert t.diagnostics.mpi["ranks"] == 2 and "--bind-to" in t.diagnostics.mpi["launcher"]
    obs = {o.metric: o for o in store.observations(cid)}
    loop = re.search(r"Loop time of (\S+)", t.stdout).group(1)
    assert obs["loop_time"].value == float(loop) and obs["etotal"].valid


def test_env_reaches_the_rank_and_inputs_folders_are_staged(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("v 42\n")
    f = tmp_path / "c.yaml"
    f.write_text(
        "repeats: 1\nwarmup: 0\nbenchmarks: [probe]\nenvironments: [native]\ncustom:\n"
        "  - name: probe\n    command: [sh, -c, 'cat data/x.txt; echo w $W; pwd']\n"
        f"    inputs: [{data}]\n    env: {{W: 7}}\n"
        "    metrics: [{name: v, regex: 'v (\\d+)', direction: higher},"
        " {name: w, regex: 'w (\\d+)', direction: higher}]\n")
    s = spec.from_file(f)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    (t,) = store.trials(cid)
    assert t.status == "done", t.error
    assert {o.metric: o.value for o in store.observations(cid)} == {"v": 42.0, "w": 7.0}
    assert re.search(r"^/tmp/vhpc-app-\d+-\d+-r0-", t.stdout, re.M)  # ran in its own working dir


def test_check_fails_where_a_physical_input_differs(tmp_path):
    """The time step depends on the CPUs the process may use: 2 natively, 1 in 'onecpu'.
    Energies differ by ~5e-4 relative: onecpu's samples are stored invalid and the findings
    quote both energies; the baseline's stay valid."""
    require_tool("lmp")
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to differ from the 1-CPU environment")
    s, store, cid = _campaign(tmp_path, (
        "repeats: 2\nwarmup: 0\nbenchmarks: [lj]\n"
        "environments: [native, {native: {name: onecpu, cpus: '1'}}]\ncustom:\n"
        "  - name: lj\n"
        "    command: [sh, -c, 'if [ $(nproc) -gt 1 ]; then dt=0.005; else dt=0.01; fi; "
        "exec lmp -var dt $dt -in in.lj -log none']\n"
        "    inputs: [IN]\n" + METRICS))
    trials = store.trials(cid)
    assert all(t.status == "done" for t in trials)
    by_env = {}
    for o in store.observations(cid):
        by_env.setdefault(o.environment, set()).add(o.valid)
    assert by_env == {"native": {True}, "onecpu": {False}}
    bad = [t for t in trials if t.environment == "onecpu"]
    assert all(t.error.startswith("check failed: etotal = ") for t in bad)
    energies = {t.environment: float(re.search(r"^\s+50\s+\S+\s+\S+\s+\S+\s+(\S+)", t.stdout,
                                               re.M).group(1)) for t in trials}
    assert f"{energies['onecpu']:.6g}" in bad[0].error
    assert f"baseline native {energies['native']:.6g}" in bad[0].error
    (finding,) = [f for f in check_findings(trials) if f.kind == "check-failed"]
    assert finding.scope == "onecpu / lj" and finding.level == "warn"
    assert "2 trial(s) failed the check" in finding.message and "tolerance 0.0001" in finding.message
    # idempotent: re-parsing the stored output re-derives the same outcome
    campaign.reparse(store, cid)
    assert [t.error for t in store.trials(cid)] == [t.error for t in trials]
    assert checks.apply(store, cid, s) == {"passed": 2, "failed": 2, "not_applied": 0}


def test_check_verdict_is_relative_to_the_reference():
    assert checks.verdict(-4.6227, -4.6227, 1e-4) == (True, 0.0)
    ok, rel = checks.verdict(-4.62491, -4.62270, 1e-4)
    assert not ok and rel == pytest.approx(0.00221 / 4.6227, rel=1e-3)
    assert checks.verdict(0.0, 0.0, 0.0)[0] and not checks.verdict(1e-9, 0.0, 0.1)[0]


def test_a_check_without_rtol_is_an_identity_figure(tmp_path):
    """``check: {metric: v}``: a figure shown beside the baseline's, never compared: the
    trial checks skip it and the analysis reads it as a check with no tolerance."""
    from vhpc.analysis.checks import check_specs, checked

    f = tmp_path / "c.yaml"
    f.write_text("benchmarks: [p]\nenvironments: [native]\ncustom:\n  - name: p\n"
                 "    command: echo v 1\n    metrics: [{name: v, regex: 'v (\\d+)', "
                 "direction: higher}]\n    check: {metric: v}\n")
    s = spec.from_file(f)
    (chk,) = s.benchmark("p").all_checks()
    assert (chk.metric, chk.rtol) == ("v", None)
    stored = {"custom": [{"name": "p", "check": {"metric": "v"}}]}
    assert check_specs(stored) == {"p": ("v", None)} and checked(stored) == {}


@pytest.mark.parametrize("block, message", [
    ("mpi: {ranks: 2, ranks_per_node: 1}", "ranks_per_node is set where the nodes are"),
    ("mpi: {ranks: 2, implementation: intel}", "choose one of openmpi, mpich"),
    ("mpi: {ranks: 0}", "ranks must be a whole number"),
    ("check: {metric: nope, rtol: 0.1}", "is not one of the metrics"),
    ("check: {metric: v, rtol: fast}", "rtol must be a relative tolerance"),
    ("inputs: /etc/hosts", "inputs must be a list"),
    ("inputs: [/a/x, /b/x]", "two inputs named 'x'"),
])
def test_bad_blocks_are_one_line_errors(tmp_path, block, message):
    f = tmp_path / "c.yaml"
    f.write_text("benchmarks: [p]\nenvironments: [native]\ncustom:\n  - name: p\n"
                 "    command: echo v 1\n    metrics: [{name: v, regex: 'v (\\d+)', "
                 f"direction: higher}}]\n    {block}\n")
    with pytest.raises(SpecError, match=re.escape(message)) as exc:
        spec.from_file(f)
    assert "\n" not in str(exc.value)


def test_docs_example_is_the_file_and_runs(tmp_path, monkeypatch):
    """docs/applications.md shows docs/examples/lammps-mpi.yaml verbatim (10 lines without its
    comment), and that file runs: natively here, 1 round (the guest is left to the VM tests)."""
    from pathlib import Path

    require_tool("lmp")
    require_tool("mpirun")
    root = Path(__file__).resolve().parents[1]
    example = (root / "docs" / "examples" / "lammps-mpi.yaml").read_text()
    body = "".join(ln + "\n" for ln in example.splitlines() if not ln.startswith("#"))
    doc = (root / "docs" / "applications.md").read_text()
    assert f"```yaml\n{body}```" in doc and len(body.splitlines()) == 10
    copy = tmp_path / "c.yaml"
    copy.write_text(body.replace("environments: [native, {vm: {vcpus: 2}}]",
                                 "environments: [native]\nrepeats: 1\nwarmup: 0")
                    .replace("inputs: [in.lj]", f"inputs: [{root / 'docs' / 'examples' / 'in.lj'}]"))
    s = spec.from_file(copy)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    (t,) = store.trials(cid)
    assert t.status == "done" and "on 2 procs for 100 steps with 4000 atoms" in t.stdout
    assert [r["rank"] for r in t.applied.ranks] == [0, 1]
    assert all(o.valid for o in store.observations(cid))


def test_relative_inputs_are_taken_from_the_campaign_file(tmp_path):
    sub = tmp_path / "case"
    sub.mkdir()
    (sub / "in.txt").write_text("v 3\n")
    f = sub / "c.yaml"
    f.write_text("benchmarks: [p]\nenvironments: [native]\ncustom:\n  - name: p\n"
                 "    command: cat in.txt\n    inputs: [in.txt]\n"
                 "    metrics: [{name: v, regex: 'v (\\d+)', direction: higher}]\n")
    s = spec.from_file(f)
    assert s.benchmark("p").inputs == ((str(sub / "in.txt"), "in.txt"),)
    assert s.custom[0]["inputs"] == [str(sub / "in.txt")]  # stored absolute: resumes anywhere


def test_a_missing_input_is_refused_before_any_trial(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("benchmarks: [p]\nenvironments: [native]\ncustom:\n  - name: p\n"
                 "    command: cat in.txt\n    inputs: [nowhere.txt]\n"
                 "    metrics: [{name: v, regex: 'v (\\d+)', direction: higher}]\n")
    s = spec.from_file(f)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    from vhpc.benchmarks.base import BenchmarkError

    with pytest.raises(BenchmarkError, match="nowhere.txt does not exist"):
        campaign.execute(store, cid)
    assert all(t.status == "pending" for t in store.trials(cid))


def test_an_input_guests_cannot_see_is_refused_before_any_trial(tmp_path):
    """Guests replace /tmp (and /var/tmp, /run, /dev/shm) with their own: an input there would
    be missing in the guest; pytest's tmp_path lies under /tmp."""
    (tmp_path / "in.txt").write_text("v 1\n")
    f = tmp_path / "c.yaml"
    f.write_text("benchmarks: [p]\nenvironments: [native, vm]\ncustom:\n  - name: p\n"
                 "    command: cat in.txt\n    inputs: [in.txt]\n"
                 "    metrics: [{name: v, regex: 'v (\\d+)', direction: higher}]\n")
    s = spec.from_file(f)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    from vhpc.benchmarks.base import BenchmarkError

    with pytest.raises(BenchmarkError, match=r"in.txt lies under /tmp.*replace with their own"):
        campaign.execute(store, cid)
    assert all(t.status == "pending" for t in store.trials(cid))


def test_no_valid_baseline_value_means_not_checked_and_said(tmp_path):
    """The baseline's own runs fail their success pattern: there is no reference, so the other
    environment's trials keep their samples and say they were not checked."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to differ from the 1-CPU environment")
    f = tmp_path / "c.yaml"
    f.write_text(
        "repeats: 1\nwarmup: 0\nbenchmarks: [p]\n"
        "environments: [native, {native: {name: onecpu, cpus: '1'}}]\ncustom:\n  - name: p\n"
        "    command: [sh, -c, 'echo e 5; [ $(nproc) -gt 1 ] || echo OK']\n    success: OK\n"
        "    metrics: [{name: e, regex: 'e (\\d+)', direction: lower}]\n"
        "    check: {metric: e, rtol: 0.01}\n")
    s = spec.from_file(f)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    trials = {t.environment: t for t in store.trials(cid)}
    assert trials["native"].error is None  # its own verification failed: invalid, no check
    assert trials["onecpu"].error.startswith("check not applied: no baseline (native) value")
    assert {o.environment: o.valid for o in store.observations(cid)} == {"native": False,
                                                                         "onecpu": True}
    bad = {o.trial_id for o in store.observations(cid) if not o.valid}
    found = {f.kind: f for f in check_findings(store.trials(cid), store.campaign(cid)["spec"],
                                              bad)}
    assert set(found) == {"check-not-applied"}  # nothing was compared, nothing agreed
