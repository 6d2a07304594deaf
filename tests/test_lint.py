"""The committed lint configuration holds: import-linter's contracts (``.importlinter``: the
rooms as layers, the kinds reached through their registered class, the kinds in order inside
the environments; imports inside functions count) and ruff's rules (``[tool.ruff]`` in pyproject.toml) over ``src``.  Both tools come
with the ``test`` extra, so under CI=true a missing one fails here instead of skipping."""

from __future__ import annotations

import os
import subprocess
import sys
import re
import textwrap
from pathlib import Path

from conftest import require_module

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd / "src")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _lint_imports(cwd: Path = ROOT) -> subprocess.CompletedProcess:
    code = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    return _run(sys.executable, "-c", code, "--no-cache", cwd=cwd)


def test_import_contracts_are_kept():
    require_module("importlinter")
    out = _lint_imports()
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "Rooms: each imports only rooms to its left" in out.stdout
    assert "Inside the environments, a kind builds only on the kinds below it" in out.stdout
    assert "0 broken" in out.stdout


def test_the_layers_contract_sees_an_import_inside_a_function(tmp_path):
    """A copy of the contract over a toy tree: core importing the CLI inside a function
    breaks it, the same import under TYPE_CHECKING does not."""
    require_module("importlinter")
    pkg = tmp_path / "src" / "vhpc"
    for room in ("core", "cli"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (tmp_path / ".importlinter").write_text(textwrap.dedent("""\
        [importlinter]
        root_package = vhpc
        exclude_type_checking_imports = True
        [importlinter:contract:rooms]
        name = rooms
        type = layers
        containers = vhpc
        layers =
            cli
            core
        """))
    (pkg / "core" / "x.py").write_text("from typing import TYPE_CHECKING\n"
                                       "if TYPE_CHECKING:\n    from vhpc.cli import y\n")
    assert _lint_imports(tmp_path).returncode == 0
    (pkg / "core" / "x.py").write_text("def f():\n    from vhpc.cli import y\n    return y\n")
    out = _lint_imports(tmp_path)
    assert out.returncode != 0 and "vhpc.core.x -> vhpc.cli" in out.stdout, out.stdout


def test_ruff_finds_nothing_in_src():
    require_module("ruff")
    out = _run(sys.executable, "-m", "ruff", "check", "--no-cache", "src")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_uses_the_committed_rules(tmp_path):
    """The committed rules, not ruff's defaults: an unused import and a noqa without a rule
    are both findings."""
    require_module("ruff")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx = 1  # noqa\n")
    out = _run(sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
               str(ROOT / "pyproject.toml"), str(bad))
    assert out.returncode == 1
    assert "F401" in out.stdout and "PGH004" in out.stdout, out.stdout


def test_every_noqa_names_its_rule_and_a_reason():
    """Every ``# noqa`` in src/vhpc names its rule and says why after it."""
    src = ROOT / "src" / "vhpc"
    bare = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if "# noqa" not in line:
                continue
            ok = re.search(r"# noqa: [A-Z]+[0-9]+(,[A-Z]+[0-9]+)*\s+\S", line)
            if not ok:
                bare.append(f"{rel}:{i}")
    assert bare == []


def test_no_private_name_is_imported_across_modules():
    """A module's ``_name`` is its own: another module that needs it needs a public name."""
    import ast

    src = ROOT / "src"
    found = set()
    for path in sorted((src / "vhpc").rglob("*.py")):
        me = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vhpc"):
                found |= {(me, a.name) for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")}
    assert found == set(), sorted(found)
