"""What a profile asks for: every file ``rule all`` wants, from one function.

:func:`all_targets` is the input of ``rule all``: the summary, one table per claim of the
registry (however many), every result file they read, the probe and k-NN results of every
run of every arm in ``vision.arms`` (whether or not a claim names the arm), the ablation
page when the profile runs an ablation group and the norms page when it analyses a unit. A
deleted result is rebuilt by a plain ``snakemake``, and then only the pages that read it.

    from weince.pipeline.targets import all_targets, norms_results
    all_targets(prof)            # prof: the resolved profile (weince.pipeline.profile)
    norms_results(prof)          # every norms.json the norms page reads (claims N1-N3)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weince.norms.files import RESULT_FILE as NORMS_FILE
from weince.pipeline.ablations import ablation_inputs, ablation_outputs, ablation_plan
from weince.pipeline.claims import load_claims, paper_rows, row_matches
from weince.pipeline.layout import (CLAIM_FILES, Setting, TextRun, VisionRun, files_for,
                                    norms_text_runs, norms_vision_runs, run_dir, settings_for,
                                    summary_logs, vision_runs)
from weince.pipeline.profile import Profile
from weince.pipeline.rehearsal import forecast_outputs

__all__ = ["claims", "claim_settings", "claim_inputs", "figure_inputs", "result_files",
           "ARM_EVALUATIONS", "arm_evaluations",
           "report_outputs", "table_files", "norms_results", "norms_outputs",
           "companion_targets", "ablation_targets", "all_targets"]


def claims(prof: Profile) -> list[dict[str, Any]]:
    """The claims of the profile's registry (``claims``), in registry order."""
    return load_claims(prof.claims)["claims"]


def claim_settings(prof: Profile, claim: Mapping[str, Any]) -> tuple[list[Setting], list[str]]:
    """The settings one claim's table reads, and the arms run there: the claim's own paper
    settings where the profile runs at least one of them (the profile's other settings are
    other claims' rows: C3 reads CIFAR-100 x ResNet-18 alone, so asking for its table plans
    that pair's runs), else every setting of its stage the profile runs (a scale model)."""
    settings, arms = settings_for(prof, claim["stage"])
    rows = paper_rows(dict(claim))
    own = [s for s in settings if any(row_matches(s, r, claim["stage"]) for r in rows)]
    return (own or settings), arms


def claim_inputs(prof: Profile, claim: Mapping[str, Any]) -> list[Path]:
    """Every result file one claim reads at this profile (the inputs of its table rule)."""
    settings, arms = claim_settings(prof, claim)
    fetch = files_for(prof)
    a = claim["arms"]
    shown = list(dict.fromkeys(x for x in [a.get("baseline"), a["primary"], *a.get("others", [])]
                               if x))
    if claim["kind"] == "overhead" and a.get("baseline") in shown:
        shown.remove(a["baseline"])
    if claim["kind"] == "norms":   # every analysed unit (arms: {primary: all})
        shown = arms
    out: list[Path] = []
    for s in settings:
        for arm in shown:
            if claim["stage"] in ("vision", "text", "norms") and arm not in arms:
                continue
            out += fetch(s, arm, claim["file"])
    return list(dict.fromkeys(out))


ARM_EVALUATIONS = ("linear.json", "knn.json")   # what every run of an arm is evaluated by


def arm_evaluations(prof: Profile) -> list[Path]:
    """The linear probe and k-NN results of every final vision run (each pair, arm of
    ``vision.arms`` and seed): an arm the profile names is pretrained and evaluated, whether
    or not a claim or an ablation group reads it."""
    if not prof.vision.enabled:
        return []
    return [run_dir(prof, r) / f for r in vision_runs(prof) for f in ARM_EVALUATIONS]


def figure_inputs(prof: Profile) -> list[Path]:
    """Training logs the summary's lambda-over-training figures read."""
    return [p for logs in summary_logs(prof).values() for paths in logs.values() for p in paths]


def result_files(prof: Profile) -> list[Path]:
    """Every result file the summary reads (claim inputs and training logs)."""
    files: list[Path] = []
    for c in claims(prof):
        files += claim_inputs(prof, c)
    return list(dict.fromkeys(files + figure_inputs(prof)))


def table_files(prof: Profile, claim_id: str) -> dict[str, Path]:
    """``{"md", "tex", "json"}`` of one claim: its table and its claim file (the computed
    result the summary reads)."""
    d = prof.report_dir
    out = {ext: d / f"table_{claim_id.lower()}.{ext}" for ext in ("md", "tex")}
    out["json"] = d / CLAIM_FILES / f"{claim_id.lower()}.json"
    return out


def report_outputs(prof: Profile) -> dict[str, Path]:
    """The summary's files and every claim's table: ``summary``, ``claims_json``,
    ``tables_tex``, ``figures`` and ``{id}_md`` / ``{id}_tex`` / ``{id}_json`` (its claim
    file) per registry claim."""
    d = prof.report_dir
    out = {"summary": d / "summary.md", "claims_json": d / "claims.json",
           "tables_tex": d / "tables.tex", "figures": d / "figures"}
    for c in claims(prof):
        for ext, p in table_files(prof, c["id"]).items():
            out[f"{c['id'].lower()}_{ext}"] = p
    return out


def norms_results(prof: Profile) -> list[Path]:
    """Every ``norms.json`` of the profile's norms analysis (its ``norms`` block, claims
    N1-N3): ``{run}/norms.json`` of each vision unit (dataset x backbone x arm x seed), then
    of each text unit (a model as shipped, arm ``pretrained`` seed 0, and with
    ``simcse_runs`` the first seed of every trained SimCSE arm)."""
    runs: list[VisionRun | TextRun] = [*norms_vision_runs(prof), *norms_text_runs(prof)]
    return [run_dir(prof, r) / NORMS_FILE for r in runs]


def norms_outputs(prof: Profile) -> dict[str, Path]:
    """The files of the norms page: ``md``, ``summary`` (json) and ``figures`` (folder)."""
    d = prof.report_dir
    return {"md": d / "norms.md", "summary": d / "norms_summary.json",
            "figures": d / "norms_figures"}


def ablation_targets(prof: Profile) -> list[Path]:
    """The ablation page (nothing when the profile's plan has no group)."""
    return [ablation_outputs(prof)["md"]] if ablation_plan(prof).groups else []


def companion_targets(prof: Profile) -> list[Path]:
    """The pages the summary links to: ablations and norms (each only when the profile
    runs it), and a rehearsal's cost forecast."""
    norms = norms_outputs(prof)
    return (ablation_targets(prof)
            + ([norms["md"], norms["summary"]] if norms_results(prof) else [])
            + [p for k, p in forecast_outputs(prof).items() if k == "md"])


def all_targets(prof: Profile) -> list[str]:
    """Everything ``rule all`` builds, as strings, without duplicates."""
    outs = report_outputs(prof)
    tables = [p for k, p in outs.items() if k.endswith(("_md", "_tex", "_json"))
              and k != "claims_json"]
    files = [outs["summary"], *tables, *result_files(prof), *arm_evaluations(prof),
             *companion_targets(prof)]
    if ablation_targets(prof):
        files += ablation_inputs(ablation_plan(prof))
    files += norms_results(prof)
    files += list(forecast_outputs(prof).values())   # a rehearsal's cost forecast
    return list(dict.fromkeys(str(p) for p in files))
