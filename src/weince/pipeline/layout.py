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

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from weince.pipeline.arms import grid_points

__all__ = ["VISION_RUN", "VISION_PAIR", "TEXT_RUN", "TIMING", "CHECKS", "SYNTHETIC",
           "REPORT", "VisionRun", "TextRun", "Setting", "FOREST", "CLAIM_FILES", "vision_runs",
           "text_runs", "vision_pairs", "run_dir",
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


def vision_pairs(cfg: dict[str, Any]) -> list[tuple[str, str]]:
    """(dataset, backbone) pairs a profile runs: every dataset x every backbone, or only
    those of ``vision.pairs`` when it is set."""
    v = cfg.get("vision") or {}
    if not v.get("enabled", True):
        return []
    pairs = [(d, b) for d in v.get("datasets", []) for b in v.get("backbones", [])]
    only = v.get("pairs")
    if only is None:
        return pairs
    only = [tuple(p) for p in only]
    unknown = [p for p in only if p not in pairs]
    if unknown:
        raise ValueError(f"vision.pairs names {unknown}, not among vision.datasets x "
                         f"vision.backbones; add the data set / backbone there or drop the pair")
    return [p for p in pairs if p in only]


def vision_runs(cfg: dict[str, Any], *, grid: bool = False,
                arms: Iterable[str] | None = None, seeds: Iterable[int] | None = None,
                pairs: Iterable[tuple[str, str]] | None = None) -> Iterator[VisionRun]:
    """Every final vision run of a profile, pair by pair, arm by arm, seed by seed.

    ``grid=True``: the grid-point runs instead. ``arms`` / ``seeds`` / ``pairs`` narrow or
    replace the profile's lists (the ablation and norms plans, one arm of a claim)."""
    v = cfg.get("vision") or {}
    pairs = vision_pairs(cfg) if pairs is None else [tuple(p) for p in pairs]
    if grid:
        g = v.get("grid") or {}
        arms = [f"{a}@{p}" for a in g.get("arms", []) for p in grid_points(g)]
        seeds = g.get("seeds", [])
    arms = list(v.get("arms", []) if arms is None else arms)
    seeds = list(v.get("seeds", []) if seeds is None else seeds)
    for dataset, backbone in pairs:
        for arm in arms:
            for seed in seeds:
                yield VisionRun(dataset, backbone, arm, int(seed))


def text_runs(cfg: dict[str, Any], *, arms: Iterable[str] | None = None,
              seeds: Iterable[int] | None = None,
              models: Iterable[str] | None = None) -> Iterator[TextRun]:
    """Every SimCSE run of a profile (``arms`` / ``seeds`` / ``models`` narrow the lists)."""
    t = cfg.get("text") or {}
    if not t.get("enabled", True):
        return
    for model in (t.get("models", []) if models is None else models):
        for arm in (t.get("arms", []) if arms is None else arms):
            for seed in (t.get("seeds", []) if seeds is None else seeds):
                yield TextRun(model, arm, int(seed))


def norms_vision_runs(cfg: dict[str, Any]) -> list[VisionRun]:
    """The vision runs the norms analysis (claims N1-N3) covers: the profile's ``norms.vision``
    block narrows its arms and seeds (``null``: the profile's own)."""
    v, nv = cfg.get("vision") or {}, (cfg.get("norms") or {}).get("vision") or {}
    if not (v.get("enabled", True) and nv.get("enabled", True)):
        return []
    return list(vision_runs(cfg, arms=nv.get("arms") or None, seeds=nv.get("seeds") or None))


def norms_text_runs(cfg: dict[str, Any]) -> list[TextRun]:
    """The text units of the norms analysis: each of ``norms.text.models`` as shipped (arm
    :data:`PRETRAINED_ARM`, seed 0) and, with ``simcse_runs``, the first seed of every
    trained SimCSE arm."""
    t, nt = cfg.get("text") or {}, (cfg.get("norms") or {}).get("text") or {}
    if not nt.get("enabled", True):
        return []
    out = [TextRun(m, PRETRAINED_ARM, 0) for m in nt.get("models", [])]
    if nt.get("simcse_runs") and t.get("seeds"):
        out += list(text_runs(cfg, seeds=t["seeds"][:1]))
    return out


def run_dir(cfg: dict[str, Any], run: VisionRun | TextRun) -> Path:
    return run.dir(cfg.get("results", "results"), cfg["profile"])


def report_dir(cfg: dict[str, Any]) -> Path:
    """``{reports}/{profile}``: every page of the profile's report."""
    return Path(REPORT.format(reports=cfg.get("reports", "reports"), profile=cfg["profile"]))


@dataclass(frozen=True)
class Setting:
    """Where a row's numbers come from: a vision pair, a text model/corpus, or a single
    profile-wide file (timing, checks, synthetic)."""

    stage: str
    dataset: str | None = None
    backbone: str | None = None
    model: str | None = None
    corpus: str | None = None

    def label(self) -> str:
        if self.stage == "vision" or (self.stage == "norms" and self.dataset):
            return f"{self.dataset} / {self.backbone}"
        if self.stage == "norms" and self.backbone:   # a model named without its data
            return self.backbone
        if self.stage == "text":
            return f"{self.model} / {self.corpus}"
        if self.stage == "norms":
            return f"{self.model} (text)"
        if self.stage == "timing":
            return f"whole step, {self.backbone}"
        if self.stage == "synthetic":
            return "synthetic (the paper's setting)"
        return self.stage


def settings_for(cfg: dict[str, Any], stage: str) -> tuple[list[Setting], list[str]]:
    """The settings of ``stage`` the profile runs, and the arms it runs there."""
    if stage == "vision":
        return ([Setting("vision", dataset=d, backbone=b) for d, b in vision_pairs(cfg)],
                list((cfg.get("vision") or {}).get("arms", [])))
    if stage == "text":
        t = cfg.get("text") or {}
        if not t.get("enabled", True):
            return [], []
        return ([Setting("text", model=m, corpus=t.get("corpus", "?"))
                 for m in t.get("models", [])], list(t.get("arms", [])))
    if stage == "timing":
        t = cfg.get("timing") or {}
        tc = t.get("config") or {}
        return ([Setting("timing", backbone=tc.get("backbone") or "none")]
                if t.get("enabled", False) else [],
                list(tc.get("losses", ["infonce", "weince", "weince_recipe"])))
    if stage == "checks":
        c = cfg.get("checks") or {}
        return ([Setting("checks")] if c.get("enabled", True) else [], ["weince"])
    if stage == "synthetic":
        nf = (cfg.get("synthetic") or {}).get("noise_floor") or {}
        return ([Setting("synthetic")] if nf.get("enabled", True) else [],
                ["weibit", "softmax"])
    if stage == "norms":
        vis, txt = norms_vision_runs(cfg), norms_text_runs(cfg)
        settings = [Setting("norms", dataset=d, backbone=b) for d, b in
                    dict.fromkeys((r.dataset, r.backbone) for r in vis)]
        settings += [Setting("norms", model=m) for m in dict.fromkeys(r.model for r in txt)]
        return settings, list(dict.fromkeys([r.arm for r in vis] + [r.arm for r in txt]))
    raise ValueError(f"unknown stage {stage!r}; valid: {', '.join(STAGES)}")


EVT_FILES = ("pot.json", "link.json", "scores.npz")


def files_for(cfg: dict[str, Any]) -> Callable[[Setting, str, str], list[Path]]:
    """``(setting, arm, file name) -> [paths]``: one path per encoder seed of the profile
    (an empty list when the profile does not produce that file for that arm)."""
    root, profile = cfg.get("results", "results"), cfg["profile"]

    def f(setting: Setting, arm: str, name: str) -> list[Path]:
        if setting.stage == "vision":
            v = cfg.get("vision") or {}
            if arm not in v.get("arms", []):
                return []
            if name in EVT_FILES and arm not in (v.get("evt") or {}).get("arms", []):
                return []
            pair = [(setting.dataset, setting.backbone)]
            return [r.dir(root, profile) / name
                    for r in vision_runs(cfg, arms=[arm], pairs=pair)]
        if setting.stage == "text":
            if arm not in (cfg.get("text") or {}).get("arms", []):
                return []
            return [r.dir(root, profile) / name
                    for r in text_runs(cfg, arms=[arm], models=[setting.model])]
        if setting.stage == "timing":
            return [Path(TIMING.format(results=root, profile=profile)) / name]
        if setting.stage == "checks":
            return [Path(CHECKS.format(results=root, profile=profile)) / name]
        if setting.stage == "synthetic":
            return [Path(SYNTHETIC.format(results=root, profile=profile)) / name]
        if setting.stage == "norms":
            runs: list[VisionRun | TextRun] = (
                [r for r in norms_vision_runs(cfg) if r.arm == arm
                 and (r.dataset, r.backbone) == (setting.dataset, setting.backbone)]
                if setting.dataset else
                [r for r in norms_text_runs(cfg) if r.arm == arm and r.model == setting.model])
            return [r.dir(root, profile) / name for r in runs]
        return []

    return f


def summary_logs(cfg: dict[str, Any]) -> dict[str, dict[str, list[Path]]]:
    """The training logs of the summary's lambda-over-training figures: figure stem ->
    {arm: [train_log.jsonl per encoder seed]} (the WEINCE-family arms of each vision pair
    and text model)."""
    root, profile = cfg.get("results", "results"), cfg["profile"]
    out: dict[str, dict[str, list[Path]]] = {}
    v = cfg.get("vision") or {}
    for d, b in vision_pairs(cfg):
        arms = [a for a in v.get("arms", []) if a.startswith("weince")]
        out[f"lambda_training_{d}_{b}"] = {
            a: [r.dir(root, profile) / "train_log.jsonl"
                for r in vision_runs(cfg, arms=[a], pairs=[(d, b)])] for a in arms}
    t = cfg.get("text") or {}
    for m in (t.get("models", []) if t.get("enabled", True) else []):
        arms = [a for a in t.get("arms", []) if a.startswith("weince")]
        out[f"lambda_training_text_{m}"] = {
            a: [r.dir(root, profile) / "train_log.jsonl"
                for r in text_runs(cfg, arms=[a], models=[m])] for a in arms}
    return out
