"""Applications measured as their communities measure them: checks that catch a wrong
run (a wrapped ``lmp``/``gmx_mpi`` that changes the time step or the cut-off in one
environment), like compared with like, parameters bounded by the environment, an unsupported
parameter refused before anything is stored, a damaged cached input rebuilt, and calibrate
sizing the slowdown for the CPUs an MPI application keeps busy.  Small problems throughout (the
community defaults are for users)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_tool
from vhpc import benchmarks, topology
from vhpc.benchmarks.apps import common
from vhpc.benchmarks.base import BenchmarkError
from vhpc.campaign import execute as campaign
from vhpc.environments.options import HostFacts
from vhpc.spec import parse as spec
from vhpc.store import Store

VHPC = [sys.executable, "-m", "vhpc.cli"]

#: The wrapper's test: the rank runs on host CPU 1 (the "wrong" environment is native:cpus=1).
ON_CPU1 = "grep -qx 'Cpus_allowed_list:[[:space:]]*1' /proc/self/status"


def _wrap(tmp_path: Path, name: str, body: str) -> Path:
    """A folder with an executable ``name`` running ``body`` then the real program."""
    real = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True,
                          text=True).stdout.strip()
    folder = tmp_path / "wrap"
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\nif {ON_CPU1}; then\n{body}\nfi\nexec {real} \"$@\"\n")
    script.chmod(0o755)
    return folder


def _two_cpus():
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs host CPUs 0 and 1: one environment on each")


def _run(tmp_path, item: str):
    """A campaign of ``item`` natively on CPU 0 (baseline) and on CPU 1 (``wrong``)."""
    s = spec.from_cli([item], ["native:cpus=0", "native:cpus=1,name=wrong"], repeats=1,
                      warmup=0)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    return store, cid


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))


def _wrong_run(tmp_path, monkeypatch, program: str, body: str, item: str):
    """Run ``item`` with ``program`` wrapped to run ``body`` first on CPU 1 (:func:`_run`):
    every trial done, the baseline's without an error; (store, campaign id, the wrong trial's
    error)."""
    _two_cpus()
    wrap = _wrap(tmp_path, program, body)
    monkeypatch.setenv("PATH", f"{wrap}{os.pathsep}{os.environ['PATH']}")
    store, cid = _run(tmp_path, item)
    trials = {t.environment: t for t in store.trials(cid)}
    assert all(t.status == "done" for t in trials.values()), [t.error for t in trials.values()]
    assert trials["native"].error is None
    valid = {(o.environment, o.valid) for o in store.observations(cid)}
    assert valid == {("native", True), ("wrong", False)}  # every sample of the wrong run
    return store, cid, trials["wrong"].error


@pytest.mark.parametrize("change, sed", [
    ("dt +10 %", "s/^timestep .*/timestep 0.0055/"),
    ("cut-off 2.5 -> 2.6", "s/2\\.5$/2.6/"),
])
def test_lammps_wrong_time_step_or_cut_off_fails_the_checks(tmp_path, monkeypatch, change, sed):
    require_tool("lmp")
    require_tool("mpirun")
    _, _, bad = _wrong_run(tmp_path, monkeypatch, "lmp", f"  sed -i '{sed}' in.lmp",
                           "lammps:ranks=1,atoms=864,steps=100")
    assert bad.startswith("check failed: ") and "(epair) = " in bad, (change, bad)
    assert "tolerance 1e-06" in bad  # lammps.CHECK_RTOL


def test_gromacs_double_time_step_fails_the_checks(tmp_path, monkeypatch):
    require_tool("gmx_mpi")
    require_tool("gmx")
    require_tool("mpirun")
    body = ('  for d in "$VHPC_CACHE"/apps/gromacs-*/; do src=$d; done\n'
            '  sed "s/^dt .*/dt = 0.004/" "$src/md.mdp" > wrong.mdp\n'
            '  gmx -quiet grompp -f wrong.mdp -c "$src/em.gro" -p "$src/topol.top" '
            '-o topol.tpr -po wrong-out.mdp >/dev/null 2>&1 || exit 97')
    store, cid, bad = _wrong_run(tmp_path, monkeypatch, "gmx_mpi", body,
                                 "gromacs:ranks=1,size=1.5,steps=100")
    assert bad.startswith("check failed: ") and "(temperature) = " in bad, bad
    (native,) = [t for t in store.trials(cid) if t.environment == "native"]
    md_log = common.shown_file(native.stdout, "md.log")
    assert "-resetstep 50" in md_log and "step 50: resetting all time and cycle counters" in md_log
    window = [o.value for o in store.observations(cid) if o.metric == "timed_window"]
    assert len(window) == 2 and all(w > 0 for w in window)


def _host(cores: int = 4) -> HostFacts:
    topo = topology.from_synthetic(f"pack:1 numa:1 l3:1 core:{cores} pu:1")
    return HostFacts(tuple(range(cores)), topo)


def test_environments_resolving_another_problem_are_refused_at_plan_time():
    """auto_ranks_compare: ranks left to auto resolve to 4 and 1: two problems, no overhead."""
    s = spec.from_cli(["lammps"], ["native", "native:cpus=0,name=one"])
    with pytest.raises(BenchmarkError) as exc:
        campaign.placements(s, _host())
    msg = str(exc.value)
    assert "\n" not in msg and "ranks 4 in native but 1 in one" in msg
    assert "give ranks= explicitly" in msg
    scaled = spec.from_cli(["lammps:ranks=1,scaling=scaled", "gromacs:ranks=1"],
                           ["native", "native:cpus=0,name=one", "vm:vcpus=1"])
    assert set(campaign.placements(scaled, _host())) == {"native", "one", "vm"}  # same problem


@pytest.mark.parametrize("item, words", [
    ("lammps:ranks=1000000000", "more than the 2 CPUs there: give ranks <= 2"),
    ("lammps:ranks=1,atoms=1000000000000", "GiB there: give at most"),
    ("gromacs:ranks=1,size=3000000", "GiB there: give size <="),  # 3e9 atoms: ~6 TiB
])
def test_parameters_beyond_the_environment_are_refused_at_dry_run(tmp_path, item, words):
    """unbounded_params: one line, exit 2, from --dry-run (nothing started)."""
    r = subprocess.run(VHPC + ["compare", "--dry-run", "-b", item, "-e", "native:cpus=0-1",
                               "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "250"}, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "(environment native)" in lines[0], r.stderr
    assert not (tmp_path / "out" / "vhpc.db").exists()


def test_more_ranks_than_the_water_box_has_domains_is_refused():
    s = spec.from_cli(["gromacs:ranks=9,size=1.5"], ["native"])  # a 2.55 nm box: 2 x 2 x 2
    with pytest.raises(BenchmarkError, match="splits into at most 8 domains: give ranks <= 8"):
        campaign.placements(s, _host(16))
    assert campaign.placements(spec.from_cli(["gromacs:ranks=8,size=1.5"], ["native"]),
                               _host(16))


def test_threads_without_openmp_are_refused_before_anything_is_stored(tmp_path):
    """lammps_threads: Debian's lmp has no OPENMP package; refused before the campaign is
    stored, so no campaign is left that can never finish."""
    require_tool("lmp")
    from vhpc.benchmarks.apps.lammps import has_openmp
    import shutil

    assert not has_openmp(shutil.which("lmp"))  # Debian 12's lmp: the premise of this test
    r = subprocess.run(VHPC + ["compare", "-b", "lammps:ranks=1,threads=2,atoms=500,steps=10",
                               "-e", "native:cpus=0-1", "--repeats", "1", "--out",
                               str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "COLUMNS": "250"})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "threads=2 needs lmp built with the OPENMP package" in r.stderr
    db = tmp_path / "out" / "vhpc.db"
    assert not db.exists() or Store(db).campaigns() == []


def test_a_damaged_cached_input_is_detected_by_checksum_and_rebuilt():
    """gromacs_stale_cache, at the layer that prepares every application input."""
    built = []

    def build(folder: Path) -> None:
        built.append(folder)
        (folder / "topol.tpr").write_bytes(b"run input " * 100)

    folder = common.prepared("gromacs", {"md.mdp": "dt = 0.002\n"}, build)
    again = common.prepared("gromacs", {"md.mdp": "dt = 0.002\n"}, build)
    assert again == folder and len(built) == 1  # intact: reused, not rebuilt
    (folder / "topol.tpr").write_bytes(b"run input " * 50 + b"\0garbage")  # damaged in place
    assert common.prepared("gromacs", {"md.mdp": "dt = 0.002\n"}, build) == folder
    assert len(built) == 2 and (folder / "topol.tpr").read_bytes() == b"run input " * 100
    (folder / "topol.tpr").unlink()  # missing
    common.prepared("gromacs", {"md.mdp": "dt = 0.002\n"}, build)
    assert len(built) == 3 and (folder / "topol.tpr").exists()


def test_calibrate_sizes_the_slowdown_for_every_busy_rank():
    """calibrate_busy: an MPI application keeps ranks x threads CPUs busy, not one."""
    from vhpc.workflows.calibrate import busy_cpus

    for name, params, busy in (("lammps", {"ranks": 2}, 2), ("gromacs", {"ranks": 2}, 2),
                               ("gromacs", {}, 4), ("osu-coll", {"ranks": 3}, 3),
                               ("stream", {"threads": 2}, 2)):
        b = benchmarks.get(name)
        assert busy_cpus(b, b.resolve(params), 4) == busy, name


def test_checks_are_read_before_correct_runs_diverge():
    """A long run is checked at the horizon (LAMMPS 1,000 steps, GROMACS 100), where correct
    runs still agree within the tolerance; the parser reads that step's row."""
    from vhpc.benchmarks.apps import gromacs, lammps

    assert lammps.check_step(50) == 50 and lammps.check_step(5000) == 1000
    assert gromacs.check_step(2000) == 100 and gromacs.reset_step(2000) == 1000
    b = benchmarks.get("lammps")
    p = b.resolve({"steps": 1500})
    assert "thermo          100\n" in b.input_text(p, 1)  # prints the row of step 1,000
    rows = "".join(f"{s:8d} {0.7 + s / 1e5:.7f} {-5.7 - s / 1e5:.7f} 0 -4.62 0.2\n"
                   for s in range(0, 1501, 100))
    text = ("Step Temp E_pair E_mol TotEng Press\n" + rows + "Loop time of 9 on 1 procs for "
            "1500 steps with 32000 atoms\n\nPerformance: 1 tau/day, 166.6 timesteps/s\n")
    got = {x.metric: x.value for x in b.parse(p, text, "", 0)}
    assert got["epair"] == pytest.approx(-5.71) and got["temp"] == pytest.approx(0.71)


def test_gromacs_steps_left_out_are_sized_once_per_campaign_and_stored(capsys, tmp_path,
                                                                       monkeypatch):
    """GROMACS's ``steps`` left out is sized before any trial from one 1-rank probe (faked
    here: 100 timed steps in 0.5 s with all its CPU, so 5 ms a step), cached per host and
    problem, stored in the campaign's parameters and run by every environment alike: the
    timed half lasts at least the 2 s floor at that speed."""
    from conftest import run_cli
    from vhpc.benchmarks.apps import sizing

    require_tool("gmx_mpi")
    require_tool("gmx")
    require_tool("mpirun")
    _two_cpus()
    calls = []

    def fake_probe(argv, env, busy, timeout, window):
        calls.append(argv)
        assert "-nsteps" in argv and argv[argv.index("-nsteps") + 1] == "200"
        assert argv[argv.index("-resetstep") + 1] == "100"
        return 0.5, 1.0

    monkeypatch.setattr(sizing, "probe", fake_probe)
    out = tmp_path / "out"
    item = "gromacs:ranks=1,size=1.5"
    envs = ["-e", "native:cpus=0", "-e", "native:cpus=1,name=other"]
    rc, _, err = run_cli(capsys, "compare", "-b", item, *envs, "--repeats", "1", "--warmup",
                         "0", "--no-report", "--out", out)
    assert rc == 0, err[-2000:]
    step_s = 0.5 / 100
    store = Store(out / "vhpc.db")
    (cid,) = [c["id"] for c in store.campaigns()]
    trials = store.trials(cid)
    steps = {dict(kv.split("=") for kv in t.params.split(","))["steps"] for t in trials}
    assert len(steps) == 1, steps  # one step count for every environment
    n = int(steps.pop())
    assert n % 100 == 0 and (n // 2) * step_s >= sizing.FLOOR_S, n
    assert f"steps={n}" in err and len(calls) == 1
    for t in trials:
        assert t.status == "done", t.error
        log = common.shown_file(t.stdout, "md.log")
        assert f"-nsteps {n}" in log and f"step {n // 2}: resetting all time" in log
    # a second campaign of the same problem reads the cache; a damaged cache is probed again
    rc, so, _ = run_cli(capsys, "compare", "-b", item, *envs, "--dry-run", "--out", out)
    # the dry run's parameter cell folds inside "(3 s window, probed)" at 80 columns
    assert rc == 0 and "steps=auto" in so and "probed" in so
    s = spec.from_cli([item], ["native"], repeats=1, warmup=0)
    assert campaign.sized(s).benchmarks[0].params["steps"] == n and len(calls) == 1
    cache = Path(os.environ["VHPC_CACHE"]) / "apps" / sizing.CACHE_NAME
    cache.write_text(json.dumps({k: -1 for k in json.loads(cache.read_text())}))
    assert campaign.sized(s).benchmarks[0].params["steps"] == n and len(calls) == 2
    given = spec.from_cli(["gromacs:ranks=1,size=1.5,steps=300"], ["native"])
    assert campaign.sized(given) is given and len(calls) == 2  # given steps: no probe


def test_gromacs_probes_one_rank_and_caches_no_probe_of_a_busy_host(tmp_path, monkeypatch):
    """ranks=2 is probed on one rank (MPI ranks busy-poll, so their CPU share hides load) and
    its step time halved; a probe that got half its CPU sizes the campaign, scaled by that
    share, and is not cached: the next campaign probes again."""
    from vhpc.benchmarks.apps import sizing

    require_tool("gmx_mpi")
    require_tool("gmx")
    require_tool("mpirun")
    _two_cpus()
    calls = []

    def fake_probe(argv, env, busy, timeout, window):
        calls.append(argv)
        assert argv[argv.index("-np") + 1] == "1" and busy == 1
        return 1.0, 0.5  # 100 timed steps in 1 s with half its CPU: 5 ms a step alone

    monkeypatch.setattr(sizing, "probe", fake_probe)
    b = benchmarks.get("gromacs")
    params = b.resolve({"ranks": 2, "size": 1.5})
    b.preflight(params)
    said = []
    n = b.size_problem(params, said.append)["steps"]
    assert (n // 2) * 0.005 / 2 >= sizing.TARGET_S and (n // 2 - 100) * 0.0025 < sizing.TARGET_S
    assert any("not cached" in line for line in said)
    assert b.size_problem(params)["steps"] == n and len(calls) == 2  # probed again


def test_a_sized_run_reaches_the_floor_at_the_probed_speed():
    """steps_for: the fewest multiple of 100 (at least 200) whose timed half reaches the target
    window, for slow and fast steps; a step time that is no number is refused."""
    from vhpc.benchmarks.apps import sizing

    half = lambda n: n - n // 2  # noqa: E731  mdrun's -resetstep steps/2
    for step_s in (1e-5, 0.0025, 0.0149, 0.5, 30.0):
        n = sizing.steps_for(step_s, 100, half)
        assert n % 100 == 0 and n >= 200
        assert half(n) * step_s >= sizing.TARGET_S or n == sizing.MAX_STEPS
        assert n == 200 or half(n - 100) * step_s < sizing.TARGET_S  # the fewest
    assert sizing.steps_for(1e-9, 100, half) == sizing.MAX_STEPS
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="seconds per step .*: give a finite positive"):
            sizing.steps_for(bad, 100, half)


@pytest.mark.parametrize("text", ["[" * 200000, "not json", '{"k": true}', '{"k": 1e999}',
                                  '{"k": "0.01"}', '[1, 2]', '{"k": 0}'])
def test_a_damaged_step_cache_is_no_answer(text):
    """The step-time cache is input like any other: planted or damaged entries (too deep,
    not JSON, not a finite positive number) are no answer, so the problem is probed again,
    and remembering a value rewrites the file whole."""
    from vhpc.benchmarks.apps import sizing

    path = sizing._cache_path()
    path.write_text(text)
    assert sizing.cached("k") is None
    sizing.remember("k", 0.25)
    assert sizing.cached("k") == 0.25 and json.loads(path.read_text()) == {"k": 0.25}


def test_a_probe_past_its_time_is_refused_and_leaves_no_process(tmp_path):
    """The sizing probe's whole session is killed when it times out (a rank in a group of its
    own, as Open MPI starts them, included): one line saying to give steps=."""
    from vhpc.benchmarks.apps import sizing

    marker = "301.25"  # sleep's argument names this test's processes
    argv = ["sh", "-c", f"set -m; sleep {marker} & sleep {marker}"]  # set -m: its own group
    with pytest.raises(BenchmarkError, match="did not finish in 1 s: give steps="):
        sizing.probe(argv, {}, 1, 1, lambda o, e, rc: 1.0)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout == "", left.stdout
