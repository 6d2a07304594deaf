"""libvirt domain XML for vhpc guests, built and read with :mod:`xml.etree.ElementTree`.

Two sources, one result (an ``ET.Element`` for ``virDomainCreateXML``):

* :func:`generated_domain`: vhpc's own domain from a :class:`vhpc.placement.Placement` (the
  placement room renders ``<vcpu>``, ``<cputune><vcpupin>``, ``<numatune>``, ``<cpu><numa>`` and
  ``<memoryBacking>``; this module adds the rest of a bootable domain).
* :func:`user_domain`: the user's own domain XML, kept as given except for what vhpc needs to
  run trials (:func:`add_vhpc_parts`); the changes are returned in words so they are recorded.

:func:`requested` reads back what a domain XML asks for (pins, memory policy, guest NUMA
cells), so the environment compares libvirt's and the host's read-back with the request.
Element and attribute names follow libvirt's domain XML format
(https://libvirt.org/formatdomain.html).
"""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import vhpc.placement
from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.core.cpulist import parse_cpu_list

#: XML namespace of vhpc's ``<metadata>`` element (owner process of a domain).
OWNER_NS = "urn:vhpc:libvirt-owner"
ET.register_namespace("vhpc", OWNER_NS)

#: libvirt ``<numatune>`` modes by virDomainNumatuneMemMode value (``numa_mode`` in
#: virDomainGetNumaParameters; libvirt-domain.h).
NUMATUNE_MODES = {0: "strict", 1: "preferred", 2: "interleave", 3: "restrictive"}

#: Units of ``<memory unit=...>`` in KiB (formatdomain.html#memory-allocation).
_UNITS_KIB = {"b": 1 / 1024, "bytes": 1 / 1024, "kb": 1000 / 1024, "k": 1, "kib": 1,
              "mb": 1000 ** 2 / 1024, "m": 1024, "mib": 1024, "gb": 1000 ** 3 / 1024,
              "g": 1024 ** 2, "gib": 1024 ** 2}


def parse_cpuset(text: str) -> list[int]:
    """A libvirt ``cpuset``/``nodeset`` (``"0-3,^2,8"``: a cpulist where ``^N`` excludes N,
    formatdomain.html#cpu-allocation) → sorted numbers.  Raises ValueError."""
    items = [i.strip() for i in text.split(",") if i.strip()]
    keep = set(parse_cpu_list(",".join(i for i in items if not i.startswith("^"))))
    drop = [i[1:] for i in items if i.startswith("^")]
    return sorted(keep - set(parse_cpu_list(",".join(drop)))) if drop else sorted(keep)


class DomainXmlError(ValueError):
    """A domain XML vhpc cannot use; the message says what to change."""


def owner_metadata(dom: ET.Element, pid: int, start: str) -> None:
    """Add ``<metadata><vhpc:owner pid=.. start=../></metadata>``: the vhpc process that owns
    the domain (``start`` is field 22 of its /proc/PID/stat), so a later vhpc can tell a
    leftover of a killed run from a live run's domain."""
    md = dom.find("metadata")
    if md is None:
        md = ET.SubElement(dom, "metadata")
    ET.SubElement(md, f"{{{OWNER_NS}}}owner", pid=str(pid), start=start)


def read_owner(xml_text: str) -> tuple[int, str] | None:
    """(pid, start) from a domain's vhpc owner metadata, None when it has none."""
    try:
        el = ET.fromstring(xml_text)
    except ET.ParseError:
        return None
    # virDomainGetMetadata returns the element without its namespace; a whole domain keeps it
    own = el if el.tag in ("owner", f"{{{OWNER_NS}}}owner") else el.find(f".//{{{OWNER_NS}}}owner")
    if own is None:
        return None
    try:
        return int(own.get("pid", "")), own.get("start", "")
    except ValueError:
        return None


def _child(parent: ET.Element, tag: str) -> ET.Element:
    el = parent.find(tag)
    return el if el is not None else ET.SubElement(parent, tag)


def add_vhpc_parts(dom: ET.Element, *, name: str, vmlinux: Path, initrd: Path, cmdline: str,
                   workdir: Path, shares: list[Path]) -> list[str]:
    """Add what vhpc needs to run trials in ``dom`` (modified in place); returns the changes in
    words.

    Sets ``<name>`` (and drops ``<uuid>``) so the transient domain is vhpc's; direct kernel
    boot of vhpc's vmlinux/initramfs (``<os><kernel><initrd><cmdline>``, replacing any given);
    the host root, read-only over virtio-9p (``<filesystem accessmode='passthrough'>`` with
    target ``hostroot``, plus ``shareN`` for :func:`vhpc.environments.vm.guestimage.guest_shares`); the
    agent's virtio-serial port ``vhpc.agent`` as a unix socket in ``workdir``; a serial console
    to ``workdir/console.log`` when the domain has no ``<serial>``; and a DAC ``<seclabel>``
    running QEMU as vhpc's own user (it reads vhpc's cache and the host root) unless the domain
    has a DAC label already.
    """
    changes: list[str] = []
    old = dom.findtext("name")
    if dom.find("name") is None:
        dom.insert(0, ET.Element("name"))
    dom.find("name").text = name
    changes.append(f"name {old!r} → {name!r}" if old else f"name {name!r}")
    for uuid in dom.findall("uuid"):
        dom.remove(uuid)
        changes.append("uuid removed (a fresh one per session)")
    os_el = _child(dom, "os")
    if os_el.find("type") is None:
        ET.SubElement(os_el, "type", arch="x86_64", machine="pc").text = "hvm"
    for tag, value in (("kernel", vmlinux), ("initrd", initrd), ("cmdline", cmdline)):
        el = os_el.find(tag)
        if el is not None and el.text:
            changes.append(f"<{tag}> {el.text} replaced")
        _child(os_el, tag).text = str(value)
    changes.append("direct kernel boot of vhpc's guest kernel and initramfs")
    devices = _child(dom, "devices")
    for tag, src in [("hostroot", Path("/"))] + [(f"share{i}", p) for i, p in enumerate(shares)]:
        fs = ET.SubElement(devices, "filesystem", type="mount", accessmode="passthrough",
                           multidevs="remap")
        ET.SubElement(fs, "source", dir=str(src))
        ET.SubElement(fs, "target", dir=tag)
        ET.SubElement(fs, "readonly")
    changes.append("host root shared read-only over virtio-9p (target hostroot)")
    ch = ET.SubElement(devices, "channel", type="unix")
    ET.SubElement(ch, "source", mode="bind", path=str(workdir / "agent.sock"))
    ET.SubElement(ch, "target", type="virtio", name="vhpc.agent")
    changes.append("virtio-serial channel vhpc.agent (guest agent)")
    if devices.find("serial") is None:
        ser = ET.SubElement(devices, "serial", type="file")
        ET.SubElement(ser, "source", path=str(workdir / "console.log"))
        ET.SubElement(ser, "target", port="0")
        changes.append("serial console to a file")
    if not any(s.get("model") == "dac" for s in dom.findall("seclabel")):
        sec = ET.SubElement(dom, "seclabel", type="static", model="dac", relabel="no")
        ET.SubElement(sec, "label").text = f"+{os.getuid()}:+{os.getgid()}"
        changes.append("QEMU runs as vhpc's user (DAC seclabel)")
    return changes


def generated_domain(placement: vhpc.placement.Placement, *, accel: str,
                     emulator_cpus: list[int] | None = None) -> ET.Element:
    """vhpc's domain for ``placement`` (without the parts :func:`add_vhpc_parts` adds).

    ``<domain type>`` is ``kvm`` for accel ``kvm``, else ``qemu`` (TCG); ``<memory>`` is the
    placement's total; the CPU model is ``host-passthrough`` under KVM and ``maximum`` under TCG
    (QEMU's ``-cpu host`` / ``-cpu max``, as the qemu backend uses); machine ``pc`` with ACPI
    and APIC (QEMU's defaults, which libvirt turns on only when asked);
    ``<emulatorpin>`` on ``emulator_cpus`` (the host CPUs no vCPU uses) when given; guests stop
    rather than reboot (``on_reboot`` destroy).  Devices not listed are libvirt's defaults
    (e.g. its memory balloon), which is what ``-e vm:backend=libvirt`` measures.
    """
    dom = ET.fromstring(to_libvirt_xml(placement, full=False))
    dom.set("type", "kvm" if accel == "kvm" else "qemu")
    ET.SubElement(dom, "memory", unit="MiB").text = str(placement.memory_mib)
    if emulator_cpus:
        _child(dom, "cputune").append(ET.Element("emulatorpin", cpuset=format_list(emulator_cpus)))
    os_el = ET.SubElement(dom, "os")
    ET.SubElement(os_el, "type", arch="x86_64", machine="pc").text = "hvm"
    # QEMU enables ACPI by default, libvirt only with <acpi/>: the guest needs it for its NUMA
    # layout (ACPI SRAT/SLIT) and to power off
    features = ET.SubElement(dom, "features")
    ET.SubElement(features, "acpi")
    ET.SubElement(features, "apic")
    cpu = dom.find("cpu")
    if cpu is None:
        cpu = ET.SubElement(dom, "cpu")
    cpu.set("mode", "host-passthrough" if accel == "kvm" else "maximum")
    cpu.set("check", "none")
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        ET.SubElement(dom, event).text = "destroy"
    devices = ET.SubElement(dom, "devices")
    ET.SubElement(devices, "emulator").text = shutil.which("qemu-system-x86_64") or "qemu-system-x86_64"
    return dom


def parse_user_xml(text: str, path: str) -> ET.Element:
    """Parse the user's domain XML.  Raises DomainXmlError naming the file and the problem."""
    try:
        dom = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DomainXmlError(f"domain_xml={path}: not well-formed XML ({exc})") from None
    if dom.tag != "domain":
        raise DomainXmlError(f"domain_xml={path}: root element is <{dom.tag}>, "
                             "expected a libvirt <domain>")
    if dom.get("type") not in ("qemu", "kvm"):
        raise DomainXmlError(f"domain_xml={path}: <domain type={dom.get('type')!r}>: "
                             "use type='qemu' (TCG) or type='kvm'")
    req = requested(dom)
    if req["vcpus"] < 1 or req["memory_mib"] < 128:
        raise DomainXmlError(f"domain_xml={path}: needs <vcpu> ≥ 1 and <memory> ≥ 128 MiB")
    from vhpc.environments.options import MAX_CPUS, MAX_MEMORY_MIB

    if req["vcpus"] > MAX_CPUS or req["memory_mib"] > MAX_MEMORY_MIB:  # before any allocation
        raise DomainXmlError(f"domain_xml={path}: <vcpu> {str(req['vcpus'])[:24]} or <memory> "
                             f"is out of range: at most {MAX_CPUS} vCPUs and "
                             f"{MAX_MEMORY_MIB} MiB")
    return dom


def memory_mib(el: ET.Element | None) -> int:
    """A ``<memory unit=..>N</memory>`` element or a ``<cell memory=N unit=..>`` in MiB (unit KiB
    when absent, formatdomain.html); 0 for None or no value.  Raises DomainXmlError for a unit
    libvirt does not define."""
    if el is None:
        return 0
    value = (el.get("memory") if el.tag == "cell" else el.text) or ""
    if not value.strip():
        return 0
    unit = _UNITS_KIB.get((el.get("unit") or "KiB").lower())
    if unit is None:
        raise DomainXmlError(f"<{el.tag} unit={el.get('unit')!r}>: unknown unit")
    return int(int(value.strip()) * unit // 1024)


def requested(dom: ET.Element) -> dict:
    """What a domain XML asks for: ``{"vcpus": n, "memory_mib": n, "vcpu_pins": {vcpu:
    [pCPU]}, "emulator_pins": [pCPU] | None, "memory_mode": str | None, "memory_nodes": [node]
    | None, "memnodes": {cell: {"mode", "nodes"}}, "cells": [{"id", "cpus", "memory_mib"}],
    "type": "qemu"|"kvm"}``.  Pins and nodes are sorted lists; absent parts are empty/None.
    Raises DomainXmlError for malformed numbers."""
    try:
        vcpu_el = dom.find("vcpu")
        vcpus = int((vcpu_el.text or "0").strip()) if vcpu_el is not None else 0
        pins = {int(p.get("vcpu")): parse_cpuset(p.get("cpuset", ""))
                for p in dom.findall("cputune/vcpupin")}
        emu = dom.find("cputune/emulatorpin")
        mem = dom.find("numatune/memory")
        memnodes = {int(m.get("cellid")): {"mode": m.get("mode", "strict"),
                                            "nodes": parse_cpuset(m.get("nodeset", ""))}
                    for m in dom.findall("numatune/memnode")}
        cells = [{"id": int(c.get("id", i)), "cpus": parse_cpuset(c.get("cpus", "")),
                  "memory_mib": memory_mib(c)}
                 for i, c in enumerate(dom.findall("cpu/numa/cell"))]
        return {
            "type": dom.get("type"), "vcpus": vcpus, "memory_mib": memory_mib(dom.find("memory")),
            "vcpu_pins": pins,
            "emulator_pins": parse_cpuset(emu.get("cpuset", "")) if emu is not None else None,
            "memory_mode": mem.get("mode", "strict") if mem is not None else None,
            "memory_nodes": (parse_cpuset(mem.get("nodeset", ""))
                             if mem is not None and mem.get("nodeset") else None),
            "memnodes": memnodes, "cells": cells,
        }
    except (TypeError, ValueError) as exc:
        if isinstance(exc, DomainXmlError):
            raise
        raise DomainXmlError(f"malformed number in the domain XML: {exc}") from None


def plan_dict(req: dict) -> dict:
    """A :func:`requested` dict in the shape of ``Placement.to_dict()`` (what fingerprints and
    the report's placement section read): ``vcpu_pins`` as a list by vCPU (``[]`` when any
    vCPU floats), ``guest_nodes`` with host nodes and libvirt's mode per cell."""
    n = req["vcpus"]
    pins = [req["vcpu_pins"][v] for v in range(n)] if len(req["vcpu_pins"]) == n else []
    cells = req["cells"] or [{"id": 0, "cpus": list(range(n)), "memory_mib": req["memory_mib"]}]
    nodes = []
    for c in cells:
        mem = req["memnodes"].get(c["id"]) or ({"mode": req["memory_mode"],
                                                 "nodes": req["memory_nodes"] or []}
                                                if req["memory_mode"] else None)
        nodes.append({"id": c["id"], "vcpus": c["cpus"], "memory_mib": c["memory_mib"],
                      "host_nodes": mem["nodes"] if mem else [],
                      "policy": mem["mode"] if mem else "default"})
    return {"policy": "domain XML", "vcpus": n, "memory_mib": req["memory_mib"],
            "vcpu_pins": pins, "guest_nodes": nodes}


def to_text(dom: ET.Element) -> str:
    """The domain as an XML string (indented copy; ``dom`` is not modified)."""
    copy = ET.fromstring(ET.tostring(dom))
    ET.indent(copy)
    return ET.tostring(copy, encoding="unicode")


#: vhpc's memory policies in libvirt's <numatune> words.
_LIBVIRT_MODE = {"bind": "strict", "preferred": "preferred", "interleave": "interleave"}


def to_libvirt_xml(placement: vhpc.placement.Placement, name: str = "vm", full: bool = False) -> str:
    """libvirt domain XML for the placement: ``<vcpu>``, ``<cputune><vcpupin vcpu cpuset/>``
    (pinned policies), ``<numatune><memory mode nodeset/><memnode cellid mode nodeset/>``
    (bound memory; bind → strict; the domain-wide ``<memory>`` takes the guest nodes' common
    mode, or ``restrictive`` when they differ), ``<memoryBacking><hugepages><page size unit nodeset/>``
    (2m/1g), and ``<cpu><numa><cell id cpus memory unit='MiB'>`` with ``<distances><sibling/>``
    when the guest has NUMA or bound memory.

    ``full=False`` gives a ``<domain>`` element with only these parts (a fragment to merge);
    ``full=True`` adds ``type='kvm'``, ``<name>``, ``<memory>`` and ``<os>`` so the result
    validates with ``virt-xml-validate``.
    """
    p = placement
    dom = ET.Element("domain")
    if full:
        dom.set("type", "kvm")
        ET.SubElement(dom, "name").text = name
        ET.SubElement(dom, "memory", unit="MiB").text = str(p.memory_mib)
    if p.backing != "4k":
        mb = ET.SubElement(dom, "memoryBacking")
        hp = ET.SubElement(mb, "hugepages")
        ET.SubElement(hp, "page", size=str(vhpc.placement.BACKINGS[p.backing]), unit="KiB",
                      nodeset=format_list(g.id for g in p.guest_nodes))
    ET.SubElement(dom, "vcpu", placement="static").text = str(p.vcpus)
    if p.pinned:
        ct = ET.SubElement(dom, "cputune")
        for v, pins in enumerate(p.vcpu_pins):
            ET.SubElement(ct, "vcpupin", vcpu=str(v), cpuset=format_list(pins))
    bound = [g for g in p.guest_nodes if g.policy != "default" and g.host_nodes]
    numa = vhpc.placement.needs_guest_numa(p)
    if bound:
        nt = ET.SubElement(dom, "numatune")
        modes = {_LIBVIRT_MODE[g.policy] for g in bound}
        all_nodes = format_list(n for g in bound for n in g.host_nodes)
        # domain-wide policy: the guest nodes' common mode; mixed modes (or "preferred" over
        # several nodes, which libvirt's top-level <memory> cannot express) → "restrictive"
        # (cgroup cpuset.mems only, the per-cell memnode policies still apply)
        top = modes.pop() if len(modes) == 1 else "restrictive"
        if top == "preferred" and len({n for g in bound for n in g.host_nodes}) > 1:
            top = "restrictive"
        ET.SubElement(nt, "memory", mode=top, nodeset=all_nodes)
        for g in bound:
            ET.SubElement(nt, "memnode", cellid=str(g.id), mode=_LIBVIRT_MODE[g.policy], nodeset=format_list(g.host_nodes))
    if full:
        os_el = ET.SubElement(dom, "os")
        ET.SubElement(os_el, "type", arch="x86_64", machine="pc").text = "hvm"
    if numa:
        cpu = ET.SubElement(dom, "cpu")
        nm = ET.SubElement(cpu, "numa")
        for g in p.guest_nodes:
            cell = ET.SubElement(nm, "cell", id=str(g.id), cpus=format_list(g.vcpus), memory=str(g.memory_mib), unit="MiB")
            if len(p.guest_nodes) > 1:
                ds = ET.SubElement(cell, "distances")
                for j, d in enumerate(p.distances[g.id]):
                    ET.SubElement(ds, "sibling", id=str(j), value=str(d))
    ET.indent(dom)
    return ET.tostring(dom, encoding="unicode")
