"""The seeds' findings as data (src/vhpc/campaign/findings.yaml): every quote is verbatim in its
seed file, every study exists, bad files are one line, and the verdict rules on hand cases."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vhpc.campaign import findings as F
from vhpc.campaign.studies import STUDIES

ROOT = Path(__file__).resolve().parents[1]


def _seeds() -> Path | None:
    """The seed papers: ``$VHPC_SEEDS``, else ``shared/seeds`` beside the checkout."""
    for cand in (os.environ.get("VHPC_SEEDS"), ROOT.parent / "shared" / "seeds"):
        if cand and Path(cand, "README.md").exists():
            return Path(cand)
    return None


def test_every_quote_occurs_in_its_seed_file():
    seeds = _seeds()
    if seeds is None:  # the papers are beside the project, not in it (a clone elsewhere)
        pytest.skip("seed papers not found: set VHPC_SEEDS to the folder holding them")
    texts = {p.name: " ".join(p.read_text().split()) for p in seeds.glob("*.txt")}
    for f in F.load():
        assert f.seed in texts, f.seed
        assert " ".join(f.quote.split()) in texts[f.seed], (f.study, f.quote)


def test_every_statement_names_a_registered_study_and_most_studies_have_one():
    studies = {f.study for f in F.load()}
    assert studies <= set(STUDIES.names())
    assert len(studies) >= 14  # every study the seeds state a number or direction for


@pytest.mark.parametrize("text, message", [
    ("- {study: x}", "statement 0: seed: Field required"),
    ("[", "not YAML"),
    ("a: 1", "expected a list of statements"),
    ("- {study: noise, seed: 004_2f6700c948358fb8.txt, where: s, quote: 0123456789ab, "
     "claim: overhead_pct, value: 3}", "claim overhead_pct needs tolerance"),
])
def test_a_malformed_file_is_one_line(text, message):
    with pytest.raises(F.FindingsError) as err:
        F.parse(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def _f(claim, **kw):
    return F.Finding(study="noise", seed="004_2f6700c948358fb8.txt", where="Sec. 6",
                     quote="a quote of ten chars", claim=claim, **kw)


def test_verdicts_on_hand_computed_cases():
    slower = _f("direction", expect="slower")
    assert F.verdict(slower, 1.2, (1.1, 1.3), 5, False)[0] == F.AGREES
    assert F.verdict(slower, 1.0, (0.95, 1.05), 5, False)[0] == F.DISAGREES
    same = _f("direction", expect="no-difference")
    assert F.verdict(same, 1.0, (0.95, 1.05), 5, False)[0] == F.AGREES
    # 31 % +- 15: a measured +20 % [+10, +30] overlaps [16, 46]; +5 % [+2, +8] does not
    pct = _f("overhead_pct", value=31, tolerance=15)
    assert F.verdict(pct, 1.20, (1.10, 1.30), 5, False)[0] == F.AGREES
    assert F.verdict(pct, 1.05, (1.02, 1.08), 5, False)[0] == F.DISAGREES
    # within 5 %: [0.97, 1.04] lies inside [0.95, 1.05]; [0.97, 1.06] does not
    within = _f("within_pct", value=5)
    assert F.verdict(within, 1.0, (0.97, 1.04), 5, False)[0] == F.AGREES
    assert F.verdict(within, 1.0, (0.97, 1.06), 5, False)[0] == F.DISAGREES


def test_cannot_tell_says_why():
    f = _f("direction", expect="slower")
    assert F.verdict(f, 1.2, (1.1, 1.3), 2, False) == (F.CANNOT_TELL, "too few runs (2 < 3)")
    assert "TCG" in F.verdict(f, 1.2, (1.1, 1.3), 5, True)[1]
    assert "placement" in F.verdict(f, 1.2, (1.1, 1.3), 5, False, placement_ok=False)[1]
    assert F.verdict(f, None, None, 5, False)[0] == F.CANNOT_TELL
