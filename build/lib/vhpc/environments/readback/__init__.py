"""The read-back protocol of processes vhpc starts on a host (native with a NUMA binding, ssh).

Each trial runs under ``vhpc-run.sh`` (beside this module), which samples the benchmark's
processes while they run and prints, after a :data:`READBACK_MARK` line, one line per process:
``pid=P comm=C cpus=LIST N0=pages N1=pages ...`` (allowed CPUs from ``/proc/PID/status``,
resident pages per node from ``/proc/PID/numa_maps``, proc(5)).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

READBACK_MARK = "---vhpc-readback---"
#: The wrapper script (POSIX sh), shipped as package data.
RUN_SCRIPT = Path(__file__).resolve().with_name("vhpc-run.sh")


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
