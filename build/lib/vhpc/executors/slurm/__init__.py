"""The ``slurm`` executor: trials as job steps of one allocation (docs/scale-out.md)."""

from vhpc.executors.slurm import allocation  # noqa: F401  (registers the executor)
