"""`vision_jobs: per_encoder`: which steps each encoder's one job runs (weince.pipeline.fused),
and that every other shipped profile keeps one job per step."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from weince.pipeline.fused import (STEPS, fused_text, run_wildcards, step_params,
                                   vision_chains, vision_jobs)
from weince.pipeline.profile import Profile

REPO = Path(__file__).resolve().parents[2]


def _profile(name: str, **overrides) -> Profile:
    cfg = yaml.safe_load((REPO / "config" / name).read_text())
    cfg.update(overrides)
    return Profile.of(cfg)


@pytest.mark.parametrize("name", ["smoke.yaml", "paper.yaml"])
def test_other_profiles_keep_one_job_per_step(name):
    """The paper and smoke profiles define no encoder job: their DAGs are the per-step
    rules' (one job per run and step, their own rerun triggers and targets). The paper's
    overlays (one claim, the rehearsal) leave the key to it."""
    cfg = yaml.safe_load((REPO / "config" / name).read_text())
    assert cfg["vision_jobs"] == "per_step"
    assert vision_chains(Profile.of(cfg)) == {}
    for overlay in ("rehearsal.yaml", "paper_cifar100_r18.yaml"):
        assert "vision_jobs" not in yaml.safe_load((REPO / "config" / overlay).read_text())


def test_schema_default_is_one_job_per_step():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    key = schema["properties"]["vision_jobs"]
    assert key["default"] == "per_step" and key["enum"] == ["per_step", "per_encoder", "per_arm"]


def test_default_runs_each_encoder_once_with_the_steps_it_needs():
    prof = _profile("config.yaml")
    assert prof.config["vision_jobs"] == "per_arm"
    chains = vision_chains(prof)
    tags = [t for ts in chains.values() for t in ts]
    assert len(tags) == len(set(tags))                   # one job per encoder
    by_tag = {t: steps for steps, ts in chains.items() for t in ts}
    v = prof.vision
    for arm in v.arms:
        for seed in v.seeds:
            assert f"digits/smallcnn/{arm}/seed{seed}" in by_tag
    # the grid arm's run at the grid seed is adopted (another rule writes its encoder
    # and linear probe): its job starts at the features
    adopted = by_tag["digits/smallcnn/weince/seed7"]
    assert "pretrain" not in adopted and "linear" not in adopted and "features" in adopted
    # the tail fits run only for the EVT arms, the head probe only for the features
    # ablation's arms, the norms analysis only for its units
    for tag, steps in by_tag.items():
        arm = run_wildcards(tag)["arm"]
        assert ("pot" in steps) == ("link" in steps) == (arm in v.evt.arms), tag
        assert ("collect_scores" in steps) == ("pot" in steps), tag
        assert list(steps) == [s for s in STEPS if s in steps]   # each input before it
    # a grid point is probed alone: the probe extracts its own features in memory, so no
    # features.pt is written for it
    assert by_tag["digits/smallcnn/weince@m0/seed7"] == ("pretrain", "linear")


def test_per_step_setting_turns_the_default_back_into_one_job_per_step():
    assert vision_chains(_profile("config.yaml", vision_jobs="per_step")) == {}
    assert vision_jobs(_profile("config.yaml", vision_jobs="per_step")) == {}


def _runs(jobs):
    """{(prefix, seed): steps} of every job, and the jobs as lists of run tags."""
    runs, tags = {}, []
    for group, prefixes in jobs.items():
        for prefix in prefixes:
            tags.append([f"{prefix}/seed{seed}" for seed, _ in group])
            for seed, steps in group:
                assert (prefix, seed) not in runs, (prefix, seed)   # one job per run
                runs[prefix, seed] = steps
    return runs, tags


def test_per_arm_runs_each_arms_seeds_in_one_job_with_each_seeds_steps():
    """`per_arm` (the default's) and `per_encoder` run the same runs with the same steps;
    `per_arm` puts every seed of an arm in one job, in seed order, including a grid arm's
    adopted seed, which starts at its features."""
    arm, enc = (_runs(vision_jobs(_profile("config.yaml", vision_jobs=m)))
                for m in ("per_arm", "per_encoder"))
    assert arm[0] == enc[0]
    chains = vision_chains(_profile("config.yaml"))
    assert arm[0] == {tuple(t.rsplit("/seed", 1)): steps
                      for steps, ts in chains.items() for t in ts}
    assert all(len(job) == 1 for job in enc[1])
    prof = _profile("config.yaml")
    seeds = [f"seed{x}" for x in prof.vision.seeds]
    for a in prof.vision.arms:
        assert [f"digits/smallcnn/{a}/{x}" for x in seeds] in arm[1], a
    assert ["digits/smallcnn/weince@m0/seed7"] in arm[1]
    assert len(arm[1]) == len(prof.vision.arms) + 2 + 2   # + 2 confound arms, 2 grid points
    assert "pretrain" not in arm[0]["digits/smallcnn/weince", "7"]
    assert "pretrain" in arm[0]["digits/smallcnn/weince", "21"]


def test_step_params_are_the_per_step_rules_params():
    prof = _profile("config.yaml")
    wc = run_wildcards("digits/smallcnn/weince_recipe/seed21")
    assert step_params(prof, "pot", wc) == {"kwargs": prof.vision.evt.pot_given}
    assert step_params(prof, "knn", wc)["kwargs"]["k"] == prof.vision.knn.k
    assert step_params(prof, "pretrain", wc)["cfg"]["seed"] == 21
    with pytest.raises(ValueError, match="not a step of an encoder's job: 'sts'"):
        step_params(prof, "sts", wc)
    with pytest.raises(ValueError, match="not a vision run tag"):
        run_wildcards("digits/smallcnn/infonce")


def test_only_per_arm_fuses_the_text_runs():
    assert fused_text(_profile("config.yaml"))
    for mode in ("per_step", "per_encoder"):
        assert not fused_text(_profile("config.yaml", vision_jobs=mode))
    assert not fused_text(_profile("config.yaml", text={"enabled": False}))
