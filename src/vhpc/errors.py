"""The one family of user errors: every mistake a user can fix is a :class:`VhpcError`."""


class VhpcError(Exception):
    """A user error: printed by the CLI as one line with advice, exit status 2."""
