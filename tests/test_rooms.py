"""The rooms are written once, in ``.importlinter``'s layers contract, which import-linter
checks (tests/test_lint.py: every import, those inside functions too, only rooms to the
importer's left).  What import-linter does not check is that every module sits in a room: a
new top-level module outside the layers would be free to import anything.  That is checked
here, from the same contract."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "vhpc"


def rooms() -> list[list[str]]:
    """The rooms left to right (``core`` first), each a list of its modules (``store :
    storefile`` is one room of two), from ``.importlinter``'s ``rooms`` contract."""
    ini = configparser.ConfigParser()
    ini.read(ROOT / ".importlinter")
    layers = [line.strip() for line in ini["importlinter:contract:rooms"]["layers"].splitlines()
              if line.strip()]
    return [[name.strip() for name in layer.split(":")] for layer in reversed(layers)]


def test_the_contract_names_the_rooms_of_the_design():
    names = [n for room in rooms() for n in room]
    assert names[0] == "core" and names[-1] == "cli"
    assert names.index("benchmarks") < names.index("environments") < names.index("campaign") \
        < names.index("analysis") < names.index("report") < names.index("workflows")


def test_every_module_sits_in_a_room():
    placed = {n for room in rooms() for n in room}
    tops = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"} | \
        {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert tops - placed == set(), "add these modules to a layer of .importlinter"
