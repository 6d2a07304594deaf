"""Benchmarks: a named program + parameters + parser → metrics.

``REGISTRY`` maps names to :class:`~vhpc.benchmarks.base.Benchmark` objects; :func:`get` looks
one up with a helpful error.  Every module of this package registers its own benchmarks into a
suite (:func:`~vhpc.benchmarks.base.register`) and the registry imports them all on its first
lookup, so a new benchmark or suite is one new module; the quick suite (own C kernels under
``kernels/``) is in :mod:`vhpc.benchmarks.quick`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vhpc.benchmarks.base import (BENCHMARKS, SUITES, Benchmark, BenchmarkError, ParseError,
                                  RunContext, declared_kernels, ensure_kernels, suite_of,
                                  unbuildable)

#: Every registered benchmark by name, read as a mapping (vhpc's and outside packages'), in
#: listing order (:func:`vhpc.benchmarks.base.listing_order`).
REGISTRY: Mapping[str, Benchmark] = BENCHMARKS.view()


def quick_suite() -> list[str]:
    """Names of the quick suite, the default of ``vhpc compare`` and ``vhpc calibrate``: the
    members of the suites declared ``default`` (:class:`~vhpc.benchmarks.base.Suite`) in
    listing order, then every registered benchmark that declares ``quick = True``."""
    names = [n for n in REGISTRY if getattr(suite_of(n), "default", False)]
    return names + [n for n, b in REGISTRY.items() if b.quick and n not in names]


def by_suite() -> list[tuple[str, list[str]]]:
    """(suite name, its benchmarks' names) for every registered suite in listing order, then
    ("other", names) for benchmarks registered in no suite (an outside package's), if any."""
    groups: dict[str, list[str]] = {name: [] for name in SUITES.names()}
    other: list[str] = []
    for name in REGISTRY:
        found = suite_of(name)
        (groups[found.name] if found is not None else other).append(name)
    out = [(name, members) for name, members in groups.items() if members]
    return out + ([("other", other)] if other else [])


def get(name: str) -> Benchmark:
    """The benchmark called ``name``; raises BenchmarkError listing the known names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise BenchmarkError(
            f"unknown benchmark {name!r}: choose one of {', '.join(sorted(REGISTRY))} "
            "(see 'vhpc list benchmarks')") from None


def kernel_binaries() -> list[str]:
    """Every kernel binary vhpc's benchmarks run, sorted: those their
    :attr:`~vhpc.benchmarks.base.Benchmark.kernels` declare (kernels/Makefile builds them all)."""
    return list(declared_kernels())


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
           "BENCHMARKS", "SUITES", "quick_suite", "by_suite", "build_kernels",
           "kernel_binaries"]
