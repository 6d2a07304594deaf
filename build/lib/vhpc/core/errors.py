"""The one family of user errors.

Every error that bad user input (a flag, a campaign file, an impossible placement, a host that
cannot do what was asked) can cause derives from :class:`VhpcError`.  ``vhpc`` prints such an
error as one line, ``vhpc: <message>``, and exits with status 2; anything else that escapes is a
bug and shows its traceback.  Messages name the field, the value and what is allowed.
"""

from __future__ import annotations


class VhpcError(Exception):
    """Base of every user error: one line saying what to change (never a traceback)."""


class SpecError(VhpcError, ValueError):
    """An invalid campaign specification (flag, campaign file or study); the message names
    where (``-e``/``-b`` item or file and key), the value and what is allowed."""


class HostError(VhpcError, ValueError):
    """A valid specification this host cannot run (a CPU or NUMA node it does not have, more
    memory than it holds); raised when a campaign starts (or is dry-run), never while parsing."""
