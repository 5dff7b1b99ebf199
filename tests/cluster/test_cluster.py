"""The workflow on a real SLURM cluster, through Snakemake's ``slurm`` executor plugin.

    sudo bash tests/cluster/setup_slurm.sh          # single-node cluster with accounting
    python -m pytest -m cluster tests/cluster -v
    sudo bash tests/cluster/teardown_slurm.sh

1. The smoke profile runs end to end on the cluster: every rule's jobs are SLURM jobs
   (counted in ``sacct`` against the dry run), and the generated summary lists every
   claim of the registry with a verdict.
2. A training job cancelled with ``scancel`` in the middle of its epochs is resumed from
   its ``checkpoint.pt`` when the workflow is re-run: the epochs done before the cancel
   are not trained again (their log records are the very ones written before the
   cancel) and ``train.json`` says from which epoch it resumed.

``weince progress`` is checked on both runs (weince.cost.progress, weince.cost.slurm_jobs):
during the smoke run its counts lie between the files before and after it reads them, at
the end every run is finished with CPU-hours spent and every SLURM job of the run
COMPLETED; the training job shows as running while it trains (from the lock table, and
from sacct alone without it), and once cancelled as a failed job named with its SLURM
state and logs.

Each test works in its own copy of the checkout, so nothing is written to the repository.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from progress_page import all_counts, failed_entry

from weince.cost.estimate import job_runtime, retries_for
from weince.cost.plan import load_profile
from weince.cost.progress import Progress, incomplete_marks, progress, progress_text
from weince.pipeline.layout import VISION_RUN
from weince.pipeline.profile import Profile
from weince.train.simclr import pretrain
from weince.utils.verdict_words import SCALE_ONLY
from weince.utils.verdict_words import VERDICTS as UNIT_VERDICTS

REPO = Path(__file__).resolve().parents[2]
TEST_PROFILE = REPO / "tests" / "cluster" / "profile"
pytestmark = pytest.mark.cluster

PROFILE = "smoke"
SMOKE_ARGS = ["--configfile", "config/smoke.yaml"]
SUMMARY = Path("reports") / PROFILE / "summary.md"
VERDICTS = (*UNIT_VERDICTS, SCALE_ONLY)   # every word a claim's verdict cell can hold


# ----------------------------------------------------------------------------- helpers
def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--workflow-profile", str(TEST_PROFILE), *args]


def stop_snakemake(proc: subprocess.Popen, log: Path) -> None:
    """Stop a snakemake run and every SLURM job it submitted (Ctrl-C, then scancel by
    the run's job name, then kill), so that nothing is left on the cluster."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)       # snakemake cancels its jobs on Ctrl-C
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    m = re.search(r"SLURM run ID: (\S+)", log.read_text())
    if m:
        subprocess.run(["scancel", "--name", m.group(1)], capture_output=True, timeout=30)


def run_snakemake(workdir: Path, *args: str, timeout: float, log: Path,
                  during: Callable[[], bool] | None = None) -> tuple[int, str]:
    """Run snakemake in ``workdir``; return (exit status, combined output); -1 and the
    run stopped (its SLURM jobs cancelled) when it exceeds ``timeout`` seconds.
    ``during``: called every 2 s while snakemake runs, until it returns True."""
    end = time.monotonic() + timeout
    with open(log, "w") as fh:
        proc = subprocess.Popen(snakemake_cmd(*args), cwd=workdir, stdout=fh,
                                stderr=subprocess.STDOUT)
        try:
            while during is not None and proc.poll() is None and time.monotonic() < end:
                if during():
                    break
                time.sleep(2)
            rc = proc.wait(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc = -1
        finally:
            stop_snakemake(proc, log)
    out = log.read_text()
    if rc == -1:
        out += f"\n[test] snakemake stopped after the test's time limit of {timeout:.0f} s"
    return rc, out


def run_id(output: str) -> str:
    m = re.search(r"SLURM run ID: (\S+)", output)
    assert m, f"no 'SLURM run ID' in snakemake's output:\n{output[-3000:]}"
    return m.group(1)


def sacct_jobs(name: str) -> list[dict[str, str]]:
    """Allocations (``-X``) whose job name is ``name`` (the executor's run ID)."""
    fields = ["JobID", "State", "ExitCode", "Account", "Partition", "Comment"]
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", "now-2days", "--name", name,
         "-o", ",".join(fields)],
        capture_output=True, text=True, timeout=30, check=True).stdout
    return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line.strip()]


def rule_of(comment: str, rules: set[str]) -> str | None:
    """The rule named by the executor's ``--comment`` (``rule_<name>[_wildcards_<...>]``)."""
    for r in sorted(rules, key=len, reverse=True):
        if comment == f"rule_{r}" or comment.startswith(f"rule_{r}_wildcards_"):
            return r
    return None


def failure_context(workdir: Path, output: str) -> str:
    """Snakemake's tail and the SLURM logs of failed jobs, for assertion messages."""
    parts = [output[-4000:]]
    for f in sorted((workdir / ".snakemake" / "slurm_logs").rglob("*.log"))[-5:]:
        parts.append(f"==== {f.relative_to(workdir)}\n{f.read_text()[-2000:]}")
    return "\n".join(parts)


def dry_run_jobs(plan, workdir: Path, *targets: str):
    proc = subprocess.run(snakemake_cmd("--dry-run", *targets), cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"dry run failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return plan.parse_dry_run(proc.stdout + proc.stderr)


def progress_of(work: Path, configs: tuple[str, ...] | list[str], **kw) -> Progress:
    """``weince progress``'s reading of the workflow folder ``work`` (in this process)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        return progress(load_profile(list(configs)), workdir=work, **kw)


def progress_cli(work: Path, *configs: str) -> str:
    """``weince progress --configfile <configs>``'s page, run in ``work``."""
    out = subprocess.run([sys.executable, "-m", "weince.cli", "progress", "--configfile",
                          *configs], cwd=work, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def states_of(p: Progress) -> dict[str, str]:
    return {r.name: r.state for r in p.runs}


def finished_on_disk(work: Path, p: Progress) -> set[str]:
    """The planned runs whose ``train.json`` exists and is not marked incomplete."""
    marks = incomplete_marks(work) or set()
    return {r.name for r in p.runs if (work / r.folder / "train.json").exists()
            and os.path.normpath(r.folder / "train.json") not in marks}


# ----------------------------------------------------------------------------- tests
def group_job_name(group: str, rules: list[str]) -> str:
    """Snakemake's name of a group job (its ``--comment`` is ``rule_<name>``)."""
    rules = sorted(set(rules))
    return "_".join([group, *(rules[:5] + ["..."] if len(rules) > 5 else rules)])


def sbatch_unit(comment: str, rules: set[str], groups: dict[str, str]) -> str | None:
    """The group or rule a job's ``--comment`` names: ``rule_<group job name>`` for a group
    job (``groups``: name -> group id), ``rule_<rule>[_wildcards_<...>]`` otherwise."""
    name = comment[len("rule_"):] if comment.startswith("rule_") else ""
    if name in groups:
        return f"group {groups[name]}"
    return rule_of(comment, rules)


def test_smoke_workflow_runs_as_job_arrays_and_groups(slurm_cluster, repo_copy, plan, tmp_path):
    work = repo_copy
    listing = dry_run_jobs(plan, work, *SMOKE_ARGS)
    planned = [j for j in listing if not j.local and j.output]
    expected = collections.Counter(j.rule for j in planned)
    assert expected, "the dry run planned no SLURM jobs"
    settings = plan.profile_settings(TEST_PROFILE)
    computed = plan.submissions(listing, settings)
    before, after = computed[-1]["before"], computed[-1]["after"]
    assert before == sum(expected.values())
    members = collections.defaultdict(list)
    for j in planned:
        if j.group_job is not None:
            members[(j.group, j.group_job)].append(j.rule)
    groups = {group_job_name(g, rules): g for (g, _), rules in members.items()}
    assert settings["array_rules"] and groups, "the test profile sets no arrays or groups"

    plan0 = progress_of(work, SMOKE_ARGS[1:])
    samples = []

    def sample_progress() -> bool:
        """`weince progress` once, when some run has finished and snakemake still runs."""
        before = finished_on_disk(work, plan0)
        if not before:
            return False
        p = progress_of(work, SMOKE_ARGS[1:])
        samples.append((before, p, finished_on_disk(work, plan0)))
        return True

    t0 = time.monotonic()
    rc, out = run_snakemake(work, *SMOKE_ARGS, timeout=1500, log=tmp_path / "snakemake.log",
                            during=sample_progress)
    elapsed = time.monotonic() - t0
    assert rc == 0, f"smoke workflow failed on SLURM (exit {rc}):\n{failure_context(work, out)}"

    jobs = sacct_jobs(run_id(out))
    bad = [j for j in jobs if j["State"] != "COMPLETED" or j["ExitCode"] != "0:0"]
    assert not bad, f"SLURM jobs not COMPLETED with exit 0:0: {bad}"
    assert {j["Account"] for j in jobs} == {slurm_cluster["WEINCE_SLURM_ACCOUNT"]}
    assert {j["Partition"] for j in jobs} == {slurm_cluster["WEINCE_SLURM_PARTITION"]}
    # sbatch calls: one per SLURM job id; an array's tasks (<id>_<task>) share their parent's
    rows = collections.defaultdict(list)
    # sacct may leave the comment of some array tasks empty: they take their array's
    comments = {j["JobID"].split("_")[0]: j["Comment"] for j in jobs if j["Comment"]}
    for j in jobs:
        unit = sbatch_unit(comments.get(j["JobID"].split("_")[0], ""), set(expected), groups)
        assert unit, f"sacct job {j} names no rule or group of the dry run"
        rows[unit].append(j)
    calls = {unit: {j["JobID"].split("_")[0] for j in js} for unit, js in rows.items()}
    # plan.submissions names a group by its pattern (eval_{arm}), sacct by its id
    pattern = {g: settings["groups"].get(r, g) for (g, _), rs in members.items() for r in rs}
    measured = collections.Counter()
    for unit, ids in calls.items():
        if unit.startswith("group "):
            unit = f"group {pattern[unit[len('group '):]]}"
        measured[unit] += len(ids)
    measured = dict(measured)
    want = {r["unit"]: r["after"] for r in computed[:-1]}
    assert measured == want, f"sbatch calls per rule/group {measured} != computed {want}"
    assert sum(measured.values()) == after
    # every job of an array rule ran as one of its array's tasks
    for rule in settings["array_rules"] & set(expected):
        assert len(rows[rule]) == expected[rule], (rule, rows[rule], expected[rule])
        if expected[rule] > 1:
            assert all("_" in j["JobID"] for j in rows[rule]), f"{rule} ran without an array"
    print(f"smoke workflow on SLURM: {before} jobs in {after} sbatch calls (one per job: "
          f"{before}) in {elapsed:.0f} s; per rule/group: {measured}")
    check_progress_of_the_smoke_run(work, samples, jobs)

    # every claim of the registry, each with one of the three verdicts
    claims = [c["id"] for c in yaml.safe_load((work / "config" / "claims.yaml").read_text())
              ["claims"]]
    assert claims and len(claims) == len(set(claims))   # however many the registry holds
    summary = work / SUMMARY
    assert summary.exists(), \
        f"{SUMMARY} was not written; outputs: {sorted(work.glob('reports/**/*'))}"
    text = summary.read_text()
    for cid in claims:
        rows = [ln for ln in text.splitlines() if ln.startswith(f"| {cid} |")]
        assert len(rows) == 1, f"{cid}: expected one row in {SUMMARY}, found {len(rows)}"
        # the verdict cell: bold when it says (not) reproduced, plain when not run
        verdict = re.search(r"\| \**(" + "|".join(VERDICTS) + r")\** \|", rows[0])
        assert verdict, f"{cid} has no verdict in {SUMMARY}: {rows[0]}"


def check_progress_of_the_smoke_run(work: Path, samples: list, jobs: list[dict]) -> None:
    """`weince progress` of the smoke run on SLURM: half-way, every count within the files
    before and after it read them; at the end, every training run finished with its
    CPU-hours, none failed, and this folder's SLURM jobs exactly those of the run."""
    assert samples, "no `weince progress` was taken while the smoke run ran"
    before, mid, after = samples[0]
    finished = {n for n, st in states_of(mid).items() if st == "finished"}
    assert before <= finished <= after, (before, finished, after)
    assert len(mid.runs) == sum(collections.Counter(states_of(mid).values()).values())
    assert mid.sacct is not None and mid.sacct.jobs, "no SLURM job seen half-way"
    # a run counted stopped has something to resume from; one queued in SLURM is not stopped
    for r in mid.runs:
        if r.state == "stopped":
            assert any((work / r.folder / f).exists()
                       for f in ("train_log.jsonl", "checkpoint.pt")), r
    assert not mid.failed, mid.failed
    p = progress_of(work, SMOKE_ARGS[1:])
    assert set(states_of(p).values()) == {"finished"}, states_of(p)
    assert not p.failed, p.failed
    assert all(r.unit == "CPU-hours" and r.spent_h and r.spent_h > 0 for r in p.runs)
    assert p.sacct is not None
    assert p.sacct.states() == collections.Counter({"COMPLETED": len(jobs)}), p.sacct.states()
    assert sorted(j.jobid for j in p.sacct.jobs) == sorted(j["JobID"] for j in jobs)
    # every training run is tied to the SLURM job (array task) that executed it, each its own
    assert all(r.slurm is not None and r.slurm.state == "COMPLETED" for r in p.runs)
    assert len({r.slurm.jobid for r in p.runs if r.slurm}) == len(p.runs)
    text = progress_text(p)
    assert "ETA: every planned training run is finished." in text
    assert f"{len(jobs)} COMPLETED" in text
    print("weince progress half-way through the smoke run on SLURM:\n" + progress_text(mid))


RESUME_EPOCHS = 100  # about 0.1-0.2 s per epoch on an idle CPU, 1.5 s on a loaded one; room
#                      for the `weince progress` readings taken before the cancel


def wait_until(predicate, timeout: float, interval: float = 0.25, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def read_log(path: Path) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break            # a line being written right now
    return out


RUN = "digits/smallcnn/infonce/seed7"     # the training run of the cancel test


def check_progress_of_the_cancel(work: Path, configs: tuple[str, ...],
                                 training: list[Progress], jobid: str) -> None:
    """`weince progress` of the cancel test: the run was running while it trained (by its
    lock, and by sacct alone), and after ``scancel`` it is the one failed job, named with
    its SLURM state, its log and its SLURM log; the rest not started."""
    for p in training:
        st = states_of(p)
        assert st.pop(RUN) == "running", states_of(p)
        assert set(st.values()) == {"not started"}, st
    via_sacct = next(r for r in training[1].runs if r.name == RUN)
    assert via_sacct.slurm is not None and via_sacct.slurm.jobid == jobid
    assert via_sacct.slurm.state == "RUNNING"
    text = progress_cli(work, *configs)
    n = all_counts(text)
    row = next(ln for ln in text.splitlines() if ln.startswith("all "))
    planned, finished, running, stopped, failed, not_started = (
        n[k] for k in ("planned", "finished", "running", "stopped", "failed", "not started"))
    assert n["corrupt"] == n["blocked"] == 0, row
    assert (finished, running, stopped, failed) == (0, 0, 0, 1), row
    assert not_started == planned - 1, row
    name = f"pretrain/{RUN}"
    line = failed_entry(text, name)     # its reason whole, its wrapped lines joined
    assert line is not None, f"the cancelled job is not named:\n{text}"
    assert line.startswith(f"- {name}: SLURM job {jobid} CANCELLED (exit code "), line
    assert f"(log: results/smoke/logs/{name}.log; SLURM log: .snakemake/slurm_logs/" \
        f"rule_pretrain/" in line and line.endswith(f"/{jobid}.log)"), line
    assert "1 CANCELLED" in text.split("SLURM jobs of this folder's runs")[1], text
    print(f"weince progress after the cancel:\n{text}")


def test_cancelled_training_job_resumes_from_checkpoint(slurm_cluster, repo_copy, tmp_path):
    work = repo_copy
    # many short epochs (2 steps of 64 images), so that the job can be cancelled mid-run
    override = work / "config" / "cluster_resume.yaml"
    override.write_text(yaml.safe_dump({"vision": {"pretrain": {
        "epochs": RESUME_EPOCHS, "batch_size": 64, "max_train_images": 128}}}))
    configs = ("--configfile", *SMOKE_ARGS[1:], str(override.relative_to(work)))
    smoke = yaml.safe_load((work / SMOKE_ARGS[1]).read_text())
    v = smoke["vision"]
    run_dir = work / VISION_RUN.format(
        results=smoke["results"], profile=smoke["profile"], dataset=v["datasets"][0],
        backbone=v["backbones"][0], arm="infonce", seed=v["seeds"][0])
    encoder = str((run_dir / "encoder.pt").relative_to(work))
    # Status polling with squeue for this test: in sacct a job cancelled by a user reads
    # "CANCELLED by <uid>", which snakemake-executor-plugin-slurm 2.8.0 does not recognise
    # as a failure (it compares the whole State string), so with sacct Snakemake would wait
    # for the cancelled job forever; squeue reports plain "CANCELLED" (docs/cluster.md).
    args = (encoder, *configs, "--slurm-status-command", "squeue")

    # 1. start the training job on the cluster and cancel it after three epochs
    log1 = tmp_path / "run1.log"
    with open(log1, "w") as fh:
        proc = subprocess.Popen(snakemake_cmd(*args), cwd=work, stdout=fh,
                                stderr=subprocess.STDOUT)
    try:
        def submitted():
            m = re.search(r"submitted with SLURM jobid (\d+)", log1.read_text())
            assert proc.poll() is None or m, f"snakemake ended early:\n{log1.read_text()[-3000:]}"
            return m and m.group(1)

        jobid = wait_until(submitted, 120, what="the pretrain job's submission")
        wait_until(lambda: len(read_log(run_dir / "train_log.jsonl")) >= 3
                   or proc.poll() is not None, 240, what="three logged epochs")
        # while it trains: one run running, seen in the lock table, and without the lock
        # table from sacct alone (a job on another node)
        # (read again until both say so: sacct reports a started job a moment after it runs)
        def both_running():
            seen = [progress_of(work, configs[1:]),
                    progress_of(work, configs[1:], lock_table=tmp_path / "no-lock-table")]
            return seen if all(states_of(p).get(RUN) == "running" for p in seen) else None

        training = wait_until(both_running, 60, interval=1.0,
                              what="the run read as running, by its lock and by sacct")
        before = read_log(run_dir / "train_log.jsonl")
        assert len(before) < RESUME_EPOCHS, "training finished before it could be cancelled"
        subprocess.run(["scancel", jobid], check=True, timeout=30)
        rc1 = proc.wait(timeout=180)
    finally:
        stop_snakemake(proc, log1)
    out1 = log1.read_text()
    assert rc1 != 0, f"snakemake should fail when its job is cancelled:\n{out1[-3000:]}"
    assert "CANCELLED" in out1, f"snakemake did not report the cancellation:\n{out1[-3000:]}"
    ckpt = run_dir / "checkpoint.pt"
    assert ckpt.exists(), "checkpoint.pt did not survive the cancel"
    assert not (run_dir / "encoder.pt").exists()
    # the cancel really stopped training (no process of the job left writing checkpoints)
    stamp = ckpt.stat().st_mtime_ns
    time.sleep(3)
    assert ckpt.stat().st_mtime_ns == stamp, "checkpoint.pt still changes after the cancel"
    check_progress_of_the_cancel(work, configs[1:], training, jobid)

    # 2. re-run: the job resumes from the checkpoint and finishes
    rc2, out2 = run_snakemake(work, *args, timeout=300, log=tmp_path / "run2.log")
    assert rc2 == 0, f"re-run failed (exit {rc2}):\n{failure_context(work, out2)}"
    summary = json.loads((run_dir / "train.json").read_text())
    resumed = summary["resumed_from_epoch"]
    after = read_log(run_dir / "train_log.jsonl")
    assert [r["epoch"] for r in after] == list(range(1, RESUME_EPOCHS + 1))
    # the checkpoint is the last epoch logged before the cancel (or the one before it, if
    # the cancel fell between the log write and the checkpoint write), or a later one
    assert resumed is not None and len(before) - 1 <= resumed < RESUME_EPOCHS, summary
    # the epochs before the checkpoint were not trained again: their records (loss, time
    # per epoch) are the very ones logged before the cancel
    n = min(resumed, len(before))
    assert n >= 2 and after[:n] == before[:n]
    p = progress_of(work, configs[1:])
    assert states_of(p)[RUN] == "finished" and not p.failed, (states_of(p), p.failed)

    # 3. SLURM's view: the first job CANCELLED, the second COMPLETED, both the pretrain rule
    jobs1, jobs2 = sacct_jobs(run_id(out1)), sacct_jobs(run_id(out2))
    assert [j["State"].split()[0] for j in jobs1] == ["CANCELLED"], jobs1
    assert [j["State"] for j in jobs2] == ["COMPLETED"], jobs2
    assert all(rule_of(j["Comment"], {"pretrain"}) == "pretrain" for j in jobs1 + jobs2)
    print(f"cancelled SLURM job {jobid} after {len(before)} logged epochs; the re-run resumed "
          f"from epoch {resumed} of {RESUME_EPOCHS}")


SIGTERM_EPOCHS = 4


def test_sigterm_mid_epoch_requeues_and_ends_as_an_uninterrupted_run(slurm_cluster, repo_copy,
                                                                    tmp_path):
    """SLURM's preemption / time-limit signal: a pretraining job sent SIGTERM half-way
    through an epoch writes its checkpoint at the next step and exits 143; Snakemake
    resubmits it (restart-times), the new job resumes at that step, and the final encoder
    equals an uninterrupted run's with the same config (same seed, CPU, one thread)."""
    work = repo_copy
    # many short steps (batches of 8 of the digits training split: 179 steps per epoch), so that
    # the signal falls inside an epoch
    override = work / "config" / "cluster_sigterm.yaml"
    override.write_text(yaml.safe_dump({"vision": {"pretrain": {
        "epochs": SIGTERM_EPOCHS, "batch_size": 8, "max_train_images": None}}}))
    # and a resources overlay as the rehearsal writes it (reports/rehearsal/resources.yaml):
    # its time and memory must be what SLURM gets (-t, --mem)
    resources = work / "resources_overlay.yaml"
    resources.write_text(yaml.safe_dump({"resources": {
        "pretrain": {"gpu": 0, "mem_mb": 1234, "runtime": 37, "threads": 1}}}))
    configs = ("--configfile", *SMOKE_ARGS[1:], str(override.relative_to(work)),
               resources.name)
    smoke = yaml.safe_load((work / SMOKE_ARGS[1]).read_text())
    v = smoke["vision"]
    run_dir = work / VISION_RUN.format(
        results=smoke["results"], profile=smoke["profile"], dataset=v["datasets"][0],
        backbone=v["backbones"][0], arm="infonce", seed=v["seeds"][0])
    encoder = str((run_dir / "encoder.pt").relative_to(work))
    args = (encoder, *configs, "--restart-times", "1")

    log = tmp_path / "run.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(snakemake_cmd(*args), cwd=work, stdout=fh,
                                stderr=subprocess.STDOUT)
    try:
        def submitted():
            m = re.search(r"submitted with SLURM jobid (\d+)", log.read_text())
            assert proc.poll() is None or m, f"snakemake ended early:\n{log.read_text()[-3000:]}"
            return m and m.group(1)

        jobid = wait_until(submitted, 120, what="the pretrain job's submission")
        first = wait_until(lambda: read_log(run_dir / "train_log.jsonl")[:1]
                           or proc.poll() is not None, 600, what="the first logged epoch")
        assert proc.poll() is None, f"snakemake ended early:\n{log.read_text()[-3000:]}"
        time.sleep(first[0]["epoch_s"] / 2)          # half-way through epoch 2
        t_signal = time.time()
        subprocess.run(["scancel", "--signal=TERM", jobid], check=True, timeout=30)
        rc = proc.wait(timeout=900)
    finally:
        stop_snakemake(proc, log)
    out = log.read_text()
    assert rc == 0, (f"the run did not finish after the SIGTERM (exit {rc}):\n"
                     f"{failure_context(work, out)}")

    # SLURM's view: the signalled job failed (exit 143 inside), a second one completed
    jobs = sacct_jobs(run_id(out))
    assert [j["State"] for j in jobs] == ["FAILED", "COMPLETED"], jobs
    assert all(rule_of(j["Comment"], {"pretrain"}) == "pretrain" for j in jobs)
    end, limit, mem = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", jobid, "-o", "End,Timelimit,ReqMem"],
        capture_output=True, text=True, timeout=30).stdout.split()[0].split("|")
    assert (limit, mem) == ("00:37:00", "1234M"), (limit, mem)   # from the overlay
    exit_s = time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S")) - t_signal
    summary = json.loads((run_dir / "train.json").read_text())
    # resumed inside epoch 2, at the step after the one in flight when the signal came
    assert summary["resumed_from_epoch"] == 1, summary
    assert 0 < summary["resumed_in_epoch_at_step"] < summary["steps_per_epoch"], summary
    # resumed mid-epoch: every epoch logged once, and the result is the uninterrupted one's
    assert [r["epoch"] for r in read_log(run_dir / "train_log.jsonl")] == \
        list(range(1, SIGTERM_EPOCHS + 1))
    cfg = {k: val for k, val in summary["provenance"]["config"].items()
           if k not in ("norm_mean", "norm_std")}
    ref = tmp_path / "uninterrupted"
    pretrain(cfg, ref)
    a = torch.load(run_dir / "encoder.pt", map_location="cpu", weights_only=True)["state_dict"]
    b = torch.load(ref / "encoder.pt", map_location="cpu", weights_only=True)["state_dict"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ckpt_s = summary["preempted"][0]["signal_to_checkpoint_s"]
    print(f"SIGTERM to job {jobid} at epoch 2: checkpoint written {ckpt_s:.2f} s after the "
          f"signal, job ended {exit_s:.0f} s after it (sacct End, 1 s resolution); resumed at "
          f"step {summary['resumed_in_epoch_at_step']} of {summary['steps_per_epoch']} and "
          f"equal to the uninterrupted run")


CAPPED_EPOCHS = 60   # ~1.5-2 s per epoch (batches of 8 digits) after a start-up of 15 s to
#                      a minute and a half in each job: 2 to ~5 two-minute jobs (40 epochs
#                      fitted in one job on an idle machine)
CAPPED_MINUTES = 2   # each job's start-up (Snakemake in the job, imports, data) is ~15-55 s


def test_capped_run_continues_as_segments_from_its_checkpoint(slurm_cluster, repo_copy,
                                                              tmp_path):
    """`cost.max_runtime` caps each job's request; a run that needs longer is planned as
    segments (the rule's retries), each ended by SLURM at the cap and resumed from the
    checkpoint by the next attempt, until the run is complete and equal in its epochs to an
    uninterrupted one (each epoch logged once)."""
    work = repo_copy
    smoke = yaml.safe_load((work / SMOKE_ARGS[1]).read_text())
    v = smoke["vision"]
    key = f"{v['datasets'][0]}/{v['backbones'][0]}"
    override = work / "config" / "cluster_capped.yaml"
    # a measured step time that makes the run need 48 minutes: 24 two-minute segments, room
    # for a loaded machine (each job trains for about a minute after its start-up)
    cost = {"enabled": True, "max_runtime": CAPPED_MINUTES, "overhead_min": 0,
            "safety_factor": 1.0, "extra_restarts": 1,
            "measured": [{"gpu": "h100-sxm", "setting": key, "precision": "tf32", "batch": 8,
                          "step_s": 2880.0 / (CAPPED_EPOCHS * (1438 // 8)),
                          "source": "a made-up step time: 48 minutes of training"}]}
    override.write_text(yaml.safe_dump({
        # no keep_checkpoint: the workflow keeps a finished run's checkpoint until its first
        # consumer starts, so a segment that ends training seconds before the cap and is
        # killed while Snakemake stores its outputs (which Snakemake then deletes) is
        # resumed at its last epoch by the next one, not at epoch 1
        "vision": {"pretrain": {"epochs": CAPPED_EPOCHS, "batch_size": 8,
                                "max_train_images": None}},
        "cost": cost}))
    merged = yaml.safe_load((work / "config" / "config.yaml").read_text())
    for extra in (smoke, yaml.safe_load(override.read_text())):
        for k, val in extra.items():
            merged[k] = {**merged[k], **val} if isinstance(val, dict) and isinstance(
                merged.get(k), dict) else val
    merged["vision"]["pretrain"] = {**smoke["vision"]["pretrain"],
                                    **yaml.safe_load(override.read_text())["vision"]["pretrain"]}
    plan = job_runtime(Profile.of(merged), key)
    assert plan["runtime"] == CAPPED_MINUTES and plan["segments"] == 24, plan
    retries = retries_for(Profile.of(merged), "vision")
    assert retries == plan["segments"] - 1 + cost["extra_restarts"]

    run_dir = work / VISION_RUN.format(
        results=smoke["results"], profile=smoke["profile"], dataset=v["datasets"][0],
        backbone=v["backbones"][0], arm="infonce", seed=v["seeds"][0])
    encoder = str((run_dir / "encoder.pt").relative_to(work))
    args = (encoder, "--configfile", SMOKE_ARGS[1], str(override.relative_to(work)),
            "--slurm-status-command", "squeue")
    rc, out = run_snakemake(work, *args, timeout=3000, log=tmp_path / "capped.log")
    assert rc == 0, f"the capped run did not finish (exit {rc}):\n{failure_context(work, out)}"

    jobs = sacct_jobs(run_id(out))
    states = [j["State"].split()[0] for j in jobs]
    assert len(jobs) >= 2, f"the run was not capped (one job): {jobs}"
    assert states[-1] == "COMPLETED" and all(s in ("TIMEOUT", "FAILED") for s in states[:-1]), \
        states
    assert len(jobs) <= retries + 1
    limits = subprocess.run(
        ["sacct", "-X", "-n", "-P", "--name", run_id(out), "-S", "now-2days", "-o",
         "Timelimit"], capture_output=True, text=True, timeout=30).stdout.split()
    assert set(limits) == {f"00:0{CAPPED_MINUTES}:00"}, limits   # every segment: the cap
    summary = json.loads((run_dir / "train.json").read_text())
    assert summary["resumed_from_epoch"] is not None and summary["resumed_from_epoch"] >= 1
    assert [r["epoch"] for r in read_log(run_dir / "train_log.jsonl")] == \
        list(range(1, CAPPED_EPOCHS + 1))
    print(f"capped run: {len(jobs)} {CAPPED_MINUTES}-minute jobs ({', '.join(states)}), "
          f"planned at most {retries + 1}; resumed last from epoch "
          f"{summary['resumed_from_epoch']}")
