"""Claims N1-N3 as registry entries: their verdicts come from the norms result files
(fabricated by ``conftest.norms_unit``) through ``evaluate_claim`` (kind ``norms``), the
same as the norms page's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weince.pipeline import layout
from weince.pipeline.norms import norms_results
from weince.pipeline.targets import claim_inputs, claims
from weince.report import build_report
from weince.report.norms import claim_verdicts, load_results
from weince.utils.results import InvalidResultError
from weince.utils.vocabulary import NOT_REPRODUCED, NOT_RUN, REPRODUCED


def test_n_claims_come_from_the_registry_with_the_pages_verdicts(fx):
    paths = norms_results(fx)               # written by the fixture (conftest.norms_unit)
    assert len(paths) == 18                  # 2 pairs x 3 arms x 3 seeds
    n_claims = [c for c in claims(fx) if c["kind"] == "norms"]
    assert [c["id"] for c in n_claims] == ["N1", "N2", "N3"]
    assert set(claim_inputs(fx, n_claims[0])) == set(paths)
    build_report(fx, with_figures=False)
    out = Path(fx["reports"], "fx")
    got = {c["id"]: c["verdict"] for c in json.loads((out / "claims.json").read_text())["claims"]}
    page = claim_verdicts(load_results(paths))
    assert {k: got[k] for k in ("N1", "N2", "N3")} == {k: v["verdict"] for k, v in page.items()}
    assert got["N1"] == REPRODUCED and got["N2"] == NOT_REPRODUCED and got["N3"] == REPRODUCED
    summary = (out / "summary.md").read_text()
    for cid in ("N1", "N2", "N3"):
        assert f"| {cid} |" in summary and f"table_{cid.lower()}.md" in summary
        assert (out / f"table_{cid.lower()}.md").exists()
    n2 = (out / "table_n2.md").read_text()
    assert "n2.heat_vs_norm.pearson" in n2 and "n2.drift_vs_norm.pearson" in n2
    assert "seed21: -0.10 [-0.30, +0.10] (not reproduced)" in n2
    n3 = (out / "table_n3.md").read_text()
    assert "knn recall@1 frequent" in n3 and "recall@5" not in n3   # primary rows only


def test_n_claims_without_results_are_not_run(fx):
    for p in norms_results(fx):
        p.unlink()
    res = {r.claim["id"]: r for r in build_report(fx, with_figures=False, summary=False)}
    assert res["N1"].verdict == NOT_RUN and "no norms.json" in res["N1"].reason
    no_norms = {**fx, "norms": {"vision": {"enabled": False}, "text": {"enabled": False}}}
    res = {r.claim["id"]: r for r in build_report(no_norms, with_figures=False, summary=False)}
    assert res["N2"].verdict == NOT_RUN and res["N2"].reason == "the profile analyses no unit"


def test_a_nan_in_a_norms_result_stops_the_claim(fx):
    paths = norms_results(fx)
    d = json.loads(paths[0].read_text())
    d["n2"]["heat_vs_norm"]["pearson"]["r"] = None      # a NaN write_json stored as null
    paths[0].write_text(json.dumps(d))
    with pytest.raises(InvalidResultError, match="n2.heat_vs_norm.pearson.r") as err:
        build_report(fx, with_figures=False, only=["N2"], summary=False)
    assert str(paths[0]) in str(err.value) and "--forcerun" in str(err.value)


def test_norms_settings_and_files_come_from_the_layout(fx):
    settings, arms = layout.settings_for(fx, "norms")
    assert [s.label() for s in settings] == ["cifar100 / resnet18", "digits / resnet18"]
    assert arms == fx["vision"]["arms"]
    f = layout.files_for(fx)
    assert len(f(settings[0], "weince", "norms.json")) == 3
    assert f(settings[0], "hcl", "norms.json") == []
