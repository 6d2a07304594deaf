"""The ``applications`` study: seed 004 Fig. 7-8 with public codes (issue 30).

Seed 004 rests its "≤ 5 % overhead on key HPC applications" on CTH and Sage (Fig. 7, 8: weak
scaling, native vs a guest per node, 1..4096 nodes); neither is public.  LAMMPS and GROMACS
(Debian's ``lmp`` and ``gmx_mpi``, :mod:`vhpc.benchmarks.apps`) stand in for them:

- under ``--executor slurm:nodes=N``: at k = 1, 2, ... N nodes (:func:`node_counts`), k x
  ``ranks_per_node`` ranks natively (one ``srun --mpi=pmix`` job step over k nodes) and in a
  ``vcluster`` of one guest per node (the ``scaling`` study's layout);
- on one host (the local executor): 1, 2, ... C ranks natively and in one VM with C vCPUs (C =
  the host's cores), which is not the paper's experiment (no network between guests) but the
  same figure of merit against rank count.

Weak scaling as the paper ran it: LAMMPS with its default atoms per rank (the Lennard-Jones
melt), GROMACS with a water box whose volume grows with the ranks (edge 2.2 nm x k^(1/3)).  The
figure: timesteps/s and ns/day against ranks (= nodes with one rank per node), native and
virtualized, and the VM/native ratio; findings.yaml sets the seed's captions beside it ("within
5 % of native"), and the report says "cannot tell" under TCG as for every study.
"""

from __future__ import annotations

from vhpc.campaign.figures import FigureSpec, Panel
from vhpc.campaign.studies import StudyError, node_counts, study
from vhpc.spec.parse import bench, env

#: Rank counts of the last :func:`_applications` call (the template runs before ``expand``).
_COUNTS: list[int] = []

#: Edge of the GROMACS water box on one rank (nm; gromacs's default); k ranks get 2.2 x k^(1/3).
BOX_NM = 2.2


def box_for(ranks: int) -> float:
    """Water-box edge (nm) for ``ranks`` ranks: constant volume per rank (weak scaling),
    rounded to 0.01 nm."""
    return round(BOX_NM * ranks ** (1 / 3), 2)


def _layout(topo, protocol) -> tuple[list[int], str, list]:
    """(rank counts, where, environments): over a Slurm allocation when the protocol's
    executor runs elsewhere, else on this host (module docstring).  Raises StudyError for an
    executor that does not parse or a host with no core."""
    from vhpc import executors

    spec = protocol.get("executor")
    ex = None
    if spec is not None:
        try:
            ex = protocol["executor"] = (executors.parse(spec) if isinstance(spec, str)
                                         else spec)
        except ValueError as exc:
            raise StudyError(str(exc)) from None
    if ex is not None and not ex.part.runs_here:
        n = ex.node_count()
        rpn = int(getattr(ex.options, "ranks_per_node", 1) or 1)
        vm = env("vcluster", "vm", vms=n, vcpus=rpn, ranks_per_vm=rpn, vms_per_node=1)
        return [k * rpn for k in node_counts(n)], "nodes", [env("native"), vm]
    cores = len(topo.cores)
    if cores < 1:
        raise StudyError("applications needs at least one core")
    return node_counts(cores), "host", [env("native"), env("vm", vcpus=cores)]


def _points(given: list, protocol) -> list:
    """The user's ``-b`` items (e.g. ``lammps:steps=50``) at every rank count of
    :func:`_layout`, unless the item sets ``ranks`` itself; a ``gromacs`` item without ``box``
    gets the weak-scaling box of each count."""
    counts = list(_COUNTS) or [1]
    out = []
    for b in given:
        if "ranks" in b.params or b.name not in ("lammps", "gromacs"):
            out.append(b)
            continue
        for k in counts:
            extra = {"box": box_for(k)} if b.name == "gromacs" and "box" not in b.params else {}
            out.append(bench(b.name, **b.params, **extra, ranks=k))
    return out


@study("applications", "LAMMPS and GROMACS, native vs a guest per node over 1..N nodes "
       "(seed 004 Fig. 7-8 with public codes)", FigureSpec(
           "004", "Fig. 7-8", "applications (CTH, Sage → LAMMPS, GROMACS): native vs "
           "virtualized, weak scaling", (
               Panel("timesteps_per_s", "LAMMPS LJ melt [timesteps/s]", "param:ranks",
                     "MPI ranks (= nodes under slurm, 1 rank per node)", bench="lammps",
                     title="Fig. 7 (CTH → LAMMPS): weak scaling"),
               Panel("ns_per_day", "GROMACS water [ns/day]", "param:ranks",
                     "MPI ranks (= nodes under slurm, 1 rank per node)", bench="gromacs",
                     title="Fig. 8 (Sage → GROMACS): weak scaling"),
               Panel("timesteps_per_s|ns_per_day", "VM / native", "param:ranks",
                     "MPI ranks", series="env&benchmark", relative=True,
                     title="virtualized relative to native"))), expand=_points)
def _applications(topo, in_vm, protocol):
    """LAMMPS (lj, atoms per rank fixed) and GROMACS (water, volume per rank fixed) at every
    rank count of :func:`_layout`, natively and virtualized."""
    counts, _, envs = _layout(topo, protocol)
    _COUNTS[:] = counts  # for _points (-b items): studies.build runs the template first
    default = [bench("lammps", ranks=k) for k in counts]
    default += [bench("gromacs", ranks=k, box=box_for(k)) for k in counts]
    return default, envs
