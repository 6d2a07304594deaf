"""The store file itself: its one connection per process (:class:`Connection`), the check that
a file is a vhpc store before it is first opened, the validating layer its typed columns are
read through (:func:`column`), and what can be wrong with it, said in one line: the
:class:`StoreError` family that :mod:`vhpc.store` raises and the one-line reasons for SQLite
and file-system failures.

SQLite's result codes: https://www.sqlite.org/rescode.html; its file header:
https://www.sqlite.org/fileformat.html (the 16-byte magic string, byte 18: 2 in WAL mode).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import sqlite3
import weakref
from pathlib import Path
from typing import Any

from vhpc.core.errors import VhpcError


class StoreError(VhpcError):
    """The store cannot be used: unknown campaign id, newer schema, a damaged, unreadable,
    read-only or full database, or a campaign another live process is running.  One line
    naming the file and what to do.  ``kind``: ``corrupt``, ``full``, ``readonly``,
    ``cantopen``, ``io``, ``busy``, ``owned`` or ``other``."""

    def __init__(self, message: str, kind: str = "other"):
        super().__init__(message)
        self.kind = kind


def describe_sqlite_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """A one-line StoreError for an SQLite failure on the database ``path``, chosen by the
    extended result code name (https://www.sqlite.org/rescode.html), e.g. SQLITE_CORRUPT for
    "database disk image is malformed" or SQLITE_FULL for "database or disk is full"."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    folder = path.parent
    if name.startswith("SQLITE_NOTADB") or "not a database" in text:
        return StoreError(f"{path} is not a vhpc database, or its first page is damaged ({text}): "
                          "move it aside or pick another --out", "corrupt")
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        return StoreError(
            f"{path} is damaged ({text}): move it aside and use a new --out (rows that survive "
            f"can be salvaged with: sqlite3 {path} .recover | sqlite3 recovered.db)", "corrupt")
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        return StoreError(f"the disk holding {path} is full ({text}): free space there "
                          f"(df -h {folder})", "full")
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")) \
            or "readonly" in text:
        verb = "write" if "readonly" in text or "READONLY" in name else "open"
        return StoreError(f"cannot {verb} {path} ({_access_problem(path)}; {text}): make "
                          f"{folder} and the file writable (remount rw, chattr -i, chmod u+rwx "
                          "the folder and u+rw the file) or pick another --out",
                          "readonly" if verb == "write" else "cantopen")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreError(f"{path} stayed locked by another process for 30 s ({text}): retry "
                          "when it is done", "busy")
    if name.startswith("SQLITE_IOERR"):
        return StoreError(f"I/O error on {path} ({text}): check the disk holding {folder} "
                          f"(full? read-only? dmesg)", "io")
    return StoreError(f"{path}: {text}")


def damaged(path: Path, table: str, row: Any, what: str) -> StoreError:
    """The one-line error for a store whose content is not what vhpc wrote (a row edited by
    hand, a foreign database): ``damaged store: <path>: TABLE ROW …``."""
    row = " ".join(str(row).split())[:60]  # a row named by text read from the store
    return StoreError(f"damaged store: {path}: {table} {row} {what}: restore it from a copy "
                      "or pick another --out", "corrupt")


#: Column kinds of :func:`column`: what SQLite must hand back for a vhpc-written value.
INT, REAL, TEXT, FLAG, VERSION, ID = "integer", "number", "text", "flag", "version", "id"

#: A campaign id as vhpc makes them (``YYYYmmdd-HHMMSS-xxxx``) or a user may have chosen in
#: older versions: letters, digits, ``_ . -``, starting with a letter or digit, so it is one
#: plain folder name under ``--out`` (never ``..``, ``/abs`` or a hidden file).
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def valid_id(cid: Any) -> bool:
    """True when ``cid`` follows the campaign id grammar (:data:`ID_RE`)."""
    return isinstance(cid, str) and ID_RE.fullmatch(cid) is not None


def column(path: Path, table: str, row: Any, name: str, value: Any, kind: str,
           null: bool = False) -> Any:
    """``value`` of column ``name`` of ``row`` in ``table`` checked to be of ``kind``
    (:data:`INT`, :data:`REAL`: a finite int or float, returned as float, :data:`TEXT`,
    :data:`FLAG`: 0 or 1, returned as bool, :data:`VERSION`: a whole number >= 0 stored as
    text or integer, returned as int, :data:`ID`: a campaign id, :func:`valid_id`); None passes
    only with ``null``.  The one place a store's typed values are read: a value of another type
    (a row edited by hand, another program's database) raises StoreError (:func:`damaged`),
    one line."""
    if value is None:
        if null:
            return None
        raise damaged(path, table, row, f"{name} is empty")
    ok = not isinstance(value, bool) and (
        (kind == INT and isinstance(value, int))
        or (kind == REAL and isinstance(value, (int, float)) and math.isfinite(value))
        or (kind == TEXT and isinstance(value, str))
        or (kind == FLAG and value in (0, 1) and isinstance(value, int))
        or (kind == VERSION and (isinstance(value, int) and value >= 0
                                 or isinstance(value, str) and value.isascii()
                                 and value.isdigit() and len(value) < 10))
        or (kind == ID and valid_id(value)))
    if not ok:
        shown = value[:40] if isinstance(value, str) else value
        want = {ID: "a campaign id (letters, digits, _ . -)"}.get(kind, f"a {kind}")
        raise damaged(path, table, row, f"{name} {shown!r} is not {want}")
    if kind == REAL:
        return float(value)
    if kind == FLAG:
        return bool(value)
    if kind == VERSION:
        return int(value)
    return value


def columns(path: Path, table: str, row: Any, values: Any, kinds: dict[str, tuple[str, bool]]
            ) -> dict[str, Any]:
    """The columns of ``kinds`` (name -> (kind, nullable)) of the mapping ``values`` (an
    ``sqlite3.Row``), each read through :func:`column`."""
    return {name: column(path, table, row, name, values[name], kind, null)
            for name, (kind, null) in kinds.items()}


def json_column(path: Path, table: str, row: Any, column: str, text: Any, kind: type = dict) -> Any:
    """``text`` decoded as JSON of type ``kind``; raises StoreError (:func:`damaged`) otherwise."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise damaged(path, table, row, f"{column} is not JSON ({str(text)[:40]!r})") from None
    if not isinstance(value, kind):
        raise damaged(path, table, row, f"{column} is not a JSON {kind.__name__}")
    return value


def _access_problem(path: Path) -> str:
    """Why ``path`` (a database) may not open for writing: read-only filesystem, folder or file
    permissions, or an immutable/unknown cause."""
    folder = path.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"{folder} is on a read-only filesystem"
    except OSError:
        return f"{folder} is not accessible"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by you"
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return "the file is not readable and writable by you"
    return "the folder or file refuses writes (immutable? chattr -i)"


#: errno values that mean "this path cannot be written" rather than a bug.
USER_OS_ERRORS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT,
                            errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ENAMETOOLONG})


def describe_os_error(exc: OSError) -> str | None:
    """One line for a results file that cannot be written (full disk, read-only or
    permission), or None when ``exc`` is not such an error (then it is a bug)."""
    if exc.errno not in USER_OS_ERRORS:
        return None
    where = exc.filename or "a results file"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk holding {where} is full ({exc.strerror}): free space there"
    return f"cannot write {where} ({exc.strerror}): make it writable or pick another --out"


class Connection(sqlite3.Connection):
    """The one SQLite connection of this process to one store file (keyed by device and inode):
    every :class:`vhpc.store.Store` opened on the file shares it; it closes when the last of them is
    closed, or when nothing refers to it any more.  SQLite's POSIX advisory locks belong to the
    process, so closing any other descriptor of the file (a second connection, a header read)
    drops the locks of the first; a reader elsewhere (the ``sqlite3`` shell) may then take the
    file for itself and, closing, delete the ``-wal`` and ``-shm`` under the running campaign,
    whose later commits go to an unlinked WAL ("How To Corrupt An SQLite Database File",
    §2.2, https://www.sqlite.org/howtocorrupt.html)."""

    _open: "weakref.WeakValueDictionary[tuple[int, int], Connection]" = \
        weakref.WeakValueDictionary()

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.stores: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.closed = False

    @staticmethod
    def _key(path: Path) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @classmethod
    def find(cls, path: Path) -> "Connection | None":
        """The open connection of the file at ``path`` in this process, None when none."""
        key = cls._key(path)
        db = cls._open.get(key) if key is not None else None
        return db if db is not None and not db.closed else None

    @classmethod
    def connect(cls, path: Path) -> "Connection":
        """A new connection to ``path`` (created if missing), recorded as the file's; SQLite waits
        up to 30 seconds for another writer's lock.  Raises StoreError when the file vanishes while
        it is opened."""
        db = sqlite3.connect(path, isolation_level=None, timeout=30, factory=cls)
        assert isinstance(db, cls)
        key = cls._key(path)  # sqlite3.connect has opened (created) the file
        if key is None:
            db.close()
            raise StoreError(f"{path} vanished while it was being opened: retry", "cantopen")
        cls._open[key] = db
        return db

    def use(self, store: Any) -> "Connection":
        """Count ``store`` as a user of this connection; returns the connection."""
        self.stores.add(store)
        return self

    def release(self, store: Any) -> None:
        """``store`` is closed: close the connection when no other Store uses it."""
        self.stores.discard(store)
        if not self.stores and not self.closed:
            self.closed = True
            self.close()


#: The first bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"


def check_is_store(path: Path) -> None:
    """Raise StoreError unless ``path`` is a vhpc store (a ``meta`` schema version, or an
    older vhpc's campaigns, trials and samples tables), an empty file or an SQLite database
    without tables (one another vhpc is creating this instant).  Reads only: the file is
    opened read-only, so a foreign database is refused untouched."""
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a vhpc store: give the results folder "
                         "(--out) or its vhpc.db", "cantopen")
    from vhpc.core.paths import NotRegularFile, read_regular

    try:
        head = read_regular(path, 100)[:100]  # the database header (byte 18: 2 in WAL mode)
    except NotRegularFile as exc:  # a FIFO blocked open() for ever, a device would be read
        raise StoreError(f"{path} {exc.strerror} (a vhpc store is one), left untouched: move "
                         "it aside or pick another --out", "corrupt") from None
    except OSError as exc:
        raise StoreError(f"cannot open {path} ({_access_problem(path)}; {exc.strerror or exc}"
                         f"): make {path.parent} and the file readable and writable (chmod u+rwx "
                         "the folder and u+rw the file) or pick another --out",
                         "cantopen") from None
    if not head:
        return
    if head[:len(SQLITE_MAGIC)] != SQLITE_MAGIC:
        raise StoreError(f"{path} is not a vhpc store (not a database: no SQLite header), "
                         "left untouched: move it aside or pick another --out", "corrupt")
    # read-only with SQLite's locks (not immutable=1: a vhpc creating or checkpointing the
    # store this instant would be read torn and called damaged) -- except a WAL-mode file
    # without its -wal: no one writes it (a writer holds the -wal), and opening it read-only
    # with locks would create -wal and -shm beside a file that may not be ours
    wal_mode = len(head) > 18 and head[18] == 2
    mode = "ro&immutable=1" if wal_mode and not path.with_name(path.name + "-wal").exists() \
        else "ro"
    from urllib.parse import quote

    try:
        db = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode={mode}", uri=True,
                             timeout=30)
        try:
            tables = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            version = (db.execute("SELECT value FROM meta WHERE key='schema_version'")
                       .fetchone() if "meta" in tables else None)
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise describe_sqlite_error(path, exc) from None
    # a store from an older vhpc (before the meta table) has campaigns, trials and samples
    if tables and version is None and not {"campaigns", "trials", "samples"} <= tables:
        shown = ", ".join(sorted(tables)[:4]) + (", ..." if len(tables) > 4 else "")
        raise StoreError(f"{path} is an SQLite database but not a vhpc store (tables: "
                         f"{shown}): it is left untouched; give a vhpc results folder (--out) "
                         "or its vhpc.db", "corrupt")
