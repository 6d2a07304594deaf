"""Typed per-trial records: round trip through the store, versions, stores written before."""

from __future__ import annotations

import json

import pytest

from vhpc.core import records
from vhpc.core.records import AppliedPlacement, Diagnostics, MemoryReadback
from vhpc.store import Store, StoreError

APPLIED = {"accel": "tcg", "qemu_pid": 42, "session": 1, "emulator_cpus": [0],
           "vcpus": [{"vcpu": 0, "thread": 43, "allowed": [1], "last_cpu": 1, "last_node": 0}],
           "memory": {"node_mib": {"0": 500.0, "1": 12.0},
                      "mappings": [{"policy": "bind:0", "node_mib": {"0": 480.0, "1": 20.0}, "huge": False}]},
           "guest_numa": [{"node": 0, "cpus": "0", "mem_mib": 480}],
           "corunner": None, "mismatches": []}
DIAG = {"rusage": {"user_s": 1.5, "sys_s": 0.25, "minflt": 2048},
        "perf": {"unavailable": "a TCG guest has no PMU"},
        "guest_vmstat": {"pgfault": 1100}, "qemu_faults": {"minflt": 7, "majflt": 0},
        "memory_node_mib_before": {"0": 10.0}, "memory_node_mib_after": {"0": 30.0},
        "kvm_exits": {"unavailable": "needs KVM"}}


def _store_with_trial(tmp_path):
    store = Store(tmp_path / "vhpc.db")
    store.create_campaign("c1", "{}", "vhpc test", [dict(seq=0, round=0, warmup=False,
                          environment="vm", benchmark="stream", params="")],
                          [dict(name="vm", kind="vm")])
    return store, store.trials("c1")[0].id


def test_records_are_typed_and_versioned_in_the_store(tmp_path):
    store, tid = _store_with_trial(tmp_path)
    applied, diag = AppliedPlacement(**APPLIED), Diagnostics.build(**DIAG)
    store.finish_trial(tid, "done", returncode=0, timed_out=False, error=None, stdout="", stderr="",
                       started=0.0, ended=1.0, session_index=0, applied=applied, samples=[],
                       diagnostics=diag)
    raw = store.db.execute("SELECT applied_json, diagnostics_json FROM trials").fetchone()
    assert json.loads(raw[0])["version"] == records.RECORD_VERSION
    assert json.loads(raw[1])["version"] == records.RECORD_VERSION
    t = store.trials("c1")[0]
    assert t.applied == applied and t.diagnostics == diag
    assert t.applied.vcpus[0].allowed == [1] and t.applied.memory.node_mib == {0: 500.0, 1: 12.0}
    assert t.diagnostics.rusage.minflt == 2048 and t.diagnostics.perf.cpi is None
    assert t.diagnostics.unavailable == {"perf": "a TCG guest has no PMU", "kvm_exits": "needs KVM"}
    assert t.diagnostics.kvm_exits is None
    # stored as qemu_pid by earlier versions: read as the backend-neutral hypervisor_pid
    assert t.applied.hypervisor_pid == 42 and "qemu_pid" not in raw[0]


def test_page_locality_of_the_planned_nodes():
    mem = MemoryReadback(**APPLIED["memory"])
    loc = mem.locality({0})
    assert loc.on_nodes_mib == 480.0 and loc.total_mib == 500.0 and loc.percent == pytest.approx(96.0)
    assert mem.locality(set()) is None


def test_store_written_before_typed_records_still_reads(tmp_path):
    store, tid = _store_with_trial(tmp_path)
    # what vhpc wrote before: the plain dicts, no version
    store.db.execute("UPDATE trials SET status='done', applied_json=?, diagnostics_json=? WHERE id=?",
                     (json.dumps(APPLIED), json.dumps(DIAG), tid))
    t = store.trials("c1")[0]
    assert t.applied.guest_numa[0].mem_mib == 480 and t.applied.emulator_cpus == [0]
    assert t.diagnostics.perf.unavailable == "a TCG guest has no PMU"
    assert t.diagnostics.memory_node_mib_after == {0: 30.0}


def test_newer_or_damaged_records_fail_with_one_line(tmp_path):
    store, tid = _store_with_trial(tmp_path)
    store.db.execute("UPDATE trials SET applied_json=? WHERE id=?",
                     (json.dumps({"version": records.RECORD_VERSION + 1}), tid))
    with pytest.raises(StoreError, match=r"upgrade vhpc") as exc:
        store.trials("c1")
    assert "\n" not in str(exc.value)
    store.db.execute("UPDATE trials SET applied_json=? WHERE id=?",
                     (json.dumps({"version": 1, "vcpus": [{"vcpu": "x"}]}), tid))
    with pytest.raises(StoreError, match=r"vcpus\.0\.vcpu: re-run the campaign") as exc:
        store.trials("c1")
    assert "\n" not in str(exc.value)


def test_measuring_rooms_do_not_import_analysis_or_report():
    import ast
    from pathlib import Path

    import vhpc

    root = Path(vhpc.__file__).parent
    for path in [root / "core" / "records.py", *(root / "environments").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                for name in names:
                    assert not name.startswith(("vhpc.analysis", "vhpc.report")), (path, name)
