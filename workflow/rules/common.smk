# Shared paths, wildcard constraints, resources and the input functions of the rules.
# Path templates and the enumeration of runs come from weince.pipeline, so rule outputs
# and the files the report reads cannot drift apart; `rule all` takes
# weince.pipeline.targets.all_targets(PROFILE). Every rule reads the resolved PROFILE (the
# Snakefile's weince.pipeline.profile.Profile), never the raw config.
import os
import re

from weince.pipeline.arms import split_arm
from weince.pipeline import layout
from weince.pipeline.ablations import ablation_inputs, ablation_outputs, ablation_plan
from weince.cost.estimate import cost_settings, job_runtime, retries_for
from weince.cost.evaljobs import EVAL_RULES, eval_job_runtime
from weince.cost.packing import job_jobs_per_gpu
from weince.utils.gpu_slots import environment as slot_environment
from weince.pipeline.stages import (
    PRETRAINED_ARM,
    features_settings,
    grid_arms,
    job_config,
    knn_settings,
    link_settings,
    norms_settings,
    pot_settings,
    probe_settings,
    rerun_trigger,
    scores_settings,
    sts_settings,
    text_model_key,
    timing_settings,
)
from weince.pipeline.targets import (
    all_targets,
    claim_inputs,
    claims,
    companion_targets,
    norms_outputs,
    norms_results,
    report_outputs,
    result_files,
    table_files,
)
from weince.pipeline.protocol import adopted_seeds, shares_seeds
from weince.pipeline.grid import selection_paths
from weince.pipeline.fused import fused_text

RESULTS = str(PROFILE.results)
NAME = PROFILE.name
VRUN = layout.VISION_RUN.format(
    results=RESULTS,
    profile="{profile}",
    dataset="{dataset}",
    backbone="{backbone}",
    arm="{arm}",
    seed="{seed}",
)
VPAIR = layout.VISION_PAIR.format(
    results=RESULTS, profile="{profile}", dataset="{dataset}", backbone="{backbone}"
)
TRUN = layout.TEXT_RUN.format(
    results=RESULTS, profile="{profile}", model="{model}", arm="{arm}", seed="{seed}"
)
TIMING_DIR = layout.TIMING.format(results=RESULTS, profile="{profile}")
CHECKS_DIR = layout.CHECKS.format(results=RESULTS, profile="{profile}")
SYNTHETIC_DIR = layout.SYNTHETIC.format(results=RESULTS, profile="{profile}")
FOREST_DIR = layout.FOREST.format(results=RESULTS, profile="{profile}", cid="{cid}")
REPORT_DIR = layout.REPORT.format(reports=str(PROFILE.reports), profile="{profile}")
LOGS = f"{RESULTS}/{{profile}}/logs"
BENCH = f"{RESULTS}/{{profile}}/benchmarks"
VRUN_TAG = "{dataset}/{backbone}/{arm}/seed{seed}"
TRUN_TAG = "{model}/{arm}/seed{seed}"
ABLATION_PLAN = ablation_plan(PROFILE)
ABLATION_OUTPUTS = ablation_outputs(PROFILE)
NORMS_OUTPUTS = norms_outputs(PROFILE)
CLAIM_IDS = [c["id"].lower() for c in claims(PROFILE)]


wildcard_constraints:
    profile=re.escape(NAME),
    dataset="[a-z0-9]+",
    backbone="[a-z0-9_]+",
    arm=r"[a-z][a-z0-9_]*(@[a-z0-9_.\-]+)?",
    seed="[0-9]+",
    model=r"[A-Za-z0-9_.\-]+",
    cid="[a-z][a-z0-9]*",


# the pool's GPUs and lock folder (config `node`) for the jobs' slots: the jobs inherit them
os.environ.update(slot_environment(PROFILE.config["node"]))


def resources_for(rule_name):
    """gpu / mem_mb / runtime of a rule: config resources[rule] over resources[default];
    with `cost.enabled`, a pretrain or simcse job's runtime is its own setting's estimate
    on the slowest GPU of cost.gpu (weince.cost.estimate.job_runtime), and an evaluation
    job's follows its counted work (weince.cost.evaljobs; at least resources[rule].runtime
    when the config sets one, e.g. a rehearsal's measured overlay); docs/cost.md."""
    res = PROFILE.resources
    out = {"gpu": 0, "mem_mb": 2000, "runtime": 30}
    out.update({k: v for k, v in res.get("default", {}).items() if k != "threads"})
    out.update({k: v for k, v in res.get(rule_name, {}).items() if k != "threads"})
    if cost_settings(PROFILE).enabled and rule_name in ("pretrain", "simcse"):
        out["runtime"] = estimated_runtime
    elif cost_settings(PROFILE).enabled and rule_name in EVAL_RULES:
        out["runtime"] = work_runtime(rule_name, res.get(rule_name, {}).get("runtime"))
    if int(out["gpu"]) >= 1:
        out["jobs_per_gpu"] = slot_share(rule_name)
    return out


def slot_share(rule_name):
    """How many jobs may share a GPU job's device on a machine without a scheduler (its slot
    of the pool, weince.utils.gpu_slots; node.jobs_per_gpu, weince.cost.packing). A
    resource, not a param: it changes no result and triggers no rerun."""

    def share(wildcards, attempt):
        return job_jobs_per_gpu(PROFILE, rule_name, dict(wildcards.items()))

    return share


def work_runtime(rule_name, floor):
    """Minutes of one evaluation job of `rule_name` from its counted work
    (weince.cost.evaljobs.eval_job_runtime), at least `floor` when set."""

    def runtime(wildcards, attempt):
        need = eval_job_runtime(PROFILE, rule_name, dict(wildcards.items()))["runtime"]
        return max(int(floor or 0), need)

    return runtime


def estimated_runtime(wildcards, attempt):
    """Minutes of one pretrain/simcse job: its setting's estimate x safety, capped by
    cost.max_runtime (a longer run continues in the next attempt, from its checkpoint).
    """
    key = (
        f"{wildcards.dataset}/{wildcards.backbone}"
        if hasattr(wildcards, "dataset")
        else f"text/{wildcards.model}"
    )
    return job_runtime(PROFILE, key)["runtime"]


def training_retries(stage):
    """Resubmissions of a training job: its planned segments and cost.extra_restarts
    (weince.cost.estimate.retries_for), on the submitting side only: inside a SLURM job
    a failed run is not restarted in the same allocation."""
    return None if workflow.remote_exec else retries_for(PROFILE, stage)


def threads_for(rule_name):
    res = PROFILE.resources
    return res.get(rule_name, {}).get(
        "threads", res.get("default", {}).get("threads", PROFILE.threads)
    )


def grid_chain_priority(wildcards):
    """1 for the jobs of the DAG's longest chain, 0 for the rest: a grid point's training
    and probes, then (after the choice on validation) the final grid arm's training, which
    cannot start before them. Ready jobs of priority 1 run first (SimCSE and its STS runs,
    the longest jobs, have it too), so that no long job trails at the end with one core
    idle."""
    base, point = split_arm(wildcards.arm)
    return 1 if point is not None or base in grid_arms(PROFILE) else 0


def selection_input(wildcards):
    """A final run of a grid arm needs the point chosen on validation."""
    base, point = split_arm(wildcards.arm)
    if point is None and base in grid_arms(PROFILE):
        return f"{VPAIR}/{base}/selection.json".format(
            profile=wildcards.profile,
            dataset=wildcards.dataset,
            backbone=wildcards.backbone,
        )
    return []


def grid_linear_files(wildcards):
    g = PROFILE.vision.grid
    return {
        point: [
            f"{VRUN}/linear.json".format(
                profile=wildcards.profile,
                dataset=wildcards.dataset,
                backbone=wildcards.backbone,
                arm=f"{wildcards.arm}@{point}",
                seed=seed,
            )
            for seed in g.seeds
        ]
        for point in g.points
    }


def grid_knn_files(wildcards):
    """Four-seed grid (official): the knn.json of every point and seed, so that each k-NN
    metric gets its own point; one-seed grid: none (the linear point serves k-NN)."""
    if not shares_seeds(PROFILE):
        return {}
    g = PROFILE.vision.grid
    return {
        f"knn@{point}": [
            f"{VRUN}/knn.json".format(
                profile=wildcards.profile,
                dataset=wildcards.dataset,
                backbone=wildcards.backbone,
                arm=f"{wildcards.arm}@{point}",
                seed=seed,
            )
            for seed in g.seeds
        ]
        for point in g.points
    }


def grid_run_files(*names):
    """Four-seed grid: the given files of every point's run at this encoder seed (the
    final arm adopts the chosen point's), plus the arm's selection.json."""

    def inputs(wildcards):
        g = PROFILE.vision.grid
        fmt = dict(
            profile=wildcards.profile,
            dataset=wildcards.dataset,
            backbone=wildcards.backbone,
        )
        out = {"selection": f"{VPAIR}/{wildcards.arm}/selection.json".format(**fmt)}
        for point in g.points:
            for name in names:
                out[f"{name}@{point}"] = f"{VRUN}/{name}".format(
                    arm=f"{wildcards.arm}@{point}", seed=wildcards.seed, **fmt
                )
        return out

    return inputs


def claim_table_inputs(wildcards):
    """The result files one claim's table reads, and the grid selections its page shows."""
    claim = next(c for c in claims(PROFILE) if c["id"].lower() == wildcards.cid)
    files = [str(p) for p in claim_inputs(PROFILE, claim)]
    files += [str(p) for p in selection_paths(PROFILE, claim).values()]
    return list(dict.fromkeys(files))


def forest_dirs(wildcards):
    """Every claim's forest plot, drawn by the claim tables: the summary copies them."""
    return [
        FOREST_DIR.format(profile=wildcards.profile, cid=c["id"].lower())
        for c in claims(PROFILE)
    ]


def report_inputs(wildcards):
    """The result files the summary's figures read, every claim's table and its claim
    file (the summary reads the verdicts there)."""
    outs = report_outputs(PROFILE)
    tables = [
        str(p)
        for k, p in outs.items()
        if k.endswith(("_md", "_json")) and k != "claims_json"
    ]
    return [str(p) for p in result_files(PROFILE)] + tables
