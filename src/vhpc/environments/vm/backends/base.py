"""Hypervisor backends: what one must provide, and their registry.

A backend starts the guests of the ``vm`` environment.  Each is a subclass of
:class:`HypervisorBackend` in its own module under ``vhpc/environments/vm/backends/`` that
registers itself with ``@BACKENDS.register("name")``, and a :class:`GuestSession` subclass for
one booted guest.  :class:`~vhpc.environments.vm.environment.VmEnvironment` holds one backend,
chosen by name (``vm:backend=NAME``), and does the rest the same way for every backend: the
session protocol (cold/warm), the guest agent (:mod:`vhpc.environments.vm.agent`), the
read-back of vCPU affinity and memory placement, the co-runner, diagnostics.

What a backend provides:

- :meth:`HypervisorBackend.boot`: boot one guest for a session from a :class:`BootRequest`
  (size, accelerator, kernel, placement), apply the placement's vCPU pinning, and return the
  :class:`GuestSession` once its agent said READY;
- on that session: ``pid`` (the host process whose threads are the vCPUs), ``vcpu_threads``
  (vCPU index → host thread id), :meth:`~GuestSession.alive`, :meth:`~GuestSession.pause`,
  :meth:`~GuestSession.resume`, :meth:`~GuestSession.kill`;
- :meth:`HypervisorBackend.probe_accel` (is hardware virtualization usable here),
  :meth:`HypervisorBackend.fingerprint` (its fields of the environment's fingerprint),
  :meth:`HypervisorBackend.applied` (its additions to the applied placement),
  :meth:`HypervisorBackend.remove_leftovers` and :meth:`HypervisorBackend.close`.

Adding a hypervisor (Xen, cloud-hypervisor) is one new module here plus its tests;
nothing else dispatches on backend names (docs/architecture.md, "How to add a hypervisor").
"""

from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from vhpc.core import records
from vhpc.core.registry import Registry
from vhpc.host.doctor import Component
from vhpc.environments.base import EnvError

if TYPE_CHECKING:
    from vhpc.environments.vm.agent import AgentChannel
    from vhpc.environments.vm.guestimage import GuestKernel
    from vhpc.environments.vm.options import VmOptions
    from vhpc.placement import Placement
    from vhpc.topology import Topology

#: Every hypervisor backend, by name; the modules of this package register themselves.
BACKENDS: Registry[type["HypervisorBackend"]] = Registry(
    "hypervisor backend", "vhpc.environments.vm.backends")

#: The sockets a guest's ``workdir`` holds (QEMU's agent chardev and QMP monitor).
SOCKETS = ("agent.sock", "qmp.sock")


@dataclass(frozen=True)
class PlacementExport:
    """A placement in one backend's own form, for a user to deploy outside vhpc.

    ``title`` heads it in text ("libvirt XML"); ``key`` names it in JSON (``libvirt_xml``);
    ``value`` is a document (str, shown below its title) or an argument vector (a tuple,
    shown on its title's line, a list in JSON)."""

    title: str
    key: str
    value: str | tuple[str, ...]

    @property
    def text(self) -> str:
        """The value as text: the document, or the arguments joined by spaces."""
        return self.value if isinstance(self.value, str) else " ".join(self.value)

    def json_value(self) -> str | list[str]:
        """The value for JSON: the document, or the arguments as a list."""
        return self.value if isinstance(self.value, str) else list(self.value)


@dataclass(frozen=True)
class ProbeResult:
    """Outcome of probing hardware virtualization: accel (``kvm`` or ``tcg``), the reason in
    words, the seconds the probe took, ``definitive``: False when the answer may change
    without the host changing (the probe guest timed out on a loaded host, was killed, or
    could not be started), so it is not cached, and ``timed_out``: the probe guest ran but did
    not reach its marker in time (a busy host, or a KVM whose guests hang, as nested kvm_pvm's
    do)."""

    accel: str
    reason: str
    seconds: float = 0.0
    definitive: bool = True
    timed_out: bool = False


@dataclass(frozen=True)
class BootRequest:
    """What one session boots.  label: the environment's name (names a domain); session:
    sessions booted before this one; vcpus; memory_mib (MiB); accel (``kvm``/``tcg``, resolved);
    kernel: the guest kernel; placement: the :class:`~vhpc.placement.Placement` to apply
    (vCPU pins, guest nodes → host nodes, page backing); boot_timeout (s, until the agent is
    READY); extra_args / append: hypervisor argv and kernel command-line words (a vcluster's
    network); move_emulator: move the hypervisor's other threads off the vCPUs' pCPUs;
    image: the user's image to boot instead of vhpc's guest
    (:class:`~vhpc.environments.vm.userimage.ImageBoot`, ``vm:image=``), None for vhpc's."""

    label: str
    session: int
    vcpus: int
    memory_mib: int
    accel: str
    kernel: "GuestKernel"
    placement: "Placement"
    boot_timeout: float = 90.0
    extra_args: tuple[str, ...] = ()
    append: tuple[str, ...] = ()
    move_emulator: bool = True
    image: Any = None


class GuestSession(ABC):
    """One booted guest (a session) of some backend.  Attributes: ``workdir`` (a private
    directory for its sockets and console log, removed by :meth:`kill`), ``agent`` (the
    :class:`~vhpc.environments.vm.agent.AgentChannel`, None before boot), ``vcpu_threads``
    (vCPU index → host thread id), ``boot_seconds``, ``emulator_cpus`` (host CPUs the
    hypervisor's non-vCPU threads may use, None when not moved)."""

    #: File in ``workdir`` holding the hypervisor's stderr (quoted in failures), if any.
    stderr_name: ClassVar[str | None] = None

    def __init__(self) -> None:
        from vhpc.host.owned import owned_socketdir  # named by vhpc's pid: reaped once dead

        self.workdir = owned_socketdir("vhpc-guest-", max(map(len, SOCKETS)))
        self.agent: AgentChannel | None = None
        self.vcpu_threads: dict[int, int] = {}
        self.boot_seconds: float | None = None
        self.emulator_cpus: list[int] | None = None

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """The host process running the guest (its threads are the vCPUs); None when gone."""

    @abstractmethod
    def alive(self) -> bool:
        """True while the guest runs (paused counts as running)."""

    @abstractmethod
    def pause(self) -> None:
        """Stop the vCPUs, keeping guest state (caches, page tables)."""

    @abstractmethod
    def resume(self) -> None:
        """Undo :meth:`pause`."""

    @abstractmethod
    def kill(self) -> None:
        """Stop the guest and remove what it left on the host (call :meth:`release`).
        Idempotent; never raises."""

    def request(self, op: str, wait: float, **payload) -> dict[str, Any]:
        """One agent request (:meth:`AgentChannel.request`), waiting up to ``wait`` seconds
        for its answer.  Raises EnvError when the guest does not answer or was never booted."""
        if self.agent is None:
            raise EnvError("the guest is not running")
        return self.agent.request(op, wait, **payload)

    def read_affinity(self) -> list[dict[str, Any]]:
        """Each vCPU thread's allowed host CPUs and the CPU it last ran on, from the host
        (sched_getaffinity(2); field 39 of ``/proc/PID/task/TID/stat``, proc(5)):
        ``[{"vcpu", "thread", "allowed", "last_cpu"}]``, None values for a vanished thread."""
        out = []
        for vcpu, tid in sorted(self.vcpu_threads.items()):
            try:
                allowed = sorted(os.sched_getaffinity(tid))
                stat = Path(f"/proc/{self.pid}/task/{tid}/stat").read_text()
                last = int(stat.rsplit(")", 1)[1].split()[36])
            except (OSError, ValueError, IndexError, TypeError):
                allowed, last = None, None
            out.append({"vcpu": vcpu, "thread": tid, "allowed": allowed, "last_cpu": last})
        return out

    def console_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the guest's serial console (``workdir/console.log``)."""
        try:
            text = (self.workdir / "console.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def failure_detail(self) -> str:
        """Text appended to failure messages: the hypervisor's last stderr line and the
        console tail ("" when there is neither)."""
        parts = []
        if self.stderr_name:
            try:
                err = (self.workdir / self.stderr_name).read_text(errors="replace").strip()
                if err:
                    parts.append("qemu: " + err.splitlines()[-1])
            except OSError:
                pass
        tail = self.console_tail(8)
        if tail:
            parts.append("console tail:\n" + tail)
        return ("\n" + "\n".join(parts)) if parts else ""

    def release(self) -> None:
        """Close the agent channel and remove the work directory (after the guest stopped)."""
        if self.agent is not None:
            self.agent.close()
        self.agent = None
        shutil.rmtree(self.workdir, ignore_errors=True)


class HypervisorBackend(ABC):
    """Starts the guests of one ``vm`` environment.  Constructed once per environment from its
    validated ``options`` (:class:`~vhpc.environments.vm.options.VmOptions`), its
    ``placement`` (computed once by the kind's plan; None when the backend defines it, as
    libvirt does from a user's domain XML) and the host ``topo``.  The constructor checks the
    host (the hypervisor is installed) and raises ValueError saying what to install or change;
    it may replace ``self.options``/``self.placement`` with what the guest really is."""

    name: ClassVar[str] = ""
    #: VmOptions fields only this backend reads; giving one with another backend is an error.
    own_options: ClassVar[tuple[str, ...]] = ()
    #: VmOptions fields this backend cannot honour → what to do instead; ``VmOptions`` refuses
    #: them when this backend is chosen, at parse (so ``--dry-run`` does too).
    unsupported_options: ClassVar[dict[str, str]] = {}
    #: What ``vhpc doctor`` checks for it (:class:`vhpc.host.doctor.Component`).
    components: ClassVar[tuple[Component, ...]] = ()

    def __init__(self, env_name: str, options: "VmOptions", placement: "Placement | None",
                 topo: "Topology"):
        self.env_name = env_name
        self.options = options
        self.placement = placement
        self.topo = topo

    @classmethod
    @abstractmethod
    def probe_accel(cls, kernel: "GuestKernel | None" = None,
                    use_cache: bool = True) -> ProbeResult:
        """Whether hardware virtualization (``kvm``) is usable on this host for this backend's
        guests, else ``tcg``, and why (``kernel``: the guest kernel a probe may boot, None:
        the host's own; ``use_cache``: a cached answer of this host boot may be used).  A
        class method: the host is asked before any environment exists (``vhpc host``, ``vhpc
        paper --dry-run``).  Never raises for an unusable accelerator."""

    @classmethod
    def render_placement(cls, placement: "Placement", name: str) -> list[str]:
        """``placement`` in this backend's own dialect for ``vhpc plan`` (a title line, then
        the text: QEMU arguments, libvirt XML); [] when it has none to show."""
        return []

    @classmethod
    def export_placement(cls, placements: "Sequence[Placement]", name: str,
                         pool: Sequence[int] = ()) -> PlacementExport | None:
        """The guests of ``placements`` (one per VM) as a user would start them with this
        backend outside vhpc (``vhpc tune``'s recommendation): ``name`` names the guests,
        ``pool`` holds the host PUs an unpinned guest's vCPUs may float over (vhpc's own CPU
        affinity; empty: unknown).  None when the backend has no such form."""
        return None

    @abstractmethod
    def boot(self, request: BootRequest) -> GuestSession:
        """Boot one guest as ``request`` says, apply its vCPU pinning (and, with
        ``move_emulator``, move the other hypervisor threads to the host CPUs left free,
        recorded in ``emulator_cpus``), and return it once the agent is READY.  Raises
        EnvError (with the console tail) after stopping whatever it started."""

    def fingerprint(self) -> dict[str, Any]:
        """This backend's fields of the environment's fingerprint (hypervisor version, machine
        type, ...), merged over the common ones.  JSON-serialisable."""
        return {}

    def applied(self, session: GuestSession,
                applied: records.AppliedPlacement) -> records.AppliedPlacement:
        """The applied placement read back from the host (``applied``), with what this backend
        adds (its own read-back, mismatches against its own request).  Default: unchanged."""
        return applied

    def remove_leftovers(self) -> list[str]:
        """Remove guests that an earlier, killed vhpc left running (called once, when the
        environment is built); returns what was removed.  Raises EnvError when the
        hypervisor cannot be reached.  Default: nothing to remove."""
        return []

    def close(self) -> None:
        """Release what the backend holds between sessions (connections); idempotent.
        Sessions are killed by the environment before."""
