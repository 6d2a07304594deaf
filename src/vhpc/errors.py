"""The one family of user errors.

Every error that bad user input or an unusable host resource can cause derives from
:class:`VhpcError`; ``vhpc`` prints it as one line and exits with status 2.
"""

from __future__ import annotations


class VhpcError(Exception):
    """Base of every user error: one line saying what to change (never a traceback)."""
