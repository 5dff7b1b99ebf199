"""The cost model (weince.pipeline.cost, docs/cost.md): counted FLOPs, the SLURM runtime
rule, and the per-claim / per-target plans. No GPU, no download."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import yaml

from weince.pipeline import cost

REPO = Path(__file__).resolve().parents[2]


def _paper():
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    from weince.pipeline.rehearsal import deep_merge

    deep_merge(cfg, yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    cfg["claims"] = str(REPO / "config" / "claims.yaml")
    return cfg


def test_resnet18_cifar_step_flops_are_of_the_known_order_and_linear_in_batch():
    # ResNet-18 with the CIFAR stem at 32 px: ~0.56 GMACs forward = ~1.1 GFLOP, and a
    # training step (forward + backward) ~3x that, per image
    per_image = cost._vision_flops_per_image("resnet18", 32, 3, 64)
    assert 2.5e9 < per_image < 4.5e9
    a, b = cost.vision_step_flops("resnet18", 32, 3, 128), \
        cost.vision_step_flops("resnet18", 32, 3, 256)
    loss = lambda n: 3 * 2.0 * (2 * n) ** 2 * 64          # noqa: E731 the similarity matmul
    assert b - loss(256) == pytest.approx(2 * (a - loss(128)), rel=1e-12)
    # the 7x7 stride-2 stem and max-pool of 96 px images cost less than the 32 px CIFAR stem
    assert cost.vision_step_flops("resnet50", 96) < cost.vision_step_flops("resnet50", 32)


def test_the_anchor_model_matches_resnet50s_published_size_and_bert_is_linear_in_batch():
    # torchvision ResNet-50 at 224 px: 4.1 GMACs forward, so ~24.6 GFLOP per training image
    assert cost._vision_flops_per_image("resnet50", 224, 3, 64) == pytest.approx(24.6e9,
                                                                                rel=0.03)
    assert cost.simcse_step_flops(64) == pytest.approx(2 * cost.simcse_step_flops(32))
    # bert-base: ~110M parameters (85M outside the embeddings): ~6 x 85M FLOPs per token
    per_token = cost._bert_flops_per_sequence(32) / 32
    assert 4e8 < per_token < 7e8


def test_utilisation_ranges_come_from_the_anchors_and_every_device_has_a_source():
    data = cost.load_devices()
    for name, dev in data["devices"].items():
        assert dev["source"] and all(dev[p] > 0 for p in cost.PRECISIONS), name
        assert dev["fp32"] < dev["tf32"] < dev["bf16"], name
    for a in cost.anchor_table():
        assert a["source"] and 0 < a["utilisation"] < 1, a["id"]
    for fam in ("cnn", "transformer"):
        lo, hi = cost.utilisation(fam)
        us = [a["utilisation"] for a in cost.anchor_table() if a["family"] == fam]
        assert hi == max(us) and lo == pytest.approx(min(us) * data["small_kernel_derate"])
    with pytest.raises(ValueError, match="unknown GPU 'v100'.*h100-sxm"):
        cost.estimate(_paper(), "v100")


def test_precision_follows_the_training_config():
    assert cost.precision_of("cnn") == "tf32"             # cuDNN's TF32 convolutions
    assert cost.precision_of("transformer") == "fp32"     # full float32 matmuls
    assert cost.precision_of("transformer", tf32=True) == "tf32"
    assert cost.precision_of("cnn", amp=True) == "bf16"


def test_every_paper_setting_requests_between_its_need_and_30x_the_slowest_estimate():
    cfg = _paper()
    c = cost.cost_settings(cfg)
    assert c["enabled"]
    est = cost.estimate(cfg)
    every = [cost.estimate(cfg, g).settings for g in cost.device_names()]
    fastest = {k: min(e[k].hours[0] for e in every) for k in est.settings}
    slowest = {k: max(e[k].hours[1] for e in every) for k in est.settings}
    for key, s in est.settings.items():
        req = cost.job_runtime(cfg, key)
        assert req["runtime"] <= c["max_runtime"]
        granted = req["runtime"] * req["segments"]
        # never less than the setting needs on the fastest GPU, nor than its own estimate
        assert granted >= fastest[key] * 60 and granted >= s.hours[1] * 60, key
        assert granted <= 30 * slowest[key] * 60 + c["overhead_min"] * req["segments"] + 60
        if req["segments"] > 1:
            per = req["runtime"] - c["overhead_min"] - 2
            assert per * req["segments"] >= req["total_min"] - c["overhead_min"], key
    assert cost.retries_for(cfg, "vision") == max(
        cost.job_runtime(cfg, k)["segments"] for k in est.settings
        if not k.startswith("text/")) - 1 + c["extra_restarts"]


def test_a_measured_step_time_replaces_the_estimate_of_its_setting_only():
    cfg = cost.with_overlay(_paper(), {"cost": {"step_s": {"cifar10/resnet18": 0.5}}})
    est = cost.estimate(cfg)
    s = est.settings["cifar10/resnet18"]
    assert s.source == "measured" and s.hours == (0.5 * s.steps / 3600,) * 2
    assert est.settings["cifar100/resnet18"].source == "estimated"
    assert cost.job_runtime(cfg, "cifar10/resnet18")["runtime"] == math.ceil(
        0.5 * s.steps / 60 * 2.0 + 10)


def test_a_run_over_the_cap_is_planned_as_enough_segments():
    cfg = cost.with_overlay(_paper(), {"cost": {"max_runtime": 60, "overhead_min": 5,
                                                "step_s": {"cifar10/resnet18": 1.0}}})
    need = 19_500 / 60                                    # minutes at 1 s per step
    req = cost.job_runtime(cfg, "cifar10/resnet18")
    assert req["runtime"] == 60
    assert req["segments"] == math.ceil(need * 2.0 / (60 - 5 - 2))


def test_the_grid_at_one_seed_trains_fewer_runs():
    cfg = _paper()
    c3 = next(r for r in cost.claim_rows(cost.estimate(cfg), cfg) if r["id"] == "C3")
    one = cost.with_overlay(cfg, {"vision": {"grid": {"seeds": [7]}}})
    c3_one = next(r for r in cost.claim_rows(cost.estimate(one), one) if r["id"] == "C3")
    # 2 grid arms: 27 points x 4 seeds -> 27 x 1 + 3 other seeds of the chosen point
    assert c3["runs"] - c3_one["runs"] == 2 * (27 * 4 - (27 + 3))
    assert c3_one["high"] < c3["high"]


@pytest.fixture(scope="module")
def plan():
    spec = importlib.util.spec_from_file_location("weince_plan_cost",
                                                  REPO / "workflow" / "tools" / "plan.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_plan_prints_gpu_hours_per_claim_and_writes_the_table(plan, tmp_path, capsys):
    out = tmp_path / "claims.md"
    assert plan.main(["--gpu", "a100-80gb", "--claims", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "estimate for `--gpu a100-80gb`" in text and "| total |" in text
    assert out.read_text().startswith("<!-- generated by: python workflow/tools/plan.py")
    c3 = next(line for line in text.splitlines() if line.startswith("| C3 |"))
    assert c3.split("|")[3].strip() == "224"
    assert "Assumptions:" in text and "datasheet" in text


def test_plan_of_a_target_names_its_runs_hours_and_cheaper_options(plan):
    text = plan.target_plan("reports/paper/table_c3.md", ["config/paper.yaml"], "h100-sxm")
    assert "training runs: 224 (the rows of claim C3)" in text
    assert "`vision.grid.seeds: [7]`: 68 training runs (now 224)" in text
    assert "verdict:" in text and "h100-sxm" in text
    jobs = [plan.JobInfo("pretrain", False, [f"results/paper/vision/cifar100/resnet18/infonce/"
                                             f"seed{s}/encoder.pt"]) for s in (7, 21)]
    jobs.append(plan.JobInfo("claim_table", False, ["reports/paper/table_c3.md"]))
    listed = plan.target_plan("reports/paper/table_c3.md", ["config/paper.yaml"], "h100-sxm",
                              jobs)
    one = cost.estimate(_paper()).settings["cifar100/resnet18"].hours
    assert "pretrain 2, claim_table 1" in listed
    assert (f"training jobs of that dry run: 2; GPU-hours "
            f"{cost.hours_range(2 * one[0], 2 * one[1])}") in listed
    with pytest.raises(SystemExit, match="no claim C99"):
        plan.target_plan("reports/paper/table_c99.md", ["config/paper.yaml"], "h100-sxm")


@pytest.mark.slow
def test_the_paper_dry_run_asks_each_pretrain_job_for_its_settings_runtime(plan):
    """The SLURM profile's dry run of the paper profile: every pretraining and SimCSE job's
    `runtime` is its own setting's request (weince.pipeline.cost.job_runtime)."""
    cfg = _paper()
    text = plan.dry_run(["config/paper.yaml"], plan.SLURM_PROFILE, forceall=True)
    jobs = [j for j in plan.parse_dry_run(text) if j.rule in ("pretrain", "simcse")]
    assert len([j for j in jobs if j.rule == "pretrain"]) == len(
        [r for r in cost.estimate(cfg).runs if r.stage == "vision"])
    for j in jobs:
        parts = Path(j.output[0]).parts
        key = ("/".join(parts[3:5]) if j.rule == "pretrain" else f"text/{parts[3]}")
        assert j.runtime_min == cost.job_runtime(cfg, key)["runtime"], (key, j.resources)


def test_the_one_claim_overlay_trains_only_table_2s_headline_setting():
    """config/paper_cifar100_r18.yaml (the README's one claim at paper scale) keeps the paper
    protocol and trains C3's 224 runs, all on CIFAR-100 x ResNet-18, and nothing else."""
    from weince.pipeline.rehearsal import deep_merge

    overlay = yaml.safe_load((REPO / "config" / "paper_cifar100_r18.yaml").read_text())
    cfg = deep_merge(_paper(), overlay)
    runs = cost.paper_vision_runs(cfg)
    assert {(r.dataset, r.backbone) for r, _ in runs} == {("cifar100", "resnet18")}
    assert not any(is_ablation for _, is_ablation in runs)
    assert len(runs) == 224
    assert cfg["vision"]["pretrain"] == _paper()["vision"]["pretrain"]   # the protocol as is
    assert cfg["vision"]["grid"] == _paper()["vision"]["grid"]
