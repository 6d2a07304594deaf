"""The registry every study module registers its templates into (:data:`STUDIES`, by the
:func:`study` decorator), and what study templates share.  It imports no study module: the
registry imports every module of :mod:`vhpc.campaign` on its first lookup, so a new study is
one new module, registration needs no import back and the import graph has no circle
(``tests/import_graph.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from vhpc.campaign.figures import FigureSpec
from vhpc.core.errors import VhpcError
from vhpc.core.registry import Registry


@dataclass(frozen=True)
class Study:
    """A study: ``name``, ``summary`` (one line with the seed figure), ``template``, the
    function ``(topology, in_vm, protocol) -> (default benchmarks, environments)``,
    ``figure``, the seed figure it draws (None: the generic report only), and ``expand``,
    ``(given -b items, protocol) -> benchmarks``: how the user's own items become the
    study's points (None: they run as given); ``spans_nodes``: the paper ran it across
    compute nodes, so without a multi-node executor it is not the paper's experiment
    (``vhpc paper`` refuses it then)."""

    name: str
    summary: str
    template: Callable[..., tuple[list, list]]
    figure: FigureSpec | None = None
    expand: Callable[[list, dict], list] | None = None
    spans_nodes: bool = False

    @property
    def seed(self) -> str | None:
        """The seed paper's number ("000", "001", "003", "004") of this study's figure."""
        return self.figure.seed if self.figure else None


def paper_order(s: Study) -> tuple[str, float, str]:
    """Where study ``s`` stands in listings (``vhpc study list``, every loop over the studies): by
    seed paper, then by the first number of its figure as the paper orders them, then by name;
    studies that draw no seed figure last."""
    if s.figure is None:
        return ("~", 0.0, s.name)
    return (s.figure.seed, s.figure.order, s.name)


#: Every study by name, in the seeds' order (:func:`paper_order`).
STUDIES: Registry[Study] = Registry("study", "vhpc.campaign", key=paper_order)


def study(name: str, summary: str, figure: FigureSpec | None = None,
          expand: Callable[[list, dict], list] | None = None, spans_nodes: bool = False):
    """Decorator registering a template function as study ``name`` drawing ``figure``, on
    behalf of the template's module (so a plugin's study stays a guest, and
    ``STUDIES.origin(name)`` names where it is written)."""
    def add(template):
        STUDIES.register(name, template.__module__)(Study(name, summary, template, figure, expand, spans_nodes))
        return template
    return add


def of_seed(seed: str) -> list[Study]:
    """The studies of seed paper ``seed`` ("001" or "1"), in the paper's figure order."""
    seed = f"{int(seed):03d}" if str(seed).isdigit() else str(seed)
    found = [s for _, s in STUDIES.items() if s.figure and s.figure.seed == seed]
    return sorted(found, key=lambda s: s.figure.order)


class StudyError(VhpcError, ValueError):
    """This study cannot run as asked on this host; the message says what to do."""


def node_counts(n: int) -> list[int]:
    """The node counts of a scaling curve up to ``n``: every count up to 4, then powers of
    two, and ``n`` itself (``n`` = 3 → 1, 2, 3; 16 → 1, 2, 3, 4, 8, 16)."""
    return sorted({k for k in range(1, min(n, 4) + 1)} | {2 ** i for i in range(n.bit_length())}
                  | {n})
