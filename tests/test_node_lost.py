"""A node lost mid-campaign (issue 32): ``kill -9`` of one slurmd while a 3-node native MPI
campaign runs.  The trial in flight is stored failed naming the node, the campaign stops in one
line instead of burning its later trials against the dead node, and after the slurmd is back
``--resume`` runs exactly the trials that did not run: every planned trial stored once."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import slurm_nodes

from vhpc.store import Store

NODES = ["vhpc1", "vhpc2", "vhpc3"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # the test cluster's SlurmdTimeout (30 s): slurmctld counts a node with a dead slurmd down
    # only after it, and until then the MPI step in flight hangs in its PMIx exchange
    # (docs/scale-out.md).  10 s was tried: beside other workers' TCG guests a live node was
    # counted down and the allocation ended before any trial did
    yield from slurm_nodes(tmp_path_factory, 3)


def _slurmd(cluster, node: str) -> tuple[int, list[str]]:
    """(pid, command line) of ``node``'s slurmd."""
    pid = int((Path(cluster["VHPC_CLUSTER_DIR"]) / f"slurmd-{node}.pid").read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    return pid, [a.decode() for a in argv]


def _vhpc(cluster, out: Path, *args: str, timeout: float = 900):
    env = {**os.environ, "SLURM_CONF": cluster["SLURM_CONF"]}
    return subprocess.Popen([sys.executable, "-m", "vhpc.cli", *args, "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_killed_slurmd_fails_one_trial_names_the_node_and_resume_runs_the_rest(
        cluster, tmp_path, kernels_built):
    out = tmp_path / "out"
    bench = "osu-coll:op=allreduce,ranks=3,max_size=64,iters=200,iters_large=20"
    proc = _vhpc(cluster, out, "compare", "-b", bench, "-e", "native", "-e", "native:name=again",
                 "--repeats", "4", "--warmup", "0", "--executor", "slurm:nodes=3")
    db = out / "vhpc.db"
    deadline = time.monotonic() + 600
    done = 0
    while time.monotonic() < deadline and done < 1:  # let a trial finish first
        time.sleep(0.5)
        if db.exists():  # read-only, beside the campaign writing it
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as ro:
                    done = ro.execute("SELECT COUNT(*) FROM trials WHERE status='done'"
                                      ).fetchone()[0]
            except sqlite3.Error:  # the store is being created
                done = 0
        if proc.poll() is not None:
            stdout, stderr = proc.communicate()
            raise AssertionError(f"vhpc ended (exit {proc.returncode}) before the kill: "
                                 f"{stderr[-1500:]}")
    pid, argv = _slurmd(cluster, "vhpc2")
    os.kill(pid, signal.SIGKILL)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the campaign stopped in one line naming the node and how to continue
    lines = stderr.strip().splitlines()
    assert proc.returncode == 2, stdout[-2000:] + stderr[-2000:]
    assert "node vhpc2" in lines[-1] and "--resume" in lines[-1], lines[-1]
    store = Store(db)
    (camp,) = store.campaigns()
    cid = camp["id"]
    failed = store.trials(cid, "failed")
    assert len(failed) == 1 and "node vhpc2 lost" in (failed[0].error or ""), \
        [(t.status, t.error) for t in store.trials(cid)]
    planned = len(store.trials(cid))
    not_run = [t for t in store.trials(cid) if t.status not in ("done", "failed")]
    assert not_run, "the trials after the lost node ran anyway"
    # the node comes back (its slurmd restarted from the same command line) and resume runs
    # exactly the trials that did not run
    slurm_env = {**os.environ, "SLURM_CONF": cluster["SLURM_CONF"]}
    subprocess.Popen(argv, env=slurm_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True).wait(timeout=60)
    for _ in range(120):  # slurmctld takes the node back (ReturnToService=2) ...
        state = subprocess.run(["sinfo", "-h", "-n", "vhpc2", "-o", "%T"], capture_output=True,
                               text=True, env=slurm_env).stdout.strip()
        # ... and the stopped campaign's job is gone: a resume whose job started while the
        # restarted slurmd was still ending the old one hung once in a full make test (its
        # third step never launched on vhpc2, and slurmctld then found vhpc2 not responding)
        queued = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                                env=slurm_env).stdout.strip()
        if state == "idle" and not queued:
            break
        time.sleep(1)
    assert state == "idle" and not queued, (state, queued)
    resumed = _vhpc(cluster, out, "compare", "--resume", cid, "--no-report")
    r_out, r_err = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, r_out[-2000:] + r_err[-2000:]  # every trial it ran passed
    rows = Store(db).trials(cid)
    assert len(rows) == planned
    assert [t.status for t in rows].count("failed") == 1
    assert all(t.status == "done" for t in rows if t.id != failed[0].id)
    assert {t.seq for t in rows} == set(range(planned))
