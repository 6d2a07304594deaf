"""Processes and temporary folders that die with vhpc.

A ``kill -9`` of vhpc must leave nothing of its trial behind once the campaign resumes:

* :func:`die_with_parent` (a ``preexec_fn``) asks the kernel to SIGKILL a child when vhpc
  dies (``prctl(PR_SET_PDEATHSIG)``, prctl(2)); it reaches that child only, so
* :class:`GroupGuard` supervises a child's whole process group (perf, numactl, a shell and
  the benchmark under it, MPI ranks): one tiny ``sh`` per vhpc process, in its own session,
  reads ``watch PGID`` / ``done PGID`` lines from a pipe whose write end only vhpc holds; when
  vhpc dies the pipe closes and the guard kills every group still watched.  Watching a group
  costs one pipe write, not a process per trial.  The same guard thaws the cgroups it holds
  for :class:`ThawGuard` and kills every process of those it holds for :class:`KillGuard` (a
  build's: :mod:`vhpc.host.contained`).
* :func:`owned_tempdir` makes temporary folders whose names carry the owner's pid and start
  time (``<prefix><pid>-<start ticks>-XXXX``); :func:`reap` removes those whose owner is
  gone, first killing any of the user's processes whose command line names them (a QEMU or
  an ssh ControlMaster started with that folder).  Every owned folder is reaped when another
  one with its prefix is made, and at the start of a campaign (:func:`reap_all`).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

#: prctl(2) option: signal delivered to the calling process when its parent dies.
PR_SET_PDEATHSIG = 1
#: Prefixes of vhpc's owned temporary folders and files under the temporary directory.
PREFIXES = ("vhpc-guest-", "vhpc-run-", "vhpc-ssh-", "vhpc-perf-", "vhpc-app-")
#: Prefix of an application rank's working folder (``rankrun.py``, which cannot import vhpc,
#: names it the same way: ``vhpc-app-<pid>-<start ticks>-r<rank>-XXXX``).
APP_PREFIX = "vhpc-app-"

#: ``<pid>-<start ticks>-`` after the prefix; ticks ``None`` when /proc could not be read
_TAG = re.compile(r"^(\d+)-(\d+|None)-")


def die_with_parent() -> None:
    """``preexec_fn``: SIGKILL this child when the thread that started it (vhpc) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start_ticks(pid: int) -> str | None:
    """Start time of process ``pid`` in clock ticks (proc(5) stat field 22); None when gone
    (exited: a zombie not yet collected by its parent counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else fields[19]
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
    ticks = start_ticks(int(m.group(1)))
    if m.group(2) == "None":  # start time unknown at creation: alive while the pid is
        return ticks is not None
    return ticks == m.group(2)


def owned_tempdir(prefix: str, base: str | Path | None = None) -> Path:
    """A new private (0700) temporary folder named ``<prefix><pid>-<ticks>-XXXX`` under
    ``base`` (default: the temporary directory), after reaping dead owners' folders of the
    same prefix."""
    reap(prefix, base)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=base))


#: Bytes of ``sun_path`` in ``struct sockaddr_un``, its terminating NUL included (unix(7)):
#: a socket's path is at most 107 bytes, or bind(2) and connect(2) refuse it.
SUN_PATH = 108
#: Short folders for sockets when the temporary directory's path is too long for them.
SHORT_BASES = ("/tmp", "/var/tmp", "/dev/shm")
#: Characters of the random part :func:`tempfile.mkdtemp` adds to a name.
_RANDOM = 8


def socket_base(prefix: str, leaf: int) -> Path:
    """Where :func:`owned_socketdir` makes its folder: the temporary directory when
    ``<base>/<prefix><tag>-XXXXXXXX/<leaf bytes>`` fits ``sun_path`` (:data:`SUN_PATH`), else
    the first folder of :data:`SHORT_BASES` that is writable and where it fits.  Raises
    HostError (one line) when none does."""
    from vhpc.core.errors import HostError

    name = len(prefix) + len(owner_tag()) + 1 + _RANDOM
    bases = (tempfile.gettempdir(), *SHORT_BASES)
    for base in bases:
        path = len(os.fsencode(os.path.abspath(base))) + 1 + name + 1 + leaf
        if path < SUN_PATH and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            return Path(base)
    raise HostError(f"no folder for vhpc's sockets: $TMPDIR ({tempfile.gettempdir()}) is too "
                    f"long for a socket path ({SUN_PATH - 1} bytes at most) and none of "
                    f"{', '.join(SHORT_BASES)} is writable: set TMPDIR to a shorter folder")


def owned_socketdir(prefix: str, leaf: int) -> Path:
    """A new private (0700) :func:`owned_tempdir` for UNIX sockets whose names are up to
    ``leaf`` bytes, under :func:`socket_base`: a QEMU monitor or agent socket, a vcluster's
    links, an ssh ControlPath still work when $TMPDIR is too long to hold them (QEMU refused
    such a path, "Path must be less than 108 bytes").  Raises HostError when no folder fits."""
    return owned_tempdir(prefix, socket_base(prefix, leaf))


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
    temporary directory) whose owner is dead, killing processes that still name them (a QEMU
    using a vcluster's sockets or shared-memory file, an ssh ControlMaster...).  The one
    orphan reaper of vhpc: every owned folder or file is named by :func:`owner_tag`.
    Returns one line per thing removed or killed, each saying ``orphaned``; never raises."""
    base = Path(base or tempfile.gettempdir())
    done: list[str] = []
    try:  # names compared as strings: a glob pattern costs a regular expression's compile
        entries = sorted(base / n for n in os.listdir(base) if n.startswith(prefix))
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
                done.append(f"killed orphaned process {pid} using {p} (its vhpc is gone)")
            except OSError:
                pass
        if remove_path(p):
            done.append(f"removed orphaned {p} (its vhpc is gone)")
    return done


def remove_path(path: Path) -> bool:
    """Remove the folder tree or the file ``path`` (a link itself, never what it points at);
    True when nothing is left there.  Never raises."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass
    return not os.path.lexists(path)


#: Widest PID range :func:`session_members` reads PID by PID instead of listing ``/proc``.
PID_RANGE_MAX = 512


def session_members(sid: int, above: int = 0, upto: int | None = None) -> list[int]:
    """PIDs of the live (not zombie) processes of session ``sid`` (proc(5) ``stat``: field 6 is
    the session id), this process never among them; only PIDs above ``above`` are read, and
    with ``upto`` only those up to it.  Runs after every trial: each ``stat`` read as bytes
    with one ``read`` (a third of the time pathlib's text reads took); a range of at most
    :data:`PID_RANGE_MAX` PIDs is read PID by PID, without listing every process of the
    host (a missing PID costs one failed open)."""
    out = []
    want, me = str(sid).encode(), os.getpid()
    if upto is not None and 0 <= upto - above <= PID_RANGE_MAX:
        names = [str(pid) for pid in range(above + 1, upto + 1)]
    else:
        names = [n for n in os.listdir("/proc") if n.isdigit() and int(n) > above]
    for name in names:
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:
            continue
        fields = data.rpartition(b")")[2].split()
        if len(fields) > 3 and fields[3] == want and fields[0] != b"Z" and int(name) != me:
            out.append(int(name))
    return out


def _last_pid() -> int | None:
    """The PID this PID namespace allocated last (proc(5) ``/proc/sys/kernel/ns_last_pid``);
    None where it cannot be read."""
    try:  # one open and read, no buffered file object: it runs after every trial
        fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_RDONLY | os.O_CLOEXEC)
        try:
            return int(os.read(fd, 64))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None


def kill_session(sid: int, rounds: int = 50, young: bool = False) -> int:
    """SIGKILL every process of session ``sid`` (a trial started with ``start_new_session``:
    its leader's pid) until none is left (a process forking while it dies is caught by the
    next round; at most ``rounds`` rounds 10 ms apart).  Every process group in it dies, not
    only the leader's: Open MPI's mpirun puts each rank in a group of its own, so killing
    mpirun's group left the ranks running, reparented to init.  Returns how many processes
    were signalled.

    ``young``: the session began under a second ago.  Its processes, the leader and those
    forked after it, then have PIDs from ``sid`` up unless the PID counter wrapped past
    ``pid_max`` since (``ns_last_pid`` below ``sid`` shows it; no second wrap fits in a
    second), so only those are read: the sweep after a short trial reads a few ``stat`` files,
    not one per process of the host, and lists no folder when they are few."""
    import time

    last = _last_pid() if young else None
    above = sid - 1 if last is not None and last >= sid else 0
    killed = 0
    for n in range(rounds):
        # the first round reads the PIDs allocated up to now; a later one reads them all,
        # as a process signalled in the first may have forked since
        pids = session_members(sid, above, last if n == 0 and above else None)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.01)
    return killed


#: The longest wait poll(2) takes in one call (its timeout is a C int of milliseconds).
POLL_MAX_MS = 2**31 - 1


class TrialProcess(subprocess.Popen):
    """:class:`subprocess.Popen` whose ``wait(timeout)`` sleeps until the child exits.

    CPython's ``wait`` with a timeout (and so ``communicate(timeout=...)``, which waits after
    the output pipes close) polls ``waitpid(WNOHANG)`` between sleeps of 1, 2, 4 … 50 ms: a
    child that closes its pipes a moment before it can be reaped costs the caller a whole
    millisecond or more, on most short trials.  Here the wait blocks in poll(2) on a pidfd
    (pidfd_open(2), Linux 5.3), which becomes readable the moment the child exits; where no
    pidfd can be opened the stdlib's loop runs as before.  Raises
    :class:`subprocess.TimeoutExpired` as ``Popen.wait`` does."""

    def wait(self, timeout: float | None = None) -> int:
        """The child's exit status once it exits, waiting at most ``timeout`` seconds (None: as
        long as it takes).  Raises subprocess.TimeoutExpired when it is still running after
        ``timeout`` seconds."""
        if timeout is not None and self.returncode is None:
            try:
                fd = os.pidfd_open(self.pid)
            except (OSError, AttributeError):  # old kernel or Python: the stdlib's loop
                return super().wait(timeout)
            try:
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                if not poller.poll(min(max(0, int(timeout * 1000 + 0.999)), POLL_MAX_MS)):
                    raise subprocess.TimeoutExpired(self.args, timeout)
            finally:
                os.close(fd)
        return super().wait(timeout)  # exited: its first waitpid(WNOHANG) reaps it


def pipe_holders(*files) -> list[int]:
    """PIDs of this user's processes, this one excepted, that hold an end of the pipes
    ``files`` (open file objects; closed ones and None are skipped), from ``/proc/PID/fd``
    (proc(5): a pipe reads ``pipe:[INODE]``).  A trial's output pipes held by a process that
    left its session (``setsid``) keep a reader of them waiting after the trial was killed."""
    names = {f"pipe:[{os.fstat(f.fileno()).st_ino}]" for f in files
             if f is not None and not f.closed}
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if int(d.name) == os.getpid() or d.stat().st_uid != os.getuid():
                continue
            if any(os.readlink(fd) in names for fd in (d / "fd").iterdir()):
                out.append(int(d.name))
        except (OSError, ValueError):
            continue
    return out


def kill_pipe_holders(*files) -> int:
    """SIGKILL :func:`pipe_holders` of ``files``; returns how many were signalled."""
    killed = 0
    for pid in pipe_holders(*files):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
    return killed


def reap_all(base: str | Path | None = None) -> list[str]:
    """:func:`reap` every prefix in :data:`PREFIXES` under ``base`` (default: the temporary
    directory and the short folders :func:`owned_socketdir` may have used)."""
    bases = [base] if base is not None else list(dict.fromkeys(
        os.path.realpath(b) for b in (tempfile.gettempdir(), *SHORT_BASES) if os.path.isdir(b)))
    return [line for b in bases for prefix in PREFIXES for line in reap(prefix, b)]


class _Warden:
    """The one guard ``sh`` of this process (see :class:`GroupGuard`); started on first use,
    restarted when it has died, forgotten in a forked child (the child must not hold the pipe)."""

    #: watched groups are a space-separated list; at end of file (vhpc gone) each is killed.
    #: dash's kill takes no ``--``: ``-9 -PGID`` is the portable spelling (kill(1p)); pkill
    #: ``-s`` reaches groups a trial made inside its session (coreutils timeout makes one)
    #: frozen cgroups (``freezer DIR`` / ``thawed DIR``) are thawed first, so that a daemon
    #: a trial left in one (outside its session, so not killed) runs on; every process of a
    #: build's cgroup (``cgroup DIR`` / ``uncgroup DIR``) is killed (``cgroup.kill``)
    SCRIPT = ('g=" "; z=" "; k=" "; while read c p; do case $c in '
              'watch) g="$g$p ";; '
              'done) n=" "; for x in $g; do [ "$x" = "$p" ] || n="$n$x "; done; g=$n;; '
              'freezer) z="$z$p ";; '
              'thawed) n=" "; for x in $z; do [ "$x" = "$p" ] || n="$n$x "; done; z=$n;; '
              'cgroup) k="$k$p ";; '
              'uncgroup) n=" "; for x in $k; do [ "$x" = "$p" ] || n="$n$x "; done; k=$n;; '
              'esac; done; '
              'for d in $z; do echo 0 > "$d/cgroup.freeze"; done 2>/dev/null; '
              'for d in $k; do echo 1 > "$d/cgroup.kill"; done 2>/dev/null; '
              'for p in $g; do kill -9 -"$p"; pkill -9 -s "$p"; done 2>/dev/null')

    lock = threading.Lock()
    current: "_Warden | None" = None

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["/bin/sh", "-c", self.SCRIPT, "vhpc-guard"], bufsize=0,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    @classmethod
    def send(cls, line: str) -> None:
        """Write one line to the live guard (starting one if needed).  Raises OSError when no
        guard can be started."""
        data = (line + "\n").encode()
        with cls.lock:
            for attempt in (0, 1):
                w = cls.current
                if w is None or w.proc.poll() is not None:
                    if w is not None:
                        w.close()
                    w = cls.current = cls()
                try:
                    os.write(w.proc.stdin.fileno(), data)  # type: ignore[union-attr]
                    return
                except BrokenPipeError:
                    if attempt:
                        raise
                    w.proc.wait()  # it died between poll and write: start another

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    @classmethod
    def shutdown(cls) -> None:
        """At a normal exit: end of file to the guard (nothing is watched then) and reap it."""
        with cls.lock:
            if cls.current is not None:
                cls.current.close()
                cls.current = None

    @classmethod
    def forget_in_child(cls) -> None:
        """After ``os.fork``: close the inherited write end, so only vhpc's end keeps the guard
        waiting, and start afresh if the child runs trials itself."""
        cls.lock = threading.Lock()
        w, cls.current = cls.current, None
        if w is not None:
            try:
                w.proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
            w.proc.returncode = 0  # not this process's child: never wait for it here


atexit.register(_Warden.shutdown)
os.register_at_fork(after_in_child=_Warden.forget_in_child)


class GroupGuard:
    """Kills process group ``pgid`` and every process of the session it leads if vhpc dies
    before :meth:`done` (see the module doc; the child is started with ``start_new_session``).

    Every group of this process is watched by one shared guard: ``sh`` in a session of its
    own, reading a pipe that only this process can write (the pipe is close-on-exec and
    children are started with ``close_fds``).  Creating a GroupGuard writes ``watch PGID``;
    once that write returns the guard is bound to kill the group (the line waits in the pipe
    even if vhpc dies before the guard reads it).  End of file with the group still watched
    means vhpc is gone, and the guard sends SIGKILL to the group and its session.  Raises
    OSError when the guard cannot be started."""

    def __init__(self, pgid: int):
        self.pgid = pgid
        self._open = True
        _Warden.send(f"watch {pgid}")

    def done(self) -> None:
        """The group's trial ended here: stop watching it (idempotent; never raises)."""
        if self._open:
            self._open = False
            try:
                _Warden.send(f"done {self.pgid}")
            except OSError:
                pass


class _CgroupGuard:
    """A cgroup-v2 folder the shared guard of :class:`GroupGuard` holds until :meth:`done`,
    announced with the word ``ADD`` and let go with ``REMOVE``.  Raises OSError when the guard
    cannot be started, ValueError for a folder name with white space (the guard reads
    words)."""

    ADD = REMOVE = ""

    def __init__(self, folder: str | os.PathLike):
        self.folder = str(folder)
        if not self.folder or any(ch.isspace() for ch in self.folder):
            raise ValueError(f"cannot guard the cgroup {self.folder!r}: white space in its name")
        self._open = True
        _Warden.send(f"{self.ADD} {self.folder}")

    def done(self) -> None:
        """The group is done with here: stop guarding it (idempotent; never raises)."""
        if self._open:
            self._open = False
            try:
                _Warden.send(f"{self.REMOVE} {self.folder}")
            except OSError:
                pass


class ThawGuard(_CgroupGuard):
    """Thaws the cgroup-v2 group ``folder`` (writes 0 to its ``cgroup.freeze``) if vhpc dies
    before :meth:`done`: the shared guard of :class:`GroupGuard` holds the folder and, at end
    of file on its pipe, thaws it before it kills any watched group.  A later vhpc removes the
    group (:func:`vhpc.host.freezer.sweep_stale`).  Raises as :class:`_CgroupGuard`."""

    ADD, REMOVE = "freezer", "thawed"


class KillGuard(_CgroupGuard):
    """Kills every process of the cgroup-v2 group ``folder`` (writes 1 to its ``cgroup.kill``,
    Linux 5.14) if vhpc dies before :meth:`done`: the shared guard of :class:`GroupGuard` holds
    the folder.  A later vhpc removes the group (:func:`vhpc.host.contained.sweep_stale`).
    Raises as :class:`_CgroupGuard`."""

    ADD, REMOVE = "cgroup", "uncgroup"
