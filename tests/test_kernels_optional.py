"""Kernels as the campaign needs them: a host without LAPACKE builds every other
kernel, records the build key, names what it left out and the package in one line, and
refuses a campaign that runs linpack before anything is stored, as ``vhpc doctor`` lists it.

The host here has LAPACKE (make test installs it); a missing library is made by pointing the
linpack kernel's declared library at a path that does not exist, which is what vhpc reads
to decide (the ``Kernel`` its benchmark declares).  The fresh Debian root of ``make test-fresh`` shows
the same without the package."""

from __future__ import annotations

import dataclasses
import re
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import one_line, run_cli


@pytest.fixture
def no_lapacke(tmp_path):
    """LAPACKE + OpenBLAS missing, as vhpc sees it (its probe finds no file): the registered
    linpack benchmark replaced by one whose kernel declares that library, for this test."""
    from vhpc.benchmarks import base
    from vhpc.benchmarks.kernel import LAPACKE

    gone = dataclasses.replace(LAPACKE, probe=f"glob:{tmp_path}/none/*lapacke.h")
    real = base.BENCHMARKS.get("linpack")
    lacking = dataclasses.replace(real, kernel=dataclasses.replace(real.kernel, libraries=(gone,)))
    base.BENCHMARKS.unregister("linpack")
    base.BENCHMARKS.register("linpack")(lacking)
    try:
        yield gone
    finally:
        base.BENCHMARKS.unregister("linpack")
        base.BENCHMARKS.register("linpack")(real)


def test_the_lapacke_probe_finds_this_hosts_library():
    """The real probe sees the header and the library make test installs (both are needed:
    the kernel includes lapacke.h and links -lopenblas)."""
    from vhpc.benchmarks.kernel import LAPACKE
    from vhpc.host import doctor

    ok, detail = doctor.check(LAPACKE)
    assert ok and "lapacke.h" in detail and "libopenblas.so" in detail, detail
    half = dataclasses.replace(LAPACKE,
                               probe="glob:/usr/include/*lapacke.h /nonexistent/libopenblas.so")
    ok, detail = doctor.check(half)
    assert not ok and "/nonexistent/libopenblas.so" in detail


def test_a_missing_library_leaves_one_kernel_out_and_the_build_key_written(
        no_lapacke, kernels_built, tmp_path, monkeypatch, capfd):
    """make kernels: everything else is built, the key recorded (the first campaign builds
    nothing), one stderr line names linpack and the package; asking for linpack then fails
    in one line naming the package, without a second make."""
    from vhpc.benchmarks import base, build_kernels, kernel_binaries

    k = tmp_path / "k"
    k.mkdir(mode=0o700)
    for p in kernels_built.iterdir():  # up to date, mtimes kept: make has nothing to do
        if p.name not in ("vhpc-linpack", "build-key"):
            shutil.copy2(p, k / p.name)
    monkeypatch.setenv("VHPC_KERNELS", str(k))
    calls = []
    real_make = base._make

    def make(argv):
        calls.append(argv)
        return real_make(argv)

    monkeypatch.setattr(base, "_make", make)
    assert build_kernels() == k
    err = capfd.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("vhpc: not built:")]
    assert said == ["vhpc: not built: vhpc-linpack (needs LAPACKE + OpenBLAS: apt-get install "
                    "liblapacke-dev libopenblas-dev)"], err
    assert len(calls) == 1 and "SKIP=vhpc-linpack" in calls[0]
    assert not (k / "vhpc-linpack").exists()
    assert (k / "build-key").read_text().strip() == base.build_key()
    assert {p.name for p in k.glob("vhpc-*")} == set(kernel_binaries()) - {"vhpc-linpack"}
    base.ensure_kernels(["vhpc-stream", "vhpc-pingpong"])  # the key holds: no make
    assert len(calls) == 1
    with pytest.raises(base.BenchmarkError, match="vhpc-linpack.*apt-get install "
                                                  "liblapacke-dev libopenblas-dev"):
        base.ensure_kernels(["vhpc-linpack"])
    assert len(calls) == 1


def test_the_library_installed_later_builds_linpack(kernels_built, tmp_path, monkeypatch):
    """A build that left linpack out, then the library present: asking for linpack builds it
    (the folder lacks the binary), and the key stays the folder's."""
    from vhpc.benchmarks import base

    k = tmp_path / "k"
    k.mkdir(mode=0o700)
    for p in kernels_built.iterdir():
        if p.name != "vhpc-linpack":
            shutil.copy2(p, k / p.name)
    monkeypatch.setenv("VHPC_KERNELS", str(k))
    assert base.ensure_kernels(["vhpc-linpack"]) == k
    assert os.access(k / "vhpc-linpack", os.X_OK)
    r = subprocess.run([str(k / "vhpc-linpack"), "-n", "50"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert r.returncode == 0 and "valid=1" in r.stdout, r.stdout + r.stderr


def test_the_makefile_skips_what_it_is_told_and_builds_the_rest(tmp_path, kernels_built):
    """SKIP= leaves a kernel out of a build from scratch, and the rest is built: make exits 0
    (the path vhpc takes where lapacke.h exists but libopenblas.so does not, where make's own
    check would not stop a failing link)."""
    build = tmp_path / "b"
    r = subprocess.run(["make", "-s", "-j2", "-C", str(Path(kernels_built).parent),
                        f"BUILD={build}", "SKIP=vhpc-linpack", "all"],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "CFLAGS": "-O0"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (build / "vhpc-linpack").exists() and os.access(build / "vhpc-stream", os.X_OK)
    assert os.access(build / "vhpc-npb-omp", os.X_OK)


@pytest.mark.parametrize("dry", [False, True])
def test_a_linpack_campaign_without_lapacke_is_refused_before_anything_is_stored(
        no_lapacke, capsys, tmp_path, dry):
    out = tmp_path / "r"
    rc, _, err = run_cli(capsys, "compare", "-b", "stream", "-b", "linpack", "-e", "native",
                         "--repeats", "2", "--out", out, *(["--dry-run"] if dry else []))
    one_line(rc, err, "benchmark linpack needs LAPACKE + OpenBLAS",
             "apt-get install liblapacke-dev libopenblas-dev")
    assert not (out / "vhpc.db").exists()


def test_doctor_lists_linpacks_library_as_missing(no_lapacke, capsys):
    """doctor's rows (the table wraps them to the console's width) hold linpack's library,
    missing, with its packages."""
    from vhpc.host import doctor
    from vhpc.workflows.parts import components

    (row,) = [(c, ok) for c, ok, _ in doctor.report(components()) if c.name == no_lapacke.name]
    assert row[1] is False and "linpack" in row[0].needed_for
    assert row[0].debian == "liblapacke-dev libopenblas-dev"
    rc, out, err = run_cli(capsys, "doctor")
    assert "LAPACKE" in out and "liblapack" in out, out


def test_paper_001_without_lapacke_runs_its_other_studies_and_names_the_package(
        no_lapacke, capsys, tmp_path):
    """Seed 001 has a linpack study: on a host without LAPACKE the dry run says that study
    will not run and why (the package), and plans the others; no traceback."""
    rc, out, err = run_cli(capsys, "paper", "001", "--dry-run", "--out", tmp_path / "r")
    assert rc == 0, err
    said = [line for line in (out + err).splitlines() if "will not run linpack" in line]
    assert said and "apt-get install liblapacke-dev libopenblas-dev" in said[0], out + err
    assert "mpi-p2p" in out and "Traceback" not in out + err


def test_a_campaign_builds_only_the_kernels_it_runs(tmp_path, monkeypatch):
    """A fresh folder: asking for vhpc-noise builds it alone (make demo's campaign builds the
    quick suite's five, not NPB's or linpack); a later request builds the next one under the
    same key, and the first is not rebuilt."""
    from vhpc.benchmarks import base

    monkeypatch.setenv("VHPC_KERNELS", str(tmp_path / "k"))
    monkeypatch.setenv("CFLAGS", "-O0")
    k = base.ensure_kernels(["vhpc-noise"])
    assert sorted(p.name for p in k.glob("vhpc-*")) == ["vhpc-noise"]
    assert (k / "build-key").read_text().strip() == base.build_key()
    built = (k / "vhpc-noise").stat().st_mtime_ns
    base.ensure_kernels(["vhpc-noise", "vhpc-pagefault"])
    assert sorted(p.name for p in k.glob("vhpc-*")) == ["vhpc-noise", "vhpc-pagefault"]
    assert (k / "vhpc-noise").stat().st_mtime_ns == built


def test_a_new_build_key_rebuilds_every_kernel_not_only_those_asked_for(tmp_path, monkeypatch):
    """A folder built for another key: make gets no goal (every kernel), else the binaries
    not asked for would stay from the old build under the new key."""
    from vhpc.benchmarks import base

    k = tmp_path / "k"
    k.mkdir(mode=0o700)
    (k / "vhpc-noise").write_text("old")
    (k / "vhpc-stream").write_text("old")
    (k / "build-key").write_text("0123456789abcdef\n")
    assert base.make_targets(k, ["vhpc-noise"], base.build_key()) == []
    (k / "build-key").write_text(base.build_key() + "\n")
    assert base.make_targets(k, ["vhpc-noise", "vhpc-npb-omp"], base.build_key()) == [
        str(k / "vhpc-noise"), "npb"]


def test_the_makefiles_mpi_kernels_are_those_vhpc_declares(tmp_path):
    """Without the MPI wrapper, kernels/Makefile (and npb/Makefile) leave out exactly the
    kernels the benchmarks declare MPI, which vhpc refuses in one line, and build the rest of
    what the benchmarks run: the Makefile's lists and vhpc's declaration agree."""
    from vhpc.benchmarks import kernel_binaries
    from vhpc.benchmarks.base import declared_kernels, kernel_sources

    mpi = {b for b, k in declared_kernels().items() if k.mpi}
    assert {"vhpc-pingpong", "vhpc-osu", "vhpc-hpccg", "vhpc-npb-mpi"} <= mpi

    build = tmp_path / "b"

    def planned(*args: str) -> set[str]:
        r = subprocess.run(["make", "-n", "-C", str(kernel_sources()), f"BUILD={build}", *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return set(re.findall(rf"-o {re.escape(str(build))}/(vhpc-[\w-]+)", r.stdout))

    assert planned("MPICC=mpicc") == set(kernel_binaries())
    assert planned("MPICC=no-such-mpicc") == set(kernel_binaries()) - mpi
    assert planned("MPICC=mpicc", "SKIP=vhpc-linpack") == set(kernel_binaries()) - {"vhpc-linpack"}


def test_kernels_mk_is_what_the_benchmarks_declare():
    """kernels/kernels.mk, which kernels/Makefile builds from (also where vhpc is not installed:
    a plain make, a remote machine's build), is the text the benchmarks' Kernel declarations
    give: a kernel added or changed without `make kernels-mk` fails here."""
    from vhpc.benchmarks.base import kernel_sources, kernels_include

    assert (kernel_sources() / "kernels.mk").read_text() == kernels_include(), \
        "kernels/kernels.mk is stale: run 'make kernels-mk'"


def test_a_declared_kernel_reaches_the_makefile_doctor_and_the_docs(tmp_path):
    """One declaration, three readers: a kernel of another mode with a library of its own
    lands in its mode's list, links its flags and is left out with one warning where make does
    not find the library; the same library is a doctor row and a docs line of its benchmark."""
    from vhpc.benchmarks.base import KernelBenchmark, declared_kernels
    from vhpc.benchmarks.catalog import render_markdown
    from vhpc.benchmarks.kernel import Kernel, make_include
    from vhpc.host.doctor import Component

    lib = Component("libtoy", "toy", f"glob:{tmp_path}/none/libtoy.so", "libtoy-dev", "toy-devel")
    toy = Kernel("vhpc-toy", "mpi+openmp", libraries=(lib,), ldlibs="-ltoy")
    text = make_include([*declared_kernels().values(), toy])
    assert "MPI_OMP_KERNELS := vhpc-hpccg vhpc-toy\n" in text
    assert "LDLIBS_vhpc-toy := -ltoy\n" in text
    (tmp_path / "kernels.mk").write_text(text)
    (tmp_path / "probe.mk").write_text(f"include {tmp_path}/kernels.mk\nall:\n\t@echo $(LACKING)\n")
    r = subprocess.run(["make", "-s", "-f", str(tmp_path / "probe.mk")], capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.split() == ["vhpc-toy"], r.stdout + r.stderr  # LAPACKE is here, libtoy not
    assert "libtoy not found (install libtoy-dev): not building vhpc-toy" in r.stderr
    bench = KernelBenchmark(name="toy", summary="s", kernel=toy)
    assert bench.components == (lib,)
    assert "- needs: libtoy (Debian: `libtoy-dev`" in render_markdown([bench])
