"""STREAM's default n computed in Python the way the kernel does (kernels/vhpc-stream.c)."""

from vhpc.benchmarks import quick


def test_stream_auto_n_by_hand():
    # 32 MiB LLC: 4 * 33554432 / 8 = 16777216 elements, rounded up to 16778000
    assert quick.stream_auto_n(32 << 20, 64 << 30) == 16_778_000
    # a tiny cache: the 2,000,000 floor
    assert quick.stream_auto_n(1 << 20, 64 << 30) == 2_000_000
    # 300 MiB available: 3 arrays in half of it → 300 MiB / 2 / 3 / 8 = 6553600
    assert quick.stream_auto_n(32 << 20, 300 << 20) == 6_553_600
    # unknown memory: no cap
    assert quick.stream_auto_n(32 << 20, 0) == 16_778_000


def test_stream_auto_n_on_this_host_covers_4x_its_llc():
    n = quick.stream_auto_n()
    llc = quick.llc_bytes()
    assert n * 8 >= 4 * llc or n * 8 * 3 <= quick.mem_available_bytes() // 2 + 24


def test_dry_run_shows_streams_resolved_n_natively_and_says_guest_for_a_vm():
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "compare", "--dry-run", "-b", "stream",
                        "-e", "native", "-e", "vm", "--repeats", "1", "--warmup", "0"],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"})
    assert r.returncode == 0, r.stderr
    llc = quick.llc_bytes()
    n = max(-(-4 * llc // 8 // 1000) * 1000, 2_000_000)  # STREAM's rule, by hand
    n = min(n, quick.mem_available_bytes() // 48) if quick.mem_available_bytes() else n
    native = next(ln for ln in r.stdout.splitlines() if "│ native" in ln)
    assert f"n={n} (4x LLC" in native
    vm = next(ln for ln in r.stdout.splitlines() if "│ vm" in ln)
    assert "n=auto (4x the guest's LLC, at run time)" in vm
