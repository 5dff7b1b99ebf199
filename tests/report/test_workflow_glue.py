"""Config glue of the workflow: per-run stage configs, grid selection on validation, the
C9 special-case check."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from weince.eval.special_case import special_case_check
from weince.pipeline.grid import select_grid
from weince.pipeline.profile import Profile
from weince.pipeline.stages import (RERUN_FREE, apply_selection, grid_arms, job_config,
                                    pretrain_config, result_settings, simcse_config)
from weince.train.config import SimCSEConfig
from weince.utils import write_json
from weince.utils.config import to_dict
from weince.utils.summary import summary

CFG = {
    "profile": "t", "device": "cpu", "threads": 1, "data_root": "data",
    "vision": {"pretrain": {"epochs": 3, "batch_size": 64},
               "pretrain_by_dataset": {"stl10": {"train_split": "train+unlabeled"}},
               "losses": {"weince": {"margin": 2.0, "q": 0.2}},
               "grid": {"arms": ["weince"], "seeds": [7], "margin": [0, 6],
                        "kappa_rho": [5], "kappa_aic": []}},
    "text": {"simcse": {"n_train": 64}, "losses": {"weince": {"margin": 0.0}}},
}


def test_pretrain_config_of_a_grid_point_overrides_the_arm_kwargs():
    c = pretrain_config(Profile.of(CFG), "stl10", "resnet18", "weince@m6_kr5", 21)
    assert c.loss == "weince" and c.seed == 21 and c.epochs == 3
    assert c.loss_kwargs == {"margin": 6.0, "q": 0.2, "kappa_rho": 5.0}
    assert c.train_split == "train+unlabeled" and c.device == "cpu"
    plain = pretrain_config(Profile.of(CFG), "digits", "smallcnn", "weince", 7)
    assert plain.loss_kwargs == {"margin": 2.0, "q": 0.2} and plain.train_split == "train"
    assert (plain.epochs, plain.batch_size, plain.lr) == (3, 64, 3e-4)  # SimCLRConfig's lr
    assert CFG["vision"]["losses"]["weince"] == {"margin": 2.0, "q": 0.2}  # not mutated


def test_grid_selection_uses_validation_and_feeds_the_final_run(tmp_path):
    files = {}
    for point, val in (("m0_kr5", [70.0, 72.0]), ("m6_kr5", [75.0, 74.0])):
        p = tmp_path / point / "seed7" / "linear.json"
        # test accuracy favours the other point: selection must ignore it
        write_json(p, {"val_acc": summary(val), "test_acc": summary([99.0 - val[0]])})
        files[point] = [p]
    sel = select_grid(files, metric="val_acc")
    assert sel["chosen"] == "m6_kr5" and sel["params"] == {"margin": 6.0, "kappa_rho": 5.0}
    with pytest.raises(ValueError, match="validation split only"):
        select_grid(files, metric="test_acc")
    s = tmp_path / "selection.json"
    write_json(s, sel)
    final = apply_selection(pretrain_config(Profile.of(CFG), "digits", "smallcnn", "weince", 7), s)
    assert final.loss_kwargs == {"margin": 6.0, "q": 0.2, "kappa_rho": 5.0}
    assert grid_arms(Profile.of(CFG)) == ["weince"]
    assert grid_arms(Profile.of({"profile": "t", "vision": {"grid": {"arms": ["weince"],
                                                                  "seeds": [7]}}})) == []


def test_one_job_config_for_the_rule_and_its_script(tmp_path):
    """job_config resolves a job once from its wildcards (Snakemake's by attribute, or a
    mapping): the rule's params are its result settings, the script's config is the whole
    of it (nothing removed and put back), the selection's point put in."""
    prof = Profile.of(CFG)
    wc = SimpleNamespace(profile="t", dataset="stl10", backbone="resnet18", arm="weince",
                         seed="21")
    cfg = job_config(prof, wc)
    assert cfg == pretrain_config(prof, "stl10", "resnet18", "weince", 21)
    assert job_config(prof, vars(wc)) == cfg
    params = result_settings(cfg)
    assert params == {k: v for k, v in to_dict(cfg).items() if k not in RERUN_FREE}
    assert {"device", "threads", "data_root"} <= set(to_dict(cfg)) - set(params)
    s = tmp_path / "selection.json"
    write_json(s, {"chosen": "m6_kr5", "params": {"margin": 6.0, "kappa_rho": 5.0}})
    assert job_config(prof, wc, s).loss_kwargs == {"margin": 6.0, "q": 0.2, "kappa_rho": 5.0}
    text = SimpleNamespace(profile="t", model="minilm", arm="weince", seed="63")
    assert job_config(prof, text) == simcse_config(prof, "minilm", "weince", 63)


def test_the_training_rules_and_scripts_resolve_their_job_by_job_config():
    """The rule's rerun trigger and the script resolve a job by one function: job_config
    (SimCSE), or Vision.run_config, which job_config calls for a pretraining run."""
    import inspect  # noqa: PLC0415

    from weince.pipeline import stages  # noqa: PLC0415

    wf = Path(__file__).resolve().parents[2] / "workflow"
    resolves = {"simcse": "job_config(Profile.of(snakemake.config), snakemake.wildcards",
                "pretrain": "Profile.of(snakemake.config).vision.run_config("}
    assert "prof.vision.run_config(" in inspect.getsource(stages.job_config)
    for rule, call in resolves.items():
        smk = (wf / "rules" / f"{rule}.smk").read_text()
        assert "cfg=lambda wc: rerun_trigger(PROFILE, wc)" in smk, rule   # job_config's
        script = (wf / "scripts" / f"{rule}.py").read_text()
        assert call in script, rule
        assert "snakemake.params" not in script and "job_settings" not in script, rule


def test_simcse_config_sets_run_keys():
    c = simcse_config(Profile.of(CFG), "minilm", "weince", 63)
    assert c == SimCSEConfig(n_train=64, model="minilm", loss="weince", seed=63,
                             loss_kwargs={"margin": 0.0}, device="cpu", offline=True,
                             model_name="minilm", model_source="name")   # the weights' identity


def test_special_case_check_is_exact():
    r = special_case_check([("simclr", 16, 8, 0.5), ("pairs", 24, 8, 0.1)])
    assert r["max_abs_diff"] < 1e-5
    assert r["max_abs_diff_float64"] < 1e-12
    assert len(r["cases"]) == 4 and all(v == 0 for v in r["trainable_parameters"].values())
    with pytest.raises(ValueError, match="layout"):
        special_case_check([("grid", 4, 4, 0.5)])
