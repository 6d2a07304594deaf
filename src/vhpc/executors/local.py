"""The ``local`` executor: trials run in this process, in environments on this host."""

from __future__ import annotations

from typing import Any

from vhpc.environments.base import Environment, RunResult
from vhpc.executors.base import EXECUTORS, Executor


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """Runs each trial with ``env.run`` here (the behaviour vhpc always had); no options."""

    summary = "each trial in this process, on this host"

    def run(self, env: Environment, env_spec: Any, argv: list[str], environ: dict[str, str],
            timeout: float, key: str) -> RunResult:
        """``env.run(argv, environ, timeout, key)`` (``timeout`` in seconds); never raises for
        a failing command."""
        return env.run(argv, environ, timeout=timeout, key=key)
