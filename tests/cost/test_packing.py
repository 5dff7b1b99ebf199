"""Several runs per GPU on one machine (weince.cost.packing): the default `jobs_per_gpu`
from the cost model's memory and utilisation estimate, the config's numbers over it, and
the planner's wall time of a node (`weince plan --node`)."""

from __future__ import annotations

import json

import pytest

from weince.cli import main as cli
from weince.cost import estimate as cost
from weince.cost import plan
from weince.cost.forecast import measured_entries, timed_runs
from weince.cost.packing import (job_jobs_per_gpu, node_wall, packing, parse_node,
                                 setting_of_job)
from weince.pipeline import layout


@pytest.fixture(scope="module")
def paper():
    return plan.load_profile(["config/paper.yaml"])


def test_a_run_that_fills_the_gpu_gets_it_alone_and_small_runs_share(paper):
    big = packing(paper, "tinyimagenet/resnet50", "h100-sxm")
    assert big.jobs_per_gpu == 1 and big.source == "estimate"
    small = packing(paper, "cifar100/resnet18", "h100-sxm")
    assert 1 < small.jobs_per_gpu <= small.cap
    assert small.jobs_per_gpu == min(small.cap, small.memory_fit, small.utilisation_fit)
    assert small.memory_gb < big.memory_gb and small.utilisation < big.utilisation
    # less memory on the card, fewer runs fit
    assert packing(paper, "cifar100/resnet18", "a100-40gb").memory_fit < small.memory_fit
    assert "per GPU (estimate" in small.why()


def test_the_config_s_number_wins_per_setting_and_the_timing_job_is_alone(paper):
    prof = cost.with_overlay(paper, {"node": {"jobs_per_gpu": {"default": 2,
                                                               "cifar10/resnet18": 3}}})
    assert packing(prof, "cifar10/resnet18", "h100-sxm").jobs_per_gpu == 3
    assert packing(prof, "stl10/resnet50", "h100-sxm").source == "config"
    assert job_jobs_per_gpu(prof, "pretrain", {"dataset": "stl10", "backbone": "resnet50"}) == 2
    assert job_jobs_per_gpu(prof, "timing", {"profile": "paper"}) == 1
    assert job_jobs_per_gpu(paper, "features", {"dataset": "tinyimagenet",
                                                "backbone": "resnet50"}) == 1
    assert setting_of_job({"prefix": "cifar10/resnet18/infonce"}) == "cifar10/resnet18"
    assert setting_of_job({"model": "bert-base-uncased"}) == "text/bert-base-uncased"


def test_node_names_a_count_and_a_gpu_of_the_cost_model():
    assert parse_node("8xh100-sxm") == (8, "h100-sxm")
    assert parse_node("2x A100-80GB") == (2, "a100-80gb")
    with pytest.raises(ValueError, match="e.g. 8xh100-sxm"):
        parse_node("h100-sxm")
    with pytest.raises(ValueError):
        parse_node("8xnot-a-gpu")


def test_wall_time_of_a_node_alone_and_packed(paper):
    est = cost.estimate(paper, "h100-sxm")
    runs = cost.claim_runs(est, paper, "C3")
    packs = {"cifar100/resnet18": packing(paper, "cifar100/resnet18", "h100-sxm")}
    lo1, hi1 = node_wall(runs, packs, 1, packed=False)
    assert lo1 == pytest.approx(est.total(runs)[0]) and hi1 == pytest.approx(est.total(runs)[1])
    lo8, hi8 = node_wall(runs, packs, 8, packed=False)
    assert lo1 / 8 == pytest.approx(lo8)       # 224 runs of one setting: 28 per GPU
    plo, phi = node_wall(runs, packs, 8, packed=True)
    per = packs["cifar100/resnet18"]
    assert plo == pytest.approx(lo8 / per.jobs_per_gpu * per.slowdown, rel=0.05)


def test_weince_plan_node_prints_wall_time_beside_gpu_hours(capsys):
    assert cli(["plan", "--node", "8xh100-sxm"]) == 0
    text = capsys.readouterr().out
    assert "On one machine with 8 x NVIDIA H100 SXM5 80GB (--node 8xh100-sxm)" in text
    assert "wall time at one run per GPU:" in text
    assert "wall time at the configured runs per GPU:" in text and "GPU-hours" in text
    paper = plan.load_profile(["config/paper.yaml"])
    lines = plan.node_plan(paper, "C3", "4xa100-80gb")
    assert lines[0].startswith("On one machine with 4 x NVIDIA A100 SXM4 80GB")
    assert "224 training runs" in lines[0]


def test_a_shared_run_s_step_time_is_marked_an_upper_bound(tmp_path):
    prof = cost.with_overlay(plan.load_profile(["config/smoke.yaml"]),
                             {"results": str(tmp_path)})
    runs = list(layout.vision_runs(prof))
    for i, r in enumerate(runs[:2]):
        d = r.dir(prof.results, prof.name)
        d.mkdir(parents=True)
        timing = {"step_s_median": 0.1, "device": "cuda:0", "device_name": "H100 80GB HBM3"}
        if i == 1:
            timing["gpu_slot"] = {"slot": "gpu0/slot1", "jobs_per_gpu": 2, "shared": True}
        (d / "train.json").write_text(json.dumps({"batch_size": 128, "loss": "infonce",
                                                  "step_timing": timing}))
    vis, _ = timed_runs(prof)
    entries = {e["arm"]: e["source"] for e in measured_entries(vis)}
    assert "shared a GPU (up to 2 jobs on it): an upper bound" in entries[runs[1].arm]
    assert "shared" not in entries[runs[0].arm]


def test_the_wall_times_docs_cluster_states_are_the_planners():
    page = " ".join((plan.REPO / "docs" / "cluster.md").read_text().split())
    for configs, cid, what in (
            (["config/paper.yaml", "config/paper_cifar100_r18.yaml"], "C3", "224 runs"),
            (["config/paper.yaml"], None, "3,436 runs")):
        lines = plan.node_plan(plan.load_profile(configs), cid, "8xh100-sxm")
        hours = lines[0].rsplit("GPU-hours ", 1)[1].rstrip(":")
        alone = lines[1].split(": ", 1)[1].removesuffix(" h")
        packed = lines[2].split(": ", 1)[1].split(" h ", 1)[0]
        stated = f"{what}, {hours} GPU-hours, {alone} h"
        assert stated in page, stated
        assert f"{packed} h" in page.split(stated, 1)[1][:80], packed
