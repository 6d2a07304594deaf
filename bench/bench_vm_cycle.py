#!/usr/bin/env python3
"""VM cycle time: a cold vhpc trial (boot, run `true`, stop) vs a bare QEMU boot.

The reference is the cheapest boot QEMU can do with the same accelerator: ``-M microvm``,
``-kernel vmlinux`` (PVH) and vhpc's initramfs in probe mode (prints a marker and powers
off), with no devices.  The goal (issue 22) is a cold trial within 1.2x of it; guests boot
``-M microvm,pcie=on`` unless they need several NUMA nodes (qemu.machine_for).

The two are run as interleaved pairs (order flipped every pair) after one unmeasured warm-up
of each, so drifting load on a shared host falls on both; the ratio is given of the medians and
as the median of the pairs' ratios.

Usage: .venv/bin/python bench/bench_vm_cycle.py [--runs 5] [--pin none|auto]
"""

import argparse
import statistics
import subprocess
import time

from vhpc.environments.vm import guestimage
from vhpc.environments.vm.backends import qemu
from vhpc.spec.parse import env as env_spec


def bare_boot(accel: str) -> float:
    kernel = guestimage.find_kernel()
    argv = [qemu.QEMU, "-M", "microvm", "-accel", accel, "-cpu", "max" if accel == "tcg" else "host",
            "-smp", "1", "-m", "256M", "-nodefaults", "-no-user-config", "-display", "none",
            "-no-reboot", "-kernel", str(guestimage.unpack_vmlinux(kernel)),
            "-initrd", str(guestimage.build_initramfs(kernel)),
            "-append", guestimage.kernel_cmdline(probe=True), "-serial", "stdio"]
    t0 = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    dt = time.monotonic() - t0
    assert "VHPC-PROBE-OK" in out.stdout, out.stdout[-500:]
    return dt


def cold_trial(accel: str, pin: str = "none") -> tuple[float, float]:
    t0 = time.monotonic()
    env = env_spec("vm", vcpus=1, memory=256, accel=accel, pin=pin).build()
    try:
        r = env.run(["true"], timeout=60)
        assert r.ok, r
        boot = env.boot_times[-1]
    finally:
        env.close()
    return time.monotonic() - t0, boot


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pin", default="none",
                    help="the vhpc guest's pin= (default none: the bare QEMU is not pinned "
                         "either, so both are scheduled alike; auto pins the vCPU to CPU 0 and "
                         "QEMU's other threads off it, which on a host shared with other load "
                         "waits for that one CPU)")
    args = ap.parse_args()
    accel = qemu.probe_kvm().accel
    bare_boot(accel), cold_trial(accel, args.pin)  # page cache and initramfs warm: not counted
    # interleaved pairs, the order flipped every pair, so load that drifts on a shared host
    # falls on both sides alike
    bare, cold = [], []
    for i in range(args.runs):
        if i % 2:
            cold.append(cold_trial(accel, args.pin))
            bare.append(bare_boot(accel))
        else:
            bare.append(bare_boot(accel))
            cold.append(cold_trial(accel, args.pin))
    b = statistics.median(bare)
    c = statistics.median(x[0] for x in cold)
    boot = statistics.median(x[1] for x in cold)
    pairs = statistics.median(x[0] / y for x, y in zip(cold, bare))
    print(f"accelerator: {accel}; vhpc guest pin={args.pin}")
    print(f"bare microvm boot to marker:  median {b:.2f} s  ({', '.join(f'{x:.2f}' for x in bare)})")
    print(f"vhpc cold trial (boot+run+stop): median {c:.2f} s  (boot to agent ready {boot:.2f} s)"
          f"  ({', '.join(f'{x[0]:.2f}' for x in cold)})")
    print(f"ratio cold trial / bare boot: {c / b:.2f}x of the medians, {pairs:.2f}x median of "
          f"{args.runs} interleaved pairs (goal <= 1.2x)")


if __name__ == "__main__":
    main()
