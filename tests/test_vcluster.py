"""vcluster: the plan, the launcher rewriting, the private network's cleanup, and real guests
(2 guests x 1 vCPU under TCG here) running one MPI job across them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from vhpc import placement, topology
from vhpc.environments.vcluster import network as vclusternet
from vhpc.host.owned import start_ticks
from vhpc.environments.vcluster.environment import parse_rank_log, plan_cluster, program_index
from vhpc.spec.parse import SpecError, env as env_spec, from_cli

TWO_SOCKETS = "pack:2 numa:1 l3:1 core:2 pu:1"


def test_partition_puts_each_vm_inside_one_socket():
    topo = topology.from_synthetic(TWO_SOCKETS)
    one_per_socket = plan_cluster(topo, 2, 2, 512)
    assert [set(p.pcpus) for p in one_per_socket] == [set(topo.package(0).pus), set(topo.package(1).pus)]
    assert [p.host_nodes for p in one_per_socket] == [(0,), (1,)]
    two_per_socket = plan_cluster(topo, 4, 1, 512)
    sockets = [{topo.pu(c).package for c in p.pcpus} for p in two_per_socket]
    assert sockets == [{0}, {0}, {1}, {1}]
    assert len({c for p in two_per_socket for c in p.pcpus}) == 4  # disjoint pCPUs


def test_partition_that_does_not_divide_the_sockets_says_what_to_change():
    topo = topology.from_synthetic("pack:4 numa:1 l3:1 core:2 pu:1")
    with pytest.raises(placement.PlacementError, match="multiple or a divisor of 4"):
        plan_cluster(topo, 3, 1, 512)
    spanning = plan_cluster(topo, 2, 4, 512)  # 2 VMs over 4 sockets: 2 sockets each
    assert [{topo.pu(c).package for c in p.pcpus} for p in spanning] == [{0, 1}, {2, 3}]


def test_other_policies_give_each_vm_a_disjoint_share():
    topo = topology.from_synthetic(TWO_SOCKETS)
    plans = plan_cluster(topo, 2, 2, 512, policy="compact")
    assert not set(plans[0].pcpus) & set(plans[1].pcpus)


def test_program_index_skips_launcher_options():
    argv = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "2",
            "--mca", "btl", "self,tcp", "/k/vhpc-pingpong", "-s", "8"]
    assert program_index(argv) == 8
    assert program_index(["/usr/bin/mpirun.mpich", "-np", "4", "-genv", "A", "1", "prog"]) == 6
    assert program_index(["/k/vhpc-stream", "-n", "10"]) is None
    assert program_index(["mpirun", "-np", "2"]) is None
    wrapped = ["python3", "-S", "hpcc_runner.py", "--n", "500", "--", "mpirun.openmpi", "-np", "2", "hpcc"]
    assert program_index(wrapped) == 9


def test_rank_log_lines_become_records():
    text = "rank=1 host=vhpc-vm1 pid=77 cpu=0 allowed=0 rc=0\ngarbage\nrank=0 host=vhpc-vm0 pid=5 cpu=1 allowed=0-1 rc=3\n"
    recs = parse_rank_log(text, 1)
    assert [(r["rank"], r["guest"], r["vcpu"], r["rc"]) for r in recs] == [
        (1, "vhpc-vm1", 0, 0), (0, "vhpc-vm0", 1, 3)]


def test_network_arguments_link_every_guest_to_vm0(tmp_path):
    net = vclusternet.ClusterNet(2, tmp_path)
    a0, a1 = " ".join(net.qemu_args(0)), " ".join(net.qemu_args(1))
    sock = str(tmp_path / "net-1.sock")
    assert f"server=on,addr.type=unix,addr.path={sock}" in a0
    assert f"server=off,addr.type=unix,addr.path={sock}" in a1
    assert "mcast" not in a0 + a1 and "tap" not in a0 + a1
    assert vclusternet.mac(0) in a0 and vclusternet.mac(1) in a1
    hub = vclusternet.ClusterNet(3, tmp_path)
    h0 = " ".join(hub.qemu_args(0))
    assert h0.count("hubid=0") == 3 and "net-1.sock" in h0 and "net-2.sock" in h0
    assert "vhpc.ip=10.77.0.3/24" in hub.kernel_args(2)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_orphans_of_a_dead_vhpc_are_removed_and_reported(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    dead = tmp_path / f"vhpc-vcluster-{_dead_pid()}-123-abc"
    dead.mkdir()
    (dead / "net-1.sock").write_text("")
    dead_shm = shm / f"vhpc-ivshmem-{_dead_pid()}-456-abc"
    dead_shm.write_bytes(b"\0" * 16)
    me = os.getpid()
    mine = tmp_path / f"vhpc-vcluster-{me}-{start_ticks(me)}-xyz"
    mine.mkdir()
    found = vclusternet.reap_orphans(tmp_path, shm)
    assert not dead.exists() and not dead_shm.exists() and mine.exists()
    assert len(found) == 2 and all("orphaned" in f for f in found)


def test_bad_vcluster_options_are_one_line_errors():
    with pytest.raises(SpecError, match="unknown option"):
        from_cli(["pingpong"], ["vcluster:vm=2"])
    spec = from_cli(["pingpong"], ["vcluster:vms=2"])
    assert spec.baseline == "vcluster"  # no native: the only environment is the baseline
    with pytest.raises(SpecError, match="vms: Input should be greater than or equal to 1"):
        from_cli(["pingpong"], ["vcluster:vms=0"])
    with pytest.raises(SpecError, match="vms_per_node: Input should be greater than or equal to 1"):
        from_cli(["pingpong"], ["vcluster:vms_per_node=0"])
    with pytest.raises(SpecError, match="net: Input should be 'virtio' or 'ivshmem'"):
        from_cli(["pingpong"], ["vcluster:net=x"])


# ------------------------------------------------------------------ real guests (TCG here)


def _leftovers(pid: int | None = None) -> list[str]:
    """Work folders and shared-memory files of process ``pid`` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    mine = f"{vclusternet.WORK_PREFIX}{pid}-"
    return [str(p) for p in Path(tempfile.gettempdir()).glob(mine + "*")] + \
        [str(p) for p in vclusternet.SHM_DIR.glob(f"{vclusternet.SHM_PREFIX}{pid}-*")]


@pytest.fixture(scope="module")
def cluster():
    env = env_spec("vcluster", "vc", vms=2, vcpus=1, memory=512, net="ivshmem", accel="tcg").build()
    try:
        env.start()
        yield env
    finally:
        env.close()
    assert not _leftovers()


@pytest.mark.vm
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_pingpong_runs_across_two_guests(cluster, kernels_built, mpi):
    from vhpc.benchmarks import get
    from vhpc.benchmarks.base import RunContext, ensure_kernels

    bench = get("pingpong")
    # 4 KiB bandwidth messages: its 22 windows of 64 at 64 KiB (92 MB) took 3.5 s of a 9 s trial
    # over the guests' emulated link (26 MB/s under TCG); the payload is checked at any size
    params = bench.resolve({"iters": 5, "bw_size": 4096, "mpi": mpi})
    bindir = ensure_kernels(["vhpc-pingpong"], mpi)
    argv = bench.command(params, RunContext(bindir, cluster.total_ranks))
    r = cluster.run(argv, timeout=150)
    if r.timed_out and mpi == "mpich":
        # Hydra's launch across the guests hung once in ~10 full-suite runs under TCG (cause
        # not found; docs/vcluster.md): one retry, and the retry must succeed
        r = cluster.run(argv, timeout=150)
    assert r.ok, (r.stdout, r.stderr, r.error)
    samples = bench.parse(params, r.stdout, r.stderr, r.returncode)
    assert samples and all(s.valid for s in samples)  # the payload check passed
    ranks = r.applied.ranks
    assert [(x["rank"], x["guest"]) for x in ranks] == [(0, "vhpc-vm0"), (1, "vhpc-vm1")]
    for x in ranks:  # host CPU of the vCPU the rank ran on, inside that VM's planned pins
        assert x["host_cpus_allowed"] == list(cluster.placements[x["vm"]].vcpu_pins[x["vcpu"]])
    assert r.applied.mismatches == []


@pytest.mark.vm
def test_guests_reach_each_other_only_on_the_private_segment(cluster):
    g0 = cluster.members[0].guest

    def sh(script: str) -> dict:
        return g0.request("run", 60, argv=["sh", "-c", script], env={}, timeout=30)

    cluster.resume()  # as a trial does: the cluster leaves its booted guests paused
    try:
        _reach(sh)
    finally:
        cluster.pause()


def _reach(sh) -> None:
    """vm0's view of the segment, through ``sh`` (a shell command run in vm0)."""
    # vm1 answers vm0 by the name MPI launchers use and by its segment address
    for target in ("vhpc-vm1", "10.77.0.2"):
        r = sh(f"busybox ping -c 1 -W 10 {target}")
        assert r["rc"] == 0 and "1 packets received" in r["stdout"], (target, r)
    # an address of the segment no guest has gets no answer, and one outside the segment
    # (the documentation range, RFC 5737) has no route at all: no default route, no user-mode
    # network reaching the host
    r = sh("busybox ping -c 1 -W 2 10.77.0.99")
    assert r["rc"] != 0 and "0 packets received" in r["stdout"], r
    r = sh("busybox ping -c 1 -W 2 192.0.2.1")
    assert r["rc"] != 0 and "unreachable" in (r["stdout"] + r["stderr"]).lower(), r


@pytest.mark.vm
def test_campaign_records_ranks_in_two_guests_and_cleans_up(tmp_path, kernels_built, no_qemu_leak):
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "vhpc.cli", "compare", "-b", "pingpong:iters=5,bw_size=4096",
           "-e", "vcluster:vms=2,vcpus=1,memory=512,accel=tcg", "--repeats", "1", "--warmup", "0",
           "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=900)
    done = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads(next(out.glob("*/results.json")).read_text())
    (entry,) = doc["rank_placement"]
    assert {r["guest"] for r in entry["ranks"]} == {"vhpc-vm0", "vhpc-vm1"}
    assert any(s["metric"] == "latency_us" for s in doc["samples"])
    # the CLI's work folders and shared memory (named after its pid) are gone; other
    # processes' (another xdist worker's cluster, say) are not this test's business
    assert _leftovers(proc.pid) == []


def _ivshmem_trial(env_run, bindir, **params):
    from vhpc.benchmarks import get
    from vhpc.benchmarks.base import RunContext

    bench = get("ivshmem-pingpong")
    p = bench.resolve({"max_size": 65536, "iters": 100, "iters_large": 10, "window": 8, **params})
    r = env_run(bench.command(p, RunContext(bindir, 2)))
    return r, bench.parse(p, r.stdout, r.stderr, r.returncode)


def test_ivshmem_pingpong_natively_over_posix_shm(kernels_built):
    from vhpc.environments.native.environment import NativeEnvironment

    with NativeEnvironment("native") as env:
        r, samples = _ivshmem_trial(lambda argv: env.run(argv, timeout=120), kernels_built)
    assert r.ok, r.stderr
    assert "over shm" in r.stdout and "data check: passed" in r.stdout
    names = {s.metric for s in samples}
    assert {"lat_8", "bw_8", "lat_65536", "bw_65536"} <= names
    assert all(s.valid and s.value > 0 for s in samples)
    assert not list(Path("/dev/shm").glob("vhpc-ivpp-*"))  # the shm object is unlinked


@pytest.mark.vm
def test_ivshmem_pingpong_between_two_guests_validates_its_data(cluster, kernels_built):
    r, samples = _ivshmem_trial(lambda argv: cluster.run(argv, timeout=300), kernels_built)
    assert r.ok, (r.stdout, r.stderr, r.error)
    assert "over ivshmem" in r.stdout and "data check: passed" in r.stdout
    assert all(s.valid and s.value > 0 for s in samples)
    assert {x["guest"] for x in r.applied.ranks} == {"vhpc-vm0", "vhpc-vm1"}
    assert cluster.net.shm_path.exists()  # the region lives as long as the cluster ...
    # ... and the module fixture checks it is gone after close()


def test_partition_study_compares_layouts_with_the_same_total_ranks():
    from vhpc.campaign import studies

    spec = studies.build("partition", topology.from_synthetic("pack:2 numa:1 l3:1 core:4 pu:1"), [])
    envs = {e.name: e.options.given() for e in spec.environments}
    assert envs["one-vm"] == {"vcpus": 8, "policy": "span:2"}
    assert envs["vm-per-socket"]["vms"] * envs["vm-per-socket"]["vcpus"] == 8
    assert envs["2-vms-per-socket"]["vms"] * envs["2-vms-per-socket"]["vcpus"] == 8
    assert envs["cross-vm"]["ranks_per_vm"] == 1 and "native" in envs
    assert all(o.get("net") == "ivshmem" for n, o in envs.items() if "vms" in o)
    names = {b.name for b in spec.benchmarks}
    assert {"npb-cg", "npb-mg", "npb-ft", "npb-is", "pingpong", "ivshmem-pingpong"} <= names
    assert all(b.params["ranks"] == 8 for b in spec.benchmarks if b.name.startswith("npb"))
    assert studies.note("partition", topology.from_synthetic("pack:2 numa:1 l3:1 core:4 pu:1")) is None


def test_partition_study_on_one_socket_says_what_it_reduces_to():
    from vhpc.campaign import studies

    topo = topology.from_synthetic("pack:1 numa:1 l3:1 core:2 pu:1")
    spec = studies.build("partition", topo, [])
    assert [e.name for e in spec.environments] == ["native", "one-vm", "2-vms-per-socket"]
    assert "same as one VM over all sockets" in studies.note("partition", topo)
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "study", "list"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "partition" in r.stdout


@pytest.mark.vm
def test_npb_mpi_kernel_verifies_across_two_guests(cluster, kernels_built):
    from vhpc.benchmarks import get
    from vhpc.benchmarks.base import RunContext

    bench = get("npb-cg")
    params = bench.resolve({"variant": "mpi", "class": "S", "ranks": 2})
    r = cluster.run(bench.command(params, RunContext(kernels_built, cluster.total_ranks)),
                    bench.environ(params, RunContext(kernels_built, cluster.total_ranks)),
                    timeout=600)
    assert r.ok, (r.stdout[-2000:], r.stderr[-2000:], r.error)
    samples = bench.parse(params, r.stdout, r.stderr, r.returncode)
    assert samples and all(s.valid for s in samples)  # NPB's own verification passed
    assert {x["guest"] for x in r.applied.ranks} == {"vhpc-vm0", "vhpc-vm1"}


@pytest.mark.vm
def test_three_guests_talk_through_vm0s_hub(no_qemu_leak):
    env = env_spec("vcluster", "hub", vms=3, vcpus=1, memory=384, policy="float", accel="tcg").build()
    try:
        r = env.run(["mpirun.openmpi", "--allow-run-as-root", "-np", "3", "hostname"], timeout=300)
        assert r.ok, (r.stdout, r.stderr, r.error)
        assert sorted(r.stdout.split()) == ["vhpc-vm0", "vhpc-vm1", "vhpc-vm2"]
        assert [(x["rank"], x["guest"]) for x in r.applied.ranks] == [
            (0, "vhpc-vm0"), (1, "vhpc-vm1"), (2, "vhpc-vm2")]
        net = env.net
    finally:
        env.close()
    assert not net.workdir.exists()


@pytest.mark.vm
def test_pause_stops_every_guest_of_the_cluster(cluster):
    cluster.pause()
    try:
        assert [m.guest.qmp.cmd("query-status")["status"] for m in cluster.members] == ["paused"] * 2
    finally:
        cluster.resume()
    assert [m.guest.qmp.cmd("query-status")["status"] for m in cluster.members] == ["running"] * 2


# last in the module: it kills the module cluster's guests (the fixture's close() then checks
# that the cluster's work folder and shared memory are gone); a cluster of its own cost two
# more TCG boots
@pytest.mark.vm
def test_guest_failure_fails_the_trial_and_close_removes_everything(cluster, no_qemu_leak):
    import threading

    pids = [m.guest.pid for m in cluster.members]
    victim = cluster.members[0].guest.pid  # guest 0 (the launcher's) dies under the job
    threading.Timer(8.0, os.kill, (victim, signal.SIGKILL)).start()
    r = cluster.run(["mpirun.openmpi", "--allow-run-as-root", "-np", "2", "sleep", "60"],
                    timeout=120)
    assert not r.ok and "guest failed" in (r.error or "")
    assert all(m.guest is None for m in cluster.members)  # the next trial boots all afresh
    assert not [p for p in pids if Path(f"/proc/{p}/cmdline").exists()
                and b"qemu" in Path(f"/proc/{p}/cmdline").read_bytes()]
