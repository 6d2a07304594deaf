"""Benchmarks: a named program + parameters + parser → metrics.

``REGISTRY`` maps names to :class:`~vhpc.benchmarks.base.Benchmark` objects; :func:`get` looks
one up with a helpful error.  The quick suite (own C kernels under ``kernels/``) is in
:mod:`vhpc.benchmarks.quick`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vhpc.benchmarks.apps import APPS_SUITE
from vhpc.benchmarks.base import (BENCHMARKS, Benchmark, BenchmarkError, ParseError, RunContext,
                                  ensure_kernels, unbuildable)
from vhpc.benchmarks.ivshmem import IVSHMEM_SUITE
from vhpc.benchmarks.npb import BINARIES as NPB_BINARIES, NPB_SUITE
from vhpc.benchmarks.npb_external import NPB_EXTERNAL_SUITE
from vhpc.benchmarks.quick import QUICK_SUITE
from vhpc.benchmarks.suites import STANDARD_SUITE

#: Every suite vhpc ships; each module exports a tuple of Benchmark objects.
SUITES: list[tuple[Benchmark, ...]] = [QUICK_SUITE, STANDARD_SUITE, NPB_SUITE, NPB_EXTERNAL_SUITE,
                                       IVSHMEM_SUITE, APPS_SUITE]

for bench in (b for suite in SUITES for b in suite):
    BENCHMARKS.register(bench.name)(bench)
del bench

#: Every registered benchmark by name, read as a mapping (vhpc's and outside packages').
REGISTRY: Mapping[str, Benchmark] = BENCHMARKS.view()


def quick_suite() -> list[str]:
    """Names of the quick suite, the default of ``vhpc compare`` and ``vhpc calibrate``:
    :data:`~vhpc.benchmarks.quick.QUICK_SUITE`, then every registered benchmark that declares
    ``quick = True``."""
    names = [b.name for b in QUICK_SUITE]
    return names + [n for n, b in REGISTRY.items() if b.quick and n not in names]


def get(name: str) -> Benchmark:
    """The benchmark called ``name``; raises BenchmarkError listing the known names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise BenchmarkError(
            f"unknown benchmark {name!r}: choose one of {', '.join(sorted(REGISTRY))} "
            "(see 'vhpc list benchmarks')") from None


def kernel_binaries() -> list[str]:
    """Every kernel binary vhpc's benchmarks run, sorted: each benchmark's own and both NPB
    variants' (kernels/Makefile builds them all)."""
    own = {b.binary for b in REGISTRY.values() if isinstance(getattr(b, "binary", None), str)}
    return sorted(own | set(NPB_BINARIES.values()))


def build_kernels(mpi: str = "openmpi") -> Path:
    """Build every kernel this host can build for ``mpi`` into
    :func:`~vhpc.benchmarks.base.kernel_dir` as a campaign's first use does
    (:func:`~vhpc.benchmarks.base.ensure_kernels`: make with the build key, the key recorded),
    and return that folder.  Kernels the host cannot build (a library or the MPI wrapper
    missing: :func:`~vhpc.benchmarks.base.unbuildable`) are named on stderr in one line with
    the package that would add them, and left out; the benchmarks that run them are refused
    when a campaign asks for them.  ``make kernels`` calls this, so the first campaign after
    it finds the key and builds nothing.  Raises BenchmarkError as ensure_kernels does."""
    import sys

    wanted = kernel_binaries()
    skipped = unbuildable(wanted, mpi)
    if skipped:
        sys.stderr.write("vhpc: not built: " + "; ".join(f"{b} ({why})"
                                                         for b, why in skipped.items()) + "\n")
    return ensure_kernels([b for b in wanted if b not in skipped], mpi)


__all__ = ["Benchmark", "BenchmarkError", "ParseError", "RunContext", "REGISTRY", "get",
           "QUICK_SUITE", "BENCHMARKS", "quick_suite", "build_kernels", "kernel_binaries"]
