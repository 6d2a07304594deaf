"""The ``vm`` environment: benchmarks run inside a guest that shares the host's root, started by
a hypervisor backend (``backend``: ``qemu`` by default, ``libvirt``; backends/base.py).

Options (``-e vm:k=v,...``): ``vcpus`` (default 2), ``memory`` (MiB, default 1024), ``pin``
(``auto`` = vCPU i on host CPU i; ``none`` = float; or a list ``0,1`` / range ``0-1`` giving
vCPU i's host CPU) or ``policy`` (a placement policy: ``compact``, ``spread``, ``span:K``,
``confine:N``, ``nodes:LIST``, ``map:...``, ``float``; docs/placement.md), ``numa`` (guest NUMA
nodes: ``hidden`` = 1, ``mirror``, or a count), ``backing`` (``4k``, ``2m``, ``1g``),
``accel`` (``auto`` probes KVM and falls back to TCG; ``kvm``; ``tcg``), ``kernel`` (a
/boot/vmlinuz path), ``guest_bind`` (``CPUNODES:MEMNODES``: run benchmarks under numactl
inside the guest, e.g. ``0:1`` for remote memory), ``corunner`` (``low``, ``medium``,
``high``: a second VM placed by ``corunner_policy`` runs a memory load of that intensity
throughout the session, seed 003 Fig. 5), ``strict`` (1: a placement that does not read back as planned fails the
trial instead of being a warning).

Every placement goes through :mod:`vhpc.placement` (the ``pin`` forms are ``map:`` policies),
so QEMU gets per-guest-node memory backends bound to host nodes and vCPU threads are pinned
from the same plan.  After boot the guest's own view of its NUMA nodes is read; after every
trial the vCPU threads' affinity and the QEMU process's memory per host node
(``/proc/PID/numa_maps``) are read back and compared with the plan.

A *session* is one boot.  Trials in a session are warm except the first (``session_index`` 0);
:meth:`VmEnvironment.new_session` reboots for a cold trial.  When a trial hangs or the guest
dies, the session is killed, the failure (with the console tail) is returned in the result, and
the next trial boots a fresh session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from typing import Any

import vhpc.placement
from vhpc.core import records
import vhpc.topology
from vhpc.host import counters, facts
from vhpc.environments.vm import guestimage
from vhpc.environments.vm.agent import GuestHung
from vhpc.environments.base import EnvError, Environment, RunResult, now
from vhpc.host.numa import guest_nodes, read_numa_maps
from vhpc.environments.vm.backends.base import (BACKENDS, BootRequest, GuestSession,
                                                HypervisorBackend)
from vhpc.environments.vm.options import VmOptions, corunner_argv

#: Seconds the host waits beyond a trial's own timeout before declaring the guest hung.
HANG_GRACE = 30.0


def placement_mismatches(plan, vcpus: list[dict], memory: dict | None,
                         guest_numa: list[dict] | None) -> list[str]:
    """Differences between a Placement and what was read back; [] when all agree.

    vcpus: ``[{"vcpu", "allowed", ...}]`` (Guest.read_affinity); memory: parse_numa_maps
    output of the QEMU process; guest_numa: numa.guest_nodes output from inside the guest.
    """
    out = []
    for v in vcpus:
        want = sorted(plan.vcpu_pins[v["vcpu"]]) if plan.vcpu_pins else None
        if want is not None and v["allowed"] != want:
            out.append(f"vCPU {v['vcpu']} may run on {v['allowed']}, planned {want}")
    bound = plan.host_nodes
    if memory and bound:
        for m in memory["mappings"]:
            for n, mib in m["node_mib"].items():
                if n not in bound and mib >= 1:
                    out.append(f"{mib:.0f} MiB of guest memory on host node {n}, planned "
                               f"{vhpc.topology.format_list(bound)}")
    if guest_numa is not None:
        if len(guest_numa) != len(plan.guest_nodes):
            out.append(f"guest sees {len(guest_numa)} NUMA nodes, planned {len(plan.guest_nodes)}")
        else:
            for seen, gn in zip(guest_numa, plan.guest_nodes):
                want = vhpc.topology.format_list(gn.vcpus)
                if seen["cpus"] != want:
                    out.append(f"guest node {gn.id} has vCPUs {seen['cpus'] or 'none'}, planned {want}")
    return out


#: seconds a freshly booted guest may take to answer its first request (its NUMA nodes)
FIRST_ANSWER_WAIT = 30.0


class VmEnvironment(Environment):
    """A guest environment (see module docstring for options), its guests started by the
    hypervisor backend ``options.backend_name`` (a :class:`HypervisorBackend` from
    :data:`BACKENDS`, looked up by name: no backend is special here).

    ``options``: the validated :class:`~vhpc.environments.vm.options.VmOptions`;
    ``placement``: the guest's :class:`~vhpc.placement.Placement`, computed once by the kind's
    plan (a vcluster passes each guest's from its cluster plan; None when the backend defines
    it, libvirt's ``domain_xml``); ``corunner``: the co-runner guest's placement when
    ``options.corunner`` is set; ``extra_args`` / ``append``: hypervisor argv and kernel
    command-line words (a vcluster's network and shared-memory devices).  Raises ValueError
    when the hypervisor or a guest kernel is missing, an option does not suit the backend, or
    the hypervisor cannot be reached; the next trial records EnvError text when the guest
    cannot boot.  ``accel`` is resolved on first use (``auto`` → the backend's probe).
    Attributes: ``guest`` / ``corunner`` (the running :class:`GuestSession`s or None),
    ``sessions`` (boots so far), ``removed_leftovers`` (guests of killed vhpc runs removed).
    """


    def __init__(self, name: str, options: VmOptions, placement: vhpc.placement.Placement | None,
                 topo: vhpc.topology.Topology, corunner: vhpc.placement.Placement | None = None,
                 extra_args: list[str] | None = None, append: list[str] | None = None):
        super().__init__(name)
        try:
            guestimage.find_kernel(options.kernel)
        except guestimage.GuestImageError as exc:
            raise ValueError(str(exc)) from None
        self.backend: HypervisorBackend = BACKENDS.get(options.backend_name)(
            name, options, placement, topo)
        options, self.placement = self.backend.options, self.backend.placement
        self.options, self.topo = options, topo
        self.extra_args, self.append = list(extra_args or []), list(append or [])
        self.vcpus, self.memory = options.vcpus, options.memory
        self.corunner_argv = corunner_argv(options.corunner) if options.corunner else None
        self.corunner_label = options.corunner or ""
        self.corunner_placement = corunner
        self.corunner: GuestSession | None = None
        self.strict = options.strict
        self.guest_numactl: list[str] = []
        if options.guest_bind is not None:
            cpu_nodes, mem_nodes = (vhpc.topology.format_list(n) for n in options.guest_bind)
            self.guest_numactl = ["numactl", f"--cpunodebind={cpu_nodes}",
                                  f"--membind={mem_nodes}"]
        self.kernel_path = options.kernel
        self.boot_timeout = options.boot_timeout
        self._accel: str | None = None if options.accel == "auto" else options.accel
        self.accel_reason = "requested" if self._accel else ""
        self.guest: GuestSession | None = None
        self.guest_numa: list[dict] | None = None
        self.emulator_cpus: list[int] | None = None
        self.sessions = 0
        self.boot_times: list[float] = []
        #: why a boot was done again: the guest hung before its first answer (GuestHung), as
        #: one TCG boot did in a dozen full test runs here (some 500 boots); a second hang
        #: fails the trial
        self.boot_hangs: list[str] = []
        self._trials_in_session: dict[str, int] = {}
        try:  # an unreachable hypervisor is a setup error, said once before any trial
            self.removed_leftovers: list[str] = self.backend.remove_leftovers()
        except EnvError as exc:
            raise ValueError(str(exc)) from None

    def benchmark_cpus(self) -> int:
        """The guest's vCPUs."""
        return self.vcpus

    @property
    def accel(self) -> str:
        """``kvm`` or ``tcg``: probed once on first use with the guest's kernel (the backend's
        :meth:`probe_accel`), which also sets :attr:`accel_reason`."""
        if self._accel is None:
            probe = self.backend.probe_accel(guestimage.find_kernel(self.kernel_path))
            self._accel, self.accel_reason = probe.accel, probe.reason
        return self._accel

    def fingerprint(self) -> dict[str, Any]:
        """The host's fingerprint plus the guest's (accelerator, kernel, size, placement as
        planned, co-runner), then the backend's fields (hypervisor version, machine, ...)."""
        kernel = guestimage.find_kernel(self.kernel_path)
        fp = facts.fingerprint()
        fp.update(
            kind="vm", accel=self.accel, accel_reason=self.accel_reason,
            emulated=self.accel == "tcg", guest_kernel=kernel.release, vcpus=self.vcpus,
            memory_mib=self.memory, placement=vhpc.placement.describe(self.placement),
            plan=self.placement.to_dict(),
            corunner=(f"{self.corunner_label}: "
                      f"{vhpc.placement.describe(self.corunner_placement)}"
                      if self.corunner_argv else None),
        )
        fp.update(self.backend.fingerprint())
        return fp

    def _request(self, placement: vhpc.placement.Placement, main: bool) -> BootRequest:
        """What the backend boots for this session: the measured guest (``main``: the
        options' size, the vcluster's argv, emulator threads moved off the vCPUs) or the
        co-runner (the size of its placement)."""
        common = dict(label=self.name, session=self.sessions, accel=self.accel,
                      kernel=guestimage.find_kernel(self.kernel_path), placement=placement,
                      boot_timeout=self.boot_timeout)
        if not main:
            return BootRequest(vcpus=placement.vcpus, memory_mib=placement.memory_mib,
                               move_emulator=False, **common)
        return BootRequest(vcpus=self.vcpus, memory_mib=self.memory,
                           extra_args=tuple(self.extra_args), append=tuple(self.append),
                           **common)

    def _boot(self) -> None:
        if self.placement.hugepage_kib:  # checked at boot: --host-knob may reserve them first
            try:
                vhpc.placement.check_hugepages(self.placement, facts.read_hugepages())
            except vhpc.placement.PlacementError as exc:
                raise EnvError(f"{exc} (reserve them with --host-knob hugepages_2m=N)") from None
        self.stage(self.boot_stage())
        for attempt in (1, 2):
            try:
                guest = self._boot_main()
                break
            except GuestHung as exc:
                if attempt == 2:
                    raise EnvError(f"the guest hung twice while booting: {exc}") from None
                self.boot_hangs.append(str(exc))
        self.guest, self.emulator_cpus = guest, guest.emulator_cpus
        if self.corunner_argv:
            try:
                self.corunner = self._boot_corunner()
            except EnvError:
                self.close()
                raise
        self.sessions += 1
        self._trials_in_session = {}
        self.stage(f"ready after {guest.boot_seconds:.0f} s" if guest.boot_seconds else "ready")

    def boot_stage(self) -> str:
        """What the boot about to start is, in words, for the stage line (:meth:`stage`): the
        first boot of this process's sessions or a reboot (session N), under TCG said slow."""
        what = "first boot" if self.sessions == 0 else f"reboot (session {self.sessions + 1})"
        return f"{what} of the guest" + (" (TCG emulation: slow)" if self.accel == "tcg" else "")

    def _boot_main(self) -> GuestSession:
        """Boot the measured VM and read its own view of its NUMA nodes.  Raises GuestHung
        when its agent stops answering (the guest is killed first), EnvError otherwise."""
        guest = self.backend.boot(self._request(self.placement, main=True))
        self.boot_times.append(guest.boot_seconds)
        try:
            self.guest_numa = guest_nodes(
                lambda path: guest.request("read", FIRST_ANSWER_WAIT, path=path).get("data"))
        except (EnvError, OSError) as exc:
            detail = guest.failure_detail()
            guest.kill()
            # an EnvError keeps its type (GuestHung: _boot retries), as the backends' boot does
            raise (type(exc) if isinstance(exc, EnvError) else EnvError)(f"{exc}{detail}") from None
        return guest

    def _boot_corunner(self) -> GuestSession:
        """A second VM, placed by ``corunner_policy``, that runs the co-runner load in a loop
        for the whole session (seed 003 Fig. 5: VMs contending for LLC, memory controllers and
        the interconnect).  It is paused and resumed with the measured VM."""
        p = self.corunner_placement
        guest = self.backend.boot(self._request(p, main=False))
        try:
            loop = 'while :; do "$@"; done >/dev/null 2>&1 &'
            reply = guest.request("run", 60.0, argv=["sh", "-c", loop, "sh", *self.corunner_argv],
                                  env={"OMP_NUM_THREADS": str(p.vcpus)}, timeout=30.0)
            if reply.get("rc") != 0:
                raise EnvError(f"co-runner did not start: {reply.get('stderr', '')[-200:]}")
        except (EnvError, OSError) as exc:
            guest.kill()
            raise EnvError(f"co-runner VM: {exc}") from None
        return guest

    def start(self) -> None:
        """Boot the guest unless one is running (idempotent).  Raises EnvError when the boot fails
        or hugepages the placement needs are not reserved."""
        if self.guest is None or not self.guest.alive():
            self._boot()

    def close(self) -> None:
        """Kill both sessions and release the backend's connections; safe to call twice."""
        for g in (self.guest, self.corunner):
            if g is not None:
                g.kill()
        self.guest = self.corunner = None
        self.backend.close()

    def stop(self) -> None:
        """Stop the guests, keeping what a later session reuses (nothing here: :meth:`close`;
        a user's image keeps its overlay)."""
        self.close()

    def new_session(self) -> None:
        """End the current session; the next trial boots a fresh guest (a cold trial)."""
        self.close()

    def pause(self) -> None:
        """Pause both guests; a guest whose hypervisor does not answer ends the session (the
        next trial boots afresh) rather than holding the campaign."""
        try:
            for g in (self.guest, self.corunner):
                if g is not None:
                    g.pause()
        except EnvError:
            self.close()

    def resume(self) -> None:
        """Resume both guests.  Raises EnvError (the session closed) when one does not
        answer."""
        try:
            for g in (self.guest, self.corunner):
                if g is not None:
                    g.resume()
        except EnvError:
            self.close()
            raise

    def throttle_pid(self) -> int | None:
        """The guest's hypervisor process (its vCPU threads do the guest's work)."""
        return self.guest.pid if self.guest is not None else None

    def applied(self) -> records.AppliedPlacement | None:
        """Placement as applied, read back from the host and the guest: per vCPU thread the
        allowed host CPUs and the CPU it last ran on; where the hypervisor's other threads may
        run (moved off the vCPUs' pCPUs when the host has CPUs to spare); its resident memory
        per host node (numa_maps) and its page locality on the planned nodes; the guest's NUMA
        nodes; the mismatches with the plan; then what the backend adds."""
        if self.guest is None:
            return None
        vcpus = self.guest.read_affinity()
        for v in vcpus:
            last = v.get("last_cpu")
            v["last_node"] = self.topo.node_of_pu(last) if last in self.topo.pu_ids else None
        memory = read_numa_maps(self.guest.pid)
        corunner = None
        if self.corunner is not None:
            corunner = {"load": self.corunner_label, "hypervisor_pid": self.corunner.pid,
                        "vcpus": self.corunner.read_affinity(),
                        "plan": vhpc.placement.describe(self.corunner_placement)}
        mem = records.MemoryReadback(**memory) if memory else None
        return self.backend.applied(self.guest, records.AppliedPlacement(
            accel=self.accel, hypervisor_pid=self.guest.pid, session=self.sessions, corunner=corunner,
            emulator_cpus=self.emulator_cpus or "shared with the vCPUs (no free host CPU)",
            vcpus=vcpus, memory=mem, guest_numa=self.guest_numa,
            page_locality=mem.locality(self.placement.host_nodes) if mem else None,
            mismatches=placement_mismatches(self.placement, vcpus, memory, self.guest_numa)))

    def run(self, argv, env=None, timeout=600.0, key: str = "") -> RunResult:
        """Run ``argv`` in the guest (booting it if needed).  ``key`` names the trial kind
        (benchmark + parameters): ``session_index`` counts earlier trials of the same key in
        this session, so 0 means the first (cold) run after boot.  ``timeout``: seconds before
        the command is killed (a boot does not count).  Never raises for a failing command or
        boot: failures are in the result."""
        started = now()
        t0 = time.monotonic()
        try:
            self.start()
            self.resume()
        except EnvError as exc:
            return RunResult(None, "", "", started, time.monotonic() - t0, error=str(exc))
        index = self._trials_in_session.get(key, 0)
        self._trials_in_session[key] = index + 1
        before = self._probe_state()
        perf = self._start_guest_perf()
        try:
            reply = self.guest.request("run", timeout + HANG_GRACE,
                                       argv=self.guest_numactl + list(argv),
                                       env=dict(env or {}), timeout=timeout, cwd="/tmp")
        except (EnvError, OSError) as exc:
            applied = self.applied()
            detail = self.guest.failure_detail()
            self.close()
            return RunResult(None, "", "", started, time.monotonic() - t0,
                             error=f"guest failed during the trial: {exc}{detail}",
                             session_index=index, applied=applied)
        finally:
            perf_counts = self._stop_guest_perf(perf)
        timed_out = bool(reply.get("timed_out"))
        after = self._probe_state()
        applied = self.applied()  # after the trial: where the vCPUs really ran
        error = None
        if self.strict and applied is not None and applied.mismatches:
            error = "placement mismatch (strict): " + "; ".join(applied.mismatches)
        return RunResult(
            None if timed_out else reply.get("rc"), reply.get("stdout", ""),
            reply.get("stderr", ""), started, float(reply.get("elapsed", 0.0)),
            timed_out=timed_out, error=error, session_index=index, applied=applied,
            diagnostics=records.Diagnostics.build(
                rusage=reply.get("rusage"),
                guest_vmstat=counters.delta(before["vmstat"], after["vmstat"]),
                qemu_faults=counters.delta(before["qemu_faults"], after["qemu_faults"]),
                memory_node_mib_before=before["node_mib"],
                memory_node_mib_after=after["node_mib"],
                perf=perf_counts,
                kvm_exits=counters.delta(before["kvm"], after["kvm"]) or {
                    "unavailable": "KVM exit counters need a KVM guest and debugfs mounted "
                                   "(/sys/kernel/debug/kvm)"},
            ),
        )

    def _start_guest_perf(self):
        """Host-side guest-mode counting (``perf stat -e cycles:G,...  -p QEMU``) for KVM
        guests; returns (process, file) or the reason it is unavailable."""
        if self.accel != "kvm":
            return ("a TCG guest has no PMU, and host-side counting of QEMU would measure the "
                    "emulator, not the guest")
        ok, why = counters.perf_status()
        if not ok:
            return why
        fd, path = tempfile.mkstemp(prefix="vhpc-perf-", suffix=".csv")
        os.close(fd)
        events = ",".join(f"{e}:G" for e in counters.PERF_EVENTS)
        proc = subprocess.Popen(["perf", "stat", "-x,", "-o", path, "-e", events, "-p",
                                 str(self.guest.pid)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        return proc, path

    @staticmethod
    def _stop_guest_perf(perf) -> records.PerfCounters:
        if isinstance(perf, str):
            return records.PerfCounters(unavailable=perf)
        proc, path = perf
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        result = counters.perf_result(path)
        os.unlink(path)
        return result

    def _probe_state(self) -> dict[str, Any]:
        """Guest /proc/vmstat, QEMU's fault counts, memory per host node and (KVM) exit
        counters, right now."""
        vmstat = None
        try:
            reply = self.guest.request("read", 30.0, path="/proc/vmstat")
            if "data" in reply:
                vmstat = counters.parse_vmstat(reply["data"])
        except (EnvError, OSError):
            pass
        maps = read_numa_maps(self.guest.pid)
        return {"vmstat": vmstat, "qemu_faults": counters.process_faults(self.guest.pid),
                "node_mib": maps["node_mib"] if maps else None,
                "kvm": counters.kvm_exits(self.guest.pid) if self.accel == "kvm" else None}
