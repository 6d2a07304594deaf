"""The third hostile battery, part A: each reproducer as a test.  Hangs are bounded
by a generous subprocess or call timeout (never a timing assert); bad input must give one
line ``vhpc: error: ...`` and exit status 2, leave nothing running and write nothing that is
not vhpc's own."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vhpc.core.errors import VhpcError

from conftest import one_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
VHPC = [sys.executable, "-m", "vhpc.cli"]
#: Bound on a reproducer that must not hang (seconds; generous: the machine is shared).
HANG = 240


def run_sub(*argv, cwd=None, env=None) -> subprocess.CompletedProcess:
    """``vhpc ARGV`` in a child, bounded by :data:`HANG` (a hang fails the test)."""
    return subprocess.run(VHPC + [str(a) for a in argv], capture_output=True, text=True,
                          timeout=HANG, cwd=cwd, env={**os.environ, **(env or {})})


# ------------------------------------------------------------------ 1. YAML aliases

@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "x: &a 1\ny: &a [*a]\n",
                                  "benchmarks: &b [stream, [*b]]\nenvironments: [native]\n"])
def test_a_self_referencing_yaml_alias_is_refused_not_a_hang(tmp_path, text):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    p = run_sub("run", f, "--dry-run", "--out", tmp_path / "o")
    one_line(p.returncode, p.stderr, "alias", "cycle")
    assert not (tmp_path / "o").exists()


def test_aliases_of_aliases_are_bounded_once_written_out(tmp_path, capsys):
    lines = ["l0: &l0 [1, 1]"] + [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 40)]
    lines += ["benchmarks: [{stream: {n: *l39}}]", "environments: [native]"]
    f = tmp_path / "c.yaml"
    f.write_text("\n".join(lines) + "\n")
    p = run_sub("run", f, "--dry-run", "--out", tmp_path / "o")
    one_line(p.returncode, p.stderr, "aliases are written out")


def test_a_harmless_alias_still_reads(tmp_path):
    from vhpc.spec.document import read_document

    f = tmp_path / "c.yaml"
    f.write_text("x: &a [1, 2]\ny: [*a, *a]\nz: &s 3\nw: *s\n")
    assert read_document(f) == {"x": [1, 2], "y": [[1, 2], [1, 2]], "z": 3, "w": 3}


# ------------------------------------------------------------------ 2. user regexes

def test_a_backtracking_custom_regex_fails_the_parse_not_vhpc(monkeypatch):
    from vhpc.benchmarks import custom
    from vhpc.benchmarks.base import ParseError

    probe = custom.from_mapping({"name": "probe", "command": ["true"], "metrics": [
        {"name": "t", "regex": r"t: ((?:\d|\d\d)+)x", "unit": "s", "higher_is_better": False}]})
    monkeypatch.setattr(custom, "REGEX_TIMEOUT", 0.2)
    with pytest.raises(ParseError, match="catastrophic backtracking"):
        probe.parse({}, "t: " + "1" * 200 + "!", "", 0)
    # an ordinary output still parses
    assert probe.parse({}, "t: 12x\n", "", 0)[0].value == 12


def test_the_batterys_backtracking_regex_campaign_ends(tmp_path):
    doc = {"custom": [{"name": "probe", "command": ["sh", "-c", "printf 't: '; head -c 30000 "
                                                    "/dev/zero | tr '\\0' a; echo"],
                       "metrics": [{"name": "t", "regex": "t: ((?:a+)+)b", "unit": "s",
                                    "higher_is_better": False}], "timeout": 5}],
           "benchmarks": ["probe"], "environments": ["native"], "repeats": 1, "warmup": 0}
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    p = run_sub("run", f, "--out", tmp_path / "o")
    assert p.returncode == 1, p.stderr[-2000:]  # the campaign ran; its one trial failed
    assert "Traceback" not in p.stderr
    with sqlite3.connect(tmp_path / "o" / "vhpc.db") as db:
        assert db.execute("SELECT status FROM trials").fetchall() == [("failed",)]


# ------------------------------------------------------------------ 3. foreign stores

def _foreign(path: Path, wal: bool) -> bytes:
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize("wal", [False, True])
def test_diff_with_a_foreign_sqlite_store_leaves_it_untouched(tmp_path, capsys, wal):
    other = tmp_path / "other.db"
    before = _foreign(other, wal)
    files = sorted(p.name for p in tmp_path.iterdir())
    rc, _, err = run_cli(capsys, "diff", "A", "B", "--store", other, "--out", tmp_path / "o")
    one_line(rc, err, "not a vhpc store")
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    with sqlite3.connect(other) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["t"]
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == ("wal" if wal else "delete")


@pytest.mark.parametrize("content", [b"", b"hello, not a database\n"])
def test_a_campaign_refuses_an_out_whose_vhpc_db_is_foreign(tmp_path, capsys, content):
    out = tmp_path / "o"
    out.mkdir()
    if content:
        (out / "vhpc.db").write_bytes(content)
    else:
        _foreign(out / "vhpc.db", False)
    before = (out / "vhpc.db").read_bytes()
    rc, _, err = run_cli(capsys, "list", "campaigns", "--out", out)
    one_line(rc, err, "not a vhpc store")
    assert (out / "vhpc.db").read_bytes() == before and sorted(os.listdir(out)) == ["vhpc.db"]


@pytest.mark.parametrize("argv", [["list", "campaigns"], ["report", "20260101-000000-abcd"],
                                  ["diff", "A", "B"]])
def test_read_only_commands_never_create_a_store(tmp_path, capsys, argv):
    out = tmp_path / "typo"
    rc, _, err = run_cli(capsys, *argv, "--out", out)
    one_line(rc, err, "no vhpc store")
    assert not out.exists()


def test_an_existing_vhpc_store_still_opens_and_an_empty_file_becomes_one(tmp_path):
    from vhpc.store import Store

    (tmp_path / "vhpc.db").touch()
    Store(tmp_path / "vhpc.db").close()
    s = Store(tmp_path / "vhpc.db", existing=True)
    assert s.campaigns() == []
    s.close()


# ------------------------------------------------------------------ 4. nan from a benchmark

@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_benchmark_printing_nan_finishes_its_trial(tmp_path, capsys, value):
    doc = {"custom": [{"name": "probe", "command": ["sh", "-c", f"echo v {value}; echo w 2"],
                       "metrics": [{"name": "v", "regex": r"v (\S+)", "unit": "1",
                                    "higher_is_better": True},
                                   {"name": "w", "regex": r"w (\S+)", "unit": "1",
                                    "higher_is_better": True}]}],
           "benchmarks": ["probe"], "environments": ["native"], "repeats": 1, "warmup": 0}
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = tmp_path / "o"
    rc, _, err = run_cli(capsys, "run", f, "--out", out)
    assert rc in (0, 1) and "NOT NULL" not in err, err
    with sqlite3.connect(out / "vhpc.db") as db:
        (status, error), = db.execute("SELECT status, error FROM trials").fetchall()
        samples = db.execute("SELECT metric, value FROM samples").fetchall()
        (cstatus,), = db.execute("SELECT status FROM campaigns").fetchall()
    assert status == "done" and "not a finite number" in error and "v=" in error
    assert samples == [("w", 2.0)] and cstatus == "finished"


# ------------------------------------------------------------------ 11. diff without valid samples

def _campaign(store, cid: str, valid: dict[str, bool], created: float) -> None:
    """Campaign ``cid``: native and vm, 3 rounds of pagefault ``t``; ``valid[env]`` says
    whether that environment's samples are valid."""
    import json

    from vhpc.core.metrics import Sample

    spec = {"benchmarks": [{"name": "pagefault", "params": {}}],
            "environments": [{"kind": "native", "name": "native", "options": {}},
                             {"kind": "vm", "name": "vm", "options": {}}],
            "repeats": 3, "warmup": 0, "baseline": "native"}
    trials = [dict(seq=2 * r + i, round=r, warmup=False, environment=e, benchmark="pagefault",
                   params="") for r in range(3) for i, e in enumerate(("native", "vm"))]
    store.create_campaign(cid, json.dumps(spec), "test", trials,
                          [{"name": "native", "kind": "native"}, {"name": "vm", "kind": "vm"}])
    store.db.execute("UPDATE campaigns SET created=?, status='finished' WHERE id=?",
                     (created, cid))
    for t in store.trials(cid):
        store.finish_trial(t.id, "done", returncode=0, timed_out=False, error=None, stdout="",
                           stderr="", started=created, ended=created + 1, session_index=None,
                           applied=None, samples=[Sample("t", 10.0 + t.round, "us", False,
                                                         valid[t.environment])])


def test_diff_with_an_environment_without_valid_samples(tmp_path, capsys):
    from vhpc.analysis import diff as d
    from vhpc.store import Store

    store = Store(tmp_path / "o" / "vhpc.db")
    _campaign(store, "A", {"native": True, "vm": True}, 1000.0)
    _campaign(store, "B", {"native": True, "vm": False}, 2000.0)
    result = d.diff(d.load(store, "A"), d.load(store, "B"))
    assert any(u.environment == "vm" and "no valid sample" in u.reason
               for u in result.unmatched), result.unmatched
    store.close()
    rc, out, err = run_cli(capsys, "diff", "A", "B", "--out", tmp_path / "o")
    assert rc == 0 and err == "", err  # the diff is shown; vm is listed as not compared
    assert "no valid sample" in out, out


# ------------------------------------------------------------------ 12. huge hwloc bitmaps

def test_hwloc_bitmaps_parse_as_before():
    from vhpc.topology.hwloc import parse_bitmap

    assert parse_bitmap("0x0000000f") == (frozenset({0, 1, 2, 3}), None)
    assert parse_bitmap("0xf...f,0x00000003") == (frozenset({0, 1}), 32)
    assert parse_bitmap("0x1,0x80000000") == (frozenset({31, 32}), None)
    assert parse_bitmap("0x00000005,,0x1") == (frozenset({0, 64, 66}), None)
    assert parse_bitmap("0x" + "f" * 16)[0] == frozenset(range(64))


def test_a_500_kb_cpuset_bitmap_plans_without_running_for_minutes(tmp_path):
    src = (ROOT / "tests/data/topologies/smt.xml").read_text()
    f = tmp_path / "big.xml"
    f.write_text(src.replace('complete_cpuset="', 'complete_cpuset="0x' + "f" * 500_000 + ",",
                             1))
    p = run_sub("plan", "--topology", f, "--vcpus", "2")  # was quadratic: minutes
    assert p.returncode == 0, p.stderr[-2000:]  # the huge bitmap is read, the plan printed
    assert "Traceback" not in p.stderr and "vCPU" in p.stdout, p.stdout[-2000:]


# ------------------------------------------------------------------ 10. calibrate, all failed

def test_calibrate_where_every_trial_fails_is_not_a_success(tmp_path, kernels_built):
    out = tmp_path / "cal"
    p = run_sub("calibrate", "-b", "pagefault", "-e", "native", "--campaigns", "1",
                "--repeats", "2", "--warmup", "0", "--timeout", "1e-9", "--out", out)
    one_line(p.returncode, p.stderr, "no calibration trial succeeded")
    assert not (out / "calibration.json").exists()
    with sqlite3.connect(out / "vhpc.db") as db:  # what ran is kept
        assert {r[0] for r in db.execute("SELECT status FROM trials")} == {"failed"}


# ------------------------------------------------------------------ 5. tolerance file, tune.json

def test_a_non_utf8_tolerance_file_is_one_line(tmp_path, capsys):
    from vhpc.store import Store

    store = Store(tmp_path / "o" / "vhpc.db")
    _campaign(store, "A", {"native": True, "vm": True}, 1000.0)
    _campaign(store, "B", {"native": True, "vm": True}, 2000.0)
    store.close()
    tol = tmp_path / "tol.txt"
    tol.write_bytes(b"* 5%\n\xff\xfe stream 3%\n")
    rc, _, err = run_cli(capsys, "diff", "A", "B", "--out", tmp_path / "o", "--tolerance", tol)
    one_line(rc, err, "not UTF-8", str(tol))


def _race(tmp_path) -> tuple[str, Path]:
    """A tune race started (its definition written), nothing run: (id, tune.json)."""
    from vhpc import placement, topology
    from vhpc.spec import parse as specmod
    from vhpc.store import Store
    from vhpc.workflows.tune import candidates as cm
    from vhpc.workflows.tune import run as runmod
    from vhpc.workflows.tune.race import Settings

    fp = placement.place(topology.load("pack:1 numa:1 core:2 pu:1"),
                         placement.PlacementRequest(vcpus=1, memory_mib=256, policy="float"))
    cands = tuple(cm.Candidate(n, n, "native", "float", "hidden", "4k", (fp,)) for n in "ab")
    d = runmod.Definition(1, 256, "this host", cands, Settings(candidates=("a", "b"),
                                                                  min_rounds=2, budget=12),
                          warmup=1)
    spec = specmod.campaign([specmod.parse_bench("pagefault:mib=32,reps=3")],
                            [specmod.env("native", n, cpus="0") for n in ("native", "a", "b")],
                            warmup=1, repeats=2)
    store = Store(tmp_path / "vhpc.db")
    cid = runmod.start(store, spec, d, tmp_path)
    store.close()
    return cid, tmp_path / cid / "tune.json"


def test_tune_json_is_written_atomically_and_private(tmp_path):
    cid, path = _race(tmp_path)
    assert (path.stat().st_mode & 0o777) == 0o600
    assert json_ok(path) and sorted(os.listdir(path.parent)) == ["tune.json"]


def json_ok(path: Path) -> bool:
    import json

    return isinstance(json.loads(path.read_text()), dict)


@pytest.mark.parametrize("damage", ["truncate", "edit", "binary"])
def test_a_damaged_tune_json_is_one_line_for_report_and_resume(tmp_path, capsys, damage):
    import json

    cid, path = _race(tmp_path)
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "edit":
        doc = json.loads(text)
        del doc["candidates"][0]["placements"]
        doc["settings"] = "x"
        path.write_text(json.dumps(doc))
    else:
        path.write_bytes(b"\xff" * 10)
    for argv in (["report", cid], ["tune", "--resume", cid, "-b", "pagefault"]):
        rc, _, err = run_cli(capsys, *argv, "--out", tmp_path)
        one_line(rc, err, "tune.json is damaged")


# ------------------------------------------------------------------ 6. domain_xml=/dev/zero

def test_domain_xml_reads_only_a_bounded_regular_file(tmp_path):
    from vhpc.environments.vm.backends.libvirt import MAX_DOMAIN_XML, read_domain_xml

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it must not block
    big = tmp_path / "big.xml"
    big.write_bytes(b" " * (MAX_DOMAIN_XML + 1))
    binary = tmp_path / "bin.xml"
    binary.write_bytes(b"<domain>\xff</domain>")
    for path, words in (("/dev/zero", "not a regular file"), (fifo, "not a regular file"),
                        (tmp_path, "not a regular file"), (big, "larger than"),
                        (binary, "not UTF-8"), (tmp_path / "none", "cannot read")):
        with pytest.raises(ValueError, match=words):
            read_domain_xml(str(path))
    ok = tmp_path / "ok.xml"
    ok.write_text("<domain type='kvm'/>")
    assert read_domain_xml(str(ok)) == "<domain type='kvm'/>"


def test_campaign_and_tolerance_files_may_be_pipes_but_stay_bounded(tmp_path):
    """``vhpc run <(...)`` and ``--tolerance <(...)`` read a pipe; /dev/zero still stops at the
    limit and a folder is refused (core.paths.read_small_text, regular_only=False)."""
    from vhpc.core.paths import read_small_text

    r, w = os.pipe()
    os.write(w, b"stream 5\n")
    os.close(w)
    try:
        got = read_small_text(f"/proc/self/fd/{r}", 100, "pipe", "advice", regular_only=False)
    finally:
        os.close(r)
    assert got == "stream 5\n"
    with pytest.raises(ValueError, match="larger than 1 KiB: advice"):
        read_small_text("/dev/zero", 1024, "zero", "advice", regular_only=False)
    with pytest.raises(ValueError, match="not a regular file"):
        read_small_text(tmp_path, 1024, "folder", "advice", regular_only=False)


def test_a_campaign_with_domain_xml_dev_zero_is_one_line(tmp_path):
    import resource

    def cap():  # a read of /dev/zero without a bound would grow to this limit: MemoryError, a traceback
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    p = subprocess.run(VHPC + ["compare", "-b", "stream:n=1000", "-e", "native", "-e",
                               "vm:domain_xml=/dev/zero", "--repeats", "2", "--warmup", "0",
                               "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=HANG, preexec_fn=cap)
    one_line(p.returncode, p.stderr, "domain_xml=/dev/zero", "not a regular file")


# ------------------------------------------------------------------ 7. ssh port and workdir

@pytest.mark.parametrize("target, words", [("HOST:0", "port 0"), ("HOST:１２", "ASCII digits"),
                                           ("HOST:65536", "1-65535"), ("HOST:", "ASCII")])
def test_ssh_ports_that_are_not_ports_are_one_line(capsys, target, words):
    rc, _, err = run_cli(capsys, "host", "--ssh", target)
    one_line(rc, err, words)


def test_ssh_port_and_workdir_reach_ssh_as_meant():
    from vhpc.environments.ssh.environment import SshEnvironment, parse_target

    assert parse_target("me@h:2222") == {"host": "h", "user": "me", "port": 2222}
    assert parse_target("h")["port"] is None
    env = SshEnvironment("x", host="h", port=2222, workdir="~/vw/")
    argv = env.ssh_argv()
    assert argv[argv.index("-p") + 1] == "2222"
    assert env.workdir == "vw" and env.kdir.startswith("vw/kernels-")  # not a folder named ~
    assert SshEnvironment("x", host="h", workdir="~").workdir == "."
    assert SshEnvironment("x", host="h", workdir="/abs/w").workdir == "/abs/w"
    with pytest.raises(ValueError, match="~user"):
        SshEnvironment("x", host="h", workdir="~bob/w")
    with pytest.raises(ValueError, match="port"):
        SshEnvironment("x", host="h", port=0)


@pytest.mark.parametrize("item, words", [("ssh:host=h,port=0", "port"),
                                         ("ssh:host=h,port=１２", "ASCII"),
                                         ("ssh:host=h,workdir=~bob/x", "~user")])
def test_ssh_items_refuse_bad_ports_and_home_paths(item, words):
    from vhpc.spec import parse as spec

    with pytest.raises(VhpcError, match=words):
        spec.from_cli(["stream"], ["native", item])


# ------------------------------------------------------------------ 9. numeric flags

@pytest.mark.parametrize("argv, words", [
    (["paper", "001", "--repeats", "-5", "--dry-run"], "--repeats"),
    (["paper", "001", "--repeats", "١٢", "--dry-run"], "ASCII"),
    (["paper", "001", "--timeout", "nan", "--dry-run"], "--timeout"),
    (["tune", "-b", "stream", "--vcpus", "99999999999999999999", "--dry-run"], "--vcpus"),
    (["tune", "-b", "stream", "--memory", "0", "--dry-run"], "--memory"),
    (["tune", "-b", "stream", "--budget", "-1", "--dry-run"], "--budget"),
    (["calibrate", "--campaigns", "0"], "--campaigns"),
    (["calibrate", "--timeout", "-1"], "--timeout"),
    (["calibrate", "--delta", "inf"], "--delta"),
    (["compare", "--repeats", "0", "--dry-run"], "--repeats"),
    (["compare", "--target-ci", "１", "--dry-run"], "ASCII"),
    (["study", "socket-span", "--warmup", "-1", "--dry-run"], "--warmup"),
    (["diff", "A", "B", "--alpha", "2"], "--alpha"),
    (["plan", "--vcpus", "99999999999999999999"], "--vcpus")])
def test_every_numeric_flag_is_typed_with_a_range(capsys, tmp_path, argv, words):
    rc, out, err = run_cli(capsys, *argv, "--out", tmp_path / "o")
    one_line(rc, err, words)
    assert not (tmp_path / "o").exists()


def test_the_typed_parser_takes_what_it_should():
    import argparse

    from vhpc.core.argtypes import count, number
    from vhpc.workflows import common

    assert common.count is count  # one parser
    assert count(1, 10)("7") == 7 and number(0, 1, lo_open=True)("1e-9") == 1e-9
    for bad in ("-5", "١٢", "9" * 60, "1.5", "", "0x10"):
        with pytest.raises(argparse.ArgumentTypeError, match="out of range|ASCII digits"):
            count(1, 10)(bad)
    for bad in ("0", "nan", "inf", "２", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="out of range|ASCII digits"):
            number(0, 1, lo_open=True)(bad)


# ------------------------------------------------------------------ 8. kernels

def test_a_relative_vhpc_kernels_is_made_absolute(tmp_path, monkeypatch):
    from vhpc.benchmarks.base import kernel_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VHPC_KERNELS", "rel/k")
    assert kernel_dir() == tmp_path / "rel" / "k"  # make -C runs elsewhere: never relative
    assert kernel_dir("mpich") == tmp_path / "rel" / "k-mpich"


@pytest.mark.parametrize("how", ["world-writable", "other-owner"])
def test_a_kernel_folder_others_can_write_is_refused(tmp_path, monkeypatch, how):
    from vhpc.benchmarks import base

    k = tmp_path / "k"
    k.mkdir()
    (k / "vhpc-stream").write_text("#!/bin/sh\necho planted\n")
    if how == "world-writable":
        k.chmod(0o777)
    else:
        if os.geteuid() != 0:
            pytest.skip("chown needs root")
        os.chown(k, 12345, 12345)
    monkeypatch.setenv("VHPC_KERNELS", str(k))
    calls = []
    monkeypatch.setattr(base, "_make", lambda argv: calls.append(argv))
    with pytest.raises(base.BenchmarkError, match="writable by others|belongs to uid"):
        base.ensure_kernels(["vhpc-stream"])
    assert not calls


def test_kernels_are_rebuilt_when_their_build_key_changes(tmp_path, monkeypatch):
    from vhpc.benchmarks import base

    monkeypatch.setenv("VHPC_KERNELS", str(tmp_path / "k"))
    for mpi in ("openmpi", "mpich"):
        d = base.kernel_dir(mpi)
        d.mkdir()
        (d / "vhpc-pingpong").write_text("old")
        (d / "build-key").write_text("0123456789abcdef\n")  # built from other sources
        calls = []

        def fake_make(argv, calls=calls):
            calls.append(argv)
            return subprocess.CompletedProcess(argv, 0, "", "")

        monkeypatch.setattr(base, "_make", fake_make)
        if not __import__("shutil").which(base.mpi_tool(mpi, "mpicc")):
            continue
        assert base.ensure_kernels(["vhpc-pingpong"], mpi) == d
        key = base.build_key(mpi)
        assert len(calls) == 1 and f"VHPC_BUILD_KEY={key}" in calls[0]
        assert f"BUILD={d}" in calls[0] and (d / "build-key").read_text().strip() == key
        base.ensure_kernels(["vhpc-pingpong"], mpi)  # up to date: no second make
        assert len(calls) == 1


def test_build_key_ignores_build_folders(tmp_path, monkeypatch):
    from vhpc.benchmarks import base

    src = tmp_path / "kernels"
    (src / "build-mpich").mkdir(parents=True)
    (src / "a.c").write_text("int x;")
    monkeypatch.setattr(base, "kernel_sources", lambda: src)
    base.build_key.cache_clear()
    try:
        before = base.build_key("openmpi")
        (src / "build-mpich" / "vhpc-x").write_text("binary")  # an output, not a source
        base.build_key.cache_clear()
        assert base.build_key("openmpi") == before
        (src / "a.c").write_text("int y;")
        base.build_key.cache_clear()
        assert base.build_key("openmpi") != before
    finally:
        base.build_key.cache_clear()


def _session_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def _in_session(sid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
            and _session_of(int(p.name)) == sid]


def test_a_first_use_kernel_build_dies_with_vhpc(tmp_path):
    import signal
    import time

    k = tmp_path / "k"
    child = subprocess.Popen([sys.executable, "-c", "from vhpc.benchmarks.base import "
                              "ensure_kernels; ensure_kernels(['vhpc-stream'])"],
                             env={**os.environ, "VHPC_KERNELS": str(k)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sid = None
    try:
        deadline = time.monotonic() + HANG
        while sid is None and time.monotonic() < deadline and child.poll() is None:
            for p in Path("/proc").iterdir():
                try:
                    cmd = (p / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if cmd[:1] == [b"make"] and f"BUILD={k}".encode() in cmd:
                    sid = _session_of(int(p.name))
                    break
            time.sleep(0.05)
        assert sid is not None, "the build never started"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        deadline = time.monotonic() + 60
        while _in_session(sid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _in_session(sid), "make or cc outlived vhpc"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_store_from_an_older_vhpc_without_meta_is_still_a_vhpc_store(tmp_path):
    from vhpc.storefile import check_is_store

    db = sqlite3.connect(tmp_path / "vhpc.db")
    for t in ("campaigns", "environments", "trials", "samples"):
        db.execute(f"CREATE TABLE {t} (id)")
    db.commit()
    db.close()
    check_is_store(tmp_path / "vhpc.db")  # no error
