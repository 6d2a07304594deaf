"""``vcluster:image=FILE``: the guests of a vcluster boot the user's image, one MPI job across
them (docs/images.md, "Across guests").

Each guest is an :class:`~vhpc.environments.vm.imageenv.ImageEnvironment` with an overlay of its
own (the image is never written), reached by vhpc over its own loopback ssh forward, and joined
to the cluster's private segment (vcluster/network.py: a second NIC, ``52:54:00:77:00:<i+1>``,
on the QEMU stream links) through what cloud-init applies from its seed
(:func:`cloud_config`):

* a ``network-config`` (:func:`network_config`) gives the NIC with the guest's MAC its address
  ``10.77.0.<i+1>/24`` before the network starts; ``runcmd`` gives it again (``ip``, the NIC
  found by MAC) where an image renders network configuration another way, and appends every
  guest's name and address to ``/etc/hosts``;
* ``write_files`` (deferred until the user ``vhpc`` exists) installs one ed25519 key pair,
  made for this cluster, as ``~vhpc/.ssh/vhpc_cluster`` with an ssh_config(5) entry using it for
  the cluster's names and addresses; every guest authorises its public key.  Open MPI's
  ``mpirun`` (or Hydra's ``mpiexec``) in guest 0 starts the other guests' ranks over ssh on the
  private segment.  The guests' host keys are not pinned between guests
  (``StrictHostKeyChecking no``): the segment exists only between this campaign's QEMU
  processes.

vhpc's own tools in its guests (the agent's exec service, ``/run/vhpc-rank``) are not in an
image: ranks are placed by the launcher and read back from the lines vhpc's kernels print
(``VHPC-RANK``), and the kernels and a benchmark's inputs are copied to, and built in, every
guest at the same path.

Under an executor with compute nodes (``slurm:nodes=N``) each node's guest host builds its
guests with :func:`member` from the cluster's :func:`cluster_seed`, which it reads from its
standard input (executors/slurm/guests.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from vhpc.environments.readback import remote_kernel_hash
from vhpc.environments.vcluster import network as vclusternet
from vhpc.environments.vm.imageenv import ImageEnvironment
from vhpc.environments.vm.userimage import GUEST_USER, SeedParts, keygen

#: The cluster key's file name in the login's ``~/.ssh`` (beside whatever the image has).
KEY_NAME = "vhpc_cluster"

#: Shell run by cloud-init as root (``runcmd``): $1 the NIC's MAC, $2 its address/prefix,
#: $3 the lines for /etc/hosts.
NET_SCRIPT = r"""for d in /sys/class/net/*; do
  [ "$(cat "$d/address" 2>/dev/null)" = "$1" ] || continue
  ip addr replace "$2" dev "${d##*/}" && ip link set "${d##*/}" up
done
printf '%s\n' "$3" >> /etc/hosts"""


def cluster_key() -> tuple[str, str]:
    """A new ed25519 key pair for one cluster: (private key text, public key line).  Raises
    UserImageError without ssh-keygen."""
    with tempfile.TemporaryDirectory(prefix="vhpc-ckey-") as tmp:
        public = keygen(Path(tmp) / "key", "vhpc-cluster")
        return (Path(tmp) / "key").read_text(), public


def cloud_config(i: int, vms: int, private_key: str) -> dict[str, Any]:
    """The cloud-config guest ``i`` of ``vms`` gets beside the image's usual seed (module
    docstring): ``runcmd`` for its cluster address and /etc/hosts, ``write_files`` for the
    cluster key and its ssh_config entry."""
    hosts = "\n".join(f"{vclusternet.address(j)} {vclusternet.hostname(j)}" for j in range(vms))
    home = f"/home/{GUEST_USER}/.ssh"
    config = (f"Host vhpc-vm* 10.77.0.*\n  IdentityFile ~/.ssh/{KEY_NAME}\n"
              "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    owner = f"{GUEST_USER}:{GUEST_USER}"
    return {
        "runcmd": [["sh", "-c", NET_SCRIPT, "sh", vclusternet.mac(i),
                    f"{vclusternet.address(i)}/24", hosts]],
        "write_files": [
            {"path": f"{home}/{KEY_NAME}", "content": private_key, "permissions": "0600",
             "owner": owner, "defer": True},
            {"path": f"{home}/config", "content": config, "permissions": "0600",
             "owner": owner, "defer": True},
        ],
    }


def network_config(i: int) -> dict[str, Any]:
    """The NoCloud ``network-config`` (version 2) of guest ``i``: the NIC with its MAC renamed
    ``vhpc0`` with its static address, applied by cloud-init before the guest's network starts
    (``dsmode: local``), so the image's own network set-up (DHCP on every NIC, as Debian's
    is) leaves that NIC alone and does not wait minutes for a DHCP answer on it; the
    ``runcmd`` of :func:`cloud_config` gives the address again where an image renders network
    configuration another way.  https://cloudinit.readthedocs.io/en/latest/reference/
    network-config-format-v2.html"""
    return {"version": 2, "ethernets": {"vhpc0": {
        "match": {"macaddress": vclusternet.mac(i)}, "set-name": "vhpc0",
        "addresses": [f"{vclusternet.address(i)}/24"]}}}


def cluster_seed() -> dict[str, str]:
    """What every guest of one image cluster shares, made once per cluster: ``private`` and
    ``public`` (the cluster key pair of :func:`cluster_key`) and ``kernels`` (one kernel folder
    name: the sources' hash now; taken at each guest's boot, a source changed in between, or a
    build writing beside them, gave two guests two paths).  It travels to the compute nodes
    of a cluster spread over Slurm nodes on the guest hosts' standard input, never on a
    command line.  Raises UserImageError without ssh-keygen."""
    private, public = cluster_key()
    return {"private": private, "public": public, "kernels": remote_kernel_hash()}


def member(name: str, i: int, vms: int, options, placement, topo, seed: dict[str, str]):
    """Guest ``i`` of ``vms`` of image cluster ``name``: an ImageEnvironment named
    ``NAME/vmI`` with the cluster's host name and the seed parts of :func:`cloud_config` and
    :func:`network_config` (``seed``: :func:`cluster_seed`); nothing is booted.  Used on this
    host and by the guest host of each compute node.  Raises ValueError as ImageEnvironment
    does."""
    m = ImageEnvironment(f"{name}/vm{i}", options, placement, topo)
    m.hostname = vclusternet.hostname(i)
    m.seed_parts = SeedParts(cloud_config(i, vms, seed["private"]), (seed["public"],),
                             network_config(i), seed["kernels"])
    return m


def members(name: str, options, placements: list, topo, seed: dict[str, str]) -> list:
    """One :func:`member` per placement (``options``: the guests' VmOptions with
    ``image``); nothing is booted."""
    return [member(name, i, len(placements), options, p, topo, seed)
            for i, p in enumerate(placements)]


def launcher_env() -> dict[str, str]:
    """Environment for a launcher in guest 0 of an image cluster: the hostfile vhpc wrote
    there, remote ranks started over ssh (Open MPI's default agent, Hydra's ``ssh``
    launcher), MPI traffic on the private segment only."""
    return {"OMPI_MCA_orte_default_hostfile": vclusternet.HOSTFILE,
            "OMPI_MCA_btl_tcp_if_include": vclusternet.SUBNET,
            "OMPI_MCA_oob_tcp_if_include": vclusternet.SUBNET,
            "HYDRA_HOST_FILE": vclusternet.HOSTFILE + ".hydra", "HYDRA_LAUNCHER": "ssh"}
