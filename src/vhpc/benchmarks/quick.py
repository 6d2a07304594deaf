"""The quick suite: vhpc's own C kernels (kernels/*.c), small defaults that keep a TCG demo short.

| benchmark | serves | metrics |
|---|---|---|
| stream | seed 004 Fig. 13 (HPCC STREAM), seed 003 memory intensity | copy/scale/add/triad GB/s |
| randomaccess | seed 004 Fig. 12-13 (HPCC RandomAccess) | GUP/s |
| pingpong | seed 001 Fig. 1-2, seed 004 Fig. 1 | latency µs, bandwidth MB/s |
| noise | seed 004 Sec. 6 (selfish detour) | detour %, detours/s, max detour µs |
| pagefault | seed 000 Fig. 13 | µs per first-touch fault, private and shared anonymous |
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vhpc.benchmarks.base import (MPI_PARAM, KernelBenchmark, Param, ParseError, parse_result_line,
                                  register, suite)
from vhpc.benchmarks.kernel import Kernel
from vhpc.core.metrics import Metric

THREADS = Param("threads", None, int, "OpenMP threads (default: all CPUs of the environment)", minimum=1)

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")

#: STREAM's rule (stream.c header): "each array must be at least 4 times the size of the
#: available cache memory".
STREAM_CACHE_FACTOR = 4


def llc_bytes(cache_dir: Path = SYSFS_CACHE) -> int:
    """Last-level cache size in bytes as sysfs reports it for cpu0 (the largest ``level`` among
    the ``index*`` caches of type Data or Unified; ``size`` like ``32768K``).  0 when sysfs has
    no cache directory.  Not ``sysconf(_SC_LEVEL3_CACHE_SIZE)``: glibc derives that from CPUID
    and reported 384 MiB on a host whose sysfs and hwloc say 32 MiB."""
    best = (0, 0)
    for index in sorted(cache_dir.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            raw = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or not raw:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(raw[-1], 1)
        size = int(raw.rstrip("KMG")) * unit
        best = max(best, (level, size))
    return best[1]


#: the kernel's floor for an automatic n (kernels/vhpc-stream.c, MIN_AUTO_N)
STREAM_MIN_AUTO_N = 2_000_000


def mem_available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """``MemAvailable`` from /proc/meminfo (proc(5)) in bytes; 0 when unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def stream_auto_n(llc: int | None = None, available: int | None = None) -> int:
    """The ``n`` vhpc-stream picks when none is given, computed as the kernel does
    (kernels/vhpc-stream.c ``auto_n``): 4 × LLC bytes / 8, rounded up to a multiple of 1000,
    at least :data:`STREAM_MIN_AUTO_N`, at most what half of MemAvailable holds in 3 arrays.
    ``llc``/``available`` default to this host's (:func:`llc_bytes`,
    :func:`mem_available_bytes`)."""
    llc = llc_bytes() if llc is None else llc
    available = mem_available_bytes() if available is None else available
    n = (STREAM_CACHE_FACTOR * llc // 8 + 999) // 1000 * 1000
    n = max(n, STREAM_MIN_AUTO_N)
    cap = available // 2 // 3 // 8
    return min(n, cap) if available > 0 else n


@dataclass(frozen=True)
class StreamBenchmark(KernelBenchmark):
    """``stream`` with STREAM's sizing rule: ``n`` unset lets the kernel size each array to at
    least 4x the last-level cache of the host vhpc runs on (passed as ``-L``, so a guest, whose
    emulated cache differs, sizes as native does), at least 2,000,000 elements, at most half of
    the environment's MemAvailable for the 3 arrays.
    The n used, the LLC and whether an explicit n keeps the arrays in cache are stored with the
    trial (``applied["stream"]``; a note in ``diagnostics["notes"]`` when in cache)."""

    def command(self, params, ctx):
        """``n`` when given; else ``-L`` this host's LLC (:func:`llc_bytes`, read where vhpc
        runs), so every environment of a campaign sizes from the same cache: a guest's
        emulated LLC (16 MiB beside the host's 32 MiB here) gave it other arrays."""
        argv = [str(ctx.bindir / self.binary), "-t", str(params["ntimes"])]
        if params.get("n"):
            return argv + ["-n", str(params["n"])]
        llc = llc_bytes()
        return argv + (["-L", str(llc)] if llc > 0 else [])

    def auto_values(self, params, llc_owner):
        """``n`` as the kernel will size it from this host's LLC (:func:`stream_auto_n`; in
        another environment, ``llc_owner`` not None, capped by that environment's memory
        instead of this host's, at run time)."""
        if params.get("n"):
            return {}
        llc = llc_bytes()
        if llc_owner is not None:
            return {"n": f"{stream_auto_n(llc, 0)} (4x this host's LLC {llc / 2**20:.0f} MiB; "
                         f"less if {llc_owner} memory is short)"}
        return {"n": f"{stream_auto_n(llc)} (4x LLC {llc / 2**20:.0f} MiB)"}

    def readback(self, params, ctx, stdout):
        """(applied, diagnostics) for one finished trial: ``applied["stream"]`` holds the array
        length ``n`` (elements of 8 bytes), the last-level cache size ``llc_bytes`` (bytes),
        whether ``n`` was sized automatically (``n_auto``) and whether the arrays are in cache
        (``in_cache``), all read from the VHPC-RESULT line; ``diagnostics["notes"]`` says when each
        array is below :data:`STREAM_CACHE_FACTOR` times the LLC, so that the rates include cache
        bandwidth.  ({}, {}) when the line or its fields are missing."""
        try:
            pairs = parse_result_line(stdout)
            info = {"n": int(pairs["n"]), "llc_bytes": int(pairs["llc_bytes"]),
                    "n_auto": pairs.get("n_auto") == "1", "in_cache": pairs.get("in_cache") == "1"}
        except (ParseError, KeyError, ValueError):
            return {}, {}
        diagnostics = {}
        if info["in_cache"]:
            diagnostics["notes"] = [
                f"stream: n={info['n']} (each array {info['n'] * 8 / 2**20:.1f} MiB) is below "
                f"{STREAM_CACHE_FACTOR}x the last-level cache ({info['llc_bytes'] / 2**20:.1f} "
                "MiB): the rates include cache bandwidth, not memory alone; omit n"]
        return {"stream": info}, diagnostics


STREAM = StreamBenchmark(
    name="stream",
    summary="STREAM copy/scale/add/triad memory bandwidth (McCalpin rules), OpenMP",
    provenance="seed 004 Fig. 13 (HPCC STREAM); seed 003 Fig. 3 memory intensity",
    verification="final arrays checked against the analytically expected values (rel. error <= 1e-13)",
    timing="each kernel timed on its own in every iteration, the first iteration dropped, the "
           "best (minimum) time reported, as McCalpin's stream.c; why: STREAM's rules",
    kernel=Kernel("vhpc-stream", "openmp"),
    params=(
        Param("n", None, int, "elements per array (3 arrays of doubles); default: each array >= "
              "4x the last-level cache of the host vhpc runs on (STREAM's rule), in every "
              "environment", minimum=1000),
        Param("ntimes", 10, int, "repetitions; the first is not counted, best rate reported", minimum=2),
        THREADS,
    ),
    threads_param="threads",
    metrics=(
        Metric("copy_bw", "GB/s", True, "Copy c=a, 16 B/element"),
        Metric("scale_bw", "GB/s", True, "Scale b=s*c, 16 B/element"),
        Metric("add_bw", "GB/s", True, "Add c=a+b, 24 B/element"),
        Metric("triad_bw", "GB/s", True, "Triad a=b+s*c, 24 B/element"),
    ),
)

RANDOMACCESS = KernelBenchmark(
    name="randomaccess",
    summary="HPCC RandomAccess (GUPS): XOR updates at random table locations",
    provenance="seed 004 Fig. 12-13 (HPCC RandomAccess, nested vs shadow paging)",
    verification="updates replayed serially; at most 1 % of table entries may differ",
    timing="one wall-clock interval around all updates, as HPCC RandomAccess (GUP/s = updates "
           "/ time)",
    kernel=Kernel("vhpc-randomaccess", "openmp"),
    params=(Param("table_log2", 20, int, "log2 of the table size in 8-byte words", minimum=10),),
    flags={"table_log2": "-l"},
    metrics=(Metric("gups", "GUP/s", True, "giga-updates per second, 1e-9 * 4 * TableSize / t"),),
)

PINGPONG = KernelBenchmark(
    name="pingpong",
    summary="MPI ping-pong between 2 ranks: one-way latency and windowed bandwidth (OSU method)",
    provenance="seed 001 Fig. 1-2; seed 004 Fig. 1",
    verification="the payload pattern of a received message is checked",
    timing="as osu-latency and osu-bw: each round trip and each window timed on its own and "
           "summed (OSU 7.4); why: the same figure as osu_latency / osu_bw",
    kernel=Kernel("vhpc-pingpong", "mpi"),
    params=(
        Param("lat_size", 8, int, "latency message size in bytes", minimum=0),
        Param("bw_size", 1 << 20, int, "bandwidth message size in bytes", minimum=1),
        Param("iters", 1000, int, "latency iterations", minimum=1),
        Param("ranks", 2, int, "MPI ranks (must be 2)", choices=(2,)),
        MPI_PARAM,
    ),
    flags={"lat_size": "-s", "bw_size": "-S", "iters": "-i"},
    mpi_ranks="ranks",
    metrics=(
        Metric("latency_us", "us", False, "one-way latency at lat_size bytes"),
        Metric("bandwidth_MBps", "MB/s", True, "unidirectional bandwidth at bw_size bytes"),
    ),
)

NOISE = KernelBenchmark(
    name="noise",
    summary="Selfish-detour OS noise: time stolen from a spinning thread",
    provenance="seed 004 Sec. 6 (selfish detour, native vs guest)",
    verification="none (a measurement of interruptions)",
    timing="selfish detour: a spinning thread reads CLOCK_MONOTONIC back to back and counts gaps "
           "above the threshold; why: the method of Lange et al.'s noise measurement (VEE 2011, "
           "Sec. 6)",
    kernel=Kernel("vhpc-noise"),
    params=(Param("duration", 1.0, float, "seconds to spin", minimum=0.05),),
    flags={"duration": "-d"},
    metrics=(
        # 0 on a quiet CPU (no detour in the window): no log scale, compared by differences
        Metric("detour_pct", "%", False, "share of elapsed time spent in detours",
               can_be_zero=True),
        Metric("detours_per_s", "1/s", False, "detours per second", can_be_zero=True),
        Metric("max_detour_us", "us", False, "longest detour", can_be_zero=True),
    ),
)

PAGEFAULT = KernelBenchmark(
    name="pagefault",
    summary="First-touch page-fault latency for private and shared anonymous memory, and "
            "optionally a shared file or device mapping (file=PATH)",
    provenance="seed 000 Fig. 13 (fault latency per memory type and configuration)",
    verification="minor-fault count (getrusage) must cover >= 90 % of the touched pages",
    timing="each mmap + touch + munmap pass as one interval, minus the same pass without the "
           "touch; why: isolates the fault cost from the mapping calls",
    kernel=Kernel("vhpc-pagefault"),
    params=(
        Param("mib", 64, int, "region size in MiB", minimum=1),
        Param("reps", 3, int, "repetitions per mapping kind", minimum=1),
        Param("file", "", str, "existing file or device to map MAP_SHARED as well, e.g. a "
              "tmpfs file in /dev/shm or an ivshmem BAR (resource2); empty: none"),
    ),
    flags={"mib": "-m", "reps": "-r", "file": "-f"},
    metrics=(
        Metric("private_us", "us", False, "µs per fault, private anonymous (malloc) memory"),
        Metric("shared_us", "us", False, "µs per fault, MAP_SHARED anonymous memory"),
        Metric("file_us", "us", False, "µs per fault, MAP_SHARED file/device (only with file=)"),
    ),
    optional=frozenset({"file_us"}),
)

#: The quick suite, run in this order by ``vhpc compare`` and ``vhpc calibrate`` without ``-b``.
QUICK = suite("quick", "vhpc's own C kernels at small sizes; what compare runs without -b", 10,
              default=True)
register(QUICK, STREAM, RANDOMACCESS, PINGPONG, NOISE, PAGEFAULT)
