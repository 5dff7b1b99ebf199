"""``weince status``: the README's claims table comes from the registry and the claim files."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from weince.pipeline.claims import load_claims
from weince.report.claim_file import claim_file, record_digest, registry_digest
from weince.report.build import rest_of_paper
from weince.report.reference import (REFRESH, compare_runs, differences, stale_reference,
                                     update_reference)
from weince.report.claim_file import read_claim_file
from weince.report.status import BEGIN, END, REST_BEGIN, REST_END, status_table, update_readme
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, REPRODUCED, SCALE_ONLY

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"
REFERENCE = REPO / "reference"


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


def test_the_readme_block_is_the_reference_runs_table(tmp_path):
    """The README's claims table is the table of the reference run committed in
    `reference/`, as generated: the check passes in a fresh clone, before any run, and
    rewrites nothing; the reference has a current claim file of every registry claim."""
    text = (REPO / "README.md").read_text()
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert block == status_table(CLAIMS, REFERENCE, reference=True)
    ours = _rows(block)
    words = {REPRODUCED, NOT_REPRODUCED, NOT_RUN, SCALE_ONLY}
    assert all(r[4] in words or r[4].startswith("partially run") for r in ours)  # default ran
    copy = tmp_path / "README.md"
    copy.write_text(text)
    assert update_readme(copy, CLAIMS, REFERENCE, check=True)
    assert copy.read_text() == text
    assert stale_reference(REFERENCE, CLAIMS) == []


def test_a_stale_reference_is_named_with_the_refresh_command(tmp_path):
    """Stale: a registry entry changed since the reference was computed, a claim without a
    reference file, an edited file, a file of a claim the registry no longer has; each one
    line naming the file and the command that refreshes the reference."""
    ref = tmp_path / "reference"
    shutil.copytree(REFERENCE, ref)
    claims = tmp_path / "claims.yaml"
    text = CLAIMS.read_text()
    assert text.count("    tolerance: 1.5\n") >= 1
    claims.write_text(text.replace("    tolerance: 1.5\n", "    tolerance: 1.4\n", 1))
    changed = next(c["id"] for c in load_claims(claims)["claims"] if c.get("tolerance") == 1.4)
    stale = stale_reference(ref, claims)
    assert len(stale) == 1 and f"{changed.lower()}.json is stale" in stale[0], stale
    assert stale[0].endswith(REFRESH) and "\n" not in stale[0]
    (ref / "default" / "claims" / "c9.json").unlink()
    edited = ref / "default" / "claims" / "c11.json"
    data = json.loads(edited.read_text())
    data["verdict"] = NOT_REPRODUCED
    edited.write_text(json.dumps(data))
    (ref / "default" / "claims" / "c99.json").write_text("{}")
    stale = stale_reference(ref, CLAIMS)
    assert any("c9.json does not exist" in s for s in stale), stale
    assert any("c11.json was edited" in s for s in stale), stale
    assert any("c99.json names no claim" in s for s in stale), stale
    assert all(s.endswith(REFRESH) for s in stale)
    with pytest.raises(ValueError, match="c11.json was edited"):
        status_table(CLAIMS, ref, reference=True)


def _one_claim_run(tmp_path: Path, result: float) -> tuple[Path, Path]:
    """A registry of C9 alone and a run of it (reports/default/claims/c9.json, computed
    from a special_case.json holding ``result``)."""
    reg = yaml.safe_load(CLAIMS.read_text())
    reg["claims"] = [c for c in reg["claims"] if c["id"] == "C9"]
    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump(reg))
    res = tmp_path / "special_case.json"
    res.write_text(json.dumps({"max_abs_diff": result}))
    path = _c9_file(tmp_path / "reports", res)
    data = json.loads(path.read_text())
    data["rows"] = [{"setting": "checks", "label": "max diff", "metric": "max_abs_diff",
                     "cells": {"weince": {"estimate": {"mean": result}}}, "gains": {}}]
    data["digest"] = record_digest(data)
    path.write_text(json.dumps(data))
    return claims, tmp_path / "reports"


def test_a_run_is_compared_with_the_reference_within_tolerance(tmp_path):
    """`weince status` after a run: the same verdicts and numbers within the claim's
    tolerance agree; a number outside it, or another verdict, is named."""
    claims, reports = _one_claim_run(tmp_path, 0.0)
    update_reference(reports, tmp_path / "reference", claims)
    ref = tmp_path / "reference"
    assert (ref / "default" / "claims" / "c9.json").read_bytes() == \
        (reports / "default" / "claims" / "c9.json").read_bytes()
    same = compare_runs(claims, reports, ref)
    assert len(same) == 1 and "every verdict the same" in same[0], same
    tol = load_claims(claims)["claims"][0]["tolerance"]
    ours = read_claim_file(reports / "default" / "claims" / "c9.json")
    theirs = read_claim_file(ref / "default" / "claims" / "c9.json")
    near = dataclasses.replace(ours, rows=[{**ours.rows[0], "cells": {
        "weince": {"estimate": {"mean": tol / 2}}}}])
    far = dataclasses.replace(near, verdict=NOT_REPRODUCED, rows=[{**ours.rows[0], "cells": {
        "weince": {"estimate": {"mean": 3 * tol}}}}])
    assert differences(theirs, near, load_claims(claims)["claims"][0]) == []
    diff = differences(theirs, far, load_claims(claims)["claims"][0])
    assert diff[0] == f"verdict {NOT_REPRODUCED!r} (reference {REPRODUCED!r})"
    assert diff[1].startswith("checks max diff, weince: ") and f"tolerance {tol:g}" in diff[1]
    assert len(diff) == 2
    # no run of one's own: said, not an error
    lines = compare_runs(claims, tmp_path / "nothing", ref)
    assert len(lines) == 1 and "no run of yours" in lines[0]


def test_the_reference_is_refreshed_only_from_a_finished_current_run(tmp_path):
    claims, reports = _one_claim_run(tmp_path, 0.0)
    with pytest.raises(FileNotFoundError, match="not finished"):
        update_reference(tmp_path / "nothing", tmp_path / "reference", claims)
    (tmp_path / "special_case.json").write_text(json.dumps({"max_abs_diff": 1.0}))
    with pytest.raises(ValueError, match="is stale: .*special_case.json changed"):
        update_reference(reports, tmp_path / "reference", claims)
    assert not (tmp_path / "reference").exists()


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
