"""Diagnostics: perf CSV parsing, derived CPI/MPKI, vmstat deltas, and the real collection
path on this host (values where available, a reason where not)."""

from vhpc.host import counters, probes
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


def test_a_host_probe_is_remembered_for_its_key_only(tmp_path, monkeypatch):
    """A probe's answer is kept in the cache folder for the next process with the same key;
    another key, an answer the caller does not keep, and a cache file others may write (not
    believed) each cost the probe again."""
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path))
    calls = []

    def probe(value):
        def run():
            calls.append(value)
            return value
        return run

    assert probes.remembered("p", ["boot-1", 2], probe([True, "counts"])) == [True, "counts"]
    assert probes.remembered("p", ["boot-1", 2], probe([False, "other"])) == [True, "counts"]
    assert probes.remembered("p", ["boot-2", 2], probe([False, "new boot"])) == [False, "new boot"]
    assert calls == [[True, "counts"], [False, "new boot"]]
    assert probes.remembered("q", "k", probe(None), keep=lambda v: v is not None) is None
    assert probes.remembered("q", "k", probe("9.0.0")) == "9.0.0"
    assert calls[-2:] == [None, "9.0.0"]
    (tmp_path / probes.FILE).chmod(0o666)  # anyone may have written it: asked again
    assert probes.remembered("q", "k", probe("planted?")) == "planted?"
    assert calls[-1] == "planted?"


def test_a_tools_key_changes_with_its_file(tmp_path):
    """The key of a tool names its real path, size and modification time: a rebuilt tool
    gets another key; a missing one has none."""
    tool = tmp_path / "tool"
    tool.write_text("one")
    link = tmp_path / "link"
    link.symlink_to(tool)
    first = probes.tool_key(str(link))
    assert first is not None and first[0] == str(tool) and first[1] == 3
    tool.write_text("three")
    assert probes.tool_key(str(link)) != first
    assert probes.tool_key(str(tmp_path / "missing")) is None and probes.tool_key(None) is None
