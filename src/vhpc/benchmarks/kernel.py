"""How vhpc's own C kernels are built, as the benchmark that runs each one declares it.

A :class:`Kernel` names a program under ``kernels/`` (its source, how it is compiled: serial,
OpenMP, MPI or MPI + OpenMP) and the libraries it links beyond libc, OpenMP and MPI, each a
:class:`vhpc.host.doctor.Component` with its Debian and RHEL packages.  Everything else reads
that declaration: ``kernels/kernels.mk`` (the lists ``kernels/Makefile`` builds from, written
by :func:`make_include`; ``make kernels-mk`` rewrites it), ``vhpc doctor`` and
docs/benchmarks.md (a benchmark's ``kernels`` and ``components``), the build key (it hashes
``kernels.mk`` with the sources) and what ``make kernels`` leaves out on a host that lacks a
library (:func:`vhpc.benchmarks.base.unbuildable`).  A new kernel is its C source, the
benchmark module that declares it, and ``make kernels-mk``.
"""

from __future__ import annotations

from dataclasses import dataclass

from vhpc.host.doctor import Component

#: How a kernel is compiled: the compiler and whether it adds OpenMP's flag.  The make variable
#: of :func:`make_include` that lists the kernels built each way is the value.
MODES = {"serial": "SERIAL_KERNELS", "openmp": "OMP_KERNELS", "mpi": "MPI_KERNELS",
         "mpi+openmp": "MPI_OMP_KERNELS"}


@dataclass(frozen=True)
class Kernel:
    """One of vhpc's C programs under ``kernels/``.

    binary: the program's file name in the build folder (``vhpc-stream``);
    mode: one of :data:`MODES`: ``serial`` (``cc``), ``openmp`` (``cc -fopenmp``), ``mpi``
    (the MPI compiler wrapper, left out where it is missing) or ``mpi+openmp``;
    libraries: what it links beyond libc, OpenMP and MPI, as ``vhpc doctor`` checks them (a
    host without one builds every other kernel and names this one in one line);
    ldlibs: the linker flags for those libraries (``-llapacke -lopenblas``);
    makefile: a folder under ``kernels/`` whose own Makefile builds it from several sources
    (NPB's ``npb``); "" (the default): kernels/Makefile builds it from ``<binary>.c`` and
    ``common.c``.  Raises ValueError for a mode not in :data:`MODES`."""

    binary: str
    mode: str = "serial"
    libraries: tuple[Component, ...] = ()
    ldlibs: str = ""
    makefile: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"kernel {self.binary}: mode {self.mode!r} is not one of "
                             f"{', '.join(MODES)}")

    @property
    def mpi(self) -> bool:
        """Built with the MPI compiler wrapper (left out where that is missing)."""
        return self.mode.startswith("mpi")

    @property
    def source(self) -> str:
        """Its source under ``kernels/``: ``<binary>.c``, or the folder of its own Makefile."""
        return f"{self.makefile}/" if self.makefile else f"{self.binary}.c"

    def describe(self) -> str:
        """One line for people: ``kernels/vhpc-stream.c, OpenMP``."""
        how = {"serial": "serial", "openmp": "OpenMP", "mpi": "MPI",
               "mpi+openmp": "MPI + OpenMP"}[self.mode]
        return f"kernels/{self.source}, {how}"


#: LAPACKE on OpenBLAS, which kernels/vhpc-linpack.c includes (``lapacke.h``) and links
#: (``-llapacke -lopenblas``): both files must be there (Debian 12: liblapacke-dev puts
#: ``/usr/include/lapacke.h``, libopenblas-dev ``/usr/lib/x86_64-linux-gnu/libopenblas.so``).
LAPACKE = Component("LAPACKE + OpenBLAS", "linpack",
                    "glob:/usr/include/*lapacke.h /usr/lib/*/libopenblas.so",
                    "liblapacke-dev libopenblas-dev", "lapack-devel openblas-devel")

INCLUDE_HEADER = """\
# The kernels kernels/Makefile builds and how: generated from what vhpc's benchmarks declare
# (vhpc.benchmarks.kernel.Kernel) by `make kernels-mk` in the checkout; do not edit
# (tests/test_kernels_optional.py checks it is current).
"""


def _probe(c: Component) -> str:
    """A make expression that is empty when the host lacks ``c`` (its ``glob:`` patterns, each
    of which must match, or its ``cmd:`` on PATH).  Raises ValueError for another probe."""
    kind, _, what = c.probe.partition(":")
    if kind == "glob":
        return "$(and " + ",".join(f"$(wildcard {p})" for p in what.split()) + ")"
    if kind == "cmd":
        return f"$(shell command -v {what} 2>/dev/null)"
    raise ValueError(f"library {c.name}: a kernel's library needs a glob: or cmd: probe, "
                     f"not {c.probe!r}")


def make_include(kernels: list[Kernel]) -> str:
    """``kernels/kernels.mk`` for ``kernels``: one list per :data:`MODES` entry of the kernels
    kernels/Makefile builds from one source, ``SUBMAKES`` (the folders whose own Makefile
    builds the rest), ``LDLIBS_<binary>`` for a kernel that links libraries, and per such
    kernel a test of its libraries that adds it to ``LACKING`` (left out, with one warning,
    unless ``SKIP`` names it already).  Raises ValueError for a library make cannot probe."""
    out = [INCLUDE_HEADER]
    own = sorted((k for k in kernels if not k.makefile), key=lambda k: k.binary)
    for mode, var in MODES.items():
        out.append(f"{var} := {' '.join(k.binary for k in own if k.mode == mode)}".rstrip() + "\n")
    out.append(f"SUBMAKES := {' '.join(sorted({k.makefile for k in kernels if k.makefile}))}"
               .rstrip() + "\n")
    for k in own:
        if k.ldlibs:
            out.append(f"LDLIBS_{k.binary} := {k.ldlibs}\n")
    for k in own:
        for c in k.libraries:
            out.append(f"ifeq ({_probe(c)},)\nLACKING += {k.binary}\n"
                       f"ifeq ($(filter {k.binary},$(SKIP)),)\n"
                       f"$(warning {c.name} not found (install {c.debian}): not building "
                       f"{k.binary})\nendif\nendif\n")
    return "".join(out)
