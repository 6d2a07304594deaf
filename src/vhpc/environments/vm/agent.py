"""The host side of vhpc's guest agent protocol, shared by every hypervisor backend.

The guest runs vhpc's agent (guest/agent.c) as init; the host reaches it over a virtio-serial
port exposed on the host as a unix stream socket (QEMU ``-chardev socket``, libvirt
``<channel type='unix'>``).  Messages are text header lines, some followed by binary payloads:

- guest → host ``READY UPTIME NCPUS [UNAME]`` once the guest is up;
- host → guest ``RUN ID TIMEOUT_MS ARGC ENVC LEN`` + LEN bytes (NUL-terminated argv, ``K=V``
  environment strings and the working directory), answered by
  ``DONE ID RC TIMED_OUT ELAPSED USER SYS MINFLT MAJFLT NVCSW NIVCSW NOUT NERR`` + NOUT bytes of
  stdout + NERR bytes of stderr;
- host → guest ``READ ID LEN`` + LEN bytes of a guest path, answered by ``DATA ID OK LEN`` +
  LEN bytes (the file when OK is 1, else the error text).

A backend owns the process (or domain) and hands :class:`AgentChannel` a callable that says
whether it exited, so a dead hypervisor is reported at once instead of after a timeout.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any, Callable

from vhpc.environments.base import EnvError

#: ``() -> exit status`` of the process behind the channel, None while it runs.
ExitStatus = Callable[[], "int | None"]


def encode_request(rid: int, op: str, payload: dict[str, Any]) -> bytes:
    """The bytes of request ``rid``.  op ``run``: payload argv (list of str), env (dict),
    timeout (s; at least 1 ms is sent), cwd (default /tmp); op ``read``: payload path.
    Raises ValueError for another op."""
    if op == "run":
        argv, env = list(payload["argv"]), dict(payload.get("env") or {})
        strings = argv + [f"{k}={v}" for k, v in env.items()] + [payload.get("cwd") or "/tmp"]
        body = b"".join(x.encode() + b"\0" for x in strings)
        timeout_ms = max(1, int(float(payload.get("timeout") or 0) * 1000))
        head = f"RUN {rid} {timeout_ms} {len(argv)} {len(env)} {len(body)}\n"
    elif op == "read":
        body = str(payload["path"]).encode()
        head = f"READ {rid} {len(body)}\n"
    else:
        raise ValueError(f"unknown agent request {op!r}")
    return head.encode() + body


def retry_connect(attempt: Callable[[], Any], errors: tuple[type[BaseException], ...],
                  deadline: float, exit_status: ExitStatus, what: str) -> Any:
    """``attempt()``'s result, retried every 10 ms while it raises one of ``errors`` (the
    hypervisor has not opened that socket yet: QEMU opens its chardevs one after another, so
    the agent's may accept before the QMP socket exists).  A failed connect(2) costs
    microseconds and boot waits on it.  Raises EnvError when the process exits ("QEMU exited
    with status N during boot") or ``deadline`` (time.monotonic) passes ("QEMU did not open
    ``what`` in time")."""
    while True:
        status = exit_status()
        if status is not None:
            raise EnvError(f"QEMU exited with status {status} during boot")
        try:
            return attempt()
        except errors as exc:
            if time.monotonic() > deadline:
                raise EnvError(f"QEMU did not open {what} in time ({exc})") from None
            time.sleep(0.01)


class GuestHung(EnvError):
    """The guest agent did not answer before its deadline while QEMU kept running: a hung
    guest (a boot that stalls under TCG, a kernel stuck after init), not a refused
    configuration.  :meth:`VmEnvironment._boot` boots once more after one of these."""


class AgentChannel:
    """One connection to a guest's agent.  ``sock``: the connected unix stream socket;
    ``exit_status``: the hypervisor process's exit status, None while it runs (EnvError
    "QEMU exited with status N" once it is not None)."""

    def __init__(self, sock: socket.socket, exit_status: ExitStatus):
        self.sock = sock
        self.exit_status = exit_status
        self._buf = b""
        self._next_id = 0

    @classmethod
    def connect(cls, path: Path, deadline: float, exit_status: ExitStatus) -> "AgentChannel":
        """Connect to the agent socket at ``path``, retrying (:func:`retry_connect`) until
        ``deadline`` (time.monotonic seconds).  Raises EnvError when the process exits or
        time runs out."""
        def attempt() -> "AgentChannel":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
            except OSError:
                s.close()
                raise
            return cls(s, exit_status)

        return retry_connect(attempt, (OSError,), deadline, exit_status, "its agent socket")

    def close(self) -> None:
        """Close the socket; idempotent, never raises."""
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self, deadline: float) -> None:
        """Read more bytes into the buffer.  Raises GuestHung on timeout, EnvError on exit or
        EOF."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise GuestHung("guest agent did not answer in time (guest hung?)")
        status = self.exit_status()
        if status is not None:
            raise EnvError(f"QEMU exited with status {status}")
        self.sock.settimeout(min(remaining, 1.0))
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout:
            return
        if not chunk:
            raise EnvError("guest agent channel closed")
        self._buf += chunk

    def _line(self, deadline: float) -> list[str]:
        while b"\n" not in self._buf:
            self._fill(deadline)
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("utf-8", "replace").split()

    def _bytes(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            self._fill(deadline)
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def recv(self, deadline: float) -> dict[str, Any]:
        """One message as a dict: ``{"event": "ready", "uptime", "ncpus", "uname"}``, a
        ``run`` reply (id, rc, timed_out, elapsed s, stdout, stderr, rusage {user_s, sys_s,
        minflt, majflt, nvcsw, nivcsw}) or a ``read`` reply (id, data or error); ``{}`` for an
        empty line.  Raises EnvError for an unknown message or when ``deadline`` passes."""
        words = self._line(deadline)
        if not words:
            return {}
        kind = words[0]
        if kind == "READY":
            return {"event": "ready", "uptime": float(words[1]), "ncpus": int(words[2]),
                    "uname": words[3] if len(words) > 3 else ""}
        if kind == "DONE":
            (rid, rc, to, elapsed, user, sys_, minflt, majflt, nvcsw, nivcsw,
             nout, nerr) = words[1:13]
            out = self._bytes(int(nout), deadline).decode("utf-8", "replace")
            err = self._bytes(int(nerr), deadline).decode("utf-8", "replace")
            return {"id": int(rid), "rc": int(rc), "timed_out": to == "1",
                    "elapsed": float(elapsed), "stdout": out, "stderr": err,
                    "rusage": {"user_s": float(user), "sys_s": float(sys_),
                               "minflt": int(minflt), "majflt": int(majflt),
                               "nvcsw": int(nvcsw), "nivcsw": int(nivcsw)}}
        if kind == "DATA":
            data = self._bytes(int(words[3]), deadline).decode("utf-8", "replace")
            return {"id": int(words[1]), ("data" if words[2] == "1" else "error"): data}
        raise EnvError(f"unexpected message from the guest agent: {' '.join(words)[:200]}")

    def wait_ready(self, deadline: float) -> dict[str, Any]:
        """The agent's READY message.  Raises EnvError when another message comes first."""
        msg = self.recv(deadline)
        if msg.get("event") != "ready":
            raise EnvError(f"guest agent sent {msg!r} instead of ready")
        return msg

    def request(self, op: str, wait: float, **payload) -> dict[str, Any]:
        """Send one request (:func:`encode_request`) and wait ``wait`` seconds for its reply
        (replies to earlier requests are skipped).  Raises EnvError when the guest does not
        answer (the caller kills the session)."""
        self._next_id += 1
        rid = self._next_id
        self.sock.sendall(encode_request(rid, op, payload))
        deadline = time.monotonic() + wait
        while True:
            reply = self.recv(deadline)
            if reply.get("id") == rid:
                return reply
