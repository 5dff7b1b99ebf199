"""Plain `snakemake` resumes after a hard kill (issue 19, item 4).

The smoke DAG is killed with `kill -9` of Snakemake's whole process group while a
pretraining job is between two epochs, then resumed with the README's exact commands:
the one-line unlock for the stale lock, then the same run command. The default workflow
profile (`profiles/default/`, read without a flag) sets `rerun-incomplete`, which is what
lets the second run redo the interrupted job; pretraining itself continues from its
checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _readme_commands() -> tuple[list[str], list[str]]:
    """The smoke run command and the unlock command, as the README writes them."""
    text = (REPO / "README.md").read_text()
    run = re.search(r"`(snakemake --cores 2 --configfile config/smoke\.yaml)`", text)
    unlock = re.search(r"`(snakemake --unlock[^`]*)`", text)
    assert run and unlock, "README lost its smoke command or its unlock line"
    return shlex.split(run.group(1)), shlex.split(unlock.group(1))


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(cwd: Path, argv: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_env())


def test_default_profile_sets_rerun_incomplete():
    prof = yaml.safe_load((REPO / "profiles/default/profile.yaml").read_text())
    assert prof == {"rerun-incomplete": True}


@pytest.mark.slow
def test_kill_9_mid_pretraining_then_the_readme_commands_finish(tmp_path):
    run_cmd, unlock_cmd = _readme_commands()
    wf = tmp_path / "wf"
    wf.mkdir()
    shutil.copy2(REPO / "Snakefile", wf / "Snakefile")
    for d in ("workflow", "config", "profiles"):
        shutil.copytree(REPO / d, wf / d)
    # three epochs, so a kill can land after a checkpoint and before the encoder
    smoke = yaml.safe_load((wf / "config/smoke.yaml").read_text())
    smoke["vision"]["pretrain"]["epochs"] = 3
    (wf / "config/smoke.yaml").write_text(yaml.safe_dump(smoke, sort_keys=False))

    runs = wf / "results/smoke/vision"
    log = open(tmp_path / "first.log", "w")
    proc = subprocess.Popen(run_cmd, cwd=wf, stdout=log, stderr=subprocess.STDOUT,
                            env=_env(), start_new_session=True)
    killed = None
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            mid = [c.parent for c in runs.rglob("checkpoint.pt")
                   if not (c.parent / "encoder.pt").exists()] if runs.exists() else []
            if mid:
                os.killpg(proc.pid, signal.SIGKILL)  # snakemake and every job it started
                killed = mid[0]
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and killed is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        log.close()
    assert killed is not None, "no pretraining job was caught mid-run:\n" + \
        (tmp_path / "first.log").read_text()[-3000:]
    assert not (killed / "encoder.pt").exists()

    # the same command right away: the dead run's lock is still there
    again = _run(wf, run_cmd, timeout=300)
    assert again.returncode != 0 and "--unlock" in again.stdout + again.stderr

    # without the default profile the interrupted job blocks the DAG (what the profile fixes)
    assert _run(wf, unlock_cmd, timeout=300).returncode == 0
    bare = _run(wf, run_cmd + ["-n", "--workflow-profile", "none"], timeout=300)
    assert bare.returncode != 0 and "rerun-incomplete" in bare.stdout + bare.stderr

    # the README's unlock line, then its command: runs to the end
    assert _run(wf, unlock_cmd, timeout=300).returncode == 0
    done = _run(wf, run_cmd, timeout=1500)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "workflow specific profile profiles/default" in out
    assert (wf / "reports/smoke/summary.md").exists()
    train = json.loads((killed / "train.json").read_text())
    assert train["resumed_from_epoch"] >= 1  # continued from the checkpoint, not from zero
    epochs = [json.loads(line)["epoch"] for line in
              (killed / "train_log.jsonl").read_text().splitlines() if line.strip()]
    assert epochs == [1, 2, 3]
