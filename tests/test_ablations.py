"""Ablation arms, per-profile plans and the ablation report on fabricated result files.

The numbers in the fixtures are test data written by the tests, not results."""

import json
import math
import re
from pathlib import Path

import pytest
import torch
import yaml
from scipy import stats as st

import weince.losses.baselines  # noqa: F401  (registers hcl, dcl, dclw)
from weince.eval.linear import linear_probe
from weince.losses import LOSSES, build_loss
from weince.pipeline.arms import ARMS, apply_arm, arm_settings, canonical_arm
from weince.pipeline.ablations import (ARMS_GROUP, GROUPS, ablation_inputs, ablation_outputs,
                                      ablation_plan)
from weince.pipeline.targets import arm_evaluations, all_targets
from weince.report.ablations import build_ablation_report, group_commentary
from weince.utils.summary import estimate
from weince.utils import write_json
from weince.pipeline.profile import Profile


# ---------------------------------------------------------------- fixtures
def make_cfg(tmp_path, seeds=(7, 21, 63), tau=None):
    pre = {"epochs": 3, "batch_size": 64}
    if tau is not None:
        pre["tau"] = tau
    return {"profile": "t", "results": str(tmp_path / "results"),
            "reports": str(tmp_path / "reports"),
            "vision": {"datasets": ["digits"], "backbones": ["smallcnn"], "seeds": list(seeds),
                       "pretrain": pre, "losses": {"weince": {"margin": 0.0}}}}


def write_linear(plan, row, test_vals, val_vals=None):
    """One fabricated linear.json per encoder seed: test_acc / val_acc summaries over two
    probe seeds whose mean is the given encoder-level value."""
    files = plan.result_files("digits", "smallcnn", row)
    for i, (p, v) in enumerate(zip(files, test_vals)):
        vv = (val_vals or test_vals)[i]
        write_json(p, {"test_acc": {"mean": v, "std": 0.2, "n": 2, "values": [v - 0.2, v + 0.2]},
                       "val_acc": {"mean": vv, "std": 0.0, "n": 2, "values": [vv, vv]},
                       "feature": row.feature}, cfg={"fixture": True}, seed=i)


def write_log(plan, arm, lam_by_epoch, rho0=0.05):
    for p in plan.log_files("digits", "smallcnn", arm):
        p.parent.mkdir(parents=True, exist_ok=True)
        recs = [{"epoch": e + 1, "loss": 5.0 - e, **({"lambda_mean": lam, "rho0": rho0 + 0.01 * e}
                                                      if lam is not None else {})}
                for e, lam in enumerate(lam_by_epoch)]
        p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")


def row(group, name):
    return next(r for r in GROUPS[group].rows if r.name == name)


def fill_group(plan, group, values, val=None):
    """values: row name -> per-seed test values; every arm gets a training log."""
    for name, vals in values.items():
        r = row(group, name)
        write_linear(plan, r, vals, (val or {}).get(name))
        lam = [0.1, 0.2, 0.3] if ARMS[r.arm].loss.startswith("weince") else [None] * 3
        write_log(plan, r.arm, lam)


CONFOUND = {"infonce": [50.0, 50.4, 49.8], "infonce_topm": [51.0, 51.5, 50.9],
            "weince": [50.5, 50.9, 50.2], "weince_recipe": [53.0, 53.4, 53.1],
            "weince_recipe_no_weib": [52.0, 52.2, 51.9]}


# ---------------------------------------------------------------- arms as data
def test_every_arm_builds_its_registered_loss():
    for name, arm in ARMS.items():
        assert arm.loss in LOSSES, name
        s = arm_settings(name, tau=0.5)
        m = build_loss(s["loss"], tau=s["tau"], **s["loss_kwargs"])
        assert sum(p.numel() for p in m.parameters()) == 0
        z1, z2 = torch.randn(8, 4), torch.randn(8, 4)
        assert torch.isfinite(m(z1, z2))
    for g in GROUPS.values():
        names = [r.name for r in g.rows]
        assert g.reference in names and len(set(names)) == len(names)
        assert all(r.arm in ARMS for r in g.rows)


def test_issue_arms_present():
    confound = {r.arm for r in GROUPS["confound"].rows}
    assert confound == {"infonce", "infonce_topm", "weince", "weince_recipe",
                        "weince_recipe_no_weib"}
    lams = sorted(ARMS[r.arm].kwargs["lam"] for r in GROUPS["gate"].rows
                  if "lam" in ARMS[r.arm].kwargs)
    assert lams == [0.25, 0.5, 1.0]
    gates = {ARMS[r.arm].kwargs.get("gate") for r in GROUPS["gate"].rows}
    assert {"rho", "aic"} <= gates
    assert ARMS["weince_beta_anchor"].kwargs == {"beta": "anchor"}
    taus = {(ARMS[r.arm].loss, ARMS[r.arm].tau) for r in GROUPS["temperature"].rows}
    assert taus == {(loss, t) for loss in ("infonce", "weince") for t in (0.1, 0.2, 0.5, 1.0)}
    assert {r.arm for r in GROUPS["baselines"].rows} >= {"hcl", "dcl"}
    assert {r.feature for r in GROUPS["features"].rows} == {"backbone", "head"}


def test_apply_arm_sets_loss_kwargs_and_tau():
    losses = {"weince": {"margin": 0.0, "kappa_rho": 5.0}, "weince_lam0p5": {"kappa_aic": 2.0}}
    run = {"dataset": "digits", "loss": "weince_lam0p5", "tau": 0.5, "loss_kwargs": {}}
    out = apply_arm(run, "weince_lam0p5", losses)
    assert out["loss"] == "weince" and out["tau"] == 0.5
    assert out["loss_kwargs"] == {"margin": 0.0, "kappa_rho": 5.0, "lam": 0.5, "kappa_aic": 2.0}
    assert run["loss"] == "weince_lam0p5"  # input untouched
    out = apply_arm(run, "infonce_tau0p1", losses)
    assert out["loss"] == "infonce" and out["tau"] == 0.1 and out["loss_kwargs"] == {}
    out = apply_arm(run, "weince_tau1", losses)
    assert out["tau"] == 1.0 and out["loss_kwargs"] == {"margin": 0.0, "kappa_rho": 5.0}
    out = apply_arm(run, "hcl", {"hcl": {"tau_plus": 0.0}, "weince": {"margin": 0.0}})
    assert out["loss"] == "hcl" and out["loss_kwargs"] == {"beta": 1.0, "tau_plus": 0.0}
    with pytest.raises(ValueError, match="unknown ablation arm 'weince_lam7'"):
        apply_arm(run, "weince_lam7", losses)


def test_canonical_arm_reuses_the_main_run_at_the_profile_tau(tmp_path):
    cfg = make_cfg(tmp_path)

    def canon(arm, c):
        v = Profile.of(c).vision
        return canonical_arm(arm, v.losses, v.tau)

    assert canon("infonce_tau0p5", cfg) == "infonce"
    assert canon("weince_tau0p5", cfg) == "weince"
    assert canon("infonce_tau0p2", cfg) == "infonce_tau0p2"
    assert canon("weince_lam0p5", cfg) == "weince_lam0p5"
    cfg_own = make_cfg(tmp_path)
    cfg_own["vision"]["losses"]["infonce_tau0p5"] = {"tau_dummy": 1}
    assert canon("infonce_tau0p5", cfg_own) == "infonce_tau0p5"
    cfg2 = make_cfg(tmp_path, tau=0.2)
    assert canon("infonce_tau0p5", cfg2) == "infonce_tau0p5"
    assert canon("infonce_tau0p2", cfg2) == "infonce"
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["temperature"]}}))
    assert "infonce_tau0p5" not in plan.run_arms() and "infonce" in plan.run_arms()
    assert len(plan.run_arms()) == 8


# ---------------------------------------------------------------- plans
def test_plan_from_the_profile_block_and_errors(tmp_path):
    cfg = make_cfg(tmp_path)
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["confound", "features"],
                                               "seeds": [1, 2]}}))
    assert [g.name for g in plan.groups] == ["confound", "features"]
    assert plan.pairs == (("digits", "smallcnn"),) and plan.seeds == (1, 2)
    paper = ablation_plan(Profile.of({**cfg, "profile": "paper",
                           "ablations": {"groups": "all", "pairs": [["cifar100", "resnet18"]]}}))
    assert [g.name for g in paper.groups] == list(GROUPS)
    assert paper.pairs == (("cifar100", "resnet18"),) and paper.seeds == (7, 21, 63)
    assert len(paper.run_arms()) == len(set(paper.run_arms())) == 20
    assert ablation_plan(Profile.of(cfg)).groups == ()          # no block: no group
    off = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["confound"],
                                                         "enabled": False}}))
    assert off.groups == () and ablation_inputs(off) == []
    with pytest.raises(ValueError, match="ablations/groups.*'gates'"):
        ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["gates"]}}))
    with pytest.raises(ValueError, match="'group' was unexpected"):
        ablation_plan(Profile.of({**cfg, "ablations": {"group": ["confound"]}}))
    with pytest.raises(ValueError, match="encoder seed"):
        ablation_plan(Profile.of({**cfg, "vision": {}, "ablations": {"groups": ["confound"]}}))


REPO = Path(__file__).resolve().parents[1]


def test_an_arm_no_group_names_gets_a_row_of_its_own(tmp_path):
    """Every arm of vision.arms has a row on the page: groups that name every arm are the
    plan as configured; an arm they leave out (dcl) brings the group `arms`, every arm
    against the baseline the claims registry gives (not the first of the list)."""
    cfg = {**make_cfg(tmp_path), "claims": str(REPO / "config" / "claims.yaml"),
           "ablations": {"groups": ["confound"]}}
    cfg["vision"]["arms"] = ["weince", "infonce", "weince_recipe"]
    assert [g.name for g in ablation_plan(Profile.of(cfg)).groups] == ["confound"]
    cfg["vision"]["arms"].append("dcl")
    prof = Profile.of(cfg)
    plan = ablation_plan(prof)
    assert [g.name for g in plan.groups] == ["confound", ARMS_GROUP]
    arms = plan.groups[-1]
    assert [r.arm for r in arms.rows] == cfg["vision"]["arms"] and arms.reference == "infonce"
    run = f"{tmp_path}/results/t/vision/digits/smallcnn/dcl/seed"
    assert {str(p) for p in ablation_inputs(plan)} >= {f"{run}{s}/linear.json" for s in (7, 21, 63)}
    # pretrained and evaluated at every seed, though no claim names dcl
    evals = {str(p) for p in arm_evaluations(prof)}
    assert evals == {f"{tmp_path}/results/t/vision/digits/smallcnn/{a}/seed{s}/{f}"
                     for a in cfg["vision"]["arms"] for s in (7, 21, 63)
                     for f in ("linear.json", "knn.json")}
    assert evals <= set(all_targets(prof))
    # the reference follows the registry's baseline
    reg = (REPO / "config" / "claims.yaml").read_text().replace("baseline: infonce,",
                                                                "baseline: dcl,")
    (tmp_path / "claims.yaml").write_text(reg)
    other = ablation_plan(Profile.of({**cfg, "claims": str(tmp_path / "claims.yaml")}))
    assert other.groups[-1].reference == "dcl"
    # and the page has the row, compared with the reference
    fill_group(plan, "confound", CONFOUND)   # the runs of infonce, weince, weince_recipe
    dcl = [51.5, 51.9, 51.2]
    write_linear(plan, arms.rows[-1], dcl)
    write_log(plan, "dcl", [None] * 3)
    build_ablation_report(prof, plan)
    md, doc = read_report(cfg)
    table = md.split("### The profile's arms", 1)[1]
    gain = sum(dcl) / 3 - sum(CONFOUND["infonce"]) / 3
    assert re.search(rf"^\| dcl \| .* \| {re.escape(f'{gain:+.2f}')} \[", table, re.M), table
    rows = doc["pairs"]["digits/smallcnn"][ARMS_GROUP]["rows"]
    assert [r["row"] for r in rows] == cfg["vision"]["arms"]
    assert rows[-1]["test_acc"]["mean"] == pytest.approx(sum(dcl) / 3)


def test_inputs_name_probe_results_and_logs(tmp_path):
    plan = ablation_plan(Profile.of({**make_cfg(tmp_path), "ablations": {"groups": ["features"]}}))
    files = [str(p) for p in ablation_inputs(plan)]
    run = f"{tmp_path}/results/t/vision/digits/smallcnn/weince/seed21/"
    assert run + "linear.json" in files and run + "linear_head.json" in files
    assert run + "train_log.jsonl" in files
    assert len(files) == len(set(files)) == 2 * 3 * 3  # 2 arms x 3 seeds x 3 files


# ---------------------------------------------------------------- report
def read_report(cfg):
    outs = ablation_outputs(Profile.of(cfg))
    return outs["md"].read_text(), json.loads(outs["json"].read_text())


def test_report_numbers_follow_the_files(tmp_path):
    cfg = make_cfg(tmp_path)
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["confound"]}}))
    fill_group(plan, "confound", CONFOUND)
    outs = build_ablation_report(Profile.of(cfg), plan)
    md, doc = read_report(cfg)
    rows = {r["row"]: r for r in doc["pairs"]["digits/smallcnn"]["confound"]["rows"]}
    vals = CONFOUND["weince_recipe"]
    m = sum(vals) / 3
    half = st.t.ppf(0.975, 2) * st.tstd(vals) / math.sqrt(3)
    got = rows["weince_recipe"]["test_acc"]
    assert got["n"] == 3 and got["mean"] == pytest.approx(m)
    assert got["lo"] == pytest.approx(m - half) and got["hi"] == pytest.approx(m + half)
    assert f"{m:.2f} [{m - half:.2f}, {m + half:.2f}] (n=3)" in md
    assert "provenance" in doc
    assert "Result files: 15;" in md  # 5 arms x 3 seeds, each counted once
    assert outs["figures"].joinpath("lambda_digits_smallcnn.png").exists()
    assert "ablations/lambda_digits_smallcnn.png" in md


def test_commentary_follows_the_numbers(tmp_path):
    cfg = make_cfg(tmp_path)
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["confound"]}}))
    fill_group(plan, "confound", CONFOUND)
    build_ablation_report(Profile.of(cfg), plan)
    md1, doc1 = read_report(cfg)
    com1 = doc1["pairs"]["digits/smallcnn"]["confound"]["commentary"]
    assert com1[0].startswith("Highest mean test accuracy: weince_recipe, 53.17")
    d_recipe = sum(CONFOUND["weince_recipe"]) / 3 - sum(CONFOUND["weince"]) / 3
    d_topm = sum(CONFOUND["infonce_topm"]) / 3 - sum(CONFOUND["infonce"]) / 3
    text = " ".join(com1)
    assert f"weince_recipe - weince = {d_recipe:+.2f}" in text
    assert f"infonce_topm - infonce = {d_topm:+.2f}" in text
    assert f"differ by {d_recipe - d_topm:+.2f}" in text
    assert "overlaps no other row's interval" in text

    # swap: InfoNCE + top-M now on top, overlapping with the recipe
    swapped = dict(CONFOUND, infonce_topm=[53.5, 54.5, 52.6])
    fill_group(plan, "confound", swapped)
    build_ablation_report(Profile.of(cfg), plan)
    _, doc2 = read_report(cfg)
    com2 = doc2["pairs"]["digits/smallcnn"]["confound"]["commentary"]
    assert com2[0].startswith("Highest mean test accuracy: infonce_topm")
    assert "weince_recipe" in com2[2] and "does not overlap" in com2[2]
    assert com1 != com2


def test_commentary_overlap_and_no_interval_cases():
    g = GROUPS["baselines"]
    est = {"infonce": estimate([50, 51, 52]), "hcl": estimate([50.5, 51.5, 52.5]),
           "dcl": estimate([40, 40.5, 41]), "dclw": estimate([51]), "weince": estimate([])}
    lines = group_commentary(g, est)
    assert lines[0] == "No result for weince."
    assert lines[1].startswith("Highest mean test accuracy: hcl, 51.50")
    assert "overlaps those of infonce; it does not overlap those of dcl" in " ".join(lines)
    assert "No interval for dclw (n < 2)." in lines
    assert "weince - hcl: not available" in lines[-1]
    single = group_commentary(GROUPS["beta"], {"weince": estimate([50.0])})
    assert "Fewer than two rows have results" in " ".join(single)


def test_temperature_is_chosen_on_validation_not_test(tmp_path):
    cfg = make_cfg(tmp_path)
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["temperature"]}}))
    test, val = {}, {}
    for t, te, va in ((0.1, 55.0, 40.0), (0.2, 50.0, 60.0), (0.5, 49.0, 50.0), (1.0, 45.0, 45.0)):
        for loss, off in (("infonce", 0.0), ("weince", 1.0)):
            name = f"{loss}_tau{t:g}".replace(".", "p")
            test[name] = [te + off - 0.3, te + off, te + off + 0.3]
            val[name] = [va] * 3
    fill_group(plan, "temperature", test, val)
    build_ablation_report(Profile.of(cfg), plan)
    _, doc = read_report(cfg)
    text = " ".join(doc["pairs"]["digits/smallcnn"]["temperature"]["commentary"])
    assert "Highest mean test accuracy: weince_tau0p1" in text  # by test: tau 0.1
    assert "infonce: tau chosen on validation accuracy = 0.2" in text  # by val: tau 0.2
    assert "weince_tau0p2 - infonce_tau0p2 = +1.00" in text
    # the tau=0.5 rows read the main arms' runs
    rows = {r["row"]: r for r in doc["pairs"]["digits/smallcnn"]["temperature"]["rows"]}
    assert rows["infonce_tau0p5"]["run_arm"] == "infonce"


def test_features_group_reads_head_probe_files(tmp_path):
    cfg = make_cfg(tmp_path)
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["features"]}}))
    fill_group(plan, "features", {"infonce": [50, 50, 50.3], "infonce [head]": [45, 45.2, 45],
                                  "weince": [52, 52.5, 52], "weince [head]": [46, 46, 46.6]})
    build_ablation_report(Profile.of(cfg), plan)
    md, doc = read_report(cfg)
    text = " ".join(doc["pairs"]["digits/smallcnn"]["features"]["commentary"])
    assert "infonce: head - backbone = -5.03" in text
    assert "weince: head - backbone = -5.97" in text


def test_missing_results_raise_or_show_missing(tmp_path):
    cfg = make_cfg(tmp_path)
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["confound"]}}))
    partial = {k: v for k, v in CONFOUND.items() if k != "weince_recipe_no_weib"}
    fill_group(plan, "confound", partial)
    with pytest.raises(FileNotFoundError, match="weince_recipe_no_weib/seed7/linear.json"):
        build_ablation_report(Profile.of(cfg), plan)
    build_ablation_report(Profile.of(cfg), plan, allow_missing=True)
    md, doc = read_report(cfg)
    assert "| weince_recipe_no_weib | weince_recipe_no_weib | missing" in md
    assert "No result for weince_recipe_no_weib." in md


def test_no_figure_without_gate_logs(tmp_path):
    cfg = make_cfg(tmp_path)
    plan = ablation_plan(Profile.of({**cfg, "ablations": {"groups": ["baselines"]}}))
    fill_group(plan, "baselines", {n: [50.0, 50.5, 51.0] for n in
                                    ("infonce", "hcl", "dcl", "dclw", "weince")})
    build_ablation_report(Profile.of(cfg), plan)
    md, _ = read_report(cfg)
    assert ("Arms that log a gate: weince. Not drawn (no gate logged): infonce, hcl, dcl, "
            "dclw.") in md
    for p in plan.log_files("digits", "smallcnn", "weince"):
        p.unlink()
    build_ablation_report(Profile.of(cfg), plan, allow_missing=True)
    md, _ = read_report(cfg)
    assert "Gate over training" not in md


def test_head_feature_probe(tmp_path):
    g = torch.Generator().manual_seed(0)
    feats = {}
    for split, n in (("train", 60), ("test", 30)):
        y = torch.arange(n) % 3
        head = torch.nn.functional.one_hot(y, 3).float() * 3 + 0.1 * torch.randn(n, 3, generator=g)
        feats[split] = {"backbone": torch.randn(n, 5, generator=g), "head": head, "labels": y}
    path = tmp_path / "features.pt"
    torch.save(feats, path)
    res = linear_probe(path, epochs=30, seeds=[0, 1], lr=0.05, feature="head")
    assert res["feature"] == "head" and res["test_acc"]["n"] == 2
    assert res["test_acc"]["mean"] > 90.0


# ---------------------------------------------------------------- shipped configuration
def test_shipped_ablation_config_covers_the_issue():
    """The ablations block of each shipped profile: the embedded default runs the
    confound arms at least, the paper profile runs every group; every arm name fits the
    workflow's {arm} wildcard."""
    root = Path(__file__).resolve().parents[1]
    plans = {}
    for name in ("config", "smoke", "paper"):
        path = root / "config" / f"{name}.yaml"
        if not path.exists():
            pytest.skip(f"{path} not present")
        cfg = yaml.safe_load(path.read_text())
        plans[cfg["profile"]] = ablation_plan(Profile.of(cfg))
    confound = {"infonce", "infonce_topm", "weince", "weince_recipe", "weince_recipe_no_weib"}
    for prof in ("default", "smoke"):
        assert confound <= set(plans[prof].run_arms())
    paper = plans["paper"]
    assert [g.name for g in paper.groups] == list(GROUPS)
    assert paper.pairs == (("cifar100", "resnet18"),) and paper.seeds == (7, 21, 63, 84)
    for arm in ARMS:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", arm), arm
