"""The applications study: LAMMPS and GROMACS at every rank/node count, natively and
virtualized; its figure and the seed's captions as findings."""

from __future__ import annotations

from vhpc import topology
from vhpc.campaign import paper_findings as F
from vhpc.campaign import studies
from vhpc.campaign.appstudy import size_for


def _spec(**protocol):
    topo = topology.from_synthetic("pack:1 numa:1 l3:1 core:4 pu:1")
    return studies.build("applications", topo, [], repeats=2, **protocol)


def test_one_host_runs_1_to_all_cores_in_one_vm():
    s = _spec()
    envs = {e.name: e for e in s.environments}
    assert set(envs) == {"native", "vm"} and envs["vm"].options.vcpus == 4
    ranks = sorted((b.name, b.params["ranks"]) for b in s.benchmarks)
    assert ranks == [("gromacs", 1), ("gromacs", 2), ("gromacs", 3), ("gromacs", 4),
                     ("lammps", 1), ("lammps", 2), ("lammps", 3), ("lammps", 4)]


def test_slurm_runs_a_guest_per_node_and_weak_scales_the_water_and_the_atoms():
    s = _spec(executor="slurm:nodes=3")
    vm = s.environment("vm")
    assert vm.kind == "vcluster" and vm.options.vms == 3 and vm.options.vms_per_node == 1
    sizes = {b.params["ranks"]: b.params["size"] for b in s.benchmarks if b.name == "gromacs"}
    assert sizes == {1: 6.0, 2: 12.0, 3: 18.0}  # 6,000 atoms of water per rank
    assert size_for(8) == 48.0  # class 0048 of GROMACS's water set at 8 ranks
    assert {b.params["scaling"] for b in s.benchmarks if b.name == "lammps"} == {"scaled"}


def test_the_seed_captions_are_set_beside_the_applications():
    mine = [f for f in F.load() if f.study == "applications"]
    assert {(f.benchmark, f.metric, f.claim, f.value) for f in mine} == {
        ("lammps", "timesteps_per_s", "within_pct", 5), ("gromacs", "ns_per_day", "within_pct", 5)}
    fig = studies.STUDIES.get("applications").figure
    assert fig.seed == "004" and {p.bench for p in fig.panels} >= {"lammps", "gromacs"}


def test_given_items_run_at_every_count():
    topo = topology.from_synthetic("pack:1 numa:1 l3:1 core:2 pu:1")
    s = studies.build("applications", topo, ["lammps:steps=20", "gromacs:steps=10",
                                             "lammps:ranks=1,atoms=500"], repeats=2)
    got = sorted(str((b.name, b.params.get("ranks"), b.params.get("size"), b.params.get("steps"),
                      b.params.get("atoms"), b.params.get("scaling"))) for b in s.benchmarks)
    # sizes and steps are stored even at their defaults (the problem's size)
    assert got == sorted(map(str, [("gromacs", 1, 6.0, 10, None, None),
                                   ("gromacs", 2, 12.0, 10, None, None),
                                   ("lammps", 1, None, 20, 32000, "scaled"),
                                   ("lammps", 1, None, 100, 500, None),
                                   ("lammps", 2, None, 20, 32000, "scaled")]))
