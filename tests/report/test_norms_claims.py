"""Claims N1-N3 as registry entries: their verdicts come from the norms result files
(fabricated by ``conftest.norms_unit``) through ``evaluate_claim`` (kind ``norms``), the
same as the norms page's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from weince.norms.files import load_results
from weince.norms.page import claim_verdicts, companion_rows
from weince.pipeline import layout
from weince.pipeline.profile import Profile
from weince.pipeline.targets import claim_inputs, claims, norms_results
from weince.report import build_report, load_claims
from weince.utils.results import InvalidResultError
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, REPRODUCED, SCALE_ONLY

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"



def _registry_naming(tmp_path: Path, backbone: str) -> Path:
    """The registry with ``backbone`` added to N1-N3's rows, as if the companion paper had
    used it (so that the fixture's units are on a paper model)."""
    reg = yaml.safe_load(CLAIMS.read_text())
    for c in reg["claims"]:
        if c["kind"] == "norms":
            extra = [{**r, "backbone": backbone} for r in c["rows"] if r.get("backbone")]
            c["rows"] = c["rows"] + extra
    out = tmp_path / "claims.yaml"
    out.write_text(yaml.safe_dump(reg, sort_keys=False))
    return out


def _page_rows(claims_path: Path) -> dict:
    return companion_rows(load_claims(claims_path)["claims"])


def test_n_claims_come_from_the_registry_with_the_pages_verdicts(fx):
    paths = norms_results(Profile.of(fx))  # written by the fixture (conftest.norms_unit)
    assert len(paths) == 18                  # 2 pairs x 3 arms x 3 seeds
    n_claims = [c for c in claims(Profile.of(fx)) if c["kind"] == "norms"]
    assert [c["id"] for c in n_claims] == ["N1", "N2", "N3"]
    assert set(claim_inputs(Profile.of(fx), n_claims[0])) == set(paths)
    build_report(Profile.of(fx), with_figures=False)
    out = Path(fx["reports"], "fx")
    got = {c["id"]: c["verdict"] for c in json.loads((out / "claims.json").read_text())["claims"]}
    page = claim_verdicts(load_results(paths), _page_rows(CLAIMS))
    assert {k: got[k] for k in ("N1", "N2", "N3")} == {k: v["verdict"] for k, v in page.items()}
    # the fixture's encoders (ResNet-18 on CIFAR-100 / digits) are not the companion paper's
    # models (CLIP ViT-B/32, MiniLM-L12): the same rule as C1-C10, no verdict
    assert got["N1"] == got["N2"] == got["N3"] == SCALE_ONLY
    assert page["N2"]["scale_model"] == {"units": 18, "n_testable": 18, "n_reproduced": 16}
    summary = (out / "summary.md").read_text()
    for cid in ("N1", "N2", "N3"):
        assert f"| {cid} |" in summary and f"table_{cid.lower()}.md" in summary
        assert (out / f"table_{cid.lower()}.md").exists()
    n2 = (out / "table_n2.md").read_text()
    # metrics in words, the paper's figures on its own models, no unit verdict elsewhere
    assert "r(heat, norm)" in n2 and "r(drift, norm)" in n2 and "n2.heat_vs_norm" not in n2
    # the companion paper's models did not run: one sentence, not a line per model
    assert ("Not run at this profile (2 of the companion paper's models, companion paper: "
            "r +0.38 and -0.58): clip_vit_b32, minilm-l12 (text).") in n2
    assert "| clip_vit_b32 |" not in n2
    assert "r(heat, norm) = +0.38, r(drift, norm) = -0.58" in n2   # the paper's figures
    assert "seed21: -0.10 [-0.30, +0.10];" in n2 and "(not reproduced)" not in n2
    assert "scale model (no verdict) | 2 of 3 testable unit(s) show it" in n2
    assert "verdicts.N2 of its norms.json" not in n2
    n3 = (out / "table_n3.md").read_text()
    assert "knn recall@1 frequent" in n3 and "recall@5" not in n3   # primary rows only
    assert "gains 1.2-2.3%" in n3   # the companion paper's figure (its models did not run)


def test_n_claims_judge_units_on_the_companion_papers_models(fx, tmp_path):
    """With the fixture's backbone among the registry's rows, its units decide the claims,
    on the registry page and the norms page alike."""
    fx["claims"] = str(_registry_naming(tmp_path, "resnet18"))
    res = {r.claim["id"]: r
           for r in build_report(Profile.of(fx), with_figures=False, summary=False)}
    page = claim_verdicts(load_results(norms_results(Profile.of(fx))),
                          _page_rows(Path(fx["claims"])))
    assert res["N1"].verdict == page["N1"]["verdict"] == REPRODUCED
    assert res["N2"].verdict == page["N2"]["verdict"] == NOT_REPRODUCED
    assert res["N3"].verdict == page["N3"]["verdict"] == REPRODUCED
    assert "16 of 18 testable unit(s) on the companion paper's models" in res["N2"].reason
    n2 = res["N2"].rows
    row = next(r for r in n2 if r.paper_setting and r.cells and "drift" in r.label)
    assert row.paper == {"value": -0.58} and row.verdicts["infonce"] == NOT_REPRODUCED


def test_n_claims_without_results_are_not_run(fx):
    for p in norms_results(Profile.of(fx)):
        p.unlink()
    res = {r.claim["id"]: r
           for r in build_report(Profile.of(fx), with_figures=False, summary=False)}
    assert res["N1"].verdict == NOT_RUN and "no norms.json" in res["N1"].reason
    no_norms = {**fx, "norms": {"vision": {"enabled": False}, "text": {"enabled": False}}}
    res = {r.claim["id"]: r
           for r in build_report(Profile.of(no_norms), with_figures=False, summary=False)}
    assert res["N2"].verdict == NOT_RUN and res["N2"].reason == "the profile analyses no unit"


def test_a_nan_in_a_norms_result_stops_the_claim(fx):
    paths = norms_results(Profile.of(fx))
    d = json.loads(paths[0].read_text())
    d["n2"]["heat_vs_norm"]["pearson"]["r"] = None      # a NaN write_json stored as null
    paths[0].write_text(json.dumps(d))
    with pytest.raises(InvalidResultError, match="n2.heat_vs_norm.pearson.r") as err:
        build_report(Profile.of(fx), with_figures=False, only=["N2"], summary=False)
    assert str(paths[0]) in str(err.value) and "--forcerun" in str(err.value)


def test_norms_settings_and_files_come_from_the_layout(fx):
    settings, arms = layout.settings_for(Profile.of(fx), "norms")
    assert [s.label() for s in settings] == ["cifar100 / resnet18", "digits / resnet18"]
    assert arms == fx["vision"]["arms"]
    f = layout.files_for(Profile.of(fx))
    assert len(f(settings[0], "weince", "norms.json")) == 3
    assert f(settings[0], "hcl", "norms.json") == []
