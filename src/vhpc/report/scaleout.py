"""Where the ranks of a multi-node campaign ran, read from the stored trials.

Each MPI trial under a Slurm executor stores one entry per rank (``applied.ranks``): its Slurm
node, and natively the host CPUs it may run on (``cpus``), in a guest its guest, vCPU and the
host CPUs of that vCPU (``host_cpus_allowed``, ``host_cpu``).  From them:

* :func:`node_count` — on how many Slurm nodes a trial's ranks ran;
* :func:`shared_cpus` — trials whose ranks on *different* nodes or guests share a host CPU:
  their timings measure contention, not scaling (a test cluster of several slurmd on one
  host, more nodes than CPUs);
* :func:`placement_tables` — one deduplicated table per (benchmark, node count): rank | Slurm
  node | guest | vCPU | host CPU, native and guest rows alike, over all repeats.

Pure functions of stored trials: nothing is run or read from the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


def _applied(trial) -> dict[str, Any]:
    a = getattr(trial, "applied", None)
    if a is None:
        return {}
    return a.model_dump() if hasattr(a, "model_dump") else dict(a)


def _params(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in (text or "").split(",") if "=" in kv)


@dataclass(frozen=True)
class Rank:
    """One rank of one trial: ``rank``, Slurm ``node`` (None: not recorded), ``guest`` and
    ``vcpu`` (None natively), ``cpus``: the host CPUs it (or its vCPU) may run on."""

    rank: int
    node: str | None
    guest: str | None
    vcpu: int | None
    cpus: tuple[int, ...]


def ranks(trial) -> list[Rank]:
    """The ranks ``trial`` recorded (``applied.ranks``), [] when it recorded none."""
    out = []
    for r in _applied(trial).get("ranks") or []:
        if not isinstance(r, dict) or "rank" not in r:
            continue
        cpus = r.get("host_cpus_allowed") if r.get("guest") is not None else r.get("cpus")
        if not cpus:
            one = r.get("host_cpu", r.get("cpu") if r.get("guest") is None else None)
            cpus = [one] if one is not None else []
        out.append(Rank(int(r["rank"]), r.get("node"), r.get("guest"), r.get("vcpu"),
                        tuple(sorted(int(c) for c in cpus))))
    return sorted(out, key=lambda r: r.rank)


def node_count(trial) -> int | None:
    """Slurm nodes ``trial``'s ranks ran on (distinct nodes of its ranks, else the executor's
    ``slurm_nodes``); None when it recorded neither."""
    nodes = {r.node for r in ranks(trial) if r.node}
    if nodes:
        return len(nodes)
    n = _applied(trial).get("slurm_nodes")
    return int(n) if n else None


def nodes_by_ranks(trials: Iterable[Any]) -> dict[tuple[str, int], int]:
    """(benchmark, ``ranks`` parameter) → Slurm nodes its trials ran on (the most seen)."""
    seen: dict[tuple[str, int], dict[int, int]] = {}
    for t in trials:
        r = _params(t.params).get("ranks")
        n = node_count(t)
        if r is None or n is None or not r.isdigit():
            continue
        counts = seen.setdefault((t.benchmark, int(r)), {})
        counts[n] = counts.get(n, 0) + 1
    return {k: max(v, key=v.get) for k, v in seen.items()}


@dataclass(frozen=True)
class Shared:
    """Host CPUs shared between ranks of different nodes or guests in ``environment``'s
    trials of ``benchmark`` at ``nodes`` nodes: ``cpus`` → the (node, guest) places sharing
    each."""

    environment: str
    benchmark: str
    params: str
    nodes: int
    cpus: dict[int, tuple[str, ...]]

    def text(self) -> str:
        """One line: ``vm hpccg at 3 nodes: host CPU 0 shared by vhpc1/vhpc-vm0, vhpc3/...``."""
        parts = [f"host CPU {c} by {' and '.join(w)}" for c, w in sorted(self.cpus.items())]
        return f"{self.environment} {self.benchmark} at {self.nodes} nodes: " + "; ".join(parts)


def _place(r: Rank) -> str:
    return "/".join(x for x in (r.node, r.guest) if x) or f"rank {r.rank}"


def shared_cpus(trials: Iterable[Any]) -> list[Shared]:
    """Every (environment, benchmark, parameters) whose finished trials put ranks of different
    Slurm nodes — or of different guests — on a common host CPU (their CPU sets intersect)."""
    found: dict[tuple[str, str, str], Shared] = {}
    for t in trials:
        if getattr(t, "status", "done") != "done":
            continue
        rs = ranks(t)
        by_cpu: dict[int, set[str]] = {}
        owners: dict[int, set[tuple]] = {}
        for r in rs:
            for c in r.cpus:
                by_cpu.setdefault(c, set()).add(_place(r))
                owners.setdefault(c, set()).add((r.node, r.guest))
        shared = {c: tuple(sorted(by_cpu[c])) for c, o in owners.items() if len(o) > 1}
        if not shared:
            continue
        key = (t.environment, t.benchmark, t.params)
        old = found.get(key)
        merged = dict(old.cpus) if old else {}
        for c, w in shared.items():
            merged[c] = tuple(sorted(set(merged.get(c, ())) | set(w)))
        found[key] = Shared(t.environment, t.benchmark, t.params, node_count(t) or 0, merged)
    return sorted(found.values(), key=lambda s: (s.nodes, s.benchmark, s.params, s.environment))


@dataclass
class PlacementTable:
    """Where the ranks ran at ``nodes`` nodes for ``benchmarks`` (their labels; several when
    their placements were identical): ``rows`` of (environment, rank, node, guest, vCPU, host
    CPUs), merged over repeats (a rank seen on several CPUs lists them all)."""

    nodes: int
    benchmarks: list[str]
    rows: list[tuple[str, int, str, str, str, str]] = field(default_factory=list)

    @property
    def shared(self) -> set[int]:
        """Row indexes whose host CPUs another node or guest of the same environment uses."""
        out = set()
        for i, a in enumerate(self.rows):
            for b in self.rows:
                if a[0] == b[0] and (a[2], a[3]) != (b[2], b[3]) and \
                        set(a[5].split(",")) & set(b[5].split(",")) - {"?"}:
                    out.add(i)
        return out


def _label(benchmark: str, params: str) -> str:
    p = _params(params)
    extra = ",".join(f"{k}={v}" for k, v in p.items() if k not in ("ranks",))
    return f"{benchmark}:{extra}" if extra else benchmark


def placement_tables(trials: Iterable[Any]) -> list[PlacementTable]:
    """One table per (benchmark, node count), identical tables merged (their benchmarks listed
    together), in node order."""
    merged: dict[tuple[str, int], dict[tuple, set[int]]] = {}
    for t in trials:
        if getattr(t, "status", "done") != "done":
            continue
        rs = ranks(t)
        n = node_count(t)
        if not rs or n is None:
            continue
        rows = merged.setdefault((_label(t.benchmark, t.params), n), {})
        for r in rs:
            key = (t.environment, r.rank, r.node or "—", r.guest or "—",
                   "—" if r.vcpu is None else str(r.vcpu))
            rows.setdefault(key, set()).update(r.cpus)
    tables: dict[tuple, PlacementTable] = {}
    for (label, n), rows in merged.items():
        body = tuple(sorted((k + (",".join(map(str, sorted(c))) or "?",) for k, c in rows.items()),
                            key=lambda row: (row[0], row[1])))
        key = (n, body)
        if key in tables:
            tables[key].benchmarks.append(label)
        else:
            tables[key] = PlacementTable(n, [label], list(body))
    return sorted(tables.values(), key=lambda tb: (tb.nodes, tb.benchmarks))


def by_node_count(shared: list[Shared]) -> dict[int, str]:
    """Node count → one sentence naming the environments and the shared host CPUs there
    (``native and vm: host CPU 0 shared by vhpc1 and vhpc3``)."""
    out: dict[int, tuple[set[str], dict[int, set[str]]]] = {}
    for s in shared:
        envs, cpus = out.setdefault(s.nodes, (set(), {}))
        envs.add(s.environment)
        for c, who in s.cpus.items():
            cpus.setdefault(c, set()).update(w.split("/")[0] for w in who)
    return {n: (f"{' and '.join(sorted(envs))}: " + "; ".join(
                f"host CPU {c} shared by {', '.join(sorted(w))}" for c, w in sorted(cpus.items())))
            for n, (envs, cpus) in sorted(out.items())}
