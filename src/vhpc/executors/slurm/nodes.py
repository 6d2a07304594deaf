"""What the Slurm controller says of a partition's nodes before anything is allocated
(sinfo(1)): for the executor's capacity check and a dry run's check of what a node holds;
what each node's kernel says of its free hugepages (read there by one short job step); and
Slurm's time format in minutes (:func:`slurm_minutes`)."""

from __future__ import annotations

import re
import subprocess

__all__ = ["partition_nodes", "usable", "node_hugepages", "partition_hugepages",
           "slurm_minutes"]

#: sinfo node states (their prefixes) in which a node runs no job
NOT_USABLE = ("down", "drain", "fail", "maint", "inval", "unk", "futur")
#: Run on each node: one line per NUMA node and page size, ``NODE PATH FREE`` (sysfs, as
#: vhpc.host.facts.read_hugepages reads this host's), then ``NODE end`` (a node without the
#: tree still answers).
HUGEPAGES_SH = ('for f in /sys/devices/system/node/node*/hugepages/hugepages-*kB/free_hugepages; '
                'do [ -r "$f" ] && echo "$SLURMD_NODENAME $f $(cat "$f")"; done; '
                'echo "$SLURMD_NODENAME end"')
_HP_RE = re.compile(r"^(\S+) /sys/devices/system/node/node\d+/hugepages/hugepages-(\d+)kB/"
                    r"free_hugepages (\d+)$")


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


def usable(rows: list[list[str]]) -> list[str]:
    """Names of the nodes of ``rows`` (:func:`partition_nodes`) whose state lets them run
    jobs (not down, drained, failed, in maintenance...: :data:`NOT_USABLE`)."""
    return [r[0] for r in rows if not r[3].rstrip("*~#!%$@^-").startswith(NOT_USABLE)]


def node_hugepages(nodes: list[str], partition: str | None = None, account: str | None = None,
                   wait: int = 30) -> dict[str, dict[int, int]]:
    """Free hugepages of each of ``nodes``: ``{node: {page_kib: free}}`` summed over the
    node's NUMA nodes, read on the node itself by one job step (``srun --nodelist=...
    --ntasks-per-node=1 sh -c HUGEPAGES_SH``, waiting at most ``wait`` s for the nodes:
    ``--immediate``).  A node that answered without a hugepage tree maps to {}; {} overall when
    srun is missing, fails or does not answer within ``wait`` + 60 s (nothing is known then:
    the node's own check refuses the guest at boot)."""
    if not nodes:
        return {}
    argv = ["srun", f"--immediate={wait}", f"--nodes={len(nodes)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(nodes)}", "--job-name=vhpc-hugepages", "--time=1"]
    argv += [f"--partition={partition}"] if partition else []
    argv += [f"--account={account}"] if account else []
    try:
        out = subprocess.run(argv + ["sh", "-c", HUGEPAGES_SH], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=wait + 60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    found: dict[str, dict[int, int]] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == "end" and parts[0] in nodes:
            found.setdefault(parts[0], {})
        m = _HP_RE.match(line.strip())
        if m and m.group(1) in nodes:
            sizes = found.setdefault(m.group(1), {})
            kib = int(m.group(2))
            sizes[kib] = sizes.get(kib, 0) + int(m.group(3))
    return found


def partition_hugepages(partition: str | None, account: str | None = None
                        ) -> dict[str, dict[int, int]]:
    """:func:`node_hugepages` of every node of ``partition`` that can run jobs (:func:`usable`);
    {} when nothing is known."""
    return node_hugepages(usable(partition_nodes(partition)), partition, account)


def slurm_minutes(text: str) -> int | None:
    """A Slurm time (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``; sinfo's
    ``infinite``) in whole minutes, None for no limit or an unreadable value."""
    text = text.strip()
    if not text or text in ("infinite", "UNLIMITED", "n/a"):
        return None
    days, _, rest = text.rpartition("-") if "-" in text else ("0", "", text)
    try:
        parts = [int(p) for p in rest.split(":")]
        d = int(days)
    except ValueError:
        return None
    if "-" in text:  # D-HH[:MM[:SS]]
        h, m, s = (parts + [0, 0, 0])[:3]
    elif len(parts) == 3:  # HH:MM:SS
        h, m, s = parts
    elif len(parts) == 2:  # MM:SS
        h, (m, s) = 0, parts
    else:  # MM
        h, m, s = 0, parts[0], 0
    return d * 1440 + h * 60 + m + (1 if s else 0)
