"""vm:image= with backend=libvirt: the domain XML booting a user's image (the
overlay as a virtio disk, the cloud-init seed as a read-only virtio disk, the image's kernel,
SeaBIOS or OVMF, sshd forwarded from a loopback port, the placement's pins and NUMA policy) is valid
for libvirt's own schema and is accepted by a real libvirtd (define, read back, undefine).
A boot of a real image through libvirt takes minutes under TCG: tests/test_userimage_boot.py
(VHPC_VM_TESTS=1)."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import require_tool
from test_libvirt import libvirt_uri, no_domain_left, vhpc_domains  # noqa: F401 - fixtures
from vhpc import placement as P
from vhpc import topology as T
from vhpc.environments.vm.backends import libvirt_xml as lx
from vhpc.environments.vm.backends.libvirt import QEMU_NS, image_domain
from vhpc.environments.vm.options import VmOptions
from vhpc.environments.vm.userimage import SEABIOS, ImageBoot


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A user's image, an overlay over it (qemu-img) and a seed file, as a session has them."""
    qemu_img = require_tool("qemu-img")
    image, overlay = tmp_path / "bench.qcow2", tmp_path / "run" / "overlay.qcow2"
    overlay.parent.mkdir()
    subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", str(image), "64M"], check=True)
    subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(image),
                    str(overlay)], check=True)
    seed = tmp_path / "run" / "seed.iso"
    seed.write_bytes(b"\0" * 2048)
    return image, overlay, seed


def _domain(tmp_path, placement, kernel: bool, name="vhpc-img-1-0") -> tuple[ET.Element, Path]:
    image, overlay, seed = _files(tmp_path)
    boot = ImageBoot(overlay, "vhpc-img", tmp_path / "vmlinuz" if kernel else None,
                     tmp_path / "initrd.img" if kernel else None,
                     "root=/dev/vda rw console=ttyS0" if kernel else "")
    dom = image_domain(placement, accel="tcg", emulator_cpus=[3], name=name, image=boot,
                       workdir=tmp_path / "run", seed=seed, port=40123)
    return dom, image


def _validate(tmp_path: Path, dom: ET.Element) -> None:
    path = tmp_path / "dom.xml"
    path.write_text(lx.to_text(dom))
    res = subprocess.run([require_tool("virt-xml-validate"), str(path), "domain"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("kernel", [True, False], ids=["boot=kernel", "boot=firmware"])
def test_image_domain_is_valid_libvirt_xml_with_the_placement(tmp_path, kernel):
    topo = T.from_synthetic("pack:2 numa:1 l3:1 core:2 pu:1")
    plan = P.place(topo, P.PlacementRequest(vcpus=2, memory_mib=1024, policy="span:2",
                                            guest_numa="mirror"))
    dom, image = _domain(tmp_path, plan, kernel)
    _validate(tmp_path, dom)
    text = lx.to_text(dom)
    assert str(image) not in text  # libvirt and QEMU get the overlay, never the image
    disk, seed = dom.findall("devices/disk")
    assert disk.find("source").get("file").endswith("run/overlay.qcow2")
    assert (disk.find("driver").get("type"), disk.find("target").get("dev")) == ("qcow2", "vda")
    assert disk.find("readonly") is None
    assert seed.find("readonly") is not None and seed.find("source").get("file").endswith(
        "seed.iso")
    assert (seed.find("driver").get("type"), seed.find("target").get("dev")) == ("raw", "vdb")
    if kernel:
        assert dom.findtext("os/cmdline") == "root=/dev/vda rw console=ttyS0"
        assert dom.find("os/loader") is None
    else:
        assert dom.find("os/kernel") is None and dom.findtext("os/loader") == str(SEABIOS)
        assert dom.find("os/boot").get("dev") == "hd"
    args = [a.get("value") for a in dom.findall(f"{{{QEMU_NS}}}commandline/{{{QEMU_NS}}}arg")]
    assert "user,id=vhpcnet,restrict=on,hostfwd=tcp:127.0.0.1:40123-:22" in args
    assert "virtio-net-pci,netdev=vhpcnet,bus=pci.0,addr=0x1f" in args  # clear of libvirt's
    req = lx.requested(dom)  # the placement, as for vhpc's own libvirt guests
    assert req["vcpu_pins"] == {0: [0], 1: [2]} and req["emulator_pins"] == [3]
    assert req["memnodes"] == {0: {"mode": "strict", "nodes": [0]},
                               1: {"mode": "strict", "nodes": [1]}}
    assert dom.find("devices/serial/source").get("path").endswith("run/console.log")


def test_image_is_accepted_with_backend_libvirt():
    o = VmOptions(image="/x/bench.qcow2", backend="libvirt", vcpus=2)
    assert o.backend_name == "libvirt" and o.image == "/x/bench.qcow2"
    with pytest.raises(ValueError, match="give either image= or domain_xml="):
        VmOptions(image="/x/bench.qcow2", domain_xml="/x/d.xml")


def test_libvirtd_defines_the_image_domain_as_built(no_domain_left, tmp_path):  # noqa: F811
    """A real libvirtd (the suite's) defines the domain, reads back the overlay, the seed
    disk, the pins and the port forward as given, and undefines it: nothing is left."""
    from vhpc.environments.options import HostFacts

    virsh = require_tool("virsh")
    host = HostFacts.live()
    plan = P.place(host.topology, VmOptions(vcpus=1, memory=512).request(host.cpus))
    dom, _ = _domain(tmp_path, plan, kernel=False, name="vhpc-img-define-0")
    path = tmp_path / "dom.xml"
    path.write_text(lx.to_text(dom))
    uri = no_domain_left
    res = subprocess.run([virsh, "-c", uri, "define", str(path)], capture_output=True, text=True)
    try:
        assert res.returncode == 0, res.stderr
        back = ET.fromstring(subprocess.run([virsh, "-c", uri, "dumpxml", "vhpc-img-define-0"],
                                            capture_output=True, text=True, check=True).stdout)
        assert {d.find("target").get("dev"): d.find("source").get("file") for d in back.findall(
            "devices/disk")} == {"vda": str(tmp_path / "run" / "overlay.qcow2"),
                                 "vdb": str(tmp_path / "run" / "seed.iso")}
        assert lx.requested(back)["vcpu_pins"] == lx.requested(dom)["vcpu_pins"]
        args = [a.get("value") for a in back.iter(f"{{{QEMU_NS}}}arg")]
        assert any("hostfwd=tcp:127.0.0.1:40123-:22" in a for a in args)
    finally:
        subprocess.run([virsh, "-c", uri, "undefine", "vhpc-img-define-0"], capture_output=True)
    assert vhpc_domains(uri) == []
