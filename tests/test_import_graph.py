"""No import circle in src/vhpc outside TYPE_CHECKING (issue 43): tests/import_graph.py builds
the graph of the imports Python runs when it loads each module and lists its circles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import import_graph

SCRIPT = Path(__file__).with_name("import_graph.py")


def test_src_vhpc_has_no_import_circle():
    edges = import_graph.graph()
    assert "vhpc.campaign.studies" in edges["vhpc.campaign"]  # the registry's modules load
    assert import_graph.circles(edges) == []
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
    (pkg / "a" / "y.py").write_text("try:\n    from .x import thing\nexcept ImportError:\n"
                                    "    pass\n")
    assert import_graph.circles(import_graph.graph(tmp_path)) == [["vhpc.a.x", "vhpc.a.y"]]
