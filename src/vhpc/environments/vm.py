"""The ``vm`` environment: benchmarks run inside a QEMU guest that shares the host's root.

Options (``-e vm:k=v,...``): ``vcpus`` (default 2), ``memory`` (MiB, default 1024), ``pin``
(``auto`` = vCPU i on host CPU i; ``none`` = float; or a list ``0,1`` / range ``0-1`` giving
vCPU i's host CPU), ``accel`` (``auto`` probes KVM and falls back to TCG; ``kvm``; ``tcg``),
``kernel`` (a /boot/vmlinuz path).

A *session* is one boot.  Trials in a session are warm except the first (``session_index`` 0);
:meth:`VmEnvironment.new_session` reboots for a cold trial.  When a trial hangs or the guest
dies, the session is killed, the failure (with the console tail) is returned in the result, and
the next trial boots a fresh session.
"""

from __future__ import annotations

import os
import time
from typing import Any

from vhpc.environments import guestimage, hostinfo
from vhpc.environments.base import EnvError, Environment, RunResult, now
from vhpc.environments.qemu import Guest, GuestConfig, probe_kvm

#: Seconds the host waits beyond a trial's own timeout before declaring the guest hung.
HANG_GRACE = 30.0


def parse_cpu_list(text: str) -> list[int]:
    """``"0-2,5"`` → ``[0, 1, 2, 5]`` (the kernel's cpulist format, cpuset(7)).
    Raises ValueError on malformed text."""
    cpus: list[int] = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def resolve_pinning(pin: str, vcpus: int, host_cpus: list[int]) -> dict[int, set[int]] | None:
    """vCPU → allowed host CPUs for the ``pin`` option, or None for ``none`` (float).

    ``auto``: vCPU i on the i-th allowed host CPU (needs vcpus ≤ host CPUs);
    a cpulist: vCPU i on its i-th entry (needs exactly ``vcpus`` entries, all on the host).
    Raises ValueError with a message saying what to change.
    """
    if pin == "none":
        return None
    if pin == "auto":
        if vcpus > len(host_cpus):
            raise ValueError(
                f"vcpus={vcpus} but the host has {len(host_cpus)} CPUs: "
                "use fewer vcpus or pin=none to let vCPUs float (oversubscribed)")
        return {i: {host_cpus[i]} for i in range(vcpus)}
    try:
        cpus = parse_cpu_list(pin)
    except ValueError:
        raise ValueError(f"pin={pin!r} is not auto, none or a CPU list like 0-1 or 0,2") from None
    if len(cpus) != vcpus:
        raise ValueError(f"pin={pin} lists {len(cpus)} host CPUs for {vcpus} vCPUs: give one per vCPU")
    missing = sorted(set(cpus) - set(host_cpus))
    if missing:
        raise ValueError(f"pin={pin} names host CPUs {missing} that are not available "
                         f"(available: {min(host_cpus)}-{max(host_cpus)})")
    return {i: {c} for i, c in enumerate(cpus)}


class VmEnvironment(Environment):
    """A QEMU guest environment (see module docstring for options).

    Raises EnvError from :meth:`start` when the guest cannot boot, naming what to install or
    change.  ``accel`` is resolved on first use (``auto`` → probe).
    """

    kind = "vm"

    def __init__(self, name: str = "vm", vcpus: int = 2, memory: int = 1024,
                 pin: str = "auto", accel: str = "auto", kernel: str | None = None,
                 boot_timeout: float = 90.0):
        super().__init__(name)
        if vcpus < 1:
            raise ValueError(f"vcpus={vcpus}: need at least 1")
        if memory < 128:
            raise ValueError(f"memory={memory} MiB is too small for the guest: use at least 256")
        if accel not in ("auto", "kvm", "tcg"):
            raise ValueError(f"accel={accel!r}: use auto, kvm or tcg")
        self.vcpus, self.memory, self.pin_spec = vcpus, memory, pin
        self.pins = resolve_pinning(pin, vcpus, sorted(os.sched_getaffinity(0)))
        self.requested_accel = accel
        self.kernel_path = kernel
        self.boot_timeout = boot_timeout
        self._accel: str | None = None if accel == "auto" else accel
        self.accel_reason = "requested" if self._accel else ""
        self.guest: Guest | None = None
        self.sessions = 0
        self.boot_times: list[float] = []

    @property
    def accel(self) -> str:
        if self._accel is None:
            probe = probe_kvm(guestimage.find_kernel(self.kernel_path))
            self._accel, self.accel_reason = probe.accel, probe.reason
        return self._accel

    def fingerprint(self) -> dict[str, Any]:
        kernel = guestimage.find_kernel(self.kernel_path)
        fp = hostinfo.fingerprint()
        fp.update(
            kind="vm", accel=self.accel, accel_reason=self.accel_reason,
            emulated=self.accel == "tcg", qemu_version=hostinfo.qemu_version(),
            guest_kernel=kernel.release, machine="pc", vcpus=self.vcpus,
            memory_mib=self.memory,
            pinning={str(k): sorted(v) for k, v in self.pins.items()} if self.pins else "float",
        )
        return fp

    def _boot(self) -> None:
        cfg = GuestConfig(vcpus=self.vcpus, memory_mib=self.memory, accel=self.accel,
                          kernel=guestimage.find_kernel(self.kernel_path),
                          boot_timeout=self.boot_timeout)
        guest = Guest(cfg)
        self.boot_times.append(guest.boot())
        if self.pins:
            try:
                guest.pin(self.pins)
            except EnvError:
                guest.kill()
                raise
        self.guest = guest
        self.sessions += 1

    def start(self) -> None:
        if self.guest is None or not self.guest.alive():
            self._boot()

    def close(self) -> None:
        if self.guest is not None:
            self.guest.kill()
            self.guest = None

    def new_session(self) -> None:
        self.close()
        self._boot()

    def pause(self) -> None:
        if self.guest is not None:
            self.guest.pause()

    def resume(self) -> None:
        if self.guest is not None:
            self.guest.resume()

    def applied(self) -> dict[str, Any]:
        """Placement as applied, read back from the host: per vCPU thread the allowed host
        CPUs and the CPU it last ran on; the QEMU pid; the accelerator."""
        if self.guest is None:
            return {}
        return {"accel": self.accel, "qemu_pid": self.guest.pid,
                "vcpus": self.guest.read_affinity()}

    def run(self, argv, env=None, timeout=600.0) -> RunResult:
        started = now()
        t0 = time.monotonic()
        try:
            self.start()
            self.guest.resume()
        except EnvError as exc:
            return RunResult(None, "", "", started, time.monotonic() - t0, error=str(exc))
        index = self.guest.trials
        self.guest.trials += 1
        try:
            reply = self.guest.request("run", timeout + HANG_GRACE, argv=list(argv),
                                       env=dict(env or {}), timeout=timeout, cwd="/tmp")
        except (EnvError, OSError) as exc:
            applied = self.applied()
            detail = self.guest.failure_detail()
            self.close()
            return RunResult(None, "", "", started, time.monotonic() - t0,
                             error=f"guest failed during the trial: {exc}{detail}",
                             session_index=index, applied=applied)
        timed_out = bool(reply.get("timed_out"))
        applied = self.applied()  # after the trial: where the vCPUs really ran
        return RunResult(
            None if timed_out else reply.get("rc"), reply.get("stdout", ""),
            reply.get("stderr", ""), started, float(reply.get("elapsed", 0.0)),
            timed_out=timed_out, session_index=index, applied=applied,
        )
