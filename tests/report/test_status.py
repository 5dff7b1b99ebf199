"""``weince status``: the README's claims table comes from the registry and the claim files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from weince.pipeline.claims import load_claims
from weince.report.claim_file import claim_file, record_digest, registry_digest
from weince.report.build import rest_of_paper
from weince.report.status import BEGIN, END, REST_BEGIN, REST_END, status_table, update_readme
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, REPRODUCED, SCALE_ONLY

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


def _c9_file(tmp_path: Path, result: Path) -> Path:
    """A claim file of C9 at profile default, sealed as the claim tables seal it, computed
    from ``result`` (its one result file)."""
    reg = load_claims(CLAIMS)
    c9 = next(c for c in reg["claims"] if c["id"] == "C9")
    path = claim_file(tmp_path / "default", "C9")
    path.parent.mkdir(parents=True)
    record = {"format": 2, "id": "C9", "verdict": REPRODUCED, "reason": "", "rule": "",
              "attribution": "", "arm_verdicts": {}, "notes": [], "scale": "", "ours": "x",
              "rows": [], "forest": False, "claim": {"id": "C9"},
              "result_provenance": {"commits": [], "config_hashes": [], "dates": [],
                                    "files": 0},
              "inputs": {"root": str(result.parent), "files": {
                  result.name: hashlib.sha256(result.read_bytes()).hexdigest()},
                  "registry": registry_digest(c9, reg["alpha"])}}
    record["digest"] = record_digest(record)
    path.write_text(json.dumps(record))
    return path


def test_a_claim_file_gives_its_profiles_verdict(tmp_path):
    result = tmp_path / "special_case.json"
    result.write_text('{"max_abs_diff": 0.0}')
    _c9_file(tmp_path, result)
    row = next(r for r in _rows(status_table(CLAIMS, tmp_path)) if r[0].startswith("C9:"))
    assert row[4:] == [REPRODUCED, "not run yet"]


def test_an_edited_or_stale_claim_file_is_refused_naming_it(tmp_path):
    result = tmp_path / "special_case.json"
    result.write_text('{"max_abs_diff": 0.0}')
    path = _c9_file(tmp_path, result)
    result.write_text('{"max_abs_diff": 1.0}')
    with pytest.raises(ValueError, match=rf"claim file {path} is stale: {result} changed"):
        status_table(CLAIMS, tmp_path)
    data = json.loads(path.read_text())
    data["verdict"] = NOT_REPRODUCED
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"claim file {path} was edited after the claim "
                                         rf"tables wrote it"):
        status_table(CLAIMS, tmp_path)


def test_the_readme_block_is_the_generated_one(tmp_path):
    """The README's claims table: the registry's columns as generated, and each profile
    column a verdict word or 'not run yet' (the claim files behind them are not in a fresh
    clone); --check rewrites nothing."""
    text = (REPO / "README.md").read_text()
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    ours, fresh = _rows(block), _rows(status_table(CLAIMS, tmp_path))
    assert [r[:4] for r in ours] == [r[:4] for r in fresh]
    words = {REPRODUCED, NOT_REPRODUCED, NOT_RUN, SCALE_ONLY, "not run yet"}
    assert all(v in words or v.startswith("partially run") for r in ours for v in r[4:])
    copy = tmp_path / "README.md"
    copy.write_text(text)
    update_readme(copy, CLAIMS, tmp_path, check=True)
    assert copy.read_text() == text


def test_a_readme_without_the_block_is_an_error(tmp_path):
    p = tmp_path / "README.md"
    p.write_text("# nothing here\n")
    with pytest.raises(ValueError, match="no generated block"):
        update_readme(p, CLAIMS, tmp_path)


def test_the_readme_says_what_the_rest_costs_from_the_planner(tmp_path):
    """The README's Status carries one generated line on what reproducing the rest takes
    (runs and GPU-hours of C3 alone and of the whole paper, priced by the planner on the
    paper profile of the checkout), with the commands that plan them."""
    text = (REPO / "README.md").read_text()
    block = text[text.index(REST_BEGIN) + len(REST_BEGIN):text.index(REST_END)].strip()
    rest = rest_of_paper(CLAIMS)
    assert block == f"- {rest}"
    assert "C3 alone (its own setting) 224 training runs" in rest
    assert "weince plan --configfile config/paper.yaml --target reports/paper/table_c3.md" in rest
    assert "the whole paper" in rest and "GPU-hours (`weince plan --totals`)" in rest


def test_the_rest_line_follows_the_paper_profile(tmp_path):
    """A paper profile with the grid at one seed plans C3 in 68 runs, not 224: the line is
    computed from the profile it is given, never typed."""
    (tmp_path / "claims.yaml").write_text(CLAIMS.read_text())
    paper = (REPO / "config" / "paper.yaml").read_text()
    assert "    seeds: [7, 21, 63, 84]   # option: [7]" in paper
    (tmp_path / "paper.yaml").write_text(
        paper.replace("    seeds: [7, 21, 63, 84]   # option: [7]", "    seeds: [7]   # option"))
    rest = rest_of_paper(tmp_path / "claims.yaml", tmp_path / "paper.yaml")
    assert "C3 alone (its own setting) 68 training runs" in rest
    (tmp_path / "paper.yaml").unlink()
    assert rest_of_paper(tmp_path / "claims.yaml", tmp_path / "paper.yaml") is None
