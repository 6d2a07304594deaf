"""A private libvirtd for hosts without a running one (tests, demos, CI containers).

:class:`PrivateLibvirtd` starts Debian's ``libvirtd`` with its own configuration file and its
sockets in a directory of its own, loading only the QEMU driver (``LIBVIRT_DRIVER_DIR`` points
at a directory holding just ``libvirt_driver_qemu.so``), so libvirt's network, nwfilter and
firewall code never runs and nothing under /etc/libvirt is read for networks or changed.
QEMU's output goes through ``virtlogd`` (libvirt's default ``stdio_handler``).

Private means private: a system-mode libvirtd keeps host-wide state (``/run/libvirt``, whose
``qemu/driver.pid`` lock admits ONE QEMU driver per host: a second daemon logs "Failed to
acquire pid file '/run/libvirt/qemu/driver.pid'" and exits after its socket opened; persistent
domain XML in ``/etc/libvirt/qemu``; domain state in ``/var/lib/libvirt/qemu``).  So when it can
(root and ``unshare`` from util-linux), :meth:`PrivateLibvirtd.start` runs virtlogd and libvirtd
in a mount namespace of their own with an empty tmpfs over each of those directories
(unshare(1), mount_namespaces(7)): daemons started for two test workers, or by two users of
one host, never see each other.  Their sockets and pid files stay in the private directory,
which every namespace sees.  Both are stopped by the pid they were started with.

Command line: ``python -m vhpc.environments.vm.backends.libvirtd start DIR`` prints the connection URI
(``qemu:///system?socket=DIR/libvirt-sock``, use it as ``LIBVIRT_DEFAULT_URI`` or
``-e vm:backend=libvirt,uri=...``); ``python -m vhpc.environments.vm.backends.libvirtd stop DIR`` stops
what ``start`` started.  Daemon options: libvirtd(8), virtlogd(8).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from vhpc.host.owned import start_ticks

#: Where Debian installs libvirt's driver modules (libvirt-daemon-driver-qemu).
DRIVER_DIRS = (Path("/usr/lib/x86_64-linux-gnu/libvirt/connection-driver"),
               Path("/usr/lib64/libvirt/connection-driver"),
               Path("/usr/lib/libvirt/connection-driver"))
VIRTLOGD_SOCK = Path("/run/libvirt/virtlogd-sock")
#: Host-wide libvirt state a private daemon gets empty copies of (module docstring).
PRIVATE_STATE = ("/run/libvirt", "/etc/libvirt/qemu", "/var/lib/libvirt/qemu")


class DaemonError(RuntimeError):
    """libvirtd could not be started; the message says what to install or check."""


def socket_live(path: Path) -> bool:
    """True when something accepts connections on the unix socket ``path``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _wait_socket(path: Path, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not socket_live(path):
        if time.monotonic() > deadline:
            raise DaemonError(f"{what} did not open {path} within {timeout:g} s")
        time.sleep(0.1)


def _stop_pid(pidfile: Path, timeout: float = 15.0) -> None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pidfile.unlink(missing_ok=True)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # gone, or a zombie: the daemon exited and waits for init to collect it, which some
        # inits do only every second or two (kill(pid, 0) still succeeds on a zombie)
        if start_ticks(pid) is None:
            break
        time.sleep(0.1)
    else:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pidfile.unlink(missing_ok=True)


class PrivateLibvirtd:
    """libvirtd (QEMU driver only) with config, sockets and pid files in ``workdir``.

    Attributes: ``uri`` (connection URI), ``socket`` (its unix socket).  :meth:`start` raises
    DaemonError when libvirtd is not installed (``apt-get install libvirt-daemon-system
    libvirt-daemon-driver-qemu``) or does not come up; :meth:`stop` stops only the daemons this
    object (or a ``start`` with the same directory) started.  Runs as root for the
    ``qemu:///system`` driver.
    """

    def __init__(self, workdir: str | os.PathLike):
        self.dir = Path(workdir).resolve()
        self.socket = self.dir / "libvirt-sock"
        self.uri = f"qemu:///system?socket={self.socket}"

    def start(self) -> str:
        """Start virtlogd and libvirtd (in a mount namespace of their own when root; else virtlogd
        only when its socket is not live); returns the URI.  Idempotent.  Raises DaemonError when
        libvirtd, virtlogd or the QEMU driver is not installed, or a daemon does not start."""
        if socket_live(self.socket):
            return self.uri
        libvirtd, virtlogd = shutil.which("libvirtd"), shutil.which("virtlogd")
        driver = next((d / "libvirt_driver_qemu.so" for d in DRIVER_DIRS
                       if (d / "libvirt_driver_qemu.so").exists()), None)
        if not libvirtd or not virtlogd or driver is None:
            raise DaemonError("libvirtd and its QEMU driver are not installed: apt-get install "
                              "libvirt-daemon-system libvirt-daemon-driver-qemu")
        drivers = self.dir / "drivers"
        drivers.mkdir(parents=True, exist_ok=True)
        link = drivers / driver.name
        if not link.exists():
            link.symlink_to(driver)
        conf = self.dir / "libvirtd.conf"
        conf.write_text(f'unix_sock_dir = "{self.dir}"\n'
                        f'log_outputs = "3:file:{self.dir / "libvirtd.log"}"\n')
        env = dict(os.environ, LIBVIRT_DRIVER_DIR=str(drivers))
        libvirtd_argv = [libvirtd, "--daemon", "--config", str(conf), "--pid-file",
                         str(self.dir / "libvirtd.pid")]
        virtlogd_argv = [virtlogd, "--daemon", "--pid-file", str(self.dir / "virtlogd.pid")]
        unshare = shutil.which("unshare")
        if os.geteuid() == 0 and unshare:
            self._start_in_namespace(unshare, virtlogd_argv, libvirtd_argv, env)
        else:  # shares the host's /run/libvirt: one such daemon per host
            if not socket_live(VIRTLOGD_SOCK):
                subprocess.run(virtlogd_argv, check=True)
                _wait_socket(VIRTLOGD_SOCK, "virtlogd")
            subprocess.run(libvirtd_argv, check=True, env=env)
        try:
            _wait_socket(self.socket, "libvirtd")
        except DaemonError:
            self.stop()
            raise
        return self.uri

    def _start_in_namespace(self, unshare: str, virtlogd_argv: list[str],
                            libvirtd_argv: list[str], env: dict[str, str]) -> None:
        """virtlogd, then libvirtd, in a new mount namespace with empty tmpfs over
        :data:`PRIVATE_STATE` (module docstring).  Raises DaemonError with the shell's
        message when a mount or a daemon fails."""
        script = (
            'set -e\n'
            'for d in ' + " ".join(PRIVATE_STATE) + '; do\n'
            '  mkdir -p "$d"; mount -t tmpfs -o mode=0755 vhpc-libvirtd "$d"\n'
            'done\n'
            '"$1" --daemon --pid-file "$2"\n'
            'shift 2\n'
            'i=0; while [ ! -S /run/libvirt/virtlogd-sock ] && [ $i -lt 600 ]; do\n'
            '  i=$((i+1)); sleep 0.05; done\n'
            'exec "$@"\n')
        out = subprocess.run([unshare, "--mount", "--propagation", "private", "--", "/bin/sh",
                              "-c", script, "vhpc-libvirtd", virtlogd_argv[0],
                              virtlogd_argv[-1], *libvirtd_argv], env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            self.stop()
            raise DaemonError("cannot start a private libvirtd in its own mount namespace: "
                              + (out.stderr.strip().splitlines() or ["?"])[-1])

    def stop(self) -> list[str]:
        """Destroy the domains still running under this daemon (libvirtd leaves running
        guests alone when it exits, so their QEMU would outlive it), then stop libvirtd, then
        virtlogd if this directory started it.  Returns the names of the domains destroyed."""
        destroyed = self._destroy_domains() if socket_live(self.socket) else []
        _stop_pid(self.dir / "libvirtd.pid")
        _stop_pid(self.dir / "virtlogd.pid")
        return destroyed

    def _destroy_domains(self) -> list[str]:
        """``virsh destroy`` (virsh(1), libvirt-clients) each running domain of this private
        daemon, every one of which a user of it started; [] when virsh is not installed or
        does not answer within 30 s."""
        virsh = shutil.which("virsh")
        if not virsh:
            return []
        try:
            names = subprocess.run([virsh, "-c", self.uri, "list", "--name"], capture_output=True,
                                   text=True, timeout=30).stdout.split()
            for name in names:
                subprocess.run([virsh, "-c", self.uri, "destroy", "--", name],
                               capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return []
        return names


def main(argv: list[str] | None = None) -> int:
    """``start DIR`` | ``stop DIR`` (see module docstring); exit status 2 on bad usage."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("start", "stop"):
        print("usage: python -m vhpc.environments.vm.backends.libvirtd start|stop DIR", file=sys.stderr)
        return 2
    daemon = PrivateLibvirtd(args[1])
    try:
        if args[0] == "start":
            print(daemon.start())
        else:
            for name in daemon.stop():
                print(f"vhpc: destroyed domain {name}, still running", file=sys.stderr)
    except (DaemonError, OSError, subprocess.CalledProcessError) as exc:
        print(f"vhpc: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
