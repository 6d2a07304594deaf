"""The one parser and formatter of Linux CPU / node lists (``"0-3,8,10-11"``) for all of vhpc.

The format is the kernel's "cpulist" (cpuset(7), ``/sys/devices/system/cpu/online``,
``numactl --physcpubind``, ``taskset -c``): comma-separated decimal numbers and inclusive
ranges ``a-b``.  Every room that reads such a list (topology, placement policies, ``pin=`` and
``cpus=`` options, sysfs files, guest sysfs) calls :func:`parse_cpu_list`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["parse_cpu_list", "format_cpu_list", "runs", "foreign_digit"]


#: Largest index + 1 a CPU or node list may name (Linux NR_CPUS is at most 8192).
MAX_INDEX = 1 << 16


def foreign_digit(text: str) -> str | None:
    """The first decimal digit in ``text`` that is not ASCII 0-9 (full-width ``１``, Arabic-Indic
    ``٣`` ...), or None.  Python's ``int()``, ``str.isdigit`` and ``re``'s ``\\d`` accept such
    digits; every number vhpc reads from a user is ASCII only, so callers refuse them."""
    for ch in str(text):
        if ch.isdigit() and not ch.isascii():
            return ch
    return None


def parse_cpu_list(text: str, *, ordered: bool = False, sep: str = ",") -> tuple[int, ...]:
    """Parse ``"0-3,8,10-11"`` into ints.

    ``ordered=False`` (default): sorted, duplicates removed (a set, as the kernel means it).
    ``ordered=True``: the order given with duplicates kept (``pin=1,0`` means vCPU 0 on CPU 1).
    ``sep``: extra separators accepted besides ``,`` (e.g. ``",;"``); blank items are skipped.

    Raises ValueError (one line, saying what to write) on an empty list, a non-number, a
    negative number or a reversed range ``3-1``.
    """
    bad = foreign_digit(text) if text is not None else None
    if bad:
        raise ValueError(f"{text!r}: {bad!r} is not an ASCII digit: write numbers with 0-9")
    items = [text] if text is not None else []
    for s in sep:
        items = [part for item in items for part in item.split(s)]
    out: list[int] = []
    for part in (p.strip() for p in items):
        if not part:
            continue
        lo_s, dash, hi_s = part.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if dash else lo
        except ValueError:
            raise ValueError(f"bad index list item {part!r} in {text!r}: use numbers and ranges like 0-3,8") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"bad index list item {part!r} in {text!r}: use numbers and ranges like 0-3,8") from None
        if hi >= MAX_INDEX:  # bounded before the list is built (a range of 10**20 numbers)
            raise ValueError(f"index {str(hi)[:24]} in {text[:60]!r} is beyond {MAX_INDEX - 1}")
        out.extend(range(lo, hi + 1))
    if not out:
        raise ValueError(f"empty list {text!r}: give numbers and ranges like 0-3,8")
    return tuple(out) if ordered else tuple(sorted(set(out)))


def runs(values: Iterable[int]) -> list[tuple[int, int]]:
    """Contiguous runs ``(lo, hi)`` of the sorted unique values: ``[0, 1, 2, 5]`` → ``[(0, 2), (5, 5)]``."""
    out: list[tuple[int, int]] = []
    for v in sorted(set(values)):
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def format_cpu_list(values: Iterable[int]) -> str:
    """Ints as a compact cpulist: ``[0, 1, 2, 5]`` → ``"0-2,5"`` (``""`` when empty)."""
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs(values))
