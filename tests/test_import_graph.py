"""No import circle in src/vhpc outside TYPE_CHECKING: tests/import_graph.py builds the graph of
the imports of each module (those Python runs when it loads it, and those inside functions)
and lists its circles.  A circle makes two modules one: neither can be read, tested or
replaced without the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import import_graph

SCRIPT = Path(__file__).with_name("import_graph.py")


def test_src_vhpc_has_no_import_circle():
    edges = import_graph.graph()
    # every module is a node, its imports read (a study module imports the registry it joins)
    assert len(edges) > 100 and "vhpc.campaign.study" in edges["vhpc.campaign.studies"]
    assert import_graph.circles(edges) == []


def test_no_circle_through_imports_inside_functions():
    edges = import_graph.graph(inside_functions=True)
    load = import_graph.graph()
    # imports inside functions are edges here, and only here
    assert all(load[m] <= edges[m] for m in load)
    assert sum(len(edges[m] - load[m]) for m in load) > 100
    assert import_graph.circles(edges) == []
    # the script says so too (the whole-tree scan a reader runs by hand)
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("no import circle"), out.stdout


def test_a_circle_is_found_and_type_checking_imports_are_not_edges(tmp_path):
    pkg = tmp_path / "vhpc"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from vhpc.a import y\n")
    (pkg / "a" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from vhpc.a import x\n\ndef f():\n    from . import x\n")
    assert import_graph.circles(import_graph.graph(tmp_path)) == []
    # the whole graph sees the import inside f, never the TYPE_CHECKING one
    assert import_graph.circles(import_graph.graph(tmp_path, inside_functions=True)) == [
        ["vhpc.a.x", "vhpc.a.y"]]
    (pkg / "a" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from vhpc.a import x\nelse:\n    x = None\n")
    assert import_graph.circles(import_graph.graph(tmp_path, inside_functions=True)) == []
    (pkg / "a" / "y.py").write_text("try:\n    from .x import thing\nexcept ImportError:\n"
                                    "    pass\n")
    assert import_graph.circles(import_graph.graph(tmp_path)) == [["vhpc.a.x", "vhpc.a.y"]]
