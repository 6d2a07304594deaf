"""``lammps``: Debian's LAMMPS (``lmp``, built with Open MPI) on the two classic LAMMPS
benchmark problems, with inputs vhpc writes itself.

Problems (after the ``in.lj`` and ``in.eam`` inputs of the LAMMPS distribution's bench folder):

- ``lj``: Lennard-Jones melt, reduced units, fcc lattice at density 0.8442, T = 1.44,
  cut-off 2.5 σ, NVE, Δt = 0.005 τ.
- ``eam``: copper with the embedded-atom potential ``Cu_u3.eam`` (Debian's ``lammps-data``:
  ``/usr/share/lammps/potentials``; staged into each rank's working directory), fcc lattice
  3.615 Å, T = 1600 K, NVE, Δt = 5 fs.

Size, as LAMMPS's own benchmarks run them ("fixed" and "scaled" problem sizes): by
default 32,000 atoms (in.lj's and in.eam's 20 x 20 x 20 fcc cells) for 100 steps.  ``scaling``
says what ``atoms`` counts: ``fixed`` (strong scaling: ``atoms`` in all, whatever the rank
count) or ``scaled`` (weak scaling: ``atoms`` per rank, ``atoms`` x ranks in all, as LAMMPS's
scaled runs and seed 004's weak scaling).  The box holds 4 atoms per fcc cell: ``nx = ny =
round(C^(1/3))``, ``nz = round(C / nx²)`` cells for C = atoms / 4, so the atom count LAMMPS
reports ("with K atoms") is the nearest such box, not exactly the request (32,000 is exact).

Metrics, from LAMMPS's own output: ``timesteps_per_s`` (the ``Performance:`` line),
``matom_steps_per_s`` (that line's ``Matom-step/s`` or ``katom-step/s`` where this LAMMPS
prints one; else timesteps/s x atoms / 10^6, LAMMPS's own formula,
``Finish::end`` in LAMMPS's finish.cpp), ``loop_time`` (``Loop time of T on P procs for S steps
with K atoms``), and the checks, from the thermo row of the last step (of step 1,000 in a
longer run: :func:`check_step`): ``epair`` (E_pair, the potential energy per atom) and
``temp`` (Temp).  Both must agree with the baseline
environment's within a relative 1e-6 (:data:`CHECK_RTOL`).  Not TotEng: NVE conserves it, so
a time step 10 % too long moved it 4e-5 after 100 steps while E_pair moved 5e-4 and Temp 2e-3
(docs/applications.md, "How the checks were sized").
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import subprocess
from typing import Any, Mapping

from vhpc.benchmarks.apps.common import number, rank_command, require
from vhpc.benchmarks.base import Benchmark, BenchmarkError, Check, Param, ParseError, register
from vhpc.benchmarks.apps import common
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample
from vhpc.host.doctor import Component

#: Where Debian's lammps-data installs the potentials.
POTENTIALS = "/usr/share/lammps/potentials"
EAM_FILE = "Cu_u3.eam"

LJ_INPUT = """\
# vhpc lammps problem=lj: Lennard-Jones melt (after LAMMPS's in.lj benchmark)
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 {nx} 0 {ny} 0 {nz}
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 1.44 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    delay 0 every 20 check no
fix             1 all nve
timestep        0.005
thermo          {thermo}
thermo_modify   norm yes
run             {steps}
"""

EAM_INPUT = """\
# vhpc lammps problem=eam: Cu with the EAM potential Cu_u3.eam (after LAMMPS's in.eam benchmark)
units           metal
atom_style      atomic
lattice         fcc 3.615
region          box block 0 {nx} 0 {ny} 0 {nz}
create_box      1 box
create_atoms    1 box
pair_style      eam
pair_coeff      1 1 {potential}
velocity        all create 1600.0 376847 loop geom
neighbor        1.0 bin
neigh_modify    every 1 delay 5 check yes
fix             1 all nve
timestep        0.005
thermo          {thermo}
run             {steps}
"""

#: LAMMPS's bench defaults (in.lj, in.eam): atoms and steps of one run.
BENCH_ATOMS, BENCH_STEPS = 32_000, 100
#: Steps between thermo rows, as each problem's input in LAMMPS's bench folder has them
THERMO = {"lj": 100, "eam": 50}
#: Unit of E_pair per problem: in.lj's lj units print it per atom (thermo_modify norm yes,
#: their default), in.eam's metal units the total in eV (norm no, their default)
EPAIR_UNIT = {"lj": "energy/atom", "eam": "eV"}

#: The checks (docs/applications.md, "How the checks were sized", measured on in.lj with
#: 2,048 and 32,000 atoms, 1 vs 2 ranks, repeats): the relative difference of E_pair and Temp
#: between rank counts (another summation order) was 0 in 10 digits up to 500 steps, 2e-10 at
#: 1,000 and 2e-6 at 1,500, then saturated at the thermal fluctuation (~2e-3): chaos, e-fold
#: every ~62 steps.  So they are read at step min(steps, CHECK_HORIZON), where two correct
#: runs agree to better than LAMMPS's 8 printed digits, within CHECK_RTOL; a time step 10 %
#: too long moves E_pair 5e-4 at step 100, 2e-3 at step 1,000.
CHECK_HORIZON, CHECK_RTOL = 1000, 1e-6
#: Memory one rank needs besides its atoms, and per atom (measured: lmp on in.lj holds 32 MB
#: at 2,048 atoms and 68 MB at 108,000, 0.35 KB per atom; with a margin of 1.25-1.5).
RANK_BYTES, ATOM_BYTES = 40 << 20, 512

#: The banner LAMMPS prints first: ``LAMMPS (29 Sep 2021 - Update 2)``.
VERSION_RE = re.compile(r"^LAMMPS \(([^)]+)\)", re.M)
LOOP_RE = re.compile(r"^Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms",
                     re.M)
PERF_RE = re.compile(r"^Performance:(.*)$", re.M)
STEPS_S_RE = re.compile(r"([0-9.eE+-]+) timesteps/s")
ATOMSTEPS_RE = re.compile(r"([0-9.eE+-]+) ([kM])atom-step/s")


def check_step(steps: int) -> int:
    """The step whose thermo row the checks read: the last, or :data:`CHECK_HORIZON`."""
    return min(int(steps), CHECK_HORIZON)


def box(atoms: int) -> tuple[int, int, int]:
    """fcc cells (nx, ny, nz) of the box nearest to ``atoms`` atoms (4 per cell; module
    docstring)."""
    cells = max(1, round(atoms / 4))
    side = max(1, round(cells ** (1 / 3)))
    return side, side, max(1, round(cells / (side * side)))


def thermo_table(text: str) -> tuple[list[str], list[list[str]]]:
    """Column names and rows of the last thermo table (header line ``Step ...``, rows of
    numbers, ended by ``Loop time``).  ([], []) when there is none."""
    header: list[str] = []
    rows: list[list[str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if words[:1] == ["Step"]:
            header, rows = words, []
            for row in lines[i + 1:]:
                cells = row.split()
                if len(cells) != len(header) or not cells[0].lstrip("-").isdigit():
                    break
                rows.append(cells)
    return header, rows


@functools.lru_cache(maxsize=None)
def has_openmp(lmp: str) -> bool:
    """True when this ``lmp`` was built with the OPENMP package (``lmp -h``'s installed
    packages), which ``threads`` > 1 needs (Debian 12's is built without it)."""
    try:
        out = subprocess.run([lmp, "-h"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(re.search(r"\bOPENMP\b", out.stdout))


def _refuse_threads(lmp: str, threads: int) -> None:
    """Raise BenchmarkError (one line) when ``threads`` > 1 and ``lmp`` lacks OPENMP."""
    if threads > 1 and not has_openmp(lmp):
        raise BenchmarkError(f"lammps: threads={threads} needs lmp built with the OPENMP "
                             "package; Debian's has none: use threads=1 and more ranks")


class Lammps(Benchmark):
    """See the module docstring."""

    name = "lammps"
    summary = "LAMMPS (Debian's lmp): Lennard-Jones melt or Cu EAM, inputs written by vhpc"
    provenance = ("seed 004 Fig. 7 (CTH: an application; LAMMPS stands in as a public "
                  "community code)")
    verification = ("checks: E_pair and Temp of the last step (of step 1,000 in longer runs) "
                    "within a relative 1e-6 of the baseline environment's "
                    "(docs/applications.md); exit status 0 and every step run")
    timing = ("LAMMPS's own timers, unchanged: 'Loop time of' (the run's main loop, set-up "
              "excluded) and the Performance line (timesteps/s)")
    package = "lammps"
    components = (
        Component("LAMMPS", "lammps benchmark, applications study", "cmd:lmp", "lammps",
                  "lammps-openmpi (EPEL)"),
    )
    app_binary = "lmp"
    params = (
        Param("problem", "lj", str, "lj (Lennard-Jones melt, in.lj) or eam (Cu, EAM "
              "potential, in.eam)", choices=("lj", "eam")),
        Param("atoms", BENCH_ATOMS, int, "atoms in all (scaling=fixed) or per rank "
              "(scaling=scaled); in.lj's and in.eam's 32,000 by default", minimum=4),
        Param("scaling", "fixed", str, "fixed: the same atoms on any rank count (strong "
              "scaling); scaled: atoms per rank (weak scaling), as LAMMPS's bench runs",
              choices=("fixed", "scaled")),
        Param("steps", BENCH_STEPS, int, "MD time steps (in.lj's and in.eam's 100)", minimum=1),
        Param("ranks", None, int, "MPI ranks (default: all CPUs)", minimum=1),
        Param("threads", 1, int, "OpenMP threads per rank (needs lmp with the OPENMP package)",
              minimum=1),
    )
    metrics = (
        Metric("timesteps_per_s", "timesteps/s", True, "LAMMPS's Performance line",
               inverse_of="loop_time"),
        Metric("matom_steps_per_s", "Matom-steps/s", True,
               "atom-steps per second / 10^6 (LAMMPS's Performance line, or timesteps/s x atoms)",
               same_as="timesteps_per_s"),
        Metric("loop_time", "s", False, "LAMMPS's 'Loop time of' (the run's main loop)"),
        Metric("epair", "energy/atom", False,
               "potential energy at the last step, 1,000 at most (thermo E_pair), as LAMMPS's "
               "bench inputs print it: per atom for lj, the total in eV for eam: a check"),
        Metric("temp", "T", False, "temperature at the last step, 1,000 at most (thermo Temp): "
               "a check"),
    )
    checks = (Check("epair", CHECK_RTOL, "E_pair per atom at the last step (1,000 at most)"),
              Check("temp", CHECK_RTOL, "Temp at the last step (1,000 at most)"))
    check = checks[0]
    #: Kept in the stored parameters (the problem's size), defaults included.
    stored_params = ("atoms", "steps")
    timeout = 1800.0

    def ranks(self, params: Mapping[str, Any], ncpus: int) -> int:
        """MPI ranks of a trial on ``ncpus`` CPUs: the ``ranks`` parameter, else one rank per CPU."""
        return int(params.get("ranks") or ncpus)

    def atoms(self, params: Mapping[str, Any], ncpus: int) -> int:
        """Requested total atoms: ``atoms``, times the ranks under ``scaling=scaled``."""
        per = self.ranks(params, ncpus) if params["scaling"] == "scaled" else 1
        return int(params["atoms"]) * per

    def problem(self, params, ncpus):
        """Ranks, atoms (the fcc box's), steps and problem of a trial on ``ncpus`` CPUs."""
        nx, ny, nz = box(self.atoms(params, ncpus))
        return {"problem": params["problem"], "ranks": self.ranks(params, ncpus),
                "atoms": 4 * nx * ny * nz, "steps": int(params["steps"])}

    def bounds(self, params, ncpus, memory):
        """Ranks x threads within the environment's ``ncpus`` CPUs (an oversubscribed application
        measures the oversubscription), atoms and ranks within its ``memory`` (bytes; None:
        unknown) (:data:`RANK_BYTES`, :data:`ATOM_BYTES`).  Raises BenchmarkError saying what to
        lower when one does not hold."""
        ranks, threads = self.ranks(params, ncpus), int(params.get("threads") or 1)
        if ranks * threads > ncpus:
            raise BenchmarkError(f"lammps: ranks={ranks} x threads={threads} is more than the "
                                 f"{ncpus} CPUs there: give ranks <= {max(1, ncpus // threads)}")
        atoms = self.problem(params, ncpus)["atoms"]
        need = ranks * RANK_BYTES + atoms * ATOM_BYTES
        if memory is not None and need > memory:
            most = max(0, (memory - ranks * RANK_BYTES) // ATOM_BYTES)
            raise BenchmarkError(f"lammps: {atoms} atoms on {ranks} ranks need about "
                                 f"{need / 2**30:.3g} GiB, more than the {memory / 2**30:.3g} "
                                 f"GiB there: give at most {most} atoms in all")

    def input_text(self, params: Mapping[str, Any], ncpus: int) -> str:
        """The LAMMPS input script for ``params`` (ranks resolved against ``ncpus``)."""
        nx, ny, nz = box(self.atoms(params, ncpus))
        steps = int(params["steps"])
        lj = params["problem"] == "lj"
        # thermo every 100 steps (in.lj's) or 50 (in.eam's) prints the checked step
        # (check_step: the last, or step 1,000) too
        return (LJ_INPUT if lj else EAM_INPUT).format(
            nx=nx, ny=ny, nz=nz, steps=steps, thermo=min(steps, THERMO[params["problem"]]),
            potential=EAM_FILE)

    def preflight(self, params: Mapping[str, Any]) -> None:
        """Before anything is stored: lmp (and for eam the potential) is installed, and
        ``threads`` > 1 has an ``lmp`` with the OPENMP package.  Raises BenchmarkError naming
        the Debian package or the parameter to change."""
        lmp = require(self.app_binary, self.package, self.name)
        _refuse_threads(lmp, int(params.get("threads") or 1))
        pot = os.path.join(POTENTIALS, EAM_FILE)
        if params["problem"] == "eam" and not os.path.exists(pot):
            raise BenchmarkError(f"lammps: {pot} not found: apt-get install lammps-data")

    def host_paths(self, params):
        """The prepared inputs' folder (:func:`vhpc.benchmarks.apps.common.apps_dir`) and, for
        ``problem=eam``, the EAM potential file under :data:`POTENTIALS`: a guest reads them
        through the shared root."""
        paths = [str(common.apps_dir())]
        if params["problem"] == "eam":
            paths.append(os.path.join(POTENTIALS, EAM_FILE))
        return paths

    def launch(self, params, ctx):
        """The Open MPI launch: :meth:`ranks` ranks of ``threads`` OpenMP threads each (1 when
        unset), bound within ``ctx.cpuset``."""
        return Launch(self.ranks(params, ctx.ncpus), int(params.get("threads") or 1), "openmpi",
                      ctx.ncpus, cpuset=ctx.cpuset)

    def _stage(self, params: Mapping[str, Any], ncpus: int) -> list[str]:
        """Host paths of the trial's inputs: the prepared ``in.lmp`` (for ``ncpus`` CPUs)
        and, for eam, the potential.  Raises BenchmarkError when the potential is missing."""
        salt = shutil.which(self.app_binary) or self.app_binary
        folder = common.prepared("lammps", {"in.lmp": self.input_text(params, ncpus)},
                                 salt=salt)
        stage = [str(folder / "in.lmp")]
        if params["problem"] == "eam":
            pot = os.path.join(POTENTIALS, EAM_FILE)
            if not os.path.exists(pot):
                raise BenchmarkError(f"lammps: {pot} not found: apt-get install lammps-data")
            stage.append(pot)
        return stage

    def copied_inputs(self, params, ncpus=1):
        """The prepared input (and potential): an ssh host or a user's image gets copies."""
        return self._stage(params, ncpus)

    def command(self, params, ctx):
        """``mpirun ... rankrun.py --stage in.lmp [--stage Cu_u3.eam] -- lmp -in in.lmp -log
        none`` (LAMMPS writes the thermo table and timings to its screen: stdout); on another
        file system (ssh, a user's image) the copies there, that host's rankrun.py and its
        own ``lmp``.  Raises BenchmarkError when lmp (here), the potential or the OPENMP
        package (threads > 1) is missing."""
        lmp = common.app_argv0(self.app_binary, self.package, self.name, ctx.remote)
        threads = int(params.get("threads") or 1)
        if ctx.remote is None:
            _refuse_threads(lmp, threads)
        stage = common.remote_stage(self._stage(params, ctx.ncpus), ctx.remote)
        argv = [lmp, "-in", "in.lmp", "-log", "none"]
        if threads > 1:
            argv += ["-sf", "omp", "-pk", "omp", str(threads)]
        return rank_command(self.launch(params, ctx), stage, [], argv,
                            runner=common.runner(ctx.remote))

    def environ(self, params, ctx):
        """The launch's environment variables (:meth:`vhpc.benchmarks.mpilaunch.Launch.environ`)."""
        return self.launch(params, ctx).environ()

    def check_key(self, params, stdout):
        """"4000 atoms on 2 ranks, LAMMPS 29 Sep 2021 - Update 2": the problem and the
        version the run printed, so a run of another LAMMPS is never checked against the
        baseline's (the note then names both versions)."""
        m = LOOP_RE.findall(stdout)
        if not m:
            return ""
        version = VERSION_RE.search(stdout)
        return (f"{m[-1][3]} atoms on {m[-1][1]} ranks"
                + (f", LAMMPS {version.group(1)}" if version else ""))

    def parse(self, params, stdout, stderr, returncode):
        """Samples from LAMMPS's screen output (module docstring).  Valid: exit status 0, the
        requested steps run and finite checks.  Raises ParseError without a ``Loop time``
        or ``Performance`` line, or without a thermo table with E_pair and Temp."""
        loops = LOOP_RE.findall(stdout)
        perf = PERF_RE.findall(stdout)
        if not loops:
            raise ParseError("lammps: no 'Loop time of' line in the output (did lmp start? "
                             "see stderr)")
        if not perf:
            raise ParseError("lammps: no 'Performance:' line in the output")
        loop_time, _procs, steps, atoms = loops[-1]
        loop_s = number(loop_time, "lammps loop time")
        rate = STEPS_S_RE.search(perf[-1])
        if not rate:
            raise ParseError(f"lammps: no timesteps/s in {perf[-1].strip()!r}")
        steps_s = number(rate.group(1), "lammps timesteps/s")
        atom = ATOMSTEPS_RE.search(perf[-1])
        if atom:
            matom = number(atom.group(1), "lammps atom-step/s") * (1e-3 if atom.group(2) == "k"
                                                                  else 1.0)
        else:
            matom = steps_s * int(atoms) / 1e6
        header, rows = thermo_table(stdout)
        if not {"Step", "E_pair", "Temp"} <= set(header) or not rows:
            raise ParseError("lammps: no thermo table with E_pair and Temp in the output")
        at = str(check_step(int(params["steps"])))
        row = next((r for r in rows if r[0] == at), rows[-1])
        epair = number(row[header.index("E_pair")], "lammps E_pair")
        temp = number(row[header.index("Temp")], "lammps Temp")
        valid = (returncode == 0 and int(steps) == int(params["steps"])
                 and math.isfinite(epair) and math.isfinite(temp))
        values = {"timesteps_per_s": steps_s, "matom_steps_per_s": matom, "loop_time": loop_s,
                  "epair": epair, "temp": temp}
        units = {"epair": EPAIR_UNIT.get(params.get("problem", "lj"), "energy/atom")}
        return [Sample(m.name, values[m.name], units.get(m.name, m.unit), m.higher_is_better,
                       valid) for m in self.metrics]


register(common.APPS, Lammps())
