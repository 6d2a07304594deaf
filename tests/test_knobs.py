"""Host knobs: applied only when asked, always restored (also after errors and kills).
Uses a fake /sys and /proc tree: tests never change this host."""

import json

import pytest

from vhpc.environments.knobs import HostKnobs, KnobError, parse_knob, recover


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
    journal = tmp_path / "journal.json"
    with HostKnobs({"thp": "never", "numa_balancing": "0", "governor": "performance"}, journal, root):
        assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "never"
        assert read(root, "proc/sys/kernel/numa_balancing") == "0"
        assert read(root, "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor") == "performance"
        assert json.loads(journal.read_text())  # originals saved before the change
    assert read(root, "sys/kernel/mm/transparent_hugepage/enabled") == "madvise"
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"
    assert read(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == "ondemand"
    assert not journal.exists()


def test_restored_after_an_error_inside(root, tmp_path):
    with pytest.raises(RuntimeError):
        with HostKnobs({"numa_balancing": "0"}, tmp_path / "j.json", root):
            raise RuntimeError("benchmark crashed")
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"


def test_a_killed_run_is_repaired_at_next_start(root, tmp_path):
    journal = tmp_path / "j.json"
    k = HostKnobs({"numa_balancing": "0"}, journal, root)
    k.__enter__()  # ... and vhpc is killed here: no __exit__
    assert read(root, "proc/sys/kernel/numa_balancing") == "0"
    restored = recover(journal)
    assert list(restored.values()) == ["1"]
    assert read(root, "proc/sys/kernel/numa_balancing") == "1" and not journal.exists()


def test_unreservable_hugepages_are_an_error_and_restored(root, tmp_path, monkeypatch):
    import pathlib

    real = pathlib.Path.write_text

    def fragmented_kernel(path, value, *a, **kw):  # reserves only 3 of the pages asked
        if path.name == "nr_hugepages" and value == "512":
            value = "3"
        return real(path, value, *a, **kw)

    monkeypatch.setattr(pathlib.Path, "write_text", fragmented_kernel)
    with pytest.raises(KnobError, match="only 3 pages could be reserved"):
        with HostKnobs({"hugepages_2m": "512"}, tmp_path / "j.json", root):
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
        with HostKnobs({"hugepages_1g": "1"}, tmp_path / "j.json", tmp_path):
            pass
