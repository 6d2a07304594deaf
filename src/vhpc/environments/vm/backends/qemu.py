"""The ``qemu`` hypervisor backend: argv builder, process lifecycle, QMP, KVM probe.

A guest boots the host's kernel directly (``-kernel vmlinux`` via PVH, vhpc's initramfs), mounts
the host's root read-only over virtio-9p and runs vhpc's guest agent (guest/agent.c) as init.
Commands reach the agent over a virtio-serial port (:mod:`vhpc.environments.vm.agent`); QMP controls the VM (``query-cpus-fast`` for vCPU thread ids, ``stop``/``cont``,
``quit``).

Facts used here were measured on this kind of host (shared/reference/vm-mechanics.md): PVH boot
of an unpacked vmlinux is ~2 s under TCG; ``/dev/kvm`` may exist yet be unusable (nested PVM),
so KVM is probed by booting the real kernel to a marker with a short timeout.

QEMU is started with ``PR_SET_PDEATHSIG=SIGKILL`` so it dies with vhpc even on SIGKILL, and
:meth:`QemuGuest.kill` is always called from ``close()``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import vhpc.placement
from vhpc.core.cpulist import runs as _runs
from vhpc.core.paths import cache_dir, read_cache_text, write_atomic
from vhpc.host.owned import die_with_parent
from vhpc.environments.base import EnvError
from vhpc.environments.vm import guestimage
from vhpc.environments.vm.guestimage import guest_shares, kernel_cmdline
from vhpc.environments.vm.agent import AgentChannel, retry_connect
from vhpc.environments.vm.backends.base import (BACKENDS, BootRequest, GuestSession,
                                                HypervisorBackend, ProbeResult)
from vhpc.environments.vm.backends.base import PlacementExport

QEMU = "qemu-system-x86_64"
#: Seconds a QMP command (stop, cont, query-cpus-fast) may take; without a bound, a QEMU whose
#: monitor stopped answering held a trial (and its co-runner's pause and resume) forever.
QMP_WAIT = 30.0


@dataclass
class GuestConfig:
    """What to boot.  vcpus: count; memory_mib: guest RAM in MiB; accel: ``kvm`` or ``tcg``
    (resolved, not ``auto``); kernel: a GuestKernel; extra_args: more QEMU argv (e.g. NUMA
    backends from the placement room); boot_timeout: seconds to wait for the agent;
    append: extra kernel command-line words (``vhpc.ip=...`` for vcluster guests, init.sh)."""

    vcpus: int = 2
    memory_mib: int = 1024
    accel: str = "tcg"
    kernel: guestimage.GuestKernel | None = None
    extra_args: list[str] = field(default_factory=list)
    boot_timeout: float = 90.0
    append: list[str] = field(default_factory=list)
    machine: str = "microvm,pcie=on"


def clock_words(machine: str, accel: str) -> list[str]:
    """Kernel command-line words that keep a precise clock: under TCG a multi-vCPU guest marks
    its TSCs unsynchronized, and microvm has no HPET or ACPI PM timer to fall back to, so the
    guest would time with jiffies (4 ms steps: measured, STREAM reported 0 GB/s).  TCG's TSC
    is read from one host clock for every vCPU, so ``tsc=reliable`` is true there; KVM guests
    use kvm-clock and need nothing."""
    return ["tsc=reliable"] if machine.startswith("microvm") and accel == "tcg" else []


def machine_for(placement) -> str:
    """QEMU machine type for a guest placed by ``placement``: ``microvm,pcie=on`` (no legacy
    devices to probe, PCIe for the virtio, 9p, serial-agent and ivshmem devices vhpc uses: a
    cold cycle ~15 % shorter under TCG here, bench/bench_vm_cycle.py) unless the guest has
    several NUMA nodes, which need ``pc``: QEMU 7.2's microvm builds no ACPI SRAT, so its
    guest sees one node whatever ``-numa`` says (measured: numa=2 read back as 1 node)."""
    return "pc" if len(placement.guest_nodes) > 1 else "microvm,pcie=on"


def build_argv(cfg: GuestConfig, workdir: Path, probe: bool = False) -> list[str]:
    """QEMU argv (a list, never a shell string) for ``cfg``.

    ``workdir`` holds the QMP and agent sockets and the console log.  With ``probe`` the guest
    only prints ``VHPC-PROBE-OK`` on the serial console and powers off (used by
    :func:`probe_kvm`).  Raises GuestImageError when the kernel cannot be prepared.
    """
    kernel = cfg.kernel or guestimage.find_kernel()
    vmlinux = guestimage.unpack_vmlinux(kernel)
    initrd = guestimage.build_initramfs(kernel)
    cpu = "host" if cfg.accel == "kvm" else "max"
    shares = [] if probe else guest_shares()
    argv = [
        shutil.which(QEMU) or QEMU,
        "-name", "vhpc-guest,debug-threads=on",
        "-machine", cfg.machine, "-accel", cfg.accel, "-cpu", cpu,
        "-smp", str(cfg.vcpus),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-kernel", str(vmlinux), "-initrd", str(initrd),
        "-append", " ".join([kernel_cmdline(probe, shares), *cfg.append]),
    ]
    argv += ["-m", f"{cfg.memory_mib}M"]  # with -numa memdev= backends this is their total
    if probe:
        argv += ["-serial", "stdio"]
        return argv
    argv += [
        "-serial", f"file:{workdir / 'console.log'}",
        "-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
        "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
        "-device", "virtio-serial-pci",
        "-chardev", f"socket,id=agent,path={qemu_opt(workdir / 'agent.sock')},server=on,wait=off",
        "-device", "virtserialport,chardev=agent,name=vhpc.agent",
        "-qmp", f"unix:{qemu_opt(workdir / 'qmp.sock')},server=on,wait=off",
    ]
    for i, path in enumerate(shares):
        argv += ["-fsdev", f"local,id=share{i},path={qemu_opt(path)},security_model=none,readonly=on,"
                           "multidevs=remap",
                 "-device", f"virtio-9p-pci,fsdev=share{i},mount_tag=share{i}"]
    return argv + list(cfg.extra_args)


def qemu_opt(value) -> str:
    """``value`` (a path) as the value of a QEMU option list (``-drive file=``, ``-chardev
    path=``, ``-qmp unix:``, ``-object mem-path=``, ``-netdev addr.path=``): its commas doubled,
    since QEMU splits such a list at each single comma (QEMU's docs, "Invocation": "to use a
    comma in an option value, double it").  ``-serial file:PATH``, ``-kernel`` and ``-bios``
    take the path whole and must not get it."""
    return str(value).replace(",", ",,")


def spawn(argv: list[str], **kw) -> subprocess.Popen:
    """Start QEMU so that it is killed when vhpc dies (PR_SET_PDEATHSIG, prctl(2))."""
    return subprocess.Popen(argv, preexec_fn=die_with_parent, **kw)


def qmp_connect(path: Path, deadline: float, exit_status):
    """A connected QMP client for the socket at ``path`` (agent.retry_connect: QEMU may open
    it after the agent's).  Raises EnvError when QEMU exits or the time runs out."""
    from qemu.qmp import ConnectError
    from qemu.qmp.legacy import QEMUMonitorProtocol

    def attempt():
        qmp = QEMUMonitorProtocol(str(path))
        qmp.connect()
        qmp.settimeout(QMP_WAIT)  # every command: a QEMU that stops answering never blocks
        return qmp

    return retry_connect(attempt, (ConnectError,), deadline, exit_status, "its QMP socket")


class QemuGuest(GuestSession):
    """One running QEMU guest (one *session*), booted by :meth:`boot`.

    Attributes (beyond :class:`GuestSession`'s): cfg (the GuestConfig), proc (the QEMU
    process), qmp (its QMP connection; ``query-cpus-fast`` gives ``vcpu_threads``).
    """

    stderr_name = "qemu.stderr"

    def __init__(self, cfg: GuestConfig):
        super().__init__()
        self.cfg = cfg
        self.proc: subprocess.Popen | None = None
        self.qmp = None

    @property
    def pid(self) -> int | None:
        """The QEMU process's id, None before :meth:`boot`."""
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        """True while the QEMU process runs."""
        return self.proc is not None and self.proc.poll() is None

    def _exit_status(self) -> int | None:
        return self.proc.poll()

    def boot(self) -> float:
        """Start QEMU and wait for the agent's ready message; returns boot seconds.

        Raises EnvError (with the console tail) when QEMU exits or the agent is not ready
        within ``cfg.boot_timeout``; QEMU is killed before raising.
        """
        argv = build_argv(self.cfg, self.workdir)
        t0 = time.monotonic()
        self.proc = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=open(self.workdir / "qemu.stderr", "wb"))
        deadline = t0 + self.cfg.boot_timeout
        try:
            self.agent = AgentChannel.connect(self.workdir / "agent.sock", deadline,
                                              self._exit_status)
            self.qmp = qmp_connect(self.workdir / "qmp.sock", deadline, self._exit_status)
            self.agent.wait_ready(deadline)
            self.vcpu_threads = {c["cpu-index"]: c["thread-id"]
                                 for c in self.qmp.cmd("query-cpus-fast")}
        except BaseException as exc:
            detail = self.failure_detail()
            self.kill()
            if isinstance(exc, EnvError):  # GuestHung stays GuestHung: the caller may retry
                raise type(exc)(f"{exc}{detail}") from None
            if isinstance(exc, (OSError, TimeoutError)) or exc.__class__.__name__.endswith("Error"):
                raise EnvError(f"guest failed to boot: {exc}{detail}") from None
            raise
        self.boot_seconds = time.monotonic() - t0
        return self.boot_seconds

    def pin(self, pins: dict[int, set[int]]) -> None:
        """Pin vCPU threads: ``pins`` maps vCPU index → allowed host CPUs (sched_setaffinity(2)).
        Raises EnvError naming the vCPU and CPUs when the kernel refuses."""
        for vcpu, cpus in pins.items():
            tid = self.vcpu_threads.get(vcpu)
            if tid is None:
                raise EnvError(f"vCPU {vcpu} has no thread (guest has {len(self.vcpu_threads)} vCPUs)")
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError as exc:
                raise EnvError(f"cannot pin vCPU {vcpu} to host CPUs {sorted(cpus)}: {exc}") from None

    def pin_emulator(self, cpus: set[int]) -> int:
        """Move QEMU's other threads (main loop, I/O, RCU; threads QEMU creates later inherit
        the main thread's affinity) to ``cpus``, off the vCPUs' pCPUs.  Returns the number of
        threads moved; threads that exit meanwhile are skipped."""
        moved = 0
        vcpu_tids = set(self.vcpu_threads.values())
        for entry in os.listdir(f"/proc/{self.pid}/task"):
            tid = int(entry)
            if tid in vcpu_tids:
                continue
            try:
                os.sched_setaffinity(tid, cpus)
                moved += 1
            except OSError:
                pass
        return moved

    def _command(self, name: str) -> None:
        """QMP ``name`` (no arguments).  Raises EnvError when QEMU does not answer within
        :data:`QMP_WAIT` seconds or the monitor fails."""
        if self.qmp and self.alive():
            try:
                self.qmp.cmd(name)
            except Exception as exc:  # noqa: BLE001 - a timeout, a closed socket, a QMP error
                why = (f"QEMU did not answer within {QMP_WAIT:.0f} s"
                       if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}")
                raise EnvError(f"QMP {name} failed: {why}") from None

    def pause(self) -> None:
        """QMP ``stop``: vCPUs stop; guest state (caches, page tables) is kept.  Raises
        EnvError when QEMU does not answer."""
        self._command("stop")

    def resume(self) -> None:
        """QMP ``cont``.  Raises EnvError when QEMU does not answer."""
        self._command("cont")

    def kill(self) -> None:
        """Stop QEMU (QMP ``quit``, then SIGKILL) and remove the work directory. Idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                if self.qmp is not None:
                    self.qmp.settimeout(2.0)
                    self.qmp.cmd("quit")
                self.proc.wait(timeout=3)
            except Exception:  # noqa: BLE001 - any failure: fall through to SIGKILL
                pass
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        try:
            if self.qmp is not None:
                self.qmp.close()
        except Exception:  # noqa: BLE001 - a dead monitor: nothing left to close
            pass
        self.qmp = None
        self.release()


#: The name this class had before backends were registered parts.
Guest = QemuGuest


def require_qemu() -> None:
    """Raises ValueError saying what to install when QEMU is missing."""
    if shutil.which(QEMU) is None:
        raise ValueError(f"{QEMU} is not installed: apt-get install qemu-system-x86")


@BACKENDS.register("qemu")
class QemuBackend(HypervisorBackend):
    """Guests as QEMU processes that vhpc starts itself (the default backend): the placement's
    guest nodes become ``-object memory-backend-*`` + ``-numa`` arguments, vCPU threads are
    pinned after boot (QMP ``query-cpus-fast`` + sched_setaffinity), QMP ``stop``/``cont``
    pause and resume.  QEMU dies with vhpc (PR_SET_PDEATHSIG), so nothing is left over.
    Raises ValueError when QEMU is not installed."""

    def __init__(self, env_name, options, placement, topo):
        super().__init__(env_name, options, placement, topo)
        require_qemu()

    @classmethod
    def probe_accel(cls, kernel=None, use_cache: bool = True) -> ProbeResult:
        """:func:`probe_kvm` (cached per host boot and QEMU version)."""
        return probe_kvm(kernel, use_cache=use_cache)

    @classmethod
    def render_placement(cls, placement, name: str) -> list[str]:
        """The guest's memory and NUMA arguments (:func:`qemu_numa_args`)."""
        qargs = qemu_numa_args(placement)
        return ["QEMU arguments (plus -smp/-m; vCPU threads pinned via QMP query-cpus-fast + "
                "sched_setaffinity)",
                " ".join(qargs) if qargs else f"-m {placement.memory_mib}M (no NUMA backends)"]

    @classmethod
    def export_placement(cls, placements, name: str, pool=()) -> PlacementExport:
        """QEMU argv for the first VM: ``-smp``, ``-m`` and the NUMA/memory backends
        (:func:`qemu_numa_args`); vCPU pinning is applied after start (QMP
        ``query-cpus-fast`` thread ids + sched_setaffinity), as the libvirt form lists it."""
        p = placements[0]
        return PlacementExport("QEMU arguments", "qemu_args",
                               ("-smp", str(p.vcpus), "-m", f"{p.memory_mib}M",
                                *qemu_numa_args(p)))

    def boot(self, request: BootRequest) -> QemuGuest:
        """Boot QEMU for ``request``, pin its vCPU threads to the placement's pins and (with
        ``move_emulator``) its other threads to the host CPUs left.  Raises EnvError."""
        p = request.placement
        machine = self.machine(p)
        cfg = GuestConfig(vcpus=request.vcpus, memory_mib=request.memory_mib,
                          accel=request.accel, kernel=request.kernel,
                          extra_args=qemu_numa_args(p) + list(request.extra_args),
                          boot_timeout=request.boot_timeout,
                          append=list(request.append) + clock_words(machine, request.accel),
                          machine=machine)
        if request.image is not None:  # the user's image: its own kernel, reached over ssh
            guest = request.image.qemu_guest(cfg)
        else:
            guest = QemuGuest(cfg)
        guest.boot()
        pins = p.pin_map() or None
        try:
            if pins:
                guest.pin(pins)
                free = set(os.sched_getaffinity(0)) - set().union(*pins.values())
                if request.move_emulator:
                    if free:
                        guest.pin_emulator(free)
                    guest.emulator_cpus = sorted(free) if free else None
        except (EnvError, OSError) as exc:
            guest.kill()
            raise EnvError(str(exc)) from None
        return guest

    def fingerprint(self) -> dict:
        """``qemu_version`` and ``machine`` (:func:`machine_for` this guest's placement)."""
        from vhpc.host.facts import qemu_version

        return {"qemu_version": qemu_version(), "machine": self.machine(self.placement)}

    def machine(self, placement) -> str:
        """QEMU machine type of this environment's guests: ``pc`` for a user's image (SeaBIOS
        boots its bootloader; a kernel of any distribution finds the PC devices it expects),
        else :func:`machine_for` the placement."""
        return "pc" if getattr(self.options, "image", None) else machine_for(placement)


def _probe_cache_key() -> str:
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip() \
        if Path("/proc/sys/kernel/random/boot_id").exists() else "?"
    from vhpc.host.facts import qemu_version

    return f"{boot_id}:{qemu_version()}"


def probe_kvm(kernel: guestimage.GuestKernel | None = None, timeout: float = 8.0,
              use_cache: bool = True) -> ProbeResult:
    """Decide whether KVM is usable by booting the guest kernel under ``-accel kvm`` to a
    marker within ``timeout`` seconds (8 s is generous: the same boot takes ~2-3 s under TCG).

    Returns ProbeResult("kvm", ...) or ProbeResult("tcg", reason).  A definitive answer
    (:attr:`ProbeResult.definitive`: KVM booted the guest, is missing or inaccessible, QEMU
    refused it or failed its own assertion on it) is cached per host boot and QEMU version in
    ``cache_dir()/kvm-probe.json`` and used while ``use_cache``.  A transient one (QEMU was
    killed or did not start, or the guest timed out) is returned but not cached, so the next
    campaign probes again; except that a time-out right after a time-out, on the same boot and
    QEMU version, is definitive: a KVM boot to the marker takes about a second, and a host busy
    enough to stretch it past ``timeout`` twice in a row is unlikely, while a KVM whose guests
    hang (nested kvm_pvm) would otherwise cost every campaign ``timeout`` seconds of a
    spinning CPU.  ``use_cache=False``
    (``vhpc host --reprobe``) probes afresh and counts no earlier time-out.  Never raises for an
    unusable KVM; raises GuestImageError when no guest kernel exists.
    """
    cache = cache_dir() / "kvm-probe.json"
    key = _probe_cache_key()
    past = _cached_probe(cache, key) if use_cache else {}
    if "accel" in past:
        return ProbeResult(past["accel"], past["reason"] + " (cached probe)", 0.0)
    result = _probe(kernel, timeout)
    if result.timed_out and past.get("timeouts") == 1:
        result = replace(result, reason=result.reason + "; nor did the probe before it",
                         definitive=True)
    if not result.definitive:
        if result.timed_out:  # remembered, so that a second time-out in a row is kept
            write_atomic(cache, json.dumps({"key": key, "timeouts": 1}))
        return replace(result, reason=result.reason + " (not cached: probed again "
                                   "next time)")
    # a new file renamed into place: a symbolic link planted at the name is never followed
    write_atomic(cache, json.dumps({"key": key, "accel": result.accel, "reason": result.reason}))
    return result


def _cached_probe(cache: Path, key: str) -> dict:
    """What ``cache`` holds for this boot and QEMU version (``key``): ``{"accel", "reason"}``
    for a kept answer, ``{"timeouts": 1}`` after one time-out, ``{}`` for nothing usable (no
    file, another key, a damaged or hostile file: read through read_cache_text, so no link,
    0600, this user's)."""
    text = read_cache_text(cache, 1 << 16)
    try:
        data = json.loads(text) if text is not None else None
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("key") != key:
        return {}
    if data.get("accel") in ("kvm", "tcg") and isinstance(data.get("reason"), str):
        return {"accel": data["accel"], "reason": data["reason"]}
    return {"timeouts": 1} if data.get("timeouts") == 1 else {}


#: The KVM device a probe needs (a test points it elsewhere).
KVM_DEVICE = "/dev/kvm"


def _probe(kernel, timeout: float) -> ProbeResult:
    if not os.path.exists(KVM_DEVICE):
        return ProbeResult("tcg", "no /dev/kvm (KVM module not loaded or no VT-x/AMD-V)")
    if not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        return ProbeResult("tcg", "/dev/kvm is not accessible to this user (add it to group kvm)")
    hint = " (the host runs the nested kvm_pvm backend)" if os.path.isdir("/sys/module/kvm_pvm") else ""
    cfg = GuestConfig(vcpus=1, memory_mib=256, accel="kvm", kernel=kernel)
    with tempfile.TemporaryDirectory(prefix="vhpc-probe-") as tmp:
        argv = build_argv(cfg, Path(tmp), probe=True)
        t0 = time.monotonic()
        try:
            proc = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
        except OSError as exc:
            return ProbeResult("tcg", f"QEMU did not start for the KVM probe: {exc}",
                               definitive=False)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return ProbeResult("tcg", f"a Linux guest did not boot under KVM within {timeout:g} s{hint}",
                               time.monotonic() - t0, definitive=False, timed_out=True)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        seconds = time.monotonic() - t0
        text = out.decode("utf-8", "replace")
        if "VHPC-PROBE-OK" in text:
            return ProbeResult("kvm", f"a Linux guest booted under KVM in {seconds:.1f} s", seconds)
        last = text.strip().splitlines()[-1] if text.strip() else f"exit status {proc.returncode}"
        # killed by a signal (the OOM killer, an interrupt): says nothing about KVM itself; but
        # QEMU's own failed assertion (SIGABRT after "Assertion `...' failed", as
        # kvm_buf_set_msrs under the nested kvm_pvm backend) is its answer about this KVM
        return ProbeResult("tcg", f"KVM guest failed: {last}{hint}", seconds,
                           definitive=proc.returncode >= 0 or _asserted(proc.returncode, text))


def _asserted(returncode: int, output: str) -> bool:
    """Whether QEMU ended by its own failed assertion: SIGABRT (assert(3) calls abort(3))
    after glibc's "...: Assertion `...' failed." line."""
    return returncode == -signal.SIGABRT and re.search(r": Assertion `.*' failed", output) is not None


def qemu_numa_args(placement: vhpc.placement.Placement) -> list[str]:
    """QEMU argv fragment for guest memory and NUMA (a list of strings, never a shell string).

    Per guest node i: ``-object memory-backend-ram,id=m<i>,size=<N>M[,host-nodes=..,policy=..]``
    (2m/1g backing: ``memory-backend-memfd`` with ``hugetlb=on,hugetlbsize=2M|1G,prealloc=on``,
    so a short hugepage pool fails at start, not with SIGBUS later), then
    ``-numa node,nodeid=i,cpus=<range>[,cpus=<range>...],memdev=m<i>`` (one ``cpus=`` per
    contiguous run), then ``-numa dist,src=i,dst=j,val=d`` for every i ≠ j.
    Non-contiguous host node sets repeat ``host-nodes=``.

    Returns ``[]`` when the placement has one guest node, no host binding and 4k backing: the
    caller then passes plain ``-m <memory_mib>M``. The caller always passes ``-m`` (equal to
    the total, QEMU checks it) and ``-smp <vcpus>``.
    """
    if not vhpc.placement.needs_guest_numa(placement):
        return []
    args: list[str] = []
    for g in placement.guest_nodes:
        if placement.backing == "4k":
            obj = f"memory-backend-ram,id=m{g.id},size={g.memory_mib}M"
        else:
            hs = "2M" if placement.backing == "2m" else "1G"
            obj = f"memory-backend-memfd,id=m{g.id},size={g.memory_mib}M,hugetlb=on,hugetlbsize={hs},prealloc=on"
        if g.host_nodes and g.policy != "default":
            obj += "".join(f",host-nodes={a}" if a == b else f",host-nodes={a}-{b}" for a, b in _runs(g.host_nodes))
            obj += f",policy={g.policy}"
        args += ["-object", obj]
    for g in placement.guest_nodes:
        cpus = "".join(f",cpus={a}" if a == b else f",cpus={a}-{b}" for a, b in _runs(g.vcpus))
        args += ["-numa", f"node,nodeid={g.id}{cpus},memdev=m{g.id}"]
    for i, row in enumerate(placement.distances):
        for j, d in enumerate(row):
            if i != j:
                args += ["-numa", f"dist,src={i},dst={j},val={d}"]
    return args
