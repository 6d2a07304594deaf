"""vcluster:image=FILE: N guests from one image, an overlay each, on the private
segment with the cluster's addresses, names and one ssh key for the MPI launcher, given by
cloud-init from each guest's seed.  Booting the cluster takes minutes under TCG:
tests/test_userimage_boot.py (VHPC_VM_TESTS=1)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import require_tool
from vhpc.core.errors import HostError
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


def test_a_cluster_of_images_stays_on_one_host(tmp_path):
    host = dataclasses.replace(HostFacts.live(), compute_nodes=2)
    with pytest.raises(HostError, match="boots its guests on one host"):
        kind.plan("vcluster", "c", VclusterOptions(image=str(tmp_path / "x.qcow2")), host)


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
