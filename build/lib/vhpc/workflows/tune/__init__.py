"""``vhpc tune``: measure the candidate VM placements for a workload and recommend the cheapest.

Modules: :mod:`.candidates` (every placement the host can realize for a VM size, equivalent
ones collapsed), :mod:`.race` (successive elimination against native, pure statistics via
:mod:`vhpc.core.stats`), :mod:`.run` (the race as a stored campaign, resumable), :mod:`.output`
(recommendation, libvirt XML, QEMU arguments, OpenStack flavor specs, JSON, HTML) and
:mod:`.cli` (the sub-command).  See docs/tune.md.
"""
