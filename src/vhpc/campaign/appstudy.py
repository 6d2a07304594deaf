"""The ``applications`` study: Lange et al., VEE 2011, Fig. 7-8, with public codes (CTH and Sage
are not public).

Seed 004 rests its "≤ 5 % overhead on key HPC applications" on CTH and Sage (Fig. 7, 8: weak
scaling, native vs a guest per node, 1..4096 nodes); neither is public.  LAMMPS and GROMACS
(Debian's ``lmp`` and ``gmx_mpi``, :mod:`vhpc.benchmarks.apps`) stand in for them:

- under ``--executor slurm:nodes=N``: at k = 1, 2, ... N nodes (:func:`node_counts`), k x
  ``ranks_per_node`` ranks natively (one ``srun --mpi=pmix`` job step over k nodes) and in a
  ``vcluster`` of one guest per node (the ``scaling`` study's layout);
- on one host (the local executor): 1, 2, ... C ranks natively and in one VM with C vCPUs (C =
  the host's cores), which is not the paper's experiment (no network between guests) but the
  same figure of merit against rank count.

Weak scaling as the paper ran it: LAMMPS's scaled in.lj (``scaling=scaled``: 32,000 atoms per
rank, as LAMMPS's bench scales it), GROMACS with water whose atoms grow with the ranks (its
default size per rank: 6,000 atoms, class 0006 of GROMACS's water set, x k).  The
figure: timesteps/s and ns/day against ranks (= nodes with one rank per node), native and
virtualized, and the VM/native ratio; findings.yaml sets the seed's captions beside it ("within
5 % of native"), and the report says "cannot tell" under TCG as for every study.
"""

from __future__ import annotations

from vhpc.campaign.figures import FigureSpec, Panel
from vhpc.campaign.study import StudyError, node_counts, study
from vhpc.environments.kind import BASELINE, GUEST, GUEST_CLUSTER, kind_name
from vhpc.spec.parse import bench, env_of

#: Rank counts of the last :func:`_applications` call (the template runs before ``expand``).
_COUNTS: list[int] = []

#: GROMACS water per rank (thousands of atoms: gromacs's default size); k ranks get k times it.
SIZE_PER_RANK = 6.0


def size_for(ranks: int) -> float:
    """GROMACS ``size`` (thousands of atoms) for ``ranks`` ranks: constant atoms per rank
    (weak scaling)."""
    return SIZE_PER_RANK * ranks


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
        # the guests are named like the single guest, as the paper calls its virtualized side
        vm = env_of(GUEST_CLUSTER, kind_name(GUEST), vms=n, vcpus=rpn, ranks_per_vm=rpn,
                    vms_per_node=1)
        return [k * rpn for k in node_counts(n)], "nodes", [env_of(BASELINE), vm]
    cores = len(topo.cores)
    if cores < 1:
        raise StudyError("applications needs at least one core")
    return node_counts(cores), "host", [env_of(BASELINE), env_of(GUEST, vcpus=cores)]


def _points(given: list, protocol) -> list:
    """The user's ``-b`` items (e.g. ``lammps:steps=50``) at every rank count of
    :func:`_layout`, unless the item sets ``ranks`` itself; a ``gromacs`` item without ``size``
    gets the weak-scaling size of each count, a ``lammps`` item without ``scaling`` scales its
    atoms with the ranks (``scaling=scaled``)."""
    counts = list(_COUNTS) or [1]
    out = []
    for b in given:
        if "ranks" in b.params or b.name not in ("lammps", "gromacs"):
            out.append(b)
            continue
        for k in counts:
            extra = ({"size": size_for(k)} if b.name == "gromacs" and "size" not in b.params
                     else {"scaling": "scaled"} if b.name == "lammps"
                     and "scaling" not in b.params else {})
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
    """LAMMPS (lj, atoms per rank fixed) and GROMACS (water, atoms per rank fixed) at every
    rank count of :func:`_layout`, natively and virtualized."""
    counts, _, envs = _layout(topo, protocol)
    _COUNTS[:] = counts  # for _points (-b items): studies.build runs the template first
    default = [bench("lammps", ranks=k, scaling="scaled") for k in counts]
    default += [bench("gromacs", ranks=k, size=size_for(k)) for k in counts]
    return default, envs
