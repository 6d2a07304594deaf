"""Where vhpc keeps derived artefacts on this machine (guest images, probes, journals)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Directory for vhpc's derived artefacts: ``$VHPC_CACHE`` or ``~/.cache/vhpc``, created
    private (0700) when missing.  Raises OSError when it cannot be created."""
    path = Path(os.environ.get("VHPC_CACHE") or Path.home() / ".cache" / "vhpc")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
