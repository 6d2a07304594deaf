"""``ivshmem-pingpong``: latency and bandwidth over shared memory between two processes
(kernels/vhpc-ivshmem-pingpong.c, OSU method: warm-up, timed iterations, sizes 8 B..4 MiB).

The two processes are started by ``mpirun -np 2`` (no MPI traffic: the launcher only places
them), so the same command runs natively and in one VM over POSIX shared memory, and in a
``vcluster:net=ivshmem`` with one process per guest over the ivshmem PCI BAR — one table then
shows native shm / in-VM shm / cross-VM ivshmem next to ``pingpong`` / ``osu-latency`` over the
guests' virtio network (Ibrahim et al., CCGrid 2011, Sec. VIII: shared memory bypasses the
network stack).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Mapping

from vhpc.benchmarks.base import (MPI_PARAM, Benchmark, BenchmarkError, Param, ParseError,
                                  RunContext, parse_result_line, register, result_value, suite)
from vhpc.benchmarks.kernel import Kernel
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample

TRANSPORTS = ("auto", "shm", "ivshmem")


def sizes(max_size: int) -> list[int]:
    """The kernel's message sizes: 8 B doubling up to ``max_size``."""
    out, s = [], 8
    while s <= max_size:
        out.append(s)
        s *= 2
    return out


@dataclass(frozen=True)
class IvshmemPingpong(Benchmark):
    """See the module docstring.  parse raises ParseError without a result line; samples are
    invalid when the kernel's data check failed or it exited non-zero."""

    name: str = "ivshmem-pingpong"
    summary: str = ("shared-memory ping-pong latency and streaming bandwidth vs message size "
                    "between 2 processes: ivshmem across VMs, POSIX shm natively / in one VM")
    provenance: str = "seed 000 Sec. VIII, Fig. 12 (inter-VM shared memory vs virtio-net)"
    verification: str = ("sequence stamp of every message and full payload pattern of the last "
                         "message of each size")
    timing: str = ("the timed round trips (windows) as one interval, divided by their number; "
                   "why: no MPI in the path and no reference code to follow; it omits the "
                   "per-iteration clock read that osu-latency includes (tens of ns), so compare "
                   "it with osu-latency at larger sizes")
    kernels: tuple[Kernel, ...] = (Kernel("vhpc-ivshmem-pingpong"),)
    params: tuple[Param, ...] = (
        Param("transport", "auto", str, "auto (ivshmem when the device exists, else shm), shm, "
              "ivshmem", choices=TRANSPORTS),
        Param("max_size", 1 << 22, int, "largest message in bytes (sizes double from 8)",
              minimum=8),
        Param("iters", 1000, int, "timed iterations for sizes <= 8 KiB", minimum=1),
        Param("iters_large", 100, int, "timed iterations for sizes > 8 KiB", minimum=1),
        Param("window", 64, int, "messages per bandwidth iteration (osu_bw's window)", minimum=1),
        MPI_PARAM,
    )
    metrics: tuple[Metric, ...] = (
        Metric("lat_<size>", "us", False, "one-way latency at <size> bytes"),
        Metric("bw_<size>", "MB/s", True, "streaming bandwidth at <size> bytes (1e6 B/s)"),
    )
    timeout: float = 600.0

    def resolve(self, overrides=None):
        """As :meth:`Benchmark.resolve`, and ``max_size`` (bytes) at most 4 MiB (4194304): two
        buffers of that size must fit the kernel's 16 MiB shared region.  Raises BenchmarkError
        otherwise."""
        values = super().resolve(overrides)
        if values["max_size"] > 1 << 22:
            raise BenchmarkError(f"{self.name}: max_size={values['max_size']} does not fit the "
                                 "16 MiB shared region (2 buffers): use at most 4194304")
        return values

    def launch(self, params: Mapping[str, Any], ctx: RunContext) -> Launch:
        """Two single-threaded ranks, bound as every vhpc MPI launch (docs/mpi.md)."""
        return Launch(2, 1, params.get("mpi", "openmpi"), ctx.ncpus, cpuset=ctx.cpuset)

    def environ(self, params: Mapping[str, Any], ctx: RunContext) -> dict[str, str]:
        """The launch's environment variables (:meth:`vhpc.benchmarks.mpilaunch.Launch.environ`)."""
        return self.launch(params, ctx).environ()

    def command(self, params: Mapping[str, Any], ctx: RunContext) -> list[str]:
        """``mpirun -np 2 ... vhpc-ivshmem-pingpong -t transport -m max_size -i iters -I
        iters_large -W window -j id``: sizes in bytes, and a fresh random 16-hex-digit ``id`` per
        run so that a region left by another run is never taken for this one's."""
        return self.launch(params, ctx).argv() + [
            str(ctx.bindir / self.binary), "-t", params["transport"],
            "-m", str(params["max_size"]), "-i", str(params["iters"]),
            "-I", str(params["iters_large"]), "-W", str(params["window"]),
            "-j", secrets.token_hex(8)]  # one id per run: a reused region is never mistaken

    def parse(self, params, stdout, stderr, returncode):
        """Samples ``lat_<size>`` (one-way latency, microseconds) and ``bw_<size>`` (MB/s, 1e6
        bytes a second) for each size of :func:`sizes` up to ``max_size``, from the VHPC-RESULT
        line; valid when it says ``valid=1`` and the exit status is 0.  Raises ParseError when the
        result line, its ``transport`` or a size's value is missing, or a value is not a number."""
        pairs = parse_result_line(stdout)
        if "transport" not in pairs:
            raise ParseError(f"{self.name}: no result line")
        valid = pairs.get("valid") == "1" and returncode == 0
        out = []
        for s in sizes(params["max_size"]):
            out.append(Sample(f"lat_{s}", result_value(self.name, pairs, f"lat_{s}"), "us",
                              False, valid))
            out.append(Sample(f"bw_{s}", result_value(self.name, pairs, f"bw_{s}"), "MB/s",
                              True, valid))
        return out


register(suite("ivshmem", "shared memory between processes and between VMs (ivshmem)", 50),
         IvshmemPingpong())
