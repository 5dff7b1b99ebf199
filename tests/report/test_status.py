"""``weince status``: the README's claims table comes from the registry and the claim files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weince.pipeline.claims import load_claims
from weince.report.claim_file import claim_file
from weince.report.status import BEGIN, END, status_table, update_readme
from weince.utils.vocabulary import NOT_REPRODUCED, NOT_RUN, REPRODUCED

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in table.splitlines()[2:]]


def test_every_claim_has_a_row_and_no_run_reads_not_run_yet(tmp_path):
    rows = _rows(status_table(CLAIMS, tmp_path))
    ids = [c["id"] for c in load_claims(CLAIMS)["claims"]]
    assert [r[0].split(":")[0] for r in rows] == ids
    assert all(r[4:] == ["not run yet", "not run yet"] for r in rows)
    scope = {r[0].split(":")[0]: r[3] for r in rows}
    assert scope["C9"].startswith("every profile") and scope["C11"].startswith("every profile")
    assert scope["C3"].startswith("paper")


def test_a_claim_file_gives_its_profiles_verdict(tmp_path):
    path = claim_file(tmp_path / "default", "C9")
    path.parent.mkdir(parents=True)
    record = {"format": 1, "id": "C9", "verdict": REPRODUCED, "reason": "", "rule": "",
              "attribution": "", "arm_verdicts": {}, "notes": [], "scale": "", "ours": "x",
              "rows": [], "forest": False, "claim": {"id": "C9"},
              "result_provenance": {"commits": [], "config_hashes": [], "dates": [],
                                    "files": 0}}
    path.write_text(json.dumps(record))
    row = next(r for r in _rows(status_table(CLAIMS, tmp_path)) if r[0].startswith("C9:"))
    assert row[4:] == [REPRODUCED, "not run yet"]


def test_the_readme_block_is_the_generated_one(tmp_path):
    """The README's claims table: the registry's columns as generated, and each profile
    column a verdict word or 'not run yet' (the claim files behind them are not in a fresh
    clone); --check rewrites nothing."""
    text = (REPO / "README.md").read_text()
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    ours, fresh = _rows(block), _rows(status_table(CLAIMS, tmp_path))
    assert [r[:4] for r in ours] == [r[:4] for r in fresh]
    words = {REPRODUCED, NOT_REPRODUCED, NOT_RUN, "not run yet"}
    assert all(v in words or v.startswith("partially run") for r in ours for v in r[4:])
    copy = tmp_path / "README.md"
    copy.write_text(text)
    update_readme(copy, CLAIMS, tmp_path, check=True)
    assert copy.read_text() == text


def test_a_readme_without_the_block_is_an_error(tmp_path):
    p = tmp_path / "README.md"
    p.write_text("# nothing here\n")
    with pytest.raises(ValueError, match="no generated claims block"):
        update_readme(p, CLAIMS, tmp_path)
