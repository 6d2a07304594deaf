"""The ``vm`` kind: benchmarks in a guest that shares the host's root, started by a registered
hypervisor backend (``backends/``: QEMU, libvirt)."""

from __future__ import annotations

from vhpc import placement
from vhpc.core.errors import HostError
from vhpc.environments.kind import (GUEST, IMAGE_BUILDER, KINDS, EnvironmentKind, EnvPlan,
                                   GlobalFlag)
from vhpc.environments.options import HostFacts
from vhpc.environments.vm import guestimage
from vhpc.environments.vm.backends.base import BACKENDS
from vhpc.environments.vm.guestimage import GUEST_PRIVATE
from vhpc.host import facts
from vhpc.environments.vm.options import ALLOW_SYSTEM_IMAGE_ENV, ALLOW_URI_ENV, VmOptions
from vhpc.host.doctor import Component


@KINDS.register("vm")
class VmKind(EnvironmentKind):
    """One guest, placed by :mod:`vhpc.placement` (the placement computed once, in
    :meth:`plan`, and handed to the environment)."""

    options = VmOptions
    summary = "benchmarks in a QEMU guest sharing the host's root, or booting your image"
    provides = frozenset({GUEST, IMAGE_BUILDER})
    boots_guests = True
    llc_owner = "the guest's"
    #: QEMU and what a guest boots (kernel, initramfs tools, KVM), what a user's image needs
    #: (overlay, cloud-init seed, its kernel or firmware) and what ``vhpc image build`` runs.
    components = (
        Component("QEMU", "vm, vcluster", "cmd:qemu-system-x86_64", "qemu-system-x86", "qemu-kvm"),
        Component("guest kernel", "vm, vcluster", "glob:/boot/vmlinuz-*", "linux-image-amd64",
                  "kernel-core"),
        Component("static busybox", "vm, vcluster (guest initramfs)", "cmd:busybox",
                  "busybox-static", "busybox"),
        Component("cpio", "vm, vcluster (guest initramfs)", "cmd:cpio", "cpio", "cpio"),
        Component("KVM (/dev/kvm)", "vm, vcluster (else TCG emulation)", "kvm",
                  "(kernel module kvm_intel/kvm_amd)", "(kernel module kvm_intel/kvm_amd)"),
        Component("qemu-img", "vm:image= (overlay, checks), vhpc image build", "cmd:qemu-img",
                  "qemu-utils", "qemu-img"),
        Component("cloud-localds", "vm:image= (cloud-init NoCloud seed)", "cmd:cloud-localds",
                  "cloud-image-utils", "cloud-utils"),
        Component("debugfs", "vm:image= with boot=kernel (the image's kernel)", "cmd:debugfs",
                  "e2fsprogs", "e2fsprogs"),
        Component("SeaBIOS", "vm:image= with boot=firmware (the image's bootloader)",
                  "glob:/usr/share/seabios/bios-256k.bin", "seabios", "seabios"),
        Component("OVMF", "vm:image= with boot=uefi (UEFI firmware)",
                  "glob:/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf", "edk2-ovmf"),
        Component("debvm", "vhpc image build", "cmd:debvm-create", "debvm", "(Debian only)"),
        Component("mmdebstrap", "vhpc image build", "cmd:mmdebstrap", "mmdebstrap", "(Debian only)"),
        Component("sfdisk", "vhpc image build --bootloader (partition table)", "cmd:sfdisk",
                  "fdisk", "util-linux"),
        Component("GRUB (BIOS)", "vhpc image build --bootloader grub",
                  "glob:/usr/lib/grub/i386-pc/boot.img", "grub-pc-bin grub2-common",
                  "grub2-pc-modules"),
        Component("GRUB (EFI)", "vhpc image build --bootloader grub-efi",
                  "glob:/usr/lib/grub/x86_64-efi/linux.mod", "grub-efi-amd64-bin grub2-common",
                  "grub2-efi-x64-modules"),
        Component("mtools", "vhpc image build --bootloader grub-efi (the EFI partition)",
                  "cmd:mcopy", "mtools dosfstools", "mtools dosfstools"),
    )
    global_flags = (
        GlobalFlag("--allow-uri", ALLOW_URI_ENV, "allow this libvirt connection URI in uri= "
                   "(default: only the local qemu:///system and qemu:///session); repeatable",
                   "URI"),
        GlobalFlag("--allow-system-image", ALLOW_SYSTEM_IMAGE_ENV, "let vm:image= name a file "
                   "outside your home, the current folder and the temporary folder, or one only "
                   "root can read (default: refused)"))

    def hidden_host_dirs(self, options) -> tuple[str, ...]:
        """The directories its guests mount their own tmpfs over (:data:`GUEST_PRIVATE`) while
        they share the host's root; none when the user's image gets its inputs copied in."""
        return GUEST_PRIVATE if options.guest_sees_host_files else ()

    @staticmethod
    def probe_accel(kernel=None, use_cache: bool = True):
        """The accelerator guests of the default backend (a plain ``-e vm``) get on this host:
        that backend's :meth:`~vhpc.environments.vm.backends.base.HypervisorBackend.probe_accel`
        (a :class:`~vhpc.environments.vm.backends.base.ProbeResult`).  Raises GuestImageError
        when no guest kernel exists."""
        return BACKENDS.get(VmOptions().backend_name).probe_accel(kernel, use_cache)

    def all_components(self):
        """Its own components, then each registered backend's (libvirt's daemon and module)."""
        return self.components + tuple(c for _, b in BACKENDS.items() for c in b.components)

    def placement_dialects(self, placement, name: str) -> list[str]:
        """Each registered backend's form of ``placement`` (QEMU arguments, libvirt XML)."""
        return [line for _, b in BACKENDS.items() for line in b.render_placement(placement, name)]

    def export_placement(self, placements, name: str, pool=()) -> list:
        """Each registered backend's export (a
        :class:`~vhpc.environments.vm.backends.base.PlacementExport`: libvirt domain XML, QEMU
        arguments, ...), in the registry's order."""
        found = (b.export_placement(placements, name, pool) for _, b in BACKENDS.items())
        return [x for x in found if x is not None]

    def estimate_accel(self) -> tuple[str, str]:
        """(``"kvm"`` or ``"tcg"``, why): the KVM probe's answer (:meth:`probe_accel`, cached
        per host boot), not whether ``/dev/kvm`` exists, since a host can offer /dev/kvm and
        still fall back to TCG."""
        if facts.qemu_version() is None:
            return "tcg", "QEMU is not installed: no guest can run (apt-get install qemu-system-x86)"
        try:
            kernel = guestimage.find_kernel()
        except guestimage.GuestImageError as exc:
            return "tcg", f"not probed: {exc}"
        probe = self.probe_accel(kernel)
        return probe.accel, probe.reason

    def build_image(self, out, release: str, include: list[str], progress=None, **options):
        """A small Debian guest image for ``vm:image=`` at ``out``
        (:func:`vhpc.environments.vm.imagebuild.build`, which takes ``options``: a
        BuiltImage)."""
        from vhpc.environments.vm import imagebuild

        return imagebuild.build(out, release, include, progress=progress, **options)

    def host_lines(self, probe: bool = True, reprobe: bool = False) -> list[tuple[str, str, str]]:
        """The guest kernel vhpc would boot and the accelerator its guests get (a probe guest
        is booted unless ``probe`` is False, or no kernel or QEMU is there)."""
        try:
            kernel = guestimage.find_kernel()
            lines = [("guest kernel", f"{kernel.image} ({kernel.release})", "")]
        except guestimage.GuestImageError as exc:
            kernel = None
            lines = [("guest kernel", f"none: {exc}", "")]
        if not probe or kernel is None or facts.qemu_version() is None:
            return lines + [("accelerator", "not probed", "")]
        got = self.probe_accel(kernel, use_cache=not reprobe)
        lines.append(("accelerator", f"{got.accel}: {got.reason}",
                      "green" if got.accel == "kvm" else "yellow"))
        if got.accel == "tcg":
            lines.append(("", "VM results on this host are TCG emulation, not hardware "
                          "virtualization overheads.", ""))
        return lines

    def dry_check(self, options) -> None:
        """A user's image (``image=``) checked as its first boot checks it
        (:func:`vhpc.environments.vm.userimage.inspect`, then the boot mode against the disk),
        nothing started.  Raises UserImageError.  A vcluster's guests check theirs alike."""
        if not options.image:
            return
        from vhpc.environments.vm import userimage
        from vhpc.environments.vm.options import image_format

        image = userimage.inspect(options.image, image_format(options.image, options.format))
        userimage.check_boot(image, userimage.auto_boot(image) if options.boot == "auto"
                             else options.boot)

    def plan(self, options: VmOptions, host: HostFacts) -> EnvPlan:
        """The guest's placement (and its co-runner's) on ``host``.  Raises HostError (more
        memory than the host has, pins that do not exist) or PlacementError."""
        if options.domain_xml:  # the user's domain defines the placement; libvirt checks it
            return EnvPlan(f"as given in {options.domain_xml} (libvirt)")
        topo = host.topology
        total = sum(n.memory_bytes or 0 for n in topo.nodes) >> 20
        if topo.memory_known and total and options.memory > total:
            raise HostError(f"memory={options.memory} MiB but the host has {total} MiB: "
                            "give less memory")
        main = placement.place(topo, options.request(host.cpus))
        text = placement.describe(main)
        if options.image:
            text += f"; booting {options.image} (its own kernel, reached over ssh)"
        corunner = None
        if options.corunner is not None:
            corunner = placement.place(topo, options.corunner_request())
            text += f"; co-runner ({options.corunner}): " + placement.describe(corunner)
        return EnvPlan(text, main, corunner)

    def build(self, name, options: VmOptions, plan: EnvPlan, host: HostFacts):
        """A VmEnvironment on ``plan``'s placement, its guests started by the backend
        ``options.backend_name``.  Raises ValueError (no QEMU, no guest kernel, an option the
        backend cannot serve), which the caller reports as HostError."""
        from vhpc.environments.vm.environment import VmEnvironment

        env_class = VmEnvironment
        if options.image is not None:  # the user's own image (docs/images.md)
            from vhpc.environments.vm.imageenv import ImageEnvironment as env_class
        return env_class(name, options, plan.placement, host.topology, corunner=plan.corunner)
