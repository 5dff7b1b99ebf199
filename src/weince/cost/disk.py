"""What a profile (or one target of it) costs on disk at its peak, and the start-up check of
that peak against the disk and the user's quota (docs/cluster.md, "Disk").

    from weince.cost.disk import disk_estimate, check_disk
    est = disk_estimate(prof)            # est.peak, est.permanent, est.temporary, est.lines
    check_disk(prof, parallel=2)         # the Snakefile's onstart: printed, refused when short

What stays (permanent): every trained encoder (4 bytes a parameter, the counted table of
:mod:`weince.cost.counts`), each run's result files and logs, the score files of the
tail-fit arms, every SimCSE model folder. What comes and goes (temporary): a run's
``features.pt`` (deleted once the probe, k-NN and the other readers are done; permanent with
``keep_features``) and its training checkpoint (deleted once the features job starts;
permanent with ``keep_checkpoint``). The training audit's states (``keep_states``: the
start and end of each audit segment, a checkpoint's size each, plus one per epoch with
``epochs``) are permanent. The peak is the permanent part plus the temporaries of
the ``concurrent`` largest runs at once (``disk.concurrent_runs``: about the number of
GPUs the jobs get at once), with ``parallel`` (the workflow's cores or jobs) as a cap. An
adopted grid run (the final grid arm at a grid seed) links the chosen point's encoder: it
adds its small files and its features only.

No torch: the parameter counts come from the committed table.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from weince.cost.counts import dataset_spec, text_counts, text_geometry, vision_counts
from weince.data.locations import SPLIT_IMAGES
from weince.pipeline import layout
from weince.pipeline.ablations import ablation_plan
from weince.pipeline.layout import TextRun, VisionRun
from weince.pipeline.preflight import DiskSpaceError
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import adopted_seeds
from weince.pipeline.stages import grid_arms, pretrain_config, simcse_config
from weince.train.config import audit_states_per_run
from weince.utils.diskspace import free_bytes, human_bytes, parse_size

__all__ = ["SPLIT_SIZES", "PER_RUN", "QUOTA_ENV", "DiskEstimate", "disk_estimate",
           "runs_of_jobs", "parse_bytes", "disk_quota", "used_bytes", "check_disk", "dag_jobs",
           "JobLike", "warn_after_dry_run", "trains", "trains_text"]

# images per split (train, test) of each data set: a features.pt holds both
SPLIT_SIZES = {d: (n["train"], n["test"]) for d, n in SPLIT_IMAGES.items()}
OPT_STATES = {"adam": 2, "lars": 1}   # per-parameter optimiser buffers in a checkpoint
PER_RUN = 2_000_000                   # JSON results, logs, benchmarks, figures per run
QUOTA_ENV = "WEINCE_DISK_QUOTA"       # overrides the config's disk.quota ("2TB", bytes)


@dataclass
class DiskEstimate:
    """Bytes: ``permanent`` (what stays), ``temporary`` (the largest temporaries at once),
    ``peak`` (their sum); ``lines`` say what each part holds."""

    permanent: int = 0
    temporary: int = 0
    concurrent: int = 1
    lines: list[str] = field(default_factory=list)

    @property
    def peak(self) -> int:
        return self.permanent + self.temporary

    def line(self) -> str:
        """The one line the planner and the start-up check print."""
        return (f"peak disk: {human_bytes(self.peak)} (permanent {human_bytes(self.permanent)}"
                f", temporary {human_bytes(self.temporary)} with {self.concurrent} run(s)' "
                f"temporaries at once; {'; '.join(self.lines)})")


def _vision_sizes(prof: Profile, run: VisionRun) -> tuple[int, int, int]:
    """(encoder, features.pt, checkpoint) bytes of one vision run."""
    cfg = pretrain_config(prof, run.dataset, run.backbone, run.arm.split("@")[0], run.seed)
    spec = dataset_spec(run.dataset)
    size = int(cfg.image_size or spec["image_size"])
    head = f"proj{cfg.proj_dim}"
    c = vision_counts(run.backbone, size, int(spec["channels"]), head)
    params = int(c["params"])
    limit = prof.vision.features.max_images
    images = sum(min(k, int(limit or k)) for k in SPLIT_SIZES.get(run.dataset, (50_000, 10_000)))
    features = images * (4 * (int(c["feat_dim"]) + int(head[4:])) + 8)
    states = OPT_STATES.get(cfg.optimizer, 2)
    return 4 * params, features, 4 * params * (1 + states)


def _scores_bytes(prof: Profile) -> int:
    col = prof.vision.evt.collect
    b = col.batch_size
    lb = col.link_batch_size or b
    return (4 * col.n_batches * b * (2 * b - 2) + 5 * col.link_batches * (2 * lb) ** 2)


def _profile_runs(prof: Profile) -> tuple[set[VisionRun], set[VisionRun], set[TextRun]]:
    """(trained vision runs, adopted vision runs, SimCSE runs) of the whole profile."""
    adopted_at = set(adopted_seeds(prof))
    garms = set(grid_arms(prof))
    final = set(layout.vision_runs(prof))
    adopted = {r for r in final if r.arm in garms and r.seed in adopted_at}
    trained = (final - adopted) | set(layout.vision_runs(prof, grid=True))
    plan = ablation_plan(prof)
    for d, b in plan.pairs:
        for arm in plan.run_arms():
            for s in plan.seeds:
                run = VisionRun(d, b, arm, s)
                if run not in adopted:
                    trained.add(run)
    return trained, adopted, set(layout.text_runs(prof))


_VRUN = re.compile(r"/vision/([a-z0-9]+)/([a-z0-9_]+)/([^/]+)/seed([0-9]+)/")
_TRUN = re.compile(r"/text/([^/]+)/([^/]+)/seed([0-9]+)/")


def trains(job: Any) -> bool:
    """Whether a (dry run's) job pretrains a vision encoder: a ``pretrain`` job, or an
    encoder's or an arm's whole job (``vision_jobs: per_encoder`` or ``per_arm``, rules
    ``vision_run_<n>``) that writes an encoder."""
    return job.rule == "pretrain" or (job.rule.startswith("vision_run_") and any(
        str(f).endswith("/encoder.pt") for f in job.output))


def trains_text(job: Any) -> bool:
    """Whether a (dry run's) job trains a SimCSE run: a ``simcse`` job, or ``per_arm``'s
    ``text_run`` (the training and its STS evaluation in one job)."""
    return job.rule in ("simcse", "text_run")


def runs_of_jobs(jobs: Iterable) -> tuple[set[VisionRun], set[VisionRun], set[TextRun]]:
    """(trained, adopted, SimCSE) runs of a dry run's jobs (``weince.cost.plan.JobInfo``:
    a rule and its outputs): what a target's plan reaches."""
    trained: set[VisionRun] = set()
    adopted: set[VisionRun] = set()
    text: set[TextRun] = set()
    for j in jobs:
        # a fused job (`vision_jobs: per_arm`) may train some of its runs and start others
        # at their features: a run is trained where the job writes its encoder
        encoders = {m.groups() for out in j.output if str(out).endswith("/encoder.pt")
                    and (m := _VRUN.search("/" + out))}
        for out in j.output:
            m = _VRUN.search("/" + out)
            if m and (trains(j) or j.rule == "adopt_grid_run"):
                run = VisionRun(m.group(1), m.group(2), m.group(3), int(m.group(4)))
                if j.rule == "adopt_grid_run":
                    adopted.add(run)
                elif j.rule == "pretrain" or m.groups() in encoders:
                    trained.add(run)
            t = _TRUN.search("/" + out)
            if t and trains_text(j):
                text.add(TextRun(t.group(1), t.group(2), int(t.group(3))))
    return trained, adopted, text


def disk_estimate(prof: Profile, runs: tuple[set, set, set] | None = None,
                  concurrent: int | None = None, parallel: int | None = None
                  ) -> DiskEstimate:
    """The profile's disk use at its peak (module docstring). ``runs``: (trained, adopted,
    SimCSE) runs (default: the whole profile; :func:`runs_of_jobs` for a target);
    ``concurrent``: runs whose temporaries exist at once (default ``disk.concurrent_runs``),
    capped by ``parallel`` (the workflow's cores or jobs)."""
    trained, adopted, text = runs if runs is not None else _profile_runs(prof)
    n = int(concurrent or prof.disk.concurrent_runs)
    if parallel:
        n = max(1, min(n, int(parallel)))
    keep_ckpt = prof.vision.pretrain.keep_checkpoint
    evt = set(prof.vision.evt.arms)
    perm, temps = 0, []
    encoders = feats_kept = audit = 0
    for run in sorted(trained | adopted, key=str):
        enc, feats, ckpt = _vision_sizes(prof, run)
        own = run in trained
        perm += (enc if own else 0) + PER_RUN + (_scores_bytes(prof) if run.arm in evt else 0)
        pcfg = prof.vision.pretrain_for(run.dataset)
        audit += ckpt * audit_states_per_run(pcfg.keep_states, pcfg.epochs) if own else 0
        encoders += enc if own else 0
        kept = (feats if prof.keep_features else 0) + (ckpt if own and keep_ckpt else 0)
        perm += kept
        feats_kept += feats if prof.keep_features else 0
        temps.append(feats * (not prof.keep_features) + ckpt * (own and not keep_ckpt))
    for run in sorted(text, key=str):
        params = int(text_counts(text_geometry(run.model), 32)["params"])
        tcfg = simcse_config(prof, run.model, run.arm, run.seed)
        keep = tcfg.keep_checkpoint
        perm += 4 * params + PER_RUN + (12 * params if keep else 0)
        audit += 12 * params * audit_states_per_run(tcfg.keep_states, tcfg.epochs)
        temps.append(0 if keep else 12 * params)   # weights + Adam's two moments
    temporary = sum(sorted(temps, reverse=True)[:n])
    perm += audit
    lines = [f"{len(trained)} trained and {len(adopted)} adopted vision run(s), "
             f"{len(text)} SimCSE run(s)", f"encoders {human_bytes(encoders)}",
             f"training audit states (keep_states) {human_bytes(audit)}"]
    if prof.keep_features:
        lines.append(f"features kept (keep_features): {human_bytes(feats_kept)}")
    else:
        lines.append("features.pt temporary (keep_features: false)")
    return DiskEstimate(permanent=perm, temporary=temporary, concurrent=n, lines=lines)


def parse_bytes(text: str | int | float) -> int:
    """``"2TB"``, ``"500 GB"``, ``"1.5T"``, ``1e12`` -> bytes (decimal units, as
    :func:`weince.utils.diskspace.human_bytes` prints them)."""
    try:
        return parse_size(text)
    except ValueError:
        raise ValueError(f"disk quota {text!r}: write a size such as 2TB, 500GB or a number "
                         f"of bytes (config key disk.quota or ${QUOTA_ENV})") from None


def disk_quota(prof: Profile) -> int | None:
    """The user's quota in bytes: ``$WEINCE_DISK_QUOTA`` over the config's ``disk.quota``."""
    value = os.environ.get(QUOTA_ENV) or prof.disk.quota
    return None if value in (None, "") else parse_bytes(value)


def used_bytes(folder: str | os.PathLike) -> int:
    """Bytes of the files under ``folder`` (what a run already wrote there; links not
    followed, so a linked encoder counts once)."""
    total = 0
    for root, _, files in os.walk(os.fspath(folder)):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.stat(p).st_size
    return total


def dag_jobs(dag: Any) -> list[JobLike]:
    """The jobs a Snakemake DAG (``workflow.dag``) will run, as (rule, outputs) pairs
    :func:`runs_of_jobs` reads; empty for no DAG (a lint, a rule listing)."""
    if dag is None:
        return []
    return [JobLike(job.rule.name, [str(f) for f in job.output])
            for job in dag.needrun_jobs(exclude_finished=False)]


@dataclass
class JobLike:
    """A job's rule and its outputs (what :func:`runs_of_jobs` reads of a job)."""

    rule: str
    output: list[str]


def check_disk(prof: Profile, parallel: int | None = None, *, jobs: Iterable | None = None,
               warn: bool = False, out=None) -> DiskEstimate:
    """Print the peak estimate; raise :class:`DiskSpaceError` (one message saying what to
    do) when what is still to be written does not fit the free space of the results folder,
    or does not fit the user's quota (``disk.quota`` / ``$WEINCE_DISK_QUOTA``) beside what
    the profile's results hold already. ``jobs``: the jobs this run will run (the DAG's,
    :func:`dag_jobs`), priced as ``weince plan --target`` prices a target's dry run; None:
    the whole profile, less what is written. ``warn``: print the refusal as a warning (a
    dry run) instead of raising it."""
    root = prof.results
    here = used_bytes(root / prof.name) if (root / prof.name).is_dir() else 0
    what = f"profile {prof.name!r}"
    if jobs is None:
        est = disk_estimate(prof, parallel=parallel)
        need, scope = max(0, est.peak - here), ""
    else:
        jobs = list(jobs)
        est = disk_estimate(prof, runs=runs_of_jobs(jobs), parallel=parallel)
        need, scope = est.peak, f" for the {len(jobs)} job(s) this run asks for"
    free = free_bytes(root)
    quota = disk_quota(prof)
    say = out or sys.stderr
    print(f"disk: {est.line()}; {human_bytes(here)} written already, {human_bytes(free)} "
          f"free in {root}/" + (f", quota {human_bytes(quota)}" if quota else ""), file=say)
    fixes = ("ask for fewer targets at once, keep fewer runs' temporaries at once "
             "(disk.concurrent_runs), set `results:` to a folder on a larger disk, or free "
             "space there; WEINCE_SKIP_PREFLIGHT=1 skips this check")
    problem = None
    if quota is not None and here + need > quota:
        problem = (f"{what} needs about {human_bytes(need)} at its peak{scope}"
                   + (f" beside the {human_bytes(here)} written already" if here else "")
                   + f" but the quota is {human_bytes(quota)} (disk.quota or ${QUOTA_ENV}); "
                     f"{fixes}")
    elif free < need:
        problem = (f"{root}/ has {human_bytes(free)} free but {what} still needs about "
                   f"{human_bytes(need)}{scope} ({est.line()}); {fixes}")
    if problem and warn:
        print(f"warning (dry run): a real run would stop here: {problem}", file=say)
    elif problem:
        raise DiskSpaceError(problem)
    return est


def warn_after_dry_run(prof: Profile, workflow: Any) -> None:
    """In a dry run (no ``onstart``): once Snakemake has built the DAG and listed its jobs,
    price them as the real run's start-up check would and print its refusal as a warning
    (the Snakefile calls this while it is read, before Snakemake knows whether the run is
    a dry run; the check runs when the process exits, and only after a dry run)."""
    def check() -> None:
        if not getattr(workflow, "dryrun", False):
            return
        jobs = dag_jobs(getattr(workflow, "dag", None))
        if jobs:
            check_disk(prof, workflow.cores if workflow.local_exec else workflow.nodes,
                       jobs=jobs, warn=True)

    atexit.register(check)
