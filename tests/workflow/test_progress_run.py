"""`weince progress` on a real smoke run (slow tier): killed part way with `kill -9`, its
counts match the files and the killed run shows as stopped; then a job made to fail (an
option its loss does not take) is named with its reason and log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from progress_page import all_counts, failed_entry

from weince.cost.progress import incomplete_marks


pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _progress(wf: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "weince.cli", "progress", "--configfile",
                          "config/smoke.yaml", "--no-sacct"], cwd=wf, capture_output=True,
                         text=True, timeout=300, env=_env())
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _kill_mid_pretraining(wf: Path, log: Path) -> Path | None:
    runs = wf / "results/smoke/vision"
    with open(log, "w") as fh:
        proc = subprocess.Popen(["snakemake", "--cores", "2", "--configfile",
                                 "config/smoke.yaml"], cwd=wf, stdout=fh,
                                stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
        killed = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            done = list(runs.rglob("train.json")) if runs.exists() else []
            mid = [c.parent for c in runs.rglob("checkpoint.pt")
                   if not (c.parent / "encoder.pt").exists()] if runs.exists() else []
            if mid and done:
                killed = mid[0]
                break
            time.sleep(0.05)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    return killed


def test_progress_of_a_killed_smoke_run_and_of_a_failed_job(tmp_path, copy_workflow):
    wf = copy_workflow(tmp_path / "wf")
    smoke = yaml.safe_load((wf / "config/smoke.yaml").read_text())
    smoke["vision"]["pretrain"]["epochs"] = 3       # a kill can land between two epochs
    (wf / "config/smoke.yaml").write_text(yaml.safe_dump(smoke, sort_keys=False))
    killed = _kill_mid_pretraining(wf, tmp_path / "first.log")
    assert killed is not None, (tmp_path / "first.log").read_text()[-3000:]

    text = _progress(wf)
    print(f"weince progress of the smoke run killed half-way:\n{text}")
    n = all_counts(text)
    planned, finished, running, stopped, failed, not_started = (
        n[k] for k in ("planned", "finished", "running", "stopped", "failed", "not started"))
    assert n["corrupt"] == n["blocked"] == 0
    run_dirs = [p.parent for p in (wf / "results/smoke").rglob("train_log.jsonl")]
    # finished: a train.json Snakemake does not mark incomplete (a kill can land between
    # the two; Snakemake then reruns that job)
    marks = incomplete_marks(wf) or set()
    assert finished == sum((d / "train.json").exists() and os.path.normpath(
        os.path.relpath(d / "train.json", wf)) not in marks for d in run_dirs)
    assert running == 0 and failed == 0 and stopped >= 1
    assert planned == finished + stopped + not_started
    name = "/".join(killed.parts[-4:])        # digits/smallcnn/<arm>/seed7
    assert name in text.split("stopped runs")[1]
    assert "CPU-hours" in text and "ETA of the" in text

    # a job made to fail: an option its loss does not take (only that arm's runs read it)
    (wf / "config/fail.yaml").write_text(yaml.safe_dump(
        {"vision": {"losses": {"weince_recipe": {"not_an_option": 1}}}}))
    subprocess.run(["snakemake", "--unlock", "--configfile", "config/smoke.yaml"], cwd=wf,
                   capture_output=True, timeout=300, env=_env())
    subprocess.run(["snakemake", "--cores", "2", "--configfile", "config/smoke.yaml",
                    "config/fail.yaml", "--keep-going", "--restart-times", "0"], cwd=wf,
                   capture_output=True, timeout=1500, env=_env())
    text = _progress(wf)
    entry = failed_entry(text, "pretrain/digits/smallcnn/weince_recipe/seed7")
    assert entry is not None, text
    assert "ValueError: bad options for loss 'weince_recipe'" in entry
    assert "(log: results/smoke/logs/pretrain/digits/smallcnn/weince_recipe/seed7.log)" in entry
    assert all_counts(text)["failed"] == 1                  # one failed training run
