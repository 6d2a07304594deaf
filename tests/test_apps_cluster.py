"""A custom MPI application (Debian's lmp, 2 ranks) across nodes and guests: as an
``srun --mpi=pmix`` job step over 2 Slurm nodes of the test cluster (tests/cluster/up), each
rank's node read back; and (VHPC_VM_TESTS=1: guests boot for minutes under TCG) across a
vcluster of 2 one-vCPU guests, one rank per guest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import ROOT, require_tool, slurm_nodes
from vhpc.campaign import execute as campaign
from vhpc.spec import parse as spec
from vhpc.store import Store

#: 500 atoms, 50 steps: seconds natively, about a minute in a TCG guest
LJ = (ROOT / "docs" / "examples" / "in.lj").read_text().replace(
    "block 0 10 0 10 0 10", "block 0 5 0 5 0 5").replace("run             100", "run 50")


def _file(folder: Path, environments: str, extra: str = "") -> Path:
    (folder / "in.lj").write_text(LJ)
    f = folder / "c.yaml"
    f.write_text(
        f"repeats: 1\nwarmup: 0\nbenchmarks: [lj]\nenvironments: {environments}\n{extra}"
        "custom:\n  - name: lj\n    command: lmp -in in.lj -log none\n    mpi: {ranks: 2}\n"
        "    inputs: [in.lj]\n    metrics:\n"
        "      - {name: steps_per_s, regex: '([0-9.]+) timesteps/s', direction: higher}\n"
        "    check: {name: etotal, regex: '^\\s+50(?:\\s+\\S+){3}\\s+(\\S+)', rtol: 1.0e-4}\n")
    return f


@pytest.fixture(scope="module")
def cluster2(tmp_path_factory):
    yield from slurm_nodes(tmp_path_factory, 2)


def test_custom_lmp_over_two_slurm_nodes(cluster2, tmp_path, monkeypatch):
    require_tool("lmp")
    monkeypatch.setenv("SLURM_CONF", cluster2["SLURM_CONF"])
    s = spec.from_file(_file(tmp_path, "[native]", "executor: slurm:nodes=2\n"))
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    (t,) = store.trials(cid)
    assert t.status == "done" and t.error is None, (t.error, (t.stderr or "")[-2000:])
    assert "on 2 procs for 50 steps with 500 atoms" in t.stdout
    assert [(r["rank"], r["node"]) for r in t.applied.ranks] == [(0, "vhpc1"), (1, "vhpc2")]
    assert t.applied.launcher.startswith("srun --mpi=pmix --nodes=2")


@pytest.mark.skipif(os.environ.get("VHPC_VM_TESTS") != "1",
                    reason="boots 2 guests for minutes under TCG: VHPC_VM_TESTS=1")
def test_custom_lmp_one_rank_per_guest(tmp_path_factory, no_qemu_leak, monkeypatch):
    require_tool("lmp")
    require_tool("qemu-system-x86_64")
    # guests do not see the host's /tmp (their own tmpfs): inputs beside the checkout
    folder = Path(os.environ.get("VHPC_TEST_INPUTS", ROOT / ".pytest_cache" / "apps-vcluster"))
    folder.mkdir(parents=True, exist_ok=True)
    f = _file(folder, "[native, {vcluster: {vms: 2, vcpus: 1, boot_timeout: 400}}]")
    s = spec.from_file(f)
    store = Store(tmp_path_factory.mktemp("store") / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    t = [t for t in store.trials(cid) if t.environment == "vcluster"][0]
    assert t.status == "done", t.error
    assert [(r["rank"], r["vm"]) for r in t.applied.ranks] == [(0, 0), (1, 1)]
    assert all(o.valid for o in store.observations(cid))  # same energy as natively
