"""The data flows one way: every module imports only rooms to its left (docs/architecture.md).
An import of a room further right (measurement importing analysis, the spec importing the
campaign) fails here, with the module and the import named."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "vhpc"

#: The rooms, left to right (docs/architecture.md); a module may import its own room and rooms
#: to its left.  Leaves (errors, records, stats, ...) hold no state and import nothing heavier.
ROOMS: list[tuple[str, ...]] = [
    ("core",),
    ("topology",),
    ("placement",),
    ("host",),
    ("benchmarks",),
    ("environments",),
    ("store", "storefile"),
    ("executors",),
    ("spec",),
    ("campaign",),
    ("analysis",),
    ("report",),
    ("workflows",),
    ("cli",),
]
LEVEL = {name: i for i, names in enumerate(ROOMS) for name in names}


def _imports(tree: ast.Module):
    """(line, module) of every absolute vhpc import, skipping ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "vhpc" \
                else [node.module]
            yield from ((node.lineno, n) for n in names)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "vhpc" and len(parts) > 1 else None


def violations() -> list[str]:
    """Every import of a room to the importer's right, as 'file:line imports module'."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        me = rel.with_suffix("").parts[0]
        if me == "__init__":
            continue
        assert me in LEVEL, f"{rel}: module not placed in a room (add it to ROOMS)"
        for line, module in _imports(ast.parse(path.read_text())):
            room = _room(module)
            if room is None or room == "__version__":
                continue
            assert room in LEVEL, f"{rel}:{line} imports {module}, which is in no room"
            if LEVEL[room] > LEVEL[me]:
                out.append(f"{rel}:{line} imports {module}")
    return out


def test_every_module_imports_only_rooms_to_its_left():
    assert violations() == []


def test_the_check_sees_a_backward_import():
    tree = ast.parse("from vhpc.analysis import analyse\nif TYPE_CHECKING:\n    import vhpc.cli\n")
    found = [m for _, m in _imports(tree)]
    assert found == ["vhpc.analysis"]  # the TYPE_CHECKING import is not a runtime dependency
    assert LEVEL["analysis"] > LEVEL["environments"]
