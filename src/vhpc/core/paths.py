"""Where vhpc keeps derived artefacts on this machine (guest images, probes, journals), and
how results are created: private (files 0600, folders 0700) unless shared
(:func:`private_results`, ``vhpc --share`` / ``$VHPC_SHARE_RESULTS=1``)."""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

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


def write_atomic(path: str | os.PathLike, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` atomically: a new temporary file in the same folder,
    created with O_CREAT|O_EXCL|O_NOFOLLOW (0600 unless results are shared, see
    :func:`sharing`), written, fsync'ed, then renamed onto ``path`` with ``os.replace``.  A
    symbolic link at ``path`` is replaced, never followed; a failed write (full disk) removes
    the temporary file and leaves the old file, or none.  Returns ``path``."""
    path = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else bytes(data)
    folder = path.parent
    mode = 0o666 if sharing() else 0o600
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = folder / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 random names taken
        raise FileExistsError(f"cannot create a temporary file beside {path}")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # the one-line error names the file, not the temp
        raise
    try:  # the rename itself survives a crash once the folder is synced; best effort
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def read_small_text(path: str | os.PathLike, limit: int, what: str, advice: str,
                    regular_only: bool = True) -> str:
    """The UTF-8 text of a small user file (a campaign file, a tolerance file, a domain XML)
    of at most ``limit`` bytes.  ``regular_only``: a regular file, opened without blocking (a
    FIFO or ``/dev/zero`` is never read); else a pipe (``vhpc run <(...)``) is read too, never
    past ``limit`` + 1 bytes.  Raises ValueError, one line starting with ``what`` (how the
    user named the file) and ending with ``advice``, when it cannot be opened, is not a
    regular file, is larger than ``limit`` or is not UTF-8."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | (os.O_NONBLOCK if regular_only else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ValueError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        regular = stat.S_ISREG(mode) or (not regular_only and not stat.S_ISDIR(mode))
        data = b""
        while regular and len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if not regular:
        raise ValueError(f"{what}: not a regular file: {advice}")
    if len(data) > limit:
        raise ValueError(f"{what}: larger than {limit // 1024} KiB: {advice}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what}: not UTF-8 text (byte {exc.start}): {advice}") from None
