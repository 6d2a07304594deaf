"""How vhpc starts MPI ranks, binds them, and checks where they ran.

Launch line (one rank per ``threads`` cores, each rank bound to its own cores):

- Open MPI (mpirun(1), "Mapping, ranking, and binding"):
  ``mpirun --allow-run-as-root -np R --map-by slot:PE=T --bind-to core``: rank i gets the
  i-th group of T consecutive cores and is bound to them.  Without this, Open MPI binds each
  rank to a whole socket as soon as there are more than 2 ranks, and ``OMP_PROC_BIND`` then
  puts every rank's first thread on the socket's first core (measured: 20 vs 16,250 MFLOPS
  for hpccg with 16 ranks on a 16-core host).
- MPICH (Hydra's mpiexec, ``-bind-to core:T``): the same, T cores per rank.

``--oversubscribe`` (Open MPI) and binding to nothing are used only when the environment has
fewer CPUs than ranks x threads; such a trial says so in its diagnostics (``mpi.oversubscribed``
and a note): its numbers measure time-sharing and are not comparable with a bound run.

OpenMP inside a bound rank: ``OMP_PLACES=cores OMP_PROC_BIND=close``; libgomp builds the places
from the process's own affinity mask (GCC libgomp manual, OMP_PLACES), so the threads stay in
the rank's cores.  Oversubscribed: ``OMP_PROC_BIND=false`` (no binding at all).

Read-back: every MPI kernel prints one ``VHPC-RANK rank=R host=H cpu=C cpus=LIST tasks=N``
line per rank at exit (kernels/common.c ``vhpc_report_placement``); :func:`readback` parses
them and reports a placement mismatch when ranks share CPUs although the environment had a
CPU for each.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from vhpc.core.cpulist import parse_cpu_list


def marker_re(marker: str) -> re.Pattern[str]:
    """The pattern of a kernel's ``MARKER key=value ...`` record (``VHPC-RESULT``,
    ``VHPC-RANK``); group 1 holds the pairs.  A record ends at the end of its line or where
    another rank's record begins: MPICH's Hydra leaves the ranks' stdout unbuffered and
    forwards each write as it comes, so a record of one rank can land in the middle of
    another's line (seen with two ranks: ``... valid=1VHPC-RANK rank=1 ...``)."""
    return re.compile(rf"{marker}[ \t]+(.*?)(?=VHPC-(?:RESULT|RANK)[ \t]|$)", re.M)


RANK_RE = marker_re("VHPC-RANK")


def mpi_tool(impl: str, name: str) -> str:
    """``mpirun.openmpi`` etc. where Debian's suffixed names exist, else the plain name (Open
    MPI only: another implementation must be installed with its suffix)."""
    suffixed = f"{name}.{impl}"
    if shutil.which(suffixed) or impl != "openmpi":
        return suffixed
    return name


@dataclass(frozen=True)
class Launch:
    """One MPI launch: ``ranks`` x ``threads`` (OpenMP threads per rank) with implementation
    ``impl`` (``openmpi`` or ``mpich``) in an environment offering ``ncpus`` CPUs.  ``bind``
    False leaves the ranks unbound (several launches started together, which would otherwise
    all bind to the same first cores).  ``cpuset``: the host CPUs the environment is restricted
    to (native ``cpus=``/``nodes=``), passed as Open MPI ``--cpu-set`` (mpirun maps onto the
    whole machine otherwise, whatever affinity it was started with)."""

    ranks: int
    threads: int = 1
    impl: str = "openmpi"
    ncpus: int | None = None
    bind: bool = True
    cpuset: tuple[int, ...] | None = None

    @property
    def oversubscribed(self) -> bool:
        """True when ranks x threads exceeds the environment's CPUs (unknown CPUs: False)."""
        return self.ncpus is not None and self.ranks * self.threads > self.ncpus

    @property
    def bound(self) -> bool:
        """True when each rank is bound to its own cores.  Not with a ``cpuset`` and several
        threads per rank under Open MPI 4: its mpirun refuses ``--cpu-set`` with ``PE=``
        ("conflicting binding policy"), so such ranks share the environment's CPU set."""
        split = self.cpuset is not None and self.threads > 1 and self.impl == "openmpi"
        return self.bind and not self.oversubscribed and not split

    def argv(self) -> list[str]:
        """The launcher prefix (see the module docstring for the binding options)."""
        n = str(self.ranks)
        if self.impl == "mpich":
            bind = "none" if not self.bound else \
                ("core" if self.threads == 1 else f"core:{self.threads}")
            return [mpi_tool("mpich", "mpirun"), "-np", n, "-bind-to", bind]
        base = [mpi_tool("openmpi", "mpirun"), "--allow-run-as-root", "-np", n]
        if self.cpuset:  # ranks mapped one per core inside the set (PE=1 is implied)
            base += ["--cpu-set", ",".join(map(str, self.cpuset))]
        if self.oversubscribed:
            return base + ["--oversubscribe", "--bind-to", "none"]
        if not self.bound:
            return base + ["--bind-to", "none"]
        if self.cpuset:
            return base + ["--bind-to", "core"]
        return base + ["--map-by", f"slot:PE={self.threads}", "--bind-to", "core"]

    def environ(self) -> dict[str, str]:
        """OpenMP variables for every rank (places inside the rank's own mask)."""
        env = {"OMP_NUM_THREADS": str(self.threads)}
        if not self.bound:
            env["OMP_PROC_BIND"] = "false"
        else:
            env.update(OMP_PLACES="cores", OMP_PROC_BIND="close")
        return env

    def diagnostics(self) -> dict[str, Any]:
        """What the trial stores about its launch (``mpi`` in the trial's diagnostics)."""
        out: dict[str, Any] = {"launcher": self.argv(), "ranks": self.ranks,
                               "threads": self.threads, "ncpus": self.ncpus,
                               "oversubscribed": self.oversubscribed, "bound": self.bound}
        if self.oversubscribed:
            out["note"] = (f"{self.ranks} ranks x {self.threads} threads on {self.ncpus} CPUs: "
                           "oversubscribed and unbound, not comparable with bound runs")
        elif not self.bound:
            out["note"] = "ranks not bound one per core: they share the environment's CPUs"
        return out


def rank_lines(stdout: str) -> list[dict[str, Any]]:
    """The ``VHPC-RANK`` lines of ``stdout`` as dicts {rank, host, cpu, cpus (list), tasks,
    and ``node`` (the Slurm node) when the line has one}, sorted by rank; lines that do not
    parse are skipped (output of a crashed rank)."""
    out = []
    for m in RANK_RE.finditer(stdout):
        kv = dict(tok.partition("=")[::2] for tok in m.group(1).split())
        try:
            row = {"rank": int(kv["rank"]), "host": kv.get("host", ""),
                   "cpu": int(kv["cpu"]), "cpus": list(parse_cpu_list(kv["cpus"])),
                   "tasks": int(kv.get("tasks", 0))}
            if kv.get("node"):
                row["node"] = kv["node"]
            out.append(row)
        except (KeyError, ValueError):
            continue
    return sorted(out, key=lambda r: r["rank"])


def readback(launch: Launch, stdout: str) -> dict[str, Any]:
    """Per-rank placement read back from a trial's output, and its mismatches with the launch.

    Returns {"ranks": [...]} (see :func:`rank_lines`) plus ``mismatches`` (list of strings)
    when ranks are missing, or, for a bound launch, when two ranks on
    one host share a CPU (in their masks, or as the CPU they last ran on)."""
    ranks = rank_lines(stdout)
    out: dict[str, Any] = {"ranks": ranks}
    problems = []
    if ranks and len(ranks) != launch.ranks:
        problems.append(f"{len(ranks)} of {launch.ranks} ranks reported their placement")
    if launch.bound:
        seen: dict[tuple[str, int], int] = {}
        for r in ranks:
            for cpu in set(r["cpus"]) | {r["cpu"]}:
                where = r.get("node") or r["host"]
                other = seen.setdefault((where, cpu), r["rank"])
                if other != r["rank"]:
                    problems.append(f"ranks {other} and {r['rank']} share CPU {cpu} on "
                                    f"{where} although there was a CPU for each")
                    break
    if problems:
        out["mismatches"] = problems
    return out


#: MPI launcher names (Open MPI's, MPICH's Hydra, Debian's alternatives' names): a vcluster
#: gives them its hostfile and remote starter, a Slurm allocation turns them into job steps.
LAUNCHERS = re.compile(r"^(mpirun|mpiexec)(\.openmpi|\.mpich|\.hydra)?$")
#: Launcher options followed by one value (Open MPI mpirun(1), Hydra's mpiexec) / by two.
VALUE_OPTS = {"-np", "-n", "-c", "--np", "-N", "-ppn", "--map-by", "-map-by", "--bind-to",
              "-bind-to", "--rank-by", "-H", "--host", "-host", "-hosts", "-x", "-hostfile",
              "--hostfile", "-f", "-wdir", "--wdir", "-launcher", "-iface", "--npernode",
              "-npernode", "--cpus-per-proc", "--report-bindings-file"}
PAIR_OPTS = {"--mca", "-mca", "-gmca", "--gmca", "-genv", "-env"}


def program_index(argv: list[str]) -> int | None:
    """Index of the program an MPI launcher command starts (after the launcher's options), or
    None when ``argv`` has no launcher or no program.  The launcher may follow a wrapper (e.g.
    ``python3 hpcc_runner.py ... -- mpirun -np 2 hpcc``)."""
    start = next((k for k, a in enumerate(argv) if LAUNCHERS.match(PurePosixPath(a).name)), None)
    if start is None:
        return None
    i = start + 1
    while i < len(argv):
        a = argv[i]
        if a in PAIR_OPTS:
            i += 3
        elif a in VALUE_OPTS:
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return i
    return None
