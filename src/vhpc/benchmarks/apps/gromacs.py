"""``gromacs``: Debian's GROMACS (``gmx_mpi mdrun``) on a box of SPC/E water that vhpc builds
itself from GROMACS's own files (``/usr/share/gromacs/top``: ``spc216.gro``, ``oplsaa.ff``).

Preparation, once per box size and GROMACS version, on the host, into vhpc's cache
(:func:`vhpc.benchmarks.apps.common.prepared`; guests and Slurm nodes read it there):
``gmx solvate -cs spc216.gro -box B B B`` fills a cubic box of edge ``box`` nm with water and
writes the molecule count into vhpc's topology (OPLS-AA with SPC/E, SETTLE-rigid water); 50
steps of steepest descent (``em.mdp``) remove the close contacts ``solvate`` leaves across the
periodic boundary; ``gmx grompp`` then makes the run input ``topol.tpr`` from vhpc's ``md.mdp``:
leap-frog MD, Δt = 2 fs, PME electrostatics (0.12 nm grid), Verlet cut-off scheme with 0.9 nm
cut-offs, NVE, velocities drawn at 300 K with a fixed seed.

Trial: ``mpirun ... rankrun.py --stage topol.tpr --show md.log -- gmx_mpi mdrun -s topol.tpr
-deffnm md -nsteps N -ntomp T -pin off -nb cpu -notunepme -noconfout``.  ``-pin off``: the
ranks are bound by the launcher as vhpc's kernels are (mdrun's own pinning would override
it); ``-notunepme``: PME tuning shifts the cut-off during the run, so the work would differ
between environments.

Metrics, from ``md.log`` (rank 0 prints it after the run): ``ns_per_day`` and ``wall_time``
(s) from the ``Performance:`` and ``Time:`` lines GROMACS writes at the end, and ``epot``: the
potential energy at the last step (kJ/mol), the check: it must agree with the baseline
environment's within a relative 5e-3 (water at 300 K: different summation orders move it by
far less over a hundred steps; a different force field, box or time step does not).
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path
from typing import Any, Mapping

from vhpc.benchmarks.apps import common
from vhpc.benchmarks.apps.common import number, rank_command, require, shown_file
from vhpc.benchmarks.base import Benchmark, BenchmarkError, Check, Param, ParseError
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample

#: GROMACS's data directory in Debian's gromacs-data.
TOPDIR = Path("/usr/share/gromacs/top")

TOPOLOGY = """\
; vhpc gromacs: SPC/E water with OPLS-AA (GROMACS's own force-field files)
#include "oplsaa.ff/forcefield.itp"
#include "oplsaa.ff/spce.itp"

[ system ]
vhpc water box

[ molecules ]
"""

EM_MDP = """\
; vhpc gromacs: steepest descent to remove close contacts before MD
integrator    = steep
nsteps        = 50
emtol         = 1000
cutoff-scheme = Verlet
coulombtype   = PME
rcoulomb      = 0.9
rvdw          = 0.9
"""

MD_MDP = """\
; vhpc gromacs: water, PME, Verlet lists, NVE
integrator    = md
dt            = 0.002
nsteps        = 100
nstlog        = 50
nstcalcenergy = 50
nstenergy     = 0
nstxout       = 0
nstvout       = 0
nstfout       = 0
nstxout-compressed = 0
cutoff-scheme = Verlet
coulombtype   = PME
rcoulomb      = 0.9
fourierspacing = 0.12
vdwtype       = cut-off
rvdw          = 0.9
tcoupl        = no
pcoupl        = no
gen_vel       = yes
gen_temp      = 300
gen_seed      = 1
"""

PERF_RE = re.compile(r"^Performance:\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)", re.M)
TIME_RE = re.compile(r"^\s+Time:\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)", re.M)
ATOMS_RE = re.compile(r"^There are:\s+(\d+) Atoms", re.M)
PROCS_RE = re.compile(r"^Using (\d+) MPI process", re.M)
AVERAGES = "A V E R A G E S"


def energies(log: str) -> list[dict[str, float]]:
    """Every ``Energies (kJ/mol)`` block of an md.log before its averages, in order: term
    name → value.  GROMACS prints the names right-aligned in 15-character columns with the
    values on the line below (``md.log``; ``EnergyOutput::printStepToEnergyFile``)."""
    log = log.split(AVERAGES, 1)[0]
    out = []
    for block in re.split(r"^\s*Energies \(kJ/mol\)\s*$", log, flags=re.M)[1:]:
        terms: dict[str, float] = {}
        lines = block.split("\n")[1:]
        for names, values in zip(lines[::2], lines[1::2]):
            if not names.strip() or not values.strip():
                break
            keys = [names[i:i + 15].strip() for i in range(0, len(names), 15)]
            vals = values.split()
            if len(vals) != len([k for k in keys if k]):
                break
            try:
                terms.update(zip([k for k in keys if k], map(float, vals)))
            except ValueError:
                break
        out.append(terms)
    return out


class Gromacs(Benchmark):
    """See the module docstring."""

    name = "gromacs"
    summary = "GROMACS (Debian's gmx_mpi mdrun): SPC/E water box, PME, Verlet lists, built by vhpc"
    provenance = ("seed 004 Fig. 8 (Sage: an application; GROMACS stands in as a public "
                  "community code)")
    verification = ("check: potential energy at the last step within a relative 5e-3 of the "
                    "baseline environment's; exit status 0")
    package = "gromacs"
    app_binary = "gmx_mpi"
    params = (
        Param("box", 2.2, float, "edge of the cubic water box in nm (>= 2: twice the 0.9 nm "
              "cut-off and a margin)", minimum=2.0),
        Param("steps", 50, int, "MD steps of 2 fs", minimum=1),
        Param("ranks", None, int, "MPI ranks (default: all CPUs)", minimum=1),
        Param("threads", 1, int, "OpenMP threads per rank (mdrun -ntomp)", minimum=1),
    )
    metrics = (
        Metric("ns_per_day", "ns/day", True, "md.log's Performance line"),
        Metric("wall_time", "s", False, "mdrun's wall time (md.log's Time line)"),
        Metric("epot", "kJ/mol", False, "potential energy at the last step: the check"),
    )
    check = Check("epot", 5e-3, "potential energy at the last step")
    timeout = 1800.0

    def ranks(self, params: Mapping[str, Any], ncpus: int) -> int:
        return int(params.get("ranks") or ncpus)

    def prepare(self, box: float) -> Path:
        """The cache folder holding ``topol.tpr`` for a ``box`` nm water box (module
        docstring), made on first use.  Raises BenchmarkError naming the step that failed or
        the missing package."""
        gmx = shutil.which("gmx") or require("gmx_mpi", self.package, self.name)
        if not (TOPDIR / "spc216.gro").exists():
            raise BenchmarkError(f"gromacs: {TOPDIR / 'spc216.gro'} not found: apt-get install "
                                 "gromacs-data")
        edge = f"{box:.3f}"

        def build(folder: Path) -> None:
            common.run_tool([gmx, "-quiet", "solvate", "-cs", "spc216.gro", "-box", edge, edge,
                             edge, "-o", "solv.gro", "-p", "topol.top"], folder,
                            "gromacs: gmx solvate")
            common.run_tool([gmx, "-quiet", "grompp", "-f", "em.mdp", "-c", "solv.gro", "-p",
                             "topol.top", "-o", "em.tpr"], folder, "gromacs: gmx grompp (em)")
            common.run_tool([gmx, "-quiet", "mdrun", "-s", "em.tpr", "-deffnm", "em", "-nt", "1"]
                            if not gmx.endswith("_mpi") else
                            [gmx, "-quiet", "mdrun", "-s", "em.tpr", "-deffnm", "em"],
                            folder, "gromacs: gmx mdrun (energy minimisation)")
            common.run_tool([gmx, "-quiet", "grompp", "-f", "md.mdp", "-c", "em.gro", "-p",
                             "topol.top", "-o", "topol.tpr"], folder, "gromacs: gmx grompp (md)")

        return common.prepared("gromacs", {"topol.top": TOPOLOGY, "em.mdp": EM_MDP,
                                           "md.mdp": MD_MDP, "box": edge},
                               build, salt=gmx)

    def preflight(self, params: Mapping[str, Any]) -> None:
        """Before any trial: gmx_mpi is installed and the run input for ``box`` is prepared
        (so the first trial does not include it).  Raises BenchmarkError naming the package or
        the preparation step that failed."""
        require(self.app_binary, self.package, self.name)
        self.prepare(float(params["box"]))

    def host_paths(self, params):
        return [str(common.apps_dir())]

    def launch(self, params, ctx):
        return Launch(self.ranks(params, ctx.ncpus), int(params.get("threads") or 1), "openmpi",
                      ctx.ncpus, cpuset=ctx.cpuset)

    def command(self, params, ctx):
        """See the module docstring.  Raises BenchmarkError when gmx_mpi is missing or the
        preparation fails."""
        gmx_mpi = require(self.app_binary, self.package, self.name)
        folder = self.prepare(float(params["box"]))
        argv = [gmx_mpi, "mdrun", "-s", "topol.tpr", "-deffnm", "md", "-nsteps",
                str(params["steps"]), "-ntomp", str(params.get("threads") or 1), "-pin", "off",
                "-nb", "cpu", "-notunepme", "-noconfout"]
        return rank_command(self.launch(params, ctx), [str(folder / "topol.tpr")], ["md.log"],
                            argv)

    def environ(self, params, ctx):
        env = self.launch(params, ctx).environ()
        env["GMX_MAXBACKUP"] = "-1"  # no #md.log.1# backups in the working directory
        return env

    def check_key(self, params, stdout):
        log = shown_file(stdout, "md.log") or ""
        atoms, procs = ATOMS_RE.findall(log), PROCS_RE.findall(log)
        return f"{atoms[-1]} atoms on {procs[-1]} ranks" if atoms and procs else ""

    def parse(self, params, stdout, stderr, returncode):
        """Samples from md.log (module docstring).  Valid: exit status 0 and a finite
        potential energy.  Raises ParseError when md.log or its Performance, Time or energy
        lines are missing."""
        log = shown_file(stdout, "md.log")
        if log is None:
            raise ParseError("gromacs: mdrun wrote no md.log (did it start? see stderr)")
        perf, wall = PERF_RE.findall(log), TIME_RE.findall(log)
        if not perf or not wall:
            raise ParseError("gromacs: md.log has no Performance/Time lines (the run did not "
                             "finish)")
        blocks = [b for b in energies(log) if "Potential" in b]
        if not blocks:
            raise ParseError("gromacs: md.log has no energies with a Potential term")
        epot = blocks[-1]["Potential"]
        values = {"ns_per_day": number(perf[-1][0], "gromacs ns/day"),
                  "wall_time": number(wall[-1][1], "gromacs wall time"), "epot": epot}
        valid = returncode == 0 and math.isfinite(epot)
        return [Sample(m.name, values[m.name], m.unit, m.higher_is_better, valid)
                for m in self.metrics]
