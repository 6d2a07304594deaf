"""The NPB suite: vhpc's own implementation of the NAS Parallel Benchmarks kernels.

| benchmark | NPB kernel | serves | metrics |
|---|---|---|---|
| npb-ep | EP, Gaussian deviates (random numbers + log/sqrt) | seed 000 Fig. 2/4-6, seed 003 Fig. 3-5 | time s, Mop/s |
| npb-is | IS, integer bucket sort (memory, all-to-all) | same | time s, Mop/s (keys ranked) |
| npb-cg | CG, sparse matrix-vector products (irregular memory, allgather) | same | time s, Mop/s |
| npb-mg | MG, multigrid V-cycles (stencils, halo exchange) | same | time s, Mop/s |
| npb-ft | FT, 3-D FFT PDE solver (all-to-all transposes) | same | time s, Mop/s |

The C code is in ``kernels/npb/`` (written from the NPB specification RNR-94-007 / NAS-95-020
and the NPB 3.x class parameters and verification values; see kernels/npb/README.md).  One
source builds two binaries: ``vhpc-npb-omp`` (OpenMP, ``OMP_NUM_THREADS``) and
``vhpc-npb-mpi`` (MPI, one rank per process, run under ``mpirun -np N``).  Both take
``-k KERNEL -c CLASS``, print NPB's report block and one line::

    VHPC-RESULT kernel=cg class=S time_s=... mops=... verified=1 valid=1 threads=T ranks=P ...

``time`` is the section NPB times, ``mops`` NPB's Mop/s formula.  A sample is valid only when
the kernel's NPB verification succeeded (``verified=1``) and the exit status is 0 (3 means the
verification failed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from vhpc.benchmarks.base import MPI_PARAM, Benchmark, BenchmarkError, Param, ParseError, \
    RESULT_RE, parse_result_line, register, result_value, suite
from vhpc.benchmarks.kernel import Kernel
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample

#: NPB problem classes the kernels implement (S smallest ... C largest).
CLASSES: tuple[str, ...] = ("S", "W", "A", "B", "C")
VARIANTS: tuple[str, ...] = ("omp", "mpi")
BINARIES: Mapping[str, str] = {"omp": "vhpc-npb-omp", "mpi": "vhpc-npb-mpi"}

#: Both binaries, built by kernels/npb/Makefile from the same sources (MPI: with -DNPB_MPI).
KERNELS = (Kernel(BINARIES["omp"], "openmp", makefile="npb"),
           Kernel(BINARIES["mpi"], "mpi+openmp", makefile="npb"))

PROVENANCE = ("seed 000 Fig. 2/4-6 (NPB OpenMP on VMs); seed 003 Fig. 3-5 (NPB)")


def npb_class(raw: Any) -> str:
    """Param converter: an NPB class letter, case-insensitive (``"a"`` -> ``"A"``)."""
    return str(raw).strip().upper()


def variant(raw: Any) -> str:
    """Param converter: ``omp`` or ``mpi``, case-insensitive."""
    return str(raw).strip().lower()


def pow2_floor(n: int) -> int:
    """The largest power of two not above ``n`` (at least 1)."""
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


PARAMS: tuple[Param, ...] = (
    Param("class", "S", npb_class, "NPB problem class (S < W < A < B < C)", choices=CLASSES),
    Param("variant", "omp", variant, "omp: one process, OpenMP threads; mpi: MPI ranks",
          choices=VARIANTS),
    Param("threads", None, int, "OpenMP threads (omp default: all CPUs of the environment; "
          "mpi: threads per rank, default 1)", minimum=1),
    Param("ranks", None, int, "MPI ranks for variant=mpi, a power of two (default: the largest "
          "power of two not above the environment's CPU count)", minimum=1),
    MPI_PARAM,
    Param("copies", 1, int, "instances started at the same time (seed 003 Fig. 2 runs 8 jobs at "
          "once): time is their mean, mops their sum, valid only if every copy verifies",
          minimum=1),
)

METRICS: tuple[Metric, ...] = (
    Metric("time", "s", False, "NPB timed section (slowest rank)"),
    Metric("mops", "Mop/s", True, "NPB Mop/s total (the kernel's operation-count formula / time)",
           inverse_of="time"),
)


@dataclass(frozen=True)
class NpbBenchmark(Benchmark):
    """One NPB kernel (``kernel`` = ep, is, cg, mg or ft) on vhpc-npb-omp or vhpc-npb-mpi.

    Parameters: ``class`` (S, W, A, B, C; default S), ``variant`` (omp | mpi), ``threads``,
    ``ranks`` (see :data:`PARAMS`).  Its :attr:`kernels` are both binaries; one ``make``
    goal builds them.
    """

    kernel: str = ""
    name: str = ""
    summary: str = ""
    provenance: str = PROVENANCE
    verification: str = ""
    kernels: tuple[Kernel, ...] = KERNELS
    params: tuple[Param, ...] = PARAMS
    metrics: tuple[Metric, ...] = METRICS
    timeout: float = 3600.0
    timing: str = ("one wall-clock interval around the section NPB 3.4 times (the same steps, "
                   "after the same untimed first pass), Mop/s from NPB's operation count; why: "
                   "so that Mop/s can be set beside the reference's")

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """As :meth:`Benchmark.resolve`; ``ranks`` must be a power of two and only goes with
        variant=mpi.  Raises BenchmarkError otherwise, as :meth:`Benchmark.resolve` does for
        unknown names or bad values."""
        values = super().resolve(overrides)
        ranks = values["ranks"]
        if ranks is not None:
            if values["variant"] != "mpi":
                raise BenchmarkError(f"{self.name}: ranks={ranks} needs variant=mpi (variant=omp "
                                     "runs one process; set threads instead)")
            if ranks & (ranks - 1):
                raise BenchmarkError(f"{self.name}: ranks={ranks} is not a power of two; the NPB "
                                     f"kernels need 1, 2, 4, 8, ... ranks (try {pow2_floor(ranks)})")
        return values

    def nranks(self, params: Mapping[str, Any], ncpus: int) -> int:
        """MPI ranks of a trial on ``ncpus`` CPUs: ``ranks``, else the largest power of two not
        above ``ncpus`` (:func:`pow2_floor`; NPB's MPI kernels need a power of two)."""
        return params.get("ranks") or pow2_floor(ncpus)

    def nthreads(self, params: Mapping[str, Any], ncpus: int) -> int:
        """OpenMP threads of a trial on ``ncpus`` CPUs: ``threads``, else ``ncpus`` for variant=omp
        and 1 (per rank) for variant=mpi."""
        if params.get("threads"):
            return int(params["threads"])
        return ncpus if params.get("variant", "omp") == "omp" else 1

    def command(self, params, ctx):
        """argv of one trial: the variant's binary with ``-k kernel -c class`` (class S by
        default), behind the launcher prefix for variant=mpi; with ``copies`` > 1, a ``sh -c`` loop
        that starts that many copies together and waits for all of them."""
        var = params.get("variant", "omp")
        argv = [str(ctx.bindir / BINARIES[var]), "-k", self.kernel, "-c", params.get("class", "S")]
        launch = self.launch(params, ctx)
        if launch is not None:
            argv = launch.argv() + argv
        copies = int(params.get("copies", 1))
        if copies > 1:  # start them together, wait for all (sh(1): "$0" = count, "$@" = argv)
            loop = 'i=0; while [ $i -lt "$0" ]; do "$@" & i=$((i+1)); done; wait'
            argv = ["sh", "-c", loop, str(copies), *argv]
        return argv

    def launch(self, params, ctx):
        """variant=mpi: ranks x threads bound to cores (:mod:`vhpc.benchmarks.mpilaunch`);
        with copies > 1 the copies run unbound (each launch would bind to the same cores)."""
        if params.get("variant", "omp") != "mpi":
            return None
        copies = int(params.get("copies", 1))
        return Launch(self.nranks(params, ctx.ncpus), self.nthreads(params, ctx.ncpus),
                      params.get("mpi", "openmpi"), ctx.ncpus, bind=copies == 1, cpuset=ctx.cpuset)

    def environ(self, params, ctx):
        """The MPI launch's variables for variant=mpi; for variant=omp ``OMP_NUM_THREADS``
        (:meth:`nthreads`) and ``OMP_PROC_BIND=spread``."""
        launch = self.launch(params, ctx)
        if launch is not None:
            return launch.environ()
        return {"OMP_NUM_THREADS": str(self.nthreads(params, ctx.ncpus)), "OMP_PROC_BIND": "spread"}

    def parse(self, params, stdout, stderr, returncode):
        """Samples ``time`` (seconds) and ``mops`` (Mop/s) from the VHPC-RESULT line(s); valid iff
        ``verified=1``, ``valid=1`` and exit status 0 (for every copy when ``copies`` > 1: time is
        then the mean of the copies, mops their sum).  Raises ParseError when no line is there, or
        a line belongs to another kernel or class, or lacks a number."""
        lines = [parse_result_line(m.group(0)) for m in RESULT_RE.finditer(stdout)] \
            or [parse_result_line(stdout)]
        want = params.get("class")
        for pairs in lines:
            if pairs.get("kernel") != self.kernel:
                raise ParseError(f"{self.name}: result line is for kernel {pairs.get('kernel')!r}")
            if want is not None and pairs.get("class") != want:
                raise ParseError(f"{self.name}: result line is for class {pairs.get('class')!r}, "
                                 f"not {want!r}")
        copies = int(params.get("copies", 1))
        valid = returncode == 0 and len(lines) == copies and all(
            p.get("verified") == "1" and p.get("valid") == "1" for p in lines)
        times = [result_value(self.name, p, "time_s") for p in lines]
        mops = [result_value(self.name, p, "mops") for p in lines]
        values = {"time": sum(times) / len(times), "mops": sum(mops)}
        return [Sample(m.name, values[m.name], m.unit, m.higher_is_better, valid)
                for m in (self.metric("time"), self.metric("mops"))]


NPB_EP = NpbBenchmark(
    kernel="ep", name="npb-ep",
    summary="NPB EP: 2^(m+1) NPB random numbers -> Gaussian pairs (Marsaglia polar method), "
            "sums and annulus counts; compute bound, almost no communication",
    verification="sums of the deviates (NPB <= 3.4.1 signed, 3.4.2 absolute) and the pair count "
                 "within 1e-8 relative of NPB's reference values",
)
NPB_IS = NpbBenchmark(
    kernel="is", name="npb-is",
    summary="NPB IS: rank 2^16..2^27 integer keys 10 times by bucket counting (MPI: all-to-all "
            "key exchange); memory and network bound",
    verification="NPB partial verification (5 test-key ranks per iteration) and a full sort "
                 "check: 51 of 51 checks",
)
NPB_CG = NpbBenchmark(
    kernel="cg", name="npb-cg",
    summary="NPB CG: inverse power method with 25 conjugate-gradient iterations per step on a "
            "random sparse matrix (irregular memory access; MPI: row blocks, allgather)",
    verification="zeta within 1e-10 relative of NPB's reference value",
)
NPB_MG = NpbBenchmark(
    kernel="mg", name="npb-mg",
    summary="NPB MG: multigrid V-cycles for a 3-D periodic Poisson problem (27-point stencils; "
            "MPI: z slabs with halo exchange)",
    verification="L2 norm of the final residual within 1e-8 relative of NPB's reference value",
)
NPB_FT = NpbBenchmark(
    kernel="ft", name="npb-ft",
    summary="NPB FT: 3-D FFT solution of a diffusion equation (MPI: z slabs, all-to-all "
            "transposes)",
    verification="complex checksum of every iteration within 1e-12 relative of NPB's values",
)

#: Every benchmark of this module, in the order listings show them.
NPB_SUITE: tuple[Benchmark, ...] = (NPB_EP, NPB_IS, NPB_CG, NPB_MG, NPB_FT)
register(suite("npb", "NAS Parallel Benchmarks EP, IS, CG, MG, FT: vhpc's own C, OpenMP or MPI",
               30), *NPB_SUITE)

__all__ = ["NPB_SUITE", "NpbBenchmark", "CLASSES", "VARIANTS", "BINARIES", "pow2_floor"]
