"""The read-back protocol of processes vhpc starts on a host (native with a NUMA binding, ssh).

Each trial runs under ``vhpc-run.sh`` (beside this module), which samples the benchmark's
processes while they run and prints, after a :data:`READBACK_MARK` line, one line per process:
``pid=P comm=C cpus=LIST N0=pages N1=pages ...`` (allowed CPUs from ``/proc/PID/status``,
resident pages per node from ``/proc/PID/numa_maps``, proc(5)).  The wrapper travels with the
kernel sources to a machine that builds them itself (:data:`WRAPPERS`), into a folder named by
:func:`remote_kernel_hash`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vhpc.benchmarks.apps.common import RANKRUN
from vhpc.benchmarks.base import source_hash

READBACK_MARK = "---vhpc-readback---"
#: The wrapper script (POSIX sh), shipped as package data.
RUN_SCRIPT = Path(__file__).resolve().with_name("vhpc-run.sh")
#: What travels with the kernel sources to a machine that builds them itself (an ssh host, a
#: booted image): the run wrapper and the MPI rank wrapper ``rankrun.py``.
WRAPPERS = (RUN_SCRIPT, RANKRUN)


def remote_kernel_hash() -> str:
    """The name of the kernel folder on a machine that builds the kernels itself
    (``kernels-<hash>``): :func:`~vhpc.benchmarks.base.source_hash` of the sources and the
    :data:`WRAPPERS` now.  The guests of one vcluster share the one taken when it was made,
    so that its MPI ranks find one path.  Raises OSError when a file cannot be read."""
    return source_hash(also=WRAPPERS)


def parse_readback(text: str) -> list[dict[str, Any]]:
    """The wrapper's read-back lines ``pid=P comm=C cpus=LIST N0=pages N1=pages ...`` →
    ``[{"pid": P, "comm": C, "cpus": LIST, "pages_per_node": {"0": pages, ...}}]``."""
    out = []
    for line in text.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "pid" not in fields:
            continue
        pages = {k[1:]: int(v) for k, v in fields.items() if re.fullmatch(r"N\d+", k)}
        out.append({"pid": int(fields["pid"]), "comm": fields.get("comm"),
                    "cpus": fields.get("cpus"), "pages_per_node": pages})
    return out
