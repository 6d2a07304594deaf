"""``vhpc diff``'s tolerances: how much an overhead may grow before a row FAILs, from a
percentage (``--tolerance 5%``) or a per-metric file; and the one error family of ``vhpc diff``.
Pure parsing; no I/O (docs/diff.md)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from vhpc.core.errors import VhpcError

__all__ = ["DiffError", "Tolerance", "parse_percent", "parse_tolerance_file"]


class DiffError(VhpcError):
    """Bad input to ``vhpc diff``: a campaign that cannot be read (older or damaged store),
    nothing to match, a bad tolerance.  One line saying what to change."""


_PCT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*%?\s*$")


def parse_percent(text: str, where: str) -> float:
    """``"5%"`` or ``"5"`` → 0.05.  Raises DiffError naming ``where``."""
    m = _PCT.match(text)
    if not m:
        raise DiffError(f"{where}: {text!r} is not a tolerance; give a percentage such as 5%")
    value = float(m.group(1)) / 100.0
    if not 0 <= value < 10:
        raise DiffError(f"{where}: {text!r} is out of range; give 0% to 1000%")
    return value


@dataclass(frozen=True)
class Tolerance:
    """How much the overhead may grow before a row FAILs: ``rules`` are (pattern, fraction)
    tried in order against ``benchmark/metric``, ``environment/benchmark/metric`` and the bare
    ``metric`` (shell patterns, :mod:`fnmatch`); the first match wins, else ``default``.
    A row without a tolerance (no rule, no default) is PASS/FAIL-free: ``n/a``."""

    default: float | None = None
    rules: tuple[tuple[str, float], ...] = ()

    def for_row(self, environment: str, benchmark: str, metric: str) -> float | None:
        """The allowed growth of this row's overhead as a fraction (0.05 = 5 %): the first
        rule that matches, else ``default``; None when neither applies."""
        names = (f"{benchmark}/{metric}", f"{environment}/{benchmark}/{metric}", metric)
        for pattern, value in self.rules:
            if any(fnmatch.fnmatchcase(n, pattern) for n in names):
                return value
        return self.default

    def describe(self) -> str:
        """The rules and default in words (``stream/* 5 %, otherwise 10 %``), ``none`` when
        there are none."""
        parts = [f"{p} {v * 100:g} %" for p, v in self.rules]
        if self.default is not None:
            parts.append(f"{'otherwise ' if parts else ''}{self.default * 100:g} %")
        return ", ".join(parts) or "none"


def parse_tolerance_file(text: str, name: str) -> Tolerance:
    """A per-metric tolerance file: one ``PATTERN PERCENT`` per line (``stream/triad_bw 5%``,
    ``pagefault/* 20%``, ``* 10%``), ``#`` comments and blank lines ignored.  ``*`` alone sets
    the default.  Raises DiffError naming the file and line."""
    rules: list[tuple[str, float]] = []
    default = None
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise DiffError(f"{name}:{i}: expected 'PATTERN PERCENT' (e.g. 'stream/triad_bw 5%'),"
                            f" got {line!r}")
        value = parse_percent(parts[1], f"{name}:{i}")
        if parts[0] == "*":
            default = value
        else:
            rules.append((parts[0], value))
    if not rules and default is None:
        raise DiffError(f"{name}: no tolerance in the file; add lines such as '* 5%'")
    return Tolerance(default, tuple(rules))
