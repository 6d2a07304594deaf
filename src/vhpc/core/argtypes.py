"""argparse types shared by the ``vhpc`` commands: the one typed parser of numeric flags.

Every numeric flag of every subcommand goes through :func:`count` (whole numbers) or
:func:`number` (reals), each with its range, so ``--repeats -5``, ``--vcpus
99999999999999999999`` or ``--timeout nan`` are refused by argparse in one line (exit 2)
before anything runs, and numbers are ASCII digits only: Python's ``int()`` and
``float()`` accept full-width and other Unicode digits (``３``, ``١٢``), which a shell user cannot
tell from ASCII ones in an error message."""

from __future__ import annotations

import argparse
import math
from typing import Callable

__all__ = ["count", "number", "ascii_int", "ascii_float", "MAX_INT"]

#: Largest magnitude any whole-number flag may take (beyond it, C sizes overflow).
MAX_INT = 2 ** 63 - 1


def _ascii(text: str) -> str:
    if not isinstance(text, str) or not text.strip().isascii():
        raise argparse.ArgumentTypeError(f"{text!r}: write the number in ASCII digits 0-9")
    return text.strip()


def count(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: a whole number in ASCII digits in [lo, hi] (the message says the
    range)."""
    def convert(text: str) -> int:
        t = _ascii(text)
        if len(t) > 40:  # int() of a huge string is slow, and no flag needs it
            raise argparse.ArgumentTypeError(f"{t[:24]}... is out of range: give {lo}..{hi}")
        try:
            value = int(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (ASCII digits "
                                             "0-9)") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range: give {lo}..{hi}")
        return value
    convert.__name__ = "whole number"  # argparse names the type in its message
    return convert


def number(lo: float, hi: float, *, lo_open: bool = False,
           hi_open: bool = False) -> Callable[[str], float]:
    """argparse type: a finite real in ASCII in the range from ``lo`` to ``hi`` (each end
    excluded when ``lo_open`` / ``hi_open``)."""
    def convert(text: str) -> float:
        t = _ascii(text)
        try:
            value = float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        below = value <= lo if lo_open else value < lo
        above = value >= hi if hi_open else value > hi
        if not math.isfinite(value) or below or above:
            raise argparse.ArgumentTypeError(
                f"{t} is out of range: give a number {'>' if lo_open else '>='} {lo:g} and "
                f"{'<' if hi_open else '<='} {hi:g}")
        return value
    convert.__name__ = "number"
    return convert


#: a whole number of any sign within :data:`MAX_INT` (prefer a ranged :func:`count`)
ascii_int = count(-MAX_INT, MAX_INT)
#: a finite real (prefer a ranged :func:`number`)
ascii_float = number(-math.inf, math.inf)
