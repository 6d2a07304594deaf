"""A virtualized cluster over a real three-node Slurm cluster on this host (seed 004):
one guest per Slurm node, booted by a guest-host job step on that node, the guests' segment
carried by QEMU stream links over TCP between the nodes' loopback addresses, one MPI job
across the guests; native MPI across the same nodes through srun --mpi=pmix.  Killing the
campaign (SIGKILL of vhpc, scancel of its allocation) leaves no QEMU, step or guest folder,
and --resume runs exactly the missing trials."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import _cmdline, _procs, slurm_nodes
from vhpc.store import Store

CLI = [sys.executable, "-m", "vhpc.cli"]
NODES = {"vhpc1", "vhpc2", "vhpc3"}
# a tiny collective: what is tested is where the ranks run, not the latency
COLL = "osu-coll:op=allreduce,ranks=3,sizes=16,iters=10,iters_large=2"


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory, kernels_built):
    yield from slurm_nodes(tmp_path_factory, 3, **{"qemu-system-x86_64": "qemu-system-x86"})


def _env(cluster) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": cluster["SLURM_CONF"]}


def _cluster_qemu(cluster) -> set[int]:
    """QEMU processes started under this cluster (their environment names its slurm.conf)."""
    needle = f"SLURM_CONF={cluster['SLURM_CONF']}".encode()
    out = set()
    for pid, (comm, state, _) in _procs().items():
        if "qemu-system" in comm and state != "Z":
            try:
                if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    out.add(pid)
            except OSError:
                continue
    return out


def _steps(cluster) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-s", "-o", "%i"], capture_output=True, text=True,
                         env=_env(cluster))
    return [s for s in out.stdout.split() if s.strip()]


def _guest_dirs(pids: set[int]) -> list[Path]:
    """Guest work folders (owned_tempdir: vhpc-guest-<owner pid>-...) of the guest hosts."""
    return [p for p in Path("/tmp").glob("vhpc-guest-*")
            if int(p.name.split("-")[2]) in pids]


def _wait_gone(cluster, seconds: float = 90.0) -> tuple[set[int], list[str]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        qemu, steps = _cluster_qemu(cluster), _steps(cluster)
        if not qemu and not steps:
            break
        time.sleep(0.2)
    return _cluster_qemu(cluster), _steps(cluster)


def _host_pids(store: Store, cid: str) -> set[int]:
    return {h["pid"] for t in store.trials(cid) if t.applied and t.applied.slurm
            for h in t.applied.slurm.get("guest_hosts", [])}


def _compare(tmp_path, *extra: str) -> list[str]:
    return CLI + ["compare", "-b", COLL, "-e", "native", "-e", "vcluster:vms=3,vcpus=1",
                  "--executor", "slurm:nodes=3", "--warmup", "0", "--out", str(tmp_path),
                  *extra]


def _check_placement(store: Store, cid: str) -> None:
    """Every trial's ranks each on its own Slurm node; vcluster ranks in guests 0-2 with the
    host CPU of their vCPU, the guest hosts at the three nodes' addresses; native as one srun
    step whose sacct row lists the three nodes."""
    for t in store.trials(cid):
        ranks = t.applied.ranks
        assert sorted(r["rank"] for r in ranks) == [0, 1, 2], (t.environment, ranks)
        assert {r["node"] for r in ranks} == NODES  # every rank on its own Slurm node
        if t.environment == "vcluster":
            assert sorted(r["vm"] for r in ranks) == [0, 1, 2]
            assert all(isinstance(r["host_cpu"], int) for r in ranks)
            hosts = t.applied.slurm["guest_hosts"]
            assert {h["node"] for h in hosts} == NODES
            assert [h["address"] for h in hosts] == ["127.0.0.11", "127.0.0.12", "127.0.0.13"]
            assert not t.applied.mismatches
        else:
            assert t.applied.slurm_nodes == 3
            assert t.diagnostics.sacct["NodeList"] == "vhpc[1-3]"
    fp = store.environments(cid)["vcluster"].fingerprint
    assert "UDP datagrams to 127.0.0.11" in fp["network"]["segment"]
    assert sorted(fp["nodes"]) == sorted(NODES)


def _wait_for_guests(cluster, proc: subprocess.Popen) -> None:
    """Until three guests run on the nodes (QEMU named vhpc-guest: not a short-lived probe);
    kills ``proc`` when they do not come up, so no campaign outlives the test."""
    deadline, up = time.monotonic() + 600, set()
    while time.monotonic() < deadline and proc.poll() is None:
        up = {p for p in _cluster_qemu(cluster) if b"vhpc-guest" in _cmdline(p)}
        if len(up) >= 3:
            return
        time.sleep(0.5)
    if proc.poll() is None:
        proc.kill()
    raise AssertionError(f"no guests came up ({len(up)} guest QEMU, vhpc exit {proc.wait()})")


def _done(store: Store, cid: str) -> dict[int, float]:
    return {t.id: t.started for t in store.trials(cid, "done")}


def _dead_guest_hosts() -> set[int]:
    """Owners of guest folders (vhpc-guest-<pid>-...) that are gone."""
    return {int(p.name.split("-")[2]) for p in Path("/tmp").glob("vhpc-guest-*")
            if not Path(f"/proc/{p.name.split('-')[2]}").exists()}


def test_guests_on_three_nodes_survive_sigkill_and_scancel_and_resume_completes(cluster3,
                                                                                tmp_path):
    """The issue's campaign (osu-coll at 3 ranks, native vs vcluster:vms=3 over
    slurm:nodes=3), killed with SIGKILL mid-trial, resumed and cancelled with scancel
    mid-trial, resumed again: nothing left after each kill, every trial run once, every
    rank on its own node."""
    env = _env(cluster3)
    proc = subprocess.Popen(_compare(tmp_path, "--repeats", "1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    _wait_for_guests(cluster3, proc)
    proc.send_signal(signal.SIGKILL)  # vhpc dies mid-trial, its guests on three nodes
    proc.wait(timeout=30)
    qemu, steps = _wait_gone(cluster3)
    assert not qemu, f"QEMU left on the nodes after SIGKILL: {qemu}"
    assert not steps, f"job steps left after SIGKILL: {steps}"
    store = Store(tmp_path / "vhpc.db")
    cid = store.campaigns()[0]["id"]
    before, dead = _done(store, cid), _dead_guest_hosts()
    resume = CLI + ["compare", "--resume", cid, "--out", str(tmp_path)]
    proc = subprocess.Popen(resume, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    _wait_for_guests(cluster3, proc)
    jobs = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                          env=env).stdout.split()
    subprocess.run(["scancel", *jobs], env=env, check=True)  # the allocation ends under it
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err[-2000:]
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "--resume" in lines[-1], err[-2000:]
    qemu, steps = _wait_gone(cluster3)
    assert not qemu and not steps, (qemu, steps)
    before.update(_done(store, cid))
    dead |= _dead_guest_hosts()
    out = subprocess.run(resume + ["--no-report"], capture_output=True, text=True, env=env,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    trials = store.trials(cid)
    assert len(trials) == 2 and all(t.status == "done" for t in trials)
    for t in trials:
        if t.id in before:  # finished before a kill: kept, not run again
            assert t.started == before[t.id]
    obs = store.observations(cid)
    assert len({(o.trial_id, o.metric) for o in obs}) == len(obs)  # nothing twice
    assert {o.trial_id for o in obs} == {t.id for t in trials}  # nothing lost
    _check_placement(store, cid)
    qemu, steps = _wait_gone(cluster3, 30)
    assert not qemu and not steps
    assert not _guest_dirs(dead | _host_pids(store, cid))  # removed at the next start


# ---------------------------------------------------------------- no cluster needed below
def _host(nodes: int):
    from vhpc import topology
    from vhpc.environments.options import HostFacts

    return HostFacts((0, 1), topology.from_synthetic("pack:1 numa:1 core:2 pu:1"), nodes)


def _plan(nodes: int, **opts):
    from vhpc.environments.vcluster import VclusterKind
    from vhpc.environments.vcluster.options import VclusterOptions

    return VclusterKind().plan(VclusterOptions(**opts), _host(nodes))


def test_guests_spread_one_per_node_and_impossible_spreads_are_one_line():
    from vhpc.core.errors import HostError

    plan = _plan(3, vms=3, vcpus=1)
    assert len(plan.placement) == 1  # what each node holds
    assert "1 per node on 3 Slurm node(s)" in plan.text
    assert len(_plan(3, vms=4, vcpus=1).placement) == 2  # 4 guests on 3 nodes: 2 per node
    assert len(_plan(1, vms=2, vcpus=1).placement) == 2  # one host: all guests here
    with pytest.raises(HostError, match="need 3 CPUs, the host has 2"):
        _plan(1, vms=3, vcpus=1)
    with pytest.raises(HostError, match="net=ivshmem"):
        _plan(3, vms=3, vcpus=1, net="ivshmem")
    with pytest.raises(HostError, match="need 4 nodes, the allocation has 3"):
        _plan(3, vms=4, vcpus=1, vms_per_node=1)


def test_links_across_nodes_are_tcp_streams_to_guest_0s_node():
    from vhpc.environments.vcluster.network import ClusterNet

    net = ClusterNet.across_nodes(3, "127.0.0.11")
    net.ports = (40001, 40002)
    hub = " ".join(net.qemu_args(0))
    assert "stream,id=up1,server=on,addr.type=inet,addr.host=127.0.0.11,addr.port=40001" in hub
    assert "stream,id=up2,server=on,addr.type=inet,addr.host=127.0.0.11,addr.port=40002" in hub
    leaf = " ".join(net.qemu_args(2))
    assert "stream,id=net0,server=off,addr.type=inet,addr.host=127.0.0.11,addr.port=40002" in leaf
    assert "TCP to 127.0.0.11" in net.describe()["segment"]
    net.ports = (40001,)
    with pytest.raises(ValueError, match="2 link ports needed"):
        net.qemu_args(1)


def test_links_across_nodes_as_udp_datagrams_pair_each_guest_with_the_hub():
    from vhpc.environments.vcluster.network import ClusterNet

    net = ClusterNet.across_nodes(3, "127.0.0.11")
    net.ports = (40001, 40002)
    net.leaves = (("127.0.0.12", 41001), ("127.0.0.13", 41002))
    hub = " ".join(net.qemu_args(0))
    assert ("dgram,id=up2,local.type=inet,local.host=127.0.0.11,local.port=40002,"
            "remote.type=inet,remote.host=127.0.0.13,remote.port=41002") in hub
    assert "hubport,id=hp2,hubid=0,netdev=up2" in hub
    leaf = " ".join(net.qemu_args(1))
    assert ("dgram,id=net0,local.type=inet,local.host=127.0.0.12,local.port=41001,"
            "remote.type=inet,remote.host=127.0.0.11,remote.port=40001") in leaf
    assert "UDP datagrams to 127.0.0.11" in net.describe()["segment"]


def test_free_ports_are_free_for_tcp_and_udp():
    import socket

    from vhpc.executors.slurm.guests import free_ports

    ports = free_ports("127.0.0.1", 3)
    assert len(ports) == len(set(ports)) == 3, ports  # as many as asked, each once
    assert all(0 < p < 65536 for p in ports) and free_ports("127.0.0.1", 0) == []
    for port in ports:
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind(("127.0.0.1", port))  # raises if it were taken


def _guest_host(payload: dict):
    from vhpc.executors.slurm.guests import NodeLink
    from vhpc.executors.slurm.step import encode

    return NodeLink([sys.executable, "-m", "vhpc.executors.slurm.guests", encode(payload)],
                    "here", "127.0.0.1")


MEMBER = {"vcpus": 1, "memory": 256}


def test_guest_host_protocol_without_booting():
    from vhpc.environments.base import EnvError

    link = _guest_host({"name": "c", "first": 1, "count": 1, "policy": "float",
                        "member": MEMBER})
    assert link.info["guests"] == ["c/vm1"] and link.info["pid"] > 0
    ports = link.call("ports", 30, host="127.0.0.1", n=2)
    assert len(set(ports)) == 2 and all(1024 <= p < 65536 for p in ports)
    assert link.call("alive", 30, i=0) is False  # not booted
    with pytest.raises(EnvError, match="^node here: the guest is not running$"):
        link.call("request", 30, i=0, what="read", wait=5, payload={"path": "/proc/version"})
    with pytest.raises(EnvError, match="^node here: .*unknown operation"):
        link.call("reboot-the-host", 30, i=0)
    with pytest.raises(EnvError, match="^node here: "):
        link.call("pause", 30, i=7)  # no such guest
    link.close(30)
    assert link.proc.returncode == 0
    with pytest.raises(EnvError, match="^node here: its guest host ended"):
        link.call("alive", 30, i=0)


def test_guest_host_that_cannot_place_its_guests_names_the_node():
    from vhpc.environments.base import EnvError

    with pytest.raises(EnvError, match=r"^node \S+: .*CPU"):
        _guest_host({"name": "c", "first": 0, "count": 64, "policy": "partition",
                     "member": {"vcpus": 64, "memory": 256}})


def test_guest_host_ends_and_closes_at_end_of_input():
    link = _guest_host({"name": "c", "first": 0, "count": 1, "policy": "float",
                        "member": MEMBER})
    link.proc.stdin.close()  # what a dead campaign process leaves: EOF
    assert link.proc.wait(timeout=30) == 0


def test_report_rank_table_names_each_ranks_slurm_node():
    from types import SimpleNamespace

    from vhpc.report.header import vcluster_section

    vm = {"vcpus": [{"vcpu": 0, "allowed": [0], "last_cpu": 0, "last_node": 0}]}
    applied = {"vms": [vm, vm], "ranks": [
        {"rank": 0, "vm": 0, "vcpu": 0, "host_cpu": 0, "node": "vhpc1"},
        {"rank": 1, "vm": 1, "vcpu": 0, "host_cpu": 0, "node": "vhpc2"}]}
    html = str(vcluster_section([SimpleNamespace(environment="vm", applied=applied,
                                                 benchmark="osu-coll", round=0)]))
    assert "<th>Slurm node</th>" in html
    assert "<td>1</td><td>vhpc2</td><td>vm1</td>" in html
    applied["ranks"] = [{k: v for k, v in r.items() if k != "node"} for r in applied["ranks"]]
    html = str(vcluster_section([SimpleNamespace(environment="vm", applied=applied,
                                                 benchmark="osu-coll", round=0)]))
    assert "Slurm node" not in html  # one host: no such column
