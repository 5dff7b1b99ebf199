"""Where every result lives, and which runs a profile asks for: the path templates of
``docs/architecture.md`` and the one enumeration of runs, in one place.

The Snakemake rules (``workflow/rules/common.smk``), the targets of ``rule all``
(:mod:`weince.pipeline.targets`) and the report (:mod:`weince.report`) all build paths from
here, so a rule's output and the file the report reads can never drift apart.

    results/{profile}/vision/{dataset}/{backbone}/{arm}/seed{seed}/   encoder.pt ... link.json
    results/{profile}/vision/{dataset}/{backbone}/{arm}/selection.json   (grid arms)
    results/{profile}/text/{model}/{arm}/seed{seed}/                 train.json sts.json
    results/{profile}/timing/timing.json
    results/{profile}/checks/special_case.json
    results/{profile}/synthetic/noise_floor.json, noise_floor.csv   (C11, no training)
    results/{profile}/forest/{claim}/forest_{claim}.png    (a claim-table job's plot)
    reports/{profile}/summary.md, table_<id>.md/.tex, figures/

A grid point of a loss arm is spelled ``{arm}@{point}`` in the ``arm`` slot, e.g.
``weince@m2_kr10_ka1``: the same rules train and evaluate it; the final arm ``weince``
reads the point chosen on validation from ``selection.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from weince.pipeline.profile import Profile
from weince.utils.claim_rows import Setting

__all__ = ["VISION_RUN", "VISION_PAIR", "TEXT_RUN", "TIMING", "CHECKS", "SYNTHETIC",
           "REPORT", "VisionRun", "TextRun", "FOREST", "CLAIM_FILES", "vision_runs",
           "text_runs", "run_dir", "summary_logs",
           "norms_vision_runs", "norms_text_runs", "PRETRAINED_ARM", "STAGES",
           "settings_for", "files_for", "report_dir", "EVT_FILES"]

VISION_RUN = "{results}/{profile}/vision/{dataset}/{backbone}/{arm}/seed{seed}"
VISION_PAIR = "{results}/{profile}/vision/{dataset}/{backbone}"
TEXT_RUN = "{results}/{profile}/text/{model}/{arm}/seed{seed}"
TIMING = "{results}/{profile}/timing"
CHECKS = "{results}/{profile}/checks"
SYNTHETIC = "{results}/{profile}/synthetic"   # the paper's synthetic experiment (C11)
REPORT = "{reports}/{profile}"
CLAIM_FILES = "claims"   # {reports}/{profile}/claims/<id>.json: a claim's computed result
FOREST = "{results}/{profile}/forest/{cid}"   # drawn by a claim-table job, copied by the summary
PRETRAINED_ARM = "pretrained"   # a text unit of the norms analysis as shipped (seed 0)
STAGES = ("vision", "text", "timing", "checks", "synthetic", "norms")   # a claim's ``stage``

@dataclass(frozen=True)
class VisionRun:
    dataset: str
    backbone: str
    arm: str
    seed: int

    def dir(self, results: str | Path, profile: str) -> Path:
        return Path(VISION_RUN.format(results=results, profile=profile, **self.__dict__))


@dataclass(frozen=True)
class TextRun:
    model: str
    arm: str
    seed: int

    def dir(self, results: str | Path, profile: str) -> Path:
        return Path(TEXT_RUN.format(results=results, profile=profile, **self.__dict__))


def vision_runs(prof: Profile, *, grid: bool = False,
                arms: Iterable[str] | None = None, seeds: Iterable[int] | None = None,
                pairs: Iterable[tuple[str, str]] | None = None) -> Iterator[VisionRun]:
    """Every final vision run of a profile, pair by pair, arm by arm, seed by seed.

    ``grid=True``: the grid-point runs instead. ``arms`` / ``seeds`` / ``pairs`` narrow or
    replace the profile's lists (the ablation and norms plans, one arm of a claim)."""
    v = prof.vision
    pairs = v.pairs if pairs is None else [(d, b) for d, b in pairs]
    if grid:
        arms = [f"{a}@{p}" for a in v.grid.arms for p in v.grid.points]
        seeds = v.grid.seeds
    arms = list(v.arms if arms is None else arms)
    seeds = list(v.seeds if seeds is None else seeds)
    for dataset, backbone in pairs:
        for arm in arms:
            for seed in seeds:
                yield VisionRun(dataset, backbone, arm, int(seed))


def text_runs(prof: Profile, *, arms: Iterable[str] | None = None,
              seeds: Iterable[int] | None = None,
              models: Iterable[str] | None = None) -> Iterator[TextRun]:
    """Every SimCSE run of a profile (``arms`` / ``seeds`` / ``models`` narrow the lists)."""
    t = prof.text
    if not t.enabled:
        return
    for model in (t.models if models is None else models):
        for arm in (t.arms if arms is None else arms):
            for seed in (t.seeds if seeds is None else seeds):
                yield TextRun(model, arm, int(seed))


def norms_vision_runs(prof: Profile) -> list[VisionRun]:
    """The vision runs the norms analysis (claims N1-N3) covers: the profile's ``norms.vision``
    block narrows its arms and seeds (``null``: the profile's own)."""
    nv = prof.norms.vision
    if not (prof.vision.enabled and nv.enabled):
        return []
    return list(vision_runs(prof, arms=nv.arms or None, seeds=nv.seeds or None))


def norms_text_runs(prof: Profile) -> list[TextRun]:
    """The text units of the norms analysis: each of ``norms.text.models`` as shipped (arm
    :data:`PRETRAINED_ARM`, seed 0) and, with ``simcse_runs``, the first seed of every
    trained SimCSE arm."""
    nt = prof.norms.text
    if not nt.enabled:
        return []
    out = [TextRun(m, PRETRAINED_ARM, 0) for m in nt.models]
    if nt.simcse_runs and prof.text.seeds:
        out += list(text_runs(prof, seeds=prof.text.seeds[:1]))
    return out


def run_dir(prof: Profile, run: VisionRun | TextRun) -> Path:
    return run.dir(prof.results, prof.name)


def report_dir(prof: Profile) -> Path:
    """``{reports}/{profile}``: every page of the profile's report."""
    return prof.report_dir


def settings_for(prof: Profile, stage: str) -> tuple[list[Setting], list[str]]:
    """The settings of ``stage`` the profile runs, and the arms it runs there."""
    if stage == "vision":
        return ([Setting("vision", dataset=d, backbone=b) for d, b in prof.vision.pairs],
                list(prof.vision.arms))
    if stage == "text":
        t = prof.text
        if not t.enabled:
            return [], []
        return ([Setting("text", model=m, corpus=t.corpus) for m in t.models], list(t.arms))
    if stage == "timing":
        tc = prof.timing.config
        return ([Setting("timing", backbone=tc.backbone or "none")]
                if prof.timing.enabled else [], list(tc.losses))
    if stage == "checks":
        return ([Setting("checks")] if prof.checks.enabled else [], ["weince"])
    if stage == "synthetic":
        return ([Setting("synthetic")] if prof.noise_floor.enabled else [],
                ["weibit", "softmax"])
    if stage == "norms":
        vis, txt = norms_vision_runs(prof), norms_text_runs(prof)
        settings = [Setting("norms", dataset=d, backbone=b) for d, b in
                    dict.fromkeys((r.dataset, r.backbone) for r in vis)]
        settings += [Setting("norms", model=m) for m in dict.fromkeys(r.model for r in txt)]
        return settings, list(dict.fromkeys([r.arm for r in vis] + [r.arm for r in txt]))
    raise ValueError(f"unknown stage {stage!r}; valid: {', '.join(STAGES)}")


EVT_FILES = ("pot.json", "link.json", "scores.npz")


def files_for(prof: Profile) -> Callable[[Setting, str, str], list[Path]]:
    """``(setting, arm, file name) -> [paths]``: one path per encoder seed of the profile
    (an empty list when the profile does not produce that file for that arm)."""
    root, name = prof.results, prof.name

    def f(setting: Setting, arm: str, file: str) -> list[Path]:
        if setting.stage == "vision":
            v = prof.vision
            if arm not in v.arms:
                return []
            if file in EVT_FILES and arm not in v.evt.arms:
                return []
            assert setting.dataset is not None and setting.backbone is not None   # a pair's row
            pair = [(setting.dataset, setting.backbone)]
            return [r.dir(root, name) / file for r in vision_runs(prof, arms=[arm], pairs=pair)]
        if setting.stage == "text":
            if arm not in prof.text.arms:
                return []
            assert setting.model is not None   # a text row names its model
            return [r.dir(root, name) / file
                    for r in text_runs(prof, arms=[arm], models=[setting.model])]
        if setting.stage == "timing":
            return [Path(TIMING.format(results=root, profile=name)) / file]
        if setting.stage == "checks":
            return [Path(CHECKS.format(results=root, profile=name)) / file]
        if setting.stage == "synthetic":
            return [Path(SYNTHETIC.format(results=root, profile=name)) / file]
        if setting.stage == "norms":
            runs: list[VisionRun | TextRun] = (
                [r for r in norms_vision_runs(prof) if r.arm == arm
                 and (r.dataset, r.backbone) == (setting.dataset, setting.backbone)]
                if setting.dataset else
                [r for r in norms_text_runs(prof) if r.arm == arm and r.model == setting.model])
            return [r.dir(root, name) / file for r in runs]
        return []

    return f


def summary_logs(prof: Profile) -> dict[str, dict[str, list[Path]]]:
    """The training logs of the summary's lambda-over-training figures: figure stem ->
    {arm: [train_log.jsonl per encoder seed]} (the WEINCE-family arms of each vision pair
    and text model)."""
    root, name = prof.results, prof.name
    out: dict[str, dict[str, list[Path]]] = {}
    for d, b in prof.vision.pairs:
        arms = [a for a in prof.vision.arms if a.startswith("weince")]
        out[f"lambda_training_{d}_{b}"] = {
            a: [r.dir(root, name) / "train_log.jsonl"
                for r in vision_runs(prof, arms=[a], pairs=[(d, b)])] for a in arms}
    for m in (prof.text.models if prof.text.enabled else ()):
        arms = [a for a in prof.text.arms if a.startswith("weince")]
        out[f"lambda_training_text_{m}"] = {
            a: [r.dir(root, name) / "train_log.jsonl"
                for r in text_runs(prof, arms=[a], models=[m])] for a in arms}
    return out
