"""Evaluation jobs ask SLURM for the time their counted work needs (weince.cost.evaljobs)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from weince.cost import evaljobs
from weince.cost.counts import vision_counts
from weince.cost.estimate import cost_settings, with_overlay
from weince.cost.throughput import rate
from weince.pipeline.profile import Profile
from weince.utils.config import deep_merge

REPO = Path(__file__).resolve().parents[2]


def _paper() -> Profile:
    """config/paper.yaml over the embedded default, resolved."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return Profile.of(deep_merge(cfg, yaml.safe_load((REPO / "config" / "paper.yaml")
                                                     .read_text())))


def _wc(dataset="cifar100", backbone="resnet18", arm="weince", seed=7):
    return {"dataset": dataset, "backbone": backbone, "arm": arm, "seed": str(seed)}


def test_features_read_and_embed_both_labelled_splits_on_the_slowest_gpu():
    cfg = with_overlay(_paper(), {"cost": {"gpu": ["h100-sxm", "a100-80gb"]}})
    fwd = vision_counts("resnet50", 32, 3, "proj64")["forward"]
    slow = rate("a100-80gb", "cnn", "tf32")[0]
    n = 1_281_167 + 50_000
    secs, what = evaljobs.work_seconds(cfg, "features", _wc("imagenet32", "resnet50"))
    assert secs == pytest.approx(n * fwd / slow + n / 2000)
    assert "1,331,167 images" in what
    req = evaljobs.eval_job_runtime(cfg, "features", _wc("imagenet32", "resnet50"))
    assert req["runtime"] == math.ceil(secs / 60 * 2.0 + 3)


def test_a_probe_s_seeds_share_its_steps():
    """weince.eval.linear trains the probe seeds of a run together (one batched step), so
    InfoNCE's five seeds cost the steps of one and five times the (small) arithmetic."""
    cfg = _paper()
    one, what1 = evaljobs.work_seconds(cfg, "linear", _wc(arm="weince@m2_r10_a1"))
    five, what5 = evaljobs.work_seconds(cfg, "linear", _wc(arm="infonce"))
    steps = 100 * math.ceil(40_000 / 256)                  # 80% of 50,000 images
    assert f"{steps:,} steps" in what1 and f"{steps:,} steps" in what5
    assert "5 probe seed(s)" in what5
    # each probe extracts its features first: one forward pass over the labelled splits
    extract, _ = evaljobs.work_seconds(cfg, "features", _wc())
    assert extract > 0 and "60,000 images" in what1
    one, five = one - extract, five - extract
    assert one > steps * 0.002 and five - steps * 0.002 == pytest.approx(
        5 * (one - steps * 0.002))


def test_evaluation_jobs_ask_for_minutes_and_imagenet_probes_for_their_epochs():
    """CIFAR and STL-10 evaluations need minutes; ImageNet-32's 1.28 M features make its
    probe the longest job (100 epochs x 4,004 steps), still far below the cap."""
    cfg = _paper()
    for rule in evaljobs.EVAL_RULES:
        for wc in (_wc(), _wc("cifar10", "vit_s", "infonce"), _wc("stl10", "resnet50")):
            wc = {**wc, "model": "bert-base-uncased"}
            req = evaljobs.eval_job_runtime(cfg, rule, wc)
            assert 3 <= req["runtime"] < 30, (rule, wc, req)
    small = evaljobs.work_seconds(cfg, "features", _wc())[0]
    assert evaljobs.work_seconds(cfg, "features", _wc("imagenet32"))[0] > 20 * small
    big = evaljobs.eval_job_runtime(cfg, "linear", _wc("imagenet32", "vit_s", "infonce"))
    assert 30 < big["runtime"] < cost_settings(cfg).max_runtime and "400,400 steps" in big["work"]


def test_the_cap_and_the_safety_factor_apply_as_to_training():
    cfg = with_overlay(_paper(), {"cost": {"max_runtime": 5, "safety_factor": 3.0,
                                           "eval": {"host_images_per_s": 10}}})
    assert evaljobs.eval_job_runtime(cfg, "features", _wc("imagenet32"))["runtime"] == 5
    with pytest.raises(ValueError, match="no work model for rule 'report'"):
        evaljobs.eval_job_runtime(cfg, "report", {})
