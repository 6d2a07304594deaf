"""docs/architecture.md is drawn from the tree: its module index names every module under
src/vhpc/ and nothing that is gone (the README says it lists every one), except a module that
only adds benchmarks or studies: those are listed where they are generated from the registries
(docs/benchmarks.md, ``vhpc study list``), so a new one is one new module."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "vhpc"
DOC = ROOT / "docs" / "architecture.md"


def indexed_modules(text: str) -> list[str]:
    """The module paths of the doc's "Every module" table (first column, in backticks)."""
    _, _, index = text.partition("## Every module")
    assert index, "docs/architecture.md has no '## Every module' section"
    return re.findall(r"^\| `([\w/]+\.py)` \|", index, re.M)


def part_modules() -> set[str]:
    """Paths (under src/vhpc/, as the index writes them) of the modules that registered a
    benchmark or a study (:meth:`vhpc.core.registry.Registry.origin`)."""
    from vhpc.benchmarks.base import BENCHMARKS
    from vhpc.campaign.study import STUDIES

    origins = {reg.origin(name) for reg in (BENCHMARKS, STUDIES) for name in reg.names()}
    return {o.split(".", 1)[1].replace(".", "/") + ".py" for o in origins
            if o.startswith("vhpc.")}


def unindexed(listed: list[str], tree: list[str], parts: set[str]) -> list[str]:
    """Modules of ``tree`` the index ``listed`` leaves out and that add no part."""
    return sorted(set(tree) - set(listed) - parts)


def test_the_module_index_names_every_module_and_nothing_gone():
    listed = indexed_modules(DOC.read_text())
    tree = sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py"))
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert unindexed(listed, tree, part_modules()) == [], \
        "modules missing from docs/architecture.md"
    assert sorted(set(listed) - set(tree)) == [], "docs/architecture.md lists modules that are gone"


def test_a_module_that_adds_benchmarks_needs_no_index_row():
    parts = part_modules()
    assert {"benchmarks/quick.py", "benchmarks/apps/lammps.py", "campaign/studies.py"} <= parts
    assert "benchmarks/base.py" not in parts  # defines the machinery, registers nothing
    tree = ["benchmarks/quick.py", "benchmarks/dd_copy.py", "core/new.py"]
    assert unindexed(["benchmarks/quick.py"], tree, parts | {"benchmarks/dd_copy.py"}) == [
        "core/new.py"]


def test_the_index_check_sees_a_missing_and_a_stale_module():
    text = "## Every module\n| `core/errors.py` | x |\n| `core/gone.py` | y |\n"
    assert indexed_modules(text) == ["core/errors.py", "core/gone.py"]


def test_a_module_over_600_lines_is_pointed_out():
    """Past 600 lines a module may hold more than one thing: said as a warning, not a failure,
    since a module is split by meaning (whose names other modules need are public:
    tests/test_lint.py), never to meet a line count."""
    import warnings

    sizes = {p.relative_to(SRC).as_posix(): len(p.read_text().splitlines())
             for p in SRC.rglob("*.py")}
    assert len(sizes) > 100
    long = {m: n for m, n in sizes.items() if n > 600}
    if long:
        warnings.warn(f"modules over 600 lines (split by meaning where they hold two things): "
                      f"{long}", stacklevel=1)
