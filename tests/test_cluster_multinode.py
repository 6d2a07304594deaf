"""A three-node Slurm cluster on this one host (tests/cluster/up --nodes 3): one slurmd per node,
each at its own loopback address; job steps and an Open MPI job (srun --mpi=pmix) over all
three nodes, sacct listing them, and tests/cluster/down leaving no daemon behind."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, slurm_nodes

NODES = ["vhpc1", "vhpc2", "vhpc3"]

HELLO = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int rank, size, sum = 0, mine;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mine = rank + 1;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char *node = getenv("SLURMD_NODENAME");
  printf("rank %d size %d node %s sum %d\n", rank, size, node ? node : "?", sum);
  MPI_Finalize();
  return 0;
}
"""


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    yield from slurm_nodes(tmp_path_factory, 3, mpicc="libopenmpi-dev")


def _env(cluster) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": cluster["SLURM_CONF"]}


def _run(cluster, *cmd: str, timeout: int = 120) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(cluster), timeout=timeout)
    assert out.returncode == 0, f"{' '.join(cmd)}: {out.stderr[-2000:]}"
    return out.stdout


def _nodes_file(cluster) -> dict[str, tuple[str, int, set[int]]]:
    """name -> (address, port, CPUs) from the nodes file up writes."""
    rows = {}
    for line in (Path(cluster["VHPC_CLUSTER_DIR"]) / "nodes").read_text().splitlines():
        name, addr, port, cpus = line.split()
        rows[name] = (addr, int(port), {int(c) for c in cpus.split(",")})
    return rows


def _hostnames(cluster, nodelist: str) -> list[str]:
    return _run(cluster, "scontrol", "show", "hostnames", nodelist).split()


def test_three_nodes_each_with_own_address_port_and_cpus(cluster3):
    assert cluster3["VHPC_CLUSTER_NODES"] == "3"
    states = dict(ln.split() for ln in _run(cluster3, "sinfo", "-h", "-N", "-o", "%N %T").splitlines())
    assert sorted(states) == NODES and set(states.values()) == {"idle"}
    show = _run(cluster3, "scontrol", "-o", "show", "node")
    declared = {}
    for line in show.splitlines():
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        declared[f["NodeName"]] = (f["NodeAddr"], int(f["Port"]), int(f["CPUTot"]))
    files = _nodes_file(cluster3)
    assert sorted(declared) == NODES == sorted(files)
    assert [declared[n][0] for n in NODES] == ["127.0.0.11", "127.0.0.12", "127.0.0.13"]
    assert len({declared[n][1] for n in NODES}) == 3  # one slurmd port each
    host = os.sched_getaffinity(0)
    for n in NODES:
        assert declared[n][:2] == files[n][:2]
        assert declared[n][2] <= len(files[n][2]) and files[n][2] <= host
    if len(host) >= 3:  # enough CPUs: a disjoint split, each node declares exactly its own
        cpu_sets = [files[n][2] for n in NODES]
        assert sum(map(len, cpu_sets)) == len(set().union(*cpu_sets))
        assert all(declared[n][2] == len(files[n][2]) for n in NODES)
    else:  # fewer CPUs than nodes: each declares one, the host is oversubscribed (documented)
        assert all(declared[n][2] == 1 for n in NODES)
    for n in NODES:  # one spool, pid file and log per node
        d = Path(cluster3["VHPC_CLUSTER_DIR"])
        assert (d / "spool" / n).is_dir() and (d / f"slurmd-{n}.log").is_file()
        assert Path(f"/proc/{(d / f'slurmd-{n}.pid').read_text().strip()}").exists()


def test_steps_over_three_nodes(cluster3):
    out = _run(cluster3, "srun", "-N3", "-n3", "-l", "--job-name=mn-hostname", "bash", "-c",
               'echo "$SLURMD_NODENAME $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"')
    rows = {}
    for line in out.splitlines():
        task, node, host, cpus = line.replace(":", " ", 1).split()
        rows[node] = cpus
    assert sorted(rows) == NODES  # one task on each node (all on this host, as `hostname` says)
    files = _nodes_file(cluster3)
    for node, allowed in rows.items():  # a step runs on its node's CPUs (the slurmd's affinity)
        cpus = set()
        for part in allowed.split(","):
            lo, _, hi = part.partition("-")
            cpus |= set(range(int(lo), int(hi or lo) + 1))
        assert cpus == files[node][2]


def test_open_mpi_over_three_nodes_with_pmix(cluster3, tmp_path):
    src = tmp_path / "hello.c"
    src.write_text(HELLO)
    subprocess.run(["mpicc", "-O2", "-o", str(tmp_path / "hello"), str(src)], check=True)
    out = _run(cluster3, "srun", "-N3", "-n3", "--mpi=pmix", "--job-name=mn-mpi",
               str(tmp_path / "hello"), timeout=180)
    ranks = sorted(re.findall(r"rank (\d) size (\d) node (\S+) sum (\d+)", out))
    assert [r[0] for r in ranks] == ["0", "1", "2"], out
    assert {r[1] for r in ranks} == {"3"} and {r[3] for r in ranks} == {"6"}  # Allreduce ran
    assert sorted(r[2] for r in ranks) == NODES
    state = Path(cluster3["VHPC_CLUSTER_DIR"])
    for n in NODES:  # each node's own PMIx client tmpdir, emptied after the step
        assert (state / "tmp" / n).is_dir() and not any((state / "tmp" / n).iterdir())
        assert "Cannot create client cli tmpdir" not in (state / f"slurmd-{n}.log").read_text()


def test_sacct_lists_three_distinct_nodes_per_step(cluster3):
    deadline = time.monotonic() + 60
    while True:  # accounting reaches slurmdbd asynchronously
        out = _run(cluster3, "sacct", "-n", "-P", "-X", "--name=mn-hostname,mn-mpi",
                   "-o", "JobID,JobName,State")
        jobs = {r.split("|")[1]: r.split("|") for r in out.splitlines() if r.strip()}
        steps = {}
        for name, (job, _, _) in jobs.items():
            rows = _run(cluster3, "sacct", "-n", "-P", "-j", job, "-o", "JobID,NodeList,NTasks,State")
            steps[name] = [r.split("|") for r in rows.splitlines() if r.startswith(f"{job}.0|")]
        if len(jobs) == 2 and all(steps[n] and steps[n][0][3] == "COMPLETED" for n in steps):
            break
        assert time.monotonic() < deadline, f"sacct does not list both steps completed: {out}"
        time.sleep(1)
    for name in ("mn-hostname", "mn-mpi"):
        _, nodelist, ntasks, _ = steps[name][0]
        assert ntasks == "3" and sorted(set(_hostnames(cluster3, nodelist))) == NODES


def _holders(state: Path) -> dict[int, str]:
    """{pid: comm} of every process on the host that belongs to the cluster in ``state``,
    whatever started it: its command line names a path under ``state`` (sshd -f, mysqld
    --datadir), its environment names the cluster's slurm.conf (slurmd hands it to its step
    daemons), or it holds a file or working directory under ``state`` open (each Slurm daemon's
    log and pid file).  The calling process is left out."""
    prefix = str(state)
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid == os.getpid():
            continue
        try:
            comm = (proc / "comm").read_text().strip()
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
            links = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
            links.append(os.readlink(proc / "cwd"))
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if prefix in cmdline or f"SLURM_CONF={prefix}/" in environ \
                or any(link == prefix or link.startswith(prefix + "/") for link in links):
            found[pid] = comm
    return found


def _refused(addr: str, port: int) -> bool:
    """Whether a TCP connection to ``addr``:``port`` is refused (nothing listens there)."""
    import socket

    try:
        socket.create_connection((addr, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_down_leaves_nothing(cluster3):
    """tests/cluster/down (docs/scale-out.md) ends every daemon up started, found by what they
    hold rather than by down's own pid files, frees each node's slurmd port, and removes the
    cluster's folder."""
    state = Path(cluster3["VHPC_CLUSTER_DIR"])
    nodes = _nodes_file(cluster3)
    before = _holders(state)
    comms = sorted(before.values())
    assert comms.count("slurmd") == 3 and {"slurmctld", "slurmdbd"} <= set(comms) \
        and {"mariadbd", "mysqld"} & set(comms), comms
    assert not any(_refused(addr, port) for addr, port, _ in nodes.values())
    subprocess.run([str(ROOT / "tests/cluster/down"), str(state)], check=True, timeout=120)
    left = _holders(state)
    assert not left, f"left running: {left}"
    assert all(_refused(addr, port) for addr, port, _ in nodes.values())
    assert not state.exists()
