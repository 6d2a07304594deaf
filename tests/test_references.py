"""docs/references.md cites every seed paper and anchor exactly as
:mod:`vhpc.campaign.references` does, and a seed page prints its paper's full citation; no doc
points at a path of one machine."""

from __future__ import annotations

import re
from pathlib import Path

from vhpc.campaign import references
from vhpc.campaign.study import STUDIES

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "references.md").read_text()


def test_every_seed_and_anchor_is_cited_in_full_in_the_docs():
    for ref in (*references.SEEDS.values(), *references.ANCHORS.values()):
        assert ref.authors and ref.title and ref.venue and 1950 < ref.year < 2100
        assert ref.text() in DOC, ref.title
    # by name, as the reader would look them up
    for who in ("Hoefler", "McCalpin", "Heroux", "Bailey", "Plimpton", "Abraham", "Ohio State"):
        assert who in DOC, who


def test_every_study_seed_has_a_citation():
    seeds = {s.seed for _, s in STUDIES.items()}
    assert seeds and seeds <= set(references.SEEDS), sorted(seeds - set(references.SEEDS))
    assert references.cite("004").startswith("John R. Lange, Kevin Pedretti")
    assert "VEE '11" in references.cite("004") and references.cite("999") == ""


def test_a_seed_page_prints_its_citation(tmp_path):
    from vhpc.report.paper import write_seed_page

    page = write_seed_page("003", [], tmp_path / "seed.html").read_text()
    assert 'Yuxia Cheng, Wenzhi Chen. &#34;Evaluation of Virtual Machine Performance' in page \
        or "Yuxia Cheng, Wenzhi Chen. &quot;Evaluation of Virtual Machine Performance" in page \
        or 'Yuxia Cheng, Wenzhi Chen. "Evaluation of Virtual Machine Performance' in page
    assert "3PGCIC" in page and "2013" in page


def test_no_doc_names_a_path_of_one_machine():
    local = re.compile(r"/work/ref\b|/tmp/i43m\b|/work/wt/|/root/")
    found = [f"{p.name}:{i}" for p in sorted((ROOT / "docs").rglob("*.md"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if local.search(line)]
    assert found == []
