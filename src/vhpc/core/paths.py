"""Where vhpc keeps derived artefacts on this machine (guest images, probes, journals), and
how results are created: private (files 0600, folders 0700) unless shared
(:func:`private_results`, ``vhpc --share`` / ``$VHPC_SHARE_RESULTS=1``)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def cache_dir() -> Path:
    """Directory for vhpc's derived artefacts: ``$VHPC_CACHE`` or ``~/.cache/vhpc``, created
    private (0700) when missing.  Raises OSError when it cannot be created."""
    path = Path(os.environ.get("VHPC_CACHE") or Path.home() / ".cache" / "vhpc")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


#: Environment variable that, set to 1, keeps results readable by others (the process umask
#: applies as is); ``vhpc --share`` sets the same for one command.
SHARE_ENV = "VHPC_SHARE_RESULTS"
#: umask bits vhpc adds while it runs unless results are shared: files 0600, folders 0700.
PRIVATE_UMASK = 0o077


_shared = False  # inside private_results(share=True)


def sharing() -> bool:
    """True when results (store, raw outputs, reports) may be created readable by others:
    ``$VHPC_SHARE_RESULTS=1``, or inside ``private_results(share=True)`` (``vhpc --share``)."""
    return _shared or os.environ.get(SHARE_ENV) == "1"


@contextmanager
def private_results(share: bool | None = None) -> Iterator[None]:
    """Create files 0600 and folders 0700 inside this block (umask |= 077), unless ``share``
    (default :func:`sharing`): a store holds raw outputs, host facts and command lines, which
    are nobody else's business by default.  The previous umask is restored on exit."""
    global _shared
    if share if share is not None else sharing():
        before, _shared = _shared, True
        try:
            yield
        finally:
            _shared = before
        return
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def make_private(path: Path) -> None:
    """chmod a results file 0600 (a folder 0700) unless results are shared; best effort."""
    if sharing():
        return
    try:
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    except OSError:
        pass
