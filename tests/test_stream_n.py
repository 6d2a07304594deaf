"""STREAM's default n computed in Python the way the kernel does (kernels/vhpc-stream.c)."""

import math
import re
import subprocess

import pytest

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


def _host_llc_bytes() -> int:
    """The largest-level data/unified cache of this host as lscpu(1) (util-linux) reports it,
    read independently of vhpc's sysfs parser."""
    out = subprocess.run(["lscpu", "-B", "-C=LEVEL,TYPE,ONE-SIZE"], capture_output=True,
                         text=True, check=True).stdout.splitlines()[1:]
    rows = [ln.split() for ln in out]
    return max((int(lvl), int(size)) for lvl, kind, size in rows if kind in ("Data", "Unified"))[1]


def _expected_n() -> tuple[int, bool]:
    """STREAM's rule by hand on this host's figures: (n, whether the memory cap decided it)."""
    llc = _host_llc_bytes()
    n = max(math.ceil(4 * llc / 8 / 1000) * 1000, 2_000_000)
    avail = next(int(ln.split()[1]) * 1024 for ln in open("/proc/meminfo")
                 if ln.startswith("MemAvailable:"))
    cap = avail // 2 // 3 // 8  # 3 arrays of doubles in half of MemAvailable
    return (min(n, cap), cap < n * 1.1)  # near the cap, MemAvailable's drift changes n


def test_stream_auto_n_on_this_host_is_stream_s_rule_on_lscpu_s_llc():
    n, capped = _expected_n()
    if capped:
        assert quick.stream_auto_n() == pytest.approx(n, rel=0.05)
    else:
        assert quick.stream_auto_n() == n
    assert quick.llc_bytes() == _host_llc_bytes()


def test_dry_run_shows_streams_resolved_n_natively_and_says_guest_for_a_vm():
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "compare", "--dry-run", "-b", "stream",
                        "-e", "native", "-e", "vm", "--repeats", "1", "--warmup", "0"],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"})
    assert r.returncode == 0, r.stderr
    n, capped = _expected_n()
    native = next(ln for ln in r.stdout.splitlines() if "│ native" in ln)
    shown = int(re.search(r"n=(\d+) \(4x LLC", native).group(1))
    assert shown == (pytest.approx(n, rel=0.05) if capped else n)
    vm = next(ln for ln in r.stdout.splitlines() if "│ vm" in ln)
    # the guest sizes from this host's LLC too (-L), only its memory may cap n lower
    uncapped = max(math.ceil(4 * _host_llc_bytes() / 8 / 1000) * 1000, 2_000_000)
    assert f"n={uncapped} (4x this host's LLC" in vm and "the guest's memory is short" in vm
