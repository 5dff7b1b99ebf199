# Shared paths, wildcard constraints, resources and the target function of `rule all`.
# Path templates come from weince.report.layout, so rule outputs and the files the report
# reads cannot drift apart.
import re

from weince.report import layout
from weince.report.build import claim_inputs, figure_inputs, report_outputs
from weince.report.registry import load_claims
from weince.pipeline.selection import selection_paths, shares_seeds
from weince.protocol import probe_kwargs
from weince.report.workflow import grid_arms, pretrain_config, simcse_config

RESULTS = config["results"]
PROFILE = config["profile"]
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
REPORT_DIR = layout.REPORT.format(reports=config["reports"], profile="{profile}")
LOGS = f"{RESULTS}/{{profile}}/logs"
BENCH = f"{RESULTS}/{{profile}}/benchmarks"
VRUN_TAG = "{dataset}/{backbone}/{arm}/seed{seed}"
TRUN_TAG = "{model}/{arm}/seed{seed}"


wildcard_constraints:
    profile=re.escape(PROFILE),
    dataset="[a-z0-9]+",
    backbone="[a-z0-9_]+",
    arm=r"[a-z][a-z0-9_]*(@[a-z0-9_.\-]+)?",
    seed="[0-9]+",
    model=r"[A-Za-z0-9_.\-]+",
    cid="c[0-9]+",


def resources_for(rule_name):
    """gpu / mem_mb / runtime of a rule: config resources[rule] over resources[default]."""
    res = config.get("resources", {})
    out = {"gpu": 0, "mem_mb": 2000, "runtime": 30}
    out.update({k: v for k, v in res.get("default", {}).items() if k != "threads"})
    out.update({k: v for k, v in res.get(rule_name, {}).items() if k != "threads"})
    return out


def threads_for(rule_name):
    res = config.get("resources", {})
    return res.get(rule_name, {}).get(
        "threads", res.get("default", {}).get("threads", config["threads"])
    )


def selection_input(wildcards):
    """A final run of a grid arm needs the point chosen on validation."""
    base, point = layout.split_arm(wildcards.arm)
    if point is None and base in grid_arms(config):
        return f"{VPAIR}/{base}/selection.json".format(
            profile=wildcards.profile,
            dataset=wildcards.dataset,
            backbone=wildcards.backbone,
        )
    return []


def grid_linear_files(wildcards):
    g = config["vision"]["grid"]
    return {
        point: [
            f"{VRUN}/linear.json".format(
                profile=wildcards.profile,
                dataset=wildcards.dataset,
                backbone=wildcards.backbone,
                arm=f"{wildcards.arm}@{point}",
                seed=seed,
            )
            for seed in g["seeds"]
        ]
        for point in layout.grid_points(g)
    }


def grid_knn_files(wildcards):
    """Four-seed grid (official): the knn.json of every point and seed, so that each k-NN
    metric gets its own point; one-seed grid: none (the linear point serves k-NN)."""
    if not shares_seeds(config):
        return {}
    g = config["vision"]["grid"]
    return {
        f"knn@{point}": [
            f"{VRUN}/knn.json".format(
                profile=wildcards.profile,
                dataset=wildcards.dataset,
                backbone=wildcards.backbone,
                arm=f"{wildcards.arm}@{point}",
                seed=seed,
            )
            for seed in g["seeds"]
        ]
        for point in layout.grid_points(g)
    }


def grid_run_files(*names):
    """Four-seed grid: the given files of every point's run at this encoder seed (the
    final arm adopts the chosen point's), plus the arm's selection.json."""

    def inputs(wildcards):
        g = config["vision"]["grid"]
        fmt = dict(
            profile=wildcards.profile,
            dataset=wildcards.dataset,
            backbone=wildcards.backbone,
        )
        out = {"selection": f"{VPAIR}/{wildcards.arm}/selection.json".format(**fmt)}
        for point in layout.grid_points(g):
            for name in names:
                out[f"{name}@{point}"] = f"{VRUN}/{name}".format(
                    arm=f"{wildcards.arm}@{point}", seed=wildcards.seed, **fmt
                )
        return out

    return inputs


def claims_registry():
    return load_claims(config["claims"])


def claim_by_cid(cid):
    return next(c for c in claims_registry()["claims"] if c["id"].lower() == cid)


def table_inputs(wildcards):
    claim = claim_by_cid(wildcards.cid)
    return [str(p) for p in claim_inputs(config, claim)] + [
        str(p) for p in selection_paths(config, claim).values()
    ]


def result_files():
    """Every result file the report reads (claim inputs and training logs)."""
    files = []
    for c in claims_registry()["claims"]:
        files += [str(p) for p in claim_inputs(config, c)]
    files += [str(p) for p in figure_inputs(config)]
    return list(dict.fromkeys(files))


def report_inputs(wildcards):
    tables = [
        f"{REPORT_DIR}/table_{c['id'].lower()}.md".format(profile=PROFILE)
        for c in claims_registry()["claims"]
    ]
    return result_files() + tables


def all_targets():
    """The report, and every result file it reads: a deleted result is rebuilt by a
    plain `snakemake`, and then only the tables that read it and the summary."""
    outs = report_outputs(config)
    tables = [str(outs[f"c{i}_{ext}"]) for i in range(1, 10) for ext in ("md", "tex")]
    return [str(outs["summary"])] + tables + result_files()
