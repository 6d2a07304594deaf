"""Run one MPI rank (or a single process) of an application in a fresh working directory
and record where it ran.  Standard library only: it runs as ``python3 -S rankrun.py`` on the
host, inside a guest (which sees the host's root file system read-only and has a writable
``/tmp``) and on Slurm nodes::

    mpirun ... -np 2 python3 -S rankrun.py --stage /path/in.lj in.lj --show log.lammps \
        -- lmp -in in.lj

For each rank it

1. creates a fresh working directory under ``$TMPDIR`` (else ``/tmp``), named after this
   process and the rank (``vhpc-app-<pid>-<start ticks>-r<rank>-XXXX``: vhpc reaps the folder
   of a rank that was killed),
   and copies every ``--stage SRC NAME`` (a file, or a folder with its contents) into it as
   NAME (one plain file name);
2. runs the program there as a child (same environment plus every ``--env NAME=VALUE``; same
   CPU binding: the launcher bound this process and the child inherits its mask), forwarding
   SIGTERM/SIGINT/SIGHUP to it;
3. while it runs, samples the CPU masks of the child's threads (``/proc/PID/task/*/status``,
   ``Cpus_allowed_list``) every ``--sample`` seconds, and when it exits reads the CPU it last
   ran on and its main thread's final mask from the zombie before reaping it (proc(5)
   ``stat`` field 39, ``status``);
4. on rank 0 only, prints every ``--show`` file of the working directory on stdout between
   ``VHPC-FILE-BEGIN name=NAME`` and ``VHPC-FILE-END name=NAME`` lines;
5. prints one ``VHPC-RANK rank=R host=H cpu=C cpus=LIST tasks=N [node=SLURM_NODE]`` line, the
   record vhpc's own MPI kernels print (``kernels/common.c``), so the same read-back
   (:func:`vhpc.benchmarks.mpilaunch.readback`) checks an application's ranks;
6. removes the working directory (``--keep`` leaves it) and exits with the child's status
   (128 + signal number when a signal ended it; 127 when it could not be started).

The rank is read from the launcher's environment: ``OMPI_COMM_WORLD_RANK`` (Open MPI
mpirun), ``PMIX_RANK`` (srun --mpi=pmix), ``PMI_RANK`` (MPICH Hydra), ``SLURM_PROCID``; 0 when
none is set (a program started without a launcher).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")


def rank_of(environ) -> int:
    """This process's MPI rank from the launcher's variables (see the module docstring)."""
    for var in RANK_VARS:
        value = environ.get(var, "")
        if value.isdigit():
            return int(value)
    return 0


def parse_cpu_list(text: str) -> set[int]:
    """CPUs of a kernel CPU list (``0-3,8``); empty for text that does not parse."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        lo, sep, hi = part.partition("-")
        try:
            cpus.update(range(int(lo), int(hi) + 1) if sep else {int(lo)})
        except ValueError:
            continue
    return cpus


def format_cpu_list(cpus) -> str:
    """``0-3,8`` for {0, 1, 2, 3, 8}; ``none`` when empty."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out) or "none"


class Sampler(threading.Thread):
    """The CPU masks of ``pid``'s threads, sampled every ``interval`` seconds until
    :meth:`stop`: :attr:`cpus` is the union of each thread's *last* sampled mask and
    :attr:`tasks` the most threads seen at once.  Last, not every: hwloc's x86 back-end (used
    by Open MPI's MPI_Init) moves the calling thread to each PU in turn to read its CPUID and
    then restores the mask, so an early sample can hold a CPU the rank never runs on."""

    def __init__(self, pid: int, interval: float):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.masks: dict[str, set[int]] = {}
        self.tasks = 0
        self._done = threading.Event()

    @property
    def cpus(self) -> set[int]:
        """The union of every thread's last sampled mask: the CPUs the process ran on (a set of CPU
        numbers; empty before the first sample)."""
        out: set[int] = set()
        for mask in list(self.masks.values()):
            out |= mask
        return out

    def sample(self) -> None:
        """Read each thread's ``Cpus_allowed_list`` from ``/proc/<pid>/task/<tid>/status``
        (proc(5)) into :attr:`masks` and raise :attr:`tasks` to the threads seen.  A process or
        thread that has exited is skipped without an error."""
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return
        seen = 0
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("Cpus_allowed_list:"):
                            self.masks[tid] = parse_cpu_list(line.split(":", 1)[1])
                            seen += 1
                            break
            except OSError:
                continue
        self.tasks = max(self.tasks, seen)

    def run(self) -> None:
        """Sample every :attr:`interval` seconds until :meth:`stop` (the thread's body)."""
        while not self._done.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        """Ask the sampling thread to end; its loop ends at once (join it to wait)."""
        self._done.set()


def last_cpu(pid: int) -> int:
    """The CPU ``pid`` last ran on (proc(5) stat field 39), -1 when unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        return int(text[text.rindex(")") + 2:].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def main_mask(pid: int) -> set[int]:
    """CPUs of ``pid``'s main thread as it exited (``Cpus_allowed_list`` of the zombie's
    ``/proc/PID/status``; empty when unreadable): the mask after any temporary move, which a
    sample taken during hwloc's CPUID walk would miss."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return parse_cpu_list(line.split(":", 1)[1])
    except OSError:
        pass
    return set()


def owner_tag() -> str:
    """``<pid>-<start ticks>`` of this process (proc(5) ``stat`` field 22), the tag vhpc's
    reaper (``vhpc.host.owned.reap``) reads to tell a live rank's working folder from one
    whose rank was killed."""
    try:
        with open("/proc/self/stat") as f:
            ticks = f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        ticks = "None"
    return f"{os.getpid()}-{ticks}"


def stage(sources: list[list[str]], workdir: str) -> None:
    """Copy each (SRC, NAME) into ``workdir`` as NAME (folders with their contents, symbolic
    links followed).  NAME must be one plain file name (no ``/``, not ``.``/``..``): a copy
    never lands outside ``workdir``.  Only regular files and folders are copied (a device or
    FIFO, say ``/dev/zero``, would never end).  Raises OSError naming what is wrong."""
    import stat

    for src, name in sources:
        if not name or "/" in name or name in (".", ".."):
            raise OSError(f"{name!r} is not a plain file name")
        dest = os.path.join(workdir, name)
        mode = os.stat(src).st_mode
        if stat.S_ISDIR(mode):
            shutil.copytree(src, dest, symlinks=False)
        elif stat.S_ISREG(mode):
            shutil.copy(src, dest)
        else:
            raise OSError(f"{src} is not a regular file or folder")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="rankrun.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", action="append", default=[], nargs=2, metavar=("SRC", "NAME"),
                    help="file or folder copied into the working directory as NAME")
    ap.add_argument("--show", action="append", default=[], metavar="FILE",
                    help="file of the working directory printed by rank 0 after the run")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment variable set for the program")
    ap.add_argument("--sample", type=float, default=0.2, help="seconds between mask samples")
    ap.add_argument("--keep", action="store_true", help="leave the working directory")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the program after --")
    rank = rank_of(os.environ)
    workdir = tempfile.mkdtemp(prefix=f"vhpc-app-{owner_tag()}-r{rank}-")
    try:
        try:
            stage(args.stage, workdir)
        except OSError as exc:
            sys.stderr.write(f"rankrun: rank {rank}: cannot stage an input: {exc}\n")
            return 127
        try:
            environ = dict(os.environ)
            environ.update(item.partition("=")[::2] for item in args.env)
            child = subprocess.Popen(command, cwd=workdir, env=environ)
        except OSError as exc:
            sys.stderr.write(f"rankrun: rank {rank}: cannot run {command[0]}: {exc}\n")
            return 127

        def forward(sig, _frame):
            child.send_signal(sig)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, forward)
        sampler = Sampler(child.pid, args.sample)
        sampler.sample()
        sampler.start()
        while True:
            try:  # wait for the exit without reaping, so /proc/PID/stat still answers
                os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
        sampler.stop()
        sampler.join(timeout=2 * args.sample + 1)
        final = main_mask(child.pid)  # the exited main thread's own mask, from the zombie
        if final:
            sampler.masks[str(child.pid)] = final
        cpu = last_cpu(child.pid)
        rc = child.wait()
        rc = rc if rc >= 0 else 128 - rc
        sys.stdout.flush()
        out = []
        if rank == 0:
            for name in args.show:
                path = os.path.join(workdir, name)
                try:
                    with open(path, errors="replace") as f:
                        text = f.read()
                except OSError:
                    sys.stderr.write(f"rankrun: {name} was not written\n")
                    continue
                out.append(f"VHPC-FILE-BEGIN name={name}\n{text}"
                           f"{'' if text.endswith(chr(10)) else chr(10)}VHPC-FILE-END name={name}\n")
        cpus = sampler.cpus or os.sched_getaffinity(0)
        host = socket.gethostname().replace(" ", "_").replace("=", "_") or "unknown"
        node = os.environ.get("SLURMD_NODENAME", "").replace(" ", "_").replace("=", "_")
        out.append(f"VHPC-RANK rank={rank} host={host} cpu={cpu} cpus={format_cpu_list(cpus)} "
                   f"tasks={max(sampler.tasks, 1)}{' node=' + node if node else ''}\n")
        sys.stdout.write("".join(out))
        sys.stdout.flush()
        return rc
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
