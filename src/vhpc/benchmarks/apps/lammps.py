"""``lammps``: Debian's LAMMPS (``lmp``, built with Open MPI) on the two classic LAMMPS
benchmark problems, with inputs vhpc writes itself.

Problems (after the ``in.lj`` and ``in.eam`` inputs of the LAMMPS distribution's bench folder):

- ``lj``: Lennard-Jones melt, reduced units, fcc lattice at density 0.8442, T = 1.44,
  cut-off 2.5 σ, NVE, Δt = 0.005 τ.
- ``eam``: copper with the embedded-atom potential ``Cu_u3.eam`` (Debian's ``lammps-data``:
  ``/usr/share/lammps/potentials``; staged into each rank's working directory), fcc lattice
  3.615 Å, T = 1600 K, NVE, Δt = 5 fs.

Size: ``atoms`` (strong scaling: the same problem whatever the rank count) when given, else
``atoms_per_rank`` x ranks (weak scaling, as seed 004 ran HPCCG).  The box holds 4 atoms per
fcc cell: ``nx = ny = round(C^(1/3))``, ``nz = round(C / nx²)`` cells for C = atoms / 4, so the
atom count LAMMPS reports ("with K atoms") is the nearest such box, not exactly the request.

Metrics, from LAMMPS's own output: ``timesteps_per_s`` (the ``Performance:`` line),
``matom_steps_per_s`` (that line's ``Matom-step/s`` or ``katom-step/s`` where this LAMMPS
prints one; else timesteps/s x atoms / 10^6, LAMMPS's own formula,
``Finish::end`` in LAMMPS's finish.cpp), ``loop_time`` (``Loop time of T on P procs for S steps
with K atoms``), and ``etotal``: the total energy per atom (thermo ``TotEng``, normalised) at
the last step, which is the check: it must agree with the baseline environment's within a
relative 1e-4 (NVE conserves it, so reordered floating-point sums change it by far less; a
different time step or lattice does not).
"""

from __future__ import annotations

import functools
import math
import os
import re
import subprocess
from typing import Any, Mapping

from vhpc.benchmarks.apps.common import number, rank_command, require
from vhpc.benchmarks.base import Benchmark, BenchmarkError, Check, Param, ParseError
from vhpc.benchmarks.apps import common
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample

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
thermo_modify   norm yes
run             {steps}
"""

LOOP_RE = re.compile(r"^Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms",
                     re.M)
PERF_RE = re.compile(r"^Performance:(.*)$", re.M)
STEPS_S_RE = re.compile(r"([0-9.eE+-]+) timesteps/s")
ATOMSTEPS_RE = re.compile(r"([0-9.eE+-]+) ([kM])atom-step/s")


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


class Lammps(Benchmark):
    """See the module docstring."""

    name = "lammps"
    summary = "LAMMPS (Debian's lmp): Lennard-Jones melt or Cu EAM, inputs written by vhpc"
    provenance = ("seed 004 Fig. 7 (CTH: an application; LAMMPS stands in as a public "
                  "community code)")
    verification = ("check: final total energy per atom (thermo TotEng) within a relative 1e-4 "
                    "of the baseline environment's; exit status 0 and every step run")
    package = "lammps"
    app_binary = "lmp"
    params = (
        Param("problem", "lj", str, "lj (Lennard-Jones melt) or eam (Cu, EAM potential)",
              choices=("lj", "eam")),
        Param("atoms_per_rank", 2048, int, "atoms per rank (weak scaling; used when atoms is "
              "0)", minimum=4),
        Param("atoms", 0, int, "total atoms (strong scaling; 0: atoms_per_rank x ranks)",
              minimum=0),
        Param("steps", 100, int, "MD time steps", minimum=1),
        Param("ranks", None, int, "MPI ranks (default: all CPUs)", minimum=1),
        Param("threads", 1, int, "OpenMP threads per rank (needs lmp with the OPENMP package)",
              minimum=1),
    )
    metrics = (
        Metric("timesteps_per_s", "timesteps/s", True, "LAMMPS's Performance line"),
        Metric("matom_steps_per_s", "Matom-steps/s", True,
               "atom-steps per second / 10^6 (LAMMPS's Performance line, or timesteps/s x atoms)"),
        Metric("loop_time", "s", False, "LAMMPS's 'Loop time of' (the run's main loop)"),
        Metric("etotal", "energy/atom", False,
               "total energy per atom at the last step (thermo TotEng): the check"),
    )
    check = Check("etotal", 1e-4, "final total energy per atom")
    timeout = 1800.0

    def ranks(self, params: Mapping[str, Any], ncpus: int) -> int:
        return int(params.get("ranks") or ncpus)

    def atoms(self, params: Mapping[str, Any], ncpus: int) -> int:
        """Requested total atoms: ``atoms``, else ``atoms_per_rank`` x ranks."""
        return int(params["atoms"] or params["atoms_per_rank"] * self.ranks(params, ncpus))

    def input_text(self, params: Mapping[str, Any], ncpus: int) -> str:
        """The LAMMPS input script for ``params`` (ranks resolved against ``ncpus``)."""
        nx, ny, nz = box(self.atoms(params, ncpus))
        steps = int(params["steps"])
        template = LJ_INPUT if params["problem"] == "lj" else EAM_INPUT
        return template.format(nx=nx, ny=ny, nz=nz, steps=steps, thermo=max(1, steps // 2),
                               potential=EAM_FILE)

    def preflight(self, params: Mapping[str, Any]) -> None:
        """Before any trial: lmp (and for eam the potential) is installed.  Raises
        BenchmarkError naming the Debian package."""
        require(self.app_binary, self.package, self.name)
        pot = os.path.join(POTENTIALS, EAM_FILE)
        if params["problem"] == "eam" and not os.path.exists(pot):
            raise BenchmarkError(f"lammps: {pot} not found: apt-get install lammps-data")

    def host_paths(self, params):
        paths = [str(common.apps_dir())]
        if params["problem"] == "eam":
            paths.append(os.path.join(POTENTIALS, EAM_FILE))
        return paths

    def launch(self, params, ctx):
        return Launch(self.ranks(params, ctx.ncpus), int(params.get("threads") or 1), "openmpi",
                      ctx.ncpus, cpuset=ctx.cpuset)

    def command(self, params, ctx):
        """``mpirun ... rankrun.py --stage in.lmp [--stage Cu_u3.eam] -- lmp -in in.lmp -log
        none`` (LAMMPS writes the thermo table and timings to its screen: stdout).  Raises
        BenchmarkError when lmp, the potential or the OPENMP package (threads > 1) is
        missing."""
        lmp = require(self.app_binary, self.package, self.name)
        threads = int(params.get("threads") or 1)
        if threads > 1 and not has_openmp(lmp):
            raise BenchmarkError("lammps: threads > 1 needs lmp built with the OPENMP package; "
                                 "Debian's has none: use threads=1 and more ranks")
        folder = common.prepared("lammps", {"in.lmp": self.input_text(params, ctx.ncpus)},
                                 salt=lmp)
        stage = [str(folder / "in.lmp")]
        if params["problem"] == "eam":
            pot = os.path.join(POTENTIALS, EAM_FILE)
            if not os.path.exists(pot):
                raise BenchmarkError(f"lammps: {pot} not found: apt-get install lammps-data")
            stage.append(pot)
        argv = [lmp, "-in", "in.lmp", "-log", "none"]
        if threads > 1:
            argv += ["-sf", "omp", "-pk", "omp", str(threads)]
        return rank_command(self.launch(params, ctx), stage, [], argv)

    def environ(self, params, ctx):
        return self.launch(params, ctx).environ()

    def check_key(self, params, stdout):
        m = LOOP_RE.findall(stdout)
        return f"{m[-1][3]} atoms on {m[-1][1]} ranks" if m else ""

    def parse(self, params, stdout, stderr, returncode):
        """Samples from LAMMPS's screen output (module docstring).  Valid: exit status 0, the
        requested steps run and a finite energy.  Raises ParseError without a ``Loop time``
        or ``Performance`` line, or without a thermo table with TotEng."""
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
        if "TotEng" not in header or not rows:
            raise ParseError("lammps: no thermo table with TotEng in the output")
        etotal = number(rows[-1][header.index("TotEng")], "lammps TotEng")
        valid = (returncode == 0 and int(steps) == int(params["steps"])
                 and math.isfinite(etotal))
        values = {"timesteps_per_s": steps_s, "matom_steps_per_s": matom, "loop_time": loop_s,
                  "etotal": etotal}
        return [Sample(m.name, values[m.name], m.unit, m.higher_is_better, valid)
                for m in self.metrics]
