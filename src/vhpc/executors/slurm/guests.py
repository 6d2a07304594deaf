"""A ``vcluster`` spread over the nodes of a Slurm allocation (a virtualized cluster, as Lange et
al., VEE 2011, ran one).

Under ``--executor slurm`` a vcluster's guests do not all boot on one host: each allocated node
that holds guests (``vms_per_node`` of them, default one) runs a *guest host*, a job step
``srun --nodes=1 --ntasks=1 -w NODE python -m vhpc.executors.slurm.guests PAYLOAD`` that lives
as long as the environment does.  The guest host plans its guests on its own node's topology
(:func:`vhpc.environments.vcluster.environment.plan_cluster`: the node is where the pinning is
applied), builds one :class:`~vhpc.environments.vm.environment.VmEnvironment` per guest (with
``image=``, the user's image guest of vcluster/images.py, its overlay on that node; the
cluster's key pair arrives as the first line of its standard input, never in its argv) and
then serves requests from the campaign process: one JSON object per line on its standard input
(srun forwards it, srun(1) ``--input``), one reply per line on its standard output, marked
:data:`MARK`.  The campaign process keeps the
:class:`~vhpc.environments.vcluster.environment.VclusterEnvironment` itself, with a
:class:`RemoteVm` per guest in place of a local VM: booting, pausing, the benchmark in guest
0, the agents' requests and every read-back go through the node's guest host, so the stored
trial holds, per rank, the node, guest, vCPU and host CPU.  An image guest's ssh-side work
(the kernels' build in the guest, the inputs' copy, the applications' versions) is done by
its node's guest host too: the guest's ssh forward listens on that node's loopback only.

The guests' private segment is carried by QEMU links to the hub in guest 0's QEMU, at node 0's
Slurm address (``NodeAddr``), on ports the guest hosts pick free (:func:`free_ports`): UDP
datagrams (``-netdev dgram``, the default) or TCP (``-netdev stream``; vcluster option
``link``, docs/scale-out.md).

Lifetime: the guest host ends, closing its guests, on ``exit``, at end of input (the campaign
process closed the pipe or died) and on SIGTERM (``scancel``: slurmstepd sends SIGTERM, then
SIGKILL after ``KillWait``).  srun runs under PR_SET_PDEATHSIG, so a SIGKILLed vhpc takes srun
with it, and slurmstepd then kills the step's tasks; QEMU dies with its guest host
(PR_SET_PDEATHSIG).  Work folders a SIGKILL leaves behind carry their owner's pid and are
removed when a guest host starts on that node again (:func:`vhpc.host.owned.reap_all`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from vhpc.benchmarks.base import Remote
from vhpc.core import records
from vhpc.environments.base import EnvError, RunResult, now
from vhpc.environments.kind import GUEST_CLUSTER, KINDS
from vhpc.executors.slurm.step import cancel_srun, decode, result_fields, result_from_fields

#: Marks the guest host's replies on its standard output (QEMU or a library may print too).
MARK = "VHPC-NODE "
#: What a guest host answers (RemoteVm, RemoteGuest and the hub's port choice ask them).
OPERATIONS = frozenset({"ports", "pause", "resume", "stop", "close", "boot", "accel", "alive",
                        "fingerprint", "request", "affinity", "applied", "run", "kernel_dir",
                        "stage", "apps"})
#: Seconds a guest host may take to start (Python, the host's topology from hwloc).
READY_SECONDS = 120.0


# -------------------------------------------------------------------------------- node side
def free_ports(host: str, n: int) -> list[int]:
    """``n`` ports free on address ``host`` now for both TCP and UDP (the kernel's choice for a
    TCP bind to port 0, kept when a UDP bind to it works too; ip(7)); QEMU binds them moments
    later.  Raises EnvError saying why when fewer than ``n`` can be found (the address cannot
    be bound, or 8n + 16 tries found no port free for both protocols)."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < max(0, int(n)) and len(socks) < 8 * max(1, int(n)) + 16:
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(tcp)
            try:
                tcp.bind((host, 0))
            except OSError as exc:
                raise EnvError(f"no free port on {host} for a guest ({exc.strerror or exc}): "
                               "check the node's address and its free ports") from None
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(udp)
            try:
                udp.bind((host, tcp.getsockname()[1]))
            except OSError:
                continue
            ports.append(tcp.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    if len(ports) < n:
        raise EnvError(f"only {len(ports)} of the {n} ports a guest needs are free on {host} "
                       "for both TCP and UDP: free some ports on the node, or run fewer guests")
    return ports


def node_name() -> str:
    """This node's Slurm name (``SLURMD_NODENAME`` in a job step), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


class GuestHost:
    """The guests of one node (node side).  ``payload``: ``{"name", "first" (global index of
    the first guest here), "count", "vms" (the cluster's guests on all nodes), "policy",
    "member" (VmOptions fields)}``; ``seed``: an image cluster's shared seed (its key pair,
    read from standard input, :func:`serve`).  Raises PlacementError / HostError / ValueError
    when the node cannot hold them."""

    def __init__(self, payload: dict[str, Any], seed: dict[str, str] | None = None):
        self.node = node_name()
        self.members = KINDS.providing(GUEST_CLUSTER)().node_guests(
            str(payload["name"]), int(payload["first"]), int(payload["count"]),
            str(payload["policy"]), payload["member"], payload.get("vms"), seed)

    def close(self) -> None:
        """Stop every guest of this node (idempotent)."""
        for m in self.members:
            m.close()

    def handle(self, req: dict[str, Any]) -> Any:
        """Answer one request (see :class:`RemoteVm` for the operations).  Raises EnvError,
        OSError, ValueError, KeyError, IndexError for a request that cannot be met."""
        op = req["op"]
        if op not in OPERATIONS:
            raise KeyError(f"unknown operation {op!r}")
        if op == "ports":
            return free_ports(str(req["host"]), int(req["n"]))
        m = self.members[int(req["i"])] if req.get("i") is not None else None
        if op in ("pause", "resume", "stop", "close"):
            for x in [m] if m is not None else self.members:
                getattr(x, op)()  # stop keeps an image's overlay, close removes it
            return None
        if m is None:
            raise KeyError("this operation needs a guest index")
        if op == "boot":
            m.extra_args, m.append = list(req["extra_args"]), list(req["append"])
            m.start()
            image = getattr(m, "image", None)  # the user's image: the file this node read
            return {"pid": m.guest.pid, "sessions": m.sessions,
                    "image_sha256": image.sha256 if image is not None else None}
        if op == "accel":
            return m.accel
        if op == "apps":
            return m.app_versions()
        if op == "kernel_dir":  # an image's guest builds vhpc's kernels with its own compiler
            where = m.kernel_dir(Path(req["local"]), str(req["impl"]), str(req["binary"]))
            return str(where) if where is not None else None
        if op == "stage":  # inputs copied into an image's guest, from this node's files
            staged = m.stage_files(list(req["paths"]))
            return dataclasses.asdict(staged) if staged is not None else None
        if op == "alive":
            return m.guest is not None and m.guest.alive()
        if op == "fingerprint":
            return m.fingerprint()
        if m.guest is None:
            raise EnvError("the guest is not running")
        if op == "request":
            return m.guest.request(str(req["what"]), float(req["wait"]), **req["payload"])
        if op == "affinity":
            return m.guest.read_affinity()
        if op == "applied":
            return records.dump(m.applied())
        return result_fields(m.run(req["argv"], req["env"], timeout=float(req["timeout"]),
                                   key=str(req["key"])))  # "run"


def _reply(out, value: Any = None, error: str | None = None) -> None:
    msg = {"error": error} if error is not None else {"ok": value}
    out.write(MARK + json.dumps(msg, default=str) + "\n")
    out.flush()


def serve(payload: dict[str, Any], inp=sys.stdin, out=sys.stdout) -> int:
    """The guest host's loop: announce ``{"node", "pid", "step_id", "guests", "boot_timeout"
    (the longest a guest here may take to boot, s: an image's is minutes)}``, then answer one
    request per input line until ``exit`` or end of input; close every guest on the way out
    (also on SIGTERM).  Returns the exit status (2 when the node cannot hold its guests)."""
    from vhpc.core.errors import VhpcError
    from vhpc.host.owned import reap_all

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    reap_all()  # what a SIGKILLed guest host left on this node
    try:
        seed = None
        if payload.get("seeded"):  # an image cluster's key pair: the first input line
            seed = json.loads(inp.readline() or "null")
        host = GuestHost(payload, seed)
    except (VhpcError, ValueError) as exc:
        _reply(out, error=f"node {node_name()}: {exc}")
        return 2
    try:
        _reply(out, {"node": host.node, "pid": os.getpid(),
                     "step_id": os.environ.get("SLURM_STEP_ID"),
                     "guests": [m.name for m in host.members],
                     "boot_timeout": max(m.boot_timeout for m in host.members)})
        for line in inp:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except ValueError:
                _reply(out, error="request is not JSON")
                continue
            if req.get("op") == "exit":
                _reply(out, None)
                break
            try:
                _reply(out, host.handle(req))
            except (EnvError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                _reply(out, error=str(exc) or type(exc).__name__)
    finally:
        host.close()
    return 0


# -------------------------------------------------------------------------- campaign side
class NodeLink:
    """One guest host, started as a job step on ``node`` by ``argv`` (an srun command).

    :meth:`call` sends a request and waits for its reply.  Every failure is an EnvError of
    one line naming the node: the step ended (with srun's last stderr line), or no answer came
    in time.  Attributes: ``node``, ``address`` (its Slurm NodeAddr), ``info`` (the guest
    host's announcement).
    """

    def __init__(self, argv: list[str], node: str, address: str,
                 preexec: Callable[[], None] | None = None, seed: dict[str, str] | None = None):
        self.node, self.address, self.argv = node, address, argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1,
                                     preexec_fn=preexec)
        if seed is not None:  # on the pipe, not in argv: /proc/PID/cmdline is world-readable
            try:
                self.proc.stdin.write(json.dumps(seed) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # the step ended at once: the wait below says why
        self._replies: queue.Queue = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        self.info: dict[str, Any] = self._wait("start", READY_SECONDS)

    def _read_out(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(MARK):
                try:
                    self._replies.put(json.loads(line[len(MARK):]))
                except ValueError:
                    continue
        self._replies.put(None)  # end of output: the step ended

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            if line.strip():
                self._stderr.append(line.strip())

    def alive(self) -> bool:
        """True while the step's srun runs."""
        return self.proc.poll() is None

    def _ended(self) -> EnvError:
        self.proc.poll()
        tail = next((ln for ln in reversed(self._stderr) if "error" in ln.lower()),
                    self._stderr[-1] if self._stderr else f"srun exit {self.proc.returncode}")
        return EnvError(f"node {self.node}: its guest host ended ({tail})")

    def _wait(self, what: str, wait: float) -> Any:
        try:
            msg = self._replies.get(timeout=wait)
        except queue.Empty:
            raise EnvError(f"node {self.node}: no answer to {what} in {wait:.0f} s") from None
        if msg is None:
            self._replies.put(None)  # stay ended for later calls
            raise self._ended()
        if "error" in msg:
            raise EnvError(msg["error"] if msg["error"].startswith("node ")
                           else f"node {self.node}: {msg['error']}")
        return msg.get("ok")

    def call(self, op: str, wait: float, /, **fields: Any) -> Any:
        """Send ``{"op": op, **fields}`` and return the reply's value, waiting up to ``wait``
        seconds for it.  Raises EnvError when the guest host has ended, does not answer in time
        or answers with an error."""
        if not self.alive():
            raise self._ended()
        try:
            self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._ended() from None
        return self._wait(op, wait)

    def close(self, wait: float = 60.0) -> None:
        """Ask the guest host to stop its guests and end; after ``wait`` seconds cancel the
        step (two SIGINTs to srun, srun(1) SIGNALS).  Idempotent; never raises."""
        if self.alive():
            try:
                self.call("exit", wait)
            except EnvError:
                pass
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            cancel_srun(self.proc, self.argv)


class RemoteGuest:
    """The running guest ``i`` of a node, as a vcluster uses a GuestSession: agent requests,
    vCPU read-back, liveness.  ``pid``: its QEMU's pid on that node."""

    def __init__(self, link: NodeLink, i: int, pid: int | None):
        self.link, self.i, self.pid = link, i, pid

    def request(self, op: str, wait: float, **payload) -> dict[str, Any]:
        """The guest agent's reply to ``op`` (as GuestSession.request).  Raises EnvError."""
        return self.link.call("request", wait + 30.0, i=self.i, what=op, wait=wait,
                              payload=payload)

    def read_affinity(self) -> list[dict[str, Any]]:
        """Each vCPU thread's allowed host CPUs and last CPU, read on the guest's node."""
        return self.link.call("affinity", 60.0, i=self.i)

    def alive(self) -> bool:
        """Whether the guest still runs (False when its node cannot be asked)."""
        try:
            return bool(self.link.call("alive", 60.0, i=self.i))
        except EnvError:
            return False


class RemoteVm:
    """Guest ``i`` of the guest host behind ``link``, with the members' interface that
    :class:`~vhpc.environments.vcluster.environment.VclusterEnvironment` uses (start, pause,
    resume, close, run, applied, fingerprint, accel, ``guest``, ``extra_args``, ``append``).
    ``node``: the Slurm node it runs on.  ``boot_timeout``: seconds a boot may take."""

    def __init__(self, link: NodeLink, i: int, name: str, boot_timeout: float):
        self.link, self.i, self.name, self.node = link, i, name, link.node
        self.address = link.address
        self.boot_timeout = boot_timeout
        self.extra_args: list[str] = []
        self.append: list[str] = []
        self.guest: RemoteGuest | None = None
        self.sessions = 0
        self._accel: str | None = None
        #: SHA-256 of the user's image as the node read it at the last boot (None: vhpc's guest)
        self.image_sha256: str | None = None

    @property
    def accel(self) -> str:
        """The accelerator the node's probe chose (``kvm`` or ``tcg``)."""
        if self._accel is None:
            self._accel = str(self.link.call("accel", 120.0, i=self.i))
        return self._accel

    def start(self) -> None:
        """Boot the guest on its node unless it runs.  Raises EnvError naming the node."""
        if self.guest is not None and self.guest.alive():
            return
        reply = self.link.call("boot", self.boot_timeout + 120.0, i=self.i,
                               extra_args=self.extra_args, append=self.append)
        self.guest = RemoteGuest(self.link, self.i, reply.get("pid"))
        self.sessions = int(reply.get("sessions", self.sessions + 1))
        self.image_sha256 = reply.get("image_sha256")

    def free_port(self) -> int:
        """A UDP/TCP port free on this guest's node address now (its link's end)."""
        return int(self.link.call("ports", 60.0, host=self.address, n=1)[0])

    def _quiet(self, op: str) -> None:
        if self.link.alive():
            try:
                self.link.call(op, 120.0, i=self.i)
            except EnvError:
                pass

    def pause(self) -> None:
        """Stop the guest's vCPUs (no-op when it is not running or its node is gone)."""
        if self.guest is not None:
            self._quiet("pause")

    def resume(self) -> None:
        """Undo :meth:`pause`."""
        if self.guest is not None:
            self._quiet("resume")

    def close(self) -> None:
        """Stop the guest, removing what it made on its node (an image's overlay); its node's
        guest host stays for the next session."""
        if self.guest is not None:
            self._quiet("close")
        self.guest = None

    def stop(self) -> None:
        """Stop the guest, keeping an image's overlay on its node (what the guest built stays
        for its next boot)."""
        if self.guest is not None:
            self._quiet("stop")
        self.guest = None

    def kernel_dir(self, local: Path | None, impl: str, binary: str) -> Path | None:
        """An image guest's build folder, ``binary`` built there by the guest's compiler on
        first use, from the kernel sources at ``local``'s path on the guest's node (vhpc
        installed at one path on every node).  Raises EnvError naming the node."""
        if local is None or not binary:
            return local
        where = self.link.call("kernel_dir", self.boot_timeout + 1800.0, i=self.i,
                               local=str(local), impl=impl, binary=binary)
        return Path(where) if where else None

    def stage_files(self, paths: list[str]) -> Remote | None:
        """The inputs copied into an image guest from ``paths`` as its node sees them (a
        file system shared with this host, as srun's steps need too).  Raises EnvError."""
        staged = self.link.call("stage", self.boot_timeout + 600.0, i=self.i,
                                paths=list(paths))
        return Remote(**staged) if staged else None

    def app_versions(self) -> dict[str, str]:
        """LAMMPS's and GROMACS's versions in an image guest (booted on its node if needed).
        Raises EnvError."""
        return dict(self.link.call("apps", self.boot_timeout + 300.0, i=self.i) or {})

    def applied(self) -> records.AppliedPlacement | None:
        """The guest's placement as applied, read back on its node (None when it does not run
        or the node cannot be asked)."""
        if self.guest is None:
            return None
        try:
            return records.load_applied(self.link.call("applied", 120.0, i=self.i))
        except EnvError:
            return None

    def run(self, argv, env=None, timeout: float = 600.0, key: str = "") -> RunResult:
        """Run ``argv`` in this guest (VmEnvironment.run on its node), killed after ``timeout``
        seconds.  A node that fails is a failed result whose error names the node."""
        try:
            return result_from_fields(self.link.call(
                "run", timeout + 300.0, i=self.i, argv=list(argv), env=dict(env or {}),
                timeout=timeout, key=key))
        except EnvError as exc:
            self.guest = None
            return RunResult(None, "", "", now(), 0.0, error=str(exc))

    def fingerprint(self) -> dict[str, Any]:
        """The guest's fingerprint as its node reports it, with ``slurm_node``."""
        return {**self.link.call("fingerprint", 120.0, i=self.i), "slurm_node": self.node}


def main(argv: list[str]) -> int:
    """``python -m vhpc.executors.slurm.guests PAYLOAD``: :func:`serve`."""
    return serve(decode(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
