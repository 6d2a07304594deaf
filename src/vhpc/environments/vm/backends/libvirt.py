"""The ``libvirt`` hypervisor backend (``vm:backend=libvirt``): guests started by libvirt.

The guest is the one the qemu backend boots (vhpc's kernel and initramfs, the host root
shared read-only, the guest agent on a virtio-serial port), but defined as a *transient*
libvirt domain (``virDomainCreateXML``) from the same placement: ``<vcpu>``, ``<cputune>``
(``<vcpupin>``, ``<emulatorpin>``), ``<numatune>``, ``<cpu><numa>`` cells and
``<memoryBacking>`` hugepages (:mod:`vhpc.environments.vm.backends.libvirt_xml`).  libvirt applies the
placement; vhpc reads it back through libvirt (``virDomainGetVcpuPinInfo``,
``virDomainGetVcpus``, ``virDomainGetEmulatorPinInfo``, ``virDomainGetNumaParameters``,
``virDomainMemoryStats``: what ``virsh vcpupin/vcpuinfo/emulatorpin/numatune/dommemstat``
print) and from the host (``/proc/PID/task/TID/status``, ``/proc/PID/numa_maps``) and compares
both with the domain XML's request: any difference is a placement mismatch, as for ``vm``.

``vm:domain_xml=FILE`` runs trials in the user's own domain instead: vhpc changes only what it
needs (:func:`libvirt_xml.add_vhpc_parts`) and records the XML as given, the changes, and the
XML libvirt ran.

Pause/resume are ``virDomainSuspend``/``virDomainResume``.  The domain is destroyed on every
exit path (transient domains are undefined by libvirt when destroyed); a domain that is still
defined afterwards is undefined.  Each domain carries its owner's pid in ``<metadata>``: when
vhpc was killed (SIGKILL), the next libvirt environment to start finds the ``vhpc-`` domains
whose owner is gone, removes them and says so on stderr.

A user's image (``vm:image=FILE``) is booted by this backend too:
The guest is the one the qemu backend boots from the image (environments/vm/userimage.py:
the overlay, a cloud-init NoCloud seed per boot, sshd on a loopback port forward), defined as
a transient libvirt domain.  :func:`image_domain` builds its XML on vhpc's generated domain
(:func:`~.libvirt_xml.generated_domain`: ``<vcpu>``, ``<cputune>`` with ``<vcpupin>`` and
``<emulatorpin>``, ``<numatune>``, ``<cpu><numa>``, ``<memoryBacking>``), adding
(https://libvirt.org/formatdomain.html):

* the overlay as a virtio disk (``vda``) whose backing chain is given explicitly, ending at
  the checked image (which QEMU opens read-only; the overlay's header is not followed), and
  the seed as a read-only virtio disk
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

:class:`LibvirtImageGuest` is one boot of it: :class:`LibvirtGuest` for the domain's
life (create, pause, resume, destroy, libvirt's read-back) and
:class:`~vhpc.environments.vm.userimage.ReachedOverSsh` for the rest.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable

import vhpc.placement
from vhpc.core import records
from vhpc.environments.vm import guestimage
from vhpc.host import facts
from vhpc.host.owned import start_ticks
from vhpc.environments.vm.backends import libvirt_xml as lx
from vhpc.environments.base import EnvError
from vhpc.environments.vm.agent import AgentChannel
from vhpc.environments.vm.backends.base import (BACKENDS, BootRequest, GuestSession,
                                                HypervisorBackend, ProbeResult)
from vhpc.environments.vm.backends.qemu import probe_kvm, require_qemu
from vhpc.core.cpulist import format_cpu_list
from vhpc.environments.vm.backends.base import PlacementExport
from vhpc.host.doctor import Component
from vhpc.environments.vm.guestimage import guest_shares, kernel_cmdline
from vhpc.environments.vm.userimage import (VARS_NAME, ImageBoot, ReachedOverSsh, firmware,
                                            ovmf)

#: Prefix of every domain name vhpc creates (leftover detection looks for it).
PREFIX = "vhpc-"
#: vCPU thread names QEMU sets with ``debug-threads=on`` (libvirt always asks for it).
VCPU_THREAD_RE = re.compile(r"^CPU (\d+)/(TCG|KVM)$")


def _libvirt():
    """The libvirt-python module, from the optional extra ``vhpc[libvirt]`` (it builds against
    libvirt's headers: Debian's libvirt-dev and pkg-config).  Raises ValueError naming the
    extra to install."""
    try:
        import libvirt
    except ImportError:
        raise ValueError("backend=libvirt needs the libvirt extra: pip install 'vhpc[libvirt]' "
                         "(or pipx inject vhpc libvirt-python; apt-get install libvirt-dev "
                         "pkg-config first)") from None
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors come as exceptions
    return libvirt


def default_uri() -> str:
    """``$LIBVIRT_DEFAULT_URI`` or ``qemu:///system`` (libvirt's own default for root)."""
    return os.environ.get("LIBVIRT_DEFAULT_URI") or "qemu:///system"


def connect(uri: str):
    """Open a libvirt connection.  Raises EnvError saying how to start a daemon."""
    libvirt = _libvirt()
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise EnvError(f"cannot connect to libvirt at {uri}: {exc.get_error_message()} "
                       "(start libvirtd, e.g. python -m vhpc.environments.vm.backends.libvirtd start DIR, "
                       "and pass its URI as uri= or LIBVIRT_DEFAULT_URI; docs/libvirt.md)") from None


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (state field of /proc/PID/stat)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


def remove_leftovers(conn, out=None) -> list[str]:
    """Destroy (and undefine) ``vhpc-`` domains whose owning vhpc process is gone (killed
    with SIGKILL, so its cleanup never ran); says so on ``out``.  Returns their names.
    Domains of live vhpc processes and domains without vhpc's metadata are left alone."""
    libvirt = _libvirt()
    removed = []
    for dom in conn.listAllDomains(0):
        name = dom.name()
        if not name.startswith(PREFIX):
            continue
        try:
            owner = lx.read_owner(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, lx.OWNER_NS))
        except libvirt.libvirtError:
            continue
        if owner is None or start_ticks(owner[0]) == owner[1]:
            continue
        workdir = _agent_workdir(dom)
        destroy(dom)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        removed.append(name)
        print(f"vhpc: removed leftover libvirt domain {name} (its vhpc process {owner[0]} "
              "is gone)", file=out or sys.stderr)
    return removed


def _agent_workdir(dom) -> Path | None:
    """The ``vhpc-guest-*`` work directory of a vhpc domain (where its agent socket or, for a
    user's image, its console log lives), None when the domain has none."""
    try:
        el = ET.fromstring(dom.XMLDesc(0))
    except Exception:  # noqa: BLE001 - libvirtError or a parse error: nothing to clean
        return None
    for ch in el.findall("devices/channel") + el.findall("devices/serial"):
        target, source = ch.find("target"), ch.find("source")
        if target is not None and source is not None and (
                ch.tag == "serial" or target.get("name") == "vhpc.agent"):
            parent = Path(source.get("path", "")).parent
            if parent.name.startswith("vhpc-guest-"):
                return parent
    return None


def destroy(dom) -> None:
    """Destroy ``dom`` if running and undefine it if still defined; never raises."""
    libvirt = _libvirt()
    for step in (dom.destroy, dom.undefine):
        try:
            if step == dom.destroy and not dom.isActive():
                continue
            step()
        except libvirt.libvirtError:
            pass


def qemu_pid(name: str) -> int | None:
    """PID of the QEMU process of domain ``name`` (libvirt starts it with ``-name
    guest=NAME,...``), found in /proc; None when not running."""
    want = f"guest={name},".encode()
    return next((pid for pid, argv in facts.process_cmdlines()
                 if b"-name" in argv and any(a.startswith(want) for a in argv)), None)


def vcpu_threads(pid: int) -> dict[int, int]:
    """vCPU index → host thread id, from the thread names (``CPU N/TCG`` or ``CPU N/KVM``)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            m = VCPU_THREAD_RE.match((task / "comm").read_text().strip())
        except OSError:
            continue
        if m:
            out[int(m.group(1))] = int(task.name)
    return out


class LibvirtGuest(GuestSession):
    """One session of a transient libvirt domain.  Boot, pause/resume and kill go through
    libvirt; commands go through the shared guest agent channel.  ``xml`` is the domain XML as
    submitted, ``name`` the domain's name, ``dom`` the libvirt domain (None when not
    running)."""

    def __init__(self, conn, boot_timeout: float, build):
        """``build(workdir) -> ET.Element`` makes the domain XML (sockets live in ``workdir``);
        its errors propagate after the work directory is removed."""
        super().__init__()
        self.conn, self.dom, self.boot_timeout = conn, None, boot_timeout
        self.qemu_pid: int | None = None
        try:
            dom_el = build(self.workdir)
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        self.name = dom_el.findtext("name")
        lx.owner_metadata(dom_el, os.getpid(), start_ticks(os.getpid()) or "")
        self.xml = lx.to_text(dom_el)

    @property
    def pid(self) -> int | None:
        """The domain's QEMU process (found in /proc after creation)."""
        return self.qemu_pid

    def _exit_status(self) -> int | None:
        """None while the QEMU process exists, then 0 (its real status belongs to libvirtd)."""
        return None if self.qemu_pid is not None and _running(self.qemu_pid) else 0

    def boot(self) -> float:
        """Create the domain paused, connect to the agent socket, resume, wait for the
        agent's ready message.  Raises EnvError (the domain is destroyed first)."""
        libvirt = _libvirt()
        t0 = time.monotonic()
        deadline = t0 + self.boot_timeout
        try:
            self.dom = self.conn.createXML(self.xml, libvirt.VIR_DOMAIN_START_PAUSED)
            self.qemu_pid = qemu_pid(self.name)
            if self.qemu_pid is None:
                raise EnvError("libvirt started the domain but its QEMU process is not visible")
            self.agent = AgentChannel.connect(self.workdir / "agent.sock", deadline,
                                              self._exit_status)
            self.dom.resume()
            self.agent.wait_ready(deadline)
            self.vcpu_threads = vcpu_threads(self.qemu_pid)
        except BaseException as exc:
            detail = self.failure_detail()
            self.kill()
            if isinstance(exc, libvirt.libvirtError):
                raise EnvError(f"libvirt could not start the domain: "
                               f"{exc.get_error_message()}{detail}") from None
            if isinstance(exc, EnvError):  # GuestHung stays GuestHung: the caller may retry
                raise type(exc)(f"{exc}{detail}") from None
            if isinstance(exc, OSError):
                raise EnvError(f"guest failed to boot: {exc}{detail}") from None
            raise
        self.boot_seconds = time.monotonic() - t0
        return self.boot_seconds

    def alive(self) -> bool:
        """True while libvirt reports the domain active."""
        libvirt = _libvirt()
        try:
            return self.dom is not None and bool(self.dom.isActive())
        except libvirt.libvirtError:
            return False

    def pause(self) -> None:
        """``virDomainSuspend`` (vCPUs stop, guest state is kept)."""
        libvirt = _libvirt()
        if self.alive() and self.dom.state()[0] != libvirt.VIR_DOMAIN_PAUSED:
            self.dom.suspend()

    def resume(self) -> None:
        """``virDomainResume``."""
        libvirt = _libvirt()
        if self.alive() and self.dom.state()[0] == libvirt.VIR_DOMAIN_PAUSED:
            self.dom.resume()

    def kill(self) -> None:
        """Destroy (and undefine) the domain, wait up to 3 s for its QEMU to go, close the
        channel, remove the work directory.  Idempotent; never raises."""
        if self.dom is None and self.name:
            try:
                self.dom = self.conn.lookupByName(self.name)
            except Exception:  # noqa: BLE001 - libvirtError: no such domain, nothing to do
                self.dom = None
        if self.dom is not None:
            destroy(self.dom)
        self.dom = None
        deadline = time.monotonic() + 3.0
        while self.qemu_pid is not None and _running(self.qemu_pid) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        self.release()

    def libvirt_readback(self) -> dict[str, Any]:
        """What libvirt reports for the running domain: ``vcpupin`` (vCPU → allowed pCPUs),
        ``vcpuinfo`` ([{vcpu, state, cpu, cpu_time_s}]), ``emulatorpin``, ``numatune``
        ({mode, nodeset}) and ``dommemstat`` (KiB).  Parts libvirt cannot give are
        ``{"unavailable": reason}``."""
        libvirt = _libvirt()

        def cpus(mask) -> list[int]:
            """libvirt's per-CPU boolean map → the CPU numbers set in it."""
            return [i for i, on in enumerate(mask) if on]

        out: dict[str, Any] = {}
        calls = {
            "vcpupin": lambda: {v: cpus(m) for v, m in enumerate(self.dom.vcpuPinInfo(0))},
            "vcpuinfo": lambda: [{"vcpu": n, "state": s, "cpu": c, "cpu_time_s": t / 1e9}
                                 for n, s, t, c in self.dom.vcpus()[0]],
            "emulatorpin": lambda: cpus(self.dom.emulatorPinInfo(0)),
            "numatune": lambda: (lambda p: {
                "mode": lx.NUMATUNE_MODES.get(p.get("numa_mode"), p.get("numa_mode")),
                "nodeset": p.get("numa_nodeset", "")})(self.dom.numaParameters(0)),
            "dommemstat": lambda: dict(self.dom.memoryStats()),
        }
        for key, call in calls.items():
            try:
                out[key] = call()
            except libvirt.libvirtError as exc:
                out[key] = {"unavailable": exc.get_error_message()}
        return out


def readback_mismatches(req: dict, lv: dict, vcpus: list[dict], memory: dict | None,
                        guest_numa: list[dict] | None) -> list[str]:
    """Differences between a domain XML's request (:func:`libvirt_xml.requested`) and the
    read-back: libvirt's ``lv`` (:meth:`LibvirtGuest.libvirt_readback`), the vCPU threads'
    host affinity ``vcpus`` (GuestSession.read_affinity), QEMU's memory per host node ``memory``
    (numa.parse_numa_maps) and the guest's own NUMA nodes; [] when all agree."""
    out = []
    pins = lv.get("vcpupin") if isinstance(lv.get("vcpupin"), dict) else {}
    for v, want in sorted(req["vcpu_pins"].items()):
        if v in pins and pins[v] != want:
            out.append(f"libvirt reports vCPU {v} pinned to {pins[v]}, the domain asked {want}")
    for v in vcpus:
        want = req["vcpu_pins"].get(v["vcpu"])
        if want is not None and v["allowed"] != want:
            out.append(f"vCPU {v['vcpu']} thread may run on {v['allowed']}, the domain asked {want}")
    emu = lv.get("emulatorpin")
    if req["emulator_pins"] is not None and isinstance(emu, list) and emu != req["emulator_pins"]:
        out.append(f"libvirt reports emulator threads on {emu}, the domain asked {req['emulator_pins']}")
    nt = lv.get("numatune")
    if req["memory_nodes"] is not None and isinstance(nt, dict) and "nodeset" in nt:
        got = lx.parse_cpuset(nt["nodeset"]) if nt["nodeset"] else []
        if got != req["memory_nodes"] or nt["mode"] != req["memory_mode"]:
            out.append(f"libvirt reports numatune {nt['mode']} {got}, the domain asked "
                       f"{req['memory_mode']} {req['memory_nodes']}")
    allowed = set(req["memory_nodes"] or []) | {n for m in req["memnodes"].values() for n in m["nodes"]}
    if memory and allowed and req["memory_mode"] in ("strict", "restrictive", None):
        for m in memory["mappings"]:
            for n, mib in m["node_mib"].items():
                if n not in allowed and mib >= 1:
                    out.append(f"{mib:.0f} MiB of guest memory on host node {n}, the domain "
                               f"asked nodes {sorted(allowed)}")
    cells = max(1, len(req["cells"]))
    if guest_numa is not None and len(guest_numa) != cells:
        out.append(f"guest sees {len(guest_numa)} NUMA nodes, the domain defines {cells}")
    return out




#: Largest ``domain_xml`` file read (bytes): a domain definition is a few KiB.
MAX_DOMAIN_XML = 1 << 20


def read_domain_xml(path: str) -> str:
    """The text of the user's ``domain_xml`` file: a regular file of at most
    :data:`MAX_DOMAIN_XML` bytes, UTF-8 (core.paths.read_small_text: ``/dev/zero`` is never
    read whole).  Raises ValueError (one line naming the option) otherwise."""
    from vhpc.core.paths import read_small_text

    return read_small_text(path, MAX_DOMAIN_XML, f"domain_xml={path}",
                           "give the path of a libvirt domain XML file")


@BACKENDS.register("libvirt")
class LibvirtBackend(HypervisorBackend):
    """``vm`` with ``backend=libvirt`` (module docstring).  Its own options: ``uri`` (libvirt
    connection URI; default :func:`default_uri`) and ``domain_xml`` (a file with the user's
    domain; then the vCPUs, memory, accelerator and placement come from the file, and the
    vCPUs float as far as vhpc's plan knows).  Options it cannot serve (``corunner``,
    ``slowdown``) are refused at parse (``unsupported_options``).  Raises ValueError for an
    unreadable or invalid domain XML, or a missing libvirt-python or QEMU."""

    own_options = ("domain_xml", "uri")
    components = (
        Component("libvirtd", "vm:backend=libvirt", "cmd:libvirtd", "libvirt-daemon-system",
                  "libvirt-daemon"),
        Component("libvirt-python", "vm:backend=libvirt", "module:libvirt",
                  "pip install 'vhpc[libvirt]' (needs libvirt-dev pkg-config)",
                  "pip install 'vhpc[libvirt]' (needs libvirt-devel)"),
    )
    unsupported_options = {"corunner": "use backend=qemu",
                           "slowdown": "use backend=qemu (its QEMU process is limited)",
                           "slowdown_cpus": "use backend=qemu"}

    def __init__(self, env_name, options, placement, topo):
        self.uri = options.uri or default_uri()
        self.user_xml_path = options.domain_xml
        self.user_xml: str | None = None
        self.user_dom: ET.Element | None = None
        if options.domain_xml is not None:  # the file gives size and accelerator; vCPUs float
            self.user_xml = read_domain_xml(options.domain_xml)
            self.user_dom = lx.parse_user_xml(self.user_xml, options.domain_xml)
            req = lx.requested(self.user_dom)
            options = options.model_copy(update=dict(
                vcpus=req["vcpus"], memory=req["memory_mib"],
                accel="kvm" if req["type"] == "kvm" else "tcg"))
            placement = vhpc.placement.place(topo, vhpc.placement.PlacementRequest(
                vcpus=req["vcpus"], memory_mib=req["memory_mib"], policy="float"))
        _libvirt()
        require_qemu()
        super().__init__(env_name, options, placement, topo)
        self.conn = None
        self.domain_changes: list[str] = []
        self.submitted_xml: str | None = None
        self.removed_leftovers: list[str] = []

    @classmethod
    def probe_accel(cls, kernel=None, use_cache: bool = True) -> ProbeResult:
        """libvirt runs QEMU: the QEMU probe (:func:`~.qemu.probe_kvm`)."""
        return probe_kvm(kernel, use_cache=use_cache)

    @classmethod
    def render_placement(cls, placement, name: str) -> list[str]:
        """The domain XML fragment of the placement (:func:`~.libvirt_xml.to_libvirt_xml`)."""
        return ["libvirt XML", lx.to_libvirt_xml(placement, name=name)]

    @classmethod
    def export_placement(cls, placements, name: str, pool=()) -> PlacementExport:
        """Validating domain XML, one ``<domain>`` per VM (:func:`~.libvirt_xml.to_libvirt_xml`;
        ``name``, then ``name-i`` for several), with a ``<vcpupin>`` per vCPU: its PUs when
        pinned; unpinned, every PU of ``pool``, so the domain floats over the set vhpc's
        guest floated over."""
        def one(p, n):
            xml = lx.to_libvirt_xml(p, name=n, full=True)
            if p.pinned or not pool:
                return xml
            dom = ET.fromstring(xml)
            tune = ET.Element("cputune")
            for v in range(p.vcpus):
                ET.SubElement(tune, "vcpupin", vcpu=str(v), cpuset=format_cpu_list(pool))
            dom.insert(list(dom).index(dom.find("vcpu")) + 1, tune)
            ET.indent(dom)
            return ET.tostring(dom, encoding="unicode")

        if len(placements) == 1:
            return PlacementExport("libvirt XML", "libvirt_xml", one(placements[0], name))
        return PlacementExport("libvirt XML", "libvirt_xml", "\n".join(
            one(p, f"{name}-{i}") for i, p in enumerate(placements)))

    def remove_leftovers(self) -> list[str]:
        """Connect once (an unreachable daemon is a setup error, said before any trial) and
        remove the domains of killed vhpc processes (:func:`remove_leftovers`).  Raises
        EnvError saying how to start libvirtd."""
        conn = connect(self.uri)
        try:
            self.removed_leftovers = remove_leftovers(conn)
        finally:
            conn.close()
        return self.removed_leftovers

    def _connection(self):
        if self.conn is None:
            self.conn = connect(self.uri)
        return self.conn

    def _domain_name(self, request: BootRequest) -> str:
        """``vhpc-<environment>-<pid>-<session>`` (leftovers are found by the prefix)."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", request.label)
        return f"{PREFIX}{safe}-{os.getpid()}-{request.session}"

    def _domain(self, request: BootRequest, free: list[int], workdir: Path) -> ET.Element:
        """The domain XML element for one session (a fresh copy of the user's, or generated
        from ``request.placement`` with ``<emulatorpin>`` on the host CPUs ``free``)."""
        if self.user_dom is not None:
            dom = ET.fromstring(ET.tostring(self.user_dom))
        else:
            dom = lx.generated_domain(request.placement, accel=request.accel, emulator_cpus=free)
        shares = guest_shares()
        self.domain_changes = lx.add_vhpc_parts(
            dom, name=self._domain_name(request),
            vmlinux=guestimage.unpack_vmlinux(request.kernel),
            initrd=guestimage.build_initramfs(request.kernel),
            cmdline=kernel_cmdline(False, shares), workdir=workdir, shares=shares)
        return dom

    def boot(self, request: BootRequest) -> LibvirtGuest:
        """Define and start a transient domain for ``request`` (libvirt applies the pins from
        ``<vcpupin>``/``<emulatorpin>``).  ``extra_args``/``append`` are QEMU's and not used.
        Raises EnvError (with libvirt's reason when it refuses the domain)."""
        conn = self._connection()
        p = request.placement
        free = sorted(set(os.sched_getaffinity(0)) - set(p.pcpus)) \
            if self.user_dom is None and p.pin_map() else []
        if request.image is not None:  # the user's image: its own kernel, reached over ssh
            return self._boot_image(conn, request, free)
        try:
            guest = LibvirtGuest(conn, request.boot_timeout,
                                 lambda workdir: self._domain(request, free, workdir))
        except (guestimage.GuestImageError, lx.DomainXmlError) as exc:
            raise EnvError(str(exc)) from None
        guest.emulator_cpus = free or None
        self.submitted_xml = guest.xml
        guest.boot()
        return guest

    def _boot_image(self, conn, request: BootRequest, free: list[int]):
        """A :class:`LibvirtImageGuest` booting ``request.image``; its domain
        XML is recorded as submitted once it exists.  Raises EnvError."""
        def build(workdir: Path, seed: Path, port: int) -> ET.Element:
            return image_domain(request.placement, accel=request.accel, emulator_cpus=free,
                                name=self._domain_name(request), image=request.image,
                                workdir=workdir, seed=seed, port=port)

        guest = LibvirtImageGuest(conn, request.boot_timeout, request.image, build)
        guest.emulator_cpus = free or None
        try:
            guest.boot()
        finally:
            self.submitted_xml = guest.xml
        self.domain_changes = ["the user's image booted from an overlay, reached over ssh"]
        return guest

    def close(self) -> None:
        """Close the libvirt connection (the sessions' domains are destroyed before)."""
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                pass
            self.conn = None

    def fingerprint(self) -> dict[str, Any]:
        """QEMU's version, machine, backend, URI, libvirt version and the domain XML: as given
        (domain_xml) and as submitted (after the first boot), with vhpc's changes."""
        libvirt = _libvirt()
        fp = dict(qemu_version=facts.qemu_version(), machine="pc",
                  backend="libvirt", libvirt_uri=self.uri,
                  libvirt_version=".".join(str(libvirt.getVersion() // d % 1000)
                                           for d in (1000000, 1000, 1)),
                  domain_xml_file=self.user_xml_path, domain_xml_given=self.user_xml,
                  domain_xml_submitted=self.submitted_xml, domain_changes=self.domain_changes,
                  removed_leftovers=self.removed_leftovers)
        if self.user_dom is not None:
            os_type = self.user_dom.find("os/type")
            fp.update(placement=f"as given in {self.user_xml_path}",
                      plan=lx.plan_dict(lx.requested(self.user_dom)),
                      machine=os_type.get("machine", "?") if os_type is not None else "?")
        return fp

    def applied(self, session: LibvirtGuest,
                applied: records.AppliedPlacement) -> records.AppliedPlacement:
        """The host-side read-back plus ``libvirt`` (libvirt's read-back) and ``domain``;
        ``mismatches`` compares both with the domain XML's request; ``emulator_cpus`` is
        where libvirt lets QEMU's other threads run."""
        lv = session.libvirt_readback()
        req = lx.requested(ET.fromstring(session.xml))
        out = applied.model_dump()
        out.update(backend="libvirt", domain=session.name, libvirt=lv, requested=req,
                   mismatches=readback_mismatches(req, lv, out["vcpus"], out["memory"],
                                                  out["guest_numa"]))
        if isinstance(lv.get("emulatorpin"), list):
            out["emulator_cpus"] = lv["emulatorpin"]
        return records.AppliedPlacement(**out)

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
    if image.base is not None:  # the chain given, ending at the checked image (an empty
        # backingStore: "not based on any other image", libvirt's formatdomain "Hard drives")
        chain = ET.SubElement(disk, "backingStore", type="file")
        ET.SubElement(chain, "format", type=image.base.format)
        ET.SubElement(chain, "source", file=str(image.base.path))
        ET.SubElement(chain, "backingStore")
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
