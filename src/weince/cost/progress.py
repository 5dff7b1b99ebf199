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
- **ETA**: the runs left (a running one by the part of its epochs or steps not logged yet)
  at the measured wall time per run of their setting and GPU type, else at the forecast
  learned from the measured step times (:func:`weince.cost.learned.learned_profile`),
  divided by the training jobs running now;
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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weince.cost.estimate import Estimate, estimate, gpu_set, hours_range, text_steps
from weince.cost.job_times import job_times
from weince.cost.learned import learned_profile
from weince.cost.slurm_jobs import ENDED_BADLY, INTERRUPTED, LIVE, SlurmJob, SlurmView, slurm_jobs
from weince.cost.throughput import device_for_name
from weince.pipeline.digests import output_problem
from weince.pipeline.profile import Profile
from weince.pipeline.targets import claim_inputs, claims

__all__ = ["RunState", "FailedJob", "Progress", "progress", "progress_text", "incomplete_marks",
           "live_lock_ids", "failure_reason", "failed_jobs", "slurm_failed_jobs", "STATES"]

STATES = ("finished", "running", "stopped", "failed", "corrupt", "not started")


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
        return " ".join(text.split())[:300]
    exits = [s for s in lines if re.match(r"exit [1-9]\d*: ", s)]
    return exits[-1][:300] if exits else None


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
        rs.spent_h = None if rs.wall_h is None else rs.wall_h * gpus
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
             lock_table: str | os.PathLike = "/proc/locks") -> Progress:
    """What the files of ``prof`` (its ``results/<profile>/``, Snakemake's
    ``.snakemake/`` in ``workdir``, default the current folder) say of its training runs
    (module docstring); ``claim``: only the runs of that claim."""
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
    p = Progress(prof.name, runs=runs, target=claim, cpu=prof.device.strip().lower() == "cpu")
    p.claims = _claims(prof, runs)
    if claim is not None:
        p.claims = [(c, rs) for c, rs in p.claims if c == claim]
        keep = {id(r) for _, rs in p.claims for r in rs}
        p.runs = [r for r in runs if id(r) in keep]
    p.failed = failed_jobs(base / "logs", base / "benchmarks", live)
    if view is not None:
        p.failed = slurm_failed_jobs(view, p.failed, base / "logs", base / "benchmarks", cwd)
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
    out.append("the ETA assumes as many training jobs at once as run now (one when none "
               "does), and says nothing of evaluation jobs or queue waits")
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
        rows.append([cid, len(runs), *[c.get(s, 0) for s in STATES], *_spent(runs, p)])
    return rows


HEADERS = ["claim", "planned", *STATES, "spent (measured)", "forecast, same runs",
           "measured / forecast"]


def _eta(p: Progress) -> list[str]:
    """The work left per GPU type at the measured wall time per run of each setting (else
    the learned forecast), and the wall time at the present concurrency."""
    left = [r for r in p.runs if r.state != "finished"]
    if not left:
        return ["ETA: every planned training run is finished."]
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
    out = [f"ETA of the {len(left)} training run(s) left, at {running} job(s) at once "
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
    L += _eta(p)
    if p.learned and not p.cpu:
        g = next(iter(p.learned))
        srcs = sorted({f"{k}: {s.source}" for k, s in p.learned[g].settings.items()})
        L += ["", f"step times of the runs to come ({g}): " + "; ".join(srcs)]
    L += ["", f"failed jobs ({len(p.failed)})" + (":" if p.failed else "")]
    L += [f"- {f.job}: {f.reason} (log: {f.log}"
          + (f"; SLURM log: {f.slurm_log})" if f.slurm_log else ")") for f in p.failed]
    corrupt = [r for r in p.runs if r.state == "corrupt"]
    if corrupt:   # finished once; the file every later job reads is not the one recorded
        L += ["", f"corrupt runs ({len(corrupt)}; not finished until rebuilt):"]
        L += [f"- {r.name}: {r.reason}" for r in corrupt]
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
