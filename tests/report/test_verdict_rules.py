"""Each decision rule of the verdict code, table-driven on synthetic result trees, with the
counter-examples: toy-data C1/C2, the STL-10 gain whose interval spans zero,
one of three paper rows run, and the recipe confound. Every case asserts the verdict and
the reason it gives."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

import weince.utils.metrics as metrics
from weince.pipeline.profile import Profile
from weince.report import load_claims
from weince.report.glance import claim_notes
from weince.report.rules_page import update_rules_page
from weince.report.tables import claim_lines, claim_markdown
from weince.utils.verdict_words import SCALE_ONLY
from weince.report.verdicts import (KINDS, NOT_REPRODUCED, REPRODUCED, RULES, Setting,
                                    evaluate_claim, partial_verdict, rule_text)
from weince.utils import write_json
from weince.utils.summary import diff_estimate, estimate

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"


REG = {c["id"]: c for c in load_claims(CLAIMS)["claims"]}
C1_C2_PAPER = [(d, b) for d in ("cifar10", "cifar100", "stl10") for b in ("resnet18", "resnet50")]


def V(dataset, backbone):
    return Setting("vision", dataset=dataset, backbone=backbone)


def run(tmp: Path, claim: dict, tree: dict, arms: list[str] | None = None):
    """``tree``: {Setting: {arm: [one result dict per encoder seed]}} -> ClaimResult."""
    settings = list(tree)
    arms = arms or sorted({a for per in tree.values() for a in per})

    def files_for(s: Setting, arm: str, name: str) -> list[Path]:
        recs = tree.get(s, {}).get(arm)
        if recs is None:
            return []
        out = []
        for i, rec in enumerate(recs):
            p = tmp / s.label().replace(" / ", "_") / arm / f"seed{i}" / name
            if not p.exists():
                write_json(p, rec, seed=i)
            out.append(p)
        return out

    return evaluate_claim(copy.deepcopy(claim), settings, arms, files_for, alpha=0.05,
                          scale="test")


def pot(xi, batch=None, profile=None):
    return {"fit": {"xi": xi, "xi_ci_batch": batch, "xi_ci": profile or [xi - 0.01, xi + 0.01]}}


def link(lam, p_pairs, ci_pairs, p_iid=1e-9):
    return {"status": "fitted", "fit": {"lam": lam, "p_value": p_iid, "p_value_pairs": p_pairs,
                                        "lam_ci": [lam - 0.01, lam + 0.01],
                                        "lam_ci_pairs": ci_pairs}}


def acc(values):
    return [{"test_acc": v} for v in values]


BASE = [70.0, 71.0, 69.5, 70.5]
# C10's keys (its judged metrics and its readings) and its judged rows, from the registry
C10_KEYS = [*REG["C10"]["metrics"], *REG["C10"].get("readings", [])]
C10_ROWS = (len(REG["C10"]["grid"]["datasets"]) * len(REG["C10"]["grid"]["backbones"])
            * len(REG["C10"]["metrics"]))


def shifted(values, d):
    return [v + d for v in values]


# --------------------------------------------------------------------------- the table
CASES = {
    # toy data: the paper never ran digits / smallcnn -> no verdict, only a reading
    "C1 toy data is a scale-model row": (
        "C1", {V("digits", "smallcnn"): {"infonce": [pot(-0.2, [-0.3, -0.1])]}},
        SCALE_ONLY, "ran none of the paper's settings; 1 scale-model row(s) shown"),
    "C2 toy data (lambda 0.57) is a scale-model row": (
        "C2", {V("digits", "smallcnn"): {"infonce": [link(0.57, 1e-8, [0.52, 0.62])]}},
        SCALE_ONLY, "ran none of the paper's settings; 1 scale-model row(s) shown"),
    # magnitude, not only sign
    "C1 all six settings near -0.39": (
        "C1", {V(d, b): {"infonce": [pot(-0.37, [-0.45, -0.30])]} for d, b in C1_C2_PAPER},
        REPRODUCED, "6 of 6 paper row(s) reproduced"),
    "C1 negative xi far from the paper's": (
        "C1", {V(d, b): {"infonce": [pot(-0.05 if d == "stl10" and b == "resnet50" else -0.37,
                                         [-0.08, -0.02] if d == "stl10" and b == "resnet50"
                                         else [-0.45, -0.30])]} for d, b in C1_C2_PAPER},
        NOT_REPRODUCED, "the paper's -0.39 is outside it widened by 0.15"),
    "C1 interval reaching zero": (
        "C1", {V(d, b): {"infonce": [pot(-0.3, [-0.5, 0.02])]} for d, b in C1_C2_PAPER},
        NOT_REPRODUCED, "spans zero"),
    "C2 all six settings in range": (
        "C2", {V(d, b): {"infonce": [link(0.42, 1e-6, [0.35, 0.49])]} for d, b in C1_C2_PAPER},
        REPRODUCED, "6 of 6 paper row(s) reproduced"),
    "C2 lambda interval misses 0.33-0.50": (
        "C2", {V(d, b): {"infonce": [link(0.62, 1e-6, [0.55, 0.70])]} for d, b in C1_C2_PAPER},
        NOT_REPRODUCED, "misses the paper's 0.33-0.50"),
    "C2 softmax kept by the pair-robust test": (
        "C2", {V(d, b): {"infonce": [link(0.42, 0.2, [0.0, 0.8], p_iid=1e-6)]}
               for d, b in C1_C2_PAPER},
        NOT_REPRODUCED, "softmax rejected in 0/1 fit(s) (pair-robust test)"),
    # gains
    "C4 STL-10 +0.10 with an interval across zero": (
        "C4", {V(d, b): {"infonce": acc(BASE), "weince_recipe": acc(shifted(BASE, g))}
               for d, b, g in (("cifar100", "resnet50", 4.9), ("stl10", "resnet50", 0.10),
                               ("tinyimagenet", "vit_s", 3.5))},
        NOT_REPRODUCED, "does not exclude zero on the paper's side (paper +1.58)"),
    "C4 one of three rows run": (
        "C4", {V("cifar100", "resnet50"): {"infonce": acc(BASE),
                                           "weince_recipe": acc(shifted(BASE, 4.9))}},
        partial_verdict(1, 3), "1 of the paper's 3 row(s) ran, 1 reproduced"),
    "C3 gain excluding zero, far from the paper's": (
        "C3", {V("cifar100", "resnet18"): {"infonce": acc(BASE),
                                           "weince_recipe": acc(shifted(BASE, 8.0))}},
        NOT_REPRODUCED, "outside it and"),
    "C3 one encoder per arm: no interval": (
        "C3", {V("cifar100", "resnet18"): {"infonce": acc([50.0]),
                                           "weince_recipe": acc([53.3])}},
        NOT_REPRODUCED, "no interval"),
    # non-inferiority
    "C5 one grid point, above the margin": (
        "C5", {V("cifar10", "resnet18"): {"infonce": acc(BASE),
                                          "weince_recipe": acc(shifted(BASE, 0.3))}},
        partial_verdict(1, 15), "1 of the paper's 15 row(s) ran"),
    "C10 k-NN recall below the margin": (
        "C10", {V("cifar10", "resnet18"): {
            "infonce": [{k: v for k in C10_KEYS} for v in BASE],
            "weince_recipe": [{k: v - 1.5 for k in C10_KEYS} for v in BASE]}},
        partial_verdict(0, C10_ROWS), "mean gain below zero"),
    "C5 within the margin but below zero is not '>='": (
        "C5", {V("cifar10", "resnet18"): {"infonce": acc(BASE),
                                          "weince_recipe": acc(shifted(BASE, -0.2))}},
        partial_verdict(0, 15), "mean gain below zero"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rule(tmp_path, name):
    cid, tree, verdict, reason = CASES[name]
    res = run(tmp_path, REG[cid], tree)
    assert res.verdict == verdict, (res.verdict, res.reason)
    assert reason in res.reason, res.reason
    assert res.rule == rule_text(REG[cid])


def test_toy_rows_carry_a_reading_not_a_verdict(tmp_path):
    res = run(tmp_path, REG["C2"],
              {V("digits", "smallcnn"): {"infonce": [link(0.57, 1e-8, [0.52, 0.62])]}})
    row = next(r for r in res.rows if not r.paper_setting)
    assert row.verdicts["infonce"].startswith("scale model: softmax rejected in 1/1")
    assert "misses the paper's 0.33-0.50" in row.verdicts["infonce"]
    line = next(ln for ln in claim_lines(res) if ln[0] == "digits / smallcnn")
    assert line[6] == "scale model (no verdict)"
    assert REPRODUCED not in line[6]


def test_stl10_gain_reads_its_welch_interval(tmp_path):
    res = run(tmp_path, REG["C4"], {V("stl10", "resnet50"): {
        "infonce": acc(BASE), "weince_recipe": acc(shifted(BASE, 0.10))}})
    g = diff_estimate(estimate(shifted(BASE, 0.10)), estimate(BASE))
    assert g.lo < 0 < g.hi                  # spans zero
    assert abs(g.mean - 1.58) <= 1.5        # the old rule would have passed it
    row = next(r for r in res.rows if r.setting.dataset == "stl10")
    assert row.verdicts["weince_recipe"] == NOT_REPRODUCED
    assert f"[{g.lo:+.2f}, {g.hi:+.2f}]" in row.reasons["weince_recipe"]
    assert res.verdict == partial_verdict(0, 3)


def test_gain_within_tolerance_of_the_paper_is_reproduced(tmp_path):
    # gain 5.0 with a tight interval excluding the paper's 3.27, but within 1.5 of it
    tight = [50.0, 50.05, 49.95, 50.0]
    res = run(tmp_path, REG["C3"], {V("cifar100", "resnet18"): {
        "infonce": acc(tight), "weince_recipe": acc(shifted(tight, 4.5))}})
    assert res.verdict == REPRODUCED
    assert "from our mean (tolerance 1.5)" in res.reason


@pytest.mark.parametrize("topm_gain,core_gain,words", [
    # the confound: weince == infonce, infonce_topm == weince_recipe
    (3.2, 0.0, "the softmax top-50 term carries it"),
    # the Weibull term on top of the same top-50 term
    (0.0, 0.0, "the Weibull term carries it"),
])
def test_attribution_names_the_difference_that_carries_the_gain(tmp_path, topm_gain,
                                                                  core_gain, words):
    tree = {V("cifar100", "resnet18"): {
        "infonce": acc(BASE), "weince_recipe": acc(shifted(BASE, 3.2)),
        "infonce_topm": acc(shifted(BASE, topm_gain)),
        "weince": acc(shifted(BASE, core_gain))}}
    res = run(tmp_path, REG["C3"], tree)
    assert res.verdict == REPRODUCED        # the paper's comparison itself is reproduced
    assert words in res.attribution
    assert "the core loss alone (weince - infonce) gains in 0 of 1" in res.attribution
    row = res.rows[0]
    assert set(row.contrasts) == {"weince_recipe - infonce", "weince_recipe - infonce_topm",
                                  "weince - infonce"}
    w = row.contrasts["weince_recipe - infonce_topm"]
    assert w.mean == pytest.approx(3.2 - topm_gain) and w.has_interval
    names = [ln[2] for ln in claim_lines(res)]
    assert {"weince_recipe - infonce_topm", "weince - infonce",
            "weince_recipe - infonce"} <= set(names)
    # the selection note: the paper's (registry) beside this profile's, from its grid
    cfg = {"profile": "t",
           "vision": {"arms": ["infonce", "weince_recipe", "weince", "infonce_topm"],
                       "grid": {"arms": ["weince_recipe"], "seeds": [7, 21],
                                "margin": [0, 2, 6], "kappa_rho": [], "kappa_aic": []}}}
    res.notes = claim_notes(Profile.of(cfg), res.claim)
    md = claim_markdown(res, {"profile": "t", "config_hash": "x", "built": "now",
                              "git_commit": "y"})
    assert "Which difference carries the gain: " + res.attribution in md
    note = next(n for n in res.notes if n.startswith("Selection."))
    assert "Paper: WEINCE's figure is the best of 27 grid points" in note
    assert ("Here: weince_recipe: the best of 3 grid point(s) of this profile (m0, m2, m6) "
            "at encoder seed(s) 7, 21, chosen on validation; weince, infonce_topm: one fixed "
            "configuration; infonce: one fixed configuration.") in note
    assert note in md
    cfg["vision"]["grid"]["arms"] = ["weince"]
    note = claim_notes(Profile.of(cfg), res.claim)[0]
    assert "Here: weince: the best of 3 grid point(s)" in note
    assert "weince_recipe, infonce_topm: one fixed" in note


def test_attribution_without_infonce_topm_says_so(tmp_path):
    res = run(tmp_path, REG["C3"], {V("cifar100", "resnet18"): {
        "infonce": acc(BASE), "weince_recipe": acc(shifted(BASE, 3.2))}})
    assert "infonce_topm not run" in res.attribution
    # the table has no line that would only say so
    assert all(ln[2] != "weince_recipe - infonce_topm" for ln in claim_lines(res))
    assert any(ln[2] == "weince_recipe - infonce" for ln in claim_lines(res))


def test_c7_synthetic_text_is_never_labelled_sts_b_and_shows_simcse(tmp_path):
    T = Setting("text", model="minilm", corpus="synthetic")
    res = run(tmp_path, REG["C7"], {T: {
        "infonce": [{"test": {"spearman": v}} for v in (60.0, 61.0)],
        "weince": [{"test": {"spearman": v}} for v in (61.0, 62.0)]}})
    assert res.verdict == SCALE_ONLY
    for ln in claim_lines(res):
        if ln[0] == "minilm / synthetic":
            assert "STS-B" not in " ".join(ln)
    md = claim_markdown(res, {"profile": "t", "config_hash": "x", "built": "now",
                              "git_commit": "y"})
    assert "76.85" in md and "arXiv:2104.08821" in md
    paper_row = next(r for r in res.rows if r.paper_setting)
    assert paper_row.reference["value"] == 76.85
    # C7's paper comparison is the core loss itself; only a scale-model row ran
    assert res.attribution == ("scale model rows only: the paper's comparison is the core "
                               "loss alone: weince - infonce gains in 0 of 1 row(s)")


def test_iid_fallback_interval_is_flagged(tmp_path):
    # an old pot.json without the batch interval: judged on the profile interval, flagged
    res = run(tmp_path, REG["C1"], {V("cifar100", "resnet18"): {
        "infonce": [{"fit": {"xi": -0.38, "xi_ci": [-0.40, -0.36]}}]}})
    row = next(r for r in res.rows if r.cells)
    assert row.verdicts["infonce"] == REPRODUCED
    assert "i.i.d. profile interval" in row.reasons["infonce"]
    assert any("dependence-aware" in n for n in row.notes)


def test_rules_are_written_once_and_the_docs_page_is_generated(tmp_path):
    """docs/verdicts.md's rule blocks are what ``weince status --verdicts`` writes from the
    registry and the rule code; a hand edit or a changed tolerance fails here."""
    page = REPO / "docs" / "verdicts.md"
    copy = tmp_path / "verdicts.md"
    copy.write_text(page.read_text())
    assert update_rules_page(copy, CLAIMS, check=True), (
        "docs/verdicts.md is out of date; run `weince status --verdicts docs/verdicts.md`")
    flat = re.sub(r"\s+", " ", page.read_text())
    for cid, claim in REG.items():
        assert rule_text(claim) in flat, (cid, rule_text(claim))
    assert set(RULES) == {c["kind"] for c in REG.values()}


def test_a_changed_tolerance_rewrites_the_rules_page(tmp_path):
    reg = yaml.safe_load(CLAIMS.read_text())
    next(c for c in reg["claims"] if c["id"] == "C3")["tolerance"] = 2.5
    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump(reg))
    page = tmp_path / "verdicts.md"
    page.write_text((REPO / "docs" / "verdicts.md").read_text())
    assert not update_rules_page(page, claims, check=True)
    assert not update_rules_page(page, claims)
    text = page.read_text()
    assert "- **C3** (gain):" in text and "within 2.5 points of our mean gain" in text
    assert "- **C4, C6** (gain):" in text
    assert update_rules_page(page, claims, check=True)
    page.write_text("# no markers\n")
    with pytest.raises(ValueError, match="no generated block"):
        update_rules_page(page, claims)


def test_every_kind_has_one_rule_in_the_table():
    """The schema's kinds, the rules in words and the table of rule functions are the same
    set, and every kind but norms and noise_floor (whole-claim evaluators) has its own rule
    function."""
    schema = yaml.safe_load((REPO / "src/weince/pipeline/claims.schema.yaml").read_text())
    kinds = set(schema["$defs"]["claim"]["properties"]["kind"]["enum"])
    assert set(KINDS) == set(RULES) == kinds
    rules = [k.rule for name, k in KINDS.items() if k.evaluate is None]
    assert all(callable(r) for r in rules) and len(set(rules)) == len(rules)
    assert all(k.rule is None and callable(k.evaluate) for k in KINDS.values()
               if k.evaluate is not None)


def test_each_kind_lives_in_its_own_module_with_its_rule_in_words():
    """One module per kind (``weince.report.verdicts.<kind>``, N1-N3's in the norms room):
    its ``RULE`` is the registry's text and its rule function or evaluator is defined
    there, not in the shared core."""
    for name, kind in KINDS.items():
        home = "weince.norms.rules" if name == "norms" else f"weince.report.verdicts.{name}"
        mod = importlib.import_module(home)
        assert RULES[name] is mod.RULE is kind.text, name
        fn = kind.rule or kind.evaluate
        assert fn.__module__ == home, (name, fn.__module__)


def test_an_unknown_kind_fails_naming_it():
    claim = copy.deepcopy(REG["C3"])
    claim["kind"] = "majority"
    with pytest.raises(ValueError, match="majority"):
        evaluate_claim(claim, [], [], lambda s, a, f: [], alpha=0.05, scale="")


def test_registry_refuses_any_rows_for_the_diagnostics(tmp_path):
    reg = yaml.safe_load(CLAIMS.read_text())
    c1 = next(c for c in reg["claims"] if c["id"] == "C1")
    c1["rows"] = "any"
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump(reg))
    with pytest.raises(ValueError, match="paper's own settings as rows"):
        load_claims(p)


def test_no_half_width_is_called_a_standard_deviation():
    text = CLAIMS.read_text()
    assert "_sd" not in text and "baseline_ci95_half" in text
    assert np.isclose(REG["C3"]["rows"][0]["paper"]["baseline_ci95_half"], 0.19)


def _reading_lines(res):
    return [ln for ln in claim_lines(res) if ln[6] == "reading (no verdict)"]


def test_a_gain_row_without_a_paper_figure_is_a_reading_not_a_verdict(tmp_path):
    """A metric the paper gave no figure for (``paper: {}``) stands in the table with each
    arm's reading; the claim's verdict is the one without it, however the reading goes."""
    claim = copy.deepcopy(REG["C3"])
    claim["rows"].append({**claim["rows"][0], "metric": "val_acc", "label": "val", "paper": {}})
    tree = {V("cifar100", "resnet18"): {
        "infonce": [{"test_acc": v, "val_acc": v} for v in BASE],
        "weince_recipe": [{"test_acc": v + 3.3, "val_acc": v - 9.0} for v in BASE]}}
    res, alone = run(tmp_path / "with", claim, tree), run(tmp_path / "without", REG["C3"], tree)
    assert alone.verdict == REPRODUCED and (res.verdict, res.reason) == (alone.verdict,
                                                                         alone.reason)
    row = next(r for r in res.rows if r.metric == "val_acc")
    assert row.reading and row.verdicts["weince_recipe"].startswith("reading: gain < 0")
    line, = _reading_lines(res)
    assert line[1] == "val" and line[5] == "(no paper figure)" and "gain -9.00" in line[4]
    # the same row with a figure is judged, and fails the claim
    claim["rows"][-1]["paper"] = {"gain": 1.0}
    assert run(tmp_path / "judged", claim, tree).verdict == NOT_REPRODUCED


def test_a_claims_readings_are_shown_and_left_out_of_its_verdict(tmp_path):
    """``readings``: metrics shown after each setting's judged rows; they neither count
    among the paper's rows nor move the verdict."""
    claim = {**copy.deepcopy(REG["C10"]), "readings": ["acc@50"]}
    keys = [*claim["metrics"], "acc@50"]
    tree = {V("cifar10", "resnet18"): {
        "infonce": [{k: v for k in keys} for v in BASE],
        "weince_recipe": [{k: v + (0.5 if k in claim["metrics"] else -6.0) for k in keys}
                          for v in BASE]}}
    res = run(tmp_path, claim, tree)
    ran = [r for r in res.rows if r.cells]
    assert [r.metric for r in ran] == keys and [r.reading for r in ran] == [
        False] * len(claim["metrics"]) + [True]
    assert res.verdict == partial_verdict(len(claim["metrics"]), C10_ROWS), res.verdict
    assert ran[-1].verdicts["weince_recipe"].startswith("reading: gain < 0")
    assert [ln[1] for ln in _reading_lines(res)] == ["k-NN acc@50"]


def test_a_reading_must_be_a_declared_metric(tmp_path):
    reg = yaml.safe_load(CLAIMS.read_text())
    c10 = next(c for c in reg["claims"] if c["id"] == "C10")
    c10["readings"] = ["nonsense@5"]
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(reg))
    with pytest.raises(ValueError, match=r"claim C10: readings \['nonsense@5'\] are not "
                                         r"declared metrics; declare them in .*metrics\.py"):
        load_claims(tmp_path / "claims.yaml")


def test_a_gain_claim_refuses_a_lower_is_better_metric(tmp_path, monkeypatch):
    """The gain rules read a positive gain as the better arm: a claim judging a metric
    declared lower-is-better fails at load, naming it."""
    monkeypatch.setattr(metrics, "METRICS", tuple(
        dataclasses.replace(m, higher_is_better=m.key != "test_acc") for m in metrics.METRICS))
    (tmp_path / "claims.yaml").write_text(CLAIMS.read_text())
    with pytest.raises(ValueError, match=r"claim C3: kind 'gain' judges a gain .* "
                                         r"\['test_acc'\] are declared lower-is-better"):
        load_claims(tmp_path / "claims.yaml")
