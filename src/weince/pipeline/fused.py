"""Fused vision jobs (``vision_jobs: per_encoder`` or ``per_arm``), for a profile of small jobs.

Every ``script:`` job is a fresh interpreter that imports torch and the library before it
does its work; at the embedded default's sizes that start-up is a large part of a job's
cost. With ``vision_jobs: per_encoder``, the workflow runs the steps one encoder needs (its
pretraining, features, linear probe, k-NN, head probe, similarity scores, tail fit, link
fit, norms analysis: the rules in :data:`STEPS`) in one job, one after the other in one
interpreter, by running each step's own script (``workflow/scripts/<rule>.py``) with the
inputs, outputs, log and params the step's rule would give it. ``per_arm`` (the embedded
default's setting) runs every seed of an arm that way in one job, one seed after the other,
each with its own steps (:func:`vision_jobs`). The files, their paths and the logs are those
of the per-step rules; the job's benchmark file is
``benchmarks/vision_run/<dataset>/<backbone>/<arm>/seed<seeds>.tsv``.

``vision_jobs: per_step`` (the schema's default, and every other shipped profile's) keeps one
job per step: the rules of ``workflow/rules/*.smk`` as they are.

:func:`vision_chains` decides which steps each encoder runs: the files the profile's targets,
its grid selection and its norms analysis read, less what another rule writes (a grid arm's
adopted run: its encoder, training log and linear probe; the four-seed grid's k-NN files).
Jobs with the same seeds and steps share one rule (``vision_run_<n>``), whose ``prefix``
wildcard (``<dataset>/<backbone>/<arm>``) is constrained to exactly those arms, so that the
per-step rules still make any file outside them.
"""

from __future__ import annotations

import re
import runpy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from weince.pipeline.layout import VISION_RUN, norms_vision_runs, run_dir
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import adopted_seeds, shares_seeds
from weince.pipeline.stages import (features_settings, grid_arms, knn_settings, link_settings,
                                    norms_settings, pot_settings, probe_settings,
                                    rerun_trigger, scores_settings)
from weince.pipeline.targets import all_targets

__all__ = ["STEPS", "Step", "vision_chains", "vision_jobs", "step_params", "run_wildcards",
           "run_chain", "output_key", "log_key", "RUN_TAG", "FUSED", "TEXT_STEPS",
           "fused_text", "run_text_chain"]

RUN_TAG = "{dataset}/{backbone}/{arm}/seed{seed}"
FUSED = ("per_encoder", "per_arm")   # the values of `vision_jobs` that fuse steps into jobs
_TAG_RE = re.compile(r"(?P<dataset>[^/]+)/(?P<backbone>[^/]+)/(?P<arm>[^/]+)/seed(?P<seed>\d+)")


@dataclass(frozen=True)
class Step:
    """One per-step rule as a step of an encoder's job: its script, its log folder (under
    ``logs/``), its outputs and its inputs (``name -> file in the run folder``; an integer
    name is a positional one, as the rule declares it)."""

    script: str
    log: str
    outputs: Mapping[str | int, str]
    inputs: Mapping[str | int, str]


# in the order an encoder's job runs them (each step's inputs come before it)
STEPS: dict[str, Step] = {
    "pretrain": Step("pretrain.py", "pretrain",
                     {"encoder": "encoder.pt", "summary": "train.json",
                      "train_log": "train_log.jsonl"}, {}),
    "features": Step("features.py", "features", {0: "features.pt"}, {"encoder": "encoder.pt"}),
    "linear": Step("linear.py", "linear", {0: "linear.json"}, {"encoder": "encoder.pt"}),
    "knn": Step("knn.py", "knn", {0: "knn.json"}, {0: "features.pt"}),
    "linear_head": Step("linear_head.py", "linear_head", {0: "linear_head.json"},
                        {"encoder": "encoder.pt"}),
    "collect_scores": Step("collect_scores.py", "scores", {0: "scores.npz"},
                           {"encoder": "encoder.pt"}),
    "pot": Step("pot.py", "pot", {0: "pot.json"}, {0: "scores.npz"}),
    "link": Step("link.py", "link", {0: "link.json"}, {0: "scores.npz"}),
    "norms_vision": Step("norms_vision.py", "norms",
                         {"result": "norms.json", "probes": "norms_probes.npz"},
                         {"encoder": "encoder.pt", "features": "features.pt"}),
}
_MAKER = {f: name for name, s in STEPS.items() for f in s.outputs.values()}


def run_wildcards(tag: str) -> dict[str, str]:
    """``dataset``, ``backbone``, ``arm``, ``seed`` of a run tag
    (``<dataset>/<backbone>/<arm>/seed<seed>``)."""
    m = _TAG_RE.fullmatch(tag)
    if m is None:
        raise ValueError(f"not a vision run tag (dataset/backbone/arm/seedN): {tag!r}")
    return m.groupdict()


def _needed(prof: Profile) -> dict[str, set[str]]:
    """Run tag -> the files of that run folder that some rule or target reads."""
    root = VISION_RUN.format(results=prof.results, profile=prof.name, dataset="(?P<dataset>[^/]+)",
                             backbone="(?P<backbone>[^/]+)", arm="(?P<arm>[^/]+)",
                             seed=r"(?P<seed>\d+)")
    pattern = re.compile(root + "/(?P<file>[^/]+)")
    files = list(all_targets(prof))
    files += [str(run_dir(prof, r) / "features.pt") for r in norms_vision_runs(prof)]
    g = prof.vision.grid
    for dataset, backbone in prof.vision.pairs:
        for arm in grid_arms(prof):
            for point in g.points:
                for seed in g.seeds:
                    d = VISION_RUN.format(results=prof.results, profile=prof.name,
                                          dataset=dataset, backbone=backbone,
                                          arm=f"{arm}@{point}", seed=seed)
                    files += [f"{d}/linear.json"] + ([f"{d}/knn.json"] if shares_seeds(prof)
                                                     else [])
    out: dict[str, set[str]] = {}
    for f in files:
        m = pattern.fullmatch(str(f))
        if m is not None and m["file"] in _MAKER:
            out.setdefault(RUN_TAG.format(**m.groupdict()), set()).add(m["file"])
    return out


def _others(prof: Profile, wc: Mapping[str, str]) -> set[str]:
    """The files of a run that another rule writes: the adopted run of a grid arm (its
    encoder, training files and linear probe) and the four-seed grid's final k-NN."""
    if wc["arm"] not in grid_arms(prof):
        return set()
    out = set()
    if int(wc["seed"]) in adopted_seeds(prof):
        out |= {"encoder.pt", "train.json", "train_log.jsonl", "linear.json"}
    if shares_seeds(prof):
        out.add("knn.json")
    return out


def vision_chains(prof: Profile) -> dict[tuple[str, ...], list[str]]:
    """The steps of each encoder's job, as ``{steps: [run tags]}`` (steps in
    :data:`STEPS` order, tags sorted); empty unless ``vision_jobs`` fuses them
    (:data:`FUSED`)."""
    if prof.config.get("vision_jobs", "per_step") not in FUSED or not prof.vision.enabled:
        return {}
    chains: dict[tuple[str, ...], list[str]] = {}
    for tag, files in sorted(_needed(prof).items()):
        files = set(files)
        if files & {"features.pt", "knn.json", "norms.json"}:   # the probes extract their own
            files.add("features.pt")
        if files & {"pot.json", "link.json"}:
            files.add("scores.npz")
        files.add("encoder.pt")
        files -= _others(prof, run_wildcards(tag))
        steps = tuple(s for s in STEPS if files & set(STEPS[s].outputs.values()))
        chains.setdefault(steps, []).append(tag)
    return chains


def vision_jobs(prof: Profile) -> dict[tuple[tuple[str, tuple[str, ...]], ...], list[str]]:
    """The encoder jobs, as ``{((seed, steps), ...): [run prefixes]}`` (a prefix is
    ``<dataset>/<backbone>/<arm>``): each prefix and key is one job that runs, for each seed
    in turn, that seed's steps. ``per_encoder``: one seed a job; ``per_arm``: every seed of
    an arm in one job. Empty for ``per_step``."""
    per_arm = prof.config.get("vision_jobs") == "per_arm"
    runs_of: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for steps, tags in vision_chains(prof).items():
        for tag in tags:
            wc = run_wildcards(tag)
            prefix = "/".join((wc["dataset"], wc["backbone"], wc["arm"]))
            runs_of.setdefault(prefix, []).append((wc["seed"], steps))
    jobs: dict[tuple[tuple[str, tuple[str, ...]], ...], list[str]] = {}
    for prefix, runs in sorted(runs_of.items()):
        runs = sorted(runs, key=lambda r: int(r[0]))
        for group in ([tuple(runs)] if per_arm else [(r,) for r in runs]):
            jobs.setdefault(group, []).append(prefix)
    return jobs


def step_params(prof: Profile, step: str, wc: Mapping[str, str]) -> dict[str, Any]:
    """The params the per-step rule ``step`` gives its script for the run ``wc`` (the same
    values, so that both ways run a step alike and rerun on the same changes)."""
    if step == "pretrain":
        return {"cfg": rerun_trigger(prof, wc)}
    if step in ("linear", "linear_head"):
        return {"kwargs": probe_settings(prof, wc["arm"]), "features": features_settings(prof)}
    if step == "norms_vision":
        return {"cfg": norms_settings(prof)}
    if step == "knn":
        return {"kwargs": knn_settings(prof)}
    settings = {"features": features_settings, "collect_scores": scores_settings,
                "pot": pot_settings, "link": link_settings}
    if step in settings:
        return {"kwargs": settings[step](prof)}
    raise ValueError(f"not a step of an encoder's job: {step!r} (one of {', '.join(STEPS)})")


class _Named(list):
    """A step's input, output, log, params or wildcards as its script reads them: by
    position (integer names, and every value in order) and by attribute."""

    def __init__(self, items: Mapping[Any, Any]) -> None:
        super().__init__(items.values())
        for key, value in items.items():
            if isinstance(key, str):
                setattr(self, key, value)


def _run_step(smk: Any, step: str, spec: Step, *, inputs: Mapping[str | int, Any],
              outputs: Mapping[str | int, Any], log: str, params: Mapping[str | int, Any],
              wildcards: Any) -> None:
    """Run the rule ``step``'s script (``spec.script``) in this interpreter, with the
    ``snakemake`` object that rule would give it: its inputs, outputs, log, params and
    wildcards; threads, resources and config are the fused job's."""
    job = SimpleNamespace(
        input=_Named(inputs), output=_Named(outputs), log=_Named({0: log}),
        params=_Named(params), wildcards=wildcards, threads=smk.threads,
        resources=smk.resources, config=smk.config, rule=step, bench_iteration=None,
        scriptdir=smk.scriptdir)
    runpy.run_path(str(Path(smk.scriptdir) / spec.script), init_globals={"snakemake": job},
                   run_name="__main__")


def output_key(step: str, name: str | int, seed: str) -> str:
    """The name of a step's output in an encoder job's rule (one per step, output and seed)."""
    return f"{step}__{name}__s{seed}"


def log_key(step: str, seed: str) -> str:
    """The name of a step's log in an encoder job's rule."""
    return f"{step}__s{seed}"


# a SimCSE run's training and its STS evaluation, for `per_arm`'s one job per text run
TEXT_STEPS: dict[str, Step] = {
    "simcse": Step("simcse.py", "simcse",
                   {"model": "model", "summary": "train.json", "train_log": "train_log.jsonl"}, {}),
    "sts": Step("sts.py", "sts", {0: "sts.json"}, {"model": "model"}),
}


def fused_text(prof: Profile) -> bool:
    """Whether each SimCSE run and its STS evaluation are one job (``vision_jobs: per_arm``,
    the embedded default): two interpreters' start-up (torch, transformers, the model) where
    the work is seconds."""
    return prof.config.get("vision_jobs") == "per_arm" and prof.text.enabled


def run_text_chain(smk: Any) -> None:
    """Train a SimCSE run, then evaluate it on STS (:data:`TEXT_STEPS`), each by its own
    rule's script with that rule's outputs, log and params, in this interpreter."""
    run = Path(smk.output.sts__0).parent
    for step, spec in TEXT_STEPS.items():
        _run_step(smk, step, spec, inputs={k: str(run / f) for k, f in spec.inputs.items()},
                  outputs={k: getattr(smk.output, f"{step}__{k}") for k in spec.outputs},
                  log=getattr(smk.log, step), params=smk.params.settings[step],
                  wildcards=smk.wildcards)


def run_chain(smk: Any) -> None:
    """Run an encoder job's runs one after the other (``smk.params.steps``: each seed's
    steps, in order), each step by its per-step rule's script (``workflow/scripts/<rule>.py``)
    in this interpreter, with the inputs, outputs, log, params and wildcards that rule would
    give it for the run of that seed."""
    results = Profile.of(smk.config).results
    for seed, steps in smk.params.steps.items():
        wc = {"profile": smk.wildcards.profile,
              **run_wildcards(f"{smk.wildcards.prefix}/seed{seed}")}
        run = Path(VISION_RUN.format(results=results, **wc))
        for step in steps:
            spec = STEPS[step]
            inputs: dict[str | int, Any] = {k: str(run / f) for k, f in spec.inputs.items()}
            if step == "pretrain":
                inputs["selection"] = getattr(smk.input, "selection", [])
            _run_step(smk, step, spec, inputs=inputs,
                      outputs={k: getattr(smk.output, output_key(step, k, seed))
                               for k in spec.outputs},
                      log=getattr(smk.log, log_key(step, seed)),
                      params=smk.params.settings[seed][step],
                      wildcards=_Named(wc))
