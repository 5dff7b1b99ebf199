"""One job per encoder (`vision_jobs: per_encoder`) against one job per step, end to end: the
smoke profile's first encoder both ways, in two workflow copies; every file equal outside
timing and provenance (slow tier: two Snakemake runs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from weince.pipeline.fused import STEPS, vision_chains
from weince.pipeline.profile import Profile

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RUN = "digits/smallcnn/infonce/seed7"
# keys that hold when or where a job ran, or how long it took
VOLATILE = re.compile(r"^(provenance|step_timing|img_s.*|.*_s|wall.*|.*time.*|.*seconds.*)$")


def _stable(x):
    if isinstance(x, dict):
        return {k: _stable(v) for k, v in x.items() if not VOLATILE.match(str(k))}
    if isinstance(x, list):
        return [_stable(v) for v in x]
    return x


def _load(p: Path):
    if p.suffix == ".jsonl":
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return json.loads(p.read_text())


def _run(tmp: Path, mode: str, copy_workflow, run_snakemake, targets: list[str]) -> Path:
    wf = copy_workflow(tmp / mode)
    proc = run_snakemake(wf, *targets, "--cores", "2", "--configfile", "config/smoke.yaml",
                         "--config", f"vision_jobs={mode}", timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return wf


def test_one_job_per_encoder_writes_what_the_step_jobs_write(tmp_path, copy_workflow,
                                                             run_snakemake, job_counts):
    cfg = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    prof = Profile.of({**cfg, "vision_jobs": "per_encoder"})
    steps = next(s for s, tags in vision_chains(prof).items() if RUN in tags)
    assert {"pretrain", "features", "linear", "collect_scores", "pot"} <= set(steps)
    run_dir = f"results/smoke/vision/{RUN}"
    names = [f for s in steps for f in STEPS[s].outputs.values() if f != "features.pt"]
    targets = [f"{run_dir}/{f}" for f in names]
    fused = _run(tmp_path, "per_encoder", copy_workflow, run_snakemake, targets)
    per_step = _run(tmp_path, "per_step", copy_workflow, run_snakemake, targets)
    for name in names:
        a, b = fused / run_dir / name, per_step / run_dir / name
        if name.endswith((".json", ".jsonl")):
            assert _stable(_load(a)) == _stable(_load(b)), name
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
        log = f"results/smoke/logs/{STEPS[s].log}/{RUN}.log"
        assert (fused / log).is_file() and (per_step / log).is_file(), log
    listed = [{p.name for p in (wf / run_dir).iterdir()
               if p.name != "features.pt" and not p.name.startswith("events.out.tfevents")}
              for wf in (fused, per_step)]
    assert listed[0] == listed[1]
