"""Every UNIX socket vhpc makes fits ``sun_path`` (107 bytes, unix(7)) whatever $TMPDIR is.
The sockets go to a short private folder: under a long $TMPDIR, QEMU would refuse the
guest's agent and QMP sockets ("Path must be less than 108 bytes") and every VM trial fail."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from vhpc.host import owned


@pytest.fixture
def long_tmpdir(tmp_path, monkeypatch) -> Path:
    """$TMPDIR (as :mod:`tempfile` reads it) set to a folder whose path alone is 100 bytes."""
    folder = tmp_path / ("t" * max(1, 100 - len(str(tmp_path)) - 1))
    folder.mkdir()
    assert len(str(folder)) >= 100
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _binds(path: Path) -> None:
    """Bind (as QEMU's server sockets do) and connect (as vhpc does) at ``path``."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        server.listen(1)
        client.connect(str(path))
    finally:
        client.close()
        server.close()
        path.unlink(missing_ok=True)


def _private_and_short(folder: Path, long_tmpdir: Path) -> None:
    assert not folder.is_relative_to(long_tmpdir), folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()


def test_a_guests_agent_and_qmp_sockets_fit_whatever_tmpdir(long_tmpdir):
    from vhpc.environments.vm.backends.base import SOCKETS
    from vhpc.environments.vm.backends.qemu import GuestConfig, QemuGuest

    guest = QemuGuest(GuestConfig())
    try:
        _private_and_short(guest.workdir, long_tmpdir)
        for name in SOCKETS:
            _binds(guest.workdir / name)
    finally:
        guest.release()
    assert not guest.workdir.exists()


def test_a_vclusters_link_sockets_fit_whatever_tmpdir(long_tmpdir):
    from vhpc.environments.vcluster.network import ClusterNet

    net = ClusterNet.create(64, ivshmem=False, shm_node=None)
    try:
        _private_and_short(net.workdir, long_tmpdir)
        for j in (1, 63):
            _binds(net.sock(j))
    finally:
        net.remove()


def test_a_short_tmpdir_is_kept(monkeypatch):
    """The temporary directory is left only when a socket would not fit there."""
    short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp"))  # pytest's tmp_path may be long
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    try:
        folder = owned.owned_socketdir("vhpc-guest-", 10)
        assert folder.parent == short
    finally:
        shutil.rmtree(short)


def test_a_dead_owners_socket_folder_in_the_short_base_is_reaped(long_tmpdir):
    """A folder a killed vhpc left in the short base is reaped at the next campaign's start
    (reap_all), as those in $TMPDIR are."""
    base = owned.socket_base("vhpc-guest-", 10)
    dead = Path(tempfile.mkdtemp(prefix="vhpc-guest-999999999-12345-", dir=base))
    assert dead.exists()
    lines = owned.reap_all()
    assert not dead.exists() and any(str(dead) in line for line in lines), lines


def test_ssh_connects_whatever_tmpdir(sshd, long_tmpdir, monkeypatch):
    """The ControlMaster's socket (ControlPath plus ssh's 17-character temporary suffix) fits:
    before, ssh refused the path and the environment could not connect."""
    from vhpc.environments.ssh.environment import SshEnvironment

    monkeypatch.setenv("VHPC_SSH_CONFIG", sshd["VHPC_SSH_CONFIG"])
    env = SshEnvironment("remote", "127.0.0.1", port=int(sshd["VHPC_SSH_PORT"]))
    try:
        env.connect()
        _private_and_short(Path(env._ctl), long_tmpdir)
        assert env.shell("echo ok").stdout.strip() == "ok"
    finally:
        env.close()
