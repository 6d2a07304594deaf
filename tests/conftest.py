"""Shared fixtures: built kernels, a store in a temp dir, and QEMU leak checks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def kernels_built() -> Path:
    """Build vhpc's C kernels (idempotent) and return the binary directory."""
    subprocess.run(["make", "-s", "-C", str(ROOT / "kernels")], check=True)
    return ROOT / "kernels" / "build"


def qemu_pids() -> set[int]:
    """Live (non-zombie) QEMU system-emulator processes on this host."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        if "qemu-system" in comm and rest.split()[0] != "Z":
            pids.add(int(stat.parent.name))
    return pids


@pytest.fixture
def no_qemu_leak():
    """Fail the test if it leaves a QEMU process behind."""
    before = qemu_pids()
    yield
    left = qemu_pids() - before
    assert not left, f"QEMU processes left behind: {left}"


def _cluster_up(tmp_factory, tools: dict[str, str], *args: str, **env) -> dict[str, str]:
    """Start tests/cluster/up ARGS (its real daemons) and return its KEY=VALUE lines; skip when
    a tool is missing, fail instead under CI=true (``make test`` installs them)."""
    import os
    import shutil

    missing = [f"{t} ({pkg})" for t, pkg in tools.items() if shutil.which(t) is None]
    if missing:
        msg = "missing: " + ", ".join(missing) + " — apt-get install them (make deps)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    state = tmp_factory.mktemp("cluster")
    out = subprocess.run([str(ROOT / "tests/cluster/up"), *args], capture_output=True, text=True,
                         env={**os.environ, "VHPC_CLUSTER_DIR": str(state), **env}, timeout=300)
    assert out.returncode == 0, f"tests/cluster/up failed: {out.stderr[-2000:]}"
    return dict(line.split(";")[0].split("=", 1) for line in out.stdout.splitlines() if "=" in line)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real OpenSSH server on a loopback port (tests/cluster/up, sshd only): VHPC_SSH_PORT,
    VHPC_SSH_IDENTITY, VHPC_SSH_CONFIG, VHPC_CLUSTER_DIR.  Stopped with tests/cluster/down."""
    info = _cluster_up(tmp_path_factory, {"/usr/sbin/sshd": "openssh-server",
                                          "ssh": "openssh-client"}, VHPC_CLUSTER_SLURM="0")
    yield info
    subprocess.run([str(ROOT / "tests/cluster/down"), info["VHPC_CLUSTER_DIR"]], check=True)


SLURM_TOOLS = {"slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "munged": "munge",
               "slurmdbd": "slurmdbd", "mariadbd": "mariadb-server", "srun": "slurm-client",
               "taskset": "util-linux"}


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real single-host, one-node (vhpc1) Slurm cluster with accounting (tests/cluster/up
    --nodes 1, Slurm only): SLURM_CONF, VHPC_CLUSTER_DIR.  Stopped with tests/cluster/down."""
    # VHPC_CLUSTER_MUNGE=shared: a munged already serving munge's standard socket (another
    # test cluster on this host) is used rather than refused.
    info = _cluster_up(tmp_path_factory, SLURM_TOOLS, "--nodes", "1", VHPC_CLUSTER_SSH="0",
                       VHPC_CLUSTER_MUNGE="shared")
    yield info
    subprocess.run([str(ROOT / "tests/cluster/down"), info["VHPC_CLUSTER_DIR"]], check=True)
