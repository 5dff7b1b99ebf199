"""Labels a reviewer cannot misread: the paper's rounding said where our arithmetic differs,
plot legends that say what is drawn, and every page pointing to the glossary of its words."""

from __future__ import annotations

import re
from pathlib import Path

from weince.pipeline.claims import load_claims
from weince.report.forest import legend_words
from weince.report.tables import rounding_notes

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"


def _claim(cid: str) -> dict:
    return next(c for c in load_claims(CLAIMS)["claims"] if c["id"] == cid)


def test_the_papers_rounding_is_noted_where_its_gain_is_not_its_difference():
    """C7 prints +4.63 where 76.36 - 71.74 = 4.62; every other registry row's printed gain
    is the difference of its printed numbers (or it prints no gain), so only C7 gets a note."""
    notes = {c["id"]: rounding_notes(c) for c in load_claims(CLAIMS)["claims"]}
    assert [cid for cid, n in notes.items() if n] == ["C7"]
    (note,) = notes["C7"]
    assert "+4.63" in note and "76.36 - 71.74 = +4.62" in note and "paper's rounding" in note


def test_a_gain_that_is_its_difference_gets_no_note():
    claim = {"rows": [{"label": "x", "paper": {"baseline": 50.01, "treatment": 53.28,
                                               "gain": 3.27}}]}
    assert rounding_notes(claim) == []
    claim["rows"][0]["paper"]["gain"] = 3.30
    assert rounding_notes(claim) and "53.28 - 50.01 = +3.27" in rounding_notes(claim)[0]


def test_legends_say_what_each_kind_draws():
    """C8 and C9 have no encoders: their points are a mean over timing runs and the
    largest recorded difference; the training claims' are means over encoder seeds."""
    assert "encoder" not in " ".join(legend_words("overhead"))
    assert "timing runs" in legend_words("overhead")[0]
    assert "encoder" not in " ".join(legend_words("exact"))
    assert "largest" in legend_words("exact")[0]
    assert legend_words("gain")[:2] == ("ours (mean over encoder seeds)",
                                        "95% t-interval across encoder seeds")
    assert "timing runs" in legend_words("overhead")[2]


def test_the_glossary_explains_the_words_the_pages_use():
    """Each term the summary and the claim pages use without explaining it has an entry."""
    text = (REPO / "docs" / "glossary.md").read_text()
    for term in ("no verdict: scale model only", "not run at this profile", "scale model",
                 "primary arm", "implementation check", "synthetic experiment",
                 "encoder seed", "probed with seeds", "grid point",
                 "attributed from the loss alone",
                 "unit", "infonce_topm", "weince_recipe", "95% CI", "paper's rounding"):
        assert term in text, f"docs/glossary.md does not explain {term!r}"
    assert re.search(r"\| \*\*n\*\* \|", text)
