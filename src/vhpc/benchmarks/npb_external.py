"""``npb-external``: run the user's own NAS Parallel Benchmarks build (any of BT, SP, LU, CG, EP,
FT, IS, MG, UA, DT; MPI, OpenMP or serial) and parse NPB's standard report.

Parameters: ``binary`` (path of an NPB executable, e.g. ``~/NPB3.4-OMP/bin/cg.C.x``) or
``dir`` + ``kernel`` + ``class`` (NPB's naming convention ``<dir>/<kernel>.<CLASS>.x``);
``launcher`` ``omp`` (OMP_NUM_THREADS), ``mpi`` (``mpirun -np ranks``) or ``serial``.

The report block NPB prints at the end (NPB 3.x ``print_results.f90`` / ``c_print_results.c``;
the C printer, used by IS and DT, omits the period after "Completed", and DT names the graph:
``DT_BH.S Benchmark Completed``)::

     CG Benchmark Completed.
     Class           =                        A
     Size            =                    14000      (grid kernels: "  64x  64x  64")
     Iterations      =                       15
     Time in seconds =                     0.33
     Total threads   =                        6      (MPI builds: Total processes)
     Mop/s total     =                  4521.19
     Verification    =               SUCCESSFUL      (or UNSUCCESSFUL)

Metrics: ``time`` (s, lower is better) and ``mops`` (Mop/s total, higher is better).  A report
saying UNSUCCESSFUL, or a non-zero exit, gives invalid samples; a report for another class
than the one asked for, or no report at all, is a ParseError.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from vhpc.benchmarks.base import (MPI_IMPLS, Benchmark, BenchmarkError, Param, ParseError, register,
                                  suite)
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample

KERNELS = ("bt", "sp", "lu", "cg", "ep", "ft", "is", "mg", "ua", "dt")

_FIELDS = {
    # Fortran print_results: "CG Benchmark Completed."; C c_print_results (IS): no period;
    # DT: "DT_BH.S Benchmark Completed" (graph and class in the name)
    "benchmark": r"^\s*(\S+) Benchmark Completed\.?[ \t]*$",
    "class": r"^\s*Class\s*=\s*(\S+)",
    "size": r"^\s*Size\s*=\s*(.+?)\s*$",
    "iterations": r"^\s*Iterations\s*=\s*(\d+)",
    "time": r"^\s*Time in seconds\s*=\s*(\S+)",
    "threads": r"^\s*Total threads\s*=\s*(\d+)",
    "processes": r"^\s*Total processes\s*=\s*(\d+)",
    "mops": r"^\s*Mop/s total\s*=\s*(\S+)",
    "verification": r"^\s*Verification\s*=\s*(\S+)",
}


def parse_npb_report(text: str) -> dict[str, str]:
    """The fields of the last NPB report block in ``text`` (keys as in ``_FIELDS``: benchmark,
    class, size, iterations, time, threads or processes, mops, verification).  Raises
    ParseError when there is no ``Benchmark Completed`` block."""
    starts = [m.start() for m in re.finditer(_FIELDS["benchmark"], text, re.M)]
    if not starts:
        raise ParseError("no NPB report ('... Benchmark Completed') in the output")
    block = text[starts[-1]:]
    out = {}
    for key, pattern in _FIELDS.items():
        m = re.search(pattern, block, re.M)
        if m:
            out[key] = m.group(1)
    return out


class NpbExternal(Benchmark):
    """See the module docstring."""

    name = "npb-external"
    summary = "your own NPB build (BT, SP, LU, CG, EP, FT, IS, MG, UA, DT): NPB's report parsed"
    provenance = "seed 000 Fig. 2/4-6, seed 003 Fig. 3-5 (NPB on VMs)"
    verification = "NPB's own: 'Verification = SUCCESSFUL' in the report"
    timing = "the NPB binary's own timer and Mop/s, parsed from its report"
    params = (
        Param("binary", "", str, "path of the NPB executable (or give dir, kernel and class)"),
        Param("dir", "", str, "NPB bin directory holding <kernel>.<CLASS>.x"),
        Param("kernel", "", str, "NPB benchmark", choices=("",) + KERNELS),
        Param("class", "", str, "NPB class; checked against the report when given"),
        Param("launcher", "omp", str, "how to start it", choices=("omp", "mpi", "serial")),
        Param("args", "", str, "arguments after the executable, space-separated (DT: the "
              "graph, BH, WH or SH)"),
        Param("ranks", None, int, "MPI ranks (launcher=mpi; default: all CPUs)", minimum=1),
        Param("threads", None, int, "OpenMP threads (launcher=omp: default all CPUs; "
              "launcher=mpi: per rank, default 1)", minimum=1),
        Param("mpi", "openmpi", str, "launcher=mpi: the MPI your NPB was built with",
              choices=MPI_IMPLS),
    )
    metrics = (
        Metric("time", "s", False, "NPB's timed section"),
        Metric("mops", "Mop/s", True, "Mop/s total as NPB reports it", inverse_of="time"),
    )

    def resolve(self, overrides=None):
        """As :meth:`Benchmark.resolve`, with ``class`` upper-cased.  Raises BenchmarkError unless
        ``binary`` is given, or ``dir``, ``kernel`` and ``class`` all are."""
        p = super().resolve(overrides)
        p["class"] = p["class"].upper()
        if not p["binary"] and not (p["dir"] and p["kernel"] and p["class"]):
            raise BenchmarkError("npb-external: give binary=PATH, or dir=, kernel= and class=")
        return p

    def path(self, params: Mapping[str, Any]) -> str:
        """The executable: ``binary`` or ``<dir>/<kernel>.<CLASS>.x``."""
        if params["binary"]:
            return os.path.expanduser(params["binary"])
        return os.path.join(os.path.expanduser(params["dir"]),
                            f"{params['kernel']}.{params['class']}.x")

    def launch(self, params, ctx):
        """launcher=mpi: ranks bound to cores as vhpc's own MPI kernels
        (:mod:`vhpc.benchmarks.mpilaunch`); ``threads`` per rank (default 1)."""
        if params["launcher"] != "mpi":
            return None
        return Launch(params["ranks"] or ctx.ncpus, params["threads"] or 1, params["mpi"],
                      ctx.ncpus, cpuset=ctx.cpuset)

    def command(self, params, ctx):
        """argv of one trial: the executable (:meth:`path`) and ``args`` split on white space,
        behind the launcher prefix for launcher=mpi."""
        argv = [self.path(params), *params["args"].split()]
        launch = self.launch(params, ctx)
        return launch.argv() + argv if launch else argv

    def environ(self, params, ctx):
        """As vhpc's own NPB: OpenMP threads spread over the CPUs (OMP_PROC_BIND=spread) for
        launcher=omp, each rank's threads inside its cores for launcher=mpi."""
        launch = self.launch(params, ctx)
        if launch is not None:
            return launch.environ()
        if params["launcher"] == "omp":
            return {"OMP_NUM_THREADS": str(params["threads"] or ctx.ncpus),
                    "OMP_PROC_BIND": "spread"}
        return {}

    def parse(self, params, stdout, stderr, returncode):
        """Samples ``time`` (seconds, NPB's timed section) and ``mops`` (Mop/s total) from the last
        NPB report block (:func:`parse_npb_report`); valid when it says ``Verification =
        SUCCESSFUL`` and the exit status is 0.  Raises ParseError when there is no report, it lacks
        the time, Mop/s or verification line, its class or benchmark is not the one asked for, or a
        value is not a number."""
        report = parse_npb_report(stdout)
        want = params.get("class")
        if want and report.get("class", "").upper() != want:
            raise ParseError(f"npb-external: the report is for class {report.get('class')!r}, "
                             f"not {want!r}: check binary=")
        for key in ("time", "mops", "verification"):
            if key not in report:
                raise ParseError(f"npb-external: the NPB report has no {key} line")
        kernel = params.get("kernel") or ""
        got = report.get("benchmark", "").split("_")[0].split(".")[0].lower()
        if kernel and got != kernel:
            raise ParseError(f"npb-external: the report is for {report.get('benchmark')!r}, not "
                             f"{kernel.upper()}: check dir=/kernel=")
        valid = report["verification"] == "SUCCESSFUL" and returncode == 0
        try:
            values = {"time": float(report["time"]), "mops": float(report["mops"])}
        except ValueError:
            raise ParseError("npb-external: time or Mop/s in the report is not a number") from None
        return [Sample(m.name, values[m.name], m.unit, m.higher_is_better, valid)
                for m in self.metrics]


register(suite("npb-external", "an NPB 3.4 you built yourself, run and parsed as vhpc's own", 40),
         NpbExternal())
