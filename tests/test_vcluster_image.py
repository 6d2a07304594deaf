"""vcluster:image=FILE: N guests from one image, an overlay each, on the private
segment with the cluster's addresses, names and one ssh key for the MPI launcher, given by
cloud-init from each guest's seed.  Booting the cluster takes minutes under TCG:
tests/test_userimage_boot.py (VHPC_VM_TESTS=1)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import qemu_pids, require_tool
from vhpc.environments.base import EnvError
from vhpc.environments.vcluster.environment import VclusterEnvironment
from vhpc.environments import kind
from vhpc.environments.options import HostFacts
from vhpc.environments.vcluster import images
from vhpc.environments.vcluster import network as net
from vhpc.environments.vcluster.options import VclusterOptions
from vhpc.environments.vm import userimage


@pytest.mark.parametrize("given, error", [
    ({"image": "a.qcow2", "net": "ivshmem"}, "net=virtio only"),
    ({"image": "a.qcow2", "kernel": "/boot/vmlinuz"}, "boots its own kernel"),
    ({"boot": "firmware"}, "boot= needs image=FILE"),
    ({"image": "disk.bin"}, "add format=qcow2"),
])
def test_cluster_image_options_are_checked_at_parse(given, error):
    with pytest.raises(ValueError, match=error):
        VclusterOptions(**given)


def _disk(tmp_path: Path) -> Path:
    """A 4 MiB raw disk with an MBR signature: an image that passes the checks, never booted."""
    disk = tmp_path / "disk.img"
    data = bytearray(4 << 20)
    data[510:512] = b"\x55\xaa"
    disk.write_bytes(bytes(data))
    return disk


def test_a_cluster_of_images_spread_over_nodes_checks_the_image_here_and_boots_nothing(
        tmp_path):
    """Under an executor with 2 compute nodes the plan puts one guest on each; the preflight
    checks the image here (a missing file: one line) and starts nothing; no guest boots on this
    host before the nodes are attached; the applications' versions are left to the nodes."""
    require_tool("qemu-img"), require_tool("ssh-keygen")
    host = dataclasses.replace(HostFacts.live(), compute_nodes=2, remote=True)
    plan = kind.plan("vcluster", "c", VclusterOptions(image=str(_disk(tmp_path)), vms=2,
                                                      policy="float"), host)
    assert "1 per node on 2 Slurm node(s)" in plan.text
    assert plan.text.endswith("booting disk.img in each (own overlay; the same path on every "
                              "node)")
    env = kind.build("vcluster", "c", VclusterOptions(image=str(_disk(tmp_path)), vms=2,
                                                     policy="float"), host)
    before = qemu_pids()
    try:
        env.preflight()
        assert env.members[0].image.sha256 and env.members[0].rundir is None  # no overlay
        with pytest.raises(EnvError, match="boot on the executor's compute nodes"):
            env.start()
        assert env.app_versions() is None
        assert qemu_pids() - before == set()
    finally:
        env.close()
    missing = kind.build("vcluster", "c", VclusterOptions(image=str(tmp_path / "no.qcow2"),
                                                         vms=2, policy="float"), host)
    with pytest.raises(EnvError, match="no such readable file"):
        missing.preflight()


def test_a_nodes_guests_of_an_image_cluster_get_their_global_names_and_the_clusters_seed(
        tmp_path):
    """The guest host of the second node builds guest 1 of 2: named c/vm1 and vhpc-vm1, the
    cluster's key and kernel folder from the seed, its own address and the whole cluster's
    /etc/hosts; without the seed it refuses."""
    require_tool("ssh-keygen")
    member = {"image": str(_disk(tmp_path)), "format": "raw", "vcpus": 1, "memory": 256,
              "accel": "tcg"}
    seed = images.cluster_seed()
    (m,) = kind.KINDS.get("vcluster")().node_guests("c", 1, 1, "float", member, 2, seed)
    assert (m.name, m.hostname) == ("c/vm1", "vhpc-vm1")
    assert m.seed_parts.authorized == (seed["public"],)
    assert m.seed_parts.kernel_hash == seed["kernels"]
    assert m.seed_parts.network_config == images.network_config(1)
    (cmd,) = m.seed_parts.cloud_config["runcmd"]
    assert cmd[4:7] == [net.mac(1), f"{net.address(1)}/24",
                        "10.77.0.1 vhpc-vm0\n10.77.0.2 vhpc-vm1"]
    assert m.seed_parts.cloud_config["write_files"][0]["content"] == seed["private"]
    with pytest.raises(ValueError, match="needs the cluster's seed"):
        kind.KINDS.get("vcluster")().node_guests("c", 1, 1, "float", member, 2, None)


def test_the_clusters_private_key_reaches_a_guest_host_on_its_input_not_its_command_line(
        tmp_path):
    """A guest host of an image cluster reads the seed from its first input line: it
    announces its guest, and neither its command line nor srun's holds the private key."""
    require_tool("ssh-keygen")
    from vhpc.executors.slurm.guests import NodeLink
    from vhpc.executors.slurm.step import encode

    seed = images.cluster_seed()
    payload = {"name": "c", "first": 1, "count": 1, "vms": 2, "policy": "float",
               "seeded": True, "member": {"image": str(_disk(tmp_path)), "format": "raw",
                                          "vcpus": 1, "memory": 256, "accel": "tcg"}}
    argv = [sys.executable, "-m", "vhpc.executors.slurm.guests", encode(payload)]
    link = NodeLink(argv, "here", "127.0.0.1", seed=seed)
    try:
        assert link.info["guests"] == ["c/vm1"]
        assert link.info["boot_timeout"] == 900.0  # an image's default: minutes under TCG
        cmdline = Path(f"/proc/{link.proc.pid}/cmdline").read_bytes()
        assert b"PRIVATE KEY" not in cmdline and seed["private"].encode() not in cmdline
        assert seed["private"][40:80] not in encode(payload)
        assert link.call("stop", 30, i=0) is None  # not booted: nothing to stop, overlay kept
    finally:
        link.close(30)
    assert link.proc.returncode == 0


def test_differing_images_on_two_nodes_are_refused_naming_both():
    from types import SimpleNamespace

    env = object.__new__(VclusterEnvironment)
    env.name, env.image = "c", "/shared/bench.qcow2"
    env.members = [SimpleNamespace(node="n1", image_sha256="a" * 64),
                   SimpleNamespace(node="n2", image_sha256="a" * 64)]
    env._same_image()  # the same file: fine
    env.members.append(SimpleNamespace(node="n3", image_sha256="b" * 64))
    with pytest.raises(EnvError, match=r"differs between node n1 \(sha256 aaaaaaaaaaaa\) and "
                                       r"node n3 \(sha256 bbbbbbbbbbbb\)"):
        env._same_image()


def test_image_cluster_ranks_are_read_from_their_rank_lines_with_node_and_host_cpu():
    """An image guest has no /run/vhpc-rank: each rank's guest comes from the host name on its
    VHPC-RANK line, its vCPU's host CPU from that guest's node; a rank in another guest than
    planned, or on a host outside the cluster, is a mismatch."""
    from types import SimpleNamespace

    def member(node: str, cpu: int):
        threads = [{"vcpu": 0, "allowed": [cpu], "last_cpu": cpu}]
        return SimpleNamespace(node=node, guest=SimpleNamespace(read_affinity=lambda: threads))

    env = object.__new__(VclusterEnvironment)
    env.members = [member("vhpc1", 3), member("vhpc2", 5)]
    env.ranks_per_vm, env.total_ranks = 1, 2
    out = ("VHPC-RANK rank=1 host=vhpc-vm1.local cpu=0 cpus=0 tasks=2\n"
           "VHPC-RANK rank=0 host=vhpc-vm0 cpu=0 cpus=0 tasks=2\n")
    ranks = env._image_ranks(out)
    assert [(r["rank"], r["vm"], r["node"], r["vcpu"], r["host_cpu"]) for r in ranks] == [
        (0, 0, "vhpc1", 0, 3), (1, 1, "vhpc2", 0, 5)]
    argv = ["mpirun", "-np", "2", "./pingpong"]
    assert env._rank_mismatches(ranks, argv, 3) == []
    swapped = env._image_ranks(out.replace("host=vhpc-vm1.local", "host=vhpc-vm0"))
    assert env._rank_mismatches(swapped, argv, 3) == ["rank 1 ran in vm0, planned vm1"]
    stray = env._image_ranks(out.replace("host=vhpc-vm1.local", "host=login1"))
    assert env._rank_mismatches(stray, argv, 3) == ["1 of 2 ranks reported where they ran"]


def test_each_guest_gets_an_overlay_its_address_and_the_clusters_key(tmp_path):
    """Two guests from one (partitioned, raw) image: each its own overlay, the cluster's host
    name, MAC and address in its seed's runcmd, the same cluster key pair installed for the
    login and authorised; QEMU's two NICs (vhpc's ssh forward, the segment) do not clash."""
    require_tool("cloud-localds"), require_tool("qemu-img")
    disk = tmp_path / "disk.img"
    data = bytearray(4 << 20)
    data[510:512] = b"\x55\xaa"
    disk.write_bytes(bytes(data))
    env = kind.build("vcluster", "c", VclusterOptions(image=str(disk), vms=2, accel="tcg",
                                                     policy="float"), HostFacts.live())
    try:
        assert [m.hostname for m in env.members] == ["vhpc-vm0", "vhpc-vm1"]
        boots = [m._image_boot() for m in env.members]
        assert boots[0].overlay != boots[1].overlay and all(b.overlay.is_file() for b in boots)
        keys = [b.seed.authorized for b in boots]
        assert keys[0] == keys[1] and len(keys[0]) == 1
        assert boots[0].seed.kernel_hash == boots[1].seed.kernel_hash is not None
        env._net()
        for i, (m, boot) in enumerate(zip(env.members, boots)):
            folder = tmp_path / f"seed{i}"
            folder.mkdir()
            userimage.write_seed(folder, boot.hostname, boot.seed)
            user = yaml.safe_load((folder / "user-data").read_text())
            assert user["users"][0]["ssh_authorized_keys"][1] == boot.seed.authorized[0]
            netcfg = yaml.safe_load(_member(folder / "seed.iso", "network-config"))
            assert netcfg["ethernets"]["vhpc0"] == {
                "match": {"macaddress": net.mac(i)}, "set-name": "vhpc0",
                "addresses": [f"{net.address(i)}/24"]}
            meta = yaml.safe_load(_member(folder / "seed.iso", "meta-data"))
            assert meta["dsmode"] == "local" and meta["local-hostname"] == f"vhpc-vm{i}"
            (cmd,) = user["runcmd"]
            assert cmd[:3] == ["sh", "-c", images.NET_SCRIPT]
            assert cmd[4:6] == [net.mac(i), f"{net.address(i)}/24"]
            assert "10.77.0.1 vhpc-vm0\n10.77.0.2 vhpc-vm1" == cmd[6]
            key, config = user["write_files"]
            assert key["path"] == "/home/vhpc/.ssh/vhpc_cluster" and key["defer"] is True
            assert "PRIVATE KEY" in key["content"] and key["permissions"] == "0600"
            assert "IdentityFile ~/.ssh/vhpc_cluster" in config["content"]
            argv = userimage.image_argv(userimage.GuestConfig(extra_args=m.extra_args),
                                        boot, tmp_path, folder / "seed.iso", 2222)
            ids = [a.split("id=")[1].split(",")[0] for k, a in enumerate(argv[1:])
                   if argv[k] == "-netdev"]
            assert ids == ["vhpcssh", "net0"]
            assert f"virtio-net-pci,netdev=net0,mac={net.mac(i)}" in argv
    finally:
        env.close()
    assert not any(b.overlay.exists() for b in boots)


def _member(iso: Path, name: str) -> str:
    return subprocess.run([require_tool("isoinfo"), "-R", "-i", str(iso), "-x", f"/{name}"],
                          check=True, capture_output=True, text=True).stdout


def test_the_runcmd_gives_the_nic_with_the_guests_mac_its_address(tmp_path):
    """NET_SCRIPT run as cloud-init runs it (root, sh), in a network and mount namespace of
    its own: the NIC with the guest's MAC gets the cluster address and comes up, /etc/hosts
    (here a file bound over it) gets every guest."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a network namespace")
    unshare, ip = require_tool("unshare"), require_tool("ip")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    lines = "10.77.0.1 vhpc-vm0\n10.77.0.2 vhpc-vm1"
    setup = (f"mount -t sysfs none /sys && mount --bind {hosts} /etc/hosts && "
             f"{ip} tuntap add d7 mode tap && {ip} tuntap add d8 mode tap && "
             f"{ip} link set d8 address {net.mac(1)} && "
             'sh -c "$0" sh "$1" "$2" "$3" && ' + f"{ip} -o -4 addr show")
    res = subprocess.run([unshare, "--net", "--mount", "sh", "-c", setup, images.NET_SCRIPT,
                          net.mac(1), f"{net.address(1)}/24", lines], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    addrs = [ln.split()[1:4] for ln in res.stdout.splitlines()]
    assert ["d8", "inet", "10.77.0.2/24"] in addrs and not any(a[0] == "d7" for a in addrs)
    assert hosts.read_text() == "127.0.0.1 localhost\n" + lines + "\n"
