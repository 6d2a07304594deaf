"""What ``vhpc image build`` starts, attaches and mounts dies with vhpc, or the next vhpc undoes it.

A build runs debvm-create (mmdebstrap and its children), sfdisk, losetup, mount, grub-install,
mkfs.vfat, qemu-img... for minutes.  A parent-death signal (:func:`~vhpc.host.owned.
die_with_parent`) reaches the direct child only: after a ``kill -9`` of vhpc, mmdebstrap went on
installing for minutes, and a loop device, a mount and the build folder stayed.  So:

* :class:`BuildBox` starts every process of one build in a cgroup-v2 group of its own,
  ``vhpc-build-<pid>-<start ticks>-<n>`` (Documentation/admin-guide/cgroup-v2.rst), which the
  child joins before it execs; a child's children are born in it, and no ``setsid`` leaves it.
  vhpc's guard (:class:`~vhpc.host.owned.KillGuard`) writes ``1`` to the group's
  ``cgroup.kill`` (Linux 5.14) the moment vhpc dies; a normal end kills and removes it too.
  Where no group can be made (no cgroup v2, not root) each child leads a session of its own
  that the same guard kills whole (:class:`~vhpc.host.owned.GroupGuard`), which only a
  process that calls ``setsid`` itself escapes.
* The loop devices (by their backing file), mounts (by their mount point) and the folders and
  files a build makes are written, before each is made, to a journal in the cache,
  ``cache_dir()/leftovers/build-<pid>-<start ticks>-journal.json``, through the safe writer.
  Every vhpc start (:func:`sweep_stale`, as the frozen cgroups of a dead vhpc are swept)
  reads the journals of dead owners and undoes exactly what they name: it unmounts a recorded
  mount point that is still mounted, detaches a loop device whose backing file is a recorded
  one, removes the recorded folders and files, then the journal.  Nothing else is touched,
  and a journal (the cache is input like any other) may name only a build folder in the image
  cache and vhpc's own ``vhpc-mnt-``/``vhpc-efi-`` folders in the temporary directory.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from vhpc.core.errors import VhpcError
from vhpc.core.paths import cache_dir, trusted_folder, write_atomic
from vhpc.host import owned

#: Name prefix of a build's cgroup and of its journal.
PREFIX = "vhpc-build-"
JOURNAL_PREFIX = "build-"
#: Name prefixes of the temporary folders a build may record outside the image cache.
TEMP_PREFIXES = ("vhpc-mnt-", "vhpc-efi-")
#: What a journal records: loop devices by backing file, mount points, folders and files.
KINDS = ("loops", "mounts", "paths")
_counter = itertools.count()


def _v2_base() -> Path | None:
    from vhpc.host.freezer import v2_base

    return v2_base()


def journal_folder() -> Path:
    """``cache_dir()/leftovers`` (private; made when missing).  Raises UntrustedError/OSError."""
    return trusted_folder(cache_dir() / "leftovers", "the folder of vhpc's build journals")


class BuildBox:
    """One build's processes, loop devices, mounts, folders and files (module docstring).

    Use as a context manager.  :meth:`popen` and :meth:`run` start processes in the build's
    cgroup (or session); :meth:`record` writes what is about to be made to the journal and
    :meth:`forget` takes it out once undone.  ``contain=False`` (tests of the disk layout):
    plain children, no journal.  On exit every process still in the group is killed and the
    group and the journal are removed.  Raises OSError/UntrustedError when the journal cannot
    be written in the cache."""

    def __init__(self, contain: bool = True):
        self.contain = contain
        self.cgroup: Path | None = None
        self.journal: Path | None = None
        self.entries: dict[str, list[str]] = {k: [] for k in KINDS}
        self._guard: owned.KillGuard | None = None

    def __enter__(self) -> BuildBox:
        if not self.contain:
            return self
        self.journal = journal_folder() / f"{JOURNAL_PREFIX}{owned.owner_tag()}-journal.json"
        self._write()
        base = _v2_base()
        if base is not None:
            d = base / f"{PREFIX}{owned.owner_tag()}-{next(_counter)}"
            try:
                d.mkdir()
            except OSError:  # not root, or a read-only cgroupfs: sessions only
                return self
            try:
                if not (d / "cgroup.kill").exists():  # Linux < 5.14: sessions only
                    raise OSError("no cgroup.kill")
                self._guard = owned.KillGuard(d)
                self.cgroup = d
            except OSError:
                kill_group(d, wait=0)
        return self

    def _write(self) -> None:
        if self.journal is not None:
            write_atomic(self.journal, json.dumps(self.entries, indent=1) + "\n")

    def record(self, kind: str, path: str | os.PathLike) -> None:
        """Journal ``path`` (``kind`` one of :data:`KINDS`) before it is made or attached."""
        if self.journal is not None and str(path) not in self.entries[kind]:
            self.entries[kind].append(str(path))
            self._write()

    def forget(self, kind: str, path: str | os.PathLike) -> None:
        """Take ``path`` out of the journal once it is undone (never raises)."""
        if self.journal is not None and str(path) in self.entries[kind]:
            self.entries[kind].remove(str(path))
            try:
                self._write()
            except OSError:
                pass

    def _preexec(self):
        fd = (os.open(self.cgroup / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
              if self.cgroup is not None else None)

        def join() -> None:  # in the child, before exec: its children are born in the group
            owned.die_with_parent()
            if fd is not None:
                os.write(fd, b"0")  # "0": the writing process (cgroup-v2.rst, cgroup.procs)
        return join, fd

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        """Start ``argv`` (keyword arguments as :class:`subprocess.Popen`) in the build's
        group, leading a session of its own watched by the guard; end it with
        :meth:`finished`.  Raises OSError as Popen does."""
        join, fd = self._preexec()
        try:
            proc = subprocess.Popen(argv, start_new_session=True, preexec_fn=join, **kw)
        finally:
            if fd is not None:
                os.close(fd)
        if self.contain:
            try:
                proc.guard = owned.GroupGuard(proc.pid)  # type: ignore[attr-defined]
            except OSError:
                pass
        return proc

    def finished(self, proc: subprocess.Popen, kill: bool = False) -> None:
        """``proc`` ended here (``kill``: end its session first, as on an error or an
        interrupt); reaps it and stops watching its session."""
        if kill:
            owned.kill_session(proc.pid)
        proc.wait()
        guard = getattr(proc, "guard", None)
        if guard is not None:
            guard.done()

    def run(self, argv: list[str], input: str | None = None,
            timeout: float = 120.0) -> subprocess.CompletedProcess:
        """Run ``argv`` in the build's group, its output captured as text, ``input`` on its
        standard input.  Raises subprocess.TimeoutExpired after ``timeout`` s (the process
        killed)."""
        proc = self.popen(argv, stdin=subprocess.PIPE if input is not None else
                          subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            self.finished(proc, kill=True)
            raise
        self.finished(proc)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def __exit__(self, *exc) -> None:
        if self.cgroup is not None:
            kill_group(self.cgroup)
            if self._guard is not None:
                self._guard.done()
        if self.journal is not None:
            try:
                self.journal.unlink()
            except OSError:
                pass


def kill_group(group: Path, wait: float = 5.0) -> bool:
    """SIGKILL every process of the cgroup-v2 group ``group`` (``cgroup.kill``) and remove it once
    empty (at most ``wait`` s); True when it is gone.  Never raises."""
    try:
        (group / "cgroup.kill").write_text("1\n")
    except OSError:
        pass
    deadline = time.monotonic() + wait
    while True:
        try:
            group.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


# ---------------------------------------------------------------- the next vhpc's sweep


def _allowed(path: Path) -> bool:
    """Whether a journal may name ``path``: a ``build-*`` folder (or what is inside one) in
    the image cache, or a :data:`TEMP_PREFIXES` folder right in the temporary directory."""
    if ".." in path.parts or not path.is_absolute():
        return False
    images = cache_dir() / "images"
    if path.is_relative_to(images):
        rel = path.relative_to(images).parts
        return len(rel) >= 2 and (rel[1].startswith("build-") or rel[1].startswith(".image."))
    tmp = Path(tempfile.gettempdir())
    return path.parent in (tmp, tmp.resolve()) and path.name.startswith(TEMP_PREFIXES)


def _mount_points() -> set[str]:
    """Mount points of this mount namespace (proc(5) ``/proc/self/mountinfo`` field 5, its
    octal escapes undone)."""
    out = set()
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if len(fields) > 4:
                out.add(fields[4].encode().decode("unicode_escape"))
    except OSError:
        pass
    return out


def _loops_backed_by(files: set[str]) -> list[str]:
    """``/dev/loopN`` of the loop devices whose backing file is one of ``files`` (sysfs
    ``/sys/block/loopN/loop/backing_file``; a deleted file reads ``PATH (deleted)``)."""
    found = []
    for d in sorted(Path("/sys/block").glob("loop*")):
        try:
            back = (d / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if back.removesuffix(" (deleted)") in files:
            found.append(f"/dev/{d.name}")
    return found


def _quiet(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                              timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def undo(entries: dict) -> list[str]:
    """Undo one dead build's journal ``entries``: unmount its mount points that are mounted
    (innermost first), detach the loop devices backed by its files (``partx -d``, ``losetup
    -d``), remove its folders and files, never one with a mount below it.  Entries a journal
    may not name (:func:`_allowed`) are left alone.  Returns one line per thing undone."""
    lines: list[str] = []

    def named(kind: str) -> list[Path]:
        values = entries.get(kind) if isinstance(entries, dict) else None
        return [Path(v) for v in values if isinstance(v, str) and _allowed(Path(v))] \
            if isinstance(values, list) else []

    mounted = _mount_points()
    for target in sorted(named("mounts"), key=lambda p: len(p.parts), reverse=True):
        if str(target) in mounted and _quiet(["umount", str(target)]):
            lines.append(f"unmounted {target} (its vhpc image build is gone)")
    for loop in _loops_backed_by({str(p) for p in named("loops")}):
        _quiet(["partx", "-d", loop])
        if _quiet(["losetup", "-d", loop]):
            lines.append(f"detached {loop} (its vhpc image build is gone)")
    mounted = _mount_points()
    for path in named("paths"):
        if any(m == str(path) or m.startswith(str(path) + "/") for m in mounted):
            continue  # never remove through a mount
        if owned.remove_path(path):
            lines.append(f"removed {path} (its vhpc image build is gone)")
    return lines


def sweep_stale() -> list[str]:
    """At every vhpc start: kill and remove the build groups of dead owners, then undo the
    journals of dead owners (:func:`undo`) and remove them.  Best effort, never raises;
    returns one line per thing undone."""
    lines: list[str] = []
    for base in {b for b in (_v2_base(),) if b is not None}:
        try:
            groups = [d for d in base.iterdir() if d.name.startswith(PREFIX)]
        except OSError:
            groups = []
        for d in groups:
            if not owned.owner_alive(d.name, PREFIX) and kill_group(d):
                lines.append(f"killed the processes of {d.name} (its vhpc image build is gone)")
    cache = Path(os.environ.get("VHPC_CACHE") or Path.home() / ".cache" / "vhpc")
    if not (cache / "leftovers").is_dir():  # no journal was ever written: nothing is made
        return lines
    try:
        journals = sorted(journal_folder().glob(JOURNAL_PREFIX + "*-journal.json"))
    except (OSError, VhpcError):  # a cache another user could write: not now
        return lines
    for journal in journals:
        if owned.owner_alive(journal.name, JOURNAL_PREFIX) or journal.is_symlink():
            continue
        try:
            entries = json.loads(journal.read_text())
        except (OSError, ValueError):
            entries = {}
        try:
            lines += undo(entries)
        except (OSError, VhpcError):
            continue
        try:
            journal.unlink()
        except OSError:
            pass
    return lines
