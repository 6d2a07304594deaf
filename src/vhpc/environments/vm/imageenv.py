"""The ``vm`` environment with ``image=FILE``: benchmarks in the user's own guest image.

The guest is placed, paused, resumed, read back from the host and counted in sessions exactly as
vhpc's own guest (:class:`~vhpc.environments.vm.environment.VmEnvironment`); what differs:

* it boots the image's own kernel (its bootloader through the firmware, or its kernel and
  initramfs given directly: ``boot=``) from a qcow2 overlay in a private folder of this run
  (``vhpc-guest-<pid>-…``, reaped if vhpc is killed), created on first use and removed by
  :meth:`ImageEnvironment.close`; the image itself is opened read-only and its SHA-256 is in
  the fingerprint;
* a session is one boot of that overlay: a cold trial boots it afresh, and what earlier
  sessions wrote there (the kernels built in the guest) is still there;
* commands, file reads, the kernels' build (with the guest's compiler and MPI), the
  fingerprint from inside (guest kernel, OS, MPI, compiler, topology) and the read-back of the
  benchmark's processes go over ssh (:class:`~vhpc.environments.vm.userimage.ImageGuest`);
* :meth:`ImageEnvironment.preflight` checks the image and boots it once before a campaign
  stores anything, so an image without sshd or cloud-init, or a damaged one, fails in one line
  with the console's last lines.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
from pathlib import Path
from typing import Any

from vhpc.benchmarks.apps.common import app_versions, version_script
from vhpc.core import records
from vhpc.environments.base import EnvError, RunResult, now
from vhpc.environments.ssh.environment import SshUnanswered
from vhpc.environments.vm.agent import GuestHung
from vhpc.environments.vm import userimage
from vhpc.environments.vm.environment import VmEnvironment
from vhpc.environments.vm.options import image_format
from vhpc.host.owned import owned_tempdir

#: Seconds a boot of a user's image may take unless ``boot_timeout=`` says otherwise: a full
#: distribution under TCG emulation on a loaded host takes minutes (measured: docs/images.md).
IMAGE_BOOT_TIMEOUT = 900.0
#: Kernel command line of a direct kernel boot: the bare filesystem is the first virtio disk.
DIRECT_APPEND = "root=/dev/vda rw console=ttyS0"

class ImageEnvironment(VmEnvironment):
    """A ``vm`` environment booting ``options.image`` (see the module docstring).  Raises
    ValueError as VmEnvironment does; the image is checked (UserImageError, an EnvError) on
    first use: :meth:`preflight`, :meth:`start` or :meth:`fingerprint`."""

    def __init__(self, name, options, placement, topo, corunner=None, **kw):
        super().__init__(name, options, placement, topo, corunner=corunner, **kw)
        if options.boot_timeout == type(options).model_fields["boot_timeout"].default:
            self.boot_timeout = IMAGE_BOOT_TIMEOUT  # the default is sized for vhpc's guest
        self.format = image_format(options.image, options.format)
        self.image: userimage.UserImage | None = None
        self.rundir: Path | None = None
        self._booting: userimage.ImageBoot | None = None
        self._guest_fp: dict[str, Any] | None = None
        self._apps: dict[str, str] | None = None
        #: what a vcluster sets before the first boot: the guest's host name (default
        #: ``vhpc-<environment>``) and what its seed adds (userimage.SeedParts)
        self.hostname: str | None = None
        self.seed_parts = userimage.SeedParts()

    def _image_boot(self) -> userimage.ImageBoot:
        """The image checked, its overlay made and (direct boot) its kernel copied out: once
        per overlay.  Raises UserImageError."""
        if self._booting is not None:
            self._booting.verify()  # a later boot of the overlay: the image is the one checked
            return self._booting
        if self.image is None:
            self.stage("checking the image (qemu-img check, SHA-256)")
        mode = self.check_image()
        kernel = initrd = None
        if mode == "kernel":
            self.stage("copying its kernel and initramfs out")
            kernel, initrd = userimage.extract_kernel(self.image)
        self.rundir = owned_tempdir("vhpc-guest-")
        overlay = userimage.create_overlay(self.image, self.rundir / "overlay.qcow2")
        hostname = self.hostname or "vhpc-" + (
            re.sub(r"[^a-z0-9-]+", "-", self.name.lower()).strip("-")[:40] or "guest")
        self._booting = userimage.ImageBoot(overlay=overlay, hostname=hostname, kernel=kernel,
                                            initrd=initrd,
                                            append=DIRECT_APPEND if mode == "kernel" else "",
                                            seed=self.seed_parts,
                                            firmware="ovmf" if mode == "uefi" else "seabios",
                                            base=self.image)
        return self._booting

    def boot_stage(self) -> str:
        """The stage line of a boot of the image: first boot or reboot, its boot mode, and
        minutes under TCG."""
        what = "first boot" if self.sessions == 0 else f"reboot (session {self.sessions + 1})"
        return (f"{what} ({self.boot_mode}; minutes under TCG)" if self.accel == "tcg"
                else f"{what} ({self.boot_mode})")

    def check_image(self) -> str:
        """Check the image (:func:`~vhpc.environments.vm.userimage.inspect`, once) and that it
        boots as ``boot=`` asks; creates nothing.  Returns the boot mode (``kernel``,
        ``firmware`` or ``uefi``; ``auto`` resolved from the disk).  Raises UserImageError."""
        if self.image is None:
            self.image = userimage.inspect(self.options.image, self.format)
        mode = self.options.boot
        if mode == "auto":
            mode = userimage.auto_boot(self.image)
        userimage.check_boot(self.image, mode)
        return mode

    @property
    def boot_mode(self) -> str:
        """``kernel`` (direct kernel boot), ``uefi`` (OVMF) or ``firmware`` (SeaBIOS) once the
        image was checked."""
        if self._booting and self._booting.kernel:
            return "kernel"
        return "uefi" if self._booting and self._booting.firmware == "ovmf" else "firmware"

    def _request(self, placement, main: bool):
        request = super()._request(placement, main)
        return dataclasses.replace(request, image=self._image_boot()) if main else request

    def preflight(self) -> None:
        """Check the image and boot it once (the session the first trial uses), before a
        campaign stores anything.  Raises EnvError (one line, then the console's last
        lines) after removing what it made."""
        try:
            self._image_boot()  # the image's own faults first, before any QEMU starts
            self.start()  # its stage said by boot_stage
        except EnvError:
            self.close()
            raise

    def new_session(self) -> None:
        """End the session (the guest stops); the next trial boots the same overlay afresh.
        A session that has run no trial yet (the boot of :meth:`preflight`) is fresh already
        and is kept: a boot of a full distribution under TCG costs minutes."""
        if self.guest is not None and self.guest.alive() and not self._trials_in_session:
            return
        self.stop()

    def stop(self) -> None:
        """Stop the guest, keeping the overlay (what the guest built stays for the next
        boot)."""
        VmEnvironment.close(self)

    def close(self) -> None:
        """Stop the guests and remove the overlay and this run's folder; safe to call twice."""
        super().close()
        if self.rundir is not None:
            shutil.rmtree(self.rundir, ignore_errors=True)
        self.rundir, self._booting = None, None  # the image stays pinned: a later boot of
        # this environment (after a failed trial) boots the file checked, or none

    def answering(self, op):
        """``op()`` (which reaches the guest over ssh) once the guest runs, resumed (the
        campaign pauses it while another environment runs; the steps before a trial, the
        kernels' build and the inputs' copy, reached it paused, and ssh waited 300 s for
        keep-alives).  A guest that does not answer ssh, also after the waits of
        :data:`~vhpc.environments.vm.userimage.RETRY_WAITS` (GuestHung, SshUnanswered), is a
        hung guest, as for vhpc's own guest: it is killed, a fresh one is booted from the same
        overlay (:attr:`boot_hangs` keeps why) and ``op()`` runs there.  Raises EnvError
        naming the guest and the image when the fresh guest does not answer either: then the
        campaign stops (its trials done are kept; ``--resume`` goes on)."""
        for attempt in (1, 2):
            self.start()
            self.resume()  # paused while another environment ran: a paused guest never answers
            try:
                return op()
            except (GuestHung, SshUnanswered) as exc:
                hung = self.guest.unanswered(exc.why) if isinstance(exc, SshUnanswered) \
                    else exc
                self.stop()  # the overlay stays: what the guest built is still there
                if attempt == 2:
                    raise EnvError(f"{hung}, again after a fresh boot: the host may be too "
                                   "loaded for it; resume the campaign when it is quieter") \
                        from None
                self.boot_hangs.append(str(hung))
                logging.getLogger("vhpc").warning(f"{hung}: killed it, booting a fresh one")

    def kernel_dir(self, local: Path | None, impl: str, binary: str) -> Path | None:
        """The build folder inside the guest, with ``binary`` built there by the guest's own
        compiler and MPI on first use (as the ``ssh`` environment builds them); a guest that
        does not answer is replaced (:meth:`answering`)."""
        if local is None or not binary:
            return local
        return self.answering(lambda: self.guest.ssh.kernel_dir(local, impl, binary))

    def stage_files(self, paths: list[str]):
        """The inputs copied into the guest over ssh and ``rankrun.py`` there (as the ``ssh``
        environment copies them: :meth:`~vhpc.environments.ssh.environment.SshEnvironment.
        stage_files`), booting the guest if needed (:meth:`answering`); they stay in the
        overlay for later sessions.  Raises EnvError."""
        return self.answering(lambda: self.guest.ssh.stage_files(paths))

    def run(self, argv, env=None, timeout=600.0, key: str = "") -> RunResult:
        """:meth:`VmEnvironment.run` once the guest answers ssh (:meth:`answering`: a guest
        that does not is replaced by a fresh boot before the trial's command starts); a
        guest that does not answer after a fresh boot either fails the trial in one line
        naming the guest and the image."""
        try:
            self.answering(lambda: self.guest.ssh.connect() if self.guest.ssh else None)
        except EnvError as exc:
            return RunResult(None, "", "", now(), 0.0, error=str(exc))
        return super().run(argv, env, timeout, key)

    def fingerprint(self) -> dict[str, Any]:
        """VmEnvironment's fingerprint with the guest as seen from inside (booting it if
        needed): ``guest_kernel``, ``guest_os``, ``guest_mpi``, ``guest_compiler``,
        ``guest_hypervisor``, ``guest_topology``, ``guest_apps`` (LAMMPS's and GROMACS's
        versions where the guest has them: :meth:`app_versions`), ``image`` (path, format,
        SHA-256, sizes, layout, ``boot``) and the ``boot_timeout`` in force
        (:data:`IMAGE_BOOT_TIMEOUT` unless given)."""
        fp = super().fingerprint()
        if self._guest_fp is None:
            self._guest_fp = self.answering(lambda: self.guest.ssh.fingerprint())
            self._guest_fp["apps"] = self.app_versions()
        g = self._guest_fp
        fp.update(guest_kernel=g.get("host_kernel"), guest_os=g.get("os"),
                  guest_mpi=g.get("mpi"), guest_compiler=g.get("compiler"),
                  guest_hypervisor=g.get("hypervisor"), guest_topology=g.get("topology"),
                  guest_hostname=g.get("remote_host"), guest_apps=g.get("apps", {}),
                  image={**self.image.record(), "boot": self.boot_mode},
                  boot_timeout=self.boot_timeout)
        return fp

    def app_versions(self) -> dict[str, str]:
        """The applications' versions in the guest (booting it if needed):
        :func:`~vhpc.benchmarks.apps.common.app_versions` of
        :func:`~vhpc.benchmarks.apps.common.version_script` run there over ssh, once per
        overlay.  Raises EnvError when the guest cannot be reached."""
        if self._apps is None:
            res = self.answering(lambda: self.guest.ssh.shell(version_script(), timeout=120))
            self._apps = app_versions(res.stdout if res.returncode == 0 else "")
        return self._apps

    def applied(self) -> records.AppliedPlacement | None:
        """VmEnvironment's read-back plus ``boot_seconds`` (this session's boot, QEMU start to
        ready) and ``processes``: the last trial's processes read back from inside the guest
        (allowed CPUs, pages per node), as the ssh environment reads them."""
        applied = super().applied()
        if applied is None:
            return None
        extra = {"boot_seconds": round(self.guest.boot_seconds or 0.0, 1)}
        if getattr(self.guest, "processes", None) is not None:
            extra["processes"] = self.guest.processes
        return applied.model_copy(update=extra)
