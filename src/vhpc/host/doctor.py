"""``vhpc doctor``: what this host has and lacks for each environment kind and benchmark.

Each :class:`Component` names the command (or file, or Python module) that shows it is present,
what needs it, and the Debian and RHEL packages that provide it.  Checking only looks: nothing
is started, installed or changed (the KVM line reads ``/dev/kvm``'s permissions; whether KVM
really runs a guest is ``vhpc host``'s probe).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Component:
    """One thing vhpc may use: ``name``; ``needed_for`` (environment kinds, benchmarks);
    ``probe``: ``cmd:NAME`` (on PATH), ``glob:PATTERN ...`` (a file matching each pattern),
    ``module:NAME`` (Python) or ``kvm``; ``debian`` / ``rhel``: the package(s) that provide
    it."""

    name: str
    needed_for: str
    probe: str
    debian: str
    rhel: str


#: Host tools that parts of several rooms share, so no one part owns them: hwloc (every
#: topology and placement), numactl (native, ssh and vm placements), the C compiler and make
#: (every C kernel), Open MPI and MPICH (every MPI benchmark, and the vcluster's ranks), perf
#: (counters of any kind's trials) and the OpenSSH client (the ssh kind and a vm booting an
#: image).  Package names from Debian 12 and RHEL 9.  What one registered part needs is
#: declared on it (``components`` of a kind, backend, executor or benchmark) and
#: :func:`vhpc.workflows.parts.components` adds it to the table.
COMPONENTS = (
    Component("hwloc", "topology, placement", "cmd:lstopo-no-graphics", "hwloc", "hwloc"),
    Component("numactl", "native/ssh nodes=, membind=; vm guest_bind=", "cmd:numactl",
              "numactl", "numactl"),
    Component("C compiler", "kernels (built on first use)", "cmd:cc", "build-essential",
              "gcc make"),
    Component("make", "kernels", "cmd:make", "make", "make"),
    Component("Open MPI", "MPI benchmarks (mpi=openmpi), vcluster", "cmd:mpicc.openmpi",
              "openmpi-bin libopenmpi-dev", "openmpi openmpi-devel"),
    Component("MPICH", "MPI benchmarks with mpi=mpich", "cmd:mpicc.mpich",
              "mpich libmpich-dev", "mpich mpich-devel"),
    Component("perf", "hardware counters (memory-profile, diagnostics)", "cmd:perf",
              "linux-perf", "perf"),
    Component("OpenSSH client", "ssh, vm:image=", "cmd:ssh", "openssh-client", "openssh-clients"),
)


def check(component: Component) -> tuple[bool, str]:
    """(present, detail) for ``component``: the path found, or why it is missing.  Never raises."""
    kind, _, what = component.probe.partition(":")
    if kind == "cmd":
        path = shutil.which(what)
        return (path is not None, path or f"{what} not on PATH")
    if kind == "glob":  # several patterns (space-separated): each must match
        found = [sorted(glob.glob(pattern)) for pattern in what.split()]
        if not all(found):
            return (False, "no " + " or ".join(p for p, f in zip(what.split(), found) if not f))
        return (True, ", ".join(f[-1] for f in found))
    if kind == "module":
        spec = importlib.util.find_spec(what)
        return (spec is not None, spec.origin or what if spec else f"Python module {what} missing")
    if os.path.exists("/dev/kvm"):
        ok = os.access("/dev/kvm", os.R_OK | os.W_OK)
        return (ok, "/dev/kvm (usable: see vhpc host's probe)" if ok else
                "/dev/kvm not writable by this user (add it to group kvm)")
    return (False, "no /dev/kvm: guests run under TCG emulation")


def report(components: tuple[Component, ...] = COMPONENTS) -> list[tuple[Component, bool, str]]:
    """Every one of ``components`` with its check, in order."""
    return [(c, *check(c)) for c in components]
