"""A user's image (``vm:image=FILE``) booted by libvirt (``vm:backend=libvirt``).

The guest is the one the qemu backend boots from the image (environments/vm/userimage.py:
the overlay, a cloud-init NoCloud seed per boot, sshd on a loopback port forward), defined as
a transient libvirt domain.  :func:`image_domain` builds its XML on vhpc's generated domain
(:func:`~.libvirt_xml.generated_domain`: ``<vcpu>``, ``<cputune>`` with ``<vcpupin>`` and
``<emulatorpin>``, ``<numatune>``, ``<cpu><numa>``, ``<memoryBacking>``), adding
(https://libvirt.org/formatdomain.html):

* the overlay as a virtio disk (``vda``; libvirt reads its backing image, which QEMU opens
  read-only, from the overlay's own header) and the seed as a read-only virtio disk
  (``vdb``);
* the image's kernel, initramfs and command line (``boot=kernel``), or SeaBIOS as the
  ``<loader>`` and the disk as the boot device (``boot=firmware``), or OVMF's code as a
  read-only ``pflash`` ``<loader>`` with the guest's private copy of its variable store as
  ``<nvram>`` (``boot=uefi``);
* the serial console into the session's ``console.log`` and a virtio RNG;
* QEMU's user-mode network with ``restrict=on`` and the one forward
  ``127.0.0.1:PORT`` → guest port 22, given as ``<qemu:commandline>`` arguments
  (https://libvirt.org/drvqemu.html#pass-through-of-arbitrary-qemu-commands): libvirt 9's own
  ``<interface type='user'>`` forwards ports only through passt, which Debian 12's libvirt
  host here does not have; a bridge or libvirt network would change the host; the NIC sits at
  a fixed PCI slot (:data:`NIC_SLOT`), clear of the slots libvirt gives its own devices;
* a DAC ``<seclabel>`` running QEMU as vhpc's own user, which owns the overlay's folder.

:class:`LibvirtImageGuest` is one boot of it: :class:`~.libvirt.LibvirtGuest` for the domain's
life (create, pause, resume, destroy, libvirt's read-back) and
:class:`~vhpc.environments.vm.userimage.ReachedOverSsh` for the rest.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

from vhpc.environments.vm.backends import libvirt_xml as lx
from vhpc.environments.vm.backends.base import GuestSession
from vhpc.environments.vm.backends.libvirt import (LibvirtGuest, _libvirt, qemu_pid,
                                                   vcpu_threads)
from vhpc.environments.vm.userimage import (VARS_NAME, ImageBoot, ReachedOverSsh, firmware,
                                            ovmf)
from vhpc.host.owned import start_ticks

#: XML namespace of libvirt's QEMU pass-through (``<qemu:commandline>``).
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)
#: PCI slot of the NIC given as a QEMU argument.  QEMU creates it before libvirt's own devices,
#: which libvirt numbers from slot 2 upward: left to QEMU it took slot 2 and libvirt's disk
#: failed ("PCI: slot 2 function 0 not available"), so it gets the ``pc`` bus's last slot.
NIC_SLOT = 0x1F


def image_domain(placement, *, accel: str, emulator_cpus: list[int] | None, name: str,
                 image: ImageBoot, workdir: Path, seed: Path, port: int) -> ET.Element:
    """The domain XML element booting ``image`` on ``placement`` (module docstring): domain
    ``name``, the seed ISO ``seed``, sshd forwarded from ``127.0.0.1:port``, the console in
    ``workdir/console.log``."""
    dom = lx.generated_domain(placement, accel=accel, emulator_cpus=emulator_cpus)
    name_el = ET.Element("name")
    name_el.text = name
    dom.insert(0, name_el)
    os_el = dom.find("os")
    if image.kernel is not None:
        for tag, value in (("kernel", image.kernel), ("initrd", image.initrd),
                           ("cmdline", image.append)):
            ET.SubElement(os_el, tag).text = str(value)
    elif image.firmware == "ovmf":  # the guest's own variable store, copied in its workdir
        code, template = ovmf()
        ET.SubElement(os_el, "loader", readonly="yes", type="pflash").text = str(code)
        ET.SubElement(os_el, "nvram", template=str(template)).text = str(workdir / VARS_NAME)
        ET.SubElement(os_el, "boot", dev="hd")
    else:
        ET.SubElement(os_el, "loader", readonly="yes", type="rom").text = str(firmware())
        ET.SubElement(os_el, "boot", dev="hd")
    devices = dom.find("devices")
    disk = ET.SubElement(devices, "disk", type="file", device="disk")
    ET.SubElement(disk, "driver", name="qemu", type="qcow2")
    ET.SubElement(disk, "source", file=str(image.overlay))
    ET.SubElement(disk, "target", dev="vda", bus="virtio")
    # the seed as a read-only virtio disk, as the qemu backend gives it: an IDE cdrom is not
    # found by the guest's kernel when OVMF started it (i440fx, measured), so cloud-init
    # never saw the seed under boot=uefi
    seed_disk = ET.SubElement(devices, "disk", type="file", device="disk")
    ET.SubElement(seed_disk, "driver", name="qemu", type="raw")
    ET.SubElement(seed_disk, "source", file=str(seed))
    ET.SubElement(seed_disk, "target", dev="vdb", bus="virtio")
    ET.SubElement(seed_disk, "readonly")
    serial = ET.SubElement(devices, "serial", type="file")
    ET.SubElement(serial, "source", path=str(workdir / "console.log"))
    ET.SubElement(serial, "target", port="0")
    rng = ET.SubElement(devices, "rng", model="virtio")
    ET.SubElement(rng, "backend", model="random").text = "/dev/urandom"
    sec = ET.SubElement(dom, "seclabel", type="static", model="dac", relabel="no")
    ET.SubElement(sec, "label").text = f"+{os.getuid()}:+{os.getgid()}"
    cmd = ET.SubElement(dom, f"{{{QEMU_NS}}}commandline")
    for arg in ("-netdev", f"user,id=vhpcnet,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:22",
                "-device", f"virtio-net-pci,netdev=vhpcnet,bus=pci.0,addr={NIC_SLOT:#x}"):
        ET.SubElement(cmd, f"{{{QEMU_NS}}}arg", value=arg)
    return dom


class LibvirtImageGuest(ReachedOverSsh, LibvirtGuest):
    """One boot of a user's image as a transient libvirt domain.  ``build(workdir, seed,
    port)`` makes its XML (:func:`image_domain`) once the seed and port of this boot exist;
    ``xml`` and ``name`` are set then."""

    def __init__(self, conn, boot_timeout: float, image: ImageBoot,
                 build: Callable[[Path, Path, int], ET.Element]):
        GuestSession.__init__(self)
        self.conn, self.dom, self.boot_timeout = conn, None, boot_timeout
        self.qemu_pid: int | None = None
        self.image, self._build = image, build
        self.name: str | None = None
        self.xml: str | None = None

    def boot(self) -> float:
        """Create the domain (running) and wait for the guest (:meth:`ReachedOverSsh.
        _boot_image`).  Raises EnvError with libvirt's reason when it refuses the domain."""
        libvirt = _libvirt()

        def start(seed: Path, deadline: float) -> None:
            from vhpc.environments.base import EnvError

            dom_el = self._build(self.workdir, seed, self.port)
            self.name = dom_el.findtext("name")
            lx.owner_metadata(dom_el, os.getpid(), start_ticks(os.getpid()) or "")
            self.xml = lx.to_text(dom_el)
            try:
                self.dom = self.conn.createXML(self.xml, 0)
            except libvirt.libvirtError as exc:
                raise EnvError(f"libvirt could not start the domain: "
                               f"{exc.get_error_message()}") from None
            self.qemu_pid = qemu_pid(self.name)
            if self.qemu_pid is None:
                raise EnvError("libvirt started the domain but its QEMU process is not visible")
            self.vcpu_threads = vcpu_threads(self.qemu_pid)

        return self._boot_image(start, self.boot_timeout)

    def kill(self) -> None:
        """Sync and close the ssh session, then destroy the domain as
        :meth:`LibvirtGuest.kill` does.  Idempotent; never raises."""
        self._close_ssh()
        LibvirtGuest.kill(self)
