"""Ownership of a resource by one live process: a campaign, a host-knob journal.

The owner holds an exclusive ``flock(2)`` on a lock file for as long as it runs; the kernel
drops the lock when the process exits in any way (SIGKILL included), so "is the owner alive?"
is answered by trying the lock, not by guessing from a pid that may have been reused.  The
owner's pid, host and start time are written down beside it so that whoever finds the lock
taken can say who holds it.  Locks are advisory and per open file description (flock(2), Linux
man-pages), so two handles in one process exclude each other too.  Imports nothing of vhpc.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Owner:
    """A process that owns something: ``pid``, ``host`` (hostname) and ``since`` (Unix time,
    seconds, when it took ownership)."""

    pid: int
    host: str
    since: float

    @classmethod
    def me(cls) -> "Owner":
        """This process, now."""
        return cls(os.getpid(), socket.gethostname(), time.time())

    def describe(self) -> str:
        """``pid 123 on host since 2026-11-23 12:00:00 UTC``."""
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"pid {self.pid} on {self.host} since {when}"

    def to_dict(self) -> dict[str, Any]:
        """{"pid", "host", "since"} for a JSON record."""
        return {"pid": self.pid, "host": self.host, "since": self.since}

    @classmethod
    def from_dict(cls, record: Any) -> "Owner | None":
        """The owner recorded in ``record`` or None when ``record`` is not a well-formed record."""
        try:
            return cls(int(record["pid"]), str(record["host"]), float(record["since"]))
        except (TypeError, KeyError, ValueError):
            return None


class FileLock:
    """An exclusive, non-blocking flock on ``path`` (created if missing, mode 0644; opened with
    O_NOFOLLOW: a symbolic link planted at ``path`` is an OSError, never followed).

    :meth:`acquire` returns False when another open file description holds it.  Raises
    OSError when the file cannot be created or opened (read-only or missing directory).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; False if a live process holds it.  Retries when the file was
        unlinked by its previous owner between our open and our lock (then the lock we got
        is on a file nobody else will look at)."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return True
            os.close(fd)

    def release(self, unlink: bool = False) -> None:
        """Drop the lock (unlinking the file first when ``unlink``)."""
        if self.fd is None:
            return
        if unlink:
            self.path.unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None


def held(path: str | Path) -> bool:
    """True when some process (this one included, through another handle) holds the lock on
    ``path``; False when the file is missing or nobody holds it.  Opens read-only, so it
    works in a read-only directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
