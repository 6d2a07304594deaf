"""The standard suite: HPC Challenge (wrapped) and vhpc's own MPI, Linpack and HPCCG kernels.

| benchmark | serves | metrics |
|---|---|---|
| hpcc | seed 004 Fig. 12-13 (HPL, STREAM, RandomAccess), HPCC as a whole | HPL Gflops/time, DGEMM, STREAM Triad, RandomAccess, FFT, PTRANS, ping-pong, ring |
| osu-latency | seed 001 Fig. 1-4, seed 004 Fig. 1 | ``lat_<size>`` µs |
| osu-bw, osu-bibw | seed 001 Fig. 1-3 (Presta Com) | ``bw_avg_<size>``, ``bw_max_<size>`` MB/s, ``optime_<size>`` µs |
| osu-multi-lat | seed 001 Fig. 4 (latency vs pairs) | ``lat_<size>`` (mean over pairs), ``max_<size>`` µs |
| osu-coll | seed 004 Fig. 2-5 (Barrier/Allreduce/Bcast/Alltoall) | ``avg_<size>``, ``min_<size>``, ``max_<size>`` µs |
| linpack | seed 001 Fig. 5 | factor/solve/total time s, Mflops |
| hpccg | seed 004 Fig. 6 | MFLOPS total and per phase, iterations, residual |

The OSU-style benchmarks report one metric per message size: the metric name carries the size
in bytes (``lat_8``, ``bw_avg_1048576``); :attr:`Benchmark.metrics` lists them as patterns
(``lat_<size>``).  MPI is Open MPI (Debian's default ``mpirun``); an MPICH variant is not
provided (hpcc is linked against Open MPI and the kernels are built with the default ``mpicc``).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from vhpc.benchmarks.base import (MPI_PARAM, Benchmark, BenchmarkError, KernelBenchmark, Param,
                                  ParseError, parse_result_line, register, result_value, suite)
from vhpc.benchmarks.kernel import LAPACKE, Kernel
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample
from vhpc.host.doctor import Component

#: The helper script run as the hpcc trial command (stdlib only; see its docstring).
HPCC_RUNNER = Path(__file__).resolve().with_name("hpcc_runner.py")

# --------------------------------------------------------------------------------------------
# HPC Challenge


@dataclass(frozen=True)
class HpccKey:
    """How one metric is read from hpcc's summary section: ``value = float(key) * scale``."""

    metric: Metric
    key: str
    scale: float = 1.0
    hpl: bool = False  # invalid when the HPL residual check failed


HPCC_KEYS: tuple[HpccKey, ...] = (
    HpccKey(Metric("hpl_gflops", "Gflop/s", True, "HPL rate (HPL_Tflops x 1000)",
                   inverse_of="hpl_time"), "HPL_Tflops",
            1000.0, hpl=True),
    HpccKey(Metric("hpl_time", "s", False, "HPL solve time (HPL_time)"), "HPL_time", hpl=True),
    HpccKey(Metric("star_dgemm_gflops", "Gflop/s", True, "DGEMM per rank, all ranks at once"),
            "StarDGEMM_Gflops"),
    HpccKey(Metric("single_dgemm_gflops", "Gflop/s", True, "DGEMM on one rank alone"),
            "SingleDGEMM_Gflops"),
    HpccKey(Metric("star_stream_triad", "GB/s", True, "STREAM Triad per rank, all ranks at once"),
            "StarSTREAM_Triad"),
    HpccKey(Metric("single_stream_triad", "GB/s", True, "STREAM Triad on one rank alone"),
            "SingleSTREAM_Triad"),
    HpccKey(Metric("star_randomaccess_gups", "GUP/s", True, "RandomAccess per rank, all at once"),
            "StarRandomAccess_GUPs"),
    HpccKey(Metric("single_randomaccess_gups", "GUP/s", True, "RandomAccess on one rank alone"),
            "SingleRandomAccess_GUPs"),
    HpccKey(Metric("mpi_randomaccess_gups", "GUP/s", True,
                   "MPI RandomAccess over all ranks (invalid if > 1 % of the table is wrong)"),
            "MPIRandomAccess_GUPs"),
    HpccKey(Metric("star_fft_gflops", "Gflop/s", True, "FFT per rank, all ranks at once"),
            "StarFFT_Gflops"),
    HpccKey(Metric("mpi_fft_gflops", "Gflop/s", True, "distributed FFT over all ranks"),
            "MPIFFT_Gflops"),
    HpccKey(Metric("ptrans_gbs", "GB/s", True, "parallel matrix transpose"), "PTRANS_GBs"),
    HpccKey(Metric("pingpong_latency_us", "us", False, "average ping-pong latency (>= 2 ranks)"),
            "AvgPingPongLatency_usec"),
    HpccKey(Metric("pingpong_bandwidth_gbs", "GB/s", True,
                   "average ping-pong bandwidth (>= 2 ranks)"), "AvgPingPongBandwidth_GBytes"),
    HpccKey(Metric("ring_latency_us", "us", False, "randomly ordered ring latency (>= 2 ranks)"),
            "RandomlyOrderedRingLatency_usec"),
)

SUMMARY_RE = re.compile(r"^Begin of Summary section\.[ \t]*$(.*?)^End of Summary section\.",
                        re.M | re.S)
HPL_FAILED_RE = re.compile(r"^\|\|Ax-b\|\|.*\.\.\.\.\.\. FAILED", re.M)
HPL_FAILED_COUNT_RE = re.compile(r"^\s*(\d+) tests completed and failed residual checks", re.M)

#: hpcc's MPIRandomAccess passes when at most this fraction of the table is wrong.
RANDOMACCESS_MAX_ERROR_FRACTION = 0.01


def hpcc_summary(stdout: str) -> dict[str, str]:
    """``key=value`` pairs of hpcc's summary section (``Begin of Summary section.`` …
    ``End of Summary section.``).  Raises ParseError when the section is missing."""
    m = SUMMARY_RE.search(stdout)
    if not m:
        raise ParseError("hpcc: no 'Begin of Summary section.' ... 'End of Summary section.' in "
                         "the output (hpcc did not finish; see stderr)")
    pairs = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            pairs[key] = value.strip()
    return pairs


@dataclass(frozen=True)
class HpccBenchmark(Benchmark):
    """``hpcc``: Debian's HPC Challenge 1.5.0 binary, wrapped.

    Parameters: ``n`` (HPL matrix order N, default 500; hpcc also sizes STREAM, RandomAccess,
    FFT and DGEMM memory from N, so a small N measures caches), ``nb`` (HPL block size, 64),
    ``p`` x ``q`` (process grid, 1 x 2), ``ranks`` (MPI ranks, default p*q; must be >= p*q),
    ``threads`` (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS per rank, 1).

    Command: ``python3 -S hpcc_runner.py --n N --nb NB --p P --q Q -- mpirun ... hpcc``: a
    fresh scratch directory with ``hpccinf.txt``, hpcc's output file printed on stdout.

    Metrics (:data:`HPCC_KEYS`): HPL Gflop/s (HPL_Tflops x 1000) and time, Star/Single DGEMM
    Gflop/s, Star/Single STREAM Triad GB/s, Star/Single/MPI RandomAccess GUP/s, Star/MPI FFT
    Gflop/s, PTRANS GB/s, average ping-pong latency µs and bandwidth GB/s, randomly ordered ring
    latency µs.  A key that is absent or -1 (not run, e.g. the latency tests with 1 rank) gives
    no sample.  Validity: exit status 0 and ``Success=1``; HPL samples also need a passed
    residual check; MPI RandomAccess needs ``MPIRandomAccess_ErrorsFraction`` <= 1 %.

    Raises ParseError when the summary is missing or when the echoed HPL_N, HPL_NB,
    HPL_nprow, HPL_npcol or CommWorldProcs differ from the request: hpcc silently falls back
    to its default input when ``hpccinf.txt`` is invalid.
    """

    name: str = "hpcc"
    summary: str = "HPC Challenge 1.5.0 (Debian's hpcc): HPL, DGEMM, STREAM, RandomAccess, FFT, " \
                   "PTRANS, ping-pong"
    provenance: str = "seed 004 Fig. 12-13 (HPL, STREAM, RandomAccess under nested/shadow paging)"
    verification: str = "Success=1, HPL scaled residual < 16, MPI RandomAccess errors <= 1 %, " \
                        "echoed N/NB/P/Q/ranks must match the request"
    timing = "HPC Challenge's own timers, unchanged (Debian's hpcc): the figures are hpcc's"
    components = (
        Component("HPC Challenge", "hpcc-* benchmarks", "cmd:hpcc", "hpcc", "(build from source)"),
    )
    params: tuple[Param, ...] = (
        Param("n", 500, int, "HPL matrix order N (also sizes the other tests' memory)", minimum=1),
        Param("nb", 64, int, "HPL block size NB", minimum=1),
        Param("p", 1, int, "process grid rows P", minimum=1),
        Param("q", 2, int, "process grid columns Q", minimum=1),
        Param("ranks", None, int, "MPI ranks (default p*q; at least p*q)", minimum=1),
        Param("threads", 1, int, "BLAS/OpenMP threads per rank", minimum=1),
    )
    metrics: tuple[Metric, ...] = tuple(k.metric for k in HPCC_KEYS)
    timeout: float = 1800.0

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """As :meth:`Benchmark.resolve`, and ranks >= p*q (else hpcc silently uses defaults).
        Raises BenchmarkError when ranks is below p*q, as :meth:`Benchmark.resolve` does for
        unknown names or bad values."""
        values = super().resolve(overrides)
        grid = values["p"] * values["q"]
        if values["ranks"] is not None and values["ranks"] < grid:
            raise BenchmarkError(
                f"hpcc: ranks={values['ranks']} is below p*q={grid}; hpcc would silently fall "
                "back to its default input: raise ranks or lower p/q")
        return values

    def ranks(self, params: Mapping[str, Any]) -> int:
        """MPI ranks of a trial: ``ranks``, else the process grid's P x Q."""
        return params.get("ranks") or params["p"] * params["q"]

    def launch(self, params, ctx):
        """Ranks bound to ``threads`` cores each (hpcc prints no VHPC-RANK lines)."""
        return Launch(self.ranks(params), int(params.get("threads") or 1), "openmpi", ctx.ncpus,
                      cpuset=ctx.cpuset)

    def command(self, params, ctx):
        """argv of one trial: ``python -S hpcc_runner.py --n N --nb NB --p P --q Q -- mpirun ...
        hpcc`` (:mod:`vhpc.benchmarks.hpcc_runner` writes hpccinf.txt in a scratch directory and
        prints hpccoutf.txt)."""
        return [sys.executable, "-S", str(HPCC_RUNNER), "--n", str(params["n"]),
                "--nb", str(params["nb"]), "--p", str(params["p"]), "--q", str(params["q"]),
                "--", *self.launch(params, ctx).argv(), "hpcc"]

    def environ(self, params, ctx):
        """The launch's environment variables, with ``OPENBLAS_NUM_THREADS`` equal to
        ``OMP_NUM_THREADS`` (the ``threads`` per rank)."""
        env = self.launch(params, ctx).environ()
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"]
        return env

    def parse(self, params, stdout, stderr, returncode):
        """Samples of hpcc's summary section (:data:`HPCC_KEYS`: each value times its key's scale,
        in the metric's unit, e.g. ``HPL_Tflops`` x 1000 in Gflop/s); a value below 0 (hpcc's -1:
        test not run, e.g. the bandwidths with 1 rank) gives no sample.

        Valid when the exit status is 0 and the summary says ``Success=1``; HPL's metrics also need
        every HPL residual check passed, and ``MPIRandomAccess_GUPs`` an error fraction of at most
        :data:`RANDOMACCESS_MAX_ERROR_FRACTION` (hpcc's own pass rule).

        Raises ParseError when the summary section is missing, when it lacks HPL_N, HPL_NB,
        HPL_nprow, HPL_npcol or CommWorldProcs or they differ from the parameters asked for (hpcc
        silently runs its default input when hpccinf.txt is invalid), or when a value is not a
        number."""
        kv = hpcc_summary(stdout)
        want = {"HPL_N": params["n"], "HPL_NB": params["nb"], "HPL_nprow": params["p"],
                "HPL_npcol": params["q"], "CommWorldProcs": self.ranks(params)}
        got = {}
        for key, expected in want.items():
            try:
                got[key] = int(float(kv[key]))
            except (KeyError, ValueError):
                raise ParseError(f"hpcc: the summary has no usable {key}") from None
        if got != want:
            echoed = (f"N={got['HPL_N']} NB={got['HPL_NB']} P={got['HPL_nprow']} "
                      f"Q={got['HPL_npcol']} ranks={got['CommWorldProcs']}")
            asked = (f"N={want['HPL_N']} NB={want['HPL_NB']} P={want['HPL_nprow']} "
                     f"Q={want['HPL_npcol']} ranks={want['CommWorldProcs']}")
            raise ParseError(f"hpcc ran with {echoed}, not the requested {asked}: hpcc silently "
                             "falls back to its default input when hpccinf.txt is invalid")
        ok = returncode == 0 and kv.get("Success") == "1"
        failed = HPL_FAILED_COUNT_RE.search(stdout)
        hpl_ok = not HPL_FAILED_RE.search(stdout) and not (failed and int(failed.group(1)) > 0)
        try:
            ra_ok = float(kv.get("MPIRandomAccess_ErrorsFraction", "0")) <= \
                RANDOMACCESS_MAX_ERROR_FRACTION
        except ValueError:
            ra_ok = False
        samples = []
        for k in HPCC_KEYS:
            raw = kv.get(k.key)
            if raw is None:
                continue
            try:
                value = float(raw)
            except ValueError:
                raise ParseError(f"hpcc: {k.key}={raw!r} is not a number") from None
            if value < 0:  # -1: test not run (e.g. latency/bandwidth with 1 rank)
                continue
            valid = ok and (hpl_ok if k.hpl else True) and \
                (ra_ok if k.key == "MPIRandomAccess_GUPs" else True)
            m = k.metric
            samples.append(Sample(m.name, value * k.scale, m.unit, m.higher_is_better, valid))
        return samples


# --------------------------------------------------------------------------------------------
# MPI micro-benchmarks (kernels/vhpc-osu.c)


def size_list(raw: Any) -> str:
    """Param converter for message sizes: ``""`` (the default doubling series), or a list / comma-
    separated string of byte counts ("8,1024,1048576") → canonical "8,1024,1048576".  Raises
    ValueError for an item that is not an integer in 0..2**30 bytes, a repeated size or more than
    64 sizes."""
    if raw is None or raw == "":
        return ""
    items = raw if isinstance(raw, (list, tuple)) else str(raw).replace(" ", "").split(",")
    sizes = []
    for item in items:
        value = int(item)  # ValueError → "not a valid size_list"
        if value < 0 or value > 1 << 30:
            raise ValueError(item)
        sizes.append(value)
    if len(sizes) != len(set(sizes)) or len(sizes) > 64:
        raise ValueError(raw)
    return ",".join(map(str, sizes))


size_list.__name__ = "list of byte sizes (e.g. 8,1024; at most 64, no repeats)"


def doubling(min_size: int, max_size: int) -> list[int]:
    """OSU's size series: min_size (0 → 0, 1, 2, 4, ...) doubling up to max_size."""
    out, s = [], min_size
    while s <= max_size:
        out.append(s)
        s = s * 2 if s else 1
    return out


#: The OSU tests' kernel (kernels/vhpc-osu.c): one MPI program, a test per ``-b``.
OSU_KERNEL = Kernel("vhpc-osu", "mpi")


@dataclass(frozen=True)
class OsuBenchmark(Benchmark):
    """One test of ``vhpc-osu`` (OSU Micro-Benchmarks methodology; see kernels/vhpc-osu.c).

    test: the kernel's ``-b`` value (latency, multi-lat, bw, bibw, or the collective named by
    the ``op`` param when ``test == "coll"``).  Metrics are per message size: ``prefixes`` maps
    a result-key prefix (``lat``, ``bw_avg``, ...) to (unit, higher_is_better); the sample name
    is ``<prefix>_<size>`` (barrier: just the prefix).  ``min_size``: start of the default
    doubling series (0 for latency tests).  Warm-up iterations are iters/10 (at least 1).

    parse raises ParseError when the result line lacks a requested size or belongs to another
    test; samples are invalid when the data check failed (valid=0) or the exit status is not 0.
    """

    name: str = ""
    summary: str = ""
    provenance: str = ""
    verification: str = "received payloads of the last iteration checked against the sender's " \
                        "pattern (allreduce: the exact sum)"
    test: str = "latency"
    kernels: tuple[Kernel, ...] = (OSU_KERNEL,)
    min_size: int = 0
    prefixes: Mapping[str, tuple[str, bool]] = field(default_factory=dict)
    params: tuple[Param, ...] = ()
    metrics: tuple[Metric, ...] = ()
    timeout: float = 600.0
    timing: str = ""

    def kernel_test(self, params: Mapping[str, Any]) -> str:
        """The kernel's ``-b`` value: the ``op`` parameter for a collective (``test == "coll"``),
        else :attr:`test`."""
        return params["op"] if self.test == "coll" else self.test

    def nranks(self, params: Mapping[str, Any]) -> int:
        """MPI ranks of a trial: two per pair when the test takes ``pairs``, else ``ranks``
        (default 2)."""
        if "pairs" in params:
            return 2 * params["pairs"]
        return params.get("ranks") or 2

    def sizes(self, params: Mapping[str, Any]) -> list[int]:
        """Message sizes the trial measures ([] for barrier, which has none)."""
        test = self.kernel_test(params)
        if test == "barrier":
            return []
        if params.get("sizes"):
            return [int(s) for s in params["sizes"].split(",")]
        return doubling(4 if test == "allreduce" else self.min_size, params["max_size"])

    def resolve(self, overrides=None):
        """As :meth:`Benchmark.resolve`, plus the size rules of the chosen test.  Raises
        BenchmarkError when the sizes (bytes) are empty for a test other than barrier, hold 0 for a
        bandwidth test or a collective that moves data, or are not multiples of 4 for allreduce (it
        sums 4-byte floats)."""
        values = super().resolve(overrides)
        test = self.kernel_test(values)
        sizes = self.sizes(values)
        if test != "barrier" and not sizes:
            raise BenchmarkError(f"{self.name}: max_size={values.get('max_size')} gives no "
                                 "message sizes: raise max_size")
        if test in ("bw", "bibw", "allreduce", "bcast", "alltoall") and 0 in sizes:
            raise BenchmarkError(f"{self.name}: {test} needs sizes of at least 1 byte: drop 0")
        if test == "allreduce" and any(s % 4 for s in sizes):
            raise BenchmarkError(f"{self.name}: allreduce sums 4-byte floats: give sizes that "
                                 "are multiples of 4")
        return values

    def command(self, params, ctx):
        """argv of one trial: ``mpirun ... vhpc-osu -b test -i iters -I iters_large -w warm-up -u
        warm-up-large`` (warm-up: a tenth of the timed iterations, at least 1), ``-s`` with the
        sizes in bytes (not for barrier), and ``-W window -T tests`` for the tests that take a
        window."""
        test = self.kernel_test(params)
        iters, iters_large = params["iters"], params["iters_large"]
        argv = [str(ctx.bindir / self.binary), "-b", test,
                "-i", str(iters), "-I", str(iters_large),
                "-w", str(max(1, iters // 10)), "-u", str(max(1, iters_large // 10))]
        if test != "barrier":
            argv += ["-s", ",".join(map(str, self.sizes(params)))]
        if "window" in params:
            argv += ["-W", str(params["window"]), "-T", str(params["tests"])]
        return self.launch(params, ctx).argv() + argv

    def launch(self, params, ctx):
        """One single-threaded rank per core (:mod:`vhpc.benchmarks.mpilaunch`)."""
        return Launch(self.nranks(params), 1, params.get("mpi", "openmpi"), ctx.ncpus,
                      cpuset=ctx.cpuset)

    def environ(self, params, ctx):
        """The launch's environment variables (:meth:`vhpc.benchmarks.mpilaunch.Launch.environ`)."""
        return self.launch(params, ctx).environ()

    def parse(self, params, stdout, stderr, returncode):
        """One sample per result prefix (:attr:`prefixes`, with its unit: microseconds for
        latencies, MB/s for bandwidths) and message size, named ``<prefix>_<size>`` (``<prefix>``
        alone for barrier), from the VHPC-RESULT line; valid when it says ``valid=1`` and the exit
        status is 0.  Raises ParseError when there is no result line, it is for another test, or a
        value is missing or not a number."""
        pairs = parse_result_line(stdout)
        test = self.kernel_test(params)
        if pairs.get("test") != test:
            raise ParseError(f"{self.name}: result line is for test {pairs.get('test')!r}, "
                             f"expected {test!r}")
        valid = pairs.get("valid") == "1" and returncode == 0
        keys = [""] if test == "barrier" else [f"_{s}" for s in self.sizes(params)]
        samples = []
        for suffix in keys:
            for prefix, (unit, higher) in self.prefixes.items():
                key = prefix + suffix
                value = result_value(self.name, pairs, key)
                samples.append(Sample(key, value, unit, higher, valid))
        return samples


def _osu_params(max_size: int, iters: int, iters_large: int) -> tuple[Param, ...]:
    return (
        Param("max_size", max_size, int, "largest message in bytes (sizes double up to it)",
              minimum=0),
        Param("sizes", "", size_list, "explicit sizes in bytes, e.g. 8,1024 (overrides max_size)"),
        Param("iters", iters, int, "timed iterations for sizes <= 8 KiB", minimum=1),
        Param("iters_large", iters_large, int, "timed iterations for sizes > 8 KiB", minimum=1),
        MPI_PARAM,
    )


def _pattern_metrics(prefixes: Mapping[str, tuple[str, bool]], what: Mapping[str, str],
                     sized: bool = True) -> tuple[Metric, ...]:
    return tuple(Metric(f"{p}_<size>" if sized else p, unit, higher, what[p])
                 for p, (unit, higher) in prefixes.items())


LAT = {"lat": ("us", False)}
BW = {"bw_avg": ("MB/s", True), "bw_max": ("MB/s", True), "optime": ("us", False)}
BW_WHAT = {"bw_avg": "mean bandwidth over tests at <size> bytes (1e6 B/s)",
           "bw_max": "maximum bandwidth over tests at <size> bytes",
           "optime": "mean over tests of the longest per-operation time (Presta OpTime)"}
MLAT = {"lat": ("us", False), "max": ("us", False)}
COLL = {"avg": ("us", False), "min": ("us", False), "max": ("us", False)}
COLL_WHAT = {"avg": "mean over ranks of the per-rank mean call time at <size> bytes",
             "min": "fastest rank's mean call time", "max": "slowest rank's mean call time"}

#: How the OSU tests time (their ``timing``, with what each iteration holds between the two).
OSU_TIMING = ("every timed iteration is timed on its own (MPI_Wtime before and after it) and the "
              "times are summed, as OSU 7.4 does ({}); why: OSU 7.4 measures so, and timing the "
              "whole loop once leaves out one clock read per iteration, which made the 8-byte "
              "shared-memory latency look about 12 % lower than osu_latency's")

OSU_LATENCY = OsuBenchmark(
    name="osu-latency",
    summary="MPI ping-pong latency vs message size between 2 ranks (osu_latency method)",
    provenance="seed 001 Fig. 1-2 (Presta), seed 004 Fig. 1",
    test="latency",
    timing=OSU_TIMING.format("one round trip per iteration, on the initiating rank"),
    prefixes=LAT,
    params=_osu_params(1 << 22, 1000, 100),
    metrics=_pattern_metrics(LAT, {"lat": "one-way latency at <size> bytes, t/(2 iters)"}),
)

OSU_BW = OsuBenchmark(
    name="osu-bw",
    summary="MPI unidirectional windowed bandwidth vs size, repeated tests (osu_bw + Presta Com)",
    provenance="seed 001 Fig. 1 and 3 (Presta Com: average, maximum, OpTime)",
    test="bw",
    timing=OSU_TIMING.format("one window per iteration, on every rank"),
    min_size=1,
    prefixes=BW,
    # OSU 7.4 osu_util.h: BW_LOOP_SMALL 100, BW_LOOP_LARGE 20 (skip 10 / 2), window 64
    params=_osu_params(1 << 22, 100, 20) + (
        Param("window", 64, int, "non-blocking sends in flight per window", minimum=1),
        Param("tests", 3, int, "repeated tests per size (average / maximum over them)", minimum=1),
    ),
    metrics=_pattern_metrics(BW, BW_WHAT),
)

OSU_BIBW = OsuBenchmark(
    name="osu-bibw",
    summary="MPI bidirectional windowed bandwidth vs size, repeated tests (osu_bibw + Presta Com)",
    provenance="seed 001 Fig. 1-3 (Presta Com bidirectional: average, maximum, OpTime)",
    test="bibw",
    timing=OSU_TIMING.format("one window per iteration, on every rank"),
    min_size=1,
    prefixes=BW,
    params=OSU_BW.params,
    metrics=_pattern_metrics(BW, BW_WHAT),
)

OSU_MULTI_LAT = OsuBenchmark(
    name="osu-multi-lat",
    summary="MPI ping-pong latency with several pairs at once (osu_multi_lat method)",
    provenance="seed 001 Fig. 4 (Presta Laten: latency vs number of processes)",
    test="multi-lat",
    timing=OSU_TIMING.format("one round trip per iteration, on each initiating rank"),
    prefixes=MLAT,
    params=(Param("pairs", 1, int, "communicating pairs (2*pairs ranks)", minimum=1),)
    + _osu_params(1 << 20, 1000, 100),
    metrics=_pattern_metrics(MLAT, {"lat": "one-way latency at <size> bytes, mean over pairs",
                                    "max": "one-way latency, slowest pair"}),
)

OSU_COLL = OsuBenchmark(
    name="osu-coll",
    summary="MPI collective latency vs size: Barrier, Allreduce, Bcast, Alltoall (OSU method)",
    provenance="seed 004 Fig. 2-5 (collectives vs process count)",
    test="coll",
    timing=OSU_TIMING.format("one call per iteration, then an untimed MPI_Barrier; barrier "
                             "calls back to back"),
    min_size=1,
    prefixes=COLL,
    params=(
        Param("op", "allreduce", str, "collective", choices=("barrier", "allreduce", "bcast",
                                                               "alltoall")),
        Param("ranks", 2, int, "MPI ranks", minimum=2),
    ) + _osu_params(1 << 20, 500, 50),
    metrics=_pattern_metrics(COLL, COLL_WHAT) + _pattern_metrics(
        COLL, {k: v.replace(" at <size> bytes", "") + " (barrier)" for k, v in COLL_WHAT.items()},
        sized=False),
)

# --------------------------------------------------------------------------------------------
# Linpack (kernels/vhpc-linpack.c) and HPCCG (kernels/vhpc-hpccg.c)


@dataclass(frozen=True)
class BlasKernelBenchmark(KernelBenchmark):
    """A kernel on OpenBLAS: ``threads_param`` sets OPENBLAS_NUM_THREADS (and OMP_NUM_THREADS)."""


    def environ(self, params, ctx):
        """``OPENBLAS_NUM_THREADS`` and ``OMP_NUM_THREADS`` both set to the thread parameter (the
        environment's CPUs when unset; 1 without a thread parameter)."""
        t = str(self.value(params, self.threads_param, ctx)) if self.threads_param else "1"
        return {"OPENBLAS_NUM_THREADS": t, "OMP_NUM_THREADS": t}


LINPACK = BlasKernelBenchmark(
    name="linpack",
    summary="Dense LU solve of a random N x N system (LAPACKE dgetrf/dgetrs on OpenBLAS)",
    provenance="seed 001 Fig. 5 (Linpack 3000x3000: factor, solve, total time, Mflops)",
    verification="normalized residual ||Ax-b||/(||A|| ||x|| N eps) < 16 (infinity norms)",
    timing="one wall-clock interval each around dgetrf and dgetrs, as Youseff et al. (VTDC "
           "2006, Fig. 5) report factor, solve and total time",
    kernel=Kernel("vhpc-linpack", libraries=(LAPACKE,), ldlibs="-llapacke -lopenblas"),
    params=(
        Param("n", 1000, int, "matrix order (seed 001 used 3000)", minimum=1),
        Param("threads", 1, int, "OpenBLAS threads (1 = the seed's serial Linpack)", minimum=1),
    ),
    flags={"n": "-n"},
    threads_param="threads",
    metrics=(
        Metric("factor_s", "s", False, "LU factorization time (dgetrf)"),
        Metric("solve_s", "s", False, "back-solve time (dgetrs)"),
        Metric("total_s", "s", False, "factor + solve"),
        Metric("mflops", "Mflop/s", True, "(2/3 N^3 + 2 N^2) / total time",
               inverse_of="total_s"),
    ),
)

#: Bytes one HPCCG row holds (kernels/vhpc-hpccg.c BYTES_PER_ROW: 27 x (8 + 4) + 8 + 5 x 8).
HPCCG_ROW_BYTES = 372
#: What ``nx``/``ny``/``nz`` = 0 means (kernels/vhpc-hpccg.c ``auto_edge``).
HPCCG_AUTO = ("one cube per rank, the same for every rank count (weak scaling), whose edge "
              "puts one rank's matrix and vectors (372 bytes a row) at 4x the last-level "
              "cache, as STREAM's auto size, at least 32; the cache of the host vhpc runs on, "
              "passed to the kernel, so every environment solves one grid")


@dataclass(frozen=True)
class HpccgBenchmark(KernelBenchmark):
    """HPCCG with its grid sized from the last-level cache by default (:data:`HPCCG_AUTO`)."""

    def auto_values(self, params, llc_owner):
        """The auto grid as ``--dry-run`` shows it: this host's edge in every environment
        (:meth:`command` passes this host's LLC to the kernel)."""
        from vhpc.benchmarks.quick import llc_bytes

        auto = [k for k in ("nx", "ny", "nz") if not params.get(k)]
        if not auto:
            return {}
        edge = hpccg_edge(llc_bytes())
        return {k: f"{edge} (auto)" for k in auto}

    def command(self, params, ctx):
        """The kernel's command; with an edge left to auto, ``-L`` this host's LLC
        (:func:`vhpc.benchmarks.quick.llc_bytes`, read where vhpc runs), so every environment
        of a campaign solves the same grid: sized from its own cache, a guest (emulated LLC
        16 MiB beside the host's 32 MiB) solved 45³ beside native's 57³ at ranks=2."""
        from vhpc.benchmarks.quick import llc_bytes

        argv = super().command(params, ctx)
        llc = llc_bytes() if not all(params.get(k) for k in ("nx", "ny", "nz")) else 0
        return argv + (["-L", str(llc)] if llc > 0 else [])


def hpccg_edge(llc: int) -> int:
    """The kernel's auto edge of each rank's local grid (kernels/vhpc-hpccg.c ``auto_edge``):
    the smallest cube edge e with e³ x 372 bytes >= 4 x ``llc`` bytes, at least 32.  One edge
    for every rank count, so a rank sweep scales weakly (HPCCG's nx, ny, nz are per process)."""
    edge = 32
    while edge ** 3 * HPCCG_ROW_BYTES < 4 * llc:
        edge += 1
    return edge


HPCCG = HpccgBenchmark(
    name="hpccg",
    summary="HPCCG: unpreconditioned CG on a 27-point 3-D stencil, MPI + OpenMP, weak scaling",
    provenance="seed 004 Fig. 6 (HPCCG MFLOPS vs node count)",
    verification="tol > 0: converged to ||r||/||b|| <= tol and recomputed ||b-Ax||/||b|| <= 2 "
                 "tol; tol = 0 (HPCCG's fixed iterations): recomputed residual <= 2e-9 "
                 "(exact solution all ones)",
    timing="one wall-clock interval around the whole CG (set-up residual included), the "
           "slowest rank's, and per phase the calls' own intervals summed, as Mantevo HPCCG "
           "times; why: mflops is HPCCG's figure (27 flops per row) over HPCCG's time",
    kernel=Kernel("vhpc-hpccg", "mpi+openmp"),
    params=(
        Param("nx", 0, int, "local grid points in x per rank (0: auto: " + HPCCG_AUTO + ")",
              minimum=0),
        Param("ny", 0, int, "local grid points in y per rank (0: auto)", minimum=0),
        Param("nz", 0, int, "local grid points in z per rank, blocks stacked in z (0: auto)",
              minimum=0),
        Param("max_iter", 149, int, "CG iterations (maximum when tol > 0); 149 as Mantevo HPCCG",
              minimum=1),
        Param("tol", 0.0, float, "relative residual to reach; 0 = exactly max_iter iterations, "
              "as HPCCG runs", minimum=0.0),
        Param("ranks", 2, int, "MPI ranks", minimum=1),
        Param("threads", 1, int, "OpenMP threads per rank", minimum=1),
        MPI_PARAM,
    ),
    flags={"nx": "-x", "ny": "-y", "nz": "-z", "max_iter": "-i", "tol": "-t"},
    mpi_ranks="ranks",
    threads_param="threads",
    metrics=(
        Metric("mflops", "Mflop/s", True, "CG flops counted as Mantevo HPCCG counts them (27 "
               "per row: 64 per row and iteration) / CG time (slowest rank); HPCCG's 'MFLOPS "
               "Summary: Total'", inverse_of="time_s"),
        Metric("mflops_actual", "Mflop/s", True, "the flops actually done (non-zeros used, "
               "set-up included) / CG time: below mflops by the boundary rows' missing "
               "neighbours"),
        Metric("ddot_mflops", "Mflop/s", True, "dot products (incl. MPI_Allreduce), HPCCG's "
               "count"),
        Metric("waxpby_mflops", "Mflop/s", True, "vector updates w = a x + b y, HPCCG's count"),
        Metric("sparsemv_mflops", "Mflop/s", True, "sparse matrix-vector products (incl. halo), "
               "HPCCG's count (27 per row)"),
        Metric("time_s", "s", False, "CG time, slowest rank"),
        Metric("iterations", "count", False, "CG iterations to reach tol"),
        Metric("residual", "1", False, "final ||r||/||b||"),
    ),
)

#: Every benchmark of this module, in the order listings show them.
STANDARD_SUITE: tuple[Benchmark, ...] = (
    HpccBenchmark(), OSU_LATENCY, OSU_BW, OSU_BIBW, OSU_MULTI_LAT, OSU_COLL, LINPACK, HPCCG,
)
register(suite("standard", "the codes the seeds ran: HPC Challenge (Debian's hpcc), OSU "
               "point-to-point and collectives, Linpack, HPCCG", 20), *STANDARD_SUITE)

__all__ = ["STANDARD_SUITE", "HpccBenchmark", "OsuBenchmark", "BlasKernelBenchmark",
           "hpcc_summary", "size_list", "doubling", "HPCC_KEYS", "HPCC_RUNNER"]
