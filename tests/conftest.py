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
