"""Claim pages and LaTeX tables a reviewer can use: verdict, table and figure first, the
rule and notes below; short captions and five LaTeX columns; no line that only says
something did not run."""

from __future__ import annotations

import re
from pathlib import Path
from statistics import mean

import pytest

from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.report import build_report
from weince.report.html import claim_page
from weince.report.tables import (DETAILS_HEADING, LATEX_HEADER, MAX_CAPTION_WORDS, latex_caption,
                                  latex_lines)

INFO = {"profile": "fx", "config_hash": "x", "built": "now", "git_commit": "y"}
CLAIMS = Path(__file__).resolve().parents[2] / "config" / "claims.yaml"


@pytest.fixture(scope="module")
def built(fx_module):
    return fx_module, {r.claim["id"]: r
                       for r in build_report(Profile.of(fx_module), with_figures=False)}


def test_claim_page_puts_verdict_and_table_before_rule_and_notes(built):
    fx, res = built
    out = Path(fx["reports"], "fx")
    for cid in res:
        md = (out / f"table_{cid.lower()}.md").read_text()
        verdict = md.index("**Verdict (")
        table = md.index("| Setting |")
        details = md.index(DETAILS_HEADING)
        assert verdict < table < details, cid
        assert md.index("- Rule: ") > details and md.index("- Scale: ") > details, cid
        if res[cid].notes:
            assert md.index("- Note: ") > details


def test_no_table_line_only_says_that_something_did_not_run(built):
    fx, res = built
    out = Path(fx["reports"], "fx")
    for cid in res:
        md = (out / f"table_{cid.lower()}.md").read_text()
        assert "not run here)" not in md, cid   # "not run (infonce_topm not run here)"
    c5 = (out / "table_c5.md").read_text()
    # C5's fourteen paper settings that did not run: one sentence, not fourteen lines
    assert "Not run at this profile (14 of the paper's settings" in c5
    assert not re.search(r"^\| cifar10 / resnet18 \|", c5, re.M)
    # C1's xi ~ -0.39, the same on six settings: the five that did not run in one sentence
    c1 = (out / "table_c1.md").read_text()
    assert "Not run at this profile (5 of the paper's settings, paper: xi ~ -0.39)" in c1
    assert "not run here" not in c1
    # C4's paper gains on settings that did not run stay: they carry the paper's numbers
    c4 = (out / "table_c4.md").read_text()
    assert "| cifar100 / resnet50 | linear top-1 | weince_recipe | not run here |" in c4
    assert f"gain {_paper_gain('C4', 'cifar100', 'resnet50'):+.2f}" in c4


def _paper_gain(claim_id: str, dataset: str, backbone: str) -> float:
    """The paper's gain on one row of a claim, from the claims registry."""
    claim = next(c for c in load_claims(CLAIMS)["claims"] if c["id"] == claim_id)
    row = next(r for r in claim["rows"]
               if (r["dataset"], r["backbone"]) == (dataset, backbone))
    p = row["paper"]
    return p["gain"] if "gain" in p else p["treatment"] - p["baseline"]


def test_latex_has_five_columns_and_a_short_caption(built, fixture_linear):
    fx, res = built
    out = Path(fx["reports"], "fx")
    for cid, r in res.items():
        tex = (out / f"table_{cid.lower()}.tex").read_text()
        assert r"\resizebox" not in tex and r"\begin{tabular}{llrll}" in tex, cid
        assert all(len(ln) == len(LATEX_HEADER) for ln in latex_lines(r))
        words = len(latex_caption(r, INFO).split())
        assert words <= MAX_CAPTION_WORDS, (cid, words)
        caption = re.search(r"\\caption\{(.*)\}\n", tex).group(1)
        assert "Rule:" not in caption and "Scale:" not in caption
        assert r.verdict in caption.replace(r"\_", "_")
    # the gain sits on the paper's comparison's own line, beside the paper's gain
    c3 = latex_lines(res["C3"])
    line = next(ln for ln in c3 if ln[0] == "cifar100 / resnet18"
                and ln[1] == "weince_recipe - infonce")
    ours = (mean(fixture_linear[("cifar100", "weince_recipe")])
            - mean(fixture_linear[("cifar100", "infonce")]))
    paper = _paper_gain("C3", "cifar100", "resnet18")
    assert line[2].startswith(f"{ours:+.2f} [") and line[3] == f"gain {paper:+.2f}"
    # a claim with several metrics folds the metric into the setting
    assert any(ln[0] == "cifar100 / resnet18, k-NN acc@50" for ln in latex_lines(res["C6"]))


def test_html_claim_page_shows_the_plot_between_table_and_rule(built, tmp_path):
    fx, res = built
    out = Path(fx["reports"], "fx")
    page = claim_page(res["C3"], out / "table_c3.md", tmp_path / "claim_c3.html", "fx")
    text = page.read_text()
    assert text.index("<table>") < text.index("data:image/png") < text.index(
        "Rule, selection and scale")
