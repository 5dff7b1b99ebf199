"""A profile's cost (weince.cost.estimate, docs/cost.md): steps x counted FLOPs / measured
throughput, the SLURM runtime rule on one GPU type and on a mixed set, measured step times
in place of the estimate, the per-claim and per-target plans, each on a resolved profile
(``Profile.of``). No GPU, no download."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from weince.cli import main as cli
from weince.cost import estimate as cost
from weince.cost import plan
from weince.cost.evaljobs import EVAL_RULES, eval_job_runtime
from weince.cost.throughput import device_names, step_time
from weince.pipeline.profile import Profile
from weince.utils.config import deep_merge

REPO = Path(__file__).resolve().parents[2]


def _paper() -> Profile:
    """The paper profile as the workflow resolves it: config/paper.yaml over the embedded
    default."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    deep_merge(cfg, yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    cfg["claims"] = str(REPO / "config" / "claims.yaml")
    return Profile.of(cfg)


def test_a_setting_s_step_is_its_counted_flops_over_the_gpu_s_measured_rate():
    est = cost.estimate(_paper(), "a100-80gb")
    s = est.settings["cifar100/resnet18"]
    # both views (512 images) through the CIFAR ResNet-18 and the 512 x 512 similarity
    per_image = cost.vision_counts("resnet18", 32, 3, "proj64")["train"]
    assert s.flops_per_step == 512 * per_image + 3 * 2.0 * 512 * 512 * 64
    assert s.precision == "tf32" and s.family == "cnn"          # cuDNN's TF32 convolutions
    assert s.steps == 100 * (50_000 // 256)
    assert s.step_s == step_time(s.flops_per_step, "a100-80gb", "cnn", "tf32")
    assert est.settings["cifar100/vit_s"].precision == "fp32"    # full float32 matmuls
    assert est.settings["text/bert-base-uncased"].family == "bert"
    # the 7x7 stride-2 stem and max-pool of STL-10's 96 px cost less than the 32 px stem
    assert est.settings["stl10/resnet50"].flops_per_step < \
        est.settings["cifar10/resnet50"].flops_per_step


def test_precision_follows_the_training_config():
    assert cost.precision_of("cnn") == "tf32"
    assert cost.precision_of("vit") == "fp32"
    assert cost.precision_of("bert", tf32=True) == "tf32"
    assert cost.precision_of("cnn", amp=True) == "bf16"
    amp = cost.with_overlay(_paper(), {"vision": {"pretrain": {"amp": True}}})
    assert {s.precision for k, s in cost.estimate(amp).settings.items()
            if not k.startswith("text/")} == {"bf16"}


def test_a_mixed_set_spans_its_fastest_and_slowest_gpu_and_requests_fit_the_slowest():
    cfg = _paper()
    mixed = cost.estimate(cfg, ["a100-80gb", "h100-sxm"])
    a100, h100 = cost.estimate(cfg, "a100-80gb"), cost.estimate(cfg, "h100-sxm")
    assert mixed.total() == (h100.total()[0], a100.total()[1])
    both = cost.with_overlay(cfg, {"cost": {"gpu": ["h100-sxm", "a100-80gb"]}})
    only_h100 = cost.with_overlay(cfg, {"cost": {"gpu": "h100-sxm"}})
    req, fast = cost.job_runtime(both, "imagenet32/vit_s"), cost.job_runtime(
        only_h100, "imagenet32/vit_s")
    assert req["gpu"] == "a100-80gb"
    assert req["need_min"] == pytest.approx(a100.settings["imagenet32/vit_s"].hours[1] * 60)
    assert req["runtime"] * req["segments"] > fast["runtime"] * fast["segments"]
    assert cost.gpu_set(cfg, "a100-80gb, h100-sxm") == ["a100-80gb", "h100-sxm"]
    with pytest.raises(ValueError, match="unknown GPU 'v100x'.*h100-sxm"):
        cost.estimate(cfg, "h100-sxm,v100x")


def _measured(**over):
    entry = {"gpu": "h200", "setting": "cifar100/resnet18", "precision": "tf32",
             "arm": "weince_recipe", "batch": 256, "step_s": 0.0312,
             "source": "benchmarks/gpu_acceptance.sh on NVIDIA H200"}
    return {**entry, **over}


def test_measured_step_times_replace_the_estimate_of_their_gpu_setting_and_precision():
    cfg = cost.with_overlay(_paper(), {"cost": {"gpu": "h200", "measured": [
        _measured(), _measured(arm="infonce", step_s=0.0250),
        _measured(setting="cifar10/resnet18", batch=128, step_s=0.02),   # half the batch
        _measured(setting="cifar100/resnet50", precision="bf16", step_s=0.01),  # not tf32
        _measured(gpu="a100-80gb", setting="stl10/resnet18", step_s=9.0)]}})   # other GPU
    est = cost.estimate(cfg)
    s = est.settings["cifar100/resnet18"]
    assert s.step_s == (0.0312, 0.0312) and s.source == "measured"     # the largest arm
    assert s.hours == (0.0312 * s.steps / 3600,) * 2
    assert est.settings["cifar10/resnet18"].step_s == (0.04, 0.04)      # scaled to 256
    for key in ("cifar100/resnet50", "stl10/resnet18", "cifar100/vit_s"):
        assert est.settings[key].source == "estimated", key
    req = cost.job_runtime(cfg, "cifar100/resnet18")
    assert req["runtime"] == math.ceil(0.0312 * s.steps / 60 * 2.0 + 10)
    # on a mixed set the measured GPU counts for its own share only
    mixed = cost.estimate(cost.with_overlay(cfg, {"cost": {"gpu": ["h200", "a100-80gb"]}}))
    assert mixed.settings["cifar100/resnet18"].source == "estimated/measured"


def test_a_bad_measured_entry_says_what_is_wrong():
    """The profile's schema check refuses it when the profile is resolved, naming the entry
    and each missing key, or the GPU devices.yaml does not list."""
    with pytest.raises(ValueError) as bad:
        cost.with_overlay(_paper(), {"cost": {"measured": [{"gpu": "h200", "step_s": 1}]}})
    for key in ("batch", "precision", "setting"):
        assert f"at cost/measured/0: '{key}' is a required property" in str(bad.value), key
    with pytest.raises(ValueError, match=r"at cost/measured/0/gpu: 'h300' is not one of "
                                         r"\['a100-80gb'.*'h200'"):
        cost.with_overlay(_paper(), {"cost": {"measured": [_measured(gpu="h300")]}})


def test_every_paper_setting_requests_between_its_need_and_the_cap_times_its_segments():
    cfg = _paper()
    c = cost.cost_settings(cfg)
    assert c.enabled
    est = cost.estimate(cfg)
    for key, s in est.settings.items():
        req = cost.job_runtime(cfg, key)
        assert req["runtime"] <= c.max_runtime
        granted = req["runtime"] * req["segments"]
        assert granted >= s.hours[1] * 60 * c.safety_factor, key
        if req["segments"] > 1:
            per = req["runtime"] - c.overhead_min - 2
            assert per * req["segments"] >= req["total_min"] - c.overhead_min, key
            assert per * (req["segments"] - 1) < req["total_min"] - c.overhead_min, key
    assert cost.retries_for(cfg, "vision") == max(
        cost.job_runtime(cfg, k)["segments"] for k in est.settings
        if not k.startswith("text/")) - 1 + c.extra_restarts


def test_a_run_over_the_cap_is_planned_as_enough_segments():
    cfg = cost.with_overlay(_paper(), {"cost": {"max_runtime": 60, "overhead_min": 5,
                                                "measured": [_measured(gpu="h100-sxm",
                                                                       setting="cifar10/resnet18",
                                                                       step_s=1.0)]}})
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


def test_weince_plan_prints_gpu_hours_per_claim_and_per_gpu_type(tmp_path, capsys):
    out = tmp_path / "claims.md"
    assert cli(["plan", "--gpu", "a100-80gb,h100-sxm", "--claims", "--totals",
                "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "the mixed set `--gpu a100-80gb,h100-sxm`" in text and "| total |" in text
    assert out.read_text().startswith("<!-- generated by: weince plan --configfile "
                                      "config/paper.yaml --gpu a100-80gb,h100-sxm --claims")
    c3 = next(line for line in text.splitlines() if line.startswith("| C3 |"))
    assert c3.split("|")[3].strip() == "224"
    rows = [line.split("|")[1].strip() for line in text.splitlines()
            if line.startswith("| ") and "GPU-hours" not in line]
    assert set(device_names()) <= set(rows) and "mixed: a100-80gb,h100-sxm" in rows
    assert "thin evidence" in text and "datasheet" in text


def test_plan_of_a_target_names_its_runs_hours_and_cheaper_options():
    paper = plan.load_profile(["config/paper.yaml"])
    text = plan.target_plan("reports/paper/table_c3.md", paper, "h100-sxm")
    assert "training runs: 224 (the rows of claim C3)" in text
    assert "`vision.grid.seeds: [7]`: 68 training runs (now 224)" in text
    assert "verdict:" in text and "h100-sxm" in text
    jobs = [plan.JobInfo("pretrain", False, [f"results/paper/vision/cifar100/resnet18/infonce/"
                                             f"seed{s}/encoder.pt"]) for s in (7, 21)]
    jobs.append(plan.JobInfo("claim_table", False, ["reports/paper/table_c3.md"]))
    listed = plan.target_plan("reports/paper/table_c3.md", paper, "h100-sxm", jobs,
                              "config/paper.yaml")
    one = cost.estimate(_paper(), "h100-sxm").settings["cifar100/resnet18"].hours
    assert listed.startswith("Plan for reports/paper/table_c3.md (config/paper.yaml), an "
                             "estimate for `--gpu h100-sxm`")
    assert "pretrain 2, claim_table 1" in listed
    assert (f"training jobs of that dry run: 2; GPU-hours "
            f"{cost.hours_range(2 * one[0], 2 * one[1])}") in listed
    with pytest.raises(ValueError, match="no claim C99"):
        plan.target_plan("reports/paper/table_c99.md", paper, "h100-sxm")


@pytest.mark.slow
def test_the_paper_dry_run_asks_each_job_for_its_own_work(tmp_path):
    """The SLURM profile's dry run of the paper profile: every pretraining and SimCSE job's
    `runtime` is its own setting's request, and every evaluation job's its counted work
    (weince.cost.evaljobs), on a mixed set of GPU types."""
    cfg = cost.with_overlay(_paper(), {"cost": {"gpu": ["a100-80gb", "h100-sxm"]}})
    over = tmp_path / "mixed.yaml"
    over.write_text(yaml.safe_dump({"cost": {"gpu": ["a100-80gb", "h100-sxm"]}}))
    text = plan.dry_run(["config/paper.yaml", str(over)], plan.SLURM_PROFILE, forceall=True)
    jobs = plan.parse_dry_run(text)
    train = [j for j in jobs if j.rule in ("pretrain", "simcse")]
    assert len([j for j in train if j.rule == "pretrain"]) == len(
        [r for r in cost.estimate(cfg).runs if r.stage == "vision"])
    for j in train:
        parts = Path(j.output[0]).parts
        key = ("/".join(parts[3:5]) if j.rule == "pretrain" else f"text/{parts[3]}")
        assert j.runtime_min == cost.job_runtime(cfg, key)["runtime"], (key, j.resources)
    evals = [j for j in jobs if j.rule in EVAL_RULES and j.output]
    assert {j.rule for j in evals} >= {"features", "linear", "knn", "collect_scores", "pot",
                                      "link", "sts"}
    for j in evals:
        parts = Path(j.output[0]).parts
        wc = ({"model": parts[3], "arm": parts[4]} if parts[2] == "text" else
              {"dataset": parts[3], "backbone": parts[4], "arm": parts[5]})
        assert j.runtime_min == eval_job_runtime(cfg, j.rule, wc)["runtime"], (j.rule, parts)
    # minutes, but for the probes over ImageNet-32's 1.28 M features (100 epochs per seed)
    assert max(j.runtime_min for j in evals if "/imagenet32/" not in j.output[0]) < 60
    assert max(j.runtime_min for j in evals) <= cost.cost_settings(cfg).max_runtime


def test_the_one_claim_overlay_trains_only_table_2s_headline_setting():
    """config/paper_cifar100_r18.yaml (the README's one claim at paper scale) keeps the paper
    protocol and trains C3's 224 runs, all on CIFAR-100 x ResNet-18, and nothing else."""
    overlay = yaml.safe_load((REPO / "config" / "paper_cifar100_r18.yaml").read_text())
    cfg = cost.with_overlay(_paper(), overlay)
    runs = cost.paper_vision_runs(cfg)
    assert {(r.dataset, r.backbone) for r, _ in runs} == {("cifar100", "resnet18")}
    assert not any(is_ablation for _, is_ablation in runs)
    assert len(runs) == 224
    assert cfg.vision.pretrain == _paper().vision.pretrain   # the protocol as is
    assert cfg.vision.grid == _paper().vision.grid
    assert cfg.config["vision"]["grid"] == _paper().config["vision"]["grid"]
