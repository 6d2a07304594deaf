"""Where vhpc keeps derived artefacts on this machine (guest images, probes, journals), and
how results are created: private (files 0600, folders 0700) unless shared
(:func:`private_results`, ``vhpc --share`` / ``$VHPC_SHARE_RESULTS=1``)."""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

from vhpc.core.errors import VhpcError


class UntrustedError(VhpcError):
    """A folder or file vhpc would run or believe (a cache, a kernel folder, a lock) belongs to
    another user, may be written by others or is a symbolic link planted in its place."""


def untrusted(path: Path, follow: bool = False) -> str | None:
    """Why ``path`` cannot be trusted (``it belongs to uid 1000``), None when it can: it must
    belong to root or to this user and be writable by no one else (the rule of kernel folders
    and the host-knob journal), and be no symbolic link unless ``follow`` (a folder the user
    named, such as ``$VHPC_CACHE``: then its target is judged).  A path that does not exist yet is judged by the nearest
    existing folder above it, where a sticky folder (``/tmp``) is fine: what vhpc creates there
    is its own.  Root runs what such a folder holds, so another user must not be able to plant
    or replace anything in it."""
    here = path
    while True:
        try:
            st = os.stat(here) if (follow or here != path) else os.lstat(here)
            break
        except FileNotFoundError:
            if here.parent == here:
                return None
            here = here.parent
        except OSError as exc:
            return f"{here} cannot be examined ({exc.strerror})"
    it = "it" if here == path else f"the folder above it, {here},"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if here != path and st.st_mode & stat.S_ISVTX:
        return None
    if st.st_uid not in (0, os.geteuid()):
        return f"{it} belongs to uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"{it} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def check_trusted(path: Path, what: str, follow: bool = False) -> Path:
    """``path`` when :func:`untrusted` finds nothing wrong; else raises UntrustedError (one
    line: ``what`` holds, the reason and the fix).  ``follow``: see :func:`untrusted`."""
    why = untrusted(path, follow)
    if why:
        raise UntrustedError(f"{what} {path}: {why}; vhpc would run or believe what someone "
                             "else can plant there: use a folder of your own (chown, chmod "
                             "go-w, or remove it and let vhpc make it again)")
    return path


def cache_dir() -> Path:
    """Directory for vhpc's derived artefacts: ``$VHPC_CACHE`` or ``~/.cache/vhpc``, created
    private (0700) when missing and trusted (:func:`check_trusted`: this user's or root's,
    writable by no one else) before and after.  Raises UntrustedError for a cache another user
    could write, OSError when it cannot be created."""
    path = Path(os.environ.get("VHPC_CACHE") or Path.home() / ".cache" / "vhpc")
    check_trusted(path, "the cache folder ($VHPC_CACHE)", follow=True)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return check_trusted(path, "the cache folder ($VHPC_CACHE)", follow=True)


def trusted_folder(path: Path, what: str) -> Path:
    """``path``, a folder inside a trusted one (:func:`cache_dir`), made private (0700) when
    missing and checked as :func:`check_trusted` (no symbolic link in its place).  Raises
    UntrustedError, or OSError when it cannot be made."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    check_trusted(path, what)
    if not path.is_dir():
        raise UntrustedError(f"{what} {path} is not a folder: remove it and let vhpc make it")
    return path


@contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (a lock file in a trusted cache folder) for the
    block, waiting while another vhpc holds it (building the same entry).  Created 0600 if
    missing, opened with O_NOFOLLOW and O_NONBLOCK and never truncated: a symbolic link, FIFO
    or another user's file planted at the name is refused (UntrustedError, one line), never
    followed or written."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                     0o600)
    except OSError as exc:
        raise UntrustedError(f"cannot open the lock {path} ({exc.strerror}; a symbolic link "
                             "there is never followed): remove it and retry") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid not in (0, os.geteuid()):
            raise UntrustedError(f"the lock {path} is not a regular file of yours: remove it "
                                 "and retry")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


#: Environment variable that, set to 1, keeps results readable by others (the process umask
#: applies as is); ``vhpc --share`` sets the same for one command.
SHARE_ENV = "VHPC_SHARE_RESULTS"
#: umask bits vhpc adds while it runs unless results are shared: files 0600, folders 0700.
PRIVATE_UMASK = 0o077


_shared = False  # inside private_results(share=True)


def sharing() -> bool:
    """True when results (store, raw outputs, reports) may be created readable by others:
    ``$VHPC_SHARE_RESULTS=1``, or inside ``private_results(share=True)`` (``vhpc --share``)."""
    return _shared or os.environ.get(SHARE_ENV) == "1"


@contextmanager
def private_results(share: bool | None = None) -> Iterator[None]:
    """Create files 0600 and folders 0700 inside this block (umask |= 077), unless ``share``
    (default :func:`sharing`): a store holds raw outputs, host facts and command lines, which
    are nobody else's business by default.  The previous umask is restored on exit."""
    global _shared
    if share if share is not None else sharing():
        before, _shared = _shared, True
        try:
            yield
        finally:
            _shared = before
        return
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def make_private(path: Path) -> None:
    """chmod a results file 0600 (a folder 0700) unless results are shared; best effort."""
    if sharing():
        return
    try:
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    except OSError:
        pass


class OutputPathError(VhpcError, OSError):
    """An output file vhpc must not or cannot write (a device, FIFO, socket, folder or
    symbolic link in its place; its folder missing; a full disk).  It is both a user error (one
    line, exit status 2) and an OSError whose ``filename`` is the target, never the temporary
    file."""

    def __init__(self, message: str, target: str | os.PathLike, err: int = 0):
        OSError.__init__(self, err, message, str(target))
        self.message = message

    def __str__(self) -> str:
        return self.message


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def check_output(path: str | os.PathLike, what: str = "") -> Path:
    """``path`` as a Path when vhpc may write a file there, creating nothing: it does not exist
    yet or is a regular file (which will be replaced), and its folder exists and is writable.
    A symbolic link (``/dev/stdout``), device (``/dev/null``), FIFO, socket or folder in its
    place is refused, never followed, written or replaced.  ``what`` (``--csv``) prefixes the
    message.  Raises OutputPathError (one line naming the target)."""
    p = Path(path)
    name = f"{what} {path}" if what else str(path)
    if p.name in ("", ".", ".."):
        raise OutputPathError(f"{name}: is a folder: give a file name", p, errno.EISDIR)
    try:
        st = os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):  # no such file, or a file in its folder's
        st = None  # place (/etc/passwd/x.json): the folder check below names it
    except OSError as exc:
        raise OutputPathError(f"{name}: cannot be examined ({exc.strerror}): give another path",
                              p, exc.errno or 0) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = kind_of(st.st_mode)
        raise OutputPathError(f"{name}: is {kind}; vhpc writes only regular files and never "
                              "replaces anything else: give another path", p, errno.EEXIST)
    parent = p.parent
    if not parent.is_dir():
        raise OutputPathError(f"{name}: folder {parent} does not exist: create it or give "
                              "another path", p, errno.ENOENT)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{name}: folder {parent} is not writable by you: give another "
                              "path", p, errno.EACCES)
    return p


def _umask() -> int:
    old = os.umask(0o077)
    os.umask(old)
    return old


@contextmanager
def output_path(path: str | os.PathLike, what: str = "") -> Iterator[Path]:
    """Write one output file through a private temporary path: yields the path of a new empty
    file with a random name beside ``path`` (``tempfile.mkstemp``: O_CREAT|O_EXCL|O_NOFOLLOW,
    0600, or the umask's mode when results are shared, :func:`sharing`) for the block, or a
    tool it runs (``qemu-img convert ... TMP``), to fill; when the block ends it is fsync'ed
    and renamed onto ``path``.  ``path`` is checked first (:func:`check_output`) and again
    just before the rename.  On any failure, interrupt included, the temporary file is removed
    and an existing target is left as it was.  Raises OutputPathError naming ``path`` (never
    the temporary name) for a refused target or an OSError while writing (full disk)."""
    target = check_output(path, what)
    name = f"{what} {path}" if what else str(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".tmp",
                                        dir=target.parent)
    except OSError as exc:
        raise OutputPathError(f"{name}: cannot create a file in {target.parent} "
                              f"({exc.strerror}): give another path", target,
                              exc.errno or 0) from None
    tmp = Path(tmp_name)
    try:
        try:
            if sharing():
                os.fchmod(fd, 0o666 & ~_umask())
        finally:
            os.close(fd)
        yield tmp
        with open(tmp, "rb+") as fh:  # what a tool wrote reaches the disk before the rename
            os.fsync(fh.fileno())
        check_output(target, what)  # still no link, device or folder planted meanwhile
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, OutputPathError):
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                msg = f"the disk holding {name} is full ({exc.strerror}): free space there"
            else:
                msg = f"cannot write {name} ({exc.strerror or exc}): give another path"
            raise OutputPathError(msg, target, exc.errno or 0) from None
        raise
    try:  # the rename itself survives a crash once the folder is synced; best effort
        dfd = os.open(target.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


@contextmanager
def output_file(path: str | os.PathLike, binary: bool = False, what: str = "",
                encoding: str = "utf-8") -> Iterator[IO[Any]]:
    """A file object for writing one output file safely (:func:`output_path`: a private
    temporary file renamed onto ``path`` when the block ends, removed on failure); ``-``
    yields standard output (never closed).  ``binary``: bytes, else text in ``encoding``.
    Raises OutputPathError naming ``path``."""
    if str(path) == "-":
        out = sys.stdout.buffer if binary else sys.stdout
        yield out
        out.flush()
        return
    with output_path(path, what) as tmp:
        with open(tmp, "wb" if binary else "w", encoding=None if binary else encoding,
                  newline=None if binary else "",
                  opener=lambda f, flags: os.open(f, flags | os.O_NOFOLLOW)) as fh:
            yield fh


def write_atomic(path: str | os.PathLike, data: str | bytes, encoding: str = "utf-8",
                 what: str = "") -> Path:
    """Write ``data`` (text in ``encoding``, or bytes) to ``path`` through :func:`output_file`,
    the one safe writer of vhpc's output files: an existing target that is not a regular file
    (symbolic link, device, FIFO, socket, folder) is refused and left untouched; a failed write
    (full disk) removes the temporary file and leaves the old file, or none.  ``-`` writes to
    standard output.  Returns ``path``.  Raises OutputPathError (one line naming ``path``)."""
    with output_file(path, binary=isinstance(data, (bytes, bytearray)), what=what,
                     encoding=encoding) as fh:
        fh.write(data)
    return Path(path)


def input_problem(src: str | os.PathLike) -> tuple[str, str] | None:
    """The first (path, what is wrong) in the input ``src`` (a file, or a folder walked at
    every depth, symbolic links followed as a trial's copy follows them), or None: every
    entry must be, or lead to, a regular file or a folder.  A device (``/dev/zero`` would be
    copied until the disk is full), FIFO or socket, a link that leads nowhere, and a folder
    that holds itself through a link (a copy that never ends) are problems.  The one check of
    inputs for every environment (native, guest, ssh) before anything is stored or copied."""
    def walk(path: str, top: bool, ancestors: frozenset) -> tuple[str, str] | None:
        try:
            st = os.stat(path)
        except OSError as exc:
            return path, ("does not exist" if top else
                          f"is a symbolic link that leads nowhere ({exc.strerror})")
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in ancestors:
                return path, "leads back to a folder that contains it (a loop of links)"
            try:
                entries = sorted(os.listdir(path))
            except OSError as exc:
                return path, f"cannot be read ({exc.strerror})"
            for entry in entries:
                found = walk(os.path.join(path, entry), False, ancestors | {key})
                if found:
                    return found
            return None
        if not stat.S_ISREG(st.st_mode):
            kind = kind_of(st.st_mode)
            via = " (through a symbolic link)" if os.path.islink(path) else ""
            return path, f"is {kind}{via}, not a regular file or folder"
        return None
    return walk(os.fspath(src), True, frozenset())


def read_cache_text(path: str | os.PathLike, limit: int) -> str | None:
    """The UTF-8 text of the cache file ``path`` (at most ``limit`` bytes) when vhpc may
    believe it, else None (the caller measures again): opened as :func:`cache_lock` opens a
    lock, with O_NOFOLLOW and O_NONBLOCK, it must be a regular file of this user that no one
    else can write (:func:`untrusted`'s rule), never a symbolic link (to another user's
    world-writable file), a FIFO or a device.  Never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & 0o022 or st.st_size > limit):
            return None
        data = os.read(fd, limit + 1)
        return data.decode("utf-8") if len(data) <= limit else None
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


#: Seconds a pipe or FIFO (``vhpc run <(...)``) may take to deliver a small input in full.
PIPE_WAIT_S = 30.0


class NotRegularFile(OSError):
    """An input that must be a regular file is something else (``kind``: "a FIFO", ...)."""

    def __init__(self, path: str | os.PathLike, kind: str):
        OSError.__init__(self, errno.EINVAL, f"is {kind}, not a regular file", str(path))
        self.kind = kind


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words ("a FIFO", "a folder", ...)."""
    return next((k for test, k in _KINDS if test(mode)), "not a regular file")


def read_regular(path: str | os.PathLike, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of the regular file ``path`` (more than ``limit``: the caller
    says it is too large), opened without blocking, so a FIFO, device or socket in its place is
    never waited on.  Raises NotRegularFile for one, and OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, kind_of(mode))
        return read_bounded(fd, limit, 0)
    finally:
        os.close(fd)


def read_bounded(fd: int, limit: int, wait_s: float) -> bytes:
    """At most ``limit`` + 1 bytes from the non-blocking ``fd``, until its end, waiting at most
    ``wait_s`` seconds in all for a pipe to deliver them.  Raises TimeoutError when it has not
    ended in that time."""
    import select
    import time

    deadline = time.monotonic() + wait_s
    data = b""
    while len(data) <= limit:
        try:
            chunk = os.read(fd, limit + 1 - len(data))
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"nothing more came in {wait_s:g} s") from None
            continue
        if not chunk:
            break
        data += chunk
    return data


def read_small_text(path: str | os.PathLike, limit: int, what: str, advice: str,
                    regular_only: bool = True) -> str:
    """The UTF-8 text of a small user file (a campaign file, a tolerance file, a domain XML)
    of at most ``limit`` bytes, opened without blocking.  ``regular_only``: a regular file (a
    FIFO or ``/dev/zero`` is never read); else a pipe or FIFO (``vhpc run <(...)``) is read
    too, never past ``limit`` + 1 bytes nor for more than :data:`PIPE_WAIT_S` seconds, and a
    FIFO no one writes to is refused at once.  Raises ValueError, one line starting with
    ``what`` (how the user named the file) and ending with ``advice``, when it cannot be
    opened, is not a regular file, is larger than ``limit``, a pipe is silent or it is not
    UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        pipe = not regular_only and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode))
        if not (stat.S_ISREG(mode) or pipe):
            raise ValueError(f"{what}: is {kind_of(mode)}, not a regular file: {advice}")
        try:
            data = read_bounded(fd, limit, PIPE_WAIT_S if pipe else 0)
        except TimeoutError:
            raise ValueError(f"{what}: the pipe delivered no end of file in {PIPE_WAIT_S:g} s: "
                             f"{advice}") from None
        except OSError as exc:
            raise ValueError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if pipe and not data and stat.S_ISFIFO(mode):
        raise ValueError(f"{what}: is a FIFO no one writes to (nothing to read): {advice}")
    if len(data) > limit:
        raise ValueError(f"{what}: larger than {limit // 1024} KiB: {advice}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what}: not UTF-8 text (byte {exc.start}): {advice}") from None
