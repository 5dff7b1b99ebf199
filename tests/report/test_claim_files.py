"""Each verdict is computed once: the claim tables write every claim's result to its claim
file (``claims/<id>.json``), and the summary, ``claims.json`` and the figures are built
from those files alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weince.report import build, verdicts
from weince.report.build import build_report, build_summary
from weince.report.claim_file import claim_file, read_claim_file
from weince.report.glance import headline

from .test_glance import claim_rows


def _no_evaluation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the summary computed a verdict")

    monkeypatch.setattr(verdicts, "evaluate_claim", refuse)
    monkeypatch.setattr(build, "evaluate_claim", refuse)
    monkeypatch.setattr(build, "evaluate", refuse)


def test_every_claim_file_holds_what_its_table_computed(fx):
    res = build_report(fx, with_figures=False, summary=False)
    out = Path(fx["reports"], "fx")
    for r in res:
        rec = read_claim_file(claim_file(out, r.claim["id"]))
        h = headline(r)
        assert (rec.id, rec.verdict, rec.reason, rec.rule, rec.arm_verdicts) == \
            (r.claim["id"], r.verdict, r.reason, r.rule, r.arm_verdicts)
        assert rec.ours == (h.cell() if h else "nothing ran")
        assert rec.claim == r.claim and len(rec.rows) == len(r.rows)
        assert rec.provenance.files == r.provenance.files
    assert not (out / "summary.md").exists()


def test_the_summary_reads_the_claim_files_and_never_computes_a_verdict(fx, monkeypatch):
    build_report(fx, with_figures=False, summary=False)
    out = Path(fx["reports"], "fx")
    path = claim_file(out, "C3")
    data = json.loads(path.read_text())
    data["verdict"] = "edited verdict"
    data["ours"] = "gain +9.99 (n=7; edited)"
    data["arm_verdicts"] = {"weince": "edited arm verdict"}
    path.write_text(json.dumps(data))
    _no_evaluation(monkeypatch)
    records = build_summary(fx, with_figures=False)
    assert [r.id for r in records][:1] == ["C1"]
    row = claim_rows((out / "summary.md").read_text())["C3"]
    assert "| edited verdict |" in row and "gain +9.99 (n=7; edited)" in row
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())["claims"]}
    assert claims["C3"]["verdict"] == "edited verdict"
    assert claims["C3"]["arm_verdicts"] == {"weince": "edited arm verdict"}


def test_a_missing_claim_file_names_it_and_the_rule(fx, monkeypatch):
    build_report(fx, with_figures=False, summary=False)
    path = claim_file(Path(fx["reports"], "fx"), "C5")
    path.unlink()
    _no_evaluation(monkeypatch)
    with pytest.raises(FileNotFoundError, match=r"claims/c5\.json.*claim_tables"):
        build_summary(fx, with_figures=False)


def test_a_claim_file_of_another_format_is_refused(fx):
    build_report(fx, with_figures=False, summary=False)
    path = claim_file(Path(fx["reports"], "fx"), "C2")
    path.write_text(json.dumps({"format": 0, "id": "C2"}))
    with pytest.raises(ValueError, match=r"c2\.json is not a format-1 claim file"):
        build_summary(fx, with_figures=False)
