"""Benchmarks: a named program + parameters + parser → metrics.

``REGISTRY`` maps names to :class:`~vhpc.benchmarks.base.Benchmark` objects; :func:`get` looks
one up with a helpful error.  The quick suite (own C kernels under ``kernels/``) is in
:mod:`vhpc.benchmarks.quick`.
"""

from __future__ import annotations

from vhpc.benchmarks.apps import APPS_SUITE
from vhpc.benchmarks.base import Benchmark, BenchmarkError, ParseError, RunContext
from vhpc.benchmarks.ivshmem import IVSHMEM_SUITE
from vhpc.benchmarks.npb import NPB_SUITE
from vhpc.benchmarks.npb_external import NPB_EXTERNAL_SUITE
from vhpc.benchmarks.quick import QUICK_SUITE
from vhpc.benchmarks.suites import STANDARD_SUITE

#: Every suite vhpc ships; each module exports a tuple of Benchmark objects.
SUITES: list[tuple[Benchmark, ...]] = [QUICK_SUITE, STANDARD_SUITE, NPB_SUITE, NPB_EXTERNAL_SUITE,
                                       IVSHMEM_SUITE, APPS_SUITE]

REGISTRY: dict[str, Benchmark] = {b.name: b for suite in SUITES for b in suite}


def get(name: str) -> Benchmark:
    """The benchmark called ``name``; raises BenchmarkError listing the known names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise BenchmarkError(
            f"unknown benchmark {name!r}: choose one of {', '.join(sorted(REGISTRY))} "
            "(see 'vhpc list benchmarks')") from None


__all__ = ["Benchmark", "BenchmarkError", "ParseError", "RunContext", "REGISTRY", "get",
           "QUICK_SUITE"]
