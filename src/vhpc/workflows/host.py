"""``vhpc doctor`` (what this host has for each environment kind and benchmark, with the
package to install) and ``vhpc host`` (topology, accelerator probe, QEMU, guest kernel, knobs;
or a remote machine's over OpenSSH)."""

from __future__ import annotations

import json

from vhpc.environments.kind import KINDS, REMOTE_MACHINE
from vhpc.workflows.common import console


def doctor(args) -> int:
    """``vhpc doctor``: each component with present/missing and the package that provides it."""
    from rich.markup import escape
    from rich.table import Table

    from vhpc.host import doctor
    from vhpc.workflows.parts import components

    # below 100 columns the RHEL column and where a present component was found are left out
    # (COLUMNS=100 or wider shows them): five folded columns made every cell two or three lines
    wide = console.width >= 100
    table = Table(title="What this host has for vhpc (vhpc doctor)")
    for col in ("component", "needed for", "status", "Debian/Ubuntu", "RHEL")[:5 if wide else 4]:
        table.add_column(col, overflow="fold")
    rows = doctor.report(components())
    for c, ok, detail in rows:
        status = (f"[green]present[/] {escape(detail)}" if wide else "[green]present[/]") if ok \
            else f"[red]missing[/] {escape(detail)}"
        table.add_row(c.name, c.needed_for, status, escape(c.debian),
                      *([escape(c.rhel)] if wide else []))
    console.print(table)
    missing = [c for c, ok, _ in rows if not ok]
    console.print(f"{len(rows) - len(missing)} of {len(rows)} present"
                  + ("; to install on Debian: apt-get install "
                     + " ".join(c.debian for c in missing if not c.debian.startswith(("(", "pip")))
                     if missing else ""), highlight=False)
    return 0


def host(args) -> int:
    """``vhpc host``: the topology, the host's identity facts, then what each registered kind
    says of this host (:meth:`~vhpc.environments.kind.EnvironmentKind.host_lines`: the vm
    kind's guest kernel and accelerator probe), then the host knobs."""
    from rich.text import Text

    from vhpc import topology
    from vhpc.host import facts

    if args.ssh:
        return remote_host_report(args.ssh)
    topo = topology.load(args.topology)
    console.print(topology.render_text(topo), highlight=False, markup=False, soft_wrap=True)
    if args.topology:
        return 0
    fp = facts.fingerprint()
    say = dict(highlight=False, markup=False)  # host facts are foreign text, never markup
    console.print(f"CPU model     {fp['cpu_model']}  ({fp['host_cpus']} CPUs)", **say)
    console.print(f"host kernel   {fp['host_kernel']}", **say)
    console.print(f"QEMU          {facts.qemu_version() or 'not installed (apt-get install qemu-system-x86)'}", **say)
    for _, kind in KINDS.items():
        for label, text, style in kind().host_lines(probe=not args.no_probe, reprobe=args.reprobe):
            console.print(Text(f"{label:<13} ") + Text(text, style=style), **say)
    console.print("host knobs    " + json.dumps(fp["knobs"]), **say)
    return 0


def remote_host_report(target: str) -> int:
    """``vhpc host --ssh [USER@]HOST[:PORT]``: the remote machine's topology and fingerprint."""
    lines = KINDS.providing(REMOTE_MACHINE)().remote_report(target)
    for line in lines:
        console.print(line, highlight=False, markup=False)
    return 0
