"""``weince progress`` on fabricated result trees (weince.cost.progress): each run's state
from its files, Snakemake's incomplete markers and the kernel's lock table, the hours spent
beside the forecast of the same runs, the failed jobs with their reason and log, and the
forecast that learns from finished runs (weince.cost.learned)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
import yaml

from weince.cost.estimate import estimate
from weince.cost.learned import learned_note, learned_profile
from weince.cost.progress import (failed_jobs, failure_reason, incomplete_marks,
                                  live_lock_ids, progress, progress_text)
from weince.pipeline.profile import Profile
from weince.utils.digest import sha256_file
from weince.utils.runlock import run_lock

REPO = Path(__file__).resolve().parents[2]
H100 = "NVIDIA H100 80GB HBM3"
TRACE = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
         "    main()\nValueError: lr must be positive (vision.pretrain.lr)\n")


@pytest.fixture
def prof(tmp_path: Path) -> Profile:
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["results"] = str(tmp_path / "results")
    cfg["claims"] = str(REPO / "config" / "claims.yaml")
    return Profile.of(cfg)


def _run(prof: Profile, arm: str) -> Path:
    return prof.results / "smoke" / "vision" / "digits" / "smallcnn" / arm / "seed7"


def _finished(prof: Profile, arm: str, *, device: str = "cpu", name: str = "cpu",
              wall_s: float = 10.0, bench_s: float | None = None, world: int = 1,
              step_s: float = 0.5) -> None:
    d = _run(prof, arm)
    d.mkdir(parents=True)
    (d / "train.json").write_text(json.dumps({
        "wall_s": wall_s, "world_size": world, "device": device, "torch_threads": 1,
        "batch_size": 128, "loss": arm,
        "step_timing": {"step_s_median": step_s, "device": device, "device_name": name,
                        "peak_mem_mb": 1.0, "peak_mem_kind": "x"}}))
    if bench_s is not None:
        b = prof.results / "smoke" / "benchmarks" / "pretrain" / "digits" / "smallcnn" / arm
        b.mkdir(parents=True)
        (b / "seed7.tsv").write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{bench_s}\t0\t10\t1\n")


def _log(prof: Profile, rule: str, rel: str, text: str) -> Path:
    p = prof.results / "smoke" / "logs" / rule / f"{rel}.log"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _fabricate(prof: Profile, work: Path) -> dict[str, Path]:
    """One run in every state: two finished (a CPU one, a two-GPU H100 one), one running
    (its lock in the lock table given), one stopped (incomplete marker, a checkpoint), one
    failed (its log's traceback); the other three not started."""
    _finished(prof, "weince@m0", wall_s=10.0, bench_s=36.0)
    _finished(prof, "weince@m2", device="cuda:0", name=H100, wall_s=3600.0, bench_s=1800.0,
              world=2)
    running = _run(prof, "infonce")
    running.mkdir(parents=True)
    (running / ".train.lock").write_text("1\nx\nhost\n")
    (running / "train_log.jsonl").write_text("")
    stopped = _run(prof, "weince_recipe")
    stopped.mkdir(parents=True)
    (stopped / "checkpoint.pt").write_bytes(b"x")
    (stopped / "train_log.jsonl").write_text(json.dumps({"epoch": 1, "loss": 1.0}) + "\n")
    inc = work / ".snakemake" / "incomplete"
    inc.mkdir(parents=True)
    rel = os.path.relpath(stopped / "train.json", work)
    (inc / base64.urlsafe_b64encode(rel.encode()).decode()).write_text("")
    failed_log = _log(prof, "pretrain", "digits/smallcnn/infonce_topm/seed7", "cfg\n" + TRACE)
    st = (running / ".train.lock").stat()
    table = work / "locks"
    table.write_text(f"1: FLOCK  ADVISORY  WRITE 99 {os.major(st.st_dev):02x}:"
                     f"{os.minor(st.st_dev):02x}:{st.st_ino} 0 EOF\n")
    return {"table": table, "failed_log": failed_log}


def test_each_run_state_and_the_hours_come_from_the_files(prof, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    f = _fabricate(prof, work)
    p = progress(prof, workdir=work, use_sacct=False, lock_table=f["table"])
    state = {r.arm: r.state for r in p.runs if r.stage == "vision"}
    assert state == {"weince@m0": "finished", "weince@m2": "finished", "infonce": "running",
                     "weince_recipe": "stopped", "infonce_topm": "failed",
                     "weince_recipe_no_weib": "not started"}
    assert [r.state for r in p.runs if r.stage == "text"] == ["not started"] * 2
    by = {r.arm: r for r in p.runs}
    # CPU: the longer of the benchmark's and train.json's wall time x its one thread
    assert by["weince@m0"].spent_h == pytest.approx(36.0 / 3600)
    assert by["weince@m0"].unit == "CPU-hours"
    # GPU: the longer wall time (a resumed run's benchmark is its last segment) x 2 GPUs
    assert by["weince@m2"].spent_h == pytest.approx(2.0)
    assert (by["weince@m2"].unit, by["weince@m2"].gpu) == ("GPU-hours", "h100-sxm")
    assert by["weince_recipe"].done == 1.0 and by["infonce"].done == 0.0
    assert by["infonce_topm"].reason == "ValueError: lr must be positive (vision.pretrain.lr)"
    lo, hi = estimate(prof, "h100-sxm").settings["digits/smallcnn"].hours
    text = progress_text(p).replace("\n    ", " ")     # a reason wrapped, read whole
    assert f"{2.0 / hi:.2f}-{2.0 / lo:.2f}" in text           # measured / forecast
    assert f"(log: {f['failed_log']})" in text
    assert "ETA of the 6 training run(s) left, at 1 job(s) at once (as now)" in text
    all_row = next(line for line in text.splitlines() if line.startswith("all "))
    assert all_row.split()[1:8] == ["8", "2", "1", "1", "1", "0", "3"]


def test_a_finished_run_whose_encoder_is_not_the_recorded_one_is_corrupt(prof, tmp_path):
    """A truncated encoder.pt with its old mtime: corrupt (with its rebuild command), not
    finished; a run whose train.json records no digest (older code) is not checked."""
    _finished(prof, "weince@m0")
    _finished(prof, "weince@m2")
    bad = _run(prof, "weince@m0")
    (bad / "encoder.pt").write_bytes(b"w" * 1000)
    train = json.loads((bad / "train.json").read_text())
    train["encoder_sha256"] = sha256_file(bad / "encoder.pt")
    (bad / "train.json").write_text(json.dumps(train))
    st = (bad / "encoder.pt").stat()
    (bad / "encoder.pt").write_bytes(b"w" * 500)
    os.utime(bad / "encoder.pt", ns=(st.st_atime_ns, st.st_mtime_ns))
    p = progress(prof, workdir=tmp_path, use_sacct=False, lock_table=tmp_path / "none")
    by = {r.arm: r for r in p.runs}
    assert by["weince@m0"].state == "corrupt" and by["weince@m2"].state == "finished"
    text = " ".join(progress_text(p).split())   # the reasons are wrapped, whole
    assert f"{bad / 'encoder.pt'}: its SHA-256" in text and "--forcerun" in text


def test_a_claim_counts_the_runs_whose_folders_it_reads(prof, tmp_path):
    p = progress(prof, workdir=tmp_path, use_sacct=False, lock_table=tmp_path / "none",
                 claim="C3")
    assert [c for c, _ in p.claims] == ["C3"]
    assert sorted(r.arm for r in p.runs) == ["infonce", "weince_recipe"]
    assert any("no /proc/locks" in u for u in p.unknowns)   # the table was not readable
    assert any("no .snakemake" in u for u in p.unknowns)


def test_the_rows_account_for_every_planned_run(prof, tmp_path):
    """The grid points feed no table directly (their validation numbers choose the final
    arm's setting): they get a row of their own, so no run of "all" is in no row."""
    p = progress(prof, workdir=tmp_path, use_sacct=False, lock_table=tmp_path / "none")
    rows = dict(p.claims)
    assert sorted(r.arm for r in rows["grid points"]) == ["weince@m0", "weince@m2"]
    in_rows = {id(r) for rs in rows.values() for r in rs}
    assert in_rows == {id(r) for r in p.runs}
    assert "\ngrid points " in progress_text(p)


def test_failed_jobs_of_every_rule_unless_a_later_success_covers_them(prof, tmp_path):
    base = prof.results / "smoke"
    _log(prof, "linear", "digits/smallcnn/infonce/seed7", TRACE)
    ok = _log(prof, "knn", "digits/smallcnn/infonce/seed7", TRACE)
    _log(prof, "features", "digits/smallcnn/infonce/seed7", "all good\n")
    bench = base / "benchmarks" / "knn" / "digits" / "smallcnn" / "infonce" / "seed7.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\n1\n")
    os.utime(ok, (1, 1))   # the log is older than the benchmark of a later success
    jobs = failed_jobs(base / "logs", base / "benchmarks")
    assert [(j.rule, j.job) for j in jobs] == [("linear", "linear/digits/smallcnn/infonce/seed7")]


def test_failure_reasons():
    assert failure_reason("/no/such/log") is None


@pytest.mark.parametrize("text,reason", [
    (TRACE, "ValueError: lr must be positive (vision.pretrain.lr)"),
    ("a\nexit 3: stopped\n", "exit 3: stopped"),
    ("step 1\nstep 2\n", None),
])
def test_failure_reason_of_a_log(tmp_path, text, reason):
    (tmp_path / "j.log").write_text(text)
    assert failure_reason(tmp_path / "j.log") == reason


def test_incomplete_markers_decode_and_a_held_lock_is_in_the_kernel_table(tmp_path):
    assert incomplete_marks(tmp_path) is None
    inc = tmp_path / ".snakemake" / "incomplete"
    inc.mkdir(parents=True)
    (inc / base64.urlsafe_b64encode(b"results/a/train.json").decode()).write_text("")
    assert incomplete_marks(tmp_path) == {"results/a/train.json"}
    if live_lock_ids() is None:
        pytest.skip("no /proc/locks on this system")
    with run_lock(tmp_path, "train") as lock:
        st = lock.stat()
        assert (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in live_lock_ids()
    assert (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) not in live_lock_ids()


def test_the_forecast_learns_measured_step_times_of_finished_gpu_runs(prof):
    assert learned_profile(prof) is prof                 # nothing measured yet
    _finished(prof, "weince@m0", step_s=0.25)            # a CPU run teaches nothing
    assert learned_profile(prof) is prof
    _finished(prof, "weince@m2", device="cuda:0", name=H100, step_s=0.5)
    learned = learned_profile(prof)
    s = estimate(learned, "h100-sxm").settings
    assert s["digits/smallcnn"].per_gpu["h100-sxm"]["step_s"] == (0.5, 0.5)
    assert s["digits/smallcnn"].source == "measured"
    assert s["text/minilm"].source == "estimated"
    assert estimate(learned, "a100-80gb").settings["digits/smallcnn"].source == "estimated"
    note = learned_note(learned, estimate(learned, "h100-sxm"))
    assert note is not None and "for: digits/smallcnn; estimated: text/minilm" in note


@pytest.mark.parametrize("rule", ["simcse", "text_run"])
def test_a_simcse_runs_hours_come_from_its_training_jobs_benchmark(prof, tmp_path, rule):
    """A SimCSE run's train.json holds no wall time: its job's benchmark gives it, the
    `simcse` job's, or under `vision_jobs: per_arm` the `text_run` job's (training and STS)."""
    run = next(r for r in progress(prof, workdir=tmp_path, use_sacct=False,
                                   lock_table=tmp_path / "none").runs if r.stage == "text")
    run.folder.mkdir(parents=True)
    (run.folder / "train.json").write_text(json.dumps({"device": "cpu", "torch_threads": 1}))
    tag = run.folder.relative_to(prof.results / "smoke" / "text")
    b = prof.results / "smoke" / "benchmarks" / rule / tag.parent / f"{tag.name}.tsv"
    b.parent.mkdir(parents=True)
    b.write_text("s\th:m:s\tmax_rss\tcpu_time\n72.0\t0\t10\t1\n")
    p = progress(prof, workdir=tmp_path, use_sacct=False, lock_table=tmp_path / "none")
    got = next(r for r in p.runs if r.folder == run.folder)
    assert got.state == "finished" and got.spent_h == pytest.approx(72.0 / 3600)
