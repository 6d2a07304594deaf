"""docs/architecture.md is drawn from the tree: its module index names every module under
src/vhpc/ and nothing that is gone (the README says it lists every one)."""

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


def test_the_module_index_names_every_module_and_nothing_gone():
    listed = indexed_modules(DOC.read_text())
    tree = sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py"))
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert sorted(set(tree) - set(listed)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(listed) - set(tree)) == [], "docs/architecture.md lists modules that are gone"


def test_the_index_check_sees_a_missing_and_a_stale_module():
    text = "## Every module\n| `core/errors.py` | x |\n| `core/gone.py` | y |\n"
    assert indexed_modules(text) == ["core/errors.py", "core/gone.py"]


def test_no_module_is_over_600_lines():
    """Issue 31's bound on a module's size: past it a module holds more than one thing."""
    long = {p.relative_to(SRC).as_posix(): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}, f"split these modules: {long}"
