"""``vhpc doctor`` (what this host has for each environment kind and benchmark, with the
package to install) and ``vhpc host`` (topology, accelerator probe, QEMU, guest kernel, knobs;
or a remote machine's over OpenSSH)."""

from __future__ import annotations

import json

from vhpc.workflows.common import console


def doctor(args) -> int:
    """``vhpc doctor``: each component with present/missing and the package that provides it."""
    from rich.markup import escape
    from rich.table import Table

    from vhpc.host import doctor
    from vhpc.workflows.parts import components

    table = Table(title="What this host has for vhpc (vhpc doctor)")
    for col in ("component", "needed for", "status", "Debian/Ubuntu", "RHEL"):
        table.add_column(col, overflow="fold")
    rows = doctor.report(components())
    for c, ok, detail in rows:
        table.add_row(c.name, c.needed_for, f"[green]present[/] {escape(detail)}" if ok else
                      f"[red]missing[/] {escape(detail)}", escape(c.debian), escape(c.rhel))
    console.print(table)
    missing = [c for c, ok, _ in rows if not ok]
    console.print(f"{len(rows) - len(missing)} of {len(rows)} present"
                  + ("; to install on Debian: apt-get install "
                     + " ".join(c.debian for c in missing if not c.debian.startswith(("(", "pip")))
                     if missing else ""), highlight=False)
    return 0


def host(args) -> int:
    from vhpc.environments.vm import guestimage
    from vhpc.host import facts
    from vhpc.environments.vm import VmKind
    from rich.markup import escape

    from vhpc import topology

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
    try:
        kernel = guestimage.find_kernel()
        console.print(f"guest kernel  {kernel.image} ({kernel.release})", **say)
    except guestimage.GuestImageError as exc:
        kernel = None
        console.print(f"guest kernel  none: {exc}", **say)
    if args.no_probe or kernel is None or facts.qemu_version() is None:
        console.print("accelerator   not probed")
    else:
        probe = VmKind.probe_accel(kernel, use_cache=not args.reprobe)
        style = "green" if probe.accel == "kvm" else "yellow"
        console.print(f"accelerator   [{style}]{escape(probe.accel)}[/]: {escape(probe.reason)}")
        if probe.accel == "tcg":
            console.print("              VM results on this host are TCG emulation, not hardware "
                          "virtualization overheads.")
    console.print("host knobs    " + json.dumps(fp["knobs"]), **say)
    return 0


def remote_host_report(target: str) -> int:
    """``vhpc host --ssh [USER@]HOST[:PORT]``: the remote machine's topology and fingerprint."""
    from vhpc.environments.ssh import environment as ssh

    lines = ssh.host_report(target)
    for line in lines:
        console.print(line, highlight=False, markup=False)
    return 0
