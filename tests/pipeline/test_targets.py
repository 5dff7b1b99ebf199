"""``all_targets(config)``: the one input of ``rule all``, from the one enumeration of runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from weince.pipeline import layout
from weince.pipeline.ablations import ablation_plan
from weince.pipeline.targets import (all_targets, claim_inputs, claims, norms_results,
                                     report_outputs)
from weince.pipeline.profile import Profile

REPO = Path(__file__).resolve().parents[2]


def smoke():
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["claims"] = str(REPO / "config" / "claims.yaml")
    return cfg


def test_all_targets_cover_report_tables_ablations_and_norms():
    cfg = smoke()
    t = all_targets(Profile.of(cfg))
    assert len(t) == len(set(t))
    assert "reports/smoke/summary.md" in t
    for c in claims(Profile.of(cfg)):
        assert f"reports/smoke/table_{c['id'].lower()}.md" in t
        assert all(str(p) in t for p in claim_inputs(Profile.of(cfg), c))
    assert "reports/smoke/ablations.md" in t and "reports/smoke/norms.md" in t
    assert all(str(p) in t for p in norms_results(Profile.of(cfg)))
    run_arms = ablation_plan(Profile.of(cfg)).run_arms()
    assert "results/smoke/vision/digits/smallcnn/infonce_topm/seed7/linear.json" in t
    assert "infonce_topm" in run_arms


def test_pages_a_profile_does_not_run_are_not_targets():
    cfg = smoke()
    cfg["ablations"] = {"enabled": False}
    cfg["norms"] = {"vision": {"enabled": False}, "text": {"enabled": False}}
    t = all_targets(Profile.of(cfg))
    assert not any(p.endswith(("ablations.md", "norms.md", "norms.json")) for p in t)


def test_a_registry_claim_more_is_one_table_more(tmp_path):
    """Claims come from the registry, however many: nothing counts to nine."""
    reg = yaml.safe_load((REPO / "config" / "claims.yaml").read_text())
    new_id = f"C{len(reg['claims']) + 7}"
    extra = dict(reg["claims"][-1], id=new_id)
    reg["claims"].append(extra)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(reg))
    cfg = {**smoke(), "claims": str(path)}
    outs = report_outputs(Profile.of(cfg))
    cid = new_id.lower()
    assert outs[f"{cid}_md"] == Path(f"reports/smoke/table_{cid}.md")
    assert f"reports/smoke/table_{cid}.tex" in all_targets(Profile.of(cfg))


def test_one_enumeration_of_runs():
    cfg = smoke()
    runs = list(layout.vision_runs(Profile.of(cfg)))
    assert [r.arm for r in runs] == cfg["vision"]["arms"]
    grid = list(layout.vision_runs(Profile.of(cfg), grid=True))
    assert [r.arm for r in grid] == ["weince@m0", "weince@m2"]
    f = layout.files_for(Profile.of(cfg))
    s = layout.Setting("vision", dataset="digits", backbone="smallcnn")
    assert f(s, "weince", "linear.json") == [runs[1].dir("results", "smoke") / "linear.json"]
    assert f(s, "weince", "pot.json") == []              # evt runs for infonce only
    assert f(s, "hcl", "linear.json") == []              # not an arm of the profile
