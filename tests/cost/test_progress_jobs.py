"""`weince progress` counts every job of its target (weince.cost.progress.jobs_left): the jobs
a dry run plans, each at its rule's measured time, a running one less its elapsed time; per
claim the jobs left and the failed jobs; runs that need a manual step shown as blocked with
it; reasons whole."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest
import yaml

import weince.cost.progress as progress_mod
from weince.cost.plan import JobInfo
from weince.cost.progress import (RunState, blocked_step, eta_seconds, failure_reason,
                                  job_eta, jobs_left, progress, progress_text)
from weince.pipeline.profile import Profile

REPO = Path(__file__).resolve().parents[2]
RUN = "results/smoke/vision/digits/smallcnn/{arm}/seed7"


@pytest.fixture
def prof(tmp_path: Path) -> Profile:
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["results"] = "results"
    cfg["claims"] = str(REPO / "config" / "claims.yaml")
    return Profile.of(cfg)


def _bench(wf: Path, rule: str, name: str, seconds: float) -> None:
    b = wf / "results/smoke/benchmarks" / rule / f"{name}.tsv"
    b.parent.mkdir(parents=True, exist_ok=True)
    b.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{seconds}\t0\t10\t1\n")


def _mark(wf: Path, output: str, age_s: float) -> None:
    f = wf / ".snakemake/incomplete" / base64.urlsafe_b64encode(output.encode()).decode()
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("")
    t = time.time() - age_s
    os.utime(f, (t, t))


def test_every_job_left_is_timed_by_its_rule_and_a_running_one_by_what_is_left(
        prof, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wf = tmp_path
    _bench(wf, "features", "digits/smallcnn/a/seed1", 10.0)
    _bench(wf, "features", "digits/smallcnn/b/seed1", 20.0)
    _bench(wf, "pretrain", "digits/smallcnn/a/seed1", 90.0)
    planned = [JobInfo("features", False, output=[RUN.format(arm="infonce") + "/features.pt"]),
               JobInfo("knn", False, output=[RUN.format(arm="infonce") + "/knn.json"],
                       input=[RUN.format(arm="infonce") + "/features.pt"]),
               JobInfo("pretrain", False, output=[RUN.format(arm="weince") + "/encoder.pt"]),
               JobInfo("all", True)]
    _mark(wf, RUN.format(arm="weince") + "/encoder.pt", 60.0)     # started a minute ago
    monkeypatch.setattr(progress_mod, "dry_run_jobs", lambda *a: (planned, None))
    left = jobs_left(prof, ["config/smoke.yaml"], None, wf,
                     progress_mod.incomplete_marks(wf))
    by = {j.rule: j for j in left.jobs}
    assert sorted(by) == ["features", "knn", "pretrain"]           # `all` does no work
    assert (by["features"].seconds, by["features"].basis) == (15.0, "measured")
    # no knn job finished yet and a CPU profile has no cost model: the median finished job
    assert by["knn"].basis == "first guess" and by["knn"].seconds == 20.0
    assert by["knn"].after == [0]                     # it waits for the features job
    assert by["pretrain"].running and by["pretrain"].seconds == pytest.approx(30.0, abs=2)
    line = job_eta(left)[0]
    total = by["features"].seconds + by["knn"].seconds + by["pretrain"].seconds
    assert eta_seconds(left) == pytest.approx(total)  # one job at once: the sum
    # two at once: the features-knn chain (35 s) outlasts half the work (32.5 s)
    left.jobs[2].running = left.jobs[0].running = True
    assert eta_seconds(left) == pytest.approx(35.0)
    left.jobs[0].running = False
    # the live run's --cores, from its log: core-seconds over the cores
    log = wf / ".snakemake/log/2026-01-01T000000.000000.snakemake.log"
    log.parent.mkdir(parents=True)
    log.write_text("Building DAG of jobs...\nProvided cores: 2\n")
    assert progress_mod.run_cores(wf) == 2
    left.cores, left.jobs[1].threads = 2, 2            # knn on both cores
    assert eta_seconds(left) == pytest.approx((15.0 + 2 * 20.0 + 30.0) / 2, abs=1)
    left.cores = None
    assert line.startswith("ETA of the 3 job(s) left, evaluation jobs included, at 1 job(s) "
                           "at once (as now): about ")
    assert progress_mod._duration(total / 3600) in line
    assert "1 features, 1 knn, 1 pretrain" in line and "1 first guess, 2 measured" in line


def test_a_running_job_of_a_rule_never_timed_is_given_as_long_again(prof, tmp_path,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    _bench(tmp_path, "features", "digits/smallcnn/a/seed1", 10.0)
    planned = [JobInfo("timing", False, output=["results/smoke/timing/timing.json"])]
    _mark(tmp_path, "results/smoke/timing/timing.json", 100.0)
    monkeypatch.setattr(progress_mod, "dry_run_jobs", lambda *a: (planned, None))
    (job,) = jobs_left(prof, [], None, tmp_path, progress_mod.incomplete_marks(tmp_path)).jobs
    assert job.running and job.basis == "first guess"
    assert job.seconds == pytest.approx(100.0, abs=3)


def test_no_job_left_but_a_failed_one_is_not_called_finished(prof, tmp_path, monkeypatch):
    """The issue's case: C3's features job failed, every training run finished."""
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "results/smoke/logs/features/digits/smallcnn/infonce/seed7.log"
    log.parent.mkdir(parents=True)
    reason = "ValueError: " + " ".join(["a long reason that must not be cut"] * 20)
    log.write_text(f"Traceback (most recent call last):\n  File \"x\", line 1\n{reason}\n")
    monkeypatch.setattr(progress_mod, "dry_run_jobs", lambda *a: ([], None))
    p = progress(prof, workdir=tmp_path, use_sacct=False, lock_table=tmp_path / "none",
                 claim="C3", count_jobs=True, target="reports/smoke/table_c3.md")
    text = progress_text(p)
    assert "ETA: no job left to run, but 1 failed job(s) (below) must run again." in text
    assert failure_reason(log) == reason                          # whole, not cut
    assert reason in text.replace("\n    ", " ")                  # wrapped, every word
    assert max(len(s) for s in text.split("failed jobs (1):")[1].splitlines()[:4]) <= 100
    c3 = next(s for s in text.splitlines() if s.startswith("C3 "))
    assert c3.split()[-2:] == ["0", "1"]                          # jobs left, failed jobs


def test_a_run_that_needs_a_manual_step_is_blocked_with_the_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / RUN.format(arm="infonce")
    run.mkdir(parents=True)
    rs = RunState("vision", "digits/smallcnn", "infonce", 7, run, run / "x.log")
    assert blocked_step(rs) is None
    rs.reason = (f"UnreadableFileError: {run}/checkpoint.pt: not a readable checkpoint "
                 f"(truncated or corrupt)")
    assert blocked_step(rs).startswith(f"delete {run}/checkpoint.pt")
    rs.reason = None    # a broken encoder is no manual step: the run is corrupt, rebuilt
    (run / "encoder.pt").write_bytes(b"the encoder, truncated")
    (run / "train.json").write_text(json.dumps({"encoder_sha256": "0" * 64}))
    assert blocked_step(rs) is None


def test_the_timing_job_is_timed_at_the_training_runs_image_rate(prof, tmp_path, monkeypatch):
    """Before it ever ran, the C8 timing job is its whole steps at the image rate of the
    profile's finished training runs of its backbone (their median), over its threads, plus
    the median finished job for its start-up."""
    monkeypatch.chdir(tmp_path)
    cfg = prof.timing.config
    _bench(tmp_path, "features", "digits/smallcnn/a/seed1", 3.0)
    for arm, step_s in (("infonce", 0.2), ("weince", 0.4), ("weince_recipe", 0.3)):
        run = tmp_path / RUN.format(arm=arm).replace("smallcnn", cfg.backbone)
        run.mkdir(parents=True)
        (run / "train.json").write_text(json.dumps(
            {"batch_size": 100, "torch_threads": 1, "augment": {"image_size": cfg.image_size},
             "step_timing": {"step_s_median": step_s}}))
    planned = [JobInfo("timing", False, output=["results/smoke/timing/timing.json"],
                       threads=2)]
    monkeypatch.setattr(progress_mod, "dry_run_jobs", lambda *a: (planned, None))
    (job,) = jobs_left(prof, [], None, tmp_path, set()).jobs
    steps = cfg.runs * (max(1, cfg.warmup // 2) + cfg.step_reps) * len(cfg.losses)
    assert job.basis == "the training runs' image rate"
    assert job.seconds == pytest.approx(steps * 2 * cfg.step_batch * 0.3 / 200 / 2 + 3.0)
