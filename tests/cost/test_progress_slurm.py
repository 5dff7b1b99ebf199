"""``weince progress`` on a workflow folder that Snakemake's slurm executor ran in
(weince.cost.slurm_jobs): this folder's jobs found by their run ID, each job or array task
tied to its training run by the ``localrule`` blocks of its SLURM log, a run on a node this
machine cannot see shown running from sacct, one cancelled or killed for memory named with
its SLURM state and logs. ``sacct`` is a fake on PATH that prints a fixed listing and
records its arguments (the real one is tested in tests/cluster/)."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
import yaml

from weince.cost.progress import progress, progress_text
from weince.cost.slurm_jobs import SlurmJob, job_logs, parse_sacct, run_names, slurm_jobs
from weince.pipeline.profile import Profile

REPO = Path(__file__).resolve().parents[2]
RUN_ID = "weince-test_6203a739-c799-43cc-83f1-c77dc2adf9b9"
PRE = "results/smoke/logs/pretrain/digits/smallcnn"


def _block(rule: str, log: str, local: bool) -> str:
    return (f"[Fri Dec  4 21:40:51 2026]\n{'local' if local else ''}rule {rule}:\n"
            f"    output: x, y\n    log: {log}\n    jobid: 0\n    wildcards: a=b\n")


# an array task's log as the executor writes it: the first member's `rule` block (the
# array's base command), then the task's own job, executed as `localrule`
TASK_2 = (_block("pretrain", f"{PRE}/infonce/seed7.log", False)
          + _block("pretrain", f"{PRE}/weince_recipe/seed7.log", False)
          + _block("pretrain", f"{PRE}/weince_recipe/seed7.log", True))
SACCT = "\n".join([
    "5_1|RUNNING|0:0", "5_2|CANCELLED by 0|0:15", "6|OUT_OF_MEMORY|0:125",
    "7_[1-2,4]|PENDING|0:0", "4|COMPLETED|0:0"]) + "\n"


@pytest.fixture
def prof(tmp_path: Path) -> Profile:
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["results"] = str(tmp_path / "results")
    cfg["claims"] = str(REPO / "config" / "claims.yaml")
    return Profile.of(cfg)


@pytest.fixture
def fake_sacct(tmp_path: Path, monkeypatch) -> Path:
    """A ``sacct`` on PATH that prints :data:`SACCT` and writes its arguments to a file."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    args = tmp_path / "sacct_args"
    (tmp_path / "sacct_out").write_text(SACCT)
    exe = bindir / "sacct"
    exe.write_text(f"#!/bin/sh\necho \"$@\" > {args}\ncat {tmp_path / 'sacct_out'}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return args


def _slurm_folder(work: Path) -> None:
    """A folder the slurm executor ran in: its run ID in Snakemake's log, the logs of an
    array (task 1: infonce, task 2: weince_recipe), a linear job and a finished run."""
    log = work / ".snakemake" / "log"
    log.mkdir(parents=True)
    (log / "2026-12-04T214048.848188.snakemake.log").write_text(
        f"Building DAG of jobs...\nSLURM run ID: {RUN_ID}\n")
    base = work / ".snakemake" / "slurm_logs"
    pre = base / "rule_pretrain"
    pre.mkdir(parents=True)
    (pre / "5_1.log").write_text(_block("pretrain", f"{PRE}/infonce/seed7.log", True))
    (pre / "5_2.log").write_text(TASK_2)
    lin = base / "rule_linear" / "smoke_digits_smallcnn_infonce_7"
    lin.mkdir(parents=True)
    (lin / "6.log").write_text(_block(
        "linear", "results/smoke/logs/linear/digits/smallcnn/infonce/seed7.log", True))
    (pre / "4.log").write_text(_block("pretrain", f"{PRE}/weince@m0/seed7.log", True))


def test_sacct_listing_expands_pending_arrays_and_keeps_the_state_word():
    jobs = parse_sacct(SACCT)
    assert [(j.jobid, j.state) for j in jobs] == [
        ("5_1", "RUNNING"), ("5_2", "CANCELLED"), ("6", "OUT_OF_MEMORY"), ("7_1", "PENDING"),
        ("7_2", "PENDING"), ("7_4", "PENDING"), ("4", "COMPLETED")]
    assert jobs[1].reason == "SLURM job 5_2 CANCELLED (exit code 0:15)"


def test_each_slurm_log_names_the_jobs_it_executed(tmp_path):
    _slurm_folder(tmp_path)
    assert run_names(tmp_path) == [RUN_ID]
    logs = job_logs(tmp_path)
    assert logs["5_2"] == (Path(".snakemake/slurm_logs/rule_pretrain/5_2.log"),
                           (f"{PRE}/weince_recipe/seed7.log",))   # not the array's first
    assert logs["5_1"][1] == (f"{PRE}/infonce/seed7.log",)
    # a job that has not reached its localrule block yet is tied to nothing
    (tmp_path / ".snakemake/slurm_logs/rule_pretrain/8.log").write_text(
        _block("pretrain", f"{PRE}/infonce/seed8.log", False))
    assert job_logs(tmp_path)["8"][1] == ()


def test_no_slurm_run_in_the_folder_reads_no_sacct(tmp_path, fake_sacct):
    assert slurm_jobs(tmp_path) is None
    assert not fake_sacct.exists()


def test_progress_reads_this_folders_slurm_jobs(prof, tmp_path, fake_sacct):
    _slurm_folder(tmp_path)
    done = prof.results / "smoke" / "vision" / "digits" / "smallcnn" / "weince@m0" / "seed7"
    done.mkdir(parents=True)
    (done / "train.json").write_text('{"wall_s": 5, "device": "cpu", "torch_threads": 1}')
    # a queued job: Snakemake marks its outputs at submission, nothing is written yet
    queued = os.path.relpath(done.parent.parent / "infonce_topm" / "seed7" / "train.json",
                             tmp_path)
    inc = tmp_path / ".snakemake" / "incomplete"
    inc.mkdir(parents=True)
    (inc / base64.urlsafe_b64encode(queued.encode()).decode()).write_text("")
    # no lock table (as for a job on another node): running is sacct's word
    p = progress(prof, workdir=tmp_path, lock_table=tmp_path / "none")
    args = fake_sacct.read_text().split()
    assert args[args.index("--name") + 1] == RUN_ID       # this folder's run, no one else's
    by = {r.arm: r for r in p.runs if r.stage == "vision"}
    assert by["infonce"].state == "running"
    assert by["infonce"].slurm == SlurmJob("5_1", "RUNNING", "0:0",
                                           Path(".snakemake/slurm_logs/rule_pretrain/5_1.log"),
                                           (f"{PRE}/infonce/seed7.log",))
    assert by["weince_recipe"].state == "failed"
    assert by["weince_recipe"].reason == "SLURM job 5_2 CANCELLED (exit code 0:15)"
    assert by["weince@m0"].state == "finished" and by["weince@m0"].slurm.state == "COMPLETED"
    assert by["infonce_topm"].state == "not started" and by["infonce_topm"].submitted
    failed = {f.job: f for f in p.failed}
    assert sorted(failed) == ["linear/digits/smallcnn/infonce/seed7",
                              "pretrain/digits/smallcnn/weince_recipe/seed7"]
    oom = failed["linear/digits/smallcnn/infonce/seed7"]
    assert (oom.rule, oom.reason) == ("linear", "SLURM job 6 OUT_OF_MEMORY (exit code 0:125)")
    assert oom.slurm_log == Path(".snakemake/slurm_logs/rule_linear/"
                                 "smoke_digits_smallcnn_infonce_7/6.log")
    text = progress_text(p).replace("\n    ", " ")     # a reason wrapped, read whole
    assert (f"- pretrain/digits/smallcnn/weince_recipe/seed7: SLURM job 5_2 CANCELLED (exit "
            f"code 0:15) (log: {PRE}/weince_recipe/seed7.log; SLURM log: "
            f".snakemake/slurm_logs/rule_pretrain/5_2.log)") in text
    assert ("SLURM jobs of this folder's runs (sacct; 1 Snakemake run(s)): 1 CANCELLED, "
            "1 COMPLETED, 1 OUT_OF_MEMORY, 3 PENDING, 1 RUNNING") in text
    assert "rule_linear: 1 OUT_OF_MEMORY; rule_pretrain: 1 CANCELLED, 1 COMPLETED, " \
        "1 RUNNING" in text
    assert ("submitted, nothing written yet (1; Snakemake marks their outputs: queued or "
            "starting): digits/smallcnn/infonce_topm/seed7") in text
    all_row = next(line for line in text.splitlines() if line.startswith("all "))
    assert all_row.split()[1:8] == ["8", "1", "1", "0", "1", "0", "5"]   # ... corrupt, not started


def test_a_failed_slurm_job_a_later_success_covers_is_not_listed(prof, tmp_path, fake_sacct):
    _slurm_folder(tmp_path)
    (tmp_path / "sacct_out").write_text("6|FAILED|1:0\n")
    bench = prof.results / "smoke" / "benchmarks" / "linear" / "digits" / "smallcnn" / \
        "infonce" / "seed7.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\n1\n")
    slurm_log = tmp_path / ".snakemake/slurm_logs/rule_linear/smoke_digits_smallcnn_infonce_7/6.log"
    os.utime(slurm_log, (1, 1))       # the failed job ended before the later success
    assert progress(prof, workdir=tmp_path, lock_table=tmp_path / "none").failed == []
    os.utime(bench, (0, 0))           # ... and when the success is older, it is listed
    p = progress(prof, workdir=tmp_path, lock_table=tmp_path / "none")
    assert [(f.job, f.reason) for f in p.failed] == [
        ("linear/digits/smallcnn/infonce/seed7", "SLURM job 6 FAILED (exit code 1:0)")]


def test_an_error_block_after_the_job_adds_no_log_and_keeps_the_path_clean(tmp_path):
    log = f"{PRE}/infonce/seed7.log"
    text = (_block("pretrain", log, True) + "[Fri Dec  4 21:41:00 2026]\n"
            f"Error in rule pretrain:\n    jobid: 0\n    log: {log} (check log file(s) for "
            "error details)\n    log: results/other.log\n")
    d = tmp_path / ".snakemake" / "slurm_logs" / "rule_pretrain"
    d.mkdir(parents=True)
    (d / "3.log").write_text(text)
    assert job_logs(tmp_path)["3"][1] == (log,)
