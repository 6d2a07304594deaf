"""Host knobs: applied only when asked, always restored (also after errors and kills), never
touched while their owner lives.  Uses a fake /sys and /proc tree: these tests never change this
host (tests/test_store_robust.py has the one real THP test)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from vhpc.host.knobs import HostKnobs, KnobError, parse_knob, recover


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    thp = r / "sys/kernel/mm/transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("always [madvise] never\n")
    (r / "proc/sys/kernel").mkdir(parents=True)
    (r / "proc/sys/kernel/numa_balancing").write_text("1\n")
    hp = r / "sys/kernel/mm/hugepages/hugepages-2048kB"
    hp.mkdir(parents=True)
    (hp / "nr_hugepages").write_text("0\n")
    for cpu in (0, 1):
        d = r / f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text("ondemand\n")
    return r


def read(root, rel):
    return (root / rel).read_text().strip()


def test_knobs_are_applied_then_restored(root, tmp_path):
    journal = tmp_path / "journal"
    with HostKnobs({"thp": "never", "numa_balancing": "0", "governor": "performance"}, journal, root):
        assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "never"
        assert read(root, "proc/sys/kernel/numa_balancing") == "0"
        assert read(root, "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor") == "performance"
        (entry,) = journal.glob("*.json")  # originals saved before the change, with the owner
        data = json.loads(entry.read_text())
        assert data["owner"]["pid"] == os.getpid() and data["owner"]["host"] == socket.gethostname()
        assert data["saved"][str(root / "proc/sys/kernel/numa_balancing")] == "1"
    assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "madvise"
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"
    assert read(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == "ondemand"
    assert not list(journal.glob("*.json"))


def test_restored_after_an_error_inside(root, tmp_path):
    with pytest.raises(RuntimeError, match="benchmark crashed"):
        with HostKnobs({"numa_balancing": "0"}, tmp_path / "j", root):
            raise RuntimeError("benchmark crashed")
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"


def test_a_killed_run_is_repaired_at_next_start(root, tmp_path):
    journal = tmp_path / "j"
    code = ("import sys, time; from vhpc.host.knobs import HostKnobs; "
            f"HostKnobs({{'numa_balancing': '0'}}, {str(journal)!r}, {str(root)!r}).__enter__(); "
            "print('applied', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "applied"
        assert read(root, "proc/sys/kernel/numa_balancing") == "0"
        assert recover(journal, root) == []  # its owner is alive: nothing is touched
        assert read(root, "proc/sys/kernel/numa_balancing") == "0"
    finally:
        proc.kill()  # ... vhpc is SIGKILLed: no __exit__
        proc.wait()
    (left,) = recover(journal, root)
    assert left.owner.pid == proc.pid and list(left.saved.values()) == ["1"]
    assert f"pid {proc.pid}" in left.describe() and "no longer running" in left.describe()
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"
    assert not list(journal.glob("*.json"))


def test_a_journal_of_an_older_vhpc_is_recovered(root, tmp_path):
    knob = root / "proc/sys/kernel/numa_balancing"
    knob.write_text("0\n")
    (tmp_path / "j.json").write_text(json.dumps({str(knob): "1"}))
    (left,) = recover(tmp_path / "j", root)
    assert left.owner is None and read(root, "proc/sys/kernel/numa_balancing") == "1"
    assert not (tmp_path / "j.json").exists()


def test_a_second_campaign_may_not_take_a_live_campaigns_knob(root, tmp_path):
    journal = tmp_path / "j"
    with HostKnobs({"thp": "never"}, journal, root):
        with pytest.raises(KnobError, match=f"thp is held by .*pid {os.getpid()}"):
            with HostKnobs({"thp": "always"}, journal, root):
                pass
        assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "never"
        with HostKnobs({"numa_balancing": "0"}, journal, root):  # other knobs are free
            assert read(root, "proc/sys/kernel/numa_balancing") == "0"
        assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "never"
    assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "madvise"


def test_unreservable_hugepages_are_an_error_and_restored(root, tmp_path, monkeypatch):
    import pathlib

    real = pathlib.Path.write_text

    def fragmented_kernel(path, value, *a, **kw):  # reserves only 3 of the pages asked
        if path.name == "nr_hugepages" and value == "512":
            value = "3"
        return real(path, value, *a, **kw)

    monkeypatch.setattr(pathlib.Path, "write_text", fragmented_kernel)
    with pytest.raises(KnobError, match="only 3 pages could be reserved"):
        with HostKnobs({"hugepages_2m": "512"}, tmp_path / "j", root):
            pass
    assert read(root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages") == "0"


@pytest.mark.parametrize("text,needle", [
    ("thp", "use NAME=VALUE"), ("swappiness=10", "NAME one of"), ("thp=sometimes", "allowed values"),
    ("hugepages_2m=-1", "allowed values"),
])
def test_bad_knobs_are_one_line_errors(text, needle):
    with pytest.raises(KnobError, match=needle):
        parse_knob(text)


def test_missing_knob_file_is_reported(tmp_path):
    with pytest.raises(KnobError, match="does not exist on this host"):
        with HostKnobs({"hugepages_1g": "1"}, tmp_path / "j", tmp_path):
            pass
