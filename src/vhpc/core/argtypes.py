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
import re
from typing import Callable

__all__ = ["count", "number", "percent", "fraction", "parse_percent", "path_arg", "ascii_int",
           "ascii_float", "MAX_INT"]

#: Largest magnitude any whole-number flag may take (beyond it, C sizes overflow).
MAX_INT = 2 ** 63 - 1


def _ascii(text: str) -> str:
    if not isinstance(text, str) or not text.strip().isascii():
        raise argparse.ArgumentTypeError(f"{text!r}: write the number in ASCII digits 0-9")
    return text.strip()


def count(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: a whole number in ASCII digits in [lo, hi] (the message says the
    range).  The converter raises argparse.ArgumentTypeError for anything else, which argparse
    turns into a one-line usage error."""
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
    excluded when ``lo_open`` / ``hi_open``).  The converter raises
    argparse.ArgumentTypeError for text that is no number or lies outside the range."""
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


#: a percentage as vhpc writes it everywhere: ASCII digits with an optional "%" ("5%", "2.5",
#: ".5 %"); one syntax for every flag and every campaign-file key
_PERCENT = re.compile(r"^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(%?)\s*$")


def parse_percent(text: str) -> tuple[float, bool]:
    """(value, had "%") of percentage text ("5%" → (5.0, True), "0.05" → (0.05, False),
    "5e-1%" → (0.5, True)).  Raises ValueError for anything else (signs, non-ASCII digits,
    nan, a value beyond the float range); a leading minus is named as such."""
    if isinstance(text, str) and not text.isascii():
        raise ValueError(f"{text!r}: write the percentage in ASCII digits 0-9, such as 5%")
    if isinstance(text, str) and text.strip().startswith("-"):
        raise ValueError(f"{text.strip()}: a percentage here cannot be negative; give one "
                         "such as 5%")
    m = _PERCENT.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{text!r} is not a percentage; write it as 5%")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise ValueError(f"{text.strip()} is out of range; write a percentage such as 5%")
    return value, bool(m.group(2))


def percent(lo: float, hi: float, *, lo_open: bool = False,
            hi_open: bool = False) -> Callable[[str], float]:
    """argparse type of a flag given in percent (``--margin``, ``--tolerance``,
    ``--target-ci``): ``"5%"`` or ``"5"`` → the fraction 0.05, the percentage in the range
    from ``lo`` to ``hi`` percent (each end excluded when ``lo_open`` / ``hi_open``).  A flag's
    unit is the percent, so a bare number is a percentage (``--margin 5`` = 5 %); a bare
    number below 1 is refused, asking for the % (``--margin 0.05`` would silently be 0.05 %,
    where a campaign file's 0.05 is 5 %: :func:`fraction`).  The converter raises
    argparse.ArgumentTypeError for text that is no percentage or lies outside the range."""
    def convert(text: str) -> float:
        try:
            value, pct = parse_percent(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not pct and 0 < value < 1:
            raise argparse.ArgumentTypeError(
                f"{text.strip()} without % would be {value:g} %; give a percentage: "
                f"{value * 100:g}% for the fraction {value:g}, or {value:g}% if you mean it")
        below = value <= lo if lo_open else value < lo
        above = value >= hi if hi_open else value > hi
        if below or above:
            raise argparse.ArgumentTypeError(
                f"{text.strip()} is out of range: give a percentage {'>' if lo_open else '>='} "
                f"{lo:g}% and {'<' if hi_open else '<='} {hi:g}%, such as 5%")
        return value / 100.0
    convert.__name__ = "percentage"
    return convert


#: flags whose value is a percentage (:func:`percent`); :func:`negative_values` keeps a
#: negative one (``--margin -5%``) their value, so its type says what is wrong
PERCENT_FLAGS = ("--margin", "--target-ci", "--tolerance")
_NEGATIVE = re.compile(r"^-[0-9.]")


def negative_values(argv: list[str], flags: tuple[str, ...] = PERCENT_FLAGS) -> list[str]:
    """``argv`` with a negative number after one of ``flags`` joined to it (``--margin -5%``
    → ``--margin=-5%``): argparse reads ``-5%`` as an option and says "expected one
    argument", where the flag's type can say in one line that a percentage here cannot be
    negative."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in flags and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{tok}={argv[i + 1]}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def fraction(value: object, key: str) -> float:
    """A campaign-file value meant as a fraction (``margin``, ``target_ci``): ``"5%"`` → 0.05,
    a number below 1 as it is (0.05); a bare number ≥ 1 is refused, naming ``key`` (``margin:
    5`` would be ±500 %, and on the command line ``--margin 5`` means 5 %: the file must say
    which; ``key`` "" leaves the name to the caller's message).  Raises ValueError with one
    line."""
    where = f"{key}: " if key else ""
    if isinstance(value, bool):
        raise ValueError(f"{where}{value!r} is not a fraction; write a percentage such as 5%")
    if isinstance(value, str):
        try:
            number, pct = parse_percent(value)
        except ValueError:
            raise ValueError(f"{where}{value!r} is not a fraction; write a percentage such "
                             "as 5% or a fraction such as 0.05") from None
        if pct:
            return number / 100.0
        value = number
    if isinstance(value, (int, float)) and math.isfinite(value):
        if value >= 1:
            raise ValueError(f"{where}{value:g} is read as a fraction ({value * 100:g} %); "
                             f"write {value:g}% for {value:g} percent, or a fraction below 1")
        return float(value)
    raise ValueError(f"{where}{value!r} is not a fraction; write a percentage such as 5%")


def path_arg(text: str) -> str:
    """argparse type of a path flag (``--out``): refused in one line when it is empty, only
    blanks, begins or ends with a blank (``--out " "`` made a folder named " ", a quoting slip
    no one sees in a listing) or holds a control character (a newline, NUL): raises
    argparse.ArgumentTypeError then."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} names no file or folder: give a path")
    if text != text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} begins or ends with a blank: drop it (a "
                                         "quoting slip?)")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} holds a control character: give a plain "
                                         "path")
    return text
