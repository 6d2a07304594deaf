"""`--dry-run` plans without starting anything, and bad input at the edge is one line, exit 2
(hostile inputs included), also on a host without QEMU."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vhpc import cli

VHPC = [sys.executable, "-m", "vhpc.cli"]


@pytest.fixture(scope="module")
def no_qemu_path(tmp_path_factory) -> str:
    """A PATH with every program of the real PATH except QEMU's (symlinks)."""
    farm = tmp_path_factory.mktemp("bin-without-qemu")
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target, link = Path(d) / name, farm / name
            if not name.startswith("qemu") and not link.exists() and os.access(target, os.X_OK):
                link.symlink_to(target)
    return str(farm)


def vhpc(*args, path=None):
    env = {**os.environ, "COLUMNS": "250"}
    if path:
        env["PATH"] = path
    return subprocess.run(VHPC + list(args), capture_output=True, text=True, env=env, timeout=60)


def test_compare_dry_run_lists_the_trials_with_placements_and_starts_nothing(no_qemu_path,
                                                                              tmp_path):
    r = vhpc("compare", "--dry-run", "-b", "stream", "-e", "native", "-e", "vm", "--repeats",
             "2", "--warmup", "0", "--out", str(tmp_path / "out"), path=no_qemu_path)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if "│ stream" in line]
    assert len(rows) == 4
    # round 0: native then vm; round 1 reversed (alternate order)
    assert [row.split("│")[3].strip() for row in rows] == ["native", "vm", "vm", "native"]
    for row in rows:
        cells = [c.strip() for c in row.split("│")]
        assert re.match(r"n=(auto|\d+)( \(4x [^)]*LLC[^)]*\))?, ntimes=10, threads=auto", cells[5])  # n: STREAM rule, from the LLC
        assert cells[6]  # a placement for every trial
    vm_placement = [c.strip() for c in rows[1].split("│")][6]
    assert vm_placement.startswith("map:0-1=") and "vCPU" in vm_placement
    assert not (tmp_path / "out").exists()  # nothing stored, nothing run


def test_run_and_study_dry_run(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("repeats: 1\nwarmup: 0\nbenchmarks: [{pagefault: {mib: 2}}]\n"
                 "environments: [native, {vm: {pin: none, vcpus: 3}}]\n")
    r = vhpc("run", "--dry-run", str(f))
    assert r.returncode == 0, r.stderr
    assert "mib=2" in r.stdout and "float" in r.stdout and "2 trials" in r.stdout
    r = vhpc("study", "cold-warm", "--dry-run", "--repeats", "1", "-b", "noise:duration=1")
    assert r.returncode == 0, r.stderr
    assert "(new session)" in r.stdout and "duration=1" in r.stdout


@pytest.mark.parametrize("args, field", [
    (["-e", "native", "-e", "vm:vcpus=abc"], "vcpus"),
    (["-b", "stream:n=-5"], "n=-5"),
])
def test_bad_values_name_the_field_on_a_host_without_qemu(no_qemu_path, tmp_path, args, field):
    r = vhpc("compare", *args, "--out", str(tmp_path), path=no_qemu_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vhpc: error:") and field in lines[0]
    assert "Traceback" not in r.stderr


def _deep(tmp_path):
    p = tmp_path / "deep.yaml"
    p.write_text("benchmarks: " + "[" * 20000 + "]" * 20000 + "\n")
    return str(p)


def _binary(tmp_path):
    p = tmp_path / "bin.yaml"
    p.write_bytes(bytes(range(256)) * 4)
    return str(p)


def _vcpu_list(tmp_path):
    p = tmp_path / "v.yaml"
    p.write_text("benchmarks: [stream]\nenvironments: [native, {vm: {vcpus: [1, 2]}}]\n")
    return str(p)


@pytest.mark.parametrize("make, needle", [
    (lambda t: ["compare", "--dry-run", "-b", "stream:n=.inf", "-e", "native"], "n="),
    (lambda t: ["compare", "--dry-run", "-b", "noise:duration=-1", "-e", "native"], "duration"),
    (lambda t: ["run", "--dry-run", _vcpu_list(t)], "vcpus"),
    (lambda t: ["run", "/dev/zero"], "larger than"),
    (lambda t: ["run", _deep(t)], "nested deeper"),
    (lambda t: ["run", _binary(t)], "not UTF-8"),
    (lambda t: ["compare", "-b", "stream", "-e", "native", "--out", "/dev/null"], "not a folder"),
    (lambda t: ["plan", "--vcpus", "2", "--numa", "-3"], "--numa"),
    (lambda t: ["plan", "--vcpus", "-2"], "--vcpus"),
    (lambda t: ["compare", "--dry-run", "-b", "stream", "-e", "native:cpus=4095"], "no CPU 4095"),
    (lambda t: ["compare", "--dry-run", "-b", "stream", "-e", "native:nodes=4000"],
     "no NUMA node 4000"),
    (lambda t: ["compare", "--dry-run", "-b", "stream", "--timeout", "nan"], "timeout"),
    (lambda t: ["compare", "--dry-run", "-b", "stream", "-e", "native", "-e",
                "vm:memory=16000000,pin=none"], "give less memory"),
    (lambda t: ["compare", "--dry-run", "-b", "stream", "-e", "native", "-e", "vm:vcpus=4000"],
     "vcpus=4000"),
])
def test_hostile_inputs_end_in_one_line_and_exit_2(tmp_path, capsys, make, needle):
    assert cli.main(make(tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vhpc: error:") and needle in err[0], err
