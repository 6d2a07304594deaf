"""The slurm executor against a real single-host Slurm cluster (tests/cluster/up)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import require_tool
from vhpc.store import Store

CLI = [sys.executable, "-m", "vhpc.cli"]


def _env(cluster) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": cluster["SLURM_CONF"]}


def _sacct(cluster, job: str) -> dict[str, dict[str, str]]:
    """sacct's rows of ``job`` and its steps, by JobID.  The accounting database outlives each
    test cluster while job ids start again at 1 in every new one, so an id can name an older
    cluster's job too: the latest submitted row of each JobID is this cluster's."""
    out = subprocess.run(["sacct", "-n", "-P", "-j", job, "-o",
                          "JobID,JobName,State,NodeList,NTasks,Submit"],
                         capture_output=True, text=True, env=_env(cluster), check=True).stdout
    rows = sorted((ln.split("|") for ln in out.splitlines() if ln.strip()), key=lambda r: r[5])
    return {r[0]: dict(zip(("name", "state", "nodes", "ntasks"), r[1:5])) for r in rows}


def test_native_and_vm_trials_as_job_steps(slurm_cluster, tmp_path, kernels_built, no_qemu_leak):
    campaign = tmp_path / "c.yaml"
    campaign.write_text("executor: slurm\nrepeats: 1\nwarmup: 0\nbenchmarks:\n"
                        "  - stream: {n: 100000}\nenvironments:\n  - native\n"
                        "  - vm: {vcpus: 1, memory: 512}\n")
    out = subprocess.run(CLI + ["run", str(campaign), "--no-report", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=_env(slurm_cluster), timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    store = Store(tmp_path / "vhpc.db")
    cid = store.campaigns()[0]["id"]
    trials = store.trials(cid)
    assert {t.environment for t in trials} == {"native", "vm"}
    jobs = {t.applied.slurm["job_id"] for t in trials}
    assert len(jobs) == 1  # one allocation, each trial a step in it
    job = jobs.pop()
    acct = _sacct(slurm_cluster, job)
    # the job is vhpc's, named for the campaign (squeue shows the name while it runs); once
    # trials got faster, this cluster's slurmdbd recorded it as "allocation" every time here
    # (Debian 12's Slurm 22.05: its first step reaches the database before the job's start
    # record), so accounting's name alone cannot tell
    assert acct[job]["name"] in (f"vhpc-{cid}", "allocation"), acct
    for t in trials:
        assert t.status == "done"
        step = f"{job}.{t.applied.slurm['step_id']}"
        assert acct[step]["state"] == "COMPLETED" and acct[step]["nodes"] == "vhpc1"
        assert t.diagnostics.sacct["JobID"] == step
    vm = next(t for t in trials if t.environment == "vm")
    assert vm.applied.vcpus and vm.applied.accel in ("kvm", "tcg")  # booted on the node
    assert store.environments(cid)["vm"].fingerprint["slurm_node"] == "vhpc1"


def test_a_pending_allocation_is_reported_then_granted(slurm_cluster, tmp_path):
    """With the only node held by another job, vhpc's allocation pends: vhpc says what it
    waits for (squeue: nodes, partition, reason) and runs once the holder is gone."""
    env = _env(slurm_cluster)
    hold = subprocess.run(["salloc", "--no-shell", "--exclusive", "--nodes=1", "--time=5",
                           "--job-name=holder"], capture_output=True, text=True, env=env,
                          timeout=60)
    holder = hold.stderr.split("Granted job allocation ")[1].split()[0]
    campaign = tmp_path / "c.yaml"
    campaign.write_text("executor: slurm\nrepeats: 1\nwarmup: 0\nbenchmarks: [probe]\n"
                        "environments: [native]\ncustom:\n  - name: probe\n"
                        "    command: [sh, -c, 'echo v 1']\n    metrics:\n"
                        "      - {name: v, regex: 'v (\\d+)', unit: '1', higher_is_better: true}\n")
    proc = subprocess.Popen(CLI + ["run", str(campaign), "--no-report", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        seen = ""
        deadline = time.monotonic() + 120
        while "waiting for" not in seen and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen += line
        assert "waiting for 1 node in partition" in seen, seen
        subprocess.run(["scancel", holder], env=env, check=True, timeout=60)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (seen + err)[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["scancel", holder], env=env, timeout=60)


def test_mpi_job_over_two_tasks_through_srun(slurm_cluster, tmp_path, kernels_built):
    out = subprocess.run(CLI + ["compare", "--executor", "slurm:nodes=1", "-b", "pingpong",
                                "-e", "native", "--repeats", "1", "--warmup", "0", "--no-report",
                                "--out", str(tmp_path)],
                         capture_output=True, text=True, env=_env(slurm_cluster), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    store = Store(tmp_path / "vhpc.db")
    (trial,) = store.trials(store.campaigns()[0]["id"])
    assert trial.status == "done" and trial.applied.launcher.startswith("srun --mpi=pmix")
    assert "--cpu-bind=cores" in trial.applied.launcher  # bound as mpirun --bind-to core
    assert trial.applied.mpi_ranks == 2
    slurm = trial.applied.slurm
    row = _sacct(slurm_cluster, slurm["job_id"])[f"{slurm['job_id']}.{slurm['step_id']}"]
    assert row["ntasks"] == "2" and row["name"] == "vhpc-pingpong" and row["state"] == "COMPLETED"


def test_killed_allocation_then_resume_loses_and_repeats_nothing(slurm_cluster, tmp_path,
                                                                 kernels_built):
    env = _env(slurm_cluster)
    proc = subprocess.Popen(CLI + ["compare", "--executor", "slurm", "-b", "stream:n=2000000",
                                   "-e", "native", "--repeats", "8", "--warmup", "0",
                                   "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    db = tmp_path / "vhpc.db"
    deadline = time.monotonic() + 300
    done = []
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        if db.exists():
            store = Store(db)
            camps = store.campaigns()
            done = store.trials(camps[0]["id"], "done") if camps else []
            store.close()
            if len(done) >= 2:
                break
    assert len(done) >= 2, "the campaign did not get going"
    job = done[0].applied.slurm["job_id"]
    subprocess.run(["scancel", job], env=env, check=True)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--resume" in lines[0], err
    store = Store(db)
    cid = store.campaigns()[0]["id"]
    before = {t.id: (t.started, t.applied.slurm["job_id"]) for t in store.trials(cid, "done")}
    assert 2 <= len(before) < 8
    out = subprocess.run(CLI + ["compare", "--resume", cid, "--no-report", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    trials = store.trials(cid)
    assert len(trials) == 8 and all(t.status == "done" for t in trials)
    for t in trials:
        if t.id in before:  # kept, not re-run
            assert (t.started, t.applied.slurm["job_id"]) == before[t.id]
        else:  # run in the new allocation
            assert t.applied.slurm["job_id"] != job
    obs = store.observations(cid)
    assert len(obs) == 8 * 4  # four STREAM metrics per trial, none lost, none twice
    assert len({(o.trial_id, o.metric) for o in obs}) == len(obs)


@pytest.mark.parametrize("value", ["slurm:nodes=zero", "pbs", "slurm:queue=batch"])
def test_bad_executor_is_one_line_error(tmp_path, value):
    out = subprocess.run(CLI + ["compare", "--executor", value, "-b", "stream", "-e", "native",
                                "--out", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "executor" in lines[0]


def test_scaling_study_runs_every_node_count_native_and_one_guest_per_node():
    from vhpc.campaign import studies
    from vhpc import topology
    from vhpc.campaign.studies import StudyError

    topo = topology.from_synthetic("pack:2 numa:1 l3:1 core:4 pu:1")
    spec = studies.build("scaling", topo, [], executor="slurm:nodes=6,partition=batch")
    ranks = sorted(b.params["ranks"] for b in spec.benchmarks if b.name == "hpccg")
    assert ranks == [1, 2, 3, 4, 6]  # k = 1..4, then powers of two, and the allocation's 6
    colls = {(b.params["op"], b.params["ranks"]) for b in spec.benchmarks if b.name == "osu-coll"}
    assert colls == {(op, k) for op in ("allreduce", "barrier", "bcast", "alltoall")
                     for k in (2, 3, 4, 6)}  # a collective needs two ranks
    # seed 004 Fig. 1(a): ping-pong latency against message size, between two nodes
    assert [b.params for b in spec.benchmarks if b.name == "osu-latency"] == [
        {"max_size": 65536, "iters": 200, "iters_large": 50}]
    # parsed once, typed: the stored text reads back as the same executor
    assert (spec.executor.kind, spec.executor.given()) == ("slurm", {"partition": "batch",
                                                                     "nodes": 6})
    assert spec.model_dump()["executor"] == "slurm:partition=batch,nodes=6"
    assert spec.study == "scaling"
    native, vm = spec.environments
    assert (native.kind, vm.kind) == ("native", "vcluster")
    assert (vm.options.vms, vm.options.vms_per_node, vm.options.ranks_per_vm) == (6, 1, 1)
    assert str(studies.build("scaling", topo, []).executor) == "slurm"  # the cluster's default
    with pytest.raises(StudyError, match="--executor slurm:nodes=N"):
        studies.build("scaling", topo, [], executor="local")
    # the user's own -b items run at every node count, with ranks_per_node ranks per node
    spec = studies.build("scaling", topo, ["hpccg:nx=8", "osu-coll:op=bcast", "stream"],
                         executor="slurm:nodes=3,ranks_per_node=2")
    got = sorted((b.name, b.params.get("ranks")) for b in spec.benchmarks)
    assert got == [("hpccg", 2), ("hpccg", 4), ("hpccg", 6), ("osu-coll", 2), ("osu-coll", 4),
                   ("osu-coll", 6), ("stream", None)]
    assert spec.environments[1].options.vcpus == 2


def test_no_slurm_controller_is_one_line_error_before_anything_is_stored(tmp_path):
    require_tool("salloc")  # make test installs Slurm: its absence is another test's error
    conf = tmp_path / "slurm.conf"  # a controller that does not exist
    conf.write_text("ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n"
                    "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\nMessageTimeout=2\n")
    out = subprocess.run(CLI + ["compare", "--executor", "slurm", "-b", "stream", "-e", "native",
                                "--out", str(tmp_path)], capture_output=True, text=True,
                         env={**os.environ, "SLURM_CONF": str(conf)}, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and ("Slurm does not answer" in lines[0]
                               or "controller is unreachable" in lines[0]), out.stderr
    assert Store(tmp_path / "vhpc.db").campaigns() == []


def _fake_slurm(folder, free_vhpc2: int) -> dict[str, str]:
    """Environment whose PATH has a fake ``sinfo`` (nodes vhpc1 and vhpc2, 2 CPUs each, idle),
    ``srun`` that records its arguments, runs the hugepage script it is given as node vhpc1
    (this host's real sysfs) and answers for vhpc2 with ``free_vhpc2`` free 2 MiB pages on
    each of two NUMA nodes (plus a node not asked for, and junk), and salloc, sacct, squeue
    and scancel that fail (nothing may be allocated)."""
    bin_ = folder / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "sinfo").write_text('#!/bin/sh\necho "vhpc1 debug* 2 idle"\necho "vhpc2 debug* 2 idle"\n')
    (bin_ / "srun").write_text(
        f'#!/bin/sh\necho "$@" > {folder}/srun.args\n'
        'for last; do :; done\nSLURMD_NODENAME=vhpc1 sh -c "$last"\n'
        'for n in 0 1; do echo "vhpc2 /sys/devices/system/node/node$n/hugepages/'
        f'hugepages-2048kB/free_hugepages {free_vhpc2}"; done\n'
        'echo "vhpc2 end"\necho "vhpc9 /sys/devices/system/node/node0/hugepages/'
        'hugepages-2048kB/free_hugepages 99999"\necho garbage\n')
    for name in ("salloc", "sacct", "squeue", "scancel"):
        (bin_ / name).write_text("#!/bin/sh\nexit 1\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}


def test_guest_hugepages_are_checked_on_each_node_before_anything_runs(tmp_path):
    """A guest backed by 2 MiB pages under --executor slurm: each node's free pages are read
    on the node (one srun step over the partition's usable nodes) and a node short of them is
    refused in one line naming it, at --dry-run and before a campaign is stored."""
    from vhpc.host.facts import read_hugepages

    here = sum(s.get(2048, 0) for s in read_hugepages().values())  # vhpc1 is this host
    memory = max(256, (here + 128) * 2)  # MiB: more than this host has free
    need = memory // 2
    item = ["-b", "stream", "-e", f"vm:vcpus=1,memory={memory},backing=2m"]

    def vhpc(env, nodes, *extra):
        return subprocess.run(CLI + ["compare", "--executor", f"slurm:nodes={nodes}", *item,
                                     *extra, "--out", str(tmp_path / "out")],
                              capture_output=True, text=True, env=env, timeout=120)

    short = _fake_slurm(tmp_path / "short", need // 2 - 1)  # vhpc2: a page short of the need
    for extra in (["--dry-run"], ["--repeats", "1"]):
        out = vhpc(short, 1, *extra)
        assert out.returncode == 2, out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith("vhpc: error: executor slurm:nodes=1: guest vm "), line
        assert (f"needs {need} free 2 MiB hugepages on each of 1 node(s), but node vhpc1 has "
                f"{here} (and 1 more node(s) too few)") in line, line
        assert "backing=4k" in line and "vhpc9" not in line
    assert not (tmp_path / "out" / "vhpc.db").exists() or \
        Store(tmp_path / "out" / "vhpc.db").campaigns() == []
    args = (tmp_path / "short" / "srun.args").read_text()
    assert "--nodelist=vhpc1,vhpc2" in args and "--ntasks-per-node=1" in args
    enough = _fake_slurm(tmp_path / "enough", need // 2)  # vhpc2 holds the guest
    assert vhpc(enough, 1, "--dry-run").returncode == 0  # one node is enough
    out = vhpc(enough, 2, "--dry-run")
    assert out.returncode == 2 and "on each of 2 node(s), but node vhpc1 has" in out.stderr


def test_a_node_without_free_hugepages_is_named_by_the_dry_run(slurm_cluster, tmp_path):
    """The same check on a real node: srun reads vhpc1's sysfs there, and a guest asking for
    more 2 MiB pages than it has free is refused at --dry-run naming vhpc1."""
    from vhpc.host.facts import read_hugepages

    here = sum(s.get(2048, 0) for s in read_hugepages().values())  # vhpc1 runs on this host
    memory = max(256, (here + 128) * 2)
    out = subprocess.run(CLI + ["compare", "--executor", "slurm:nodes=1", "-b", "stream", "-e",
                                f"vm:vcpus=1,memory={memory},backing=2m", "--dry-run",
                                "--out", str(tmp_path)], capture_output=True, text=True,
                         env=_env(slurm_cluster), timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert f"needs {memory // 2} free 2 MiB hugepages on each of 1 node(s), but node vhpc1 " \
           f"has {here}" in line, line
