"""How far a profile's campaign is: its training runs planned, finished, running, stopped,
failed and not started, the device-hours spent beside the forecast, and the rest's ETA
(``weince progress``; docs/cluster.md, "How far is it").

    from weince.cost.progress import progress, progress_text
    print(progress_text(progress(prof)))          # prof: load_profile(["config/smoke.yaml"])

Everything is read from files; nothing is locked or written, so it is safe beside a running
Snakemake:

- **the plan**: the training runs of the profile (:func:`weince.cost.estimate.estimate`,
  the runs ``weince plan --claims`` prices), per claim as ``weince plan --claims`` groups
  them;
- **finished**: a run folder with its ``train.json`` that Snakemake does not mark
  incomplete (``.snakemake/incomplete/``);
- **running**: a run whose lock file (:mod:`weince.utils.runlock`, ``.train.lock``) a live
  process holds, read from the kernel's table ``/proc/locks`` (no lock is taken to probe);
- **stopped**: started (a ``train_log.jsonl`` or ``checkpoint.pt`` without ``train.json``)
  and no live writer: killed, preempted or waiting for its next segment; a re-run resumes
  it from ``checkpoint.pt``. A run with nothing written whose outputs Snakemake marks
  incomplete (``.snakemake/incomplete/``: a job submitted to SLURM and queued, or starting)
  is not started, and listed as submitted;
- **corrupt**: finished, but its ``encoder.pt`` (SimCSE: ``model/``) is missing or not the
  file its ``train.json`` records (``encoder_sha256``, ``model_sha256``: truncated, edited or
  swapped, whatever its timestamp); the reason names the file and the command that rebuilds
  it. Every finished run's encoder is read to check it;
- **failed**: the job's log (``results/<profile>/logs/<rule>/...log``, written by
  :func:`weince.pipeline.joblog.log_to`) ends in a traceback and no live writer is there;
  every failed job of every rule is listed with that line and the log's path;
- **spent**: per finished run, the benchmark file's wall seconds (``benchmarks/<rule>/``,
  for a SimCSE run of ``vision_jobs: per_arm`` its ``text_run`` job's, STS included)
  or ``train.json``'s ``wall_s`` (the longer: a resumed run's benchmark holds its last
  segment only) x the GPUs it ran on, in GPU-hours; a CPU run's x its torch threads, in
  CPU-hours (core-hours, as a cluster accounts them);
- **forecast**: the counted-FLOPs estimate of the same runs on the GPU type they ran on
  (docs/cost.md), before any measurement; a CPU has none;
- **ETA of every job left**: the jobs a dry run of the target still plans (training and
  evaluation, a running one less the time since it started), each at the mean wall time of
  its rule's finished jobs (their benchmarks), else the cost model's (an evaluation job on
  a GPU profile), else the median finished job, in core-seconds over the live run's
  ``--cores`` (else over the jobs running now), or the longest chain of jobs waiting for
  one another where longer (:func:`jobs_left`, :func:`eta_seconds`); per claim, its jobs
  left and its failed jobs;
- **training ETA**: the runs left (a running one by the part of its epochs or steps not
  logged yet) at the measured wall time per run of their setting and GPU type, else at the
  forecast learned from the measured step times
  (:func:`weince.cost.learned.learned_profile`), divided by the training jobs running now;
- **blocked**: a run no re-run can finish before a manual step, named with it: its failed
  job could not read its ``checkpoint.pt``, or its ``encoder.pt`` is not the one its
  ``train.json`` records (``encoder_sha256``) (:func:`blocked_step`);
- **SLURM**: where Snakemake's ``slurm`` executor ran in this folder and ``sacct`` exists
  (never needed), the states of this folder's SLURM jobs (:mod:`weince.cost.slurm_jobs`):
  a run whose newest SLURM job runs is running (on whatever node), one whose job ended
  FAILED, CANCELLED, OUT_OF_MEMORY, ... is failed with that state as its reason, one ended
  at its time limit (TIMEOUT, PREEMPTED) is stopped; pending jobs are counted.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weince.cost.estimate import Estimate, estimate, gpu_set, hours_range, text_steps
from weince.cost.evaljobs import EVAL_RULES, work_seconds
from weince.cost.job_times import job_times
from weince.cost.learned import learned_profile
from weince.cost.slurm_jobs import ENDED_BADLY, INTERRUPTED, LIVE, SlurmJob, SlurmView, slurm_jobs
from weince.cost.throughput import device_for_name
from weince.pipeline.digests import output_problem
from weince.pipeline.profile import Profile
from weince.cost.plan import JobInfo, parse_dry_run
from weince.pipeline.targets import claim_inputs, claims

__all__ = ["RunState", "FailedJob", "Progress", "progress", "progress_text", "incomplete_marks",
           "live_lock_ids", "failure_reason", "failed_jobs", "slurm_failed_jobs", "STATES",
           "JobLeft", "JobsLeft", "jobs_left", "dry_run_jobs", "job_eta", "eta_seconds",
           "blocked_step",
           "mark_blocked"]

# corrupt: finished once, but its encoder (model) is not the one its train.json records;
# blocked: failed in a way no re-run mends until someone does the step it names
STATES = ("finished", "running", "stopped", "failed", "corrupt", "not started", "blocked")


@dataclass
class RunState:
    """One training run of the plan and what the files say of it."""

    stage: str                  # vision | text
    key: str                    # the setting: "digits/smallcnn" | "text/minilm"
    arm: str
    seed: int
    folder: Path
    log: Path
    state: str = "not started"
    done: float = 0.0           # the part of its epochs (steps) logged, 0..1
    unit: str | None = None     # GPU-hours | CPU-hours, when measured
    spent_h: float | None = None    # device-hours of a finished run
    wall_h: float | None = None     # its wall hours
    gpu: str | None = None      # devices.yaml key of the GPU it ran on; "cpu"; None unknown
    reason: str | None = None   # the failed job's one-line reason
    ablation: bool = False
    slurm: SlurmJob | None = None   # its newest SLURM job, where one executed it
    submitted: bool = False     # not started, but Snakemake marks its outputs (queued, starting)

    @property
    def name(self) -> str:
        return f"{self.key}/{self.arm}/seed{self.seed}"


@dataclass(frozen=True)
class FailedJob:
    rule: str
    job: str                    # the log's path under logs/<rule>/, without ``.log``
    reason: str
    log: Path
    slurm_log: Path | None = None   # the SLURM job's log, for a job that ran through SLURM


@dataclass
class Progress:
    profile: str
    runs: list[RunState] = field(default_factory=list)
    claims: list[tuple[str, list[RunState]]] = field(default_factory=list)
    failed: list[FailedJob] = field(default_factory=list)
    forecast: dict[str, Estimate] = field(default_factory=dict)   # gpu -> prior estimate
    learned: dict[str, Estimate] = field(default_factory=dict)    # gpu -> learned estimate
    sacct: SlurmView | None = None
    unknowns: list[str] = field(default_factory=list)
    target: str | None = None
    cpu: bool = False           # the profile runs on the CPU (``device: cpu``)
    jobs: JobsLeft | None = None    # every job left (a dry run), where it was asked for


# ----------------------------------------------------------------------------- the files
def incomplete_marks(workdir: str | os.PathLike) -> set[str] | None:
    """The outputs Snakemake marks incomplete (``.snakemake/incomplete/``: one file per
    output, named by its path in URL-safe base64), as paths relative to ``workdir``; None
    when there is no ``.snakemake`` folder there."""
    base = Path(workdir) / ".snakemake"
    if not base.is_dir():
        return None
    out = set()
    for f in (base / "incomplete").glob("*"):
        try:
            out.add(os.path.normpath(base64.urlsafe_b64decode(f.name).decode()))
        except (ValueError, UnicodeDecodeError):
            continue
    return out


def live_lock_ids(table: str | os.PathLike = "/proc/locks") -> set[tuple[int, int, int]] | None:
    """``(major, minor, inode)`` of every file a live process holds a lock on, read from
    the kernel's lock table (nothing is locked to find out); None where there is none."""
    try:
        text = Path(table).read_text()
    except OSError:
        return None
    out = set()
    for line in text.splitlines():
        m = re.search(r"\s([0-9a-f]+):([0-9a-f]+):(\d+)\s", line)
        if m and "->" not in line.split(":", 1)[0]:   # "->" lines wait for a lock
            out.add((int(m.group(1), 16), int(m.group(2), 16), int(m.group(3))))
    return out


def _held(lock: Path, live: set[tuple[int, int, int]] | None) -> bool | None:
    if live is None:
        return None
    try:
        st = lock.stat()
    except OSError:
        return False
    return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in live


_TRACE = "Traceback (most recent call last):"


def failure_reason(log: str | os.PathLike) -> str | None:
    """The one-line reason a job's log gives for its failure (the last line of its last
    traceback, or the ``exit N: ...`` line of a deliberate exit), None for a log that
    shows no failure (a job still running, or one that ended well)."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return None
    starts = [i for i, s in enumerate(lines) if s.startswith(_TRACE)]
    if starts:
        tail = [s.strip() for s in lines[starts[-1] + 1:] if s.strip()]
        # the exception line is the first unindented line after the frames
        body = [s for s in lines[starts[-1] + 1:] if s.strip() and not s.startswith(" ")]
        text = body[-1] if body else (tail[-1] if tail else "traceback without a message")
        return " ".join(text.split())
    exits = [s for s in lines if re.match(r"exit [1-9]\d*: ", s)]
    return exits[-1] if exits else None


def failed_jobs(logs: str | os.PathLike, benchmarks: str | os.PathLike,
                live: set[tuple[int, int, int]] | None = None) -> list[FailedJob]:
    """Every job under ``logs`` whose log ends in a failure and that no later success
    (its benchmark file, newer than the log) or live writer covers."""
    base, bench = Path(logs), Path(benchmarks)
    out: list[FailedJob] = []
    if not base.is_dir():
        return out
    for log in sorted(base.rglob("*.log")):
        reason = failure_reason(log)
        if reason is None:
            continue
        rel = log.relative_to(base).with_suffix("")
        tsv = bench / f"{rel.as_posix()}.tsv"
        if tsv.exists() and tsv.stat().st_mtime >= log.stat().st_mtime:
            continue
        rule = rel.parts[0] if len(rel.parts) > 1 else rel.name
        out.append(FailedJob(rule, rel.as_posix(), reason, log))
    return out


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _logged_part(folder: Path, stage: str, total: int) -> float:
    """The part of a run's epochs (vision) or steps (text) its ``train_log.jsonl`` holds."""
    try:
        lines = (folder / "train_log.jsonl").read_text().splitlines()
    except OSError:
        return 0.0
    last = 0
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue   # a line being written
        last = max(last, int(rec.get("epoch" if stage == "vision" else "step") or 0))
    return min(1.0, last / total) if total else 0.0


# ----------------------------------------------------------------------------- a run
def _measure(rs: RunState, train: dict[str, Any], bench: dict[str, Any]) -> None:
    """Spent device-hours, wall hours and GPU type of a finished run."""
    timing = train.get("step_timing") or {}
    dev = str(timing.get("device") or train.get("device") or "")
    wall_s = max(float(bench.get("s") or 0.0), float(train.get("wall_s") or 0.0))
    rs.wall_h = wall_s / 3600.0 if wall_s else None
    if dev.startswith("cuda"):
        rs.unit = "GPU-hours"
        rs.gpu = device_for_name(timing.get("device_name")) or \
            f"unlisted: {timing.get('device_name') or 'unknown GPU'}"
        gpus = int(train.get("world_size") or 1)
        # a run that shared its GPU (weince.utils.gpu_slots) held a 1/jobs_per_gpu share
        share = (timing.get("gpu_slot") or {}).get("jobs_per_gpu") or 1
        rs.spent_h = None if rs.wall_h is None else rs.wall_h * gpus / int(share)
    elif dev:
        rs.unit, rs.gpu = "CPU-hours", "cpu"
        cores = int(train.get("torch_threads") or 1)
        rs.spent_h = None if rs.wall_h is None else rs.wall_h * cores


FUSED_RULE = {"simcse": "text_run"}   # the job that trains a run under `vision_jobs: per_arm`


def _state(rs: RunState, rule: str, marks: set[str] | None, live, cwd: Path,
           total: int, bench: dict[str, dict[str, Any]]) -> None:
    train_json = rs.folder / "train.json"
    rel = os.path.normpath(os.path.relpath(train_json, cwd))
    marked = marks is not None and rel in marks
    held = _held(rs.folder / ".train.lock", live)
    train = _load(train_json) if train_json.exists() and not marked else None
    if train is not None and not held:
        rs.state, rs.done = "finished", 1.0
        # a fused job's benchmark (`per_arm`'s text_run: SimCSE and its STS evaluation)
        # stands for its training run where the training rule has none
        _measure(rs, train, bench.get(f"{rule}/{_tag(rs)}")
                 or bench.get(f"{FUSED_RULE.get(rule, rule)}/{_tag(rs)}", {}))
        return
    if held:
        rs.state = "running"
    elif (reason := failure_reason(rs.log)) is not None:
        rs.state, rs.reason = "failed", reason
    elif (rs.folder / "train_log.jsonl").exists() or (rs.folder / "checkpoint.pt").exists():
        rs.state = "stopped"
    elif marked:        # submitted (SLURM marks at submission) or starting: nothing to resume
        rs.submitted = True
    rs.done = _logged_part(rs.folder, rs.stage, total) if rs.state != "not started" else 0.0


def _tag(rs: RunState) -> str:
    key = rs.key.split("/", 1)[1] if rs.stage == "text" else rs.key
    return f"{key}/{rs.arm}/seed{rs.seed}"


def _bench_rows(folder: Path) -> dict[str, dict[str, Any]]:
    """``rule/job`` -> ``{"s": wall seconds}`` of every benchmark file under ``folder``."""
    return {t.job: {"s": t.seconds} for t in job_times(folder)}


def _plan_runs(prof: Profile, est: Estimate) -> list[RunState]:
    root, name = prof.results, prof.name
    out = []
    for r in est.runs:
        if r.stage == "vision":
            d, b = r.setting.key.split("/")
            folder = Path(root) / name / "vision" / d / b / r.arm / f"seed{r.seed}"
            log = Path(root) / name / "logs" / "pretrain" / d / b / r.arm / f"seed{r.seed}.log"
        else:
            model = r.setting.key.split("/", 1)[1]
            folder = Path(root) / name / "text" / model / r.arm / f"seed{r.seed}"
            log = Path(root) / name / "logs" / "simcse" / model / r.arm / f"seed{r.seed}.log"
        out.append(RunState(r.stage, r.setting.key, r.arm, r.seed, folder, log,
                            ablation=r.ablation))
    return out


def _epochs(prof: Profile, dataset: str) -> int:
    return prof.vision.pretrain_for(dataset).epochs


# ----------------------------------------------------------------------------- SLURM
def _slurm_state(rs: RunState, view: SlurmView, cwd: Path, total: int) -> None:
    """What the run's newest SLURM job adds to its files' state: running on a node this
    machine cannot see, failed with the job's SLURM state, stopped at a time limit."""
    job = view.latest(os.path.relpath(rs.log, cwd))
    if job is None:
        return
    rs.slurm = job
    if rs.state == "finished":
        return
    if job.state in LIVE:
        rs.state, rs.reason = "running", None
    elif job.state in ENDED_BADLY and rs.state != "running":
        why = failure_reason(rs.log)
        rs.state, rs.reason = "failed", job.reason + (f": {why}" if why else "")
    elif job.state in INTERRUPTED and rs.state != "running":
        rs.state, rs.reason = "stopped", None
    rs.done = _logged_part(rs.folder, rs.stage, total)


def slurm_failed_jobs(view: SlurmView, failed: list[FailedJob], logs: Path, benchmarks: Path,
                      cwd: Path) -> list[FailedJob]:
    """``failed`` (the jobs whose logs end in a traceback) with the jobs whose newest SLURM
    job ended badly (FAILED, CANCELLED, OUT_OF_MEMORY, ...) and that no later success
    covers, each with the SLURM state and its SLURM log."""
    out = {f.job: f for f in failed}
    base = Path(os.path.relpath(logs, cwd))
    for rel, js in view.by_log.items():
        job = js[-1]
        path = Path(rel)
        if job.state not in ENDED_BADLY or not path.is_relative_to(base):
            continue
        name = path.relative_to(base).with_suffix("").as_posix()
        tsv = benchmarks / f"{name}.tsv"
        slurm_log = cwd / job.slurm_log if job.slurm_log else None
        ended = slurm_log.stat().st_mtime if slurm_log and slurm_log.exists() else None
        if ended is not None and tsv.exists() and tsv.stat().st_mtime >= ended:
            continue        # a later run of the job succeeded (locally, or in SLURM)
        why = failure_reason(cwd / path)
        out[name] = FailedJob(name.split("/", 1)[0], name,
                              job.reason + (f": {why}" if why else ""), path, job.slurm_log)
    return [out[k] for k in sorted(out)]


def _slurm_lines(view: SlurmView) -> list[str]:
    states = view.states()
    by_rule: dict[str, Counter] = defaultdict(Counter)
    for j in view.jobs:
        if j.slurm_log is not None and len(j.slurm_log.parts) > 2:
            by_rule[j.slurm_log.parts[2]][j.state] += 1
    out = [f"SLURM jobs of this folder's runs (sacct; {len(view.names)} Snakemake run(s)): "
           + (", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none listed")]
    if by_rule:
        out.append("  by rule or group (jobs that started): " + "; ".join(
            f"{r}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items()))
            for r, c in sorted(by_rule.items())))
    return out


# ----------------------------------------------------------------------------- the whole
def progress(prof: Profile, *, workdir: str | os.PathLike | None = None,
             claim: str | None = None, use_sacct: bool = True,
             lock_table: str | os.PathLike = "/proc/locks",
             configfiles: list[str] | None = None, target: str | None = None,
             count_jobs: bool = False) -> Progress:
    """What the files of ``prof`` (its ``results/<profile>/``, Snakemake's
    ``.snakemake/`` in ``workdir``, default the current folder) say of its training runs
    (module docstring); ``claim``: only the runs of that claim. ``count_jobs``: every job
    left of ``target`` (everything: None) too, from a dry run with ``configfiles``
    (:func:`jobs_left`)."""
    cwd = Path(workdir or os.getcwd())
    est = estimate(prof)
    runs = _plan_runs(prof, est)
    marks, live = incomplete_marks(cwd), live_lock_ids(lock_table)
    base = Path(prof.results) / prof.name
    bench = _bench_rows(base / "benchmarks")
    steps = text_steps(prof) if prof.text.enabled else 0
    view = slurm_jobs(cwd) if use_sacct else None
    for rs in runs:
        rule = "pretrain" if rs.stage == "vision" else "simcse"
        total = _epochs(prof, rs.key.split("/")[0]) if rs.stage == "vision" else steps
        _state(rs, rule, marks, live, cwd, total, bench)
        if view is not None:
            _slurm_state(rs, view, cwd, total)
        if rs.state == "finished" and (bad := output_problem(rs.folder, rs.stage, prof)):
            rs.state, rs.reason = "corrupt", bad   # its encoder (model) is not the one recorded
    mark_blocked(runs)
    p = Progress(prof.name, runs=runs, target=claim, cpu=prof.device.strip().lower() == "cpu")
    p.claims = _claims(prof, runs)
    if claim is not None:
        p.claims = [(c, rs) for c, rs in p.claims if c == claim]
        keep = {id(r) for _, rs in p.claims for r in rs}
        p.runs = [r for r in runs if id(r) in keep]
    p.failed = failed_jobs(base / "logs", base / "benchmarks", live)
    if view is not None:
        p.failed = slurm_failed_jobs(view, p.failed, base / "logs", base / "benchmarks", cwd)
    if count_jobs:
        p.jobs = jobs_left(prof, configfiles or [], target, cwd, marks)
    _forecasts(p, prof)
    p.sacct = view
    p.unknowns = _unknowns(p, marks, live)
    return p


def _claims(prof: Profile, runs: list[RunState]) -> list[tuple[str, list[RunState]]]:
    """Per claim, the runs whose folders hold a file the claim reads (its table's inputs,
    :func:`weince.pipeline.targets.claim_inputs`: a scale model's rows too), then the
    ablation runs, then the runs none of these reads (the grid points, whose validation
    numbers choose a final grid arm's setting)."""
    by_folder = {os.path.normpath(r.folder): r for r in runs}
    out = []
    for c in claims(prof):
        mine = {id(r): r for f in claim_inputs(prof, c)
                if (r := by_folder.get(os.path.normpath(Path(f).parent))) is not None}
        out.append((c["id"], list(mine.values())))
    abl = [r for r in runs if r.ablation]
    if abl:
        out.append(("ablations", abl))
    # runs no table reads and no ablation: the grid points that choose a final arm's
    # setting on validation (their row makes the rows account for "all")
    seen = {id(r) for _, rs in out for r in rs}
    rest = [r for r in runs if id(r) not in seen]
    if rest:
        out.append(("grid points" if all("@" in r.arm for r in rest) else "other runs", rest))
    return out


def _forecasts(p: Progress, prof: Profile) -> None:
    """The prior estimate on every GPU type a run was measured on (else ``cost.gpu``),
    and the estimate learned from the profile's measured step times."""
    gpus = sorted({r.gpu for r in p.runs if r.gpu and r.gpu != "cpu"
                   and not r.gpu.startswith("unlisted")}) or gpu_set(prof)
    learned = learned_profile(prof)
    for g in gpus:
        p.forecast[g] = estimate(prof, g)
        p.learned[g] = estimate(learned, g)


def _unknowns(p: Progress, marks, live) -> list[str]:
    out = []
    if live is None:
        out.append("no /proc/locks here: a started run cannot be told running from stopped "
                   "(both show as stopped)")
    else:
        out.append("running = a live process on this machine holds the run's lock"
                   + ("; a job on another node shows as stopped (no SLURM run of this "
                      "folder was read)" if p.sacct is None else
                      ", or its newest SLURM job is RUNNING (sacct)"))
    if p.sacct is not None:
        out.append("a SLURM job still waiting in the queue has no log yet, so it is not tied "
                   "to its run: a run whose retry is queued shows its last job's end")
    if marks is None:
        out.append("no .snakemake folder in the current folder: Snakemake's incomplete "
                   "markers were not read (run this where Snakemake runs)")
    out.append("spent counts finished runs only: an unfinished job has no benchmark yet")
    if any(r.unit == "CPU-hours" for r in p.runs):
        out.append("CPU runs: their CPU-hours have no forecast (the cost model prices GPUs); "
                   "the ETA uses their measured wall time")
    out.append("the ETAs assume no queue waits, and as many jobs at once as the run's cores "
               "hold (where its log says them; else as run now, one when none does)"
               + ("" if p.jobs is not None else "; with --no-jobs, evaluation jobs are not "
                  "counted"))
    return out


# ----------------------------------------------------------------------------- the text
def _counts(runs: list[RunState]) -> Counter:
    return Counter(r.state for r in runs)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else (f"{x:.1f}" if x >= 1 else
                                        (f"{x:.2f}" if x >= 0.01 else f"{x:.4f}"))


def _spent(runs: list[RunState], p: Progress) -> tuple[str, str, str]:
    """(spent, forecast of the same runs, ratio) cells of a table row."""
    done = [r for r in runs if r.state == "finished" and r.spent_h is not None]
    if not done:
        return "-", "-", "-"
    units = sorted({r.unit for r in done if r.unit})
    spent = sum(r.spent_h or 0.0 for r in done)
    priced = [(r, p.forecast[r.gpu].settings[r.key].hours) for r in done
              if r.unit == "GPU-hours" and r.gpu is not None and r.gpu in p.forecast]
    if not priced:
        why = "- (CPU)" if "CPU-hours" in units else "- (GPU not in devices.yaml)"
        return f"{_fmt(spent)} {'/'.join(units)}", why, "-"
    lo = sum(h[0] for _, h in priced)
    hi = sum(h[1] for _, h in priced)
    g_spent = sum(r.spent_h or 0.0 for r, _ in priced)
    ratio = (f"{g_spent / hi:.2f}" if lo == hi else f"{g_spent / hi:.2f}-{g_spent / lo:.2f}") \
        if lo > 0 else "-"
    return f"{_fmt(spent)} {'/'.join(units)}", f"{hours_range(lo, hi)} GPU-hours", ratio


def _table(p: Progress) -> list[list[Any]]:
    rows = []
    for cid, runs in [*p.claims, ("all", p.runs)]:
        if not runs and cid != "all":
            continue
        c = _counts(runs)
        left = claim_jobs_left(p, runs, cid) if cid != "all" else (
            None if p.jobs is None or p.jobs.error else len(p.jobs.jobs))
        failed = claim_failed(p, cid, runs) if cid != "all" else len(p.failed)
        rows.append([cid, len(runs), *[c.get(s, 0) for s in STATES], *_spent(runs, p),
                     "-" if left is None else left, failed])
    return rows


HEADERS = ["claim", "planned", *STATES, "spent (measured)", "forecast, same runs",
           "measured / forecast", "jobs left", "failed jobs"]


def _eta(p: Progress) -> list[str]:
    """The work left per GPU type at the measured wall time per run of each setting (else
    the learned forecast), and the wall time at the present concurrency."""
    left = [r for r in p.runs if r.state not in ("finished", "blocked")]
    if not left:
        blocked = sum(r.state == "blocked" for r in p.runs)
        return ["Training ETA: every planned training run is finished"
                + (f", but for {blocked} blocked (below)" if blocked else "") + "."]
    measured: dict[str, list[RunState]] = defaultdict(list)
    for r in p.runs:
        if r.state == "finished" and r.wall_h:
            measured[r.key].append(r)
    work: dict[str, float] = defaultdict(float)
    how: dict[str, set[str]] = defaultdict(set)
    unrated: set[str] = set()
    for r in left:
        part = 1.0 - (r.done if r.state in ("running", "stopped") else 0.0)
        if measured.get(r.key):
            ms = measured[r.key]
            gpu = Counter(m.gpu for m in ms).most_common(1)[0][0] or "?"
            work[gpu] += part * sum(m.wall_h or 0.0 for m in ms) / len(ms)
            how[gpu].add(f"{r.key} measured ({len(ms)} run(s))")
        elif p.cpu:
            how["cpu"].add(f"{r.key} not measured yet: no rate (no prior for a CPU)")
            work["cpu"] += 0.0
            unrated.add("cpu")
        else:
            gpu = next(iter(p.learned))
            s = p.learned[gpu].settings.get(r.key)
            if s is None:
                continue
            work[gpu] += part * sum(s.hours) / 2
            how[gpu].add(f"{r.key} {s.source}")
    running = max(1, sum(r.state == "running" for r in p.runs))
    out = [f"Training ETA of the {len(left)} training run(s) left, at {running} job(s) at once "
           f"({'as now' if any(r.state == 'running' for r in p.runs) else 'none runs now'}):"]
    for gpu, h in sorted(work.items()):
        if h <= 0:      # only runs of settings with no rate yet
            out.append(f"- on {gpu}: no ETA yet ({'; '.join(sorted(how[gpu]))})")
            continue
        out.append(f"- on {gpu}: {_fmt(h)} job-hours of wall time left, about "
                   f"{_duration(h / running)} ({'; '.join(sorted(how[gpu]))}"
                   + ("; the runs with no rate yet not counted" if gpu in unrated else "")
                   + ")")
    return out


def _duration(h: float) -> str:
    if h < 1 / 60:
        return f"{max(1, math.ceil(h * 3600))} s"
    if h < 1:
        return f"{math.ceil(h * 60)} min"
    return f"{h:.1f} h" if h < 48 else f"{h / 24:.1f} days"


def _ended(r: RunState) -> str:
    return f"; {r.slurm.reason}" if r.slurm and r.slurm.state != "COMPLETED" else ""


def progress_text(p: Progress, fmt: str = "simple") -> str:
    """The page of :func:`progress`: the table per claim and overall, the ETA, the failed
    jobs, SLURM's counts and what cannot be known."""
    from tabulate import tabulate  # noqa: PLC0415 - a printing dependency, this page only

    title = f"Progress of profile {p.profile}" + (f", claim {p.target}" if p.target else "")
    L = [title + " (training runs: pretraining and SimCSE):", "",
         tabulate(_table(p), headers=HEADERS, tablefmt=fmt), "",
         "forecast: the counted-FLOPs estimate of the same finished runs on the GPU type "
         "they ran on (docs/cost.md); the ratio is measured over it (1 = as forecast)", ""]
    if p.jobs is not None:
        L += [*job_eta(p.jobs, len(p.failed)), ""]
    L += _eta(p)
    if p.learned and not p.cpu:
        g = next(iter(p.learned))
        srcs = sorted({f"{k}: {s.source}" for k, s in p.learned[g].settings.items()})
        L += ["", f"step times of the runs to come ({g}): " + "; ".join(srcs)]
    L += ["", f"failed jobs ({len(p.failed)})" + (":" if p.failed else "")]
    for f in p.failed:      # the reason whole, wrapped
        L += wrapped(f"- {f.job}: ", f"{f.reason} (log: {f.log}"
                     + (f"; SLURM log: {f.slurm_log})" if f.slurm_log else ")"))
    blocked = [r for r in p.runs if r.state == "blocked"]
    if blocked:
        L += ["", f"blocked runs ({len(blocked)}; no re-run succeeds before this step):"]
        for r in blocked:
            L += wrapped(f"- {r.name}: ", r.reason or "")
    corrupt = [r for r in p.runs if r.state == "corrupt"]
    if corrupt:   # finished once; the file every later job reads is not the one recorded
        L += ["", f"corrupt runs ({len(corrupt)}; not finished until rebuilt):"]
        for r in corrupt:
            L += wrapped(f"- {r.name}: ", r.reason or "")
    stopped = [r for r in p.runs if r.state == "stopped"]
    if stopped:
        L += ["", f"stopped runs ({len(stopped)}; a re-run resumes them): "
              + ", ".join(f"{r.name} ({r.done:.0%} logged{_ended(r)})" for r in stopped)]
    waiting = [r for r in p.runs if r.state == "not started" and r.submitted]
    if waiting:
        L += ["", f"submitted, nothing written yet ({len(waiting)}; Snakemake marks their "
              "outputs: queued or starting): " + ", ".join(r.name for r in waiting)]
    if p.sacct is not None:
        L += ["", *_slurm_lines(p.sacct)]
    L += ["", "What this cannot know:"] + [f"- {u}" for u in p.unknowns]
    return "\n".join(L) + "\n"


# ----------------------------------------------------------------------------- every job
@dataclass
class JobLeft:
    """One job the target still needs (a ``snakemake --dry-run`` of it, in the run folder)."""

    rule: str
    outputs: list[str]
    seconds: float | None = None    # its expected wall seconds left; None: no basis yet
    basis: str = ""                 # where that number comes from
    running: bool = False           # Snakemake marks its outputs incomplete: it is running
    after: list[int] = field(default_factory=list)  # the jobs left whose outputs it reads
    threads: int = 1                # the cores it takes


@dataclass
class JobsLeft:
    jobs: list[JobLeft] = field(default_factory=list)
    error: str | None = None        # why the dry run gave no job list
    cores: int | None = None        # the live run's --cores (its log), None: not known

    @property
    def running(self) -> int:
        return sum(j.running for j in self.jobs)


TRAINING_RULES = ("pretrain", "simcse", "vision_run", "text_run")


def dry_run_jobs(configfiles: list[str], target: str | None, workdir: str | os.PathLike
                 ) -> tuple[list[JobInfo] | None, str | None]:
    """The jobs a ``snakemake --dry-run`` of ``target`` (everything: None) plans in
    ``workdir`` with ``configfiles``, a running job's among them (Snakemake marks its outputs
    incomplete; the workflow's default profile reruns them); ``(None, why)`` where it fails.
    ``--nolock``: it runs beside a live Snakemake and changes nothing."""
    # the target first: --configfile takes every word after it
    cmd = [sys.executable, "-m", "snakemake", *([target] if target else []), "--dry-run",
           "--nolock"]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    try:
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "WEINCE_SKIP_PREFLIGHT": "1"})
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"snakemake --dry-run could not run: {err}"
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        lines = [s.strip() for s in text.splitlines() if s.strip()]
        said = [s for s in lines if "rror" in s or "xception" in s] or lines or ["no output"]
        return None, f"snakemake --dry-run failed (exit {proc.returncode}): {said[-1]}"
    return [j for j in parse_dry_run(text) if j.output or j.rule != "all"], None


def _rule_seconds(bench: Path) -> tuple[dict[str, float], float | None]:
    """Mean wall seconds per rule of the jobs this profile finished (their benchmarks), and
    the first guess for a rule none of whose jobs finished: the median finished job (the
    few long training jobs do not set it)."""
    by: dict[str, list[float]] = defaultdict(list)
    for t in job_times(bench):
        by[t.rule].append(t.seconds)
    every = sorted(s for v in by.values() for s in v)
    return {r: sum(v) / len(v) for r, v in by.items()}, (every[len(every) // 2] if every
                                                          else None)


def _model_seconds(prof: Profile, rule: str, outputs: list[str]) -> float | None:
    """The cost model's work seconds of an evaluation job on a GPU profile (none on a CPU:
    the model prices GPUs)."""
    if prof.device.strip().lower() == "cpu" or rule not in EVAL_RULES:
        return None
    for out in outputs:
        m = _VISION_RUN.search(Path(out).parent.as_posix())
        if m is not None:
            try:
                return work_seconds(prof, rule, m.groupdict())[0]
            except (KeyError, ValueError):
                return None
    return None


def _timing_seconds(prof: Profile, base: Path, threads: int) -> float | None:
    """The timing job's wall seconds at the image rate of this profile's finished
    pretraining runs of its backbone and image size: their median step time over the ``2 x
    batch`` images of a step, times the ``runs x (warm-up + reps) x losses`` whole steps of
    ``2 x step_batch`` images the job trains (docs/cost.md), over its threads per the runs'
    threads; None without such a run. Its loss-alone part (the losses on embeddings, no
    backbone) is not counted."""
    cfg = prof.timing.config
    if not prof.timing.enabled or not cfg.backbone:
        return None
    per_image: list[float] = []
    for f in (base / "vision").glob(f"*/{cfg.backbone}/*/seed*/train.json"):
        try:
            s = json.loads(f.read_text())
            if s.get("augment", {}).get("image_size") != cfg.image_size:
                continue
            per_image.append(float(s["step_timing"]["step_s_median"])
                             * max(1, int(s.get("torch_threads") or 1))
                             / (2 * int(s["batch_size"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if not per_image:
        return None
    steps = cfg.runs * (max(1, cfg.warmup // 2) + cfg.step_reps) * len(cfg.losses)
    return steps * 2 * cfg.step_batch * sorted(per_image)[len(per_image) // 2] / max(1, threads)


_VISION_RUN = re.compile(r"/vision/(?P<dataset>[^/]+)/(?P<backbone>[^/]+)/(?P<arm>[^/]+)/"
                         r"seed(?P<seed>\d+)$")


def jobs_left(prof: Profile, configfiles: list[str], target: str | None,
              workdir: str | os.PathLike, marks: set[str] | None) -> JobsLeft:
    """Every job ``target`` still needs, each with its expected wall seconds left: the mean
    of the finished jobs of its rule (their benchmarks), else the cost model's (evaluation
    jobs on a GPU profile; the timing job at the image rate of the finished training runs,
    :func:`_timing_seconds`), else the median finished job (a first guess, said as
    such); a running job less the time since Snakemake marked its outputs."""
    jobs, why = dry_run_jobs(configfiles, target, workdir)
    if jobs is None:
        return JobsLeft(error=why)
    base = Path(prof.results) / prof.name
    rule_s, guess = _rule_seconds(base / "benchmarks")
    cwd, now = Path(workdir), time.time()
    out = JobsLeft()
    jobs = [j for j in jobs if j.output]    # the aggregation target does no work
    made = {os.path.normpath(o): i for i, j in enumerate(jobs) for o in j.output}
    for j in jobs:
        left = JobLeft(j.rule, j.output, threads=max(1, j.threads), after=sorted(
            {made[n] for f in j.input if (n := os.path.normpath(f)) in made}))
        if j.rule in rule_s:
            left.seconds, left.basis = rule_s[j.rule], "measured"
        elif (s := _model_seconds(prof, j.rule, j.output)) is not None:
            left.seconds, left.basis = s, "cost model"
        elif j.rule == "timing" and (s := _timing_seconds(prof, base, j.threads)) is not None:
            # plus a job's start-up and its loss-alone part: the median finished job
            left.seconds, left.basis = s + (guess or 0.0), "the training runs' image rate"
        elif guess is not None:
            left.seconds, left.basis = guess, "first guess"
        started = [t for o in j.output if marks is not None and os.path.normpath(o) in marks
                   and (t := _marked_at(cwd, o)) is not None]
        if marks is not None and any(os.path.normpath(o) in marks for o in j.output):
            left.running = True
            ran = now - min(started) if started else 0.0
            if left.seconds is not None:
                # a job of a rule never timed yet: as long again as it has run so far
                left.seconds = ran if left.basis == "first guess" and ran > left.seconds \
                    else max(0.0, left.seconds - ran)
        out.jobs.append(left)
    out.cores = run_cores(cwd)
    return out


def run_cores(workdir: Path) -> int | None:
    """The ``--cores`` of the newest Snakemake run in ``workdir`` (its log's "Provided
    cores:" line), None where no log says (a cluster run submits jobs instead)."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"),
                  key=lambda f: f.stat().st_mtime)
    for log in reversed(logs):
        try:
            m = re.search(r"^Provided cores: (\d+)$", log.read_text(errors="replace"), re.M)
        except OSError:
            continue
        if m:
            return int(m.group(1))
    return None


def _marked_at(cwd: Path, output: str) -> float | None:
    """When Snakemake marked ``output`` incomplete (its job's start)."""
    name = base64.urlsafe_b64encode(output.encode()).decode()
    try:
        return (cwd / ".snakemake" / "incomplete" / name).stat().st_mtime
    except OSError:
        return None


def eta_seconds(left: JobsLeft) -> float | None:
    """The wall seconds :func:`job_eta` gives: the rated jobs' seconds left over the jobs
    running now (one when none does), or the longest chain of jobs that wait for one
    another where that is longer; None without a job list or any rate."""
    rated = [j for j in left.jobs if j.seconds is not None]
    if left.error is not None or not rated:
        return None if left.error is not None or left.jobs else 0.0
    if left.cores:      # core-seconds over the run's cores: as many jobs as fit at once
        work = sum((j.seconds or 0.0) * min(j.threads, left.cores) for j in rated) / left.cores
    else:
        work = sum(j.seconds or 0.0 for j in rated) / max(1, left.running)
    return max(work, _longest_chain(left.jobs))


def _longest_chain(jobs: list[JobLeft]) -> float:
    """The seconds of the longest path through the jobs left (a job after those it reads)."""
    done: dict[int, float] = {}

    def finish(i: int, seen: frozenset[int] = frozenset()) -> float:
        if i not in done:
            before = [finish(k, seen | {i}) for k in jobs[i].after if k not in seen]
            done[i] = max(before, default=0.0) + (jobs[i].seconds or 0.0)
        return done[i]

    return max((finish(i) for i in range(len(jobs))), default=0.0)


def job_eta(left: JobsLeft, failed: int = 0) -> list[str]:
    """The ETA of every job left (training and evaluation), at as many jobs at once as run
    now (one when none does)."""
    if left.error is not None:
        return [f"ETA of every job left: unknown ({left.error})"]
    if not left.jobs:
        return ["ETA: no job left to run" + (f", but {failed} failed job(s) (below) must run "
                                              "again" if failed else "") + "."]
    rated = [j for j in left.jobs if j.seconds is not None]
    eta = eta_seconds(left) or 0.0
    rules = Counter(j.rule for j in left.jobs)
    bases = Counter(j.basis for j in rated)
    pace = (f"on the run's {left.cores} core(s)" if left.cores else
            f"at {max(1, left.running)} job(s) at once "
            f"({'as now' if left.running else 'none runs now'})")
    line = f"ETA of the {len(left.jobs)} job(s) left, evaluation jobs included, {pace}: "
    line += (f"about {_duration(eta / 3600)}" if rated else "no rate yet")
    line += (" (" + ", ".join(f"{n} {r}" for r, n in sorted(rules.items())) + "; durations: "
             + ", ".join(f"{n} {b}" for b, n in sorted(bases.items()))
             + (f"; {len(left.jobs) - len(rated)} with no rate yet, not counted"
                if len(rated) < len(left.jobs) else "") + ")")
    if failed:
        line += f"; {failed} failed job(s) below are not in it until they run again"
    return [line]


# ----------------------------------------------------------------------------- blocked runs
def blocked_step(rs: RunState) -> str | None:
    """The manual step a run needs before any re-run can succeed, None if it needs none: a
    resume state (``checkpoint.pt``) its failed job could not read is read again by every
    retry. (A finished run whose encoder is not the one its ``train.json`` records is
    ``corrupt``: :func:`weince.pipeline.digests.output_problem` names its rebuild.)"""
    ckpt = rs.folder / "checkpoint.pt"
    if rs.reason and "not a readable" in rs.reason and str(ckpt) in rs.reason:
        return (f"delete {ckpt} (unreadable: the run then trains again from its first "
                f"epoch), then re-run")
    return None


def mark_blocked(runs: list[RunState]) -> None:
    """Runs that need a manual step (:func:`blocked_step`) become ``blocked``, with the step
    as their reason: no ETA counts them."""
    for r in runs:
        if r.state == "failed" and (step := blocked_step(r)) is not None:
            r.state, r.reason = "blocked", step


def claim_failed(p: Progress, cid: str, runs: list[RunState]) -> int:
    """The failed jobs of a claim: its table's job and the jobs of its runs' folders."""
    tags = {_tag(r) for r in runs}
    n = 0
    for f in p.failed:
        rule, _, name = f.job.partition("/")
        if (rule == "claim_tables" and name == cid.lower()) or name in tags:
            n += 1
    return n


def claim_jobs_left(p: Progress, runs: list[RunState], cid: str) -> int | None:
    """The jobs left in a claim's run folders, and its table's."""
    if p.jobs is None or p.jobs.error is not None:
        return None
    folders = {os.path.normpath(r.folder) for r in runs}
    table = f"table_{cid.lower()}."
    return sum(any(os.path.normpath(Path(o).parent) in folders or Path(o).name.startswith(table)
                   for o in j.outputs) for j in p.jobs.jobs)


def wrapped(prefix: str, text: str, width: int = 100) -> list[str]:
    """``prefix`` + ``text`` wrapped whole at ``width``, the next lines indented."""
    return textwrap.wrap(prefix + text, width=width, subsequent_indent="    ",
                         break_long_words=False, break_on_hyphens=False) or [prefix]
