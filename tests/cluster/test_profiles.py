"""The SLURM profiles and the job/GPU-hour planner, without a cluster.

    python -m pytest tests/cluster/test_profiles.py -v
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from weince.cli import main as cli

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
"""  # noqa: E501 - Snakemake's dry-run listing, verbatim


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
    for path in (REPO / "workflow/executors/slurm/config.yaml",
                 REPO / "tests/cluster/profile/config.yaml"):
        prof = yaml.safe_load(path.read_text())
        assert prof["executor"] == "slurm", path
        assert prof["jobs"] == "unlimited" or int(prof["jobs"]) >= 1
        assert {"slurm_account", "slurm_partition"} <= set(prof["default-resources"]), path
        assert prof["slurm-status-command"] in ("sacct", "squeue")
    test = yaml.safe_load((REPO / "tests/cluster/profile/config.yaml").read_text())
    assert test["default-resources"]["slurm_account"] == "weince"
    assert test["default-resources"]["slurm_partition"] == "test"


def test_summarise_prints_a_runtime_range_low_to_high(plan):
    """Requests that follow each job's work differ: the range reads by value (6-10, not the
    string order 10-6)."""
    jobs = [plan.JobInfo("linear", False, [f"o{i}"], {"runtime": str(m), "gpu": "1"})
            for i, m in enumerate((10, 6, 9))]
    assert plan.summarise(jobs)[0]["runtime_min"] == "6-10"


@pytest.mark.slow
def test_slurm_profile_dry_run_routes_gpu_rules_to_the_gpu_partition(plan):
    """A dry run with the real profile (no SLURM needed): every job gets the account from
    the environment, and exactly the GPU rules of the paper config get the GPU partition."""
    env = {**os.environ, "WEINCE_SLURM_ACCOUNT": "acct_x", "WEINCE_SLURM_PARTITION": "cpu_x",
           "WEINCE_SLURM_GPU_PARTITION": "gpu_x"}
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--dry-run", "--forceall", "--nolock",
         "--workflow-profile", "workflow/executors/slurm", "--configfile", "config/smoke.yaml"],
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
    """`weince plan` prints jobs and GPU-hours with the plugin hidden, the same as with it."""
    cli(["plan", "--configfile", "config/smoke.yaml"])
    with_plugin = capsys.readouterr().out
    monkeypatch.setattr(plan, "_has_module", lambda name: name != "snakemake_executor_plugin_slurm")
    cli(["plan", "--configfile", "config/smoke.yaml"])
    without = capsys.readouterr().out
    assert "SLURM jobs" in without and "GPU-hours" in without
    assert without == with_plugin


GROUPED = """\
[Tue Dec  1 08:55:25 2026]
rule pretrain:
    output: r/a/encoder.pt
    jobid: 1
    wildcards: arm=a
    resources: tmpdir=/tmp, runtime=480, gpu=1
Shell command: None

[Tue Dec  1 08:55:25 2026]
rule pretrain:
    output: r/b/encoder.pt
    jobid: 2
    wildcards: arm=b
    resources: tmpdir=/tmp, runtime=480, gpu=1
Shell command: None

[Tue Dec  1 08:55:25 2026]
rule pretrain:
    input: r/sel.json
    output: r/c/encoder.pt
    jobid: 3
    resources: tmpdir=/tmp, runtime=480, gpu=1
Shell command: None
[Tue Dec  1 08:55:25 2026] Group job eval_a (jobs in lexicogr. order):

    [Tue Dec  1 08:55:25 2026]
    rule features:
        input: r/a/encoder.pt
        output: r/a/features.pt
        jobid: 4
        resources: tmpdir=/tmp, runtime=30, gpu=1
Shell command: None

    [Tue Dec  1 08:55:25 2026]
    rule linear:
        input: r/a/features.pt
        output: r/a/linear.json
        jobid: 5
        resources: tmpdir=/tmp, runtime=60, gpu=1
Shell command: None
[Tue Dec  1 08:55:25 2026] Group job eval_b (jobs in lexicogr. order):

    [Tue Dec  1 08:55:25 2026]
    rule features:
        input: r/b/encoder.pt
        output: r/b/features.pt
        jobid: 6
        resources: tmpdir=/tmp, runtime=30, gpu=1
Shell command: None

[Tue Dec  1 08:55:25 2026]
rule select:
    input: r/a/linear.json
    output: r/sel.json
    jobid: 7
    resources: tmpdir=/tmp, runtime=60
Shell command: None
"""


def test_parse_dry_run_reads_group_jobs_and_inputs(plan):
    jobs = plan.parse_dry_run(GROUPED)
    assert [(j.rule, j.group) for j in jobs] == [
        ("pretrain", None), ("pretrain", None), ("pretrain", None), ("features", "eval_a"),
        ("linear", "eval_a"), ("features", "eval_b"), ("select", None)]
    assert jobs[3].group_job == jobs[4].group_job != jobs[5].group_job
    assert jobs[4].input == ["r/a/features.pt"] and jobs[4].resources["runtime"] == "60"
    assert jobs[6].group_job is None and jobs[6].input == ["r/a/linear.json"]


def test_submissions_count_arrays_by_ready_batch_and_groups_once(plan):
    settings = {"array_rules": {"pretrain"}, "array_limit": 1000,
                "groups": {"features": "eval_{arm}", "linear": "eval_{arm}"},
                "group_components": {"eval_{arm}": 8}}
    rows = {r["unit"]: r for r in plan.submissions(plan.parse_dry_run(GROUPED), settings)}
    # two root pretrain jobs: one array; the third waits for a selection: its own sbatch
    assert (rows["pretrain"]["jobs"], rows["pretrain"]["after"]) == (3, 2)
    assert (rows["group eval_{arm}"]["jobs"], rows["group eval_{arm}"]["after"]) == (3, 2)
    assert (rows["select"]["before"], rows["select"]["after"]) == (1, 1)
    assert (rows["total"]["before"], rows["total"]["after"]) == (7, 5)
    # an array limit of 1 is one sbatch per task again
    one = plan.submissions(plan.parse_dry_run(GROUPED), {**settings, "array_limit": 1})
    assert one[-1]["after"] == 6


def test_test_profile_uses_the_slurm_profiles_arrays_and_groups(plan):
    """The cluster tests exercise the production profile's submission settings."""
    prod = plan.profile_settings(REPO / "workflow/executors/slurm")
    test = plan.profile_settings(REPO / "tests/cluster/profile")
    assert prod == test
    assert {"pretrain", "simcse"} <= prod["array_rules"]
    for path in (REPO / "workflow/executors/slurm/config.yaml",
                 REPO / "tests/cluster/profile/config.yaml"):
        prof = yaml.safe_load(path.read_text())
        # arrays need every ready job selected (snakemake-executor-plugin-slurm#473): no job cap
        assert prof["jobs"] == "unlimited", path
        assert int(str(prof["max-jobs-per-timespan"]).split("/")[0]) >= 20000, path
        assert "gpu=local" in prof["set-resource-scopes"], path
    # every grouped rule has a component count, and every rule named exists
    rules = set(re.findall(r"^\s*rule (\w+):", "\n".join(
        p.read_text() for p in (REPO / "workflow/rules").glob("*.smk")), re.M))
    assert set(prod["groups"]) <= rules and prod["array_rules"] <= rules
    assert set(prod["groups"].values()) == set(prod["group_components"])


@pytest.mark.slow
def test_a_resources_overlay_sets_each_rules_time_and_memory_request(plan, tmp_path):
    """`--configfile <config> <resources overlay>` (the rehearsal's resources.yaml): the
    rules it names request its runtime (sbatch -t), memory (--mem) and threads, the others
    keep the config's."""
    overlay = tmp_path / "resources.yaml"
    overlay.write_text(yaml.safe_dump({"resources": {
        "pretrain": {"gpu": 0, "mem_mb": 1234, "runtime": 37, "threads": 1},
        "pot": {"gpu": 0, "mem_mb": 777, "runtime": 3}}}))
    base = plan.parse_dry_run(plan.dry_run(["config/smoke.yaml"], plan.SLURM_PROFILE))
    over = plan.parse_dry_run(plan.dry_run(["config/smoke.yaml", str(overlay)],
                                           plan.SLURM_PROFILE))

    def req(jobs, rule):
        return {(j.runtime_min, j.resources["mem_mb"]) for j in jobs if j.rule == rule}

    assert req(over, "pretrain") == {(37, "1234")} != req(base, "pretrain")
    assert req(over, "pot") == {(3, "777")} != req(base, "pot")
    assert req(over, "features") == req(base, "features")
