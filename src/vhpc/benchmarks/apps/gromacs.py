"""``gromacs``: Debian's GROMACS (``gmx_mpi mdrun``) on a box of SPC/E water that vhpc builds
itself from GROMACS's own files (``/usr/share/gromacs/top``: ``spc216.gro``, ``oplsaa.ff``).

Size: ``size`` thousand atoms, as the size classes of GROMACS's water benchmark set
(``water_GMX50_bare``: folders 0001.5, 0003, 0006, 0012, ... 3072, thousands of atoms of water
with 1.0 nm cut-offs and PME; GROMACS's developers run it for performance work), default 6
(class 0006).  The cubic box's edge is ``(1000 x size / 90.9)^(1/3)`` nm: 90.9 atoms per nm³
is how densely ``gmx solvate`` filled a 3.91 nm box with ``spc216.gro`` (5,433 atoms); its fill
varies with how the 1.86 nm ``spc216`` tile fits the box, so the count is the class's within
about 10 % (size 6: a 4.041 nm box, 6,591 atoms, water's own density).  The exact count is
in every trial's md.log ("There are: N Atoms") and in its check key.

Preparation, once per size and GROMACS version, on the host, into vhpc's cache
(:func:`vhpc.benchmarks.apps.common.prepared`, checked by checksum at every use; guests and
Slurm nodes read it there): ``gmx solvate`` fills the box and writes the molecule count into
vhpc's topology (OPLS-AA with SPC/E, SETTLE-rigid water); 50 steps of steepest descent
(``em.mdp``) remove the close contacts ``solvate`` leaves across the periodic boundary;
``gmx grompp`` then makes the run input ``topol.tpr`` from vhpc's ``md.mdp``: leap-frog MD,
Δt = 2 fs, PME electrostatics (0.12 nm grid), Verlet cut-off scheme with 1.0 nm cut-offs (the
benchmark set's), NVE, velocities drawn at 300 K with a fixed seed.

Trial: ``mpirun ... rankrun.py --stage topol.tpr --show md.log -- gmx_mpi mdrun -s topol.tpr
-deffnm md -nsteps N -resetstep N/2 -ntomp T -pin off -nb cpu -notunepme -noconfout``.
``-resetstep N/2`` (:func:`reset_step`): mdrun resets its performance counters half way
("step N/2: resetting all time and cycle counters" in md.log; a run without that line is
invalid), so ns/day and the timed window leave out start-up, domain decomposition and load
balancing, as GROMACS benchmarks are timed (GROMACS 2022 marks ``-resetstep`` and
``-resethway`` deprecated and still honours them);
``steps`` is what the whole run takes; left out (``auto``) it is sized once per campaign,
before any trial, by :meth:`Gromacs.size_problem`: a probe of :data:`PROBE_STEPS` steps on one
rank of this host gives the seconds per step (divided by the ranks), and the steps are the
fewest multiple of 100 whose timed half lasts 3 s (:mod:`vhpc.benchmarks.apps.sizing`), stored in the campaign's parameters so every
environment runs the same steps.  ``-pin off``: the ranks are bound by the launcher as vhpc's kernels
are (mdrun's own pinning would override it); ``-notunepme``: PME tuning shifts the cut-off
during the run, so the work would differ between environments.

Metrics, from ``md.log`` (rank 0 prints it after the run): ``ns_per_day`` and
``timed_window`` (wall seconds after the reset) from the ``Performance:`` and ``Time:`` lines
GROMACS writes at the end, and three checks from the energies of step 100 (of the last step
in a shorter run: :func:`check_step`; later, two correct runs have diverged):
``epot`` (Potential), ``temperature`` and ``coul_recip`` (the PME mesh part of the
electrostatics, which the cut-off moves most), each within its tolerance of the baseline
environment's (docs/applications.md, "How the checks were sized").
"""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping

from vhpc.benchmarks.apps import common, sizing
from vhpc.benchmarks.apps.common import number, rank_command, require, shown_file
from vhpc.benchmarks.base import (Benchmark, BenchmarkError, Check, Param, ParseError,
                                  RunContext, register)
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample
from vhpc.host.doctor import Component

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
rcoulomb      = 1.0
rvdw          = 1.0
"""

MD_MDP = """\
; vhpc gromacs: water, PME, Verlet lists, NVE
integrator    = md
dt            = 0.002
nsteps        = 100
nstlog        = 100
nstcalcenergy = 100
nstenergy     = 0
nstxout       = 0
nstvout       = 0
nstfout       = 0
nstxout-compressed = 0
cutoff-scheme = Verlet
coulombtype   = PME
rcoulomb      = 1.0
fourierspacing = 0.12
vdwtype       = cut-off
rvdw          = 1.0
tcoupl        = no
pcoupl        = no
gen_vel       = yes
gen_temp      = 300
gen_seed      = 1
"""

#: Atoms per nm³ that ``gmx solvate -cs spc216.gro`` put in a 3.91 nm box (module docstring).
SOLVATE_ATOMS_PER_NM3 = 90.9
#: The water benchmark set's size classes (thousands of atoms) vhpc's 1.0 nm cut-off allows
#: (a box edge over twice the pair-list radius).
SIZE_CLASSES = (1.5, 3, 6, 12, 24, 48, 96, 192, 384, 768, 1536, 3072)
DEFAULT_SIZE = 6.0
#: Steps of the sizing probe (its timed half: 100 steps), and the steps a sized run is a
#: multiple of (md.log has energies every 100 steps, nstcalcenergy).
PROBE_STEPS, STEP_QUANTUM = 200, 100
#: Memory one mdrun rank needs besides its atoms, and per atom (measured: 34 MB for 5,433
#: atoms on one rank; the per-atom share is an estimate, not measured), and the smallest
#: domain-decomposition cell (nm: the 1.0 nm cut-off plus the pair-list buffer), which caps
#: the ranks a box can be split into.
RANK_BYTES, ATOM_BYTES, MIN_CELL_NM = 48 << 20, 2048, 1.1
#: The energy terms checked: md.log name → metric.
CHECKED = {"Potential": "epot", "Temperature": "temperature", "Coul. recip.": "coul_recip"}
#: The checks are read at step min(steps, CHECK_HORIZON) (md.log has energies every 100
#: steps): two correct runs on 1 and 2 ranks (single precision, another summation order)
#: stayed within 4e-5 (Potential), 2e-5 (Temperature) and 3e-5 (Coul. recip.) up to step 120,
#: then diverged tenfold every ~40 steps (docs/applications.md, "How the checks were sized").
CHECK_HORIZON = 100

PERF_RE = re.compile(r"^Performance:\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)", re.M)
TIME_RE = re.compile(r"^\s+Time:\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)", re.M)
ATOMS_RE = re.compile(r"^There are:\s+(\d+) Atoms", re.M)
PROCS_RE = re.compile(r"^Using (\d+) MPI process", re.M)
#: The version md.log's header gives: ``GROMACS version:    2022.5-Debian_2022.5_2``.
VERSION_RE = re.compile(r"^GROMACS version:\s+(\S+)", re.M)
STEP_RE = re.compile(r"^\s+Step\s+Time\s*\n\s+(\d+)\s", re.M)
AVERAGES = "A V E R A G E S"
#: What md.log says when mdrun reset its counters (-resetstep): the timed window starts there.
RESET = "resetting all time and cycle counters"


def box_edge(size: float) -> float:
    """Edge (nm, 3 decimals) of the cubic box that ``gmx solvate`` fills with about ``size``
    thousand atoms of water (module docstring)."""
    return round((1000 * size / SOLVATE_ATOMS_PER_NM3) ** (1 / 3), 3)


def reset_step(steps: int) -> int:
    """The step at which mdrun resets its performance counters: half way, as
    ``-resethway`` does."""
    return steps // 2


def check_step(steps: int) -> int:
    """The step whose energies the checks read: the last, or :data:`CHECK_HORIZON`."""
    return min(int(steps), CHECK_HORIZON)


def energies(log: str) -> dict[int, dict[str, float]]:
    """Every ``Energies (kJ/mol)`` block of an md.log before its averages, by step: term name
    → value.  GROMACS prints ``Step Time`` and their values above each block, then the term
    names right-aligned in 15-character columns with the values on the line below
    (``md.log``; ``EnergyOutput::printStepToEnergyFile``)."""
    log = log.split(AVERAGES, 1)[0]
    out: dict[int, dict[str, float]] = {}
    parts = re.split(r"^\s*Energies \(kJ/mol\)\s*$", log, flags=re.M)
    for head, block in zip(parts[:-1], parts[1:]):
        steps = STEP_RE.findall(head)
        if not steps:
            continue
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
        out[int(steps[-1])] = terms
    return out


class Gromacs(Benchmark):
    """See the module docstring."""

    name = "gromacs"
    summary = "GROMACS (Debian's gmx_mpi mdrun): SPC/E water box, PME, Verlet lists, built by vhpc"
    provenance = ("seed 004 Fig. 8 (Sage: an application; GROMACS stands in as a public "
                  "community code)")
    verification = ("checks: Potential, Temperature and Coul. recip. at step 100 (or the last) "
                    "within a relative 4e-4, 2e-4 and 3e-4 of the baseline environment's "
                    "(docs/applications.md); exit status 0 and the counters reset")
    timing = ("GROMACS's own timers, unchanged: md.log's Performance (ns/day) and Time (wall s) "
              "lines of mdrun; the preparation (solvate, minimisation, grompp) runs once, "
              "before the trials, and is not timed")
    package = "gromacs"
    components = (
        Component("GROMACS", "gromacs benchmark, applications study", "cmd:gmx_mpi", "gromacs",
                  "gromacs-openmpi (EPEL)"),
    )
    app_binary = "gmx_mpi"
    params = (
        Param("size", DEFAULT_SIZE, float, "thousands of water atoms, as the size classes of "
              "GROMACS's water benchmark set (" + ", ".join(f"{c:g}" for c in SIZE_CLASSES)
              + ")", minimum=SIZE_CLASSES[0]),
        Param("steps", None, int, "MD steps of 2 fs; mdrun times the second half "
              "(-resetstep steps/2); default: sized once per campaign so that half lasts "
              f"{sizing.TARGET_S:g} s here (a probe run, cached)", minimum=2),
        Param("ranks", None, int, "MPI ranks (default: all CPUs)", minimum=1),
        Param("threads", 1, int, "OpenMP threads per rank (mdrun -ntomp)", minimum=1),
    )
    metrics = (
        Metric("ns_per_day", "ns/day", True, "md.log's Performance line (the timed window)",
               inverse_of="timed_window"),
        Metric("timed_window", "s", False, "wall seconds mdrun timed: the steps after its "
               "counters were reset half way (md.log's Time line)"),
        Metric("epot", "kJ/mol", False, "potential energy at step 100 (or the last): a check"),
        Metric("temperature", "K", False, "temperature at step 100 (or the last): a check"),
        Metric("coul_recip", "kJ/mol", False, "PME mesh (Coul. recip.) energy at step 100 (or "
               "the last): a check"),
    )
    # tolerances: about ten times the largest difference measured between correct runs
    # (CHECK_HORIZON); a 10 % longer time step moved them 2.4e-3, 1.7e-2 and 1.2e-2 at step 100
    checks = (Check("epot", 4e-4, "potential energy at step 100 (or the last)"),
              Check("temperature", 2e-4, "temperature at step 100 (or the last)"),
              Check("coul_recip", 3e-4, "PME mesh energy at step 100 (or the last)"))
    check = checks[0]
    #: The timed window's floor: a page says when a trial's window was shorter (pagefacts).
    timed_floors = {"timed_window": sizing.FLOOR_S}
    #: Kept in the stored parameters (the problem's size), defaults included.
    stored_params = ("size", "steps")
    timeout = 1800.0

    def ranks(self, params: Mapping[str, Any], ncpus: int) -> int:
        """MPI ranks of a trial on ``ncpus`` CPUs: the ``ranks`` parameter, else one rank per CPU."""
        return int(params.get("ranks") or ncpus)

    def problem(self, params, ncpus):
        """Ranks, size (thousand atoms) and steps of a trial on ``ncpus`` CPUs."""
        steps = params.get("steps")
        return {"ranks": self.ranks(params, ncpus), "size": float(params["size"]),
                "steps": "auto" if steps is None else int(steps)}

    def bounds(self, params, ncpus, memory):
        """Ranks x threads within the environment's ``ncpus`` CPUs, ranks within the domain
        decomposition the box allows (cells of at least :data:`MIN_CELL_NM`), atoms and ranks
        within its ``memory`` (bytes; None: unknown) (:data:`RANK_BYTES`, :data:`ATOM_BYTES`).
        Raises BenchmarkError saying what to lower when one does not hold."""
        ranks, threads = self.ranks(params, ncpus), int(params.get("threads") or 1)
        size = float(params["size"])
        if ranks * threads > ncpus:
            raise BenchmarkError(f"gromacs: ranks={ranks} x threads={threads} is more than the "
                                 f"{ncpus} CPUs there: give ranks <= {max(1, ncpus // threads)}")
        cells = max(1, int(box_edge(size) / MIN_CELL_NM)) ** 3
        if ranks > cells:
            raise BenchmarkError(f"gromacs: a {box_edge(size):g} nm box (size={size:g}) splits "
                                 f"into at most {cells} domains: give ranks <= {cells} or a "
                                 "larger size")
        need = ranks * RANK_BYTES + size * 1000 * ATOM_BYTES
        if memory is not None and need > memory:
            most = max(0.0, (memory - ranks * RANK_BYTES) / ATOM_BYTES / 1000)
            raise BenchmarkError(f"gromacs: size={size:g} on {ranks} ranks needs about "
                                 f"{need / 2**30:.3g} GiB, more than the {memory / 2**30:.3g} "
                                 f"GiB there: give size <= {most:.3g}")

    def prepare(self, size: float) -> Path:
        """The cache folder holding ``topol.tpr`` for ``size`` thousand atoms of water (module
        docstring), made on first use (and again when a file there no longer matches its
        checksum).  Raises BenchmarkError naming the step that failed or
        the missing package."""
        gmx = shutil.which("gmx") or require("gmx_mpi", self.package, self.name)
        if not (TOPDIR / "spc216.gro").exists():
            raise BenchmarkError(f"gromacs: {TOPDIR / 'spc216.gro'} not found: apt-get install "
                                 "gromacs-data")
        edge = f"{box_edge(size):.3f}"

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
            for junk in ("em.trr", "em.edr", "*.pdb", "#*#"):  # the minimisation's leftovers
                for path in folder.glob(junk):
                    path.unlink()

        return common.prepared("gromacs", {"topol.top": TOPOLOGY, "em.mdp": EM_MDP,
                                           "md.mdp": MD_MDP, "box": edge},
                               build, salt=gmx)

    def preflight(self, params: Mapping[str, Any]) -> None:
        """Before any trial: gmx_mpi is installed and the run input for ``size`` is prepared
        (so the first trial does not include it).  Raises BenchmarkError naming the package or
        the preparation step that failed."""
        require(self.app_binary, self.package, self.name)
        self.prepare(float(params["size"]))

    def auto_values(self, params, llc_owner):
        """``steps`` left out, as ``--dry-run`` shows it: sized once when the campaign starts."""
        return ({"steps": f"auto ({sizing.TARGET_S:g} s window, probed)"}
                if params.get("steps") is None else {})

    def size_problem(self, params: Mapping[str, Any],
                     say: Callable[[str], None] | None = None) -> dict[str, Any]:
        """``{"steps": N}`` for parameters whose ``steps`` is left to ``auto`` (module
        docstring; {} when steps were given): the seconds per step of this problem on this host
        from the cache, else from a probe of :data:`PROBE_STEPS` steps natively here
        (:func:`vhpc.benchmarks.apps.sizing.probe`, its window scaled by the CPU share it got)
        on one rank, its time per step divided by ``ranks``.  One rank because MPI ranks
        busy-poll: a 2-rank probe on a loaded host kept its CPU share near 1 while its window
        stretched (36 ms a step cached against 11 ms at 1 rank), so the share could not undo
        the load; one rank has no peer to poll for.  Perfect scaling over ``ranks`` is the
        fastest a step can get there, so the window of the steps chosen is at least the target.
        A probe whose CPU share is under :data:`~vhpc.benchmarks.apps.sizing.CALM_SHARE` (the
        host was busy) sizes this campaign and is not cached.  ``say``: told one line before
        a probe and the steps chosen.  Call after :meth:`preflight`.  Raises BenchmarkError
        when the probe fails."""
        if params.get("steps") is not None:
            return {}
        cpus = tuple(sorted(os.sched_getaffinity(0)))
        threads = int(params.get("threads") or 1)
        want = self.ranks(params, len(cpus))
        folder = self.prepare(float(params["size"]))
        # "probe=1": keys of 1-rank probes only (entries of the earlier many-rank probe were
        # inflated by load, and are never read)
        key = f"{sizing.host_key()}|{folder.name}|ranks={want}|threads={threads}|probe=1"
        step_s = sizing.cached(key)
        label = f"gromacs size={float(params['size']):g} ranks={want}"
        if step_s is None:
            if say:
                say(f"{label}: a {PROBE_STEPS}-step probe sizes steps= for a timed window of "
                    f"{sizing.TARGET_S:g} s")
            probe = {**params, "steps": PROBE_STEPS, "ranks": 1}
            ctx = RunContext(Path("/nonexistent"), len(cpus), cpus)
            timed = PROBE_STEPS - reset_step(PROBE_STEPS)

            def window(stdout: str, stderr: str, rc: int) -> float:
                got = {s.metric: s for s in self.parse(probe, stdout, stderr, rc)}
                if not all(s.valid for s in got.values()) or got["timed_window"].value <= 0:
                    raise BenchmarkError(f"{label}: the sizing probe failed (exit status "
                                         f"{rc}): give steps= explicitly")
                return got["timed_window"].value

            try:
                seconds, share = sizing.probe(self.command(probe, ctx), self.environ(probe, ctx),
                                              threads, self.timeout, window)
            except ParseError as exc:
                raise BenchmarkError(f"{label}: the sizing probe failed ({exc}): give steps= "
                                     "explicitly") from None
            step_s = seconds / timed * share / want
            if share >= sizing.CALM_SHARE:
                sizing.remember(key, step_s)
            elif say:
                say(f"{label}: the probe got {share:.0%} of its CPU (a busy host): used for this "
                    "campaign, not cached")
        steps = sizing.steps_for(step_s, STEP_QUANTUM, lambda n: n - reset_step(n))
        if say:
            say(f"{label}: steps={steps} ({step_s * 1000:.3g} ms a step on this host's CPUs "
                f"alone: a timed window of about {(steps - reset_step(steps)) * step_s:.3g} s)")
        return {"steps": steps}

    def host_paths(self, params):
        """The prepared inputs' folder (:func:`vhpc.benchmarks.apps.common.apps_dir`), which a
        guest reads through the shared root."""
        return [str(common.apps_dir())]

    def launch(self, params, ctx):
        """The Open MPI launch: :meth:`ranks` ranks of ``threads`` OpenMP threads each (1 when
        unset), bound within ``ctx.cpuset``."""
        return Launch(self.ranks(params, ctx.ncpus), int(params.get("threads") or 1), "openmpi",
                      ctx.ncpus, cpuset=ctx.cpuset)

    def command(self, params, ctx):
        """See the module docstring.  Raises BenchmarkError when gmx_mpi is missing or the
        preparation fails."""
        gmx_mpi = common.app_argv0(self.app_binary, self.package, self.name, ctx.remote)
        if params.get("steps") is None:
            raise BenchmarkError("gromacs: steps were not sized before the trial (a campaign "
                                 "sizes them when it is created): give steps=")
        folder = self.prepare(float(params["size"]))
        argv = [gmx_mpi, "mdrun", "-s", "topol.tpr", "-deffnm", "md", "-nsteps",
                str(params["steps"]), "-resetstep", str(reset_step(int(params["steps"]))),
                "-ntomp", str(params.get("threads") or 1), "-pin", "off",
                "-nb", "cpu", "-notunepme", "-noconfout"]
        return rank_command(self.launch(params, ctx),
                            common.remote_stage([str(folder / "topol.tpr")], ctx.remote),
                            ["md.log"], argv, runner=common.runner(ctx.remote))

    def copied_inputs(self, params, ncpus=1):
        """The prepared run input (topol.tpr): an ssh host or a user's image gets a copy."""
        return [str(self.prepare(float(params["size"])) / "topol.tpr")]

    def environ(self, params, ctx):
        """The launch's environment variables, plus ``GMX_MAXBACKUP=-1`` so that mdrun leaves no
        ``#md.log.1#`` backups in the working directory."""
        env = self.launch(params, ctx).environ()
        env["GMX_MAXBACKUP"] = "-1"  # no #md.log.1# backups in the working directory
        return env

    def check_key(self, params, stdout):
        """"32000 atoms on 2 ranks, GROMACS 2022.5-Debian_2022.5_2": the atom count, the MPI
        processes and the version read from the md.log shown in ``stdout`` (:data:`ATOMS_RE`,
        :data:`PROCS_RE`, :data:`VERSION_RE`), so that checks are compared only between like runs;
        "" when md.log or those lines are missing."""
        log = shown_file(stdout, "md.log") or ""
        atoms, procs = ATOMS_RE.findall(log), PROCS_RE.findall(log)
        if not (atoms and procs):
            return ""
        version = VERSION_RE.search(log)  # another GROMACS is never checked against this one
        return (f"{atoms[-1]} atoms on {procs[-1]} ranks"
                + (f", GROMACS {version.group(1)}" if version else ""))

    def parse(self, params, stdout, stderr, returncode):
        """Samples from md.log (module docstring).  Valid: exit status 0, the counters reset
        (:data:`RESET`) and finite checks.
        Raises ParseError when md.log or its Performance, Time or energy lines are missing."""
        log = shown_file(stdout, "md.log")
        if log is None:
            raise ParseError("gromacs: mdrun wrote no md.log (did it start? see stderr)")
        perf, wall = PERF_RE.findall(log), TIME_RE.findall(log)
        if not perf or not wall:
            raise ParseError("gromacs: md.log has no Performance/Time lines (the run did not "
                             "finish)")
        at = energies(log).get(check_step(int(params["steps"])), {})
        if not set(CHECKED) <= set(at):
            raise ParseError(f"gromacs: md.log has no energies with Potential, Temperature and "
                             f"Coul. recip. at step {check_step(int(params['steps']))}")
        values = {metric: at[term] for term, metric in CHECKED.items()}
        values.update(ns_per_day=number(perf[-1][0], "gromacs ns/day"),
                      timed_window=number(wall[-1][1], "gromacs wall time"))
        valid = (returncode == 0 and RESET in log
                 and all(math.isfinite(values[m]) for m in CHECKED.values()))
        return [Sample(m.name, values[m.name], m.unit, m.higher_is_better, valid)
                for m in self.metrics]


register(common.APPS, Gromacs())
