"""An installed vhpc runs its main job: the sdist and wheel built from this checkout,
the wheel installed into a fresh virtualenv outside it (no libvirt headers: ``pkg-config
--exists libvirt`` made false), a native campaign from an empty directory that builds the kernels
once into the per-user cache, and ``vm:backend=libvirt`` answered with one line naming the extra.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import require_tool

ROOT = Path(__file__).resolve().parents[1]
BUILD_MSG = "vhpc: building the kernels into"
#: what the fresh virtualenv does not borrow from the test run's (installed):
BORROW_NOT = ("vhpc", "__editable__", "libvirt", "_distutils_hack", "__pycache__")


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=900, **kw)


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """(venv bin dir, environment) of a fresh virtualenv holding the wheel, built with
    ``python -m build`` (sdist, then the wheel from it), its dependencies those of the test
    run's own virtualenv.  Session-scoped: built once per run
    (per pytest-xdist worker) even when the worker runs other modules' tests in between."""
    for tool in ("cc", "make", "mpicc"):
        require_tool(tool)
    tmp = tmp_path_factory.mktemp("install")
    dist = tmp / "dist"
    r = _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)])
    assert r.returncode == 0, r.stderr[-2000:]
    sdist = next(dist.glob("vhpc-*.tar.gz"))
    wheel = next(dist.glob("vhpc-*.whl"))
    with tarfile.open(sdist) as tf:
        names = tf.getnames()
    assert any(n.endswith("src/vhpc/kernels/npb/ft.c") for n in names)
    with zipfile.ZipFile(wheel) as zf:
        files = set(zf.namelist())
    assert {"vhpc/kernels/Makefile", "vhpc/kernels/kernels.mk", "vhpc/kernels/vhpc-stream.c",
            "vhpc/kernels/npb/cg.c", "vhpc/environments/vm/guest/agent.c"} <= files
    fake = tmp / "fakebin"  # libvirt's headers absent as pip's build would see it
    fake.mkdir()
    (fake / "pkg-config").write_text("#!/bin/sh\nexit 1\n")
    (fake / "pkg-config").chmod(0o755)
    venv = tmp / "venv"
    # without pip of its own (ensurepip took 5-6 s): this run's pip installs into it
    # (pip --python, pip(1) >= 22.3), as a user's pip would
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert r.returncode == 0, r.stderr
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    env = {**os.environ, "PATH": f"{fake}:{venv / 'bin'}:{os.environ['PATH']}",
           "HOME": str(tmp / "home"), "VHPC_CACHE": str(tmp / "home" / "cache")}
    for key in ("PYTHONPATH", "VHPC_KERNELS", "VIRTUAL_ENV"):
        env.pop(key, None)
    # The wheel itself is installed by pip; its dependencies (numpy, scipy, matplotlib, ...:
    # 390 MB, 20-40 s to unpack here) are linked from the test run's own virtualenv, which
    # `make test` installed with pip from the same pyproject.toml; not this checkout's editable
    # vhpc, not the [libvirt] extra.
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and
                str(p).startswith(sys.prefix))
    site = next((venv / "lib").glob("python3*/site-packages"))
    own = {n.name.split("-")[0].lower() for n in site.iterdir()}
    for item in deps.iterdir():
        if not item.name.lower().startswith(BORROW_NOT) and \
                item.name.split("-")[0].lower() not in own and not item.name.endswith(".pth"):
            (site / item.name).symlink_to(item)
    r = _run([*pip, "install", "-q", "--no-deps", str(wheel)], env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run([*pip, "check"], env=env)  # every declared dependency present
    assert r.returncode == 0, r.stdout[-2000:]
    return venv / "bin", env


def test_installed_wheel_runs_a_native_campaign_building_kernels_once(installed, tmp_path):
    bindir, env = installed
    work = tmp_path / "empty"
    work.mkdir()
    argv = [str(bindir / "vhpc"), "compare", "-b", "stream:n=200000,ntimes=5",
            "-b", "npb-cg:variant=mpi,ranks=2,class=S", "-e", "native", "--repeats", "2",
            "--warmup", "0", "--out", "res"]
    first = _run(argv, cwd=work, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr.count(BUILD_MSG) == 1, first.stderr
    cache = Path(env["VHPC_CACHE"])
    builds = [d for d in cache.iterdir() if d.name.startswith("kernels-")]
    assert len(builds) == 1 and (builds[0] / "vhpc-stream").is_file()
    second = _run(argv + ["--no-report"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert BUILD_MSG not in second.stderr  # the cached build is reused
    where = _run([str(bindir / "python"), "-c", "import vhpc; print(vhpc.__file__)"], cwd=work,
                 env=env).stdout
    assert str(ROOT) not in where  # the installed package, not this checkout


def test_libvirt_backend_without_the_extra_is_one_line(installed, tmp_path):
    bindir, env = installed
    r = _run([str(bindir / "vhpc"), "compare", "-b", "stream", "-e", "vm:backend=libvirt",
              "--repeats", "1", "--warmup", "0", "--out", str(tmp_path / "res")],
             cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "vhpc[libvirt]" in lines[0], r.stderr
    db = tmp_path / "res" / "vhpc.db"
    if db.exists():  # nothing stored: the preflight failed before the campaign was created
        with sqlite3.connect(db) as con:
            assert con.execute("SELECT COUNT(*) FROM campaigns").fetchone() == (0,)


def test_doctor_lists_every_component_with_its_package(installed):
    bindir, env = installed
    r = _run([str(bindir / "vhpc"), "doctor"], env={**env, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    for name, pkg in (("QEMU", "qemu-system-x86"), ("hwloc", "hwloc"), ("Open MPI", "openmpi-bin"),
                      ("Slurm client", "slurm-client"), ("libvirt-python", "vhpc[libvirt]")):
        line = next(ln for ln in r.stdout.splitlines() if ln.strip("│ ").startswith(name))
        assert pkg in line and ("present" in line or "missing" in line), line
    assert "libvirt-python" in r.stdout and "missing" in r.stdout  # no extra in this venv
