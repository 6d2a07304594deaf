"""The ``ssh`` kind: benchmarks on a machine that exists already, reached over OpenSSH."""

from __future__ import annotations

from vhpc.environments.kind import KINDS, REMOTE_MACHINE, EnvironmentKind, EnvPlan
from vhpc.environments.options import HostFacts
from vhpc.environments.ssh.options import SshOptions
from vhpc.topology import format_list


@KINDS.register("ssh")
class SshKind(EnvironmentKind):
    """An existing machine or VM over OpenSSH; parsing never touches the network."""

    options = SshOptions
    summary = "benchmarks on an existing machine over OpenSSH"
    provides = frozenset({REMOTE_MACHINE})
    llc_owner = "that host's"

    @classmethod
    def clean_leftover(cls, record):
        """Kill the remote process groups a killed run left and close its ControlMaster
        (:func:`~vhpc.environments.ssh.environment.clean_leftover`)."""
        from vhpc.environments.ssh.environment import clean_leftover

        return clean_leftover(record)

    def remote_report(self, target: str) -> list[str]:
        """The remote machine's topology and fingerprint
        (:func:`~vhpc.environments.ssh.environment.host_report`).  Raises EnvError (one line)
        when it cannot be reached."""
        from vhpc.environments.ssh.environment import host_report

        return host_report(target)

    def plan(self, options: SshOptions, host: HostFacts) -> EnvPlan:
        """The remote binding as text; the remote host is checked by the environment's
        preflight, not here."""
        where = f"{options.user + '@' if options.user else ''}{options.host}"
        where += f":{options.port}" if options.port else ""
        parts = [f"on {where}"]
        if options.cpus:
            parts.append(f"taskset -c {format_list(options.cpus)}")
        if options.nodes is not None or options.membind is not None:
            parts.append(f"numactl --membind={format_list(options.membind or options.nodes)}")
        return EnvPlan(" ".join(parts))

    def build(self, name, options: SshOptions, plan: EnvPlan, host: HostFacts):
        """An SshEnvironment.  Raises HostError (no ssh client)."""
        from vhpc.environments.ssh.environment import SshEnvironment

        def fmt(v):
            return format_list(v) if v is not None else None

        return SshEnvironment(name, host=options.host, user=options.user, port=options.port,
                              identity=options.identity, cpus=fmt(options.cpus),
                              nodes=fmt(options.nodes), membind=fmt(options.membind),
                              workdir=options.workdir)
