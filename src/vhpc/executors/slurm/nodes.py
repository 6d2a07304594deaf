"""What the Slurm controller says of a partition's nodes before anything is allocated
(sinfo(1)): for the executor's capacity check and a dry run's check of what a node holds."""

from __future__ import annotations

import subprocess

__all__ = ["partition_nodes"]


def partition_nodes(partition: str | None) -> list[list[str]]:
    """[name, partition, CPUs, state] of each node of ``partition`` (``sinfo -N -o '%N %P %c
    %t'``; None: the default partition, marked * by sinfo); [] when sinfo is missing, does
    not answer within 30 s or fails."""
    argv = ["sinfo", "-h", "-N", "-o", "%N %P %c %t"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    rows = [ln.split() for ln in out.stdout.splitlines() if len(ln.split()) == 4]
    return rows if partition else ([r for r in rows if r[1].endswith("*")] or rows)
