"""A benchmark's inputs copied to a machine that does not see this host's files (the ``ssh``
environment, and a user's image, which is reached through it).

:func:`archive` writes one input (a regular file, or a folder with its contents) into a tar
stream with Python's :mod:`tarfile`, following symbolic links as ``rankrun.py`` does when it
stages an input on this host, and refusing what a native or vm trial refuses
(:meth:`vhpc.benchmarks.custom.CommandBenchmark.preflight`): anything but a regular file or a
folder (a device, a FIFO, a socket: ``/dev/zero`` would be copied until a disk is full), a
link that leads nowhere, and a folder that holds itself through a link (a copy that would
never end).  Files are opened without blocking and checked again once open, so a file that
turned into a FIFO after the check cannot hang the copy.

:func:`copy_inputs` unpacks each archive into ``<workdir>/inputs-<hash>/input`` on the remote
side, ``hash`` being the archive's SHA-256 (names, contents, executable bits; no owners or
times): an input copied once is found again by later trials and sessions and not sent twice,
and an edited input gets a folder of its own.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import subprocess
import tarfile
import tempfile
from typing import IO, Any

from vhpc.core.paths import input_problem
from vhpc.environments.base import EnvError

#: Name of the copy inside its ``inputs-<hash>`` folder (the rank stages it under its own name).
COPY_NAME = "input"


class InputError(EnvError):
    """An input cannot be copied as it is; the message names it and what to change."""


def _refuse(path: str, what: str) -> InputError:
    return InputError(f"input {path} {what}: inputs must be regular files or folders; fix "
                      "inputs: in the campaign file")


def archive(src: str, out: IO[bytes]) -> None:
    """Write the input ``src`` as ``input`` (a file, or a folder and everything in it, symbolic
    links followed) into the tar stream ``out``.  Raises InputError (see the module doc)."""
    problem = input_problem(src)  # the check of every path, before a byte is copied
    if problem is not None:
        raise _refuse(*problem)
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, src, COPY_NAME, frozenset(), top=True)


def _member(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mtime = kind, size, 0
    info.mode = 0o700 if kind == tarfile.DIRTYPE or mode & 0o111 else 0o600
    return info


def _add(tar: tarfile.TarFile, path: str, name: str, ancestors: frozenset, top: bool = False):
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _refuse(path, "does not exist" if top else
                      f"is a symbolic link that leads nowhere ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        key = (st.st_dev, st.st_ino)
        if key in ancestors:
            raise _refuse(path, "leads back to a folder that contains it (a loop of links)")
        tar.addfile(_member(name, tarfile.DIRTYPE, st.st_mode))
        for entry in sorted(os.listdir(path)):
            _add(tar, os.path.join(path, entry), f"{name}/{entry}", ancestors | {key})
        return
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "is not a regular file or folder" if top else
                      "is (or leads to) something that is not a regular file or folder")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())  # what was opened, not what was looked at
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "is not a regular file or folder")
        tar.addfile(_member(name, tarfile.REGTYPE, st.st_mode, st.st_size), f)


def copy_inputs(ssh: Any, paths: list[str]) -> dict[str, str]:
    """Copy each host path in ``paths`` to the remote side of ``ssh`` (an
    :class:`~vhpc.environments.ssh.environment.SshEnvironment`, connected) unless a copy of
    the same contents is there; returns host path → remote path of the copy.  Raises
    InputError (an input that cannot be copied) or EnvError (the copy failed remotely)."""
    placed: dict[str, str] = {}
    for src in dict.fromkeys(paths):
        with tempfile.TemporaryFile(prefix="vhpc-input-") as tmp:
            archive(src, tmp)
            tmp.seek(0)
            digest = hashlib.sha256()
            for block in iter(lambda: tmp.read(1 << 20), b""):
                digest.update(block)
            folder = f"{ssh.workdir}/inputs-{digest.hexdigest()[:24]}"
            q = shlex.quote(folder)
            if ssh.shell(f"test -f {q}/.done").returncode != 0:
                tmp.seek(0)
                res = subprocess.run(
                    ssh.ssh_argv() + [f"sh -c {shlex.quote(_unpack(q))}"], stdin=tmp,
                    capture_output=True, timeout=3600)
                if res.returncode != 0:
                    err = res.stderr.decode("utf-8", "replace").strip()
                    raise EnvError(f"ssh {ssh.target}: copying input {src} into {folder} "
                                   f"failed: {err[-200:] or f'status {res.returncode}'}")
        placed[src] = f"{folder}/{COPY_NAME}"
    return placed


def _unpack(q: str) -> str:
    """Remote shell that unpacks stdin into the folder ``q`` (quoted) and marks it complete; a
    half-written folder (a copy cut short) is replaced."""
    return (f"rm -rf {q} {q}.part && mkdir -p {q}.part && "
            f"tar -C {q}.part --no-same-owner -xf - && touch {q}.part/.done && mv {q}.part {q}")
