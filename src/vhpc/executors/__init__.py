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

from typing import Any

from vhpc.spec.parse import EXECUTOR_OPTIONS as OPTIONS
from vhpc.spec.parse import ExecutorSpec, parse_executor as parse

__all__ = ["OPTIONS", "ExecutorSpec", "parse", "make"]


def make(text: str | None, campaign_id: str = "") -> Any:
    """The executor ``text`` names (not yet entered).  Raises ValueError as :func:`parse`."""
    spec = parse(text)
    if spec.kind == "slurm":
        from vhpc.executors.slurm.allocation import SlurmExecutor

        return SlurmExecutor(campaign_id, **spec.options)
    from vhpc.executors.local import LocalExecutor

    return LocalExecutor()
