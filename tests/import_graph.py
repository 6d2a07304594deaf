"""The import graph of ``src/vhpc`` and its circles: ``python tests/import_graph.py`` prints each
circle (modules that import one another) and exits 1 if there is one.

Edges of the load-time graph are the imports Python runs when it loads a module: statements at
module level (also inside a module-level ``if``/``try``), not those inside functions, nor those
under ``if TYPE_CHECKING:`` (they never run).  The whole graph (``inside_functions``) adds the
imports inside functions: they run later, when the function is called, but a circle through
one is a dependency both ways all the same.  ``from vhpc.a import b`` points at the module
``vhpc.a.b`` when it is one, else at the package ``vhpc.a``; relative imports are resolved
against the importing module.  Circles are the strongly connected components of more than one
module, or a module importing itself (Tarjan's algorithm, iterative).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path, src: Path = SRC) -> str:
    """``vhpc.a.b`` for ``src/vhpc/a/b.py`` (``vhpc.a`` for ``src/vhpc/a/__init__.py``)."""
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_statements(body: list[ast.stmt]):
    """Import statements Python runs when it loads a module with this ``body``."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                yield from _runtime_statements(node.orelse)
            else:
                yield from _runtime_statements(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            blocks = node.body + node.orelse + node.finalbody
            for handler in node.handlers:
                blocks += handler.body
            yield from _runtime_statements(blocks)
        elif isinstance(node, (ast.With, ast.For, ast.While)):
            yield from _runtime_statements(node.body)


def _every_statement(tree: ast.Module):
    """Every import statement of a module, those inside functions and classes too, but not
    those under ``if TYPE_CHECKING:`` (they never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node) if n is not node)
            skip.difference_update(id(n) for o in node.orelse for n in ast.walk(o))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
            yield node


def graph(src: Path = SRC, inside_functions: bool = False) -> dict[str, set[str]]:
    """Module → the vhpc modules it imports at load time (module docstring); with
    ``inside_functions``, every import it holds, those a function runs when called too."""
    modules = {module_name(p, src): p for p in sorted((src / "vhpc").rglob("*.py"))}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for me, path in modules.items():
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        found = _every_statement(tree) if inside_functions else _runtime_statements(tree.body)
        for node in found:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            edges[me].update(t for t in targets if t in modules and t != "")
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing itself;
    each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in edges[node]:
                    out.append(sorted(comp))
    return sorted(out)


def main() -> int:
    """Print the circles of the load-time graph, then those that imports inside functions
    add; 1 when there is any."""
    load = circles(graph())
    whole = circles(graph(inside_functions=True))
    for comp in load:
        print("import circle: " + " <-> ".join(comp))
    for comp in whole:
        if comp not in load:
            print("import circle (imports inside functions counted): " + " <-> ".join(comp))
    if not whole:
        print(f"no import circle among {len(graph())} modules of src/vhpc, imports inside "
              "functions counted")
    return 1 if whole else 0


if __name__ == "__main__":
    sys.exit(main())
