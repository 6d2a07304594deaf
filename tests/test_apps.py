"""LAMMPS and GROMACS as benchmarks: real runs of Debian's lmp and gmx_mpi on inputs
vhpc writes, figures of merit parsed from the applications' own output (compared here with the
lines the applications printed, read with the test's own patterns), ranks read back."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool
from vhpc.benchmarks import get
from vhpc.benchmarks.apps import common
from vhpc.benchmarks.apps.lammps import box, thermo_table
from vhpc.benchmarks.base import BenchmarkError, RunContext
from vhpc.benchmarks.mpilaunch import readback


def run(bench, params, ncpus=2):
    """Run one trial of ``bench`` natively as vhpc would (command + environment) and return
    (stdout, stderr, returncode, ctx)."""
    ctx = RunContext(Path("/nonexistent"), ncpus)
    argv = bench.command(params, ctx)
    env = {**os.environ, **bench.environ(params, ctx)}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    return out.stdout, out.stderr, out.returncode, ctx


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))


def test_lammps_lj_two_ranks_parsed_from_lammps_own_lines_and_read_back():
    require_tool("lmp")
    require_tool("mpirun")
    b = get("lammps")
    p = b.resolve({"ranks": 2, "atoms": 864, "steps": 20})
    stdout, stderr, rc, ctx = run(b, p)
    assert rc == 0, stderr[-2000:]
    s = {x.metric: x for x in b.parse(p, stdout, stderr, rc)}
    loop = re.search(r"Loop time of (\S+) on (\d+) procs for (\d+) steps with (\d+) atoms", stdout)
    perf = re.search(r"Performance: .*?, (\S+) timesteps/s", stdout)
    assert loop.group(2) == "2" and loop.group(3) == "20"
    assert int(loop.group(4)) == 4 * 6 * 6 * 6  # 864 atoms = 6x6x6 fcc cells, LAMMPS says
    assert s["loop_time"].value == float(loop.group(1))
    assert s["timesteps_per_s"].value == float(perf.group(1))
    assert s["matom_steps_per_s"].value == pytest.approx(float(perf.group(1)) * 864 / 1e6)
    last = [ln.split() for ln in stdout.splitlines() if re.match(r"\s+20\s", ln)][-1]
    assert s["temp"].value == float(last[1])  # Temp, E_pair of the step-20 thermo row
    assert s["epair"].value == float(last[2])
    assert all(x.valid for x in s.values())
    banner = subprocess.run(["lmp", "-h"], capture_output=True, text=True).stdout
    version = re.search(r"Massively Parallel Simulator - (.+)", banner).group(1).strip()
    assert b.check_key(p, stdout) == f"864 atoms on 2 ranks, LAMMPS {version}"
    applied, diag = b.readback(p, ctx, stdout)
    assert [r["rank"] for r in applied["ranks"]] == [0, 1]
    assert not applied.get("mismatches"), applied
    assert diag["mpi"]["ranks"] == 2 and diag["mpi"]["bound"]
    assert not [d for d in os.listdir("/tmp") if d.startswith("vhpc-app-")
                and str(os.getpid()) in d]  # working directories removed


def test_lammps_eam_stages_the_potential_into_the_working_directory():
    require_tool("lmp")
    require_tool("mpirun")
    b = get("lammps")
    p = b.resolve({"problem": "eam", "ranks": 1, "atoms": 500, "steps": 10})
    argv = b.command(p, RunContext(Path("/x"), 2))
    assert "/usr/share/lammps/potentials/Cu_u3.eam" in argv  # staged, not referenced
    stdout, stderr, rc, _ = run(b, p)
    assert rc == 0, stderr[-2000:]
    assert "Cu_u3.eam" in stdout and "units           metal" not in stdout
    s = {x.metric: x for x in b.parse(p, stdout, stderr, rc)}
    header, rows = thermo_table(stdout)
    assert s["epair"].value == float(rows[-1][header.index("E_pair")])
    # in.eam's totals (metal units, no per-atom norm): Cu's cohesive energy 3.54 eV/atom,
    # heated, times the 500 atoms; thermo every 50 steps as in.eam: steps 0, 50, 100
    assert -4.0 * 500 < s["epair"].value < -3.0 * 500 and s["epair"].unit == "eV"
    p100 = b.resolve({"problem": "eam", "ranks": 1, "atoms": 500, "steps": 100})
    stdout, stderr, rc, _ = run(b, p100)
    assert rc == 0, stderr[-2000:]
    assert [r[0] for r in thermo_table(stdout)[1]] == ["0", "50", "100"]


def test_lammps_box_is_the_nearest_fcc_box():
    assert box(32000) == (20, 20, 20)
    assert box(4) == (1, 1, 1)
    nx, ny, nz = box(2048 * 3)
    assert abs(4 * nx * ny * nz - 6144) / 6144 < 0.1


def test_lammps_failed_run_is_invalid_or_a_parse_error():
    b = get("lammps")
    p = b.resolve({"steps": 100})
    text = ("Step Temp E_pair E_mol TotEng Press\n 0 1.44 -6.77 0 -4.61 -5.0\n"
            " 50 0.74 -5.73 0 -4.62 0.3\n"
            "Loop time of 0.5 on 1 procs for 50 steps with 4000 atoms\n\n"
            "Performance: 43200 tau/day, 100.0 timesteps/s\n")
    s = b.parse(p, text, "", 0)
    assert not any(x.valid for x in s)  # 50 of 100 steps run: not the requested problem
    from vhpc.benchmarks.base import ParseError

    with pytest.raises(ParseError, match="Loop time"):
        b.parse(p, "ERROR: Lost atoms\n", "", 1)


def test_gromacs_water_box_parsed_from_md_log():
    require_tool("gmx_mpi")
    require_tool("mpirun")
    b = get("gromacs")
    p = b.resolve({"size": 1.5, "steps": 20, "ranks": 1})
    b.preflight(p)  # solvate, minimisation and grompp, once, into the cache
    stdout, stderr, rc, ctx = run(b, p)
    assert rc == 0, stderr[-3000:]
    log = common.shown_file(stdout, "md.log")
    assert log and "There are:" in log
    s = {x.metric: x for x in b.parse(p, stdout, stderr, rc)}
    perf = re.search(r"^Performance:\s+(\S+)", log, re.M)
    wall = re.search(r"^\s+Time:\s+\S+\s+(\S+)", log, re.M)
    assert s["ns_per_day"].value == float(perf.group(1))
    assert s["timed_window"].value == float(wall.group(1))
    # the potential energy of the last step: the Potential column of the last block before
    # the averages, located by the column's position in its header line
    body = log.split("A V E R A G E S")[0]
    block = body[body.rindex("Energies (kJ/mol)"):].splitlines()
    for names, values in zip(block[1::2], block[2::2]):
        if "Potential" in names:
            col = (names.index("Potential") + len("Potential") - 1) // 15  # 15-wide fields
            assert s["epot"].value == float(values.split()[col])
            break
    else:
        pytest.fail("no Potential column in md.log")
    assert s["epot"].value < 0 and all(x.valid for x in s.values())
    version = subprocess.run(["gmx_mpi", "--version"], capture_output=True, text=True).stdout
    version = re.search(r"GROMACS version:\s+(\S+)", version).group(1)
    assert re.search(rf"^\d+ atoms on 1 ranks, GROMACS {re.escape(version)}$",
                     b.check_key(p, stdout))
    applied, _ = b.readback(p, ctx, stdout)
    assert [r["rank"] for r in applied["ranks"]] == [0]


def test_missing_application_is_one_line_naming_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    for name, package in (("lammps", "lammps"), ("gromacs", "gromacs")):
        b = get(name)
        with pytest.raises(BenchmarkError, match=f"apt-get install {package}$"):
            b.preflight(b.resolve({}))


def test_doctor_names_both_applications():
    """Each application declares its own doctor line; the table gathered from the registered
    parts holds them."""
    from vhpc.workflows.parts import components

    probes = {c.probe: c.debian for c in components()}
    assert probes["cmd:lmp"] == "lammps" and probes["cmd:gmx_mpi"] == "gromacs"


def test_rankrun_stages_shows_and_reports_the_rank(tmp_path):
    """rankrun.py as a launcher would start it: the rank from the launcher's variable, the
    staged file in a fresh directory, the shown file printed, the child's status returned, the
    VHPC-RANK line parsed by the kernels' read-back."""
    import sys

    from vhpc.benchmarks.apps import rankrun
    from vhpc.benchmarks.mpilaunch import Launch, rank_lines

    (tmp_path / "in.txt").write_text("hello\n")
    argv = [sys.executable, "-S", str(common.RANKRUN), "--stage", str(tmp_path / 'in.txt'), "x.txt",
            "--show", "out.txt", "--env", "GREETING=hi", "--",
            "sh", "-c", 'cp x.txt out.txt; echo "$GREETING" >> out.txt; exit 3']
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PMIX_RANK": "0"})
    assert out.returncode == 3
    assert common.shown_file(out.stdout, "out.txt") == "hello\nhi\n"
    (row,) = rank_lines(out.stdout)
    assert row["rank"] == 0 and set(row["cpus"]) <= os.sched_getaffinity(0)
    assert readback(Launch(1, ncpus=len(os.sched_getaffinity(0))), out.stdout) == {"ranks": [row]}
    other = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "OMPI_COMM_WORLD_RANK": "1"})
    assert common.shown_file(other.stdout, "out.txt") is None  # only rank 0 prints files
    assert rank_lines(other.stdout)[0]["rank"] == 1
    assert rankrun.format_cpu_list({0, 1, 2, 5}) == "0-2,5"
    assert rankrun.parse_cpu_list("0-2,5\n") == {0, 1, 2, 5}
