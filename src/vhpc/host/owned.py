"""Processes and temporary folders that die with vhpc (issue 23).

A ``kill -9`` of vhpc must leave nothing of its trial behind once the campaign resumes:

* :func:`die_with_parent` (a ``preexec_fn``) asks the kernel to SIGKILL a child when vhpc
  dies (``prctl(PR_SET_PDEATHSIG)``, prctl(2)); it reaches that child only, so
* :class:`GroupGuard` supervises a child's whole process group (perf, numactl, a shell and
  the benchmark under it, MPI ranks): a tiny ``sh`` in its own session reads a pipe whose
  write end only vhpc holds; when vhpc dies the pipe closes and the guard kills the group.
  At a normal end vhpc tells the guard ``done`` and it exits without killing anything.
* :func:`owned_tempdir` makes temporary folders whose names carry the owner's pid and start
  time (``<prefix><pid>-<start ticks>-XXXX``); :func:`reap` removes those whose owner is
  gone, first killing any of the user's processes whose command line names them (a QEMU or
  an ssh ControlMaster started with that folder).  Every owned folder is reaped when another
  one with its prefix is made, and at the start of a campaign (:func:`reap_all`).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

#: prctl(2) option: signal delivered to the calling process when its parent dies.
PR_SET_PDEATHSIG = 1
#: Prefixes of vhpc's owned temporary folders and files under the temporary directory.
PREFIXES = ("vhpc-guest-", "vhpc-run-", "vhpc-ssh-", "vhpc-perf-")

_TAG = re.compile(r"^(\d+)-(\d+)-")


def die_with_parent() -> None:
    """``preexec_fn``: SIGKILL this child when the thread that started it (vhpc) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start_ticks(pid: int) -> str | None:
    """Start time of process ``pid`` in clock ticks (proc(5) stat field 22); None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_tag(pid: int | None = None) -> str:
    """``<pid>-<start ticks>`` of ``pid`` (default: this process): unique over pid reuse."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{start_ticks(pid)}"


def owner_alive(name: str, prefix: str) -> bool:
    """Whether the owner named in ``name`` (``<prefix><pid>-<ticks>-…``) still runs; a name
    without an owner tag is not ours to judge (True)."""
    m = _TAG.match(name[len(prefix):]) if name.startswith(prefix) else None
    if m is None:
        return True
    return start_ticks(int(m.group(1))) == m.group(2)


def owned_tempdir(prefix: str, base: str | Path | None = None) -> Path:
    """A new private (0700) temporary folder named ``<prefix><pid>-<ticks>-XXXX`` under
    ``base`` (default: the temporary directory), after reaping dead owners' folders of the
    same prefix."""
    reap(prefix, base)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=base))


def owned_tempfile(prefix: str, suffix: str = "") -> str:
    """A new private (0600) temporary file named like :func:`owned_tempdir`; returns its path."""
    fd, path = tempfile.mkstemp(prefix=f"{prefix}{owner_tag()}-", suffix=suffix)
    os.close(fd)
    return path


def _users_processes_naming(path: Path) -> list[int]:
    """PIDs of this user's processes whose command line mentions ``path``."""
    needle, uid, out = str(path).encode(), os.getuid(), []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if d.stat().st_uid != uid or int(d.name) == os.getpid():
                continue
            argv = (d / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if needle in argv:
            out.append(int(d.name))
    return out


def reap(prefix: str, base: str | Path | None = None) -> list[str]:
    """Remove this user's ``<prefix>*`` folders and files under ``base`` (default: the
    temporary directory) whose owner is dead, killing processes that still name them.
    Returns one line per thing removed or killed; never raises."""
    base = Path(base or tempfile.gettempdir())
    done: list[str] = []
    try:
        entries = sorted(base.glob(prefix + "*"))
    except OSError:
        return done
    for p in entries:
        try:
            if p.lstat().st_uid != os.getuid() or owner_alive(p.name, prefix):
                continue
        except OSError:
            continue
        for pid in _users_processes_naming(p):
            try:
                os.kill(pid, signal.SIGKILL)
                done.append(f"killed process {pid} left by a dead vhpc ({p})")
            except OSError:
                pass
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                p.unlink()
            except OSError:
                continue
        done.append(f"removed {p} (its vhpc is gone)")
    return done


def reap_all(base: str | Path | None = None) -> list[str]:
    """:func:`reap` every prefix in :data:`PREFIXES`."""
    return [line for prefix in PREFIXES for line in reap(prefix, base)]


class GroupGuard:
    """Kills process group ``pgid`` and every process of the session it leads if vhpc dies
    before :meth:`done` (see the module doc; the child is started with ``start_new_session``).

    The guard is ``sh`` in a session of its own, reading a pipe that only this process can
    write (children are started with ``close_fds``); end of file without ``done`` means vhpc
    is gone, and the guard sends SIGKILL to the group."""

    #: dash's kill takes no ``--``: ``-9 -PGID`` is the portable spelling (kill(1p)); pkill
    #: ``-s`` reaches groups the trial made inside its session (coreutils timeout makes one)
    SCRIPT = ('read x; [ "$x" = done ] || { kill -9 -"$1"; pkill -9 -s "$1"; } 2>/dev/null')

    def __init__(self, pgid: int):
        self.pgid = pgid
        self.proc = subprocess.Popen(["/bin/sh", "-c", self.SCRIPT, "vhpc-guard", str(pgid)],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def done(self) -> None:
        """The group's trial ended here: let the guard exit without killing."""
        try:
            self.proc.stdin.write(b"done\n")  # type: ignore[union-attr]
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        self.proc.wait()
