"""Slurm's clients called with a time limit, and an allocation waited for with its state said.

Every call of sinfo, squeue, scontrol, scancel and sacct goes through :func:`slurm_call`: a
controller that hangs must not hang vhpc.  :func:`salloc_waiting` runs ``salloc`` while looking
at its job with squeue(1), so that a pending allocation says what it waits for ("waiting for 3
nodes in partition P (Priority), 2 min") and is withdrawn after ``wait=`` minutes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Callable

from vhpc.environments.base import EnvError
from vhpc.host.owned import die_with_parent

#: Seconds a Slurm client call (sinfo, squeue, scontrol, scancel, sacct) may take: each asks
#: slurmctld once and gets its answer or gives up after MessageTimeout (10 s by default,
#: slurm.conf(5)), so a call still running after this is a controller that hangs.
CALL_S = 60.0
#: Seconds between two looks at a pending allocation (squeue), and the least between two
#: messages about it when nothing changed.
POLL_S, SAY_EVERY_S = 5.0, 60.0


def slurm_call(argv: list[str], timeout: float = CALL_S) -> subprocess.CompletedProcess:
    """Run the Slurm client ``argv`` (output captured as text, no stdin) for at most
    ``timeout`` seconds.  One that runs longer is killed and reads as a controller that does
    not answer: exit status 124 with "Socket timed out" in its stderr (:func:`unreachable`).
    Never raises for the call's own failure; OSError when the command cannot start."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]}: Socket timed out: no "
                                           f"answer within {timeout:.0f} s")


def pending_line(row: str, since_s: float) -> str | None:
    """What a pending allocation waits for, from its squeue(1) row ``STATE|REASON|NODES|
    PARTITION`` (``-o %T|%r|%D|%P``): "waiting for 3 nodes in partition P (Priority), 2 min";
    None when the row is not a pending job."""
    parts = row.strip().split("|")
    if len(parts) != 4 or parts[0] != "PENDING":
        return None
    _, reason, nodes, partition = parts
    count = f"{nodes} node{'s' if nodes != '1' else ''}" if nodes.isdigit() else "nodes"
    return (f"waiting for {count} in partition {partition or '(default)'} "
            f"({reason or 'no reason given'}), {since_s / 60:.0f} min")



def salloc_waiting(argv: list[str], job_name: str, wait_minutes: float, own_name: bool = True,
                   say: Callable[[str], None] | None = None) -> subprocess.CompletedProcess:
    """Run salloc(1) ``argv`` until Slurm grants or refuses the allocation, looking at the job
    ``job_name`` every :data:`POLL_S` seconds (squeue) and saying, while it is pending, what it
    waits for (:func:`pending_line`, on stderr as ``vhpc: ...`` or to ``say``) when that
    changes and every :data:`SAY_EVERY_S`.  After ``wait_minutes`` pending (or an interrupt)
    salloc is stopped, which withdraws the request, and, when the job name is this
    campaign's alone (``own_name``), a pending job of that name is cancelled as well.  Returns
    salloc's completed process; raises EnvError when it waited too long."""
    say = say or (lambda line: print(f"vhpc: {line}", file=sys.stderr, flush=True))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, preexec_fn=die_with_parent)
    t0, said, last, line = time.monotonic(), 0.0, "", None
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=POLL_S)
                return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                pass
            waited = time.monotonic() - t0
            rows = slurm_call(["squeue", "-h", f"--name={job_name}", "-o",
                               "%T|%r|%D|%P"]).stdout.splitlines()
            line = next((x for x in (pending_line(r, waited) for r in rows) if x), None) or line
            if line and (line.rsplit(",", 1)[0] != last or time.monotonic() - said >= SAY_EVERY_S):
                say(line)
                said, last = time.monotonic(), line.rsplit(",", 1)[0]
            if waited >= wait_minutes * 60:
                raise EnvError(f"no Slurm allocation after {wait_minutes:g} min "
                               f"({line or 'still pending'}): free nodes, ask for fewer "
                               "(nodes=) or another partition, or wait longer (wait=MIN)")
    finally:
        if proc.poll() is None:  # interrupted or given up: withdraw the request
            proc.terminate()
            try:
                proc.wait(timeout=CALL_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if own_name:
                slurm_call(["scancel", f"--name={job_name}", "--state=PENDING"])
