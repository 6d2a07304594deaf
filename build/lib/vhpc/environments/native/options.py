"""Options of the ``native`` kind (``-e native:cpus=0-3,strict=1``)."""

from __future__ import annotations

from vhpc.environments.options import EnvOptions, IndexList, Slowdown


class NativeOptions(EnvOptions, Slowdown):
    """``native``: ``cpus`` (host CPU list, sched_setaffinity), ``nodes`` (host NUMA nodes for
    CPUs and memory, numactl --cpunodebind/--membind), ``membind`` (memory nodes only),
    ``strict`` (fail a trial whose binding does not read back as planned), and
    :class:`~vhpc.environments.options.Slowdown`'s."""

    cpus: IndexList | None = None
    nodes: IndexList | None = None
    membind: IndexList | None = None
    strict: bool = False
