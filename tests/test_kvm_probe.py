"""The KVM probe's cache: only definitive answers are kept for the host's boot; a time-out or
another transient failure is probed again, but a second time-out in a row is kept;
``use_cache=False`` (``vhpc host --reprobe``) always probes.  The probe itself (a guest booted under KVM) is replaced by a scripted one."""

from __future__ import annotations

import json

import pytest

from vhpc.environments.vm.backends import qemu
from vhpc.environments.vm.backends.base import ProbeResult


@pytest.fixture
def probes(tmp_path, monkeypatch):
    """A private cache folder and a scripted probe: each call pops the next answer; the list
    of answers not yet given is returned, so a test sees how many probes ran."""
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    answers: list[ProbeResult] = []

    def scripted(kernel, timeout):
        return answers.pop(0)

    monkeypatch.setattr(qemu, "_probe", scripted)
    return answers


def _cached(tmp_path) -> dict | None:
    path = tmp_path / "cache" / "kvm-probe.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_a_time_out_is_not_cached_and_the_next_call_probes_again(probes, tmp_path):
    probes += [ProbeResult("tcg", "a Linux guest did not boot under KVM within 8 s", 8.0,
                           definitive=False),
               ProbeResult("kvm", "a Linux guest booted under KVM in 1.2 s", 1.2)]
    first = qemu.probe_kvm()
    assert first.accel == "tcg" and "not cached" in first.reason
    assert _cached(tmp_path) is None
    second = qemu.probe_kvm()  # the host was only busy: this time KVM answers
    assert second.accel == "kvm" and probes == []
    assert _cached(tmp_path)["accel"] == "kvm"


TIMED_OUT = ProbeResult("tcg", "a Linux guest did not boot under KVM within 8 s", 8.0,
                        definitive=False, timed_out=True)


def test_a_second_time_out_in_a_row_is_kept_for_the_boot(probes, tmp_path):
    """A KVM whose guests hang (nested kvm_pvm here) must not cost every campaign 8 s."""
    probes += [TIMED_OUT, TIMED_OUT, ProbeResult("kvm", "booted", 1.0)]
    first = qemu.probe_kvm()
    assert first.accel == "tcg" and not first.definitive and "not cached" in first.reason
    second = qemu.probe_kvm()
    assert second.accel == "tcg" and second.definitive
    assert "nor did the probe before it" in second.reason
    third = qemu.probe_kvm()  # answered from the cache: the scripted KVM answer is not reached
    assert third.accel == "tcg" and third.reason.endswith("(cached probe)") and len(probes) == 1
    assert qemu.probe_kvm(use_cache=False).accel == "kvm"  # --reprobe probes afresh


def test_a_time_out_then_another_failure_then_a_time_out_is_not_kept(probes, tmp_path):
    """Only time-outs in a row count: a killed QEMU in between starts the count again, and
    --reprobe counts no earlier time-out."""
    killed = ProbeResult("tcg", "QEMU did not start for the KVM probe", definitive=False)
    probes += [TIMED_OUT, killed, TIMED_OUT, TIMED_OUT]
    assert not qemu.probe_kvm().definitive
    assert not qemu.probe_kvm().definitive  # killed: says nothing, and forgets no time-out ...
    assert qemu.probe_kvm().definitive  # ... so this time-out is the second in a row
    probes[:] = [TIMED_OUT, TIMED_OUT]
    assert not qemu.probe_kvm(use_cache=False).definitive
    assert qemu.probe_kvm().definitive


def test_a_hostile_cache_counts_no_time_out(probes, tmp_path):
    probes += [TIMED_OUT, TIMED_OUT]
    qemu.probe_kvm()
    path = tmp_path / "cache" / "kvm-probe.json"
    data = json.loads(path.read_text())
    for bad in ({**data, "timeouts": 5}, {"key": data["key"], "accel": "rm -rf", "reason": "x"},
                {**data, "timeouts": "1"}, [data]):
        path.write_text(json.dumps(bad))
        assert qemu._cached_probe(path, data["key"]) == {}
    path.write_text(json.dumps(data))
    assert qemu.probe_kvm().definitive


def test_a_success_is_cached_and_reprobe_probes_again(probes, tmp_path):
    probes += [ProbeResult("kvm", "a Linux guest booted under KVM in 1.2 s", 1.2),
               ProbeResult("tcg", "KVM guest failed: failed to set MSR 0x10a", 0.4)]
    assert qemu.probe_kvm().accel == "kvm"
    again = qemu.probe_kvm()
    assert again.accel == "kvm" and again.reason.endswith("(cached probe)")
    assert len(probes) == 1  # answered from the cache: no probe ran
    fresh = qemu.probe_kvm(use_cache=False)  # what vhpc host --reprobe asks
    assert fresh.accel == "tcg" and probes == []
    assert _cached(tmp_path)["accel"] == "tcg"  # the definitive new answer replaced the old
    assert qemu.probe_kvm().reason.endswith("(cached probe)")


def test_a_definitive_failure_is_cached(probes, tmp_path):
    probes += [ProbeResult("tcg", "no /dev/kvm (KVM module not loaded or no VT-x/AMD-V)")]
    assert qemu.probe_kvm().accel == "tcg"
    assert qemu.probe_kvm().reason.endswith("(cached probe)") and probes == []


def test_a_cache_of_another_boot_is_not_used(probes, tmp_path):
    probes += [ProbeResult("kvm", "booted", 1.0), ProbeResult("tcg", "no /dev/kvm")]
    qemu.probe_kvm()
    path = tmp_path / "cache" / "kvm-probe.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "key": "another-boot:" + data["key"]}))
    assert qemu.probe_kvm().accel == "tcg" and probes == []


def test_a_dry_run_probes_only_when_a_guest_would_boot(probes, tmp_path, capsys):
    """The estimate needs the accelerator only for guests: a native-only --dry-run starts no
    probe guest and names no accelerator; one with a VM probes and says what guests run
    under."""
    from conftest import require_tool, run_cli

    require_tool("qemu-system-x86_64")  # else the estimate says "QEMU is not installed"
    probes += [ProbeResult("tcg", "KVM guest failed: failed to set MSR 0x10a", 0.4)]
    rc, out, err = run_cli(capsys, "compare", "--dry-run", "-b", "stream", "-e", "native",
                           "-e", "native:name=other,cpus=0", "--out", tmp_path / "out")
    assert rc == 0, err
    assert len(probes) == 1 and "nothing was run" in out and "guests under" not in out
    rc, out, err = run_cli(capsys, "compare", "--dry-run", "-b", "stream", "-e", "native",
                           "-e", "vm", "--out", tmp_path / "out")
    assert rc == 0, err
    assert probes == [] and "guests under tcg" in " ".join(out.split())
