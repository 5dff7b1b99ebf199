"""What a profile's training costs on a named GPU, or a mixed set of them, without a GPU.

    from weince.cost.estimate import estimate, claim_rows, job_runtime
    est = estimate(prof, "h100-sxm")                 # prof: a resolved Profile (config/paper.yaml)
    est.total()                                      # (low, high) GPU-hours of every run
    estimate(prof, ["a100-80gb", "h100-sxm"]).total()  # a mixed set: any run lands on either
    job_runtime(prof, "imagenet32/vit_s")            # the SLURM request of its jobs

Every function takes the resolved :class:`~weince.pipeline.profile.Profile` (its defaults are
the schema's), never a raw config dict; :class:`CostSettings` types its ``cost`` block, and
:func:`with_overlay` merges an overlay into a profile and resolves it again.

How (docs/cost.md):

- **FLOPs of one optimiser step**: the committed table of counted FLOPs per example
  (:mod:`weince.cost.counts`; counted with torch by ``weince cost --recount``): SimCLR
  runs both views (``2 x batch`` images) forward and backward through the project's model
  plus the loss's ``2N x 2N`` similarity matmul; SimCSE the two dropout passes
  (``2 x batch`` sequences of ``max_length`` tokens) plus the STS-B dev evaluations every
  ``eval_every`` steps.
- **Steps per run**: ``epochs x (training images // batch)`` (official split sizes,
  :data:`TRAIN_IMAGES`) and ``epochs x (sentences // batch)`` for SimCSE.
- **Seconds per step**: :func:`weince.cost.throughput.step_time`, the measured throughput
  of the GPU for the step's family and precision (ResNets are convolutions, TF32 by
  cuDNN's default unless ``amp``; ViT-S and BERT are matmuls, FP32 unless ``tf32``/``amp``).
- **Measured beats estimated**: an entry of ``cost.measured`` for the GPU, setting and
  precision (the largest over arms, scaled to the profile's batch) replaces the estimate.
- **A mixed set** (``cost.gpu: [a100-80gb, h100-sxm]``): a run may land on any GPU of the
  set, so its range runs from the fastest GPU's fast end to the slowest GPU's slow end, and
  each job's SLURM request fits the slowest (:func:`job_runtime`).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weince.cost.counts import dataset_spec, text_counts, text_geometry, vision_counts
from weince.cost.throughput import device, load_devices, step_time, thin_evidence
from weince.data.locations import SPLIT_IMAGES
from weince.pipeline import layout
from weince.pipeline.ablations import ablation_inputs, ablation_plan
from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import adopted_seeds
from weince.pipeline.stages import grid_arms
from weince.utils.config import deep_merge

__all__ = ["TRAIN_IMAGES", "TEST_IMAGES", "WIKI1M_SENTENCES", "STSB_DEV_SENTENCES",
           "ablation_runs", "paper_vision_runs", "vision_steps", "text_steps", "claim_pairs",
           "claim_runs",
           "precision_of", "family_of_backbone", "vision_step_flops", "simcse_step_flops",
           "EvalWork", "CostSettings", "cost_settings", "gpu_set", "measured_step",
           "SettingCost", "RunEstimate", "Estimate", "estimate", "claim_rows", "job_runtime",
           "retries_for", "CHEAPER_OPTIONS", "with_overlay", "hours_range", "assumptions"]

# images of each training split and of the labelled test split each evaluation embeds
# beside it, by (data set, split) and by data set: views of weince.data.locations.SPLIT_IMAGES
TRAIN_IMAGES = {(d, split): n for d, splits in SPLIT_IMAGES.items()
                for split, n in splits.items() if split != "test"}
TEST_IMAGES = {d: splits["test"] for d, splits in SPLIT_IMAGES.items()}
WIKI1M_SENTENCES = 1_000_000   # wiki1m_for_simcse.txt
STSB_DEV_SENTENCES = 3_000     # STS-B dev: 1,500 pairs


# ----------------------------------------------------------------------------- runs
def vision_steps(prof: Profile, dataset: str) -> int:
    """Optimiser steps of one pretraining run of ``dataset`` in the profile."""
    pre = prof.vision.pretrain_for(dataset)
    split = pre.train_split
    n = TRAIN_IMAGES.get((dataset, split))
    if n is None:
        raise ValueError(f"no official training-split size for {dataset} ({split}); add it "
                         f"to weince.data.locations.SPLIT_IMAGES")
    if pre.max_train_images:
        n = min(n, pre.max_train_images)
    return pre.epochs * max(1, n // pre.batch_size)


def text_steps(prof: Profile) -> int:
    """Optimiser steps of one SimCSE run of the profile."""
    s = prof.text.simcse
    n = s.n_train or WIKI1M_SENTENCES
    steps = s.epochs * max(1, n // s.batch_size)
    return min(steps, s.max_steps) if s.max_steps else steps


def ablation_runs(prof: Profile) -> list[layout.VisionRun]:
    """The pretraining runs of the profile's ablation plan (parsed from its inputs)."""
    pat = re.compile(r"vision/([^/]+)/([^/]+)/([^/]+)/seed(\d+)/")
    out = {}
    try:
        files = ablation_inputs(ablation_plan(prof))
    except (KeyError, ValueError):
        return []
    for f in files:
        m = pat.search(str(f).replace("\\", "/"))
        if m:
            d, b, a, s = m.groups()
            out[(d, b, a, int(s))] = layout.VisionRun(d, b, a, int(s))
    return list(out.values())


def paper_vision_runs(prof: Profile) -> list[tuple[layout.VisionRun, bool]]:
    """Every pretraining run the profile trains: ``(run, is_ablation)`` (a final grid arm
    adopting its chosen point's runs is not trained again)."""
    garms = set(grid_arms(prof))
    adopted = set(adopted_seeds(prof))
    runs = {}
    for r in layout.vision_runs(prof):
        if r.arm in garms and r.seed in adopted:
            continue
        runs[(r.dataset, r.backbone, r.arm, r.seed)] = (r, False)
    for r in layout.vision_runs(prof, grid=True):
        runs[(r.dataset, r.backbone, r.arm, r.seed)] = (r, False)
    for r in ablation_runs(prof):
        if r.arm in garms and r.seed in adopted:
            continue       # a final grid arm the ablation reads: adopted, not trained
        runs.setdefault((r.dataset, r.backbone, r.arm, r.seed), (r, True))
    return list(runs.values())


def claim_pairs(claim: dict[str, Any], pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (dataset, backbone) pairs a claim's rows read, among the profile's."""
    if claim.get("rows") == "any":
        return set(pairs)
    if claim.get("grid"):
        g = claim["grid"]
        return {(d, b) for d in g["datasets"] for b in g["backbones"]} & pairs
    return {(r.get("dataset"), r.get("backbone")) for r in claim.get("rows") or []} & pairs


# ----------------------------------------------------------------------------- one step
def family_of_backbone(backbone: str) -> str:
    """``vit`` for ViT-S, ``bert`` for the text models (``text``), else ``cnn``."""
    if backbone == "text":
        return "bert"
    return "vit" if str(backbone).startswith("vit") else "cnn"


def precision_of(family: str, amp: bool = False, tf32: bool = False) -> str:
    """The arithmetic the bulk of a step runs in on an Ampere/Hopper/Ada GPU: bf16 under
    ``amp``; else convolutions in TF32 (cuDNN's default, which the official code and ours
    keep) and matmuls in TF32 only with ``tf32: true``, otherwise full float32."""
    if amp:
        return "bf16"
    if family == "cnn" or tf32:
        return "tf32"
    return "fp32"


def vision_step_flops(backbone: str, dataset: str, batch: int = 256, proj_dim: int = 64
                      ) -> float:
    """FLOPs of one SimCLR optimiser step on ``dataset``'s images: both views (``2 x batch``
    images) forward and backward through the project's model, plus the loss's ``2N x 2N``
    similarity matmul (forward and its two backward matmuls)."""
    spec = dataset_spec(dataset)
    per_image = vision_counts(backbone, spec["image_size"], spec["channels"],
                              f"proj{int(proj_dim)}")["train"]
    two_n = 2 * int(batch)
    return per_image * two_n + 3 * 2.0 * two_n * two_n * int(proj_dim)


def simcse_step_flops(model: str = "bert-base-uncased", batch: int = 64, max_length: int = 32
                      ) -> float:
    """FLOPs of one unsupervised SimCSE step: two dropout passes of the batch (``2 x batch``
    sequences of ``max_length`` tokens, an upper bound: a batch is padded to its longest
    sentence), forward and backward."""
    return 2 * int(batch) * text_counts(text_geometry(model), int(max_length))["train"]


# ----------------------------------------------------------------------------- config
@dataclass(frozen=True)
class EvalWork:
    """``cost.eval``: the evaluation jobs' work model (:mod:`weince.cost.evaljobs`)."""

    overhead_min: float           # minutes of start-up per evaluation job
    host_images_per_s: float      # images read and prepared per second
    probe_step_s: float           # seconds of one small eager optimiser step
    fit_s: float                  # seconds of one POT or link fit on the CPU


@dataclass(frozen=True)
class CostSettings:
    """A profile's ``cost`` block, typed; its defaults are the config schema's, which
    :meth:`Profile.of <weince.pipeline.profile.Profile.of>` has filled (and whose check has
    refused a ``cost.measured`` entry with a missing or unknown key, or an unlisted GPU)."""

    enabled: bool
    gpu: tuple[str, ...]          # the GPU type, or the types a job may land on, as given
    safety_factor: float
    max_runtime: int              # minutes: the cluster's longest job
    overhead_min: float           # minutes of start-up per training job
    extra_restarts: int
    measured: tuple[Mapping[str, Any], ...]
    eval: EvalWork

    @classmethod
    def of(cls, prof: Profile) -> CostSettings:
        """The cost block of ``prof`` (``prof.cost``)."""
        c = prof.cost
        e = c["eval"]
        return cls(enabled=bool(c["enabled"]),
                   gpu=(c["gpu"],) if isinstance(c["gpu"], str) else tuple(c["gpu"]),
                   safety_factor=float(c["safety_factor"]), max_runtime=int(c["max_runtime"]),
                   overhead_min=float(c["overhead_min"]),
                   extra_restarts=int(c["extra_restarts"]),
                   measured=tuple(dict(m) for m in c["measured"] or ()),
                   eval=EvalWork(float(e["overhead_min"]), float(e["host_images_per_s"]),
                                 float(e["probe_step_s"]), float(e["fit_s"])))


def cost_settings(prof: Profile) -> CostSettings:
    """The profile's ``cost`` block: :meth:`CostSettings.of`."""
    return CostSettings.of(prof)


def gpu_set(prof: Profile | None, gpu: str | Iterable[str] | None = None) -> list[str]:
    """The GPU types a run may land on: ``gpu`` (a name, ``"a,b"`` or a list), else the
    profile's ``cost.gpu``; each checked against devices.yaml."""
    if gpu is None:
        if prof is None:
            raise ValueError("gpu_set needs the GPU names or a profile whose cost.gpu names them")
        gpu = CostSettings.of(prof).gpu
    g = gpu
    names = [s.strip() for s in g.split(",")] if isinstance(g, str) else list(g)
    out = [str(n).lower() for n in names if str(n).strip()]
    if not out:
        raise ValueError("cost.gpu names no GPU: give one (h100-sxm) or a list "
                         "([a100-80gb, h100-sxm])")
    for n in out:
        device(n)
    return list(dict.fromkeys(out))


def measured_step(prof: Profile, gpu: str, key: str, precision: str, batch: int
                  ) -> tuple[float, str] | None:
    """The measured seconds per step of setting ``key`` on ``gpu`` in ``precision``
    (``cost.measured``): the largest over the matching entries' arms, each scaled by
    ``batch / entry batch``; None without a matching entry."""
    found = []
    for e in CostSettings.of(prof).measured:
        if (str(e["gpu"]).lower(), e["setting"], e["precision"]) == (gpu, key, precision):
            found.append((float(e["step_s"]) * int(batch) / int(e["batch"]), e))
    if not found:
        return None
    step, e = max(found, key=lambda t: t[0])
    note = f"measured ({e.get('arm', 'arm not named')}, batch {e['batch']}"
    note += f", scaled to {batch})" if int(e["batch"]) != int(batch) else ")"
    return step, note


# ----------------------------------------------------------------------------- estimate
@dataclass
class SettingCost:
    """One training setting (a data set and backbone, or the SimCSE model) on a GPU set."""

    stage: str                # vision | text
    key: str                  # "cifar100/resnet18" | "text/bert-base-uncased"
    steps: int
    batch: int
    flops_per_step: float
    precision: str
    family: str
    per_gpu: dict[str, dict[str, Any]] = field(default_factory=dict)
    # gpu -> {"step_s": (fast, slow), "source": "estimated" | "measured (...)"}

    @property
    def step_s(self) -> tuple[float, float]:
        """(fast, slow) seconds per step over the set: the fastest GPU's fast end, the
        slowest GPU's slow end."""
        return (min(v["step_s"][0] for v in self.per_gpu.values()),
                max(v["step_s"][1] for v in self.per_gpu.values()))

    @property
    def hours(self) -> tuple[float, float]:
        fast, slow = self.step_s
        return fast * self.steps / 3600.0, slow * self.steps / 3600.0

    @property
    def source(self) -> str:
        kinds = {"measured" if v["source"] != "estimated" else "estimated"
                 for v in self.per_gpu.values()}
        return "/".join(sorted(kinds))


@dataclass
class RunEstimate:
    stage: str
    setting: SettingCost
    arm: str
    seed: int
    ablation: bool = False

    @property
    def hours(self) -> tuple[float, float]:
        return self.setting.hours


@dataclass
class Estimate:
    gpus: list[str]
    settings: dict[str, SettingCost] = field(default_factory=dict)
    runs: list[RunEstimate] = field(default_factory=list)

    @property
    def gpu(self) -> str:
        return ",".join(self.gpus)

    @property
    def label(self) -> str:
        names = ", ".join(device(g)["name"] for g in self.gpus)
        return f"`--gpu {self.gpu}` ({names})" if len(self.gpus) == 1 else \
            f"the mixed set `--gpu {self.gpu}` ({names}; each run on any of them)"

    def total(self, runs: Iterable[RunEstimate] | None = None) -> tuple[float, float]:
        rs = list(self.runs if runs is None else runs)
        return sum(r.hours[0] for r in rs), sum(r.hours[1] for r in rs)


def _price(prof: Profile, s: SettingCost, gpus: list[str]) -> SettingCost:
    for g in gpus:
        m = measured_step(prof, g, s.key, s.precision, s.batch)
        if m is not None:
            s.per_gpu[g] = {"step_s": (m[0], m[0]), "source": m[1]}
        else:
            s.per_gpu[g] = {"step_s": step_time(s.flops_per_step, g, s.family, s.precision),
                            "source": "estimated"}
    return s


def _vision_setting(prof: Profile, dataset: str, backbone: str, gpus: list[str]
                    ) -> SettingCost:
    pre = prof.vision.pretrain_for(dataset)
    batch = pre.batch_size
    flops = vision_step_flops(backbone, dataset, batch, pre.proj_dim)
    fam = family_of_backbone(backbone)
    prec = precision_of(fam, pre.amp, pre.tf32)
    s = SettingCost("vision", f"{dataset}/{backbone}", vision_steps(prof, dataset), batch,
                    flops, prec, fam)
    return _price(prof, s, gpus)


def _text_setting(prof: Profile, model: str, gpus: list[str]) -> SettingCost:
    s = prof.text.simcse
    batch, length = s.batch_size, s.max_length
    steps = text_steps(prof)
    evals = steps // s.eval_every
    dev = s.n_sts * 2 or STSB_DEV_SENTENCES   # n_sts 0: the real STS-B dev split
    geometry = text_geometry(model)
    flops = (simcse_step_flops(model, batch, length)
             + evals * dev * text_counts(geometry, length)["forward"] / steps)
    prec = precision_of("bert", s.amp, False)   # SimCSE has no TF32 switch
    st = SettingCost("text", f"text/{model}", steps, batch, flops, prec, "bert")
    return _price(prof, st, gpus)


def estimate(prof: Profile, gpu: str | Iterable[str] | None = None) -> Estimate:
    """Every training run of the profile with its GPU-hours on ``gpu`` (a name, ``"a,b"``, a
    list; default ``cost.gpu``): measured step times (``cost.measured``) where a setting
    has them on a GPU, else the estimate (low, high)."""
    gpus = gpu_set(prof, gpu)
    est = Estimate(gpus)

    def setting(key, make):
        if key not in est.settings:
            est.settings[key] = make()
        return est.settings[key]

    if prof.vision.enabled and prof.vision.datasets:
        for run, abl in paper_vision_runs(prof):
            s = setting(f"{run.dataset}/{run.backbone}",
                        lambda r=run: _vision_setting(prof, r.dataset, r.backbone, gpus))
            est.runs.append(RunEstimate("vision", s, run.arm, run.seed, abl))
    if prof.text.enabled and prof.text.models:
        for r in layout.text_runs(prof):
            s = setting(f"text/{r.model}", lambda m=r.model: _text_setting(prof, m, gpus))
            est.runs.append(RunEstimate("text", s, r.arm, r.seed))
    return est


def assumptions(est: Estimate) -> list[str]:
    """What the figures of ``est`` rest on, one line each (the page prints them)."""
    band = load_devices()["band"]
    out = []
    for g in est.gpus:
        d = device(g)
        out.append(f"GPU {g}: {d['name']}; peaks FP32 {d['fp32']:g}, TF32 {d['tf32']:g}, "
                   f"BF16 {d['bf16']:g} TFLOP/s dense ({d['source']})"
                   + (f"; measured efficiency of {d['stand_in']} (stand-in)"
                      if d.get("stand_in") else ""))
    precs = sorted({(s.family, s.precision) for s in est.settings.values()})
    out.append("precision: " + ", ".join(f"{f} steps in {p.upper()}" for f, p in precs)
               + " (convolutions TF32 by cuDNN's default; matmuls full float32 unless "
                 "tf32/amp)")
    out.append(f"seconds per step: counted FLOPs / the measured training rate of the GPU, "
               f"family and precision x [{band['low']:g}, {band['high']:g}] (the band: an "
               f"assumption; docs/cost.md, calibration table)")
    out += [f"thin evidence: {t}" for t in thin_evidence()]
    out.append("only optimiser steps are counted (and SimCSE's dev evaluations); evaluation "
               "jobs are priced apart (their SLURM runtimes, docs/cluster.md); start-up, data "
               "loading and checkpoints are not")
    return out


def claim_rows(est: Estimate, prof: Profile) -> list[dict[str, Any]]:
    """Per claim of the profile's registry: training runs and GPU-hours (low, high), then
    the ablation arms and the total (a run serves several claims: rows do not add up)."""
    rows = []
    for claim in load_claims(prof.claims)["claims"]:
        rows.append(_row(claim["id"], claim.get("title", ""), _claim_runs(claim, est, prof),
                         est))
    abl = [r for r in est.runs if r.ablation]
    if abl:
        rows.append(_row("ablations", "ablation arms (docs/ablations.md)", abl, est))
    rows.append(_row("total", "every training run of the profile", est.runs, est))
    return rows


def _claim_runs(claim: Mapping[str, Any], est: Estimate, prof: Profile) -> list[RunEstimate]:
    stage = claim.get("stage")
    if stage == "vision":
        want = claim_pairs(dict(claim), set(prof.vision.pairs))
        return [r for r in est.runs if r.stage == "vision" and not r.ablation
                and tuple(r.setting.key.split("/")) in want]
    if stage == "text":
        return [r for r in est.runs if r.stage == "text"]
    return []


def claim_runs(est: Estimate, prof: Profile, cid: str | None) -> list[RunEstimate]:
    """The training runs of claim ``cid`` (its row of :func:`claim_rows`); every run of the
    profile for None."""
    if cid is None:
        return list(est.runs)
    claim = next(c for c in load_claims(prof.claims)["claims"] if c["id"] == cid)
    return _claim_runs(claim, est, prof)


def _row(cid: str, title: str, runs: list[RunEstimate], est: Estimate) -> dict[str, Any]:
    lo, hi = est.total(runs)
    src = sorted({r.setting.source for r in runs})
    return {"id": cid, "title": title, "runs": len(runs), "low": lo, "high": hi,
            "source": "/".join(src) if src else "-"}


# ----------------------------------------------------------------------------- SLURM
def job_runtime(prof: Profile, key: str) -> dict[str, Any]:
    """The SLURM request of one training job of setting ``key`` (``dataset/backbone`` or
    ``text/<model>``): ``need_min`` (the slow end, or the measured time, on the slowest GPU
    of ``cost.gpu``, named in ``gpu``), ``total_min`` = need x ``cost.safety_factor`` +
    ``cost.overhead_min``, and ``runtime`` (minutes per job) = ``total_min`` up to
    ``cost.max_runtime``; a longer run continues as ``segments`` jobs, each resuming from
    the checkpoint of the one before."""
    c = CostSettings.of(prof)
    s = _settings_for(prof, key)
    slowest = max(s.per_gpu, key=lambda g: s.per_gpu[g]["step_s"][1])
    need = s.per_gpu[slowest]["step_s"][1] * s.steps / 60.0
    total = need * c.safety_factor + c.overhead_min
    cap = c.max_runtime
    out = {"need_min": need, "total_min": total, "gpu": slowest,
           "source": s.per_gpu[slowest]["source"]}
    if total <= cap:
        return {**out, "runtime": max(1, math.ceil(total)), "segments": 1}
    # each segment: its start-up (overhead) and the 2 minutes SIGTERM comes early
    per = cap - c.overhead_min - 2.0
    if per <= 0:
        per = cap
    return {**out, "runtime": cap, "segments": math.ceil((total - c.overhead_min) / per)}


# (config hash, setting) -> its cost: Snakemake asks job_runtime once per training job
_SETTINGS: dict[tuple[str, str], SettingCost] = {}


def _settings_for(prof: Profile, key: str) -> SettingCost:
    """The cost of setting ``key`` on the profile's ``cost.gpu``, computed once per resolved
    config (:attr:`Profile.config_hash`)."""
    memo = (prof.config_hash, key)
    if prof.config_hash and memo in _SETTINGS:
        return _SETTINGS[memo]
    gpus = gpu_set(prof)
    if key.startswith("text/"):
        s = _text_setting(prof, key.split("/", 1)[1], gpus)
    else:
        d, b = key.split("/")
        s = _vision_setting(prof, d, b, gpus)
    if prof.config_hash:
        if len(_SETTINGS) >= 256:
            _SETTINGS.clear()
        _SETTINGS[memo] = s
    return s


def retries_for(prof: Profile, stage: str) -> int | None:
    """Restarts the training rule needs: its longest setting's segments - 1, plus
    ``cost.extra_restarts`` for failures and preemptions; None without ``cost.enabled``
    (the profile's ``restart-times`` then applies)."""
    c = CostSettings.of(prof)
    if not c.enabled:
        return None
    keys: set[str] = set()
    if stage == "vision":
        if prof.vision.enabled:
            keys = {f"{d}/{b}" for d, b in prof.vision.pairs}
    elif prof.text.enabled:
        keys = {f"text/{m}" for m in prof.text.models}
    segs = max((job_runtime(prof, k)["segments"] for k in keys), default=1)
    return segs - 1 + c.extra_restarts


# ----------------------------------------------------------------------------- options
# The documented options that make the paper profile cheaper (docs/protocol.md, "The
# cheaper options, and which profile uses them"; weince.train.config), as config overlays,
# with what they do to a verdict.
CHEAPER_OPTIONS: list[dict[str, Any]] = [
    {"key": "vision.grid.seeds: [7]",
     "overlay": {"vision": {"grid": {"seeds": [7]}}},
     "verdict": "the 27 grid points are compared at encoder seed 7 only (then the chosen point "
                "is trained at the other seeds); the reported rows are still four-seed "
                "comparisons, but the point is chosen on one seed (noisier), and k-NN uses the "
                "linear point for every metric; the report's Scale line lists it as off the "
                "official protocol (docs/protocol.md)"},
    {"key": "vision.pretrain.tf32: true",
     "overlay": {"vision": {"pretrain": {"tf32": True}}},
     "verdict": "TF32 matmuls (ViT-S, the heads): same runs, rounding differs from the official "
                "float32; listed as off-protocol (ResNets change little: their convolutions "
                "are TF32 already)"},
    {"key": "vision.pretrain.amp: true",
     "overlay": {"vision": {"pretrain": {"amp": True}}},
     "verdict": "bf16 autocast: same runs, not the official float32 arithmetic; results differ "
                "beyond rounding, so a verdict compares against the paper at another "
                "precision; listed as off-protocol"},
]


def with_overlay(prof: Profile, overlay: Mapping[str, Any]) -> Profile:
    """The profile of ``prof``'s resolved config with ``overlay`` merged in, dict by dict,
    resolved again (``prof`` unchanged; the schema checks the result)."""
    return Profile.of(deep_merge(copy.deepcopy(dict(prof.config)), dict(overlay)))


def _fmt_h(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else (f"{x:.1f}" if x >= 1 else f"{x:.2f}")


def hours_range(lo: float, hi: float) -> str:
    return "-" if hi == 0 else (_fmt_h(lo) if lo == hi else f"{_fmt_h(lo)}-{_fmt_h(hi)}")

