"""Executors: where the trials of a campaign run.

``local`` (default): in this process, on this host.  ``slurm[:partition=P,nodes=N,time=T,
account=A]``: each trial is a job step (srun(1)) inside one allocation (salloc(1)) on compute
nodes that run the same vhpc code (docs/scale-out.md).  The plan and the store do not change
with the executor; Slurm job, step and node ids and sacct(1) accounting are stored with each
trial.  Each executor registers itself in :data:`vhpc.executors.base.EXECUTORS`
(:mod:`vhpc.executors.base` says what one must provide).
"""

from vhpc.executors.base import EXECUTORS, Executor, ExecutorSpec, make, parse

__all__ = ["EXECUTORS", "Executor", "ExecutorSpec", "make", "parse"]
