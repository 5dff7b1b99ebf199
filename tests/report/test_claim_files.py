"""Each verdict is computed once: the claim tables write every claim's result to its claim
file (``claims/<id>.json``), and the summary, ``claims.json`` and the figures are built
from those files alone; a claim file edited by hand, or older than its registry entry or
result files, is refused naming it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from weince.report import build, verdicts
from weince.report.build import build_report, build_summary
from weince.report.claim_file import claim_file, read_claim_file, record_digest
from weince.report.glance import headline
from weince.pipeline.profile import Profile

from .test_glance import claim_rows


def _no_evaluation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the summary computed a verdict")

    monkeypatch.setattr(verdicts, "evaluate_claim", refuse)
    monkeypatch.setattr(build, "evaluate_claim", refuse)
    monkeypatch.setattr(build, "evaluate", refuse)


def test_every_claim_file_holds_what_its_table_computed(fx):
    res = build_report(Profile.of(fx), with_figures=False, summary=False)
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
    """A claim file sealed as the claim tables seal it (digest of its content) is what the
    summary shows: it computes no verdict of its own."""
    build_report(Profile.of(fx), with_figures=False, summary=False)
    out = Path(fx["reports"], "fx")
    path = claim_file(out, "C3")
    data = json.loads(path.read_text())
    data["verdict"] = "edited verdict"
    data["ours"] = "gain +9.99 (n=7; edited)"
    data["arm_verdicts"] = {"weince": "edited arm verdict"}
    data["digest"] = record_digest(data)
    path.write_text(json.dumps(data))
    _no_evaluation(monkeypatch)
    records = build_summary(Profile.of(fx), with_figures=False)
    assert [r.id for r in records][:1] == ["C1"]
    row = claim_rows((out / "summary.md").read_text())["C3"]
    assert "| edited verdict |" in row and "gain +9.99 (n=7; edited)" in row
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())["claims"]}
    assert claims["C3"]["verdict"] == "edited verdict"
    assert claims["C3"]["arm_verdicts"] == {"weince": "edited arm verdict"}


def test_a_hand_edited_claim_file_is_refused_naming_it(fx, monkeypatch):
    """The review's probe: c3.json edited to 'reproduced' / +3.27 made the summary and
    claims.json say C3 reproduced while its table said otherwise."""
    build_report(Profile.of(fx), with_figures=False, summary=False)
    out = Path(fx["reports"], "fx")
    path = claim_file(out, "C3")
    data = json.loads(path.read_text())
    data["verdict"] = "not reproduced" if data["verdict"] == "reproduced" else "reproduced"
    data["ours"] = "gain +3.27 (n=4; cifar100/resnet18)"
    path.write_text(json.dumps(data, indent=2))
    _no_evaluation(monkeypatch)
    with pytest.raises(ValueError) as err:
        build_summary(Profile.of(fx), with_figures=False)
    msg = str(err.value)
    assert msg.startswith(f"claim file {path} was edited after the claim tables wrote it")
    assert "--forcerun claim_tables" in msg and "\n" not in msg
    assert not (out / "summary.md").exists() and not (out / "claims.json").exists()


def test_a_claim_file_older_than_its_result_files_is_refused(fx, monkeypatch):
    build_report(Profile.of(fx), with_figures=False, summary=False)
    lin = Path(fx["results"], "fx/vision/cifar100/resnet18/weince_recipe/seed21/linear.json")
    data = json.loads(lin.read_text())
    data["test_acc"]["mean"] += 1.0
    lin.write_text(json.dumps(data))
    _no_evaluation(monkeypatch)
    with pytest.raises(ValueError) as err:
        build_summary(Profile.of(fx), with_figures=False)
    msg = str(err.value)
    assert "is stale:" in msg and f"{lin} changed since the claim tables computed it" in msg
    assert "claims/c3.json" in msg    # the first claim that reads the file


def test_a_claim_file_of_another_registry_entry_is_refused(fx, tmp_path, monkeypatch):
    build_report(Profile.of(fx), with_figures=False, summary=False)
    reg = yaml.safe_load(Path(fx["claims"]).read_text())
    c8 = next(c for c in reg["claims"] if c["id"] == "C8")
    c8["tolerance"] = 50.0
    relaxed = tmp_path / "relaxed.yaml"
    relaxed.write_text(yaml.safe_dump(reg, sort_keys=False))
    _no_evaluation(monkeypatch)
    with pytest.raises(ValueError, match=r"c8\.json was computed from another registry entry "
                                         r"of C8"):
        build_summary(Profile.of(fx), claims_path=relaxed, with_figures=False)


def test_the_claim_file_records_what_it_was_computed_from(fx):
    build_report(Profile.of(fx), with_figures=False, summary=False)
    rec = read_claim_file(claim_file(Path(fx["reports"], "fx"), "C3"))
    files = rec.inputs["files"]
    # C3 reads its own setting alone (CIFAR-100 x ResNet-18 runs here): no digits file
    assert files and not [f for f in files if "/digits/" in f], sorted(files)
    assert "fx/vision/cifar100/resnet18/weince_recipe/seed21/linear.json" in files
    lin = Path(fx["results"], "fx/vision/cifar100/resnet18/weince_recipe/seed21/linear.json")
    assert files["fx/vision/cifar100/resnet18/weince_recipe/seed21/linear.json"] == \
        hashlib.sha256(lin.read_bytes()).hexdigest()
    assert rec.inputs["root"] == Path(fx["results"]).as_posix()
    assert len(rec.inputs["registry"]) == 64


def test_a_missing_claim_file_names_it_and_the_rule(fx, monkeypatch):
    build_report(Profile.of(fx), with_figures=False, summary=False)
    path = claim_file(Path(fx["reports"], "fx"), "C5")
    path.unlink()
    _no_evaluation(monkeypatch)
    with pytest.raises(FileNotFoundError, match=r"claims/c5\.json.*claim_tables"):
        build_summary(Profile.of(fx), with_figures=False)


def test_a_claim_file_of_another_format_is_refused(fx):
    build_report(Profile.of(fx), with_figures=False, summary=False)
    path = claim_file(Path(fx["reports"], "fx"), "C2")
    path.write_text(json.dumps({"format": 0, "id": "C2"}))
    with pytest.raises(ValueError, match=r"c2\.json is not a format-2 claim file"):
        build_summary(Profile.of(fx), with_figures=False)
