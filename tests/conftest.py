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
    out = subprocess.run(["pgrep", "-f", "qemu-system"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


@pytest.fixture
def no_qemu_leak():
    """Fail the test if it leaves a QEMU process behind."""
    before = qemu_pids()
    yield
    left = qemu_pids() - before
    assert not left, f"QEMU processes left behind: {left}"
