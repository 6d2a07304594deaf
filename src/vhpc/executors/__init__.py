"""Executors: where the trials of a campaign run.

``local`` (default): in this process, on this host.  ``slurm[:partition=P,nodes=N,time=T,
account=A]``: each trial is a job step (srun(1)) inside one allocation (salloc(1)) on compute
nodes that run the same vhpc code (docs/scale-out.md).  The plan and the store do not change
with the executor; Slurm job, step and node ids and sacct(1) accounting are stored with each
trial.

An executor is a context manager (the allocation lives inside the ``with``) with
``run(env, env_spec, argv, environ, timeout, key) -> RunResult`` and ``fingerprint(env)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Options of each executor kind (values stay strings; checked by the executor).
OPTIONS = {"local": set(), "slurm": {"partition", "nodes", "time", "account"}}


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed ``--executor`` value: kind (``local``/``slurm``) and its options."""

    kind: str = "local"
    options: dict[str, str] = field(default_factory=dict)


def parse(text: str | None) -> ExecutorSpec:
    """``"slurm:partition=batch,nodes=2"`` → ExecutorSpec.  Raises ValueError (one line, what
    is allowed) for an unknown kind or option, or nodes that is not a positive integer."""
    text = (text or "local").strip()
    kind, _, rest = text.partition(":")
    kind = kind.strip()
    if kind not in OPTIONS:
        raise ValueError(f"executor {kind!r}: choose local or slurm[:partition=P,nodes=N,"
                         "time=T,account=A]")
    opts: dict[str, str] = {}
    for token in filter(None, (t.strip() for t in rest.split(","))):
        k, sep, v = token.partition("=")
        if not sep or k not in OPTIONS[kind]:
            allowed = ", ".join(sorted(OPTIONS[kind])) or "none"
            raise ValueError(f"executor {kind}: unknown option {token!r} (options: {allowed})")
        opts[k] = v
    if "nodes" in opts and not (opts["nodes"].isdigit() and int(opts["nodes"]) > 0):
        raise ValueError(f"executor slurm: nodes={opts['nodes']!r} must be a positive integer")
    return ExecutorSpec(kind, opts)


def make(text: str | None, campaign_id: str = "") -> Any:
    """The executor ``text`` names (not yet entered).  Raises ValueError as :func:`parse`."""
    spec = parse(text)
    if spec.kind == "slurm":
        from vhpc.executors.slurm import SlurmExecutor

        return SlurmExecutor(campaign_id, **spec.options)
    from vhpc.executors.local import LocalExecutor

    return LocalExecutor()
