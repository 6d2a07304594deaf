"""The ``ssh`` environment: benchmarks run on a machine that exists already, over OpenSSH.

Everything goes through the OpenSSH client (ssh(1)) with connection multiplexing
(ssh_config(5): ``ControlMaster``, ``ControlPath`` in a private temporary directory,
``ControlPersist``): one authenticated connection carries every command of a campaign.  The
user's ``~/.ssh/config``, agent and keys apply; ``$VHPC_SSH_CONFIG`` names another
configuration file (``ssh -F``), e.g. the one ``tests/cluster/up`` writes.

Preparing the remote side (:meth:`SshEnvironment.start`):

* the kernel sources (``kernels/``), the run wrapper and ``rankrun.py`` are copied with
  ``tar`` over the connection into ``<workdir>/kernels-<hash>`` (``hash`` = SHA-256 of their
  paths and contents) and built there with the remote compilers, unless a build stamp for
  that hash exists; a benchmark's inputs are copied into ``<workdir>/inputs-<hash>``
  (:mod:`.inputs`) before its trials;
* the remote fingerprint is read once (:data:`FINGERPRINT_SCRIPT`): CPU, kernel, hypervisor
  seen from inside (``systemd-detect-virt``, ``/sys/hypervisor/type``, the CPUID
  ``hypervisor`` flag), MPI and compiler versions, and the topology (hwloc's ``lstopo`` there,
  else sysfs NUMA nodes).

Each trial runs under ``vhpc-run.sh`` (shipped with the sources): coreutils ``timeout -s KILL``
puts the benchmark in its own process group, whose id is written to ``<workdir>/run/``; a
trial that outlives its timeout, or a campaign that ends early, kills that group remotely, so
no process of vhpc is left on the remote host.  The wrapper samples the benchmark's processes
(``Cpus_allowed_list`` in ``/proc/PID/status``, pages per node in ``/proc/PID/numa_maps``)
while it runs: that is the placement read-back.  Nothing outside the work directory is changed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from vhpc.core import records
from vhpc.core.cpulist import parse_cpu_list
from vhpc.benchmarks.apps.common import RANKRUN, app_versions, version_script
from vhpc.benchmarks.base import Remote, kernel_source_files, kernel_sources
from vhpc.environments.readback import (READBACK_MARK, RUN_SCRIPT, WRAPPERS,
                                       parse_readback, remote_kernel_hash)
from vhpc.environments.base import Environment, EnvError, RunResult, now
from vhpc.environments.ssh.options import remote_workdir
from vhpc.host import owned

#: Seconds ssh waits for the TCP connection (ssh_config(5) ConnectTimeout).
CONNECT_TIMEOUT = 10
#: Seconds the master connection outlives its last use when vhpc dies without closing it
#: (ssh_config(5) ControlPersist): a bound, not a leak.
CONTROL_PERSIST = 300
KERNEL_SRC = kernel_sources()

#: Shell run on the remote host to fingerprint it; prints ``key=value`` lines, then the hwloc
#: XML (or nothing) after a ``---topology---`` line.
FINGERPRINT_SCRIPT = r"""
echo "hostname=$(hostname)"
echo "cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "host_cpus=$(getconf _NPROCESSORS_ONLN)"
echo "host_kernel=$(uname -r)"
echo "os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
v=""; c=""
if command -v systemd-detect-virt >/dev/null 2>&1; then
  v=$(systemd-detect-virt --vm 2>/dev/null); c=$(systemd-detect-virt --container 2>/dev/null)
fi
echo "virt_systemd=$v"
echo "container=$c"
echo "virt_sysfs=$(cat /sys/hypervisor/type 2>/dev/null)"
grep -qw hypervisor /proc/cpuinfo && echo "cpuid_hypervisor=1" || echo "cpuid_hypervisor=0"
echo "mpi=$( (mpirun --version 2>&1 || true) | head -n1)"
echo "compiler=$( (cc --version 2>&1 || true) | head -n1)"
echo "hwloc=$(command -v lstopo-no-graphics || command -v lstopo)"
for n in /sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] && echo "node_${n##*node}=$(cat $n/cpulist)"
done
echo ---topology---
if command -v lstopo-no-graphics >/dev/null 2>&1; then lstopo-no-graphics --of xml -;
elif command -v lstopo >/dev/null 2>&1; then lstopo --of xml -; fi
"""


def hypervisor(facts: dict[str, str]) -> str:
    """The hypervisor as seen from inside: ``systemd-detect-virt --vm``'s answer when it names one
    (``kvm``, ``xen``, ``qemu``, ``vmware``, ``microsoft``, ...), else ``/sys/hypervisor/type``
    (Xen), else ``unknown (cpuid)`` when the CPUID hypervisor bit is set, else ``none``."""
    virt = facts.get("virt_systemd", "")
    if virt and virt != "none":
        return virt
    if facts.get("virt_sysfs"):
        return facts["virt_sysfs"]
    if facts.get("cpuid_hypervisor") == "1":
        return "unknown (cpuid)"
    return "none"


def parse_fingerprint(text: str) -> tuple[dict[str, Any], str]:
    """Output of :data:`FINGERPRINT_SCRIPT` → (fingerprint dict, hwloc XML or "")."""
    head, _, xml = text.partition("---topology---\n")
    facts: dict[str, str] = {}
    for line in head.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            facts[k.strip()] = v.strip()
    nodes = {int(k[5:]): v for k, v in facts.items() if k.startswith("node_") and k[5:].isdigit()}
    fp = {
        "remote_host": facts.get("hostname"),
        "cpu_model": facts.get("cpu_model") or None,
        "host_cpus": int(facts["host_cpus"]) if facts.get("host_cpus", "").isdigit() else None,
        "host_kernel": facts.get("host_kernel"),
        "os": facts.get("os") or None,
        "hypervisor": hypervisor(facts),
        "container": facts.get("container") if facts.get("container") not in ("", "none") else None,
        "mpi": facts.get("mpi") or None,
        "compiler": facts.get("compiler") or None,
        "numa_nodes": {str(k): nodes[k] for k in sorted(nodes)} or None,
        "topology_source": "hwloc" if xml.strip() else "sysfs",
    }
    return fp, xml.strip()


#: What ssh says when no session began: the host did not answer, or not in time (the banner
#: exchange included), or refused the TCP connection.  A command was never started then, so
#: trying again is safe; a connection lost later ("closed by remote host") is not one of these.
UNANSWERED = ("banner exchange", "kex_exchange_identification", "Connection refused",
              "Connection timed out", "Operation timed out", "No route to host",
              "no answer within")


def unanswered(text: str) -> bool:
    """Whether ssh's message ``text`` says that no session began (:data:`UNANSWERED`)."""
    return any(w in text for w in UNANSWERED)


class SshUnanswered(EnvError):
    """The host did not answer ssh (:func:`unanswered`); ``why`` is ssh's own last line."""

    def __init__(self, message: str, why: str):
        super().__init__(message)
        self.why = why


def _why(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()
             and not ln.startswith("Warning: Permanently added")]
    return lines[-1] if lines else "ssh exited with status 255"


def ssh_error(stderr: str, target: str, hint: str | None = None) -> str:
    """One line for a failed connection: ssh's own last message plus what to change (``hint``
    when the host did not answer: default the ssh environment's own options)."""
    why = _why(stderr)
    if "Permission denied" in why:
        advice = "check user= and identity= (the key must be in the remote authorized_keys)"
    elif "Host key verification failed" in why:
        advice = "add the host key to known_hosts (connect once with ssh)"
    else:
        advice = hint or "check host= and port= and that sshd runs there"
    return f"ssh {target}: cannot connect: {why}: {advice}"


def connect_failure(stderr: str, target: str, hint: str | None = None) -> EnvError:
    """The error for a failed connection (:func:`ssh_error`): :class:`SshUnanswered` when
    the host did not answer, else EnvError."""
    why = _why(stderr)
    if unanswered(why):
        return SshUnanswered(ssh_error(stderr, target, hint), why)
    return EnvError(ssh_error(stderr, target, hint))


class SshEnvironment(Environment):
    """Runs commands on an existing machine over OpenSSH.

    host: name or address (ssh_config aliases work); user, port, identity: as ``ssh -l -p -i``;
    cpus: remote CPU list (``taskset -c``); nodes / membind: remote NUMA nodes (``numactl``),
    as for ``native``; workdir: remote directory for vhpc's files (default ``.cache/vhpc``
    under the remote home); config: the ssh_config(5) file (``ssh -F``; default
    ``$VHPC_SSH_CONFIG`` or the user's own, ``"none"`` for none); options: more ``-o`` options
    (a booted image pins its session's host key: environments/vm/userimage.py); kernel_hash:
    the name of the remote kernel folder (default
    :func:`~vhpc.environments.readback.remote_kernel_hash` now; the guests of one
    vcluster share the one taken when it was made, so its MPI ranks find one path); hint: the
    advice when the host does not answer (a booted image says its own: its host= and port= are
    vhpc's, not the user's); retry_waits: seconds to wait before each further attempt to
    connect when the host did not answer (:func:`unanswered`; none by default).  Raises
    :class:`EnvError` (one line, what to change) when the host cannot be reached or refuses
    the key.
    """


    def __init__(self, name: str, host: str, user: str | None = None, port: int | None = None,
                 identity: str | None = None, cpus: str | None = None, nodes: str | None = None,
                 membind: str | None = None, workdir: str = ".cache/vhpc",
                 config: str | None = None, options: tuple[str, ...] = (),
                 kernel_hash: str | None = None, hint: str | None = None,
                 retry_waits: tuple[float, ...] = ()):
        super().__init__(name)
        validate_host(host)
        if user is not None and (user.startswith("-") or not user.strip() or any(
                c.isspace() or ord(c) < 32 for c in user)):
            raise ValueError(f"user {user!r}: give a login name (no leading '-', no spaces)")
        if shutil.which("ssh") is None:
            raise ValueError("the ssh environment needs the OpenSSH client: "
                             "apt-get install openssh-client")
        if port is not None:
            port = validate_port(port)
        self.host, self.user, self.port, self.identity = host, user, port, identity
        self.config = config
        self.options = tuple(options)
        self.hint, self.retry_waits = hint, tuple(retry_waits)
        self.cpus, self.nodes, self.membind = cpus, nodes, membind
        self.workdir = remote_workdir(workdir)
        self.hash = kernel_hash or remote_kernel_hash()
        self.kdir = f"{self.workdir}/kernels-{self.hash}"
        self._ctl: str | None = None
        #: first part of the remote pid file names of this process's trials (execute sets the
        #: campaign id, so the next start of the campaign finds what a killed run left)
        self.run_tag = str(os.getpid())
        self._fp: dict[str, Any] | None = None
        self._xml = ""
        self.built: set[str] = set()

    @property
    def target(self) -> str:
        """``user@host:port`` as shown in messages."""
        return f"{self.user + '@' if self.user else ''}{self.host}" + (
            f":{self.port}" if self.port is not None else "")

    def ssh_argv(self, *extra: str) -> list[str]:
        """The ssh(1) command line up to the host (multiplexed, BatchMode: never a password
        prompt); ``extra`` options go before the host, the remote command after it."""
        argv = ["ssh"]
        config = self.config or os.environ.get("VHPC_SSH_CONFIG")
        if config:
            argv += ["-F", config]
        argv += [*self.options, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
                 "-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR"]
        if self._ctl:
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self._ctl}/cm",
                     "-o", f"ControlPersist={CONTROL_PERSIST}"]
        if self.user:
            argv += ["-l", self.user]
        if self.port is not None:
            argv += ["-p", str(self.port)]
        if self.identity:
            argv += ["-i", os.path.expanduser(self.identity), "-o", "IdentitiesOnly=yes"]
        return argv + list(extra) + ["--", self.host]

    # -- connection ---------------------------------------------------------------------
    def connect(self) -> None:
        """Open the master connection (idempotent), trying again after each of
        ``retry_waits`` while the host does not answer.  Raises SshUnanswered when it never
        answered, EnvError when it refused (the key, the host key)."""
        if self._ctl and self._check():
            return
        for wait in (*self.retry_waits, None):
            # ControlPath "cm": ssh binds "cm.<16 random characters>" first, then renames it
            self._ctl = self._ctl or str(owned.owned_socketdir("vhpc-ssh-", len("cm.") + 16))
            try:
                out = subprocess.run(self.ssh_argv("-o", "ControlMaster=yes", "-N", "-f"),
                                     capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                     timeout=CONNECT_TIMEOUT * 3)
                if out.returncode == 0:
                    return
                error = connect_failure(out.stderr, self.target, self.hint)
            except subprocess.TimeoutExpired:  # ssh itself hung: an unanswered host too
                why = f"no answer within {CONNECT_TIMEOUT * 3} s"
                error = SshUnanswered(ssh_error(why, self.target, self.hint), why)
            self._cleanup_ctl()
            if wait is None or not isinstance(error, SshUnanswered):
                raise error
            time.sleep(wait)  # the host is slow to answer (loaded): again, later

    def _check(self) -> bool:
        return subprocess.run(self.ssh_argv("-O", "check"), capture_output=True,
                              stdin=subprocess.DEVNULL).returncode == 0

    def _cleanup_ctl(self) -> None:
        if self._ctl:
            shutil.rmtree(self._ctl, ignore_errors=True)
            self._ctl = None

    def shell(self, script: str, stdin: bytes | str | None = None,
              timeout: float | None = 600.0) -> subprocess.CompletedProcess:
        """Run ``script`` with the remote user's ``sh -c`` (connection opened if needed);
        stdout/stderr as text.  Raises EnvError when ssh itself fails (exit 255),
        subprocess.TimeoutExpired when it runs past ``timeout`` seconds (None: no limit)."""
        self.connect()
        data = stdin.encode() if isinstance(stdin, str) else stdin
        out = subprocess.run(self.ssh_argv() + ["sh -c " + shlex.quote(script)], input=data,
                             capture_output=True, timeout=timeout,
                             stdin=None if data is not None else subprocess.DEVNULL)
        res = subprocess.CompletedProcess(out.args, out.returncode,
                                          out.stdout.decode("utf-8", "replace"),
                                          out.stderr.decode("utf-8", "replace"))
        if res.returncode == 255:
            raise connect_failure(res.stderr, self.target, self.hint)
        return res

    def preflight(self) -> None:
        """Check before a campaign is stored that the host answers, accepts the key and has
        the binding tools the options need (taskset for cpus=, numactl for nodes=/membind=).
        Raises EnvError (one line)."""
        self.connect()
        tools = (["taskset"] if self.cpus else []) + (["numactl"] if self._numactl() else [])
        for tool in tools:
            if self.shell(f"command -v {tool}").returncode != 0:
                raise EnvError(f"ssh {self.target}: {tool} is not installed there (needed by "
                               f"{'cpus=' if tool == 'taskset' else 'nodes=/membind='}): install "
                               f"{'util-linux' if tool == 'taskset' else 'numactl'} there or drop "
                               "the option")

    # -- remote side ----------------------------------------------------------------------
    def prepare(self, binaries: list[str] | None = None, mpi: str = "openmpi") -> str:
        """Copy the kernel sources (if this hash is not there yet) and build ``binaries`` (all
        kernels when None) with the remote compilers (``mpicc``, or ``mpicc.mpich`` for
        ``mpi=mpich`` into ``build-mpich``); returns the remote build directory.  Raises
        EnvError when the copy or the build fails (with the compiler's last line)."""
        self._ensure_copied()
        build = "build" if mpi == "openmpi" else f"build-{mpi}"
        mpicc = "mpicc" if mpi == "openmpi" else f"mpicc.{mpi}"
        want = sorted({f"{build}/{b}" for b in binaries or []} - self.built)
        if want or binaries is None:
            targets = " ".join(shlex.quote(t) for t in want)
            check = f"for b in {targets}; do [ -x \"$b\" ] || exit 1; done" if want else "false"
            make = f"make -s -j\"$(nproc 2>/dev/null || echo 1)\" BUILD={build} MPICC={mpicc}"
            # a binary that is no top-level target (NPB) comes with the full build
            res = self.shell(f"cd {shlex.quote(self.kdir)} && {{ ({check}) || {make} {targets} "
                             f">/dev/null 2>&1 || {make} 2>&1; }}", timeout=1800)
            if res.returncode != 0:
                tail = (res.stdout.strip().splitlines() or ["make failed"])[-1]
                raise EnvError(f"ssh {self.target}: building the kernels failed ({tail}): install "
                               "make, a C compiler and MPI (mpicc) there")
            self.built.update(want)
        return f"{self.kdir}/{build}"

    def _ensure_copied(self) -> None:
        """Copy the kernel sources and the run wrapper unless this hash is there already (every
        trial runs under the wrapper, also a custom command that needs no kernel)."""
        if getattr(self, "_copied", False):
            return
        self.connect()
        if self.shell(f"test -f {shlex.quote(self.kdir)}/.copied").returncode != 0:
            self._copy_sources()
        self._copied = True

    def _copy_sources(self) -> None:
        files = [str(p.relative_to(KERNEL_SRC)) for p in kernel_source_files(KERNEL_SRC)]
        wrappers = [arg for w in WRAPPERS for arg in ("-C", str(w.parent), w.name)]
        tar = subprocess.run(["tar", "-C", str(KERNEL_SRC), "-cf", "-", *sorted(files), *wrappers],
                             capture_output=True, check=True)
        kd = shlex.quote(self.kdir)
        res = self.shell(f"mkdir -p {kd} {shlex.quote(self.workdir)}/run && tar -C {kd} -xf - "
                         f"&& chmod +x {kd}/{RUN_SCRIPT.name} && touch {kd}/.copied",
                         stdin=tar.stdout)
        if res.returncode != 0:
            raise EnvError(f"ssh {self.target}: copying the kernel sources into {self.kdir} "
                           f"failed: {res.stderr.strip()[-200:]}")

    def start(self) -> None:
        """Open the connection (kernels are built on first use, see :meth:`kernel_dir`)."""
        self.connect()

    def app_versions(self) -> dict[str, str]:
        """The applications' versions on the remote host (:func:`~vhpc.benchmarks.apps.
        common.version_script` run there).  Raises EnvError when ssh fails."""
        return app_versions(self.shell(version_script(), timeout=120).stdout)

    def fingerprint(self) -> dict[str, Any]:
        """The remote machine's fingerprint (read once per campaign): see the module doc."""
        if self._fp is None:
            res = self.shell(FINGERPRINT_SCRIPT, timeout=120)
            self._fp, self._xml = parse_fingerprint(res.stdout)
            self._fp["topology"] = self._summary()
            self._fp.update(kind="ssh", accel=None, ssh_target=self.target,
                            kernel_hash=self.hash, cpus=self.cpus,
                            numactl=self._numactl() or None)
        return dict(self._fp)

    def _summary(self) -> str | None:
        """One-line summary of the remote hwloc topology (None without hwloc there)."""
        if not self._xml:
            return None
        from vhpc import topology

        try:
            return topology.from_hwloc_xml(self._xml, source=self.target).summary()
        except topology.TopologyError as exc:
            return f"unreadable hwloc XML: {exc}"

    def topology_xml(self) -> str:
        """The remote hwloc XML ("" when hwloc is not installed there)."""
        self.fingerprint()
        return self._xml

    def benchmark_cpus(self) -> int:
        """CPUs a benchmark may use there (``cpus=`` count, else the remote CPU count)."""
        if self.cpus:
            from vhpc.topology import parse_list

            return len(parse_list(self.cpus))
        return int(self.fingerprint().get("host_cpus") or 1)

    def kernel_dir(self, local: Path | None, mpi: str = "openmpi", binary: str = "") -> Path | None:
        """The remote build directory standing in for the local one, with ``binary`` built
        there on first use (None when the benchmark uses no kernel of vhpc's)."""
        if local is None or not binary:
            return local
        return Path(self.prepare([binary], mpi))

    def stage_files(self, paths: list[str]) -> Remote:
        """The inputs ``paths`` copied into the work directory (:mod:`.inputs`: regular files
        and folders only, links followed, each copy kept by its contents' hash), and
        ``rankrun.py`` (shipped with the kernel sources) run by the ``python3`` there.  Raises
        EnvError (an input that cannot be copied, a failed copy)."""
        from vhpc.environments.ssh.inputs import copy_inputs

        self._ensure_copied()
        return Remote("python3", f"{self.kdir}/{RANKRUN.name}", copy_inputs(self, paths))

    def _numactl(self) -> list[str]:
        argv = []
        if self.nodes is not None:
            argv.append(f"--cpunodebind={self.nodes}")
        if self.nodes is not None or self.membind is not None:
            argv.append(f"--membind={self.membind if self.membind is not None else self.nodes}")
        return ["numactl", *argv] if argv else []

    # -- trials ----------------------------------------------------------------------------
    def run(self, argv, env=None, timeout=600.0, key="") -> RunResult:
        """Run ``argv`` remotely under the wrapper; never raises for a failing command (a lost
        connection is the trial's ``error``)."""
        started, t0 = now(), time.monotonic()
        token = f"{self.run_tag}-{int(time.time() * 1e6)}"
        pidfile = f"{self.workdir}/run/{token}.pid"
        bind = (["taskset", "-c", str(self.cpus)] if self.cpus else []) + self._numactl()
        envs = ["env", *(f"{k}={v}" for k, v in (env or {}).items())]
        remote = [f"{self.kdir}/{RUN_SCRIPT.name}", pidfile, str(int(max(1, timeout))),
                  *envs, *bind, *argv]
        try:
            self._ensure_copied()
            proc = subprocess.Popen(self.ssh_argv() + [shlex.join(remote)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True,
                                    preexec_fn=owned.die_with_parent)
        except (EnvError, OSError) as exc:
            return RunResult(None, "", "", started, 0.0, error=str(exc))
        try:
            out, err = proc.communicate(timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            self._abort(proc, pidfile)
            return RunResult(None, "", "", started, time.monotonic() - t0, timed_out=True)
        except BaseException:
            self._abort(proc, pidfile)
            raise
        stdout = out.decode("utf-8", "replace")
        stderr, _, readback = err.decode("utf-8", "replace").partition(READBACK_MARK + "\n")
        rc = proc.returncode
        result = RunResult(rc, stdout, stderr, started, time.monotonic() - t0)
        if rc == 255 and not readback:
            result.returncode, result.error = None, ssh_error(stderr, self.target, self.hint)
        elif rc == 137 and time.monotonic() - t0 >= timeout:
            result.returncode, result.timed_out = None, True
        result.applied = records.AppliedPlacement(
            host=self.target, cpus=list(parse_cpu_list(self.cpus)) if self.cpus else None,
            numactl=self._numactl() or None,
            processes=parse_readback(readback))
        result.diagnostics = records.Diagnostics(
            perf=records.PerfCounters(unavailable="not collected on ssh hosts"))
        return result

    def _abort(self, proc: subprocess.Popen, pidfile: str) -> None:
        """End a trial cut short (timeout, SIGTERM, SIGINT): kill the ssh client, then the
        remote process group, then reap the client.  The ControlMaster holds the client's
        output pipes (handed over to it) until the remote command ends, so reaping first
        waited for the whole trial (a SIGTERMed vhpc did not end); pipes still open 10 s
        after the kill are closed unread."""
        proc.kill()
        self.kill_remote(pidfile)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            for pipe in (proc.stdout, proc.stderr):
                pipe.close()
            proc.wait()

    def leftover_record(self, tag: str) -> dict[str, Any]:
        """What the next start of this campaign needs to clean up after a killed vhpc (stored
        in the store's ``leftovers`` table): the connection and the trials' pid file tag, which
        is ``tag`` (the campaign id) from now on."""
        self.run_tag = tag
        return {"kind": "ssh", "host": self.host, "user": self.user, "port": self.port,
                "identity": self.identity, "workdir": self.workdir, "tag": self.run_tag,
                "control": self._ctl}

    def kill_remote(self, pidfile: str | None = None, tag: str | None = None) -> None:
        """Kill the process group of one trial (``pidfile``), of every trial whose pid file
        starts with ``tag``, or of every trial of vhpc still running under the work
        directory; best effort (the host may be gone)."""
        files = (shlex.quote(pidfile) if pidfile else
                 f"{shlex.quote(self.workdir)}/run/{shlex.quote(tag + '-')}*.pid" if tag else
                 f"{shlex.quote(self.workdir)}/run/*.pid")
        try:
            self.shell(f"for f in {files}; do [ -f \"$f\" ] || continue; "
                       "read g w < \"$f\"; kill -9 -$g $w 2>/dev/null; rm -f \"$f\"; done",
                       timeout=30)
        except (EnvError, subprocess.TimeoutExpired, OSError):
            pass

    def close(self) -> None:
        """Kill any trial still running remotely and close the master connection."""
        if not self._ctl:
            return
        if self._check():
            self.kill_remote()
            subprocess.run(self.ssh_argv("-O", "exit"), capture_output=True,
                           stdin=subprocess.DEVNULL)
        self._cleanup_ctl()


def clean_leftover(record: dict[str, Any]) -> list[str]:
    """Undo what a killed vhpc left of an ssh environment (a :meth:`SshEnvironment.
    leftover_record`): close its ControlMaster (``ssh -O exit`` on the recorded control
    path) and kill, over a fresh connection, the remote process groups of its trials.  Best
    effort, never raises; returns one line per action."""
    lines = []
    try:
        env = SshEnvironment("leftover", host=record["host"], user=record.get("user"),
                             port=record.get("port"), identity=record.get("identity"),
                             workdir=record.get("workdir") or ".cache/vhpc")
    except (KeyError, TypeError, ValueError):
        return lines
    old = record.get("control")
    if old and Path(old, "cm").exists():
        argv = env.ssh_argv("-o", f"ControlPath={old}/cm", "-O", "exit")
        subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
        lines.append(f"closed the ssh ControlMaster left at {old}")
    if old:
        owned.reap("vhpc-ssh-", Path(old).parent)
    try:
        env.kill_remote(tag=str(record.get("tag") or "")) if record.get("tag") else None
        lines.append(f"killed trials left running on {env.target}")
    finally:
        env.close()
    return lines


def validate_host(host: str) -> str:
    """``host`` if it can only be read by ssh(1) as a destination: not empty, no leading ``-``
    (``-oProxyCommand=...`` would be an option), no whitespace or control characters.  Raises
    ValueError naming what to change."""
    if not isinstance(host, str) or not host:
        raise ValueError("give host=NAME")
    if host.startswith("-"):
        raise ValueError(f"host {host!r} starts with '-', which ssh would read as an option: "
                         "give a host name or address")
    if any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in host):
        raise ValueError(f"host {host!r} holds a space or control character: give a host name "
                         "or address")
    return host


def parse_target(text: str) -> dict[str, Any]:
    """``[user@]host[:port]`` → keyword arguments of :class:`SshEnvironment`.  Raises
    ValueError for an empty host or a non-numeric port."""
    user, _, hostport = text.rpartition("@")
    host, colon, port = hostport.partition(":")
    if not host:
        raise ValueError(f"{text!r}: give [USER@]HOST[:PORT]")
    validate_host(host)
    return {"host": host, "user": user or None,
            "port": validate_port(port, text) if colon else None}


def validate_port(port: Any, where: str = "") -> int:
    """``port`` as a TCP port 1-65535, from an int or ASCII digits.  Raises ValueError: a
    port 0 would make ssh(1) silently use 22, full-width digits are not what a user typed."""
    text = str(port)
    if isinstance(port, bool) or not (isinstance(port, int) or (
            text.isascii() and text.isdigit())):
        raise ValueError(f"{where + ': ' if where else ''}port {text!r}: write a number 1-65535 "
                         "in ASCII digits")
    if not 1 <= int(text) <= 65535:
        raise ValueError(f"{where + ': ' if where else ''}port {text}: give a number 1-65535"
                         + (" (ssh would take 0 as its default, 22)" if int(text) == 0 else ""))
    return int(text)


def host_report(target: str) -> list[str]:
    """Lines of ``vhpc host --ssh TARGET``: the remote topology (hwloc there, else its sysfs NUMA
    nodes) and fingerprint.  Raises EnvError (one line) when the host cannot be reached."""
    from vhpc import topology

    try:
        env = SshEnvironment("remote", **parse_target(target))
    except ValueError as exc:
        raise EnvError(f"--ssh {exc}") from None
    try:
        fp = env.fingerprint()
        xml = env.topology_xml()
    finally:
        env.close()
    lines = []
    if xml:
        try:
            lines.append(topology.render_text(topology.from_hwloc_xml(xml, source=f"hwloc on {target}")))
        except topology.TopologyError as exc:
            lines.append(f"topology      unreadable hwloc XML ({exc})")
    else:
        nodes = fp.get("numa_nodes") or {}
        lines.append("topology      (no hwloc there; sysfs) " +
                     "; ".join(f"node {k}: CPUs {v}" for k, v in nodes.items()))
    lines += [f"host          {fp['remote_host']} ({fp['ssh_target']})",
              f"CPU model     {fp['cpu_model']}  ({fp['host_cpus']} CPUs)",
              f"kernel        {fp['host_kernel']}  {fp['os'] or ''}",
              f"hypervisor    {fp['hypervisor']}" + (f" (container: {fp['container']})"
                                                     if fp.get("container") else ""),
              f"MPI           {fp['mpi'] or 'none found'}",
              f"compiler      {fp['compiler'] or 'none found'}"]
    return lines
