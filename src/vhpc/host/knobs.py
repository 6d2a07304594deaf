"""Host knobs that vhpc may change — only when the user asks (``--host-knob NAME=VALUE``) —
and always restores: on normal exit, on errors, on Ctrl-C, and, if vhpc was killed, at the
next vhpc start (a journal of original values is written *before* anything is changed).  The
journal names its owner and stays locked while the owner lives, so a vhpc started beside a
running campaign never restores, or changes, that campaign's settings.

| knob | file(s) | values |
|---|---|---|
| ``thp`` | /sys/kernel/mm/transparent_hugepage/enabled | always, madvise, never |
| ``thp_defrag`` | /sys/kernel/mm/transparent_hugepage/defrag | always, defer, defer+madvise, madvise, never |
| ``numa_balancing`` | /proc/sys/kernel/numa_balancing | 0, 1 |
| ``hugepages_2m`` | /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages | page count |
| ``hugepages_1g`` | /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages | page count |
| ``governor`` | /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | a governor the CPU offers |

Files and semantics: Documentation/admin-guide/mm/transhuge.rst, hugetlbpage.rst,
sysctl/kernel.rst (numa_balancing), cpu-freq/cpufreq-stats (scaling_governor) of the Linux
kernel.  KVM's ``ept``/``npt`` (nested vs shadow paging: Lange et al., VEE 2011, Fig. 12)
are module parameters that need the kvm module reloaded with no VM running: vhpc records them
but does not change them.

The journal is one folder per host, :data:`JOURNAL_DIR` (``/run/vhpc/host-knobs``: root's,
on a tmpfs that a reboot empties together with the settings it records), not per
``$VHPC_CACHE``, so two campaigns with different caches see each other's knobs.  A journal is
trusted only when it and its folder belong to root (or to the user running vhpc) and nobody
else may write them, and only its entries for files of vhpc's own table (:data:`KNOBS`, under
the knob's root) with values that table allows are ever written back: a journal naming
another file writes nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import socket
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from vhpc.core.locks import FileLock, Owner, held

from vhpc.core.errors import VhpcError

KNOBS: dict[str, tuple[str, str]] = {
    "thp": ("sys/kernel/mm/transparent_hugepage/enabled", r"always|madvise|never"),
    "thp_defrag": ("sys/kernel/mm/transparent_hugepage/defrag",
                   r"always|defer|defer\+madvise|madvise|never"),
    "numa_balancing": ("proc/sys/kernel/numa_balancing", r"[01]"),
    "hugepages_2m": ("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", r"\d+"),
    "hugepages_1g": ("sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", r"\d+"),
    "governor": ("sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", r"[a-z]+"),
}


#: The journal folder of this host (root-owned; see the module docstring).
JOURNAL_DIR = Path("/run/vhpc/host-knobs")


def knob_of(path: str | Path, root: str | Path = "/") -> str | None:
    """The name of the knob in :data:`KNOBS` whose file is ``path`` under ``root``, or None
    when ``path`` is no knob file of vhpc's (``..`` and symlinked names never match)."""
    path, root = str(path), str(root)
    if os.path.normpath(path) != path:
        return None
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        return None
    for name, (pattern, _) in KNOBS.items():
        rx = "/".join(re.escape(part).replace(r"\*", r"[0-9]+") for part in pattern.split("/"))
        if re.fullmatch(rx, rel, re.ASCII):
            return name
    return None


def trusted(path: Path) -> bool:
    """True when ``path`` (a journal folder or file) is no symlink, belongs to root or to this
    user, and no one else may write it: only then is its content believed."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (not stat.S_ISLNK(st.st_mode) and st.st_uid in (0, os.geteuid())
            and not st.st_mode & 0o022)


class KnobError(VhpcError, ValueError):
    """A knob name or value is not allowed, or the host refused it; says what to change."""


def parse_knob(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` → (name, value), validated against :data:`KNOBS`.  Raises KnobError."""
    name, sep, value = text.partition("=")
    if not sep or name not in KNOBS:
        raise KnobError(f"host knob {text!r}: use NAME=VALUE with NAME one of {', '.join(KNOBS)}")
    if not re.fullmatch(KNOBS[name][1], value, re.ASCII):
        raise KnobError(f"host knob {name}={value!r}: allowed values match {KNOBS[name][1]}")
    return name, value


def _current(path: Path) -> str:
    text = path.read_text().strip()
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text


@dataclass(frozen=True)
class Recovered:
    """A journal left by a vhpc that is no longer running, now restored: its ``owner`` (None
    for a journal of an older vhpc that did not record one), the ``saved`` {file: original
    value} written back, and the files that could not be written (``failed``)."""

    owner: Owner | None
    saved: dict[str, str]
    failed: list[str]

    def describe(self) -> str:
        """One line for the user: who left what, and what was restored."""
        who = f"vhpc {self.owner.describe()}" if self.owner else "an older vhpc"
        what = ", ".join(f"{f}={v}" for f, v in self.saved.items()) or "nothing"
        tail = f"; could not write {', '.join(self.failed)} (run as root)" if self.failed else ""
        return f"restored host settings left changed by {who}, which is no longer running: {what}{tail}"


@contextmanager
def _directory_lock(journal_dir: Path) -> Iterator[None]:
    """Serialise journal reads and writes of all vhpc processes (a blocking flock on
    ``journal_dir/.lock``, held for milliseconds)."""
    try:
        journal_dir.mkdir(parents=True, exist_ok=True, mode=0o755)
    except OSError as exc:
        raise KnobError(f"host knobs need their journal folder {journal_dir} "
                        f"({exc.strerror}): run as root") from None
    if not trusted(journal_dir):
        raise KnobError(f"the host-knob journal folder {journal_dir} belongs to another user "
                        "or others may write it: remove it (vhpc recreates it) and retry")
    fd = os.open(journal_dir / ".lock",
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class HostKnobs:
    """Context manager applying ``knobs`` ({name: value}) and restoring the originals.

    ``root``: filesystem root (tests use a fake tree); ``journal``: the journal folder.  Before
    anything changes, a journal file there records the owner (pid, host, start time), the knobs
    and the original values, and stays flock-ed while this process runs, so another vhpc can
    tell a live campaign's journal (never touched) from a dead one's (restored by
    :func:`recover`).  Raises KnobError when a file is missing, the kernel refuses a value
    (anything applied so far is restored first), or a live vhpc holds one of the same knobs.
    """

    def __init__(self, knobs: dict[str, str], journal: Path, root: str | Path = "/"):
        self.knobs = dict(knobs)
        self.root = Path(root)
        self.journal_dir = Path(journal)
        self.saved: dict[str, str] = {}
        self.lock: FileLock | None = None

    def _files(self, name: str) -> list[Path]:
        pattern = KNOBS[name][0]
        files = sorted(self.root.glob(pattern)) if "*" in pattern else [self.root / pattern]
        files = [f for f in files if f.exists()]
        if not files:
            raise KnobError(f"host knob {name}: {pattern} does not exist on this host")
        return files

    def __enter__(self):
        if not self.knobs:  # nothing to change (journals of dead runs: recover() at start)
            return self
        with _directory_lock(self.journal_dir):
            _recover_locked(self.journal_dir, self.root)
            if not self.knobs:
                return self
            for name in self.knobs:
                for f in self._files(name):
                    self.saved[str(f)] = _current(f)
            self._refuse_conflicts()
            self._write_journal()
        try:
            for name, value in self.knobs.items():
                for f in self._files(name):
                    try:
                        f.write_text(value)
                    except OSError as exc:
                        raise KnobError(f"host knob {name}={value}: the kernel refused it "
                                        f"({exc.strerror}); run as root or pick another value") from None
                if name.startswith("hugepages"):
                    got = int(_current(self._files(name)[0]))
                    if got < int(value):
                        raise KnobError(f"host knob {name}={value}: only {got} pages could be "
                                        "reserved (memory fragmented): ask for fewer")
        except BaseException:
            self.restore()
            raise
        return self

    def _refuse_conflicts(self) -> None:
        """KnobError when a live vhpc's journal holds one of our files."""
        here = socket.gethostname()
        for path, owner, data in _journals(self.journal_dir):
            if (owner is not None and owner.host != here) or not held(path):
                continue  # another host's settings, or a dead owner's (recovered just before)
            shared = set(data.get("saved", {})) & set(self.saved)
            if shared:
                names = [n for n in self.knobs if {str(f) for f in self._files(n)} & shared]
                who = owner.describe() if owner else "another process"
                raise KnobError(f"host knob {', '.join(names)} is held by the vhpc campaign of "
                                f"{who} until it ends: wait, or leave --host-knob "
                                f"{names[0]} out")

    def _write_journal(self) -> None:
        me = Owner.me()
        name = f"{me.host}-{me.pid}-{secrets.token_hex(3)}.json"
        self.lock = FileLock(self.journal_dir / name)
        if not self.lock.acquire():
            raise KnobError(f"journal {self.lock.path} is locked by another process")
        data = json.dumps({"owner": me.to_dict(), "knobs": self.knobs, "saved": self.saved})
        os.ftruncate(self.lock.fd, 0)
        os.pwrite(self.lock.fd, data.encode(), 0)
        os.fsync(self.lock.fd)

    def restore(self) -> None:
        """Write the original values back, delete the journal and drop its lock."""
        if self.lock is None and not self.saved:
            return
        with _directory_lock(self.journal_dir):
            restore_values(self.saved, self.root)
            self.saved = {}
            if self.lock is not None:
                self.lock.release(unlink=True)
                self.lock = None

    def __exit__(self, *exc):
        self.restore()
        return False


def restore_values(saved: dict[str, str], root: str | Path = "/") -> list[str]:
    """Write saved values back (best effort); returns the files that could not be restored.
    Only files of vhpc's knob table under ``root`` with a value the table allows are written;
    any other entry is refused (returned as failed, ``path (not a vhpc knob)``)."""
    failed = []
    for path, value in saved.items():
        name = knob_of(path, root)
        if name is None or not re.fullmatch(KNOBS[name][1], str(value), re.ASCII):
            failed.append(f"{path} (not a vhpc knob)")
            continue
        try:
            Path(path).write_text(value)
        except OSError:
            failed.append(path)
    return failed


def _journals(journal_dir: Path) -> Iterator[tuple[Path, Owner | None, dict[str, Any]]]:
    """(path, owner, content) of every journal in ``journal_dir`` (unreadable ones as {})."""
    for path in sorted(journal_dir.glob("*.json")):
        if not trusted(path):
            continue  # another user's file in the folder: never believed
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        yield path, Owner.from_dict(data.get("owner")), data


def _recover_locked(journal_dir: Path, root: str | Path = "/") -> list[Recovered]:
    done = []
    here = socket.gethostname()
    for path, owner, data in _journals(journal_dir):
        if owner is not None and owner.host != here:
            continue  # a shared cache: that host's settings are not ours to restore
        lock = FileLock(path)
        if not lock.acquire():
            continue  # its owner is alive: its settings are in use
        saved = data.get("saved", {})
        saved = {str(k): str(v) for k, v in saved.items()} if isinstance(saved, dict) else {}
        done.append(Recovered(owner, saved, restore_values(saved, root)))
        lock.release(unlink=True)
    return done


def recover(journal: Path, root: str | Path = "/") -> list[Recovered]:
    """Restore the host knobs of every journal in the folder ``journal`` whose owner is dead
    (its flock is free) and that was written on this host; live campaigns' journals are left
    alone.  A journal file of an older vhpc (``<folder>.json``: originals only, no owner) counts
    as dead.  Only trusted journals (:func:`trusted`) in a trusted folder are read, and only
    entries for vhpc's knob files under ``root`` are written back (:func:`restore_values`); a
    folder this user cannot write is left alone.  Returns what was restored, one entry per
    journal."""
    journal = Path(journal)
    done = []
    legacy = journal.with_name(journal.name + ".json")
    if legacy.is_file() and trusted(legacy) and trusted(legacy.parent):
        try:
            saved = json.loads(legacy.read_text())
        except (OSError, ValueError):
            saved = {}
        saved = {str(k): str(v) for k, v in saved.items()} if isinstance(saved, dict) else {}
        done.append(Recovered(None, saved, restore_values(saved, root)))
        legacy.unlink(missing_ok=True)
    if not journal.is_dir() or not trusted(journal) or not os.access(journal, os.W_OK):
        return done
    with _directory_lock(journal):
        return done + _recover_locked(journal, root)


def journal_path() -> Path:
    """The journal folder of this host, :data:`JOURNAL_DIR` (one per host, whatever
    ``$VHPC_CACHE`` is)."""
    return JOURNAL_DIR


__all__ = ["KNOBS", "JOURNAL_DIR", "KnobError", "HostKnobs", "Recovered", "parse_knob", "recover", "knob_of", "trusted",
           "journal_path", "restore_values"]
