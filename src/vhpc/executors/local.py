"""The ``local`` executor: trials run in this process, in environments on this host."""

from __future__ import annotations

from typing import Any

from vhpc.environments.base import Environment, RunResult


class LocalExecutor:
    """Runs each trial with ``env.run`` here (the behaviour vhpc always had)."""

    kind = "local"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, env: Environment, env_spec: Any, argv: list[str], environ: dict[str, str],
            timeout: float, key: str) -> RunResult:
        """``env.run(argv, environ, timeout, key)``; never raises for a failing command."""
        return env.run(argv, environ, timeout=timeout, key=key)

    def fingerprint(self, env: Environment) -> dict[str, Any]:
        """``env.fingerprint()`` (may raise EnvError when the environment cannot tell)."""
        return env.fingerprint()
