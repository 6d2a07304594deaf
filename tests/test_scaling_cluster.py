"""Ranks placed across nodes, on the test cluster (tests/cluster/up --nodes 3): node K runs on host CPU
(K-1) mod ncpus when the nodes outnumber the CPUs, so a 2-node run on 2 CPUs measures scaling;
``vhpc study scaling --executor slurm:nodes=3`` then draws HPCCG Mflop/s per node and the
VM/native ratio against nodes, places native HPCCG at 2 nodes on 2 distinct host CPUs and
banners the node counts whose ranks share a CPU.  The study boots one TCG guest per node for
minutes: it runs with VHPC_VM_TESTS=1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import require_tool, slurm_nodes

NODES = ["vhpc1", "vhpc2", "vhpc3"]


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    yield from slurm_nodes(tmp_path_factory, 3, mpicc="libopenmpi-dev")


def _env(cluster) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": cluster["SLURM_CONF"]}


def test_each_node_gets_its_own_cpu_where_the_host_has_enough(cluster3):
    host = sorted(os.sched_getaffinity(0))
    out = subprocess.run(["srun", "-N3", "-n3", "-l", "bash", "-c",
                          'echo "$SLURMD_NODENAME $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'],
                         capture_output=True, text=True, env=_env(cluster3), timeout=120)
    assert out.returncode == 0, out.stderr
    allowed = {}
    for line in out.stdout.splitlines():
        _, node, cpus = line.replace(":", " ", 1).split()
        allowed[node] = cpus
    assert sorted(allowed) == NODES
    if len(host) < len(NODES):  # node K on CPU (K-1) mod ncpus: the first ncpus nodes distinct
        assert [allowed[n] for n in NODES] == [str(host[k % len(host)]) for k in range(3)]
        assert len({allowed[n] for n in NODES[:len(host)]}) == len(host)
    else:  # a disjoint split
        sets = [set(allowed[n].split(",")) for n in NODES]
        assert not (sets[0] & sets[1] or sets[1] & sets[2] or sets[0] & sets[2])


@pytest.mark.browser
@pytest.mark.skipif(os.environ.get("VHPC_VM_TESTS") != "1",
                    reason="boots a TCG guest per node for minutes: VHPC_VM_TESTS=1")
def test_scaling_study_on_three_nodes(cluster3, tmp_path, kernels_built, no_qemu_leak):
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    require_tool("qemu-system-x86_64")
    out = tmp_path / "res"
    proc = subprocess.run(
        [sys.executable, "-m", "vhpc.cli", "study", "scaling", "--executor", "slurm:nodes=3",
         "--repeats", "2", "--warmup", "0", "--timeout", "600", "--out", str(out),
         "-b", "hpccg:nx=8,ny=8,nz=8", "-b", "osu-coll:op=barrier,iters=50",
         "-b", "osu-latency:max_size=64,iters=50"],
        capture_output=True, text=True, env=_env(cluster3), timeout=3000)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    (doc,) = [json.loads(p.read_text()) for p in out.glob("*/results.json")]
    panels = {p["title"]: p for p in doc["study"]["figure"]["panels"]}
    per_node = panels["Fig. 6: HPCCG weak scaling"]
    assert per_node["y"]["label"] == "HPCCG [Mflop/s per node], fixed grid per rank"
    assert per_node["x"]["label"] == "nodes (1 MPI rank per node)"
    ratio = panels["HPCCG: VM / native vs nodes"]
    assert ratio["y"]["relative_to"] == "native"
    assert [p["x"] for p in ratio["series"][0]["points"]] == [1, 2, 3]
    # native HPCCG at 2 nodes: its 2 ranks on 2 distinct host CPUs, read back from the ranks
    from vhpc.report import scaleout
    from vhpc.store import Store

    store = Store(out / "vhpc.db")
    cid = store.campaigns()[0]["id"]
    trials = store.trials(cid, "done")
    two = [t for t in trials if t.environment == "native" and t.benchmark == "hpccg"
           and scaleout.node_count(t) == 2]
    assert two
    for t in two:
        cpus = [r.cpus for r in scaleout.ranks(t)]
        assert len(cpus) == 2 and not set(cpus[0]) & set(cpus[1]), cpus
    html = next(out.glob("*/report.html"))
    text = html.read_text()
    shared = {s.nodes for s in scaleout.shared_cpus(trials)}
    if len(os.sched_getaffinity(0)) < 3:  # node 3 shares a CPU with node 1
        assert 3 in shared and 2 not in shared
        assert re.search(r'class="shared-cpus" data-nodes="3"', text)
    dom = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,900",
         "--virtual-time-budget=5000", "--dump-dom", html.as_uri()],
        capture_output=True, text=True, timeout=120)
    body = re.search(r"<body[^>]*>", dom.stdout).group(0)
    ok = re.search(r'data-figures-ok="(\d+)"[^>]*data-figures-total="(\d+)"', body)
    assert ok and ok.group(1) == ok.group(2) != "0", body
