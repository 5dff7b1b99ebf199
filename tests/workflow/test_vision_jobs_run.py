"""One job per encoder (`vision_jobs: per_encoder`) or per arm (`per_arm`) against one job per
step, end to end: the smoke profile's first encoder (with `per_arm`, its first arm at two
seeds, run one after the other in one interpreter) both ways, in two workflow copies; every
file equal outside timing and provenance (slow tier: Snakemake runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from stable_json import stable

from weince.pipeline.fused import STEPS, vision_chains, vision_jobs
from weince.pipeline.profile import Profile

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RUN = "digits/smallcnn/infonce/seed7"


def _load(p: Path):
    if p.suffix == ".jsonl":
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return json.loads(p.read_text())


def _run(tmp: Path, mode: str, copy_workflow, run_snakemake, targets: list[str],
         seeds: str = "[7]") -> Path:
    wf = copy_workflow(tmp / mode)
    proc = run_snakemake(wf, *targets, "--cores", "2", "--configfile", "config/smoke.yaml",
                         "--config", f"vision_jobs={mode}", f"vision={{seeds: {seeds}}}",
                         timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return wf


@pytest.mark.parametrize("mode, seeds", [("per_encoder", [7]), ("per_arm", [7, 21])])
def test_fused_jobs_write_what_the_step_jobs_write(mode, seeds, tmp_path, copy_workflow,
                                                   run_snakemake, job_counts):
    cfg = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    cfg["vision"]["seeds"] = seeds
    prof = Profile.of({**cfg, "vision_jobs": mode})
    steps = next(s for s, tags in vision_chains(prof).items() if RUN in tags)
    assert {"pretrain", "features", "linear", "collect_scores", "pot"} <= set(steps)
    if mode == "per_arm":   # both seeds in one job
        prefix = RUN.rsplit("/", 1)[0]
        assert any(p == prefix and [x for x, _ in g] == ["7", "21"]
                   for g, ps in vision_jobs(prof).items() for p in ps)
    runs = [RUN.replace("seed7", f"seed{x}") for x in seeds]
    names = [f for s in steps for f in STEPS[s].outputs.values() if f != "features.pt"]
    targets = [f"results/smoke/vision/{r}/{f}" for r in runs for f in names]
    fused = _run(tmp_path, mode, copy_workflow, run_snakemake, targets, str(seeds))
    per_step = _run(tmp_path, "per_step", copy_workflow, run_snakemake, targets, str(seeds))
    for run in runs:
        _same_run(fused, per_step, f"results/smoke/vision/{run}", run, names, steps)


def _same_run(fused: Path, per_step: Path, run_dir: str, run: str, names, steps) -> None:
    for name in names:
        a, b = fused / run_dir / name, per_step / run_dir / name
        if name.endswith((".json", ".jsonl")):
            assert stable(_load(a)) == stable(_load(b)), name
        elif name.endswith(".npz"):
            with np.load(a) as x, np.load(b) as y:
                assert sorted(x.files) == sorted(y.files), name
                for k in x.files:
                    np.testing.assert_array_equal(x[k], y[k], err_msg=f"{name}:{k}")
        elif name.endswith(".pt"):
            x, y = (torch.load(p, map_location="cpu", weights_only=False) for p in (a, b))
            sx = x.get("state_dict", x) if isinstance(x, dict) else x
            sy = y.get("state_dict", y) if isinstance(y, dict) else y
            assert sx.keys() == sy.keys(), name
            for k in sx:
                if torch.is_tensor(sx[k]):
                    assert torch.equal(sx[k], sy[k]), f"{name}:{k}"
    # the same logs, at the per-step rules' paths, and the same files in the run folder
    # (features.pt aside: Snakemake keeps a temporary output of a job that writes a target;
    # a TensorBoard event file is named by its time and process)
    for s in steps:
        log = f"results/smoke/logs/{STEPS[s].log}/{run}.log"
        assert (fused / log).is_file() and (per_step / log).is_file(), log
    listed = [{p.name for p in (wf / run_dir).iterdir()
               if p.name != "features.pt" and not p.name.startswith("events.out.tfevents")}
              for wf in (fused, per_step)]
    assert listed[0] == listed[1]


def test_one_text_job_writes_what_the_simcse_and_sts_jobs_write(tmp_path, copy_workflow,
                                                                run_snakemake):
    """`per_arm`'s `text_run`: one SimCSE run trained and scored on STS in one interpreter
    gives the files the `simcse` and `sts` jobs give (smoke's text settings)."""
    run = "results/smoke/text/minilm/weince/seed7"
    targets = [f"{run}/sts.json", f"{run}/train.json"]
    fused = _run(tmp_path, "per_arm", copy_workflow, run_snakemake, targets)
    per_step = _run(tmp_path, "per_step", copy_workflow, run_snakemake, targets)
    for name in ("sts.json", "train.json", "train_log.jsonl"):
        a, b = (_load(wf / run / name) for wf in (fused, per_step))
        assert stable(a) == stable(b), name
    for wf in (fused, per_step):
        for log in ("simcse", "sts"):
            assert (wf / f"results/smoke/logs/{log}/minilm/weince/seed7.log").is_file()
    x, y = ({p.name for p in (wf / run / "model").iterdir()} for wf in (fused, per_step))
    assert x == y
