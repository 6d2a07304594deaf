"""Fifth hostile battery: every command that writes leaves a device node, a FIFO, a symbolic
link (a copy of ``/dev/stdout``'s kind) and a planted ``OUT.part`` link untouched; odd
``--out`` paths give one line and leave nothing behind; a campaign whose ratio is subnormal
still reports; frozen groups of a dead vhpc are thawed at the next start; devices in input
folders, unreadable or non-disk images and implausible cached values are refused or re-probed;
Slurm calls are bounded.  Device nodes are private copies made with ``os.mknod`` in a temp
folder (the real ``/dev/null`` is never touched)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

from vhpc import cli
from vhpc.core import paths
from vhpc.environments.vm import imagebuild


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.fixture()
def hostile(tmp_path):
    """Targets a writer must leave alone: a private copy of /dev/null's device node (root
    only), a FIFO, a symbolic link to a victim file, and the victim itself."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    targets = {"fifo": tmp_path / "fifo", "link": tmp_path / "stdout-link"}
    os.mkfifo(targets["fifo"])
    targets["link"].symlink_to(victim)
    if os.geteuid() == 0:
        targets["device"] = tmp_path / "null"
        os.mknod(targets["device"], 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    before = {k: os.lstat(p) for k, p in targets.items()}

    def untouched() -> None:
        assert victim.read_text() == "precious\n"
        for k, p in targets.items():
            st = os.lstat(p)
            assert (st.st_mode, st.st_ino, st.st_rdev) == \
                (before[k].st_mode, before[k].st_ino, before[k].st_rdev), k
        assert os.readlink(targets["link"]) == str(victim)
        assert not [p for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".part"))]
    return targets, victim, untouched


# ------------------------------------------------------------ 1. the one safe writer


def test_writer_refuses_device_fifo_link_and_folder_and_leaves_them(hostile, tmp_path):
    targets, victim, untouched = hostile
    for kind, target in [*targets.items(), ("folder", tmp_path), ("dot", Path("."))]:
        with pytest.raises(paths.OutputPathError) as exc:
            paths.write_atomic(target, "overwritten?\n", what="--json")
        assert str(target) in str(exc.value) and "\n" not in str(exc.value), kind
        assert isinstance(exc.value, OSError) and exc.value.filename == str(target)
        print(f"PASS writer refuses {kind}: {exc.value}")
    untouched()


def test_writer_removes_the_partial_on_a_full_disk_and_names_the_target(tmp_path, monkeypatch):
    target = tmp_path / "report.csv"
    target.write_text("old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(paths.os, "fsync", full)
    with pytest.raises(paths.OutputPathError) as exc:
        paths.write_atomic(target, "new\n")
    assert str(target) in str(exc.value) and "full" in str(exc.value)
    assert exc.value.errno == errno.ENOSPC
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == [target.name]
    print("PASS full disk: partial removed, message names the target")


def test_streamed_output_is_private_and_a_dash_is_stdout(tmp_path, capsys):
    target = tmp_path / "big.bin"
    with paths.output_file(target, binary=True) as fh:
        for _ in range(4):
            fh.write(b"\0" * 65536)
        # while writing, the target does not exist yet: a reader never sees half a file
        assert not target.exists()
    assert target.stat().st_size == 4 * 65536
    if not paths.sharing():
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
    paths.write_atomic("-", "to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"
    print("PASS streaming writer and '-'")


def test_a_failing_block_removes_the_tool_written_temporary(tmp_path):
    target = tmp_path / "x.qcow2"
    with pytest.raises(RuntimeError):
        with paths.output_path(target) as tmp:
            tmp.write_bytes(b"half an image")
            assert tmp.parent == tmp_path and tmp.name != target.name
            raise RuntimeError("the tool failed")
    assert list(tmp_path.iterdir()) == []
    print("PASS tool-written temporary removed on failure")


@pytest.fixture()
def cached_image(tmp_path, monkeypatch):
    """An image already in a private cache (no debvm run): ``vhpc image build`` only copies."""
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    spec = {"recipe": 0, "release": "bookworm", "packages": [], "sources": []}
    monkeypatch.setattr(imagebuild, "inputs", lambda release, include=(), sources=None, bootloader="none": spec)
    folder = paths.cache_dir() / "images" / imagebuild.cache_key(spec)
    folder.mkdir(parents=True, mode=0o700)
    data = b"QFI\xfb" + os.urandom(300_000)
    (folder / "image.qcow2").write_bytes(data)
    (folder / "manifest.json").write_text(json.dumps(
        {"sha256": hashlib.sha256(data).hexdigest(), "build_seconds": 1.0}))
    return data


def test_image_build_never_writes_a_device_fifo_link_or_planted_part(capsys, tmp_path, hostile,
                                                                     cached_image):
    targets, victim, untouched = hostile
    for kind, target in targets.items():
        rc, so, se = run_cli(capsys, "image", "build", "--out", target)
        assert rc == 2 and one_line(se) and str(target) in se, (kind, se)
        print(f"PASS image build --out {kind}: {se.strip()}")
    untouched()
    out = tmp_path / "OUT.qcow2"  # a planted OUT.part link is never followed
    (tmp_path / "OUT.qcow2.part").symlink_to(victim)
    rc, so, se = run_cli(capsys, "image", "build", "--out", out)
    assert rc == 0, se
    assert out.read_bytes() == cached_image and not out.is_symlink()
    assert victim.read_text() == "precious\n"
    assert os.readlink(tmp_path / "OUT.qcow2.part") == str(victim)
    print("PASS planted OUT.part link: victim untouched, OUT is the image")


def test_a_full_disk_during_image_build_names_the_target_and_leaves_nothing(
        capsys, tmp_path, monkeypatch, cached_image):
    import shutil

    def full(src, dst, length=0):
        dst.write(b"part of an image")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(shutil, "copyfileobj", full)
    out = tmp_path / "work" / "x.qcow2"
    out.parent.mkdir()
    rc, so, se = run_cli(capsys, "image", "build", "--out", out)
    assert rc == 2 and one_line(se) and f"the disk holding --out {out} is full" in se, se
    assert "cache" not in se and list(out.parent.iterdir()) == []
    print(f"PASS full disk during image build: {se.strip()}")


@pytest.mark.parametrize("odd", ["nodir/x.qcow2", "/proc/self/x.qcow2", "/", ".", "..", "-",
                                 "folder"])
def test_odd_out_paths_give_one_line_and_leave_nothing(capsys, tmp_path, monkeypatch, odd,
                                                       cached_image):
    work = tmp_path / "work"
    (work / "folder").mkdir(parents=True)
    monkeypatch.chdir(work)
    rc, so, se = run_cli(capsys, "image", "build", "--out", odd)
    assert rc == 2 and one_line(se) and odd in se, se
    assert sorted(p.name for p in work.iterdir()) == ["folder"]
    assert list((work / "folder").iterdir()) == []
    print(f"PASS --out {odd}: {se.strip()}")


def test_two_builds_to_the_same_out_both_finish(tmp_path, cached_image):
    import threading

    out, errors = tmp_path / "same.qcow2", []

    def build():
        try:
            imagebuild.build(out)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)
    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and out.read_bytes() == cached_image
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".same")] == []
    print("PASS two builds at once to one --out")


def stored_campaign(capsys, tmp_path, script: str, envs=("native",),
                    hib: bool = True) -> tuple[Path, str]:
    """Run a campaign of one custom benchmark (``sh -c script`` printing ``v NUMBER``) and
    return (its --out folder, its id)."""
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({
        "custom": [{"name": "probe", "command": ["sh", "-c", script],
                    "metrics": [{"name": "v", "regex": r"v (\S+)", "unit": "1",
                                 "higher_is_better": hib}]}],
        "benchmarks": ["probe"], "environments": list(envs), "warmup": 0, "repeats": 2}))
    out = tmp_path / "out"
    rc, so, se = run_cli(capsys, "run", f, "--out", out)
    assert rc in (0, 1), se[-2000:]
    return out, next(p.name for p in out.iterdir() if p.is_dir())


def test_report_refuses_device_fifo_and_link_outputs(capsys, tmp_path, hostile):
    targets, victim, untouched = hostile
    out, cid = stored_campaign(capsys, tmp_path, "echo v 3")
    for kind, target in targets.items():
        for flag in ("--csv", "--json", "--html"):
            rc, so, se = run_cli(capsys, "report", cid, "--out", out, flag, target)
            assert rc == 2 and one_line(se) and str(target) in se, (kind, flag, se)
    untouched()
    rc, so, se = run_cli(capsys, "report", cid, "--out", out, "--json", "-")
    assert rc == 0 and '"samples"' in so, se
    print("PASS report --csv/--json/--html refuse device, FIFO and link; --json - is stdout")


# ------------------------------------------------------------ 2. a total overhead formatter


def _set_values(out: Path, env: str, value: float) -> None:
    import sqlite3

    db = sqlite3.connect(out / "vhpc.db")
    with db:
        db.execute("UPDATE samples SET value = ? WHERE trial_id IN "
                   "(SELECT id FROM trials WHERE environment = ?)", (value, env))
    db.close()


@pytest.mark.parametrize("base,value,hib,want", [
    (1.0, 1e-310, True, "×>1e308"),  # a subnormal ratio of a rate: b beyond 1e308 times worse
    (1e300, 1e-300, False, "÷>1e"),  # a time ratio that underflows to 0: ÷, never -100.0 %
    (1e300, 1e-300, True, None)])  # a rate ratio of 0: no overhead to print, no traceback
def test_a_campaign_with_a_subnormal_ratio_reports(capsys, tmp_path, base, value, hib, want):
    """A metric whose environment b measured 1e-310 of native's (a subnormal ratio), or
    1e-300 against 1e300 (a ratio that underflows to 0): the report is written, every later
    one too, and the overhead reads as a factor, never a traceback or -100.0 %."""
    out, cid = stored_campaign(capsys, tmp_path, "echo v 1", envs=("native", "native:name=b"),
                               hib=hib)
    _set_values(out, "native", base)
    _set_values(out, "b", value)
    for _ in range(2):
        rc, so, se = run_cli(capsys, "report", cid, "--out", out)
        assert rc == 0 and "Traceback" not in se, se[-2000:]
    page = (out / cid / "report.html").read_text()
    assert "-100.0" not in so + page, so
    if want:
        assert want in so and want.replace(">", "&gt;") in page, so
    print(f"PASS ratio {value / base}: report written, overhead {want or '—'}")


def test_an_environment_with_only_infinite_samples_is_named(capsys, tmp_path):
    """b's values were all inf: dropped when parsed (the trial's error says so), so b has no
    sample at all; the report names b and the reason instead of "nothing to compare"."""
    import sqlite3

    out, cid = stored_campaign(capsys, tmp_path, "echo v 1", envs=("native", "native:name=b"))
    db = sqlite3.connect(out / "vhpc.db")
    with db:  # what parsing "v inf" stores: the trial done, its sample dropped
        db.execute("DELETE FROM samples WHERE trial_id IN "
                   "(SELECT id FROM trials WHERE environment = 'b')")
        db.execute("UPDATE trials SET error = 'not a finite number, sample dropped: v=inf' "
                   "WHERE environment = 'b'")
    db.close()
    rc, so, se = run_cli(capsys, "report", cid, "--out", out)
    assert rc == 0, se[-2000:]
    page = (out / cid / "report.html").read_text()
    flat = " ".join(so.split())
    assert "no valid sample in b" in flat and "v=inf" in flat, so
    assert "no valid sample in b" in page
    print("PASS an environment whose samples were all inf is named with the reason")


# ------------------------------------------------- 3. frozen groups never outlive vhpc


def _frozen(d: Path) -> bool:
    events = dict(line.split() for line in (d / "cgroup.events").read_text().splitlines())
    return events.get("frozen") == "1"


def _dead_pid() -> int:
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture()
def v2_cgroups():
    from conftest import missing
    from vhpc.host import freezer

    base = freezer.v2_base()
    if base is None or not os.access(base, os.W_OK):
        missing("frozen groups need root and a writable cgroup v2 hierarchy")
    return base


# serial: every vhpc start sweeps the groups of dead owners, so a vhpc of another
# test running beside it would sweep this test's group first
@pytest.mark.serial
def test_vhpc_host_thaws_a_daemon_left_frozen_by_a_killed_vhpc(capsys, v2_cgroups):
    """A vhpc killed with -9 during slowdown= left its group frozen with a daemon its
    benchmark started in it; the next ``vhpc host`` (no slowdown=) thaws and removes it."""
    import subprocess

    from vhpc.host import freezer

    d = v2_cgroups / f"{freezer.PREFIX}{_dead_pid()}-0"
    d.mkdir()
    daemon = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (d / "cgroup.procs").write_text(f"{daemon.pid}\n")
        (d / "cgroup.freeze").write_text("1\n")
        for _ in range(100):
            if _frozen(d):
                break
            import time
            time.sleep(0.01)
        assert _frozen(d)
        rc, so, se = run_cli(capsys, "host")
        assert rc == 0, se
        assert not d.exists()
        assert freezer.PREFIX not in Path(f"/proc/{daemon.pid}/cgroup").read_text()
        assert daemon.poll() is None and _state(daemon.pid) in "SR"
        print("PASS vhpc host thawed and removed the dead owner's frozen group")
    finally:
        daemon.kill()
        daemon.wait()
        if d.exists():
            freezer.remove_group(d)


# serial: every vhpc start sweeps the groups of dead owners, so a vhpc of another
# test running beside it would sweep this test's group first
@pytest.mark.serial
def test_the_guard_thaws_the_group_when_its_owner_dies(v2_cgroups, tmp_path):
    """A child vhpc process freezes a group holding a daemon, then is killed with -9: the
    guard it started thaws the group without any later vhpc."""
    import subprocess
    import time

    from vhpc.host import freezer

    daemon = subprocess.Popen(["sleep", "60"], start_new_session=True)
    ready = tmp_path / "ready"
    owner = subprocess.Popen([sys.executable, "-c", f"""
import time
from pathlib import Path
from vhpc.host import freezer
fz = freezer.FreezerDutyCycle(1.0).__enter__()
fz.add({daemon.pid})
(fz.dir / "cgroup.freeze").write_text("1\\n")
Path({str(ready)!r}).write_text(str(fz.dir))
time.sleep(60)
"""], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    d = None
    try:
        for _ in range(500):
            if ready.exists() and ready.read_text():
                break
            time.sleep(0.02)
        d = Path(ready.read_text())
        for _ in range(100):
            if _frozen(d):
                break
            time.sleep(0.01)
        assert _frozen(d)
        owner.kill()
        owner.wait()
        for _ in range(300):
            if not _frozen(d):
                break
            time.sleep(0.01)
        assert not _frozen(d) and daemon.poll() is None
        assert d in freezer.sweep_stale() and not d.exists()
        print("PASS the guard thawed the group of a vhpc killed with -9")
    finally:
        owner.kill()
        owner.wait()
        daemon.kill()
        daemon.wait()
        if d is not None and d.exists():
            freezer.remove_group(d)


def test_the_sweep_against_a_fake_cgroup_tree(tmp_path, monkeypatch):
    """Where cgroups cannot be written: the sweep logic on a tree of plain folders and files
    thaws (writes 0) every group of a dead owner and leaves a live owner's group alone."""
    from vhpc.host import freezer

    root = tmp_path / "cgroup"
    monkeypatch.setattr(freezer, "CGROUP_ROOT", root)
    dead, live = root / f"{freezer.PREFIX}{_dead_pid()}-3", root / f"{freezer.PREFIX}1-0"
    for d in (dead, live):
        d.mkdir(parents=True)
        (d / "cgroup.freeze").write_text("1\n")
    freezer.sweep_stale()  # a plain folder with files is not removed; it is thawed
    assert (dead / "cgroup.freeze").read_text() == "0\n"
    assert (live / "cgroup.freeze").read_text() == "1\n"  # pid 1 is alive


# ------------------------------------------------------ 4. input folders walked at any depth


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_a_device_deep_in_an_input_folder_is_refused_before_the_run(capsys, tmp_path):
    """``inputs: [dir]`` with ``dir/a/b/zero`` a copy of /dev/zero's node: one line naming it,
    exit 2, nothing stored; the ssh archive refuses the same path with the same check."""
    from vhpc.environments.ssh import inputs as ssh_inputs

    data = tmp_path / "data"
    (data / "a" / "b").mkdir(parents=True)
    (data / "ok.txt").write_text("x\n")
    zero = data / "a" / "b" / "zero"
    os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({
        "custom": [{"name": "probe", "command": ["sh", "-c", "echo v 1"], "inputs": [str(data)],
                    "metrics": [{"name": "v", "regex": r"v (\S+)", "unit": "1",
                                 "higher_is_better": True}]}],
        "benchmarks": ["probe"], "environments": ["native"], "warmup": 0, "repeats": 1}))
    out = tmp_path / "out"
    rc, so, se = run_cli(capsys, "run", f, "--out", out)
    assert rc == 2 and one_line(se) and f"{zero} is a character device" in se, se
    assert not (out / "vhpc.db").exists()
    import io

    with pytest.raises(ssh_inputs.InputError, match="a/b/zero is a character device"):
        ssh_inputs.archive(str(data), io.BytesIO())
    print(f"PASS device in an input folder: {se.strip()}")


def test_input_problem_finds_fifos_sockets_and_dangling_links_at_any_depth(tmp_path):
    import socket

    top = tmp_path / "in"
    (top / "x" / "y").mkdir(parents=True)
    assert paths.input_problem(top) is None
    os.mkfifo(top / "x" / "y" / "f")
    assert paths.input_problem(top) == (str(top / "x" / "y" / "f"),
                                        "is a FIFO, not a regular file or folder")
    os.unlink(top / "x" / "y" / "f")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(top / "x" / "s"))
    try:
        assert "is a socket" in paths.input_problem(top)[1]
    finally:
        s.close()
        os.unlink(top / "x" / "s")
    (top / "x" / "gone").symlink_to(tmp_path / "nothing")
    assert "leads nowhere" in paths.input_problem(top)[1]
    os.unlink(top / "x" / "gone")
    (top / "x" / "loop").symlink_to(top)
    assert "loop of links" in paths.input_problem(top)[1]


# ---------------------------------------------------------- 5. images checked before boot


def test_a_zero_byte_image_is_refused_before_anything_boots(capsys, tmp_path, monkeypatch):
    (tmp_path / "empty.qcow2").touch()
    (tmp_path / "c.yaml").write_text("benchmarks: [stream]\nrepeats: 1\nwarmup: 0\n"
                                     "environments: [native, {vm: {image: empty.qcow2}}]\n")
    monkeypatch.chdir(tmp_path)
    rc, so, se = run_cli(capsys, "run", "c.yaml", "--out", "res")
    assert rc == 2 and one_line(se) and "0 bytes, too small to be a disk" in se, se
    assert not (tmp_path / "res" / "vhpc.db").exists()
    print(f"PASS 0-byte image: {se.strip()}")


def test_non_disks_and_system_files_are_refused_as_images(tmp_path, monkeypatch):
    from vhpc.environments.vm import userimage_check as uc

    monkeypatch.delenv(uc.ALLOW_SYSTEM_IMAGE_ENV, raising=False)
    text = tmp_path / "notes.img"
    text.write_text("not a disk\n" * 20000)  # large enough, but no image or disk magic
    with pytest.raises(uc.ImageFileError, match="neither a disk image"):
        uc.check_image_file(text)
    mbr = bytearray(1 << 20)
    mbr[510:512] = b"\x55\xaa"
    (tmp_path / "disk.raw").write_bytes(bytes(mbr))
    assert uc.check_image_file(tmp_path / "disk.raw") == (tmp_path / "disk.raw").resolve()
    (tmp_path / "tiny.qcow2").write_bytes(b"QFI\xfb" + bytes(100))  # qemu-img judges the rest
    assert uc.check_image_file(tmp_path / "tiny.qcow2")
    link = tmp_path / "shadow.qcow2"
    link.symlink_to("/etc/shadow")
    with pytest.raises(uc.ImageFileError, match="resolves to /etc/shadow.*--allow-system-image"):
        uc.check_image_file(link)
    with pytest.raises(uc.ImageFileError, match="too small to be a disk"):  # still no disk
        uc.check_image_file(link, allow_system=True)
    st = os.stat(tmp_path / "disk.raw")  # what only root could read
    assert uc.readable_without_root(st, st.st_uid, [])
    os.chmod(tmp_path / "disk.raw", 0o000)
    st = os.stat(tmp_path / "disk.raw")
    assert not uc.readable_without_root(st, st.st_uid, [])
    monkeypatch.setenv("SUDO_UID", "4242")
    if os.geteuid() == 0:
        with pytest.raises(uc.ImageFileError, match="not readable by you without root"):
            uc.check_image_file(tmp_path / "disk.raw")
    print("PASS text, /etc/shadow link and root-only images refused; MBR disk and qcow2 pass")


# ------------------------------------------------------------ 6. caches opened as locks are


@pytest.fixture()
def step_cache(tmp_path, monkeypatch):
    from vhpc.benchmarks.apps import sizing

    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    return sizing, sizing._cache_path()


def test_an_implausible_cached_step_time_is_probed_again(step_cache):
    sizing, path = step_cache
    path.write_text(json.dumps({"k": 1e-300}))
    os.chmod(path, 0o600)
    assert sizing.cached("k") is None  # 1e-300 s a step would ask for the step cap
    path.write_text(json.dumps({"k": 0.002}))
    assert sizing.cached("k") == 0.002
    print("PASS a cached 1e-300 s per step is probed again")


def test_a_planted_or_foreign_step_cache_is_not_believed(step_cache, tmp_path):
    sizing, path = step_cache
    foreign = tmp_path / "world-writable.json"
    foreign.write_text(json.dumps({"k": 0.002}))
    os.chmod(foreign, 0o666)
    path.symlink_to(foreign)
    assert sizing.cached("k") is None  # a link is never followed
    with pytest.raises(paths.OutputPathError, match="symbolic link"):
        sizing.remember("k", 0.25)  # nor written through
    assert json.loads(foreign.read_text()) == {"k": 0.002}
    path.unlink()
    path.write_text(json.dumps({"k": 0.002}))
    os.chmod(path, 0o622)  # writable by others
    assert sizing.cached("k") is None
    if os.geteuid() == 0:
        os.chmod(path, 0o600)
        os.chown(path, 4242, -1)  # another user's file
        assert sizing.cached("k") is None
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    assert paths.read_cache_text(fifo, 100) is None  # never blocks on a FIFO
    print("PASS a linked, foreign or others-writable step cache is not believed")


# ----------------------------------------------------------------- 7. Slurm calls bounded


def _fake_slurm(tmp_path: Path, monkeypatch, scripts: dict[str, str]) -> None:
    """conftest.fake_slurm's stand-in Slurm commands first on PATH for this test."""
    from conftest import fake_slurm

    monkeypatch.setenv("PATH", fake_slurm(tmp_path, scripts)["PATH"])


def test_a_hanging_slurm_call_is_bounded_and_reads_as_unreachable(tmp_path, monkeypatch):
    from vhpc.executors.slurm import allocation, calls

    _fake_slurm(tmp_path, monkeypatch, {"sinfo": "exec sleep 30"})
    out = calls.slurm_call(["sinfo"], timeout=0.5)
    assert out.returncode == 124 and allocation.unreachable(out.stderr)
    print("PASS a hanging sinfo is stopped and named unreachable")


def test_a_pending_allocation_says_what_it_waits_for_and_gives_up(tmp_path, monkeypatch):
    from vhpc.core.errors import VhpcError
    from vhpc.executors.slurm import allocation, calls

    cancelled = tmp_path / "cancelled"
    _fake_slurm(tmp_path, monkeypatch, {
        "salloc": "exec sleep 30",  # never granted
        "squeue": 'echo "PENDING|Priority|3|P"',
        "scancel": f'echo "$@" >> {cancelled}'})
    monkeypatch.setattr(calls, "POLL_S", 0.05)
    ex = allocation.SlurmExecutor("20260101-000000-abcd",
                                  allocation.SlurmOptions(nodes=3, partition="P", wait=1))
    said: list[str] = []
    with pytest.raises(VhpcError, match=r"no Slurm allocation after .* min \(waiting for 3 nodes"
                                        r" in partition P \(Priority\)"):
        calls.salloc_waiting(ex.salloc_argv(), ex.job_name, 0.004, True, said.append)  # 0.24 s
    assert said and said[0] == "waiting for 3 nodes in partition P (Priority), 0 min"
    assert "--name=vhpc-20260101-000000-abcd --state=PENDING" in cancelled.read_text()
    assert calls.pending_line("RUNNING|None|1|P", 5) is None
    print(f"PASS pending allocation reported ({said[0]}) and bounded")


def test_the_walltime_comes_from_measured_trial_times(tmp_path, monkeypatch):
    from vhpc.executors.slurm import allocation

    _fake_slurm(tmp_path, monkeypatch, {"sinfo": 'echo "batch* 2-00:00:00"'})
    ex = allocation.SlurmExecutor("20260101-000000-abcd")
    ex.plan_trials, ex.plan_seconds, ex.plan_measured = 100, 100 * 3600.0, 0
    assert ex.time_limit() == "2880"  # timeouts: 6,410 min, capped at the partition's 2 days
    ex.plan_seconds, ex.plan_measured = 100 * (2 * 10 + 30.0), 100  # measured 10 s a trial
    assert ex.time_limit() == str(84 + 10)
    print("PASS walltime from measured trial times")


# ---------------------------------------------------- 8. free ports said, no blanket excepts


def test_free_ports_returns_n_or_says_why(monkeypatch):
    import socket

    from vhpc.environments.base import EnvError
    from vhpc.executors.slurm import guests

    assert len(set(guests.free_ports("127.0.0.1", 3))) == 3
    with pytest.raises(EnvError, match="no free port on 192.0.2.1"):
        guests.free_ports("192.0.2.1", 1)  # TEST-NET-1: no address of this host

    class NoUdp(socket.socket):
        def bind(self, addr):
            if self.type == socket.SOCK_DGRAM:
                raise OSError(98, "Address already in use")
            return super().bind(addr)
    monkeypatch.setattr(guests.socket, "socket", NoUdp)
    with pytest.raises(EnvError, match="only 0 of the 2 ports"):
        guests.free_ports("127.0.0.1", 2)
    print("PASS free_ports: n ports or a reason")


def test_a_bug_in_page_facts_is_not_hidden(monkeypatch):
    """A benchmark whose parameters fail for a bug (a TypeError, not a user error) is no
    longer shown as "the given parameters": the error propagates."""
    from vhpc import benchmarks
    from vhpc.report import pagefacts

    class Broken:
        def resolve(self, given):
            raise TypeError("a bug")
    monkeypatch.setattr(benchmarks, "get", lambda name: Broken())
    with pytest.raises(TypeError):
        pagefacts.problem_sizes({"benchmarks": [{"name": "stream", "params": {}}]}, [])


# the formatter is total: hypothesis draws every kind of double, subnormals and specials too
from hypothesis import given, settings, strategies as st  # noqa: E402

_any_float = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(max_examples=300, deadline=None)
@given(_any_float, st.one_of(st.none(), _any_float), st.one_of(st.none(), _any_float),
       st.booleans())
def test_every_double_is_printed(x, low, high, hib):
    from vhpc.core import numfmt

    if (low is None) != (high is None):
        low = high = None
    texts = [numfmt.overhead(x, low, high, hib), numfmt.cost_ci(x, low, high), numfmt.factor(x),
             numfmt.pct(x), numfmt.ratio(x), numfmt.sci(x), numfmt.ratio_ci(x, low, high)]
    if low is not None:
        texts.append(numfmt.pct_ci(x, low, high))
    assert all(isinstance(t, str) and t for t in texts)
    if not hib and x >= 0 and (x == 0 or 1 / x == float("inf")):  # 1/x beyond a double
        assert numfmt.overhead(x, None, None, False) == numfmt.HUGE_BETTER
    assert "-100.0" not in numfmt.overhead(x, None, None, hib) or not x >= 0


def test_special_values_read_as_the_formatter_says():
    from vhpc.core import numfmt

    assert numfmt.overhead(1e-310, None, None, True) == "×>1e308"  # a rate 1e310 times worse
    assert numfmt.overhead(0.0, None, None, False) == "÷>1e308"  # an underflowed time ratio
    assert numfmt.pct(-100.0) == "÷>1e15" and "-100.0" not in numfmt.pct_ci(-100.0, -100, 5)
    assert numfmt.factor(float("nan")) == "—" and numfmt.cost_ci(float("nan")) == "—"
    assert numfmt.factor(float("inf")) == "×>1e308" and numfmt.sci(float("nan")) == "—"
