"""Foreign metadata read before vhpc's first pydantic model: imported first by ``vhpc.cli``."""

from __future__ import annotations

import os


def guard_pydantic_plugins() -> None:
    """Read pydantic's plugins (the ``pydantic`` entry points) once, before vhpc's first model
    asks for them: a distribution whose metadata is not UTF-8 made every model class, so every
    ``vhpc`` command, fail with a UnicodeDecodeError traceback (issue 58).  pydantic keeps an
    empty list after a failed read (pydantic/plugin/_loader.py), so the models load; the
    plugin that broke it is named by core.registry.load_plugins."""
    try:
        from pydantic.plugin._loader import get_plugins

        get_plugins()
    except Exception:  # noqa: BLE001 - foreign metadata: vhpc has no pydantic plugin to lose
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"


guard_pydantic_plugins()
