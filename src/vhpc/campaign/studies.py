"""Studies: named campaign templates that reproduce the seed papers' experiments on this host.

Each template turns (host topology, benchmarks, repeats) into a :class:`CampaignSpec` built
from typed values (never CLI strings fed back through the parser), or
raises :class:`StudyError` saying why this host cannot run it and what to do instead.

| study | seed figure | environments |
|---|---|---|
| ``socket-span`` | 000 Fig. 2 | native on the same cores, and a VM spanning 1..S sockets (``span:K``) |
| ``cold-warm`` | 000 Fig. 4-6 | native and a VM, ``cold-warm`` protocol |
| ``vcpu-mapping`` | 003 Fig. 4 | VMs with vCPUs on 1, 2, 4 NUMA nodes (``nodes:LIST``) |
| ``memory-profile`` | 003 Fig. 3 | memory local vs remote (numactl), natively or in a guest with 2 virtual nodes |
| ``mpi-p2p`` | 001 Fig. 1-4, 004 Fig. 1 | native and a VM: latency, uni-/bidirectional bandwidth vs message size, multi-pair latency |
| ``collectives`` | 004 Fig. 2-5 | native and a VM: Barrier, Allreduce, Bcast, Alltoall latency vs size, 2..N ranks |
| ``linpack`` | 001 Fig. 5 | native and a VM: LU factor / solve / total time and Mflops, serial |
| ``paging`` | 004 Fig. 12-13 | VMs backed by 4 KiB vs 2 MiB pages (reserve them with ``--host-knob hugepages_2m=N``): HPL, STREAM, RandomAccess |
| ``noise`` | 004 Sec. 6 | native and a VM: selfish-detour noise, longer runs |
| ``oversubscription`` | 003 Fig. 2 | native and a VM with all host CPUs: P NPB jobs at once, single-threaded vs 4 threads each (P = host CPUs) |
| ``scaling`` | 004 Fig. 1-6 | native vs a vcluster of one guest per node over a Slurm allocation (``--executor slurm:nodes=N``): HPCCG, Barrier/Allreduce/Bcast/Alltoall at 16 B at 1, 2, ... N nodes and a two-node ping-pong latency vs message size |
| ``partition`` | 000 Fig. 8, 11, 12 | native, one VM over all sockets, one VM per socket, 2 VMs per socket (``vcluster``), same total ranks: NPB MPI kernels, pingpong, ivshmem-pingpong |
| ``co-run`` | 003 Fig. 5 | a VM alone vs beside a co-runner VM of low / medium / high memory intensity, on the same NUMA node or (with ≥ 2 nodes) another one |
| ``pagefault-latency`` | 000 Fig. 13 | native and a VM: page-fault latency of malloc (private anonymous), shared anonymous and (``-b pagefault:file=PATH``) device mmap |
| ``class-b-c`` | 000 Fig. 14 | the partition placements at NPB classes B and C |

Every study module registers its templates into :data:`vhpc.campaign.study.STUDIES` (this one;
:mod:`vhpc.campaign.appstudy`: ``applications``); the registry imports every module of the
package on its first lookup, so it is complete whichever module is imported first, no study
module imports another, and listings show the studies in the seeds' order
(:func:`vhpc.campaign.study.paper_order`).

Each study declares the figure it draws (:class:`vhpc.campaign.figures.FigureSpec`: x = what the
paper varied, series, y = the metric, relative to the baseline or not, log axes, the seed's
figure number); :func:`vhpc.analysis.figdata.figure_data` fills it from an analysis.
"""

from __future__ import annotations

from typing import Any

import vhpc.topology
from vhpc.core.errors import SpecError, VhpcError
from vhpc.campaign.figures import FigureSpec, Panel
from vhpc.campaign.study import (STUDIES, Study, StudyError, node_counts, of_seed,  # noqa: F401 - re-exported
                                 study)
from vhpc.environments.kind import BASELINE, GUEST, GUEST_CLUSTER, kind_name
from vhpc.spec.parse import CampaignSpec, bench, campaign, env_of, parse_bench

def build(name: str, topo: vhpc.topology.Topology, benches: list[str], in_vm: bool = False,
          **protocol: Any) -> CampaignSpec:
    """The campaign spec of study ``name`` on ``topo``; ``benches`` are ``-b`` items replacing
    the study's default benchmarks.  Raises StudyError (unknown study, host too small) or
    SpecError (bad benchmark or protocol value)."""
    if name not in STUDIES:
        raise StudyError(f"unknown study {name!r}: choose one of {', '.join(STUDIES.names())}")
    knobs = protocol.pop("host_knobs", None)
    if knobs:
        from vhpc.host.knobs import parse_knob

        try:
            protocol["host_knobs"] = dict(parse_knob(k) for k in knobs)
        except VhpcError as exc:
            raise SpecError(f"--host-knob: {exc}") from None
    given = [parse_bench(b) for b in benches]
    default, envs = STUDIES.get(name).template(topo, in_vm, protocol)
    if given and STUDIES.get(name).expand:
        given = STUDIES.get(name).expand(given, protocol)
    return campaign(given or default, envs, f"study {name}", study=name, **protocol)


@study("cold-warm", "first trial after boot vs later ones (seed 000 Fig. 4-6)", FigureSpec(
    "000", "Fig. 4-6", "first trial after boot (cold) vs later ones (warm)", (
        Panel("triad_bw", "STREAM triad [GB/s]", "group", "trial", bench="stream",
              title="memory bandwidth"),
        Panel("(private|shared)_us", "µs per page fault", "group", "trial", bench="pagefault",
              split="metric", title="page-fault latency"),
        Panel("time", "NPB run time [s]", "group", "trial", bench="npb-*", split="benchmark",
              title="Fig. 6: NPB run time, cold vs warm"))))
def _cold_warm(topo, in_vm, protocol):
    """Seed 000 Fig. 4-6: STREAM and page-fault latency (the locality the KVM fault path
    sets up, Fig. 4-5) and an NPB kernel's run time (Fig. 6: warm runs slower than cold)."""
    protocol.setdefault("warmup", 0)
    protocol["protocol"] = "cold-warm"
    return ([bench("stream"), bench("pagefault"), bench("npb-is", **{"class": "S"})],
            [env_of(BASELINE), env_of(GUEST)])


@study("socket-span", "VM spanning 1..S sockets vs native on the same cores (seed 000 Fig. 2)", FigureSpec(
    "000", "Fig. 2", "slowdown as the VM spans more sockets", (
        Panel("triad_bw", "STREAM triad [GB/s]", r"env:(\d+)", "sockets spanned",
              series=r"env:^(native|vm)", bench="stream"),)))
def _socket_span(topo, in_vm, protocol):
    per_pkg = min(len(p.cores) for p in topo.packages)
    envs = []
    for k in range(1, len(topo.packages) + 1):
        cpus = [topo.cores[c].pus[0] for pkg in topo.packages[:k] for c in pkg.cores]
        envs.append(env_of(BASELINE, f"native-{k}s", cpus=cpus))
        envs.append(env_of(GUEST, f"vm-span{k}", vcpus=per_pkg * k, policy=f"span:{k}",
                           numa="mirror"))
    protocol.setdefault("baseline", "native-1s")
    return [bench("stream")], envs


@study("vcpu-mapping", "vCPUs on 1 / 2 / 4 NUMA nodes (seed 003 Fig. 4)", FigureSpec(
    "003", "Fig. 4", "vCPUs spread over 1, 2, 4 NUMA nodes", (
        Panel("triad_bw|gups", "performance", r"env:(\d+)node", "NUMA nodes holding the vCPUs",
              series="benchmark", relative=True),)))
def _vcpu_mapping(topo, in_vm, protocol):
    nodes = topo.node_ids
    if len(nodes) < 2:
        raise StudyError(f"vcpu-mapping needs at least 2 NUMA nodes; this host has {len(nodes)}: "
                         "run it on a multi-socket host, or preview the placements with "
                         "'vhpc plan --topology ... --policy nodes:0,1'")
    vcpus = min(len(topo.pus_of_node(n)) for n in nodes)
    envs = [env_of(BASELINE)]
    for k in (1, 2, 4):
        if k <= len(nodes):
            policy = "nodes:" + ",".join(map(str, nodes[:k])) + (";mem=local" if k > 1 else "")
            envs.append(env_of(GUEST, f"vm-{k}node", vcpus=vcpus, policy=policy))
    return [bench("stream"), bench("randomaccess")], envs


@study("memory-profile", "NUMA penalty CPI_remote/CPI_local vs MPKI (seed 003 Fig. 3)", FigureSpec(
    "003", "Fig. 3", "NUMA penalty vs memory intensity (MPKI), fit and classes", (), kind="memprofile"))
def _memory_profile(topo, in_vm, protocol):
    benches = [bench(b) for b in ("stream", "randomaccess", "pagefault", "noise")]
    if in_vm:
        envs = [env_of(GUEST, "local", numa=2, policy="spread", guest_bind="0:0"),
                env_of(GUEST, "remote", numa=2, policy="spread", guest_bind="0:1")]
    else:
        nodes = topo.node_ids
        if len(nodes) < 2:
            raise StudyError(
                f"memory-profile needs at least 2 NUMA nodes; this host has {len(nodes)}. Run it "
                "on a multi-node host, or add --in-vm to exercise the machinery in a guest with 2 "
                "virtual NUMA nodes (its penalty is meaningless: both map to one host node)")
        a, b = nodes[0], nodes[1]
        envs = [env_of(BASELINE, "local", nodes=[a]),
                env_of(BASELINE, "remote", nodes=[a], membind=[b])]
    protocol.setdefault("baseline", "local")
    return benches, envs


@study("mpi-p2p", "MPI latency / bandwidth vs message size, multi-pair latency (seed 001 Fig. 1-4)", FigureSpec(
    "001", "Fig. 1-4", "MPI point-to-point: bandwidth (average, maximum, OpTime) vs message size, latency vs communicating processes", (
        Panel(r"bw_avg_(\d+)", "bandwidth, average [MB/s]", "metric", "message size [bytes]",
              series="env&benchmark", bench="osu-*bw", xlog=True, ylog=True, title="Fig. 1: average bandwidth"),
        Panel(r"bw_max_(\d+)", "bandwidth, maximum [MB/s]", "metric", "message size [bytes]",
              series="env&benchmark", bench="osu-*bw", xlog=True, ylog=True, title="Fig. 2: maximum bandwidth"),
        Panel(r"optime_(\d+)", "OpTime [µs]", "metric", "message size [bytes]",
              series="env&benchmark", bench="osu-*bw", xlog=True, ylog=True, title="Fig. 3: OpTime"),
        Panel("max_8", "latency, maximum over pairs [µs]", "param:pairs",
              "communicating pairs (2 processes each)", bench="osu-multi-lat",
              title="Fig. 4: latency vs communicating processes (8 bytes)"),
        Panel(r"lat_(\d+)", "latency [µs]", "metric", "message size [bytes]",
              bench="osu-latency", xlog=True, ylog=True,
              title="latency vs message size (seed 004 Fig. 1)"))))
def _mpi_p2p(topo, in_vm, protocol):
    """Seed 001 Fig. 1-3 (Presta Com: bandwidth and OpTime vs message size), Fig. 4 (Presta
    Laten: latency vs the number of communicating processes: 1, 2, 4, ... pairs up to one
    process per host CPU) and a ping-pong latency curve (seed 004 Fig. 1)."""
    most = max(1, len(topo.pu_ids) // 2)
    pairs = [2 ** i for i in range(most.bit_length())]
    return ([bench("osu-latency", max_size=1048576), bench("osu-bw", max_size=1048576),
             bench("osu-bibw", max_size=1048576)]
            + [bench("osu-multi-lat", max_size=1024, pairs=k) for k in pairs],
            [env_of(BASELINE), env_of(GUEST, vcpus=min(len(topo.pu_ids), 2 * pairs[-1]))])


#: Seed 004's figure per collective (Sec. 3.3.2: Fig. 2 Barrier ... Fig. 5 Alltoall).
COLLECTIVE_FIGS = (("barrier", "Fig. 2: Barrier"), ("allreduce", "Fig. 3: Allreduce"),
                   ("bcast", "Fig. 4: Broadcast"), ("alltoall", "Fig. 5: Alltoall"))
#: The scaling study's collective panel titles: at 16 B, as the paper timed them (barrier has
#: no message).
SCALING_TITLES = tuple((f"op={op}", t + (" (no message)" if op == "barrier" else ", 16 B"))
                       for op, t in COLLECTIVE_FIGS)


@study("collectives", "Barrier/Allreduce/Bcast/Alltoall vs size and ranks (seed 004 Fig. 2-5)", FigureSpec(
    "004", "Fig. 2-5", "collective latency vs process count", (
        Panel("avg", "latency [µs]", "param:ranks", "processes", bench="osu-coll",
              split="param:op", xlog=True, ylog=True,
              titles=tuple((f"op={op}", t) for op, t in COLLECTIVE_FIGS)),)))
def _collectives(topo, in_vm, protocol):
    ranks = sorted({2, max(2, len(topo.pu_ids))})
    default = [bench("osu-coll", op=op, ranks=r, max_size=65536)
               for op in ("barrier", "allreduce", "bcast", "alltoall") for r in ranks]
    return default, [env_of(BASELINE), env_of(GUEST, vcpus=max(ranks))]


@study("linpack", "LU factor / solve / total time and Mflops, serial (seed 001 Fig. 5)", FigureSpec(
    "001", "Fig. 5", "Linpack: LU factor, solve and total time, Mflops relative to native", (
        Panel("factor_s|solve_s|total_s", "LU time", "metric", "phase", bench="linpack",
              relative=True, title="time: VM / native (lower is better)"),
        Panel("mflops", "Mflop/s", "env", "environment", bench="linpack", relative=True,
              title="Mflop/s: VM / native (higher is better)"))))
def _linpack(topo, in_vm, protocol):
    return [bench("linpack", n=1000, threads=1)], [env_of(BASELINE), env_of(GUEST)]


@study("paging", "4 KiB vs 2 MiB guest page backing: HPL, STREAM, RandomAccess (seed 004 Fig. 12-13)", FigureSpec(
    "004", "Fig. 12-13", "paging: guest page backing 4 KiB vs 2 MiB (HPL, STREAM, RandomAccess)", (
        Panel("hpl_gflops|triad_bw|gups", "performance", "benchmark", "benchmark",
              relative=True),)))
def _paging(topo, in_vm, protocol):
    return ([bench("hpcc", n=1000), bench("stream"), bench("randomaccess")],
            [env_of(BASELINE), env_of(GUEST, "vm-4k", backing="4k"),
             env_of(GUEST, "vm-2m", backing="2m")])


@study("noise", "selfish-detour OS noise, native vs guest (seed 004 Sec. 6)", FigureSpec(
    "004", "Sec. 6", "selfish-detour OS noise, native vs guest", (
        Panel("detour_pct|detours_per_s|max_detour_us", "noise", "env", "environment",
              series="metric", bench="noise", split="metric"),)))
def _noise(topo, in_vm, protocol):
    protocol.setdefault("repeats", 10)
    return [bench("noise", duration=5)], [env_of(BASELINE), env_of(GUEST)]


@study("co-run", "a VM alone vs beside a low/medium/high-intensity co-runner VM (seed 003 Fig. 5)", FigureSpec(
    "003", "Fig. 5", "performance beside a co-runner, by co-runner intensity and binding "
    "(above 1: faster than alone)", (
        Panel("triad_bw|gups", "performance (higher is faster)", r"env:co-(low|medium|high)",
              "co-runner intensity",
              series=r"env:-(same|other)$", relative=True, split="benchmark"),)))
def _co_run(topo, in_vm, protocol):
    nodes = topo.node_ids
    pus0 = list(topo.pus_of_node(nodes[0]))
    if len(pus0) < 2:
        raise StudyError("co-run needs at least 2 PUs on a NUMA node (one VM each)")
    v = len(pus0) // 2

    def pin(pus):
        return f"map:0-{v - 1}=" + ",".join(map(str, pus[:v]))

    main = pin(pus0)
    places = {"same": pin(pus0[v:])}
    if len(nodes) > 1:
        places["other"] = pin(list(topo.pus_of_node(nodes[1])))
    envs = [env_of(GUEST, "alone", vcpus=v, policy=main)]
    for where, policy in places.items():
        for level in ("low", "medium", "high"):
            envs.append(env_of(GUEST, f"co-{level}-{where}", vcpus=v, policy=main, corunner=level,
                               corunner_policy=policy))
    protocol.setdefault("baseline", "alone")
    return [bench("stream"), bench("randomaccess")], envs


@study("oversubscription", "P jobs at once, 1 vs 4 threads each, native vs VM (seed 003 Fig. 2)", FigureSpec(
    "003", "Fig. 2", "P jobs at once: single-threaded vs multi-threaded, native vs VM", (
        Panel("time", "run time [s]", "benchmark", "NPB kernel", bench="npb-*",
              split="param:threads", title="Fig. 2: P jobs at once"),)))
def _oversubscription(topo, in_vm, protocol):
    p = len(topo.pu_ids)
    default = [bench(f"npb-{k}", **{"class": "S", "copies": p, "threads": t})
               for k in ("cg", "ep", "is", "mg", "ft") for t in (1, 4)]
    return default, [env_of(BASELINE), env_of(GUEST, vcpus=p)]


#: Seed 004 Fig. 2-5's collectives, timed at 16 B (barrier has no message).
SCALING_OPS = ("allreduce", "barrier", "bcast", "alltoall")


def _scaling_layout(protocol) -> tuple[list[int], int, int]:
    """(node counts, allocation nodes, ranks per node) of the scaling study's executor.
    Raises StudyError unless it runs over a Slurm-like allocation."""
    from vhpc import executors

    protocol.setdefault("executor", "slurm")  # the cluster's default allocation
    try:
        ex = protocol["executor"] = executors.parse(protocol["executor"])  # parsed once, here
    except ValueError as exc:
        raise StudyError(str(exc)) from None
    if ex.part.runs_here:
        raise StudyError("scaling runs over a Slurm allocation: use --executor slurm:nodes=N "
                         "(docs/scale-out.md)")
    n = ex.node_count()
    return node_counts(n), n, int(getattr(ex.options, "ranks_per_node", 1) or 1)


def _scaling_points(given: list, protocol) -> list:
    """The user's ``-b`` items at every node count: a benchmark with a ``ranks`` parameter
    that the item leaves unset runs once per count k with ranks = k × ranks_per_node (counts
    below the benchmark's minimum skipped); others run as given."""
    from vhpc import benchmarks

    counts, _, rpn = _scaling_layout(protocol)
    out = []
    for b in given:
        declared = {p.name: p for p in benchmarks.get(b.name).params}
        if "ranks" not in declared or "ranks" in b.params:
            out.append(b)
            continue
        low = declared["ranks"].minimum or 1
        out += [bench(b.name, **b.params, ranks=k * rpn) for k in counts if k * rpn >= low]
    return out


@study("scaling", "a virtualized cluster vs native over 1..N nodes: HPCCG, collectives, ping-pong (seed 004 Fig. 1-6)", FigureSpec(
    "004", "Fig. 1-6", "native vs one guest per node, against node count", (
        Panel(r"lat_(\d+)", "one-way latency [µs]", "metric", "message size [bytes]",
              bench="osu-latency", xlog=True, ylog=True,
              title="Fig. 1(a): ping-pong between two nodes"),
        Panel("avg(?:_16)?", "latency [µs]", "param:ranks", "nodes", bench="osu-coll",
              split="param:op", titles=SCALING_TITLES, x_nodes=True),
        Panel("mflops", "HPCCG [Mflop/s per node], fixed grid per rank", "param:ranks", "nodes",
              bench="hpccg",
              x_nodes=True, per_node=True, title="Fig. 6: HPCCG weak scaling"),
        Panel("mflops", "HPCCG Mflop/s", "param:ranks", "nodes", bench="hpccg", relative=True,
              x_nodes=True, title="HPCCG: VM / native vs nodes")),
    ), expand=_scaling_points, spans_nodes=True)
def _scaling(topo, in_vm, protocol):
    """Seed 004's virtualized cluster: at k = 1, 2, ... N nodes of the allocation, ``native``
    runs k × ranks_per_node ranks as one ``srun --mpi=pmix`` job over k nodes, and ``vm`` the
    same ranks in a ``vcluster`` of one guest per node (N guests, ranks_per_node vCPUs each,
    ranks filling guests 0..k-1, i.e. k nodes); HPCCG weak scaling (one local grid per rank at
    every count, so the global problem grows with the nodes),
    Barrier/Allreduce/Bcast/Alltoall at 16 B from 2 ranks on, and a ping-pong between two
    nodes (docs/scale-out.md)."""
    counts, n, rpn = _scaling_layout(protocol)
    default = [bench("hpccg", ranks=k * rpn) for k in counts]
    default += [bench("osu-coll", op=op, sizes="16", ranks=k * rpn)
                for op in SCALING_OPS for k in counts if k * rpn >= 2]
    # Fig. 1(a): latency vs size; 200 / 50 iterations keep a guest-to-guest sweep under TCG
    # (milliseconds per round trip) to minutes
    default.append(bench("osu-latency", max_size=65536, iters=200, iters_large=50))
    # the guests are named like the single guest, as the paper calls its virtualized side
    vm = env_of(GUEST_CLUSTER, kind_name(GUEST), vms=n, vcpus=rpn, ranks_per_vm=rpn,
                vms_per_node=1)
    return default, [env_of(BASELINE), vm]


def _partition_layout(topo) -> tuple[int, int, list, str | None]:
    """(sockets, cores per socket, environments, note on what the host reduces the study to)."""
    sockets = len(topo.packages)
    cores = min(len(topo.package(p.index).cores) for p in topo.packages)
    ranks = sockets * cores
    envs = [env_of(BASELINE), env_of(GUEST, "one-vm", vcpus=ranks, policy=f"span:{sockets}")]
    dropped = []
    if sockets >= 2:
        envs.append(env_of(GUEST_CLUSTER, "vm-per-socket", vms=sockets, vcpus=cores, net="ivshmem"))
    else:
        dropped.append("one VM per socket is the same as one VM over all sockets")
    if cores >= 2:
        envs.append(env_of(GUEST_CLUSTER, "2-vms-per-socket", vms=2 * sockets, vcpus=cores // 2,
                           net="ivshmem"))
        if cores // 2 > 1:  # pingpong's 2 ranks would share guest 0: one rank per guest too
            envs.append(env_of(GUEST_CLUSTER, "cross-vm", vms=2, vcpus=1, ranks_per_vm=1,
                               net="ivshmem"))
    else:
        dropped.append("2 VMs per socket need 2 cores per socket")
    note = None
    if dropped:
        note = (f"partition on this host ({sockets} socket(s) x {cores} core(s)): "
                + "; ".join(dropped) + " - running " + ", ".join(e.name for e in envs))
    return sockets, cores, envs, note


def note(name: str, topo: vhpc.topology.Topology) -> str | None:
    """What study ``name`` reduces to on ``topo`` (None when it runs as designed)."""
    if name == "partition":
        return _partition_layout(topo)[3]
    return None


@study("partition", "1 VM over all sockets vs 1 or 2 VMs per socket, virtio vs ivshmem (seed 000 Fig. 8, 11, 12)", FigureSpec(
    "000", "Fig. 8, 11, 12", "partitioning: one VM over all sockets vs VMs per socket", (
        Panel("time", "NPB run time", "benchmark", "NPB kernel", bench="npb-*", relative=True,
              title="Fig. 8: run time relative to native"),
        Panel(r"lat_(\d+)", "latency [µs]", "metric", "message size [bytes]",
              bench="ivshmem-pingpong", xlog=True, ylog=True, title="Fig. 11: shared-memory latency"),
        Panel(r"bw_(\d+)", "bandwidth [MB/s]", "metric", "message size [bytes]",
              bench="ivshmem-pingpong", xlog=True, ylog=True, title="Fig. 12: shared-memory bandwidth"),
        Panel("latency_us|bandwidth_MBps", "pingpong", "env", "environment", series="metric",
              bench="pingpong", split="metric", title="MPI pingpong"))))
def _partition(topo, in_vm, protocol):
    sockets, cores, envs, _ = _partition_layout(topo)
    if sockets * cores < 2:
        raise StudyError("partition needs at least 2 cores (2 ranks, 2 VMs)")
    ranks = sockets * cores
    default = [bench(f"npb-{k}", variant="mpi", ranks=ranks, **{"class": "S"})
               for k in ("cg", "mg", "ft", "is")]
    default += [bench("pingpong"), bench("ivshmem-pingpong", max_size=1048576)]
    return default, envs

@study("pagefault-latency", "page-fault latency: malloc, shared anonymous, device mmap (seed 000 Fig. 13)",
       FigureSpec("000", "Fig. 13", "page-fault latency by memory type", (
           Panel("(private|shared|file)_us", "µs per page fault", "metric", "memory type",
                 bench="pagefault", labels=(("private", "malloc (private anonymous)"),
                                            ("shared", "shared anonymous mmap"),
                                            ("file", "device / file mmap"))),)))
def _pagefault_latency(topo, in_vm, protocol):
    """Seed 000 Fig. 13: the vhpc-pagefault kernel natively and in a guest; the device mmap
    column needs a mapping that exists in both: ``-b pagefault:file=/dev/shm/NAME`` (or an
    ivshmem BAR in a vcluster)."""
    return [bench("pagefault", mib=64, reps=5)], [env_of(BASELINE), env_of(GUEST)]


@study("class-b-c", "the partition placements at NPB classes B and C (seed 000 Fig. 14)",
       FigureSpec("000", "Fig. 14", "problem size: NPB class B vs class C, same placements", (
           Panel("time", "NPB run time", "param:class", "NPB class", bench="npb-*",
                 relative=True, split="benchmark"),)))
def _class_b_c(topo, in_vm, protocol):
    sockets, cores, envs, _ = _partition_layout(topo)
    if sockets * cores < 2:
        raise StudyError("class-b-c needs at least 2 cores (2 ranks, 2 VMs)")
    ranks = sockets * cores
    envs = [e for e in envs if e.name != "cross-vm"]
    default = [bench(f"npb-{k}", variant="mpi", ranks=ranks, **{"class": c})
               for k in ("cg", "mg", "ft", "is") for c in ("B", "C")]
    return default, envs

