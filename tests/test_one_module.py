"""A new benchmark is one new module (issue 62): docs/plugins.md's ``dd-copy`` example, added as
one file, inside the package (a copy of ``src/vhpc`` with the module saved beside vhpc's own) or
outside it (a module and its ``.dist-info`` naming it in the ``vhpc.parts`` entry points), shows
in ``vhpc compare --help``, ``vhpc doctor``, ``vhpc list benchmarks`` and the generated
docs/benchmarks.md (``vhpc list benchmarks --markdown``), with no other file edited."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plugins.md"


def example() -> str:
    """The Python block of docs/plugins.md's section "A benchmark in one module"."""
    _, _, section = DOC.read_text().partition("## A benchmark in one module")
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/plugins.md lost its one-module benchmark example"
    return found.group(1)


def inside(tmp: Path) -> Path:
    """A copy of the package (its kernel sources beside it, no build outputs) with the example
    saved as ``vhpc/benchmarks/dd_copy.py``; returns the folder to put on PYTHONPATH."""
    src = tmp / "src"
    def outputs(folder: str, names: list[str]) -> list[str]:  # kernel builds (the bytecode
        return [n for n in names if n.startswith("build") and Path(folder, n).is_dir()]  # stays

    shutil.copytree(ROOT / "src" / "vhpc", src / "vhpc", symlinks=False, ignore=outputs)
    (src / "vhpc" / "benchmarks" / "dd_copy.py").write_text(example())
    return src


def outside(tmp: Path) -> Path:
    """vhpc as it is, and a site folder holding the example as the module of a package that
    names it in the ``vhpc.parts`` entry points, as pip leaves it; returns PYTHONPATH."""
    site = tmp / "site"
    site.mkdir()
    (site / "vhpc_dd.py").write_text(example())
    info = site / "vhpc_dd-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vhpc-dd\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vhpc.parts]\ndd = vhpc_dd\n")
    return Path(os.pathsep.join([str(ROOT / "src"), str(site)]))


#: Runs each command given (a JSON list of argv lists) through ``vhpc.cli.main`` in one process
#: (one import of vhpc for the four) and prints {command: [exit status, stdout]} as JSON.
DRIVER = """
import contextlib, io, json, sys
from vhpc import cli
out = {}
for argv in json.loads(sys.argv[1]):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            rc = cli.main(argv)
        except SystemExit as exc:
            rc = exc.code or 0
    out[" ".join(argv)] = [rc, buf.getvalue()]
print(json.dumps(out))
"""

COMMANDS = (["compare", "--help"], ["doctor"], ["list", "benchmarks"],
            ["list", "benchmarks", "--markdown"])


@pytest.mark.parametrize("where", [inside, outside], ids=["inside the package", "outside it"])
def test_a_benchmark_in_one_new_module_shows_everywhere(tmp_path, where):
    env = {**os.environ, "PYTHONPATH": str(where(tmp_path)), "COLUMNS": "400", "NO_COLOR": "1"}
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(COMMANDS)], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    for command, (rc, _) in out.items():
        assert rc == 0, (command, r.stderr[-3000:])
    help_ = " ".join(out["compare --help"][1].split())
    assert "applications: gromacs, lammps; other: dd-copy (" in help_, help_
    assert re.search(r"│ dd\s+│ dd-copy\s+│ present", out["doctor"][1]), out["doctor"][1]
    listed = out["list benchmarks"][1]
    assert re.search(r"│ dd-copy\s+│ mib=256\s+│ rate \[GB/s\] ↑", listed), listed
    doc = out["list benchmarks --markdown"][1]
    assert "| [`dd-copy`](#dd-copy) | other | dd copies /dev/zero to /dev/null" in doc
    assert "\n## `dd-copy`\n" in doc and "| `mib` | `256` | MiB to copy |" in doc
    assert "- needs: dd (Debian: `coreutils`" in doc
    if where is inside:  # the copy ran, not the checkout: only the copy has the module
        assert not (ROOT / "src" / "vhpc" / "benchmarks" / "dd_copy.py").exists()
