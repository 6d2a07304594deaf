"""Placement: turn (topology, VM request) into vCPU pinning, guest NUMA layout and host memory
binding, validate it, and render it for QEMU and libvirt.

Pure functions: no file-system reads, no processes (host facts such as free hugepages come in
as data, from :mod:`vhpc.host.facts`). Applying a placement (pinning vCPU threads,
starting QEMU) is the environment room's job. Modules: :mod:`.policy` (grammar), :mod:`.place`
(placing on a Topology), :mod:`.memory` (guest NUMA and memory binding), :mod:`.render` (QEMU
argv, libvirt XML, text).

Policy strings (``PlacementRequest.policy``), ``POLICY[;mem=MEM][;pin=pu|node]``:

==================  ==========================================================================
``float``           unpinned: vCPUs may run on any pCPU, memory unbound (host default policy).
                    The usual cloud default; Ibrahim et al. (CCGrid 2011, Sec. V) compare
                    pinned placements against it.
``compact``         fill one NUMA node, then the next: within a node one PU per core first
                    (cores in order), then the second hardware thread of each core, and so on.
``spread``          round-robin vCPUs over the NUMA nodes that have PUs (vCPU i → node i mod N),
                    each node filled in the ``compact`` order.
``span:K``          the VM over sockets (packages) 0..K-1, vCPUs divided evenly in blocks
                    (vCPUs 0..v/K-1 on package 0, ...), memory split across those nodes in
                    proportion to the vCPUs on each (Ibrahim et al., CCGrid 2011, Fig. 2: a
                    VM spanning 1..S sockets).
``packages:LIST``   like ``span`` over the listed packages (``plan_partition`` uses it).
``confine:N``       vCPUs and memory on NUMA node N (Ibrahim et al., CCGrid 2011, Sec. VIII:
                    node confinement; Cheng and Chen, 3PGCIC 2013, Fig. 4: the "1-node"
                    case).
``nodes:LIST``      vCPUs divided evenly in blocks over the listed nodes, in the order given
                    (Cheng and Chen, 3PGCIC 2013, Fig. 4: ``nodes:0`` / ``nodes:0,1`` /
                    ``nodes:0,1,2,3``; the paper left memory to Linux in the 2- and 4-node
                    cases: add ``;mem=local``).
``map:V=P,...``     explicit vCPU → pCPU map (the binding cases of Cheng and Chen, 3PGCIC
                    2013, Fig. 5). ``V`` is a vCPU or range ``a-b``; ``P`` a PU list
                    (``0-3``, ``0,4``) zipped 1:1 with V when the counts match, else every
                    vCPU in V may run on all of P; ``P`` = ``nN`` means all PUs of node N.
                    Example: ``map:0-1=n0;mem=1``.
==================  ==========================================================================

``mem=`` (memory → host node binding of each guest node):

- ``auto`` (default): bind each guest node to the host node its vCPUs run on; a guest node
  whose vCPUs span several host nodes is interleaved across them (one QEMU backend cannot be
  split proportionally: expose guest NUMA, ``guest_numa="mirror"``, for an exact split).
  ``float`` with ``auto`` is unbound.
- ``bind`` / ``interleave`` / ``preferred``: that policy over the host nodes of the guest
  node's vCPUs (``preferred`` needs exactly one).
- ``local``: no binding; the host kernel places pages where the faulting vCPU thread runs
  (first touch), as KVM does by default (the cold/warm locality of Ibrahim et al., CCGrid
  2011; Cheng and Chen, 3PGCIC 2013, Fig. 4).
- ``LIST`` or ``bind:LIST`` / ``interleave:LIST`` / ``preferred:LIST``: explicit host nodes,
  e.g. remote memory ``confine:0;mem=1`` (Cheng and Chen, 3PGCIC 2013, Fig. 5). With several
  guest nodes, LIST has one node (all guest nodes there) or one node per guest node.

``pin=pu`` (default) pins each vCPU to one PU; ``pin=node`` lets each vCPU run on every PU of
its host node (what ``numactl --cpunodebind`` does in Cheng and Chen, 3PGCIC 2013).

Guest NUMA (``guest_numa``): ``"hidden"`` = one guest node; ``"mirror"`` = one guest node per
host node used (vCPUs grouped by host node, ids in host node order); an int G = G guest nodes
of consecutive vCPU blocks. Memory is split over guest nodes in proportion to their vCPUs, in
units of the page size (1 MiB for 4k, 2 MiB for 2m, 1 GiB for 1g).

Units: memory in MiB everywhere; hugepage sizes in KiB (as in sysfs ``hugepages-2048kB``).
Errors: :class:`PlacementError` (a ValueError) with a one-line message saying what to change.
"""

from __future__ import annotations

from vhpc.placement.memory import check_hugepages
from vhpc.placement.model import (BACKINGS, GuestNode, Placement, PlacementError,
                                  PlacementRequest, needs_guest_numa)
from vhpc.placement.place import check_plan, place, plan_partition, plan_vms
from vhpc.placement.policy import Policy, parse_policy
from vhpc.placement.render import describe, render_plans

__all__ = [
    "PlacementError",
    "Policy",
    "PlacementRequest",
    "GuestNode",
    "Placement",
    "parse_policy",
    "place",
    "plan_vms",
    "plan_partition",
    "check_plan",
    "check_hugepages",
    "needs_guest_numa",
    "describe",
    "render_plans",
    "BACKINGS",
]
