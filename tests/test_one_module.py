"""A new benchmark is one new module (issue 62): docs/plugins.md's ``dd-copy`` example, added as
one file, inside the package (a copy of ``src/vhpc`` with the module saved beside vhpc's own) or
outside it (a module and its ``.dist-info`` naming it in the ``vhpc.parts`` entry points), shows
in ``vhpc compare --help``, ``vhpc doctor``, ``vhpc list benchmarks`` and the generated
docs/benchmarks.md (``vhpc list benchmarks --markdown``), with no other file edited; and the
order users see comes from what the parts declare (a suite's position, a study's figure), not
from a list elsewhere nor from which module was imported first."""

from __future__ import annotations

import ast
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


def test_a_registry_lists_by_the_key_its_parts_declare_whatever_registered_first():
    """The order users see comes from the parts (a study's seed figure, a benchmark's suite),
    not from which module happened to be imported first."""
    from vhpc.core.registry import Registry

    r = Registry("thing", key=lambda part: part["rank"])
    for name, rank in (("c", 3), ("a", 1), ("b", 2), ("a2", 1)):
        r.register(name)({"rank": rank})
    assert r.names() == ["a", "a2", "b", "c"]  # a tie keeps the registration order
    assert [n for n, _ in r.items()] == r.names() and list(r) == r.names()


def test_studies_are_listed_in_the_seeds_figure_order():
    from vhpc.campaign.study import STUDIES

    names = STUDIES.names()
    figures = [(STUDIES.get(n).figure.seed, STUDIES.get(n).figure.order) for n in names]
    assert figures == sorted(figures) and len(names) >= 16
    assert names[:2] == ["socket-span", "cold-warm"]  # seed 000 Fig. 2, then Fig. 4-6


LISTING = ("from vhpc import benchmarks; "
           "print(benchmarks.by_suite()); print(benchmarks.quick_suite())")


def test_the_listing_order_holds_whichever_benchmark_module_is_imported_first(tmp_path):
    """A process that imports the applications' and the NPB modules before anything else
    lists the suites and their benchmarks as one that imports nothing first: each suite by
    its declared position, each benchmark at its place in its suite."""
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": os.environ["PATH"]}

    def listing(first: str) -> list[str]:
        r = subprocess.run([sys.executable, "-c", first + LISTING], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.splitlines()

    plain = listing("")
    assert listing("import vhpc.benchmarks.apps.lammps, vhpc.benchmarks.npb; ") == plain
    suites, quick = ast.literal_eval(plain[0]), ast.literal_eval(plain[1])
    assert [s for s, _ in suites] == ["quick", "standard", "npb", "npb-external", "ivshmem",
                                      "applications"]
    assert quick == ["stream", "randomaccess", "pingpong", "noise", "pagefault"]
    assert dict(suites)["npb"] == ["npb-ep", "npb-is", "npb-cg", "npb-mg", "npb-ft"]


def test_a_plugin_registering_into_a_suite_under_a_taken_name_is_skipped(monkeypatch):
    """register() and suite() register on their caller's behalf: a plugin's benchmark named
    like one of vhpc's is skipped with the clash line, and vhpc's keeps its name and suite."""
    from vhpc.benchmarks.base import BENCHMARKS, SUITES, Benchmark, register, suite, suite_of
    from vhpc.core import registry

    stream = BENCHMARKS.get("stream")
    monkeypatch.setattr(registry, "_clashes", [])
    monkeypatch.setattr(registry, "_loading", "the vhpc.parts entry point toy (toy)")

    class Imposter(Benchmark):
        name = "stream"

    try:
        register(suite("toys", "a plugin's suite", 90), Imposter())
    finally:
        SUITES.unregister("toys")
    assert BENCHMARKS.get("stream") is stream and suite_of("stream").name == "quick"
    assert registry.plugin_clashes() == [
        "the vhpc.parts entry point toy (toy) registers benchmark 'stream', a name vhpc uses: "
        "vhpc's part stays, this one is skipped"]
