"""One trial inside a Slurm job step: ``python -m vhpc.executors.slurm.step PAYLOAD``.

PAYLOAD is base64 of a JSON object ``{"env": EnvSpec fields, "argv": [...], "environ": {...},
"timeout": s, "key": str, "fingerprint": bool}``.  The step builds the environment on the node
it was given (a VM boots there), runs the command, closes the environment (no process left)
and prints one line ``VHPC-STEP <json>`` with the RunResult's fields, the fingerprint (when
asked) and the node's Slurm identity (job, step, node name).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from vhpc.core import records

if TYPE_CHECKING:
    from vhpc.environments.base import RunResult

MARK = "VHPC-STEP "


def encode(payload: dict) -> str:
    """The command-line argument for :func:`main` (and the guest host's, slurm/guests.py)."""
    return base64.b64encode(json.dumps(payload).encode()).decode()


def decode(arg: str) -> dict:
    """The payload :func:`encode` made."""
    return json.loads(base64.b64decode(arg))


#: Seconds srun gets to end after the two SIGINTs that ask it to cancel its step.
SRUN_GRACE = 10.0
#: Seconds slurmstepd gets to end a step scancel killed before srun is SIGKILLed.
SCANCEL_WAIT = 30.0


def srun_step(argv: list[str]) -> tuple[str | None, str | None]:
    """(job id, step name) of the srun command line ``argv`` (``--jobid=``, ``--job-name=``);
    None for what it does not name."""
    def value(flag: str) -> str | None:
        return next((a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")), None)

    return value("--jobid"), value("--job-name")


def running_steps(job: str, name: str) -> list[str]:
    """Ids (``JOB.STEP``) of the steps of ``job`` named ``name`` that Slurm still runs
    (``squeue --steps``, squeue(1)); [] when squeue does not answer."""
    try:
        out = subprocess.run(["squeue", "-h", "--steps", "-j", job, "-o", "%i %j"],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [f[0] for f in (ln.split(None, 1) for ln in out.splitlines())
            if len(f) == 2 and f[1].strip() == name and f[0].startswith(f"{job}.")]


def cancel_srun(proc: "subprocess.Popen", argv: list[str] | None = None) -> None:
    """Cancel the step of a running ``srun`` (started by ``argv``) and reap it: two SIGINTs
    within a second make srun cancel its step (srun(1), SIGNALS).  When srun has not ended
    :data:`SRUN_GRACE` s later, the step itself is cancelled with ``scancel --signal=KILL
    JOB.STEP`` (scancel(1); found by its ``--job-name``), and srun is SIGKILLed when it has
    not ended :data:`SCANCEL_WAIT` s after that.  Never raises for a process already gone."""
    for _ in range(2):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
    try:
        proc.wait(timeout=SRUN_GRACE)
        return
    except subprocess.TimeoutExpired:
        pass
    job, name = srun_step(argv or [])
    steps = running_steps(job, name) if job and name else []
    if steps:
        subprocess.run(["scancel", "--signal=KILL", *steps], capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    try:
        proc.wait(timeout=SCANCEL_WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class JobGuard:
    """Cancels Slurm job ``job`` (``scancel JOB``) should vhpc die without cancelling it: a
    tiny ``sh`` in a session of its own reads a pipe whose write end only vhpc holds, and at
    its end (vhpc gone, even by SIGKILL, when its ``srun``s die with it and their steps would
    run on in the allocation) runs scancel, which ends every step of the job.  :meth:`release`
    (vhpc cancelled the job itself) lets it end without."""

    SCRIPT = 'IFS= read -r x; [ "$x" = done ] || exec scancel "$0"'

    def __init__(self, job: str):
        self.proc = subprocess.Popen(["sh", "-c", self.SCRIPT, job], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)

    def release(self) -> None:
        """The job is cancelled (or ended): the guard ends without scancel.  Idempotent."""
        try:
            self.proc.stdin.write(b"done\n")
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def result_fields(result: "RunResult") -> dict[str, Any]:
    """A RunResult as JSON-able fields, records as versioned JSON text (records.dump)."""
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    fields.update(applied=records.dump(result.applied),
                  diagnostics=records.dump(result.diagnostics))
    return fields


def result_from_fields(fields: dict[str, Any]) -> "RunResult":
    """The inverse of :func:`result_fields`.  Raises RecordError for unreadable records."""
    from vhpc.environments.base import RunResult

    fields = dict(fields)
    fields.update(applied=records.load_applied(fields.get("applied")),
                  diagnostics=records.load_diagnostics(fields.get("diagnostics")))
    return RunResult(**fields)


def main(argv: list[str]) -> int:
    """Run one trial as the payload says; returns 0 (a failing command is in the result)."""
    from vhpc.environments import kind
    from vhpc.environments.base import EnvError
    from vhpc.environments.options import HostFacts

    payload = decode(argv[0])
    spec = payload["env"]  # an EnvSpec's fields: kind, name, options (validated by its kind)
    options = kind.KINDS.get(spec["kind"]).options.model_validate(spec["options"])
    env = kind.build(spec["kind"], spec["name"], options, HostFacts.live())
    out: dict = {"slurm": {"job_id": os.environ.get("SLURM_JOB_ID"),
                           "step_id": os.environ.get("SLURM_STEP_ID"),
                           "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname()}}
    try:
        result = env.run(payload["argv"], payload["environ"], timeout=payload["timeout"],
                         key=payload["key"])
        out["result"] = result_fields(result)
        if payload.get("fingerprint"):
            try:
                out["fingerprint"] = env.fingerprint()
            except EnvError as exc:
                out["fingerprint_error"] = str(exc)
    finally:
        env.close()
    sys.stdout.write("\n" + MARK + json.dumps(out, default=str) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
