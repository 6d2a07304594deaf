"""argparse types shared by the ``vhpc`` commands: numbers in ASCII digits only (issue 23:
Python's ``int()`` and ``float()`` accept full-width and other Unicode digits, which a shell user
cannot tell from ASCII ones in an error message)."""

from __future__ import annotations

import argparse


def ascii_int(text: str) -> int:
    """argparse type: a whole number in ASCII digits (``int()`` also takes ``３``)."""
    if not text.strip().isascii():
        raise argparse.ArgumentTypeError(f"{text!r}: write the number in ASCII digits 0-9")
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def ascii_float(text: str) -> float:
    """argparse type: a number in ASCII (``float()`` also takes ``３.５``)."""
    if not text.strip().isascii():
        raise argparse.ArgumentTypeError(f"{text!r}: write the number in ASCII digits 0-9")
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
