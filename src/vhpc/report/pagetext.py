"""How a seed's page words what it quotes and what a panel measured: a quote from a seed
file as a reader reads it (quotation marks, emphasis, ellipses), and a scaling panel's title
from the scaling its points ran (weak or strong).  Pure functions, no I/O."""

from __future__ import annotations

import fnmatch
import re

from markupsafe import Markup, escape

from vhpc.analysis import Analysis

__all__ = ["JOINERS", "quote_html", "scaling_title"]

#: words a quote taken from inside a sentence may start with ("And 3 benchmarks ...")
JOINERS = ("and", "but", "or", "so", "also", "thus", "while", "whereas")
#: Markdown emphasis as the seed files write it: *cg*, **at least**, _x_
_EMPHASIS = re.compile(r"(?<![\w*_])([*_]{1,2})(?=\S)(.+?)(?<=\S)\1(?![\w*_])")


def quote_html(quote: str) -> Markup:
    """A seed's verbatim ``quote`` as a reader reads it on a page: in quotation marks, its
    Markdown emphasis (``*cg*``) set in italics rather than shown as asterisks, an ellipsis
    where it starts inside a sentence (a lowercase word or a joining word, :data:`JOINERS`)
    or ends before the sentence does.  The stored statement stays verbatim."""
    text = " ".join(quote.split())
    first = text.split(" ", 1)[0]
    head = "…" if text[:1].islower() or first.lower() in JOINERS else ""
    tail = "" if text.endswith((".", "!", "?", "…")) else "…"
    body = _EMPHASIS.sub(lambda m: f"\0{m.group(2)}\1", str(escape(text)))
    body = body.replace("\0", "<em>").replace("\1", "</em>")
    return Markup(f"“{head}{body}{tail}”")


def scaling_title(title: str, bench: str, metrics, analysis: Analysis) -> str:
    """``title`` naming the scaling its points measured: a panel declared "weak scaling"
    whose benchmark ran with ``scaling=fixed`` at every point (LAMMPS: the same atoms on
    every rank count) measured strong scaling, and says so; with both kinds, both."""
    if "weak scaling" not in title:
        return title
    kinds = {dict(kv.split("=", 1) for kv in s.params.split(",") if "=" in kv).get("scaling")
             for s in analysis.summaries
             if fnmatch.fnmatchcase(s.benchmark, bench) and s.metric in metrics}
    if kinds == {"fixed"}:
        return title.replace("weak scaling", "strong scaling (a fixed total problem)")
    if "fixed" in kinds:
        return title.replace("weak scaling", "weak and strong scaling (see each point's "
                             "scaling=)")
    return title
