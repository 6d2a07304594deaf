"""The partition study (seed 000 Fig. 8, 11, 12) without booting its four guests: the plan it
makes on a 2-socket host, and the figure and finding lines it draws from an analysis of its
environments.  This replaces running the whole study under TCG (four guests, 15 min on a loaded
2-core host) in ``make test``; the guests' own boot, pinning and ivshmem transport are covered
by tests/test_vcluster.py and tests/test_vm.py."""

from __future__ import annotations

import numpy as np

from vhpc import topology
from vhpc.analysis import analyse
from vhpc.analysis.figdata import figure_data
from vhpc.campaign import studies
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.environments.options import HostFacts
from vhpc.report import paper

TWO_SOCKETS = "pack:2 numa:1 l3:1 core:2 pu:1"


def _spec():
    return studies.build("partition", topology.from_synthetic(TWO_SOCKETS), ["pingpong:iters=20"],
                         repeats=3)


def test_partition_plans_one_vm_over_all_sockets_and_vms_per_socket():
    spec = _spec()
    assert spec.study == "partition" and spec.baseline == "native"
    kinds = {e.name: e.kind for e in spec.environments}
    assert kinds == {"native": "native", "one-vm": "vm", "vm-per-socket": "vcluster",
                     "2-vms-per-socket": "vcluster"}
    host = HostFacts(cpus=(0, 1, 2, 3), topology=topology.from_synthetic(TWO_SOCKETS))
    one = spec.environment("one-vm").plan(host).placement
    # one VM spans both sockets: its 4 vCPUs are pinned to PUs of both packages
    pkgs = {p.index for p in host.topology.packages for pins in one.vcpu_pins
            if set(pins) & set(p.pus)}
    assert one.vcpus == 4 and pkgs == {0, 1}
    per = spec.environment("vm-per-socket").options
    assert per.vms == 2 and per.vcpus == 2 and per.net == "ivshmem"
    assert spec.environment("2-vms-per-socket").options.vms == 4


def _observations(envs: list[str], n: int = 3) -> list[Observation]:
    rng = np.random.default_rng(7)
    means = {"native": 1.0, "one-vm": 1.4, "vm-per-socket": 1.2, "2-vms-per-socket": 1.3}
    out, tid = [], 0
    for env in envs:
        for i in range(n):
            for metric, unit, hib, scale in (("latency_us", "us", False, 1.0),
                                             ("bandwidth_MBps", "MB/s", True, 1000.0)):
                value = scale * (means[env] if not hib else 1 / means[env])
                out.append(Observation(env, "pingpong", "iters=20", metric, unit, hib,
                                       float(value * (1 + rng.normal(0, 0.005))), valid=True,
                                       warmup=False, trial_id=tid,
                                       session_index=None if env == "native" else i))
                tid += 1
    return out


def test_partition_figure_has_one_bar_per_environment_baseline_first():
    spec = _spec()
    names = [e.name for e in spec.environments]
    envs = {e.name: EnvInfo(e.name, e.kind, None if e.kind == "native" else "kvm", {})
            for e in spec.environments}
    result = analyse(_observations(names), envs, spec.baseline)
    fd = figure_data(studies.STUDIES.get("partition").figure, result)
    panels = [p for p in fd.panels if p.series and p.xlabel == "environment"]
    assert panels, [p.xlabel for p in fd.panels]
    for p in panels:
        for s in p.series:
            xs = [pt.x for pt in s.points]
            assert sorted(xs) == sorted(names) and xs[0] == "native", xs
            assert all(pt.n == 3 for pt in s.points)
    lat = next(s for p in panels for s in p.series if "latency" in s.label)
    by_env = {pt.x: pt.y for pt in lat.points}
    assert by_env["one-vm"] > by_env["vm-per-socket"] > by_env["native"]  # as measured
    block, _, lines, _ = paper.study_block("partition", result)
    assert lines and all(line.source.startswith("seed 000") for line in lines)
    assert "partition" in str(block)
