"""Plain `snakemake` resumes after a hard kill.

The kill-and-resume run is the smoke run every smoke test reads (the ``smoke_kill``
fixture of test_workflow.py runs :func:`kill_mid_pretraining_then_resume` once and
``test_smoke_kill_9_mid_pretraining_then_the_readme_commands_finish`` checks it with
:func:`check_kill_and_resume`): one smoke DAG for both, in one test process.

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
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def kill_mid_pretraining_then_resume(wf: Path, logdir: Path) -> dict:
    """In the workflow copy ``wf`` (three pretraining epochs, so a kill can land after a
    checkpoint and before the encoder): the README's smoke command, ``kill -9`` of its whole
    process group as soon as a pretraining run has a checkpoint and no encoder, then the
    same command again (refused: stale lock), the unlock line, a dry run without the default
    profile, the unlock line and the command to the end. Records every step's outcome for
    :func:`check_kill_and_resume`; asserts nothing, so the run always reaches its end (the
    smoke tests of test_workflow.py read it)."""
    run_cmd, unlock_cmd = _readme_commands()
    smoke = yaml.safe_load((wf / "config/smoke.yaml").read_text())
    smoke["vision"]["pretrain"]["epochs"] = 3
    (wf / "config/smoke.yaml").write_text(yaml.safe_dump(smoke, sort_keys=False))

    runs = wf / "results/smoke/vision"
    first_log = logdir / "first.log"
    log = open(first_log, "w")
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
    rec = {"killed": killed, "first_log": first_log.read_text(),
           "encoder_after_kill": killed is not None and (killed / "encoder.pt").exists()}
    rec["again"] = _run(wf, run_cmd, timeout=300)           # the dead run's lock is there
    rec["unlock1"] = _run(wf, unlock_cmd, timeout=300)
    rec["bare"] = _run(wf, run_cmd + ["-n", "--workflow-profile", "none"], timeout=300)
    rec["unlock2"] = _run(wf, unlock_cmd, timeout=300)
    rec["done"] = _run(wf, run_cmd, timeout=1500)
    return rec


def check_kill_and_resume(wf: Path, rec: dict) -> None:
    """The kill landed mid-pretraining; the README's commands then finish the DAG, the
    interrupted run continuing from its checkpoint."""
    killed = rec["killed"]
    assert killed is not None, "no pretraining job was caught mid-run:\n" + \
        rec["first_log"][-3000:]
    assert not rec["encoder_after_kill"]
    # the same command right away: the dead run's lock is still there
    again = rec["again"]
    assert again.returncode != 0 and "--unlock" in again.stdout + again.stderr
    # without the default profile the interrupted job blocks the DAG (what the profile fixes)
    assert rec["unlock1"].returncode == 0
    bare = rec["bare"]
    assert bare.returncode != 0 and "rerun-incomplete" in bare.stdout + bare.stderr
    # the README's unlock line, then its command: runs to the end
    assert rec["unlock2"].returncode == 0
    done = rec["done"]
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "workflow specific profile profiles/default" in out
    assert (wf / "reports/smoke/summary.md").exists()
    train = json.loads((killed / "train.json").read_text())
    assert train["resumed_from_epoch"] >= 1  # continued from the checkpoint, not from zero
    epochs = [json.loads(line)["epoch"] for line in
              (killed / "train_log.jsonl").read_text().splitlines() if line.strip()]
    assert epochs == [1, 2, 3]
