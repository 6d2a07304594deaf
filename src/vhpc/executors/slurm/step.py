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


def cancel_srun(proc: "subprocess.Popen") -> None:
    """Cancel the step of a running ``srun`` and reap it: two SIGINTs within a second make srun
    cancel its step (srun(1), SIGNALS); SIGKILL when it has not ended 30 s later."""
    for _ in range(2):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
