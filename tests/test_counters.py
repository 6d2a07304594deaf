"""Diagnostics: perf CSV parsing, derived CPI/MPKI, vmstat deltas, and the real collection
path on this host (values where available, a reason where not)."""

from vhpc.host import counters
from vhpc.environments.native.environment import NativeEnvironment

PERF_CSV = """\
# started on Sun Nov 22 00:00:00 2026

1200000,,cycles,1000000,100.00,,
400000,,instructions,1000000,100.00,0.33,insn per cycle
2000,,LLC-load-misses,1000000,100.00,,
<not supported>,,branch-misses:u,0,100.00,,
"""


def test_perf_csv_counts_and_derived_cpi_mpki():
    counts = counters.parse_perf_csv(PERF_CSV)
    assert counts == {"cycles": 1.2e6, "instructions": 4e5, "LLC-load-misses": 2000.0,
                      "branch-misses": None}
    d = counters.derive(counts)
    assert d["cpi"] == 3.0                   # 1.2e6 / 4e5
    assert d["mpki"] == 5.0                  # 1000 * 2000 / 4e5
    assert counters.derive({"cycles": None, "instructions": 1.0}) == {"cpi": None, "mpki": None}


def test_vmstat_delta_only_for_known_keys():
    a = counters.parse_vmstat("pgfault 10\nnuma_hit 5\nnr_free_pages 7\n")
    b = counters.parse_vmstat("pgfault 25\nnuma_hit 9\nnr_free_pages 1\n")
    assert counters.delta(a, b) == {"pgfault": 15, "numa_hit": 4}
    assert counters.delta(None, b) is None


def test_native_trial_records_rusage_and_perf_or_why_not(kernels_built):
    r = NativeEnvironment().run([str(kernels_built / "vhpc-pagefault"), "-m", "4", "-r", "1"],
                                timeout=60)
    assert r.ok
    ru = r.diagnostics.rusage
    assert ru.minflt >= 1024  # 4 MiB of 4 KiB pages touched at least once
    perf = r.diagnostics.perf
    ok, why = counters.perf_status()
    if ok:
        assert perf.counts["instructions"] > 0 and perf.cpi > 0
    else:
        assert perf.unavailable == why and r.diagnostics.unavailable["perf"] == why


def test_kvm_exit_counters_from_a_debugfs_tree(tmp_path):
    vm = tmp_path / "4242-17"
    vm.mkdir()
    (vm / "exits").write_text("1200\n")
    (vm / "io_exits").write_text("30\n")
    (tmp_path / "999-3").mkdir()
    assert counters.kvm_exits(4242, str(tmp_path)) == {"exits": 1200, "io_exits": 30}
    assert counters.kvm_exits(1, str(tmp_path)) is None
    assert counters.kvm_exits(4242, str(tmp_path / "missing")) is None
