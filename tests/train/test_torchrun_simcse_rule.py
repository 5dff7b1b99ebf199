"""The ``simcse`` rule with ``--set-resources simcse:gpu=2`` trains through ``torchrun`` on 2
gloo processes (CPU), and gives the single-process model up to float rounding.

Both runs use the smoke profile with one more config file that turns dropout off (and sets
``tau: 1``): dropout is SimCSE's augmentation and every rank draws its own masks, so with
dropout on the two runs see different views and cannot agree bit for bit (what they share
then is the procedure, which ``tests/train/test_simcse_ddp.py`` checks, resume included).
With dropout off the two views are equal and everything else is deterministic, so the
per-step losses, the dev scores and the weights must agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from weince.models.text import minilm_path
from weince.train.trainlog import read_jsonl

BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake") if (BIN / "snakemake").exists() else "snakemake"
RUN = "results/smoke/text/minilm/infonce/seed7"
LOG = "results/smoke/logs/simcse/minilm/infonce/seed7.log"
NO_DROPOUT = "text:\n  simcse:\n    dropout: 0.0\n    tau: 1.0\n    lr: 0.0001\n    log_every: 1\n"

pytestmark = pytest.mark.slow


def _simcse(wf: Path, *extra: str) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([SNAKEMAKE, f"{RUN}/train.json", "--cores", "2", "--configfile",
                           "config/smoke.yaml", "config/no_dropout.yaml", *extra],
                          cwd=wf, capture_output=True, text=True, timeout=900, env=env)
    log = wf / LOG
    assert proc.returncode == 0, proc.stderr[-3000:] + (log.read_text()[-3000:]
                                                        if log.exists() else "")


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model" / "model.safetensors"))


def test_gpu_2_simcse_rule_runs_torchrun_and_matches_one_process(tmp_path, copy_workflow):
    one = copy_workflow(tmp_path / "one", {"no_dropout.yaml": NO_DROPOUT})
    two = copy_workflow(tmp_path / "two", {"no_dropout.yaml": NO_DROPOUT})
    _simcse(one)
    _simcse(two, "--set-resources", "simcse:gpu=2")

    log = (two / LOG).read_text()
    assert "torch.distributed.run --standalone --nproc_per_node=2 -m weince.cli simcse" in log
    assert "torch.distributed.run" not in (one / LOG).read_text()
    s1 = json.loads((one / RUN / "train.json").read_text())
    s2 = json.loads((two / RUN / "train.json").read_text())
    assert s1["world_size"] == 1 and s2["world_size"] == 2
    cfg2 = json.loads((two / RUN / "launch_config.yaml").read_text())
    assert s1["batch_size"] == s2["batch_size"] == cfg2["batch_size"] == 32  # global batch
    assert cfg2["dropout"] == 0.0 and s1["steps"] == s2["steps"] == 4

    l1, l2 = read_jsonl(one / RUN / "train_log.jsonl"), read_jsonl(two / RUN / "train_log.jsonl")
    assert [r["step"] for r in l1 if "loss" in r] == [1, 2, 3, 4]
    assert [r["step"] for r in l2] == [r["step"] for r in l1]   # rank 0 alone wrote the log
    for a, b in zip(l1, l2):
        for k in ("loss", "dev_spearman"):
            if k in a:
                assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), (k, a, b)

    w1, w2 = _weights(one / RUN), _weights(two / RUN)
    w0 = load_file(str(minilm_path() / "model.safetensors"))
    keys = [k for k in w0 if k in w1]
    assert keys and w1.keys() == w2.keys()

    def norm(d):
        return sum(float((d[k].double() ** 2).sum()) for k in keys) ** 0.5

    update = norm({k: w1[k] - w0[k] for k in keys})
    rel = norm({k: w1[k] - w2[k] for k in keys}) / update
    dloss = max(abs(a["loss"] - b["loss"]) for a, b in zip(l1, l2) if "loss" in a)
    print(f"\nsimcse rule, 2 ranks vs 1, dropout 0: losses "
          f"{[round(r['loss'], 6) for r in l1 if 'loss' in r]} (max |diff| {dloss:.1e}); "
          f"|w2 - w1| / |w1 - w0| = {rel:.2e} (|w1 - w0| = {update:.3f})")
    assert update > 0.1 and rel < 1e-3, (update, rel)
