"""Foreign text made inert for where vhpc shows it.  Text from benchmarks (output, units),
stores (command lines, names), paths and campaign files is data: it must never be read as
rich console markup (``[/x]``), matplotlib math text (``$\\foo$``), a spreadsheet formula
(``=HYPERLINK(...)``) or a terminal escape sequence (``ESC[2J``).  Pure functions, no I/O."""

from __future__ import annotations

import re
from typing import Any

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte ESC sequences, then any
# C0/C1 control character but newline and tab.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]?"
                      r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
                      r"|\x1b[ -~]?"
                      r"|\x9b[0-?]*[ -/]*[@-~]?"
                      r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text: Any) -> str:
    """``text`` as a string without terminal escape sequences or control characters
    (newline and tab are kept): safe to print on a terminal."""
    return _ESCAPES.sub("", str(text))


def markup(text: Any) -> str:
    """``text`` made literal inside a rich markup string (``f"[bold]{markup(x)}[/]"``):
    escapes and control characters removed, ``[`` escaped so nothing is a tag."""
    from rich.markup import escape

    return escape(plain(text))


def mathtext(text: Any) -> str:
    """``text`` made literal for a matplotlib label or title: ``$`` escaped, so no part of it
    is parsed as math text; control characters removed."""
    return plain(text).replace("$", r"\$")


#: A text cell that is a plain number (``-1.5``, ``+2e3``): a spreadsheet reads it as one.
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
#: First characters that make a spreadsheet read a cell as a formula (OWASP CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell neutralised against formula injection as OWASP advises: a text cell that
    starts with ``= + - @``, a tab or a carriage return gets a leading single quote, unless it
    is a plain number.  Numbers and other values are returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_START) \
            and not _NUMBER.fullmatch(value):
        return "'" + value
    return value
