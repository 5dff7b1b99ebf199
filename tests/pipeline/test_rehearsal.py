"""The rehearsal overlay (config/rehearsal.yaml): its config preparation, the forecast it
writes from measured step times, and a report that gives no verdict but C9's and C11's."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from weince.cost.estimate import job_runtime, vision_step_flops
from weince.cost.forecast import (build_forecast, forecast_markdown, resources_overlay,
                                  write_forecast)
from weince.eval.special_case import special_case_check
from weince.evt import simulate_noise_floor, write_noise_floor
from weince.pipeline import layout
from weince.pipeline.config_check import check_config
from weince.pipeline.profile import Profile
from weince.pipeline.rehearsal import forecast_outputs
from weince.pipeline.stages import model_location, simcse_config
from weince.pipeline.targets import all_targets
from weince.report.build import build_report, evaluate, scale_line
from weince.report.glance import scale_items
from weince.report.rehearsal import text_identity
from weince.utils import write_json
from weince.utils.claim_rows import Setting
from weince.utils.config import deep_merge
from weince.utils.verdict_words import REHEARSAL

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _yaml(name):
    return yaml.safe_load((ROOT / "config" / name).read_text())


def rehearsal_cfg(tmp_path, gpu=False, **over):
    cfg = deep_merge(deep_merge(_yaml("config.yaml"), _yaml("paper.yaml")), _yaml("rehearsal.yaml"))
    cfg["rehearsal"]["gpu"] = gpu
    cfg["rehearsal"]["paper_config"] = str(ROOT / "config" / "paper.yaml")
    cfg["results"], cfg["reports"] = str(tmp_path / "results"), str(tmp_path / "reports")
    cfg["claims"] = str(ROOT / "config" / "claims.yaml")
    cfg["data_root"] = str(tmp_path / "data")
    deep_merge(cfg, over)
    return dict(Profile.of(cfg).config)   # resolved: placeholders, CPU sizes


def test_overlay_passes_the_strict_schema_and_keeps_the_protocol():
    paper, over = _yaml("paper.yaml"), _yaml("rehearsal.yaml")
    merged = deep_merge(copy.deepcopy(paper), over)
    check_config(merged, SCHEMA, ["config/paper.yaml", "config/rehearsal.yaml"])
    assert merged["profile"] == "rehearsal"
    # only sizes change: the protocol keys of the paper profile are the same
    for key in ("lr", "weight_decay", "tau", "proj_dim", "amp", "tf32", "forward",
                "conv1_init", "batch_size"):
        assert merged["vision"]["pretrain"][key] == paper["vision"]["pretrain"][key], key
    assert merged["vision"]["datasets"] == paper["vision"]["datasets"]
    assert merged["vision"]["backbones"] == paper["vision"]["backbones"]
    assert merged["vision"]["arms"] == paper["vision"]["arms"]
    assert merged["text"]["models"] == paper["text"]["models"] == ["bert-base-uncased"]
    g = merged["vision"]["grid"]
    assert g["seeds"] == merged["vision"]["seeds"] and len(g["seeds"]) >= 2
    assert len(g["margin"]) * len(g["kappa_rho"]) * len(g["kappa_aic"]) >= 2


def test_data_root_placeholders_follow_the_config_key(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    root = cfg["data_root"]
    assert cfg["text"]["simcse"]["train_data"] == f"{root}/wiki1m_for_simcse.txt"
    assert cfg["text"]["sts"]["data"] == f"{root}/stsbenchmark"


def test_without_a_gpu_the_cpu_sizes_apply_and_no_job_asks_for_a_gpu(tmp_path):
    cfg = rehearsal_cfg(tmp_path, gpu=False)
    assert cfg["rehearsal"]["gpu_used"] is False
    assert cfg["vision"]["pretrain"]["batch_size"] == _yaml("rehearsal.yaml")["rehearsal"][
        "cpu"]["vision"]["pretrain"]["batch_size"]
    assert all(r.get("gpu", 0) == 0 for r in cfg["resources"].values())
    with_gpu = rehearsal_cfg(tmp_path, gpu=True)
    assert with_gpu["vision"]["pretrain"]["batch_size"] == 256
    assert with_gpu["resources"]["pretrain"]["gpu"] == 1


def test_pairs_narrow_the_grid_and_a_wrong_pair_is_named(tmp_path):
    cfg = rehearsal_cfg(tmp_path, vision={"pairs": [["stl10", "vit_s"]]})
    assert Profile.of(cfg).vision.pairs == (("stl10", "vit_s"),)
    cfg["vision"]["pairs"] = [["stl10", "smallcnn"]]
    with pytest.raises(ValueError, match="not among vision.datasets x vision.backbones"):
        Profile.of(cfg)


def test_model_location_prefers_model_paths_then_a_local_copy(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    assert model_location(Profile.of(cfg), "bert-base-uncased", with_source=True) == (
        "bert-base-uncased", "name")
    local = Path(cfg["data_root"]) / "models" / "bert-base-uncased"
    local.mkdir(parents=True)
    assert model_location(Profile.of(cfg), "bert-base-uncased", with_source=True) == (str(local),
                                                                           "local copy")
    cfg["text"]["model_paths"] = {"bert-base-uncased": "minilm"}
    s = simcse_config(Profile.of(cfg), "bert-base-uncased", "weince", 7)
    assert (s.model, s.model_name, s.model_source) == ("minilm", "bert-base-uncased",
                                                       "model_paths")


def _timing(step_s, batch, device="cpu", name=None):
    return {"step_s_median": step_s, "step_s_mean": step_s, "n_timed": 3, "warmup": 1,
            "steps_seen": 4, "peak_mem_mb": 1234.0, "peak_mem_kind": "cpu_max_rss",
            "device": device, "device_name": name or device}


def _write_runs(cfg, step_s=2.0):
    root = cfg["results"]
    batch = cfg["vision"]["pretrain"]["batch_size"]
    prof = Profile.of(cfg)
    for r in [*layout.vision_runs(prof), *layout.vision_runs(prof, grid=True)]:
        if r.dataset == "cifar100" and r.backbone == "resnet18" and r.arm.startswith("weince@"):
            d = r.dir(root, prof.name)
            d.mkdir(parents=True, exist_ok=True)
            (d / "train.json").write_text(json.dumps(
                {"loss": "weince", "batch_size": batch, "step_timing": _timing(step_s, batch)}))
    for r in layout.text_runs(prof):
        d = r.dir(root, prof.name)
        d.mkdir(parents=True, exist_ok=True)
        (d / "train.json").write_text(json.dumps(
            {"loss": r.arm, "batch_size": cfg["text"]["simcse"]["batch_size"],
             "step_timing": _timing(0.5, cfg["text"]["simcse"]["batch_size"])}))


def test_forecast_multiplies_measured_steps_by_the_paper_sizes(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    _write_runs(cfg, step_s=2.0)
    fc = build_forecast(Profile.of(cfg))
    assert fc.unit == "CPU-hours"
    paper = _yaml("paper.yaml")
    steps = paper["vision"]["pretrain"]["epochs"] * (50_000 // 256)
    per_step = 2.0 * 256 / cfg["vision"]["pretrain"]["batch_size"]   # scaled to the batch
    weince_grid = [r for r in fc.runs if r.setting == "cifar100/resnet18"
                   and r.arm.startswith("weince@")]
    assert len(weince_grid) == 27 * 4                 # 27 points x 4 encoder seeds
    assert weince_grid[0].steps == steps
    assert weince_grid[0].hours == pytest.approx(per_step * steps / 3600)
    c3 = next(c for c in fc.claims if c["id"] == "C3")
    c3_runs = [r for r in fc.runs if r.setting == "cifar100/resnet18" and not r.ablation]
    assert c3["hours"] == pytest.approx(sum(r.hours for r in c3_runs))
    c7 = next(c for c in fc.claims if c["id"] == "C7")
    text_steps = 1_000_000 // 64
    assert c7["hours"] == pytest.approx(12 * 0.5 * 64 / cfg["text"]["simcse"]["batch_size"]
                                        * text_steps / 3600)
    other = next(c for c in fc.claims if c["id"] == "C5")
    assert other["unmeasured"] and "stl10/vit_s" in other["unmeasured"]
    md = forecast_markdown(fc)
    assert "CPU-hours" in md and "| C3 |" in md and "scaled linearly" in md
    # the page's figures for the paper run are GPU-hours from counted FLOPs; the CPU-hours
    # are labelled as this machine's, not a forecast
    assert "GPU-hours" in md.split("## This rehearsal")[0]
    assert "not a forecast of the paper run" in md
    assert fc.measured_entries() == []                 # a CPU's step times reach no estimate
    md_path, res_path = write_forecast(fc, tmp_path / "reports")
    assert md_path.read_text() == md


def test_resources_overlay_has_the_paper_shape_and_passes_the_schema(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    _write_runs(cfg, step_s=2.0)
    fc = build_forecast(Profile.of(cfg))
    _, res_path = write_forecast(fc, tmp_path / "reports")
    over = yaml.safe_load(res_path.read_text())
    assert set(over) == {"resources"}
    paper = _yaml("paper.yaml")
    assert set(paper["resources"]) <= set(over["resources"])
    for rule, spec in over["resources"].items():
        assert set(spec) <= {"gpu", "mem_mb", "runtime", "threads"}, rule
        assert all(isinstance(v, int) for v in spec.values())
    # the paper's GPUs, even though this rehearsal ran on the CPU; and no CPU time becomes a
    # GPU job's runtime: each setting's comes from the paper's cost block
    assert over["resources"]["pretrain"]["gpu"] == paper["resources"]["pretrain"]["gpu"]
    assert over["resources"]["pretrain"]["runtime"] == paper["resources"]["pretrain"]["runtime"]
    merged = deep_merge(copy.deepcopy(paper), over)
    check_config(merged, SCHEMA, ["config/paper.yaml", str(res_path)])
    assert resources_overlay(fc) == over


def test_forecast_is_a_target_of_the_rehearsal_only(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    outs = forecast_outputs(Profile.of(cfg))
    assert {p.name for p in outs.values()} == {"forecast.md", "resources.yaml"}
    assert str(outs["md"]) in all_targets(Profile.of(cfg))
    assert forecast_outputs(Profile.of(_yaml("paper.yaml"))) == {}


def test_a_rehearsal_report_gives_no_verdict_but_c9s_and_c11s(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    checks = Path(cfg["results"]) / cfg["profile"] / "checks"
    checks.mkdir(parents=True)
    write_json(checks / "special_case.json", special_case_check(), cfg={})
    # the real C11 computation, at fewer replicates (its own setting: no training involved)
    write_noise_floor(simulate_noise_floor(replicates=2000, seed=1),
                      Path(cfg["results"]) / cfg["profile"] / "synthetic" / "noise_floor.json")
    results = evaluate(Profile.of(cfg))
    verdicts = {r.claim["id"]: r.verdict for r in results}
    assert verdicts.pop("C9") == "reproduced"
    assert verdicts.pop("C11") in ("reproduced", "not reproduced")   # computed, not withheld
    assert set(verdicts.values()) == {REHEARSAL}
    for r in results:
        if r.claim["id"] not in ("C9", "C11"):
            assert all(v == REHEARSAL for row in r.rows for v in row.verdicts.values())
    assert scale_line(Profile.of(cfg), "vision").startswith("REHEARSAL")
    assert not scale_line(Profile.of(cfg), "synthetic").startswith("REHEARSAL")


def test_a_text_row_is_a_scale_model_unless_the_named_weights_ran(tmp_path):
    files = {"hub": tmp_path / "hub.json", "syn": tmp_path / "syn.json",
             "old": tmp_path / "old.json"}
    files["hub"].write_text(json.dumps({"model_identity": {
        "named_model": True, "synthetic": False, "location": "bert-base-uncased"}}))
    files["syn"].write_text(json.dumps({"model_identity": {
        "named_model": False, "synthetic": True, "location": "/d/models/bert-base-uncased"}}))
    files["old"].write_text(json.dumps({"loss": "infonce"}))   # written before identities
    s = Setting("text", model="bert-base-uncased", corpus="wiki1m")
    for which, named in (("hub", True), ("syn", False), ("old", False)):
        out, fetch = text_identity([s], ["infonce"], lambda st, a, n, w=which: [files[w]])
        assert (out[0].model == "bert-base-uncased") is named, which
        assert fetch(out[0], "infonce", "train.json") == [files[which]]   # files still found
    out, _ = text_identity([s], ["infonce"], lambda st, a, n: [files["hub"]],
                           {"bert-base-uncased": "minilm"})
    assert "stand-in: text.model_paths -> minilm" in out[0].model


def test_benchmark_folders_that_are_not_rules_stay_out_of_the_overlay(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    _write_runs(cfg, step_s=2.0)
    bench = Path(cfg["results"]) / cfg["profile"] / "benchmarks"
    for sub, secs in (("norms/cifar100", 30.0), ("linear/cifar100", 7200.0)):
        (bench / sub).mkdir(parents=True)
        (bench / sub / "a.tsv").write_text(f"s\tmax_rss\n{secs}\t40000\n")
    over = resources_overlay(build_forecast(Profile.of(cfg)))["resources"]
    assert "norms" not in over
    assert over["linear"]["runtime"] == 7200 / 60 * 2     # measured x safety: above the paper's
    assert over["linear"]["mem_mb"] == 80000


def test_the_scale_line_names_only_the_pairs_that_ran(tmp_path):
    cfg = rehearsal_cfg(tmp_path, vision={"pairs": [["cifar100", "resnet18"]]})
    line = scale_line(Profile.of(cfg), "vision")
    assert "cifar100 x resnet18" in line and "imagenet32" not in line
    # the summary's
    vision = next(i for i in scale_items(Profile.of(cfg)) if i.startswith("vision:"))
    assert "cifar100 x resnet18" in vision and "imagenet32" not in vision


def test_the_rehearsal_summary_opens_with_the_rehearsal_note(tmp_path):
    cfg = rehearsal_cfg(tmp_path)
    (Path(cfg["data_root"])).mkdir(parents=True)
    (Path(cfg["data_root"]) / "WEINCE_SYNTHETIC.json").write_text('{"synthetic": true}')
    checks = Path(cfg["results"]) / cfg["profile"] / "checks"
    checks.mkdir(parents=True)
    write_json(checks / "special_case.json", special_case_check(), cfg={})
    build_report(Profile.of(cfg), with_figures=False)
    summary = (Path(cfg["reports"]) / "rehearsal" / "summary.md").read_text()
    assert "REHEARSAL" in summary and "SYNTHETIC" in summary


def test_without_a_gpu_the_covering_pairs_run_and_a_set_pairs_wins(tmp_path):
    paper = _yaml("paper.yaml")["vision"]
    cpu = rehearsal_cfg(tmp_path, gpu=False)
    pairs = Profile.of(cpu).vision.pairs
    assert len(pairs) == 5 and cpu["rehearsal"]["cpu_pairs_used"] is True
    assert {d for d, _ in pairs} == set(paper["datasets"])      # every loader ...
    assert {b for _, b in pairs} == set(paper["backbones"])     # ... and every backbone
    assert len(Profile.of(rehearsal_cfg(tmp_path, gpu=True)).vision.pairs) == 15
    mine = rehearsal_cfg(tmp_path, gpu=False, vision={"pairs": [["stl10", "vit_s"]]})
    assert Profile.of(mine).vision.pairs == (("stl10", "vit_s"),)
    assert mine["rehearsal"]["cpu_pairs_used"] is False


def test_forecast_fills_pairs_not_rehearsed_from_the_same_backbone(tmp_path):
    """cifar100/resnet18 measured: cifar10/resnet18 (32 px as well) takes its step time as
    it is, stl10 (96 px) and tinyimagenet (64 px) scaled by the ratio of counted FLOPs (not
    pixels: STL-10's 7x7 stem makes its step cheaper) and marked; ViT-S, never measured,
    stays unmeasured."""
    cfg = rehearsal_cfg(tmp_path)
    _write_runs(cfg, step_s=2.0)
    fc = build_forecast(Profile.of(cfg))

    def step(setting):
        (r,) = {r.step_s: r for r in fc.runs if r.setting == setting and r.loss == "weince"
                and not r.ablation}.values()
        return r

    base = step("cifar100/resnet18")
    assert not base.filled
    same, stl, tiny = step("cifar10/resnet18"), step("stl10/resnet18"), \
        step("tinyimagenet/resnet18")
    assert same.filled and same.step_s == base.step_s and "same 32px" in same.source
    flops = {d: vision_step_flops("resnet18", d, 256) for d in
             ("cifar100", "stl10", "tinyimagenet")}
    assert stl.step_s == pytest.approx(flops["stl10"] / flops["cifar100"] * base.step_s)
    assert stl.step_s < base.step_s < tiny.step_s     # 96 px with the 7x7 stem is cheaper
    assert stl.source.startswith("estimate") and "counted FLOPs" in stl.source
    assert tiny.step_s == pytest.approx(flops["tinyimagenet"] / flops["cifar100"] * base.step_s)
    assert all(r.step_s is None for r in fc.runs if r.setting.endswith("/vit_s"))
    c4 = next(c for c in fc.claims if c["id"] == "C4")
    md = forecast_markdown(fc)
    assert "from another pair" in md and "were not rehearsed" in md
    assert c4["filled"] or c4["unmeasured"]


def test_a_gpu_rehearsal_replaces_the_estimate_of_the_settings_it_measured(tmp_path):
    """Step times measured on a GPU become that setting's figure on the page (`measured`)
    and its `cost.measured` entries in resources.yaml (filed under the devices.yaml key of
    the GPU that ran them, one per arm, at the batch it ran), which the jobs' runtime then
    follows; the other settings keep their counted-FLOPs estimate."""
    cfg = rehearsal_cfg(tmp_path, gpu=True)
    root, prof = cfg["results"], cfg["profile"]
    for r in layout.vision_runs(Profile.of(cfg), grid=True):
        if (r.dataset, r.backbone) == ("cifar100", "resnet18"):
            d = r.dir(root, prof)
            d.mkdir(parents=True, exist_ok=True)
            (d / "train.json").write_text(json.dumps(
                {"loss": "weince", "batch_size": 256,
                 "step_timing": _timing(0.02, 256, device="cuda",
                                        name="NVIDIA H100 80GB HBM3")}))
    fc = build_forecast(Profile.of(cfg))
    assert fc.unit == "GPU-hours"
    entries = fc.measured_entries()
    assert {(e["gpu"], e["setting"], e["precision"], e["batch"], e["step_s"])
            for e in entries} == {("h100-sxm", "cifar100/resnet18", "tf32", 256, 0.02)}
    assert len({e["arm"] for e in entries}) == len(entries) > 1
    assert all("NVIDIA H100 80GB HBM3" in e["source"] for e in entries)
    over = resources_overlay(fc)
    assert over["cost"] == {"measured": entries}
    md = forecast_markdown(fc)
    row = next(line for line in md.splitlines() if line.startswith("| cifar100/resnet18 |"))
    assert "(measured)" in row
    other = next(line for line in md.splitlines() if line.startswith("| cifar10/resnet18 |"))
    assert "measured" not in other
    paper = deep_merge(_yaml("paper.yaml"), over)
    steps = 100 * (50_000 // 256)
    assert job_runtime(Profile.of(paper), "cifar100/resnet18")["runtime"] == math.ceil(
        0.02 * steps / 60 * paper["cost"]["safety_factor"] + paper["cost"]["overhead_min"])
    check_config(paper, SCHEMA, ["config/paper.yaml", "resources.yaml"])


def test_a_gpu_devices_yaml_does_not_list_measures_no_estimate_and_says_so(tmp_path):
    """An A100 PCIe (its clocks are not the SXM part's): its step times stay on the page
    as this rehearsal's, no `cost.measured` entry is filed under another GPU's name."""
    cfg = rehearsal_cfg(tmp_path, gpu=True)
    r = next(r for r in layout.vision_runs(Profile.of(cfg)) if (r.dataset, r.backbone) ==
             ("cifar100", "resnet18"))
    d = r.dir(cfg["results"], cfg["profile"])
    d.mkdir(parents=True, exist_ok=True)
    (d / "train.json").write_text(json.dumps(
        {"loss": "infonce", "batch_size": 256,
         "step_timing": _timing(0.02, 256, device="cuda", name="NVIDIA A100 80GB PCIe")}))
    fc = build_forecast(Profile.of(cfg))
    assert fc.unit == "GPU-hours" and fc.measured_entries() == []
    assert "cost" not in resources_overlay(fc)
    assert "NVIDIA A100 80GB PCIe" in forecast_markdown(fc) and "devices.yaml" in " ".join(fc.notes)
