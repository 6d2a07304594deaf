"""The figure a study draws, declared as data (what the seed paper plotted).

A :class:`FigureSpec` names the seed (``"000"``), its figure number (``"Fig. 2"``), a title and
one or more :class:`Panel`.  A panel selects summaries of an analysis — benchmarks matching
``bench`` (fnmatch), metrics matching ``y`` (a regular expression, full match) — and says where
each point's x and series come from (a *source*):

* ``env``: the environment name; ``env:REGEX``: group 1 of REGEX searched in the name
  (``env:(\\d+)`` turns ``vm-span2`` into x = 2);
* ``param:NAME``: the benchmark parameter NAME (``param:ranks``, ``param:class``);
* ``metric``: group 1 of the ``y`` expression when it has one (``lat_(\\d+)`` → message
  size), else the metric name;
* ``benchmark``; ``group``: ``cold`` / ``warm`` (first trial after boot or later ones).

Several sources joined by ``&`` make a combined label (``env&param:threads``).  ``relative``:
y is the ratio to the baseline with its confidence interval (else the mean with its Student-t
interval).  ``split`` draws one sub-panel per value of a source.  ``labels`` renames x values
(``private`` → ``malloc``).  Numeric x values are drawn as lines, others as grouped bars.

Across nodes (seed 004): ``x_nodes`` draws an ``x = param:ranks`` axis as compute nodes (ranks
divided by the ranks per node the campaign ran with), ``per_node`` also divides y and its
interval by the node count (Mflop/s per node, Fig. 6); ``titles`` names split panels
(``op=barrier`` → ``Fig. 2: Barrier``).  A y axis whose values span more than two decades is
drawn on a log scale whatever ``ylog`` says.

Pure data: nothing here reads results (:mod:`vhpc.analysis.figdata` does).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    """One panel of a study figure (module docstring for the sources)."""

    y: str
    ylabel: str
    x: str
    xlabel: str
    series: str = "env"
    bench: str = "*"
    relative: bool = False
    xlog: bool = False
    ylog: bool = False
    split: str | None = None
    title: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    titles: tuple[tuple[str, str], ...] = ()
    x_nodes: bool = False
    per_node: bool = False

    def describe(self) -> str:
        """One line: "y vs x per series" for ``--dry-run``."""
        y = f"{self.ylabel} relative to the baseline" if self.relative else self.ylabel
        logs = [a for a, on in (("x", self.xlog), ("y", self.ylog)) if on]
        tail = f", log {'/'.join(logs)}" if logs else ""
        per = f", one panel per {self.split}" if self.split else ""
        return f"{y} vs {self.xlabel}, series = {self.series}{per}{tail}"


@dataclass(frozen=True)
class FigureSpec:
    """A study's figure: seed paper, figure number(s), title, panels; ``order`` sorts the
    studies of one seed in the paper's order (the first figure number)."""

    seed: str
    number: str
    title: str
    panels: tuple[Panel, ...]
    kind: str = "panels"  # "panels", or "memprofile" (seed 003 Fig. 3: scatter + fit)

    @property
    def order(self) -> float:
        """Sort key of the study among its seed's: the first number in :attr:`number` ("4a" → 4.0),
        99.0 when there is none."""
        import re

        m = re.search(r"(\d+)", self.number)
        return float(m.group(1)) if m else 99.0

    @property
    def caption(self) -> str:
        """"seed 000 Fig. 2: title"."""
        return f"seed {self.seed} {self.number}: {self.title}"

    def describe(self) -> str:
        """What ``--dry-run`` says about the figure (several lines)."""
        lines = [f"figure: {self.caption}"]
        if self.kind == "memprofile":
            lines.append("  NUMA penalty (CPI remote / local) vs MPKI, a fitted line, intensity classes")
        lines += [f"  panel {i + 1}: {p.title + ': ' if p.title else ''}{p.describe()}"
                  for i, p in enumerate(self.panels)]
        return "\n".join(lines)
