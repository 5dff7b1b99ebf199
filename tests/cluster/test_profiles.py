"""The SLURM profiles and the job/GPU-hour planner, without a cluster.

    python -m pytest tests/cluster/test_profiles.py -v
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

LISTING = """\
Building DAG of jobs...
Job stats:
job         count
--------  -------
pretrain        2
report          1
all             1
total           4


[Sun Nov 29 09:08:41 2026]
rule pretrain:
    output: results/x/a/encoder.pt, results/x/a/train.json
    log: results/x/logs/a.log
    jobid: 2
    wildcards: arm=a
    threads: 8
    resources: tmpdir=/tmp, mem_mb=64000, mem=64 GB, slurm_account=acc, slurm_partition=gpu, runtime=480, gpu=2
Shell command: None

[Sun Nov 29 09:08:41 2026]
rule pretrain:
    output: results/x/b/encoder.pt, results/x/b/train.json
    jobid: 3
    threads: 4
    resources: tmpdir=/tmp, mem_mb=64000, slurm_account=acc, slurm_partition=gpu, runtime=120, gres=gpu:a100:4, cpus_per_task=6

[Sun Nov 29 09:08:41 2026]
localrule report:
    output: reports/x/summary.md
    jobid: 1
    resources: tmpdir=/tmp, runtime=10

[Sun Nov 29 09:08:41 2026]
rule all:
    input: reports/x/summary.md
    jobid: 0
    resources: tmpdir=/tmp, runtime=60
Job stats:
job         count
"""


def test_parse_dry_run_reads_rules_outputs_threads_and_resources(plan):
    jobs = plan.parse_dry_run(LISTING)
    assert [(j.rule, j.local) for j in jobs] == [
        ("pretrain", False), ("pretrain", False), ("report", True), ("all", False)]
    a, b, rep, all_ = jobs
    assert a.output == ["results/x/a/encoder.pt", "results/x/a/train.json"]
    assert (a.gpus, a.cpus, a.runtime_min, a.threads) == (2, 8, 480, 8)
    assert a.resources["slurm_partition"] == "gpu"
    # --gres gpu:<type>:N counts N GPUs; cpus_per_task wins over threads
    assert (b.gpus, b.cpus, b.runtime_min) == (4, 6, 120)
    assert rep.output == ["reports/x/summary.md"] and rep.gpus == 0
    assert all_.output == [] and all_.threads == 1


def test_summarise_counts_slurm_jobs_and_gpu_hours(plan):
    rows = plan.summarise(plan.parse_dry_run(LISTING))
    # the localrule and the output-less `all` run on the submit host: not counted
    assert [r["rule"] for r in rows] == ["pretrain", "total"]
    pre, total = rows
    assert pre["jobs"] == 2 and pre["gpus_per_job"] == "2-4"
    assert pre["gpu_hours"] == pytest.approx(2 * 480 / 60 + 4 * 120 / 60)   # 24
    assert total["jobs"] == 2 and total["gpu_jobs"] == 2
    assert total["gpu_hours"] == pytest.approx(24.0)


def test_profiles_are_valid_yaml_with_the_slurm_executor():
    for path in (REPO / "workflow/profiles/slurm/config.yaml",
                 REPO / "tests/cluster/profile/config.yaml"):
        prof = yaml.safe_load(path.read_text())
        assert prof["executor"] == "slurm", path
        assert prof["jobs"] >= 1
        assert {"slurm_account", "slurm_partition"} <= set(prof["default-resources"]), path
        assert prof["slurm-status-command"] in ("sacct", "squeue")
    test = yaml.safe_load((REPO / "tests/cluster/profile/config.yaml").read_text())
    assert test["default-resources"]["slurm_account"] == "weince"
    assert test["default-resources"]["slurm_partition"] == "test"


@pytest.mark.slow
def test_slurm_profile_dry_run_routes_gpu_rules_to_the_gpu_partition(plan):
    """A dry run with the real profile (no SLURM needed): every job gets the account from
    the environment, and exactly the GPU rules of the paper config get the GPU partition."""
    env = {**os.environ, "WEINCE_SLURM_ACCOUNT": "acct_x", "WEINCE_SLURM_PARTITION": "cpu_x",
           "WEINCE_SLURM_GPU_PARTITION": "gpu_x"}
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--dry-run", "--forceall", "--nolock",
         "--workflow-profile", "workflow/profiles/slurm", "--configfile", "config/smoke.yaml"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = [j for j in plan.parse_dry_run(proc.stdout + proc.stderr)
            if not j.local and j.output]
    assert jobs
    assert {j.resources["slurm_account"] for j in jobs} == {"acct_x"}
    paper = yaml.safe_load((REPO / "config/paper.yaml").read_text())["resources"]
    gpu_rules = {r for r, res in paper.items() if r != "default" and res.get("gpu", 0) > 0}
    for j in jobs:
        want = "gpu_x" if j.rule in gpu_rules else "cpu_x"
        assert j.resources["slurm_partition"] == want, (j.rule, j.resources)


def test_planner_profile_without_the_slurm_plugin_keeps_the_resources(plan, tmp_path, monkeypatch):
    """Without snakemake-executor-plugin-slurm (the README's first command alone), the dry run
    uses the profile minus its executor settings; every resource key stays."""
    monkeypatch.setattr(plan, "_has_module", lambda name: name != "snakemake_executor_plugin_slurm")
    lean_dir = plan.dry_run_profile(plan.SLURM_PROFILE, tmp_path)
    assert lean_dir != plan.SLURM_PROFILE
    full = yaml.safe_load((plan.SLURM_PROFILE / "config.yaml").read_text())
    lean = yaml.safe_load((lean_dir / "config.yaml").read_text())
    assert "executor" not in lean and not any(k.startswith("slurm-") for k in lean)
    assert lean["default-resources"] == full["default-resources"]
    assert lean["set-resources"] == full["set-resources"]
    # with the plugin installed the real profile is used as it is
    monkeypatch.setattr(plan, "_has_module", lambda name: True)
    assert plan.dry_run_profile(plan.SLURM_PROFILE, tmp_path / "x") == plan.SLURM_PROFILE


@pytest.mark.slow
def test_planner_runs_without_the_slurm_plugin(plan, monkeypatch, capsys):
    """The planner prints jobs and GPU-hours with the plugin hidden, the same as with it."""
    plan.main(["--configfile", "config/smoke.yaml"])
    with_plugin = capsys.readouterr().out
    monkeypatch.setattr(plan, "_has_module", lambda name: name != "snakemake_executor_plugin_slurm")
    plan.main(["--configfile", "config/smoke.yaml"])
    without = capsys.readouterr().out
    assert "SLURM jobs" in without and "GPU-hours" in without
    assert without == with_plugin
