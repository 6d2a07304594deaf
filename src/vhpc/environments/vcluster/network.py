"""The private network and the shared-memory region of a ``vcluster``, and their cleanup.

Network: QEMU ``-netdev stream`` connections over UNIX sockets in a 0700 work directory
(``/tmp/vhpc-vcluster-<pid>-*``), so the segment exists only between the campaign's own QEMU
processes: no bridge, no tap, no host interface, no route, no multicast (vm-mechanics.md:
stream/dgram netdevs work between guests without root).  Two VMs are connected directly; with
more, VM 0's QEMU is the hub (``-netdev hubport``: every other VM's stream lands on hub 0 of
VM 0, which also holds VM 0's own NIC), so frames between VM 1 and VM 2 pass through VM 0's
QEMU main loop.  Guest *i* is ``vhpc-vm<i>`` at ``10.77.0.<i+1>/24`` with MAC
``52:54:00:77:00:<i+1>`` (fixed and recorded in the environment's fingerprint).

Across nodes (a vcluster spread over a Slurm allocation, executors/slurm/guests.py) the links
go between the nodes' addresses: UDP datagrams (``-netdev dgram``, ``leaves`` = each guest's own
address and port) or TCP streams (``addr.type=inet``: VM 0's QEMU listens on its node's address,
``hub_host``, on one port per other guest, ``ports``); ports are picked free at each boot.  The
segment still exists only between the campaign's QEMU processes (no bridge, tap or route).

Shared memory (``net=ivshmem``): one file ``/dev/shm/vhpc-ivshmem-<pid>-*`` backs an
``ivshmem-plain`` PCI device in every guest (``memory-backend-file,share=on``, bound to one host
node with ``host-nodes=N,policy=bind``); guests map BAR 2 (``resource2`` in sysfs).

Cleanup: QEMU dies with vhpc (PR_SET_PDEATHSIG), and :func:`reap_orphans` — called when a
vcluster starts — removes work directories and shared files whose owning vhpc process is gone
(after ``kill -9``), kills any QEMU still using them, and returns what it removed.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from vhpc.environments.vm.backends.qemu import qemu_opt
from vhpc.host import owned

#: The private segment's addresses (RFC 1918), guest names and the exec service port (peer.c).
SUBNET = "10.77.0.0/24"
#: the MPI hostfile in guest 0 listing every guest on the private segment (its ``.hydra`` twin
#: for MPICH)
HOSTFILE = "/tmp/vhpc-hostfile"
PEER_PORT = 7107
IVSHMEM_MIB = 16  # ivshmem needs a power of two; 2 x 4 MiB messages + control fit
WORK_PREFIX = "vhpc-vcluster-"
SHM_PREFIX = "vhpc-ivshmem-"
SHM_DIR = Path("/dev/shm")


def address(i: int) -> str:
    """Guest ``i``'s address on the private segment (no prefix length)."""
    return f"10.77.0.{i + 1}"


def hostname(i: int) -> str:
    """Guest ``i``'s host name (in every guest's private /etc/hosts)."""
    return f"vhpc-vm{i}"


def mac(i: int) -> str:
    """Guest ``i``'s MAC address (locally administered QEMU range 52:54:00)."""
    return f"52:54:00:77:00:{i + 1:02x}"


@dataclass
class ClusterNet:
    """One vcluster's private segment and optional shared-memory file.

    workdir: 0700 directory with the stream sockets; shm_path: the ivshmem backing file or
    None; vms: number of guests.  :meth:`qemu_args` gives VM i's netdev/device arguments,
    :meth:`kernel_args` its ``vhpc.*`` kernel command line; :meth:`remove` deletes everything.
    """

    vms: int
    workdir: Path | None
    shm_path: Path | None = None
    shm_node: int | None = None
    hub_host: str | None = None
    ports: tuple[int, ...] = ()
    #: across nodes, ``dgram``: guest j's own (address, port) for its UDP end, j = 1..vms-1
    leaves: tuple[tuple[str, int], ...] = ()

    @classmethod
    def create(cls, vms: int, ivshmem: bool, shm_node: int | None) -> "ClusterNet":
        """Make the work directory (and the shared file, zero-filled, mode 0600).  Names carry
        vhpc's pid and start time, so :func:`reap_orphans` can tell a dead owner."""
        # short enough for the links' sockets (sun_path) whatever $TMPDIR is
        workdir = owned.owned_socketdir(WORK_PREFIX, len(f"net-{vms}.sock"))
        shm = None
        if ivshmem:
            shm = SHM_DIR / f"{SHM_PREFIX}{owned.owner_tag()}-{workdir.name.rsplit('-', 1)[1]}"
            fd = os.open(shm, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            try:
                os.ftruncate(fd, IVSHMEM_MIB << 20)
            finally:
                os.close(fd)
        return cls(vms, workdir, shm, shm_node)

    @classmethod
    def across_nodes(cls, vms: int, hub_host: str) -> "ClusterNet":
        """Links between nodes to VM 0's QEMU at ``hub_host`` (set :attr:`ports`, one per guest
        1..vms-1, and for UDP datagrams :attr:`leaves`, before :meth:`qemu_args`); nothing is
        created on this host."""
        return cls(vms, None, hub_host=hub_host)

    def sock(self, j: int) -> Path:
        """The Unix socket of guest ``j``'s link in the work directory (``net-<j>.sock``)."""
        return self.workdir / f"net-{j}.sock"

    def hub_end(self, j: int) -> tuple[str, int]:
        """The hub's (address, port) for guest ``j``'s link across nodes (``j`` ≥ 1).  Raises
        ValueError when :attr:`ports` does not hold one port per guest 1..vms-1."""
        if len(self.ports) < self.vms - 1:
            raise ValueError(f"{self.vms - 1} link ports needed, {len(self.ports)} given")
        return self.hub_host, self.ports[j - 1]

    def dgram_ends(self, j: int, hub: bool) -> str:
        """``local.*`` and ``remote.*`` of the UDP link between the hub and guest ``j`` (the
        hub's end when ``hub``): the hub's address and port for ``j``, guest ``j``'s own.
        Raises ValueError when ports or guest ends are missing."""
        if len(self.leaves) < self.vms - 1:
            raise ValueError(f"{self.vms - 1} guest link ends needed, {len(self.leaves)} given")
        ends = [self.hub_end(j), self.leaves[j - 1]]
        if not hub:
            ends.reverse()
        return ",".join(f"{side}.type=inet,{side}.host={h},{side}.port={port}"
                        for side, (h, port) in zip(("local", "remote"), ends))

    def link_addr(self, j: int) -> str:
        """The netdev address of guest ``j``'s link to the hub (``j`` ≥ 1): its UNIX socket
        or, across nodes, the hub node's address and the port for ``j``."""
        if self.hub_host is None:
            return f"addr.type=unix,addr.path={qemu_opt(self.sock(j))}"
        host, port = self.hub_end(j)
        return f"addr.type=inet,addr.host={host},addr.port={port}"

    def qemu_args(self, i: int) -> list[str]:
        """QEMU argv for guest ``i``: its NIC and its end of the stream links (VM 0 listens)."""
        nic = ["-device", f"virtio-net-pci,netdev=net0,mac={mac(i)}"]

        def stream(nid: str, j: int, server: bool) -> list[str]:
            if self.leaves:  # datagrams between the nodes: hub end or guest j's end
                return ["-netdev", f"dgram,id={nid},{self.dgram_ends(j, server)}"]
            return ["-netdev", f"stream,id={nid},server={'on' if server else 'off'},"
                               f"{self.link_addr(j)}"]

        if i > 0:
            args = stream("net0", i, False) + nic
        elif self.vms == 2:
            args = stream("net0", 1, True) + nic
        else:
            args = ["-netdev", "hubport,id=net0,hubid=0"] + nic
            for j in range(1, self.vms):
                args += stream(f"up{j}", j, True)
                args += ["-netdev", f"hubport,id=hp{j},hubid=0,netdev=up{j}"]
        if self.shm_path is not None:
            bind = f",host-nodes={self.shm_node},policy=bind" if self.shm_node is not None else ""
            args += ["-object", f"memory-backend-file,id=ivshm,share=on,mem-path={qemu_opt(self.shm_path)},"
                                f"size={IVSHMEM_MIB}M{bind}",
                     "-device", "ivshmem-plain,memdev=ivshm"]
        return args

    def kernel_args(self, i: int) -> list[str]:
        """Kernel command line words for guest ``i`` (guest/init.sh reads them)."""
        hosts = ",".join(f"{address(j)}:{hostname(j)}" for j in range(self.vms))
        return [f"vhpc.ip={address(i)}/24", f"vhpc.hostname={hostname(i)}", f"vhpc.hosts={hosts}"]

    def clear_sockets(self) -> None:
        """Remove stale socket files before a (re)boot: a listening QEMU needs a free path."""
        for p in self.workdir.glob("net-*.sock") if self.workdir else ():
            p.unlink(missing_ok=True)

    def describe(self) -> dict:
        """What the fingerprint records: transport, addresses, names, MACs, shared region."""
        links = ("UNIX sockets" if self.hub_host is None else
                 f"UDP datagrams to {self.hub_host}" if self.leaves else f"TCP to {self.hub_host}")
        return {"segment": f"QEMU {'dgram' if self.leaves else 'stream'} netdevs over {links}" + (
                    " (hub in VM 0)" if self.vms > 2 else " (point to point)"),
                "subnet": SUBNET,
                "guests": [{"name": hostname(i), "address": address(i), "mac": mac(i)}
                           for i in range(self.vms)],
                "ivshmem": ({"size_mib": IVSHMEM_MIB, "host_node": self.shm_node}
                            if self.shm_path else None)}

    def remove(self) -> None:
        """Delete the work directory and the shared file (idempotent)."""
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.shm_path is not None:
            self.shm_path.unlink(missing_ok=True)


def reap_orphans(tmp: Path | None = None, shm: Path = SHM_DIR) -> list[str]:
    """Remove what a killed vhpc left of its vclusters: work directories under ``tmp`` (default:
    the temporary directory) and shared files under ``shm`` whose owner (pid + start time in
    the name) is gone, killing any process still using them (normally none: QEMU has
    PR_SET_PDEATHSIG), with :func:`vhpc.host.owned.reap`.  Returns one line per item."""
    return owned.reap(WORK_PREFIX, tmp) + owned.reap(SHM_PREFIX, shm)
