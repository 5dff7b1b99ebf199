"""What a profile's training costs on a named GPU, without a GPU: counted FLOPs x steps / speed.

    from weince.pipeline.cost import estimate
    est = estimate(cfg, gpu="h100-sxm")     # cfg: a profile config (config/paper.yaml)
    est.runs[0].hours                       # (low, high) GPU-hours of one training run
    claim_rows(est, cfg)                    # per claim: runs and GPU-hours (low, high)

How (docs/cost.md):

- **FLOPs of one optimiser step**, counted by ``torch.utils.flop_counter.FlopCounterMode``
  on the meta device (no memory, no arithmetic, a second per model): SimCLR builds the
  project's own ``build_simclr_model(backbone, image_size, channels)`` and runs forward and
  backward of both views (``2 x batch`` images; the loss's ``2N x 2N`` similarity matrix
  is added by hand); SimCSE builds ``BertModel(BertConfig())`` (the bert-base-uncased
  geometry, random weights, nothing downloaded) and runs forward and backward of the two
  dropout passes (``2 x batch`` sequences of ``max_length`` tokens), plus the STS-B dev
  evaluations the job runs every ``eval_every`` steps (forward only).
- **Steps per run**: ``epochs x (training images // batch)`` (the official split sizes,
  :data:`TRAIN_IMAGES`) and ``epochs x (sentences // batch)`` for SimCSE.
- **Seconds per step** = FLOPs / (peak FLOP/s of the precision the step runs in x
  utilisation). The precision: ResNets are convolutions, which cuDNN runs in TF32 unless
  ``amp`` (bf16); ViT-S and BERT are matmuls, float32 in full precision unless ``tf32``
  or ``amp``. Peaks per device and precision, and the public training times the
  utilisation range comes from, are in ``devices.yaml`` beside this file, each with its
  source.
- **Measured beats estimated**: the config's ``cost.step_s`` (``{"cifar10/resnet18":
  0.031, "text/bert-base-uncased": 0.05}``, as a GPU rehearsal's ``resources.yaml``
  writes it) replaces the estimate of that setting.

Linear probes, k-NN, feature extraction and score collection are not counted: one
forward pass over the images per encoder, against the ``epochs x 2 views x (forward +
backward)`` of its training (under 1 % of it).

:func:`job_runtime` turns a setting's estimate into the SLURM request of its jobs
(``cost.safety_factor``, capped at ``cost.max_runtime``, longer runs as requeued segments).
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import yaml

from weince.pipeline import layout
from weince.pipeline.ablations import ablation_inputs, ablation_plan
from weince.pipeline.claims import load_claims
from weince.pipeline.protocol import adopted_seeds
from weince.pipeline.rehearsal import deep_merge
from weince.pipeline.stages import grid_arms

__all__ = ["TRAIN_IMAGES", "ablation_runs", "WIKI1M_SENTENCES", "STSB_DEV_SENTENCES", "DEVICES_FILE",
           "load_devices", "device_names", "vision_step_flops", "simcse_step_flops",
           "utilisation", "family_of", "precision_of", "SettingCost", "RunEstimate",
           "Estimate", "estimate", "claim_rows", "job_runtime", "retries_for",
           "paper_vision_runs", "vision_steps", "claim_pairs", "cost_settings",
           "CHEAPER_OPTIONS", "with_overlay", "hours_range", "claims_markdown", "anchor_table"]

# images of each official training split (the data sets' own documentation)
TRAIN_IMAGES = {
    ("cifar10", "train"): 50_000, ("cifar100", "train"): 50_000,
    ("stl10", "train"): 5_000, ("stl10", "unlabeled"): 100_000,
    ("stl10", "train+unlabeled"): 105_000,
    ("imagenet32", "train"): 1_281_167, ("tinyimagenet", "train"): 100_000,
    ("digits", "train"): 1_438, ("mnist5k", "train"): 4_000,
}
WIKI1M_SENTENCES = 1_000_000   # wiki1m_for_simcse.txt
STSB_DEV_SENTENCES = 3_000     # STS-B dev: 1,500 pairs
DEVICES_FILE = Path(__file__).with_name("devices.yaml")
PRECISIONS = ("fp32", "tf32", "bf16")


# ----------------------------------------------------------------------------- devices
@lru_cache(maxsize=None)
def _devices_text(path: str) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text()) or {}


def load_devices(path: str | Path | None = None) -> dict[str, Any]:
    """``devices.yaml``: ``devices`` (name -> peaks, bandwidth, source), ``anchors``,
    ``small_kernel_derate``."""
    return _devices_text(str(path or DEVICES_FILE))


def device_names() -> list[str]:
    return list(load_devices()["devices"])


def _device(name: str) -> dict[str, Any]:
    devs = load_devices()["devices"]
    key = str(name).lower()
    if key not in devs:
        raise ValueError(f"unknown GPU {name!r}: choose one of {', '.join(devs)} (--gpu, or "
                         f"cost.gpu in the config; add a GPU to {DEVICES_FILE})")
    return devs[key]


# ----------------------------------------------------------------------------- FLOPs
def _count(fn) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return float(counter.get_total_flops())


@lru_cache(maxsize=None)
def _vision_flops_per_image(backbone: str, image_size: int, channels: int,
                            proj_dim: int) -> float:
    """Forward + backward FLOPs of one image through the SimCLR model (linear in the batch:
    counted at a batch of 4 and divided)."""
    import torch

    from weince.models.vision import build_simclr_model

    n = 4
    with torch.device("meta"):
        model = build_simclr_model(backbone, image_size, channels, out_dim=proj_dim)
        x = torch.empty(n, channels, image_size, image_size)

    def step():
        _, z = model(x)
        z.sum().backward()

    return _count(step) / n


def vision_step_flops(backbone: str, image_size: int, channels: int = 3, batch: int = 256,
                      proj_dim: int = 64) -> float:
    """FLOPs of one SimCLR optimiser step: both views (``2 x batch`` images) forward and
    backward through the project's model, plus the loss's ``2N x 2N`` similarity matmul
    (forward and its two backward matmuls). ``forward: joint`` or ``per_view`` do the
    same arithmetic."""
    per_image = _vision_flops_per_image(backbone, int(image_size), int(channels),
                                        int(proj_dim))
    two_n = 2 * int(batch)
    return per_image * two_n + 3 * 2.0 * two_n * two_n * int(proj_dim)


@lru_cache(maxsize=None)
def _bert_flops_per_sequence(seq_len: int, hidden_size: int = 768, num_hidden_layers: int = 12,
                             num_attention_heads: int = 12, intermediate_size: int = 3072,
                             backward: bool = True) -> float:
    """Forward (+ backward) FLOPs of one sequence through a randomly initialised BERT on the
    meta device (``BertConfig`` defaults: bert-base-uncased)."""
    import torch
    from transformers import BertConfig, BertModel

    n = 4
    cfg = BertConfig(hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
                     num_attention_heads=num_attention_heads,
                     intermediate_size=intermediate_size)
    with torch.device("meta"):
        model = BertModel(cfg, add_pooling_layer=False)
        ids = torch.zeros(n, int(seq_len), dtype=torch.long)

    def step():
        out = model(input_ids=ids).last_hidden_state
        if backward:
            out[:, 0].sum().backward()

    return _count(step) / n


def simcse_step_flops(batch: int = 64, max_length: int = 32) -> float:
    """FLOPs of one unsupervised SimCSE step on bert-base: two dropout passes of the batch
    (``2 x batch`` sequences of ``max_length`` tokens, an upper bound: shorter sentences
    are padded only to the batch's longest), forward and backward."""
    return 2 * int(batch) * _bert_flops_per_sequence(int(max_length))


# ----------------------------------------------------------------------------- speed
def family_of(backbone: str) -> str:
    """``cnn`` (convolutions: ResNets, the small CNN) or ``transformer`` (ViT-S, BERT)."""
    return "transformer" if str(backbone).startswith("vit") or backbone == "text" else "cnn"


def precision_of(family: str, amp: bool = False, tf32: bool = False) -> str:
    """The arithmetic the bulk of a step runs in on an Ampere/Hopper/Ada GPU: bf16 under
    ``amp``; else convolutions in TF32 (cuDNN's default, which the official code and ours
    keep) and matmuls in TF32 only with ``tf32: true``, otherwise full float32."""
    if amp:
        return "bf16"
    if family == "cnn" or tf32:
        return "tf32"
    return "fp32"


def _anchor_utilisation(anchor: dict[str, Any]) -> float:
    dev = _device(anchor["device"])
    peak = float(dev[anchor["precision"]]) * 1e12
    if "flops_total" in anchor:
        return float(anchor["flops_total"]) / float(anchor["seconds"]) / peak
    m = anchor["model"]
    if m["kind"] == "vision":
        per = _vision_flops_per_image(m["backbone"], int(m["image_size"]),
                                      int(m.get("channels", 3)), 64)
    else:
        per = _bert_flops_per_sequence(int(m["seq_len"]), int(m["hidden_size"]),
                                       int(m["num_hidden_layers"]),
                                       int(m["num_attention_heads"]),
                                       int(m["intermediate_size"]))
    return float(anchor["examples_per_s"]) * per / peak


@lru_cache(maxsize=None)
def _utilisations() -> dict[str, tuple[float, float, tuple[tuple[str, float], ...]]]:
    data = load_devices()
    derate = float(data.get("small_kernel_derate", 1.0))
    out: dict[str, list[tuple[str, float]]] = {}
    for a in data["anchors"]:
        out.setdefault(a["family"], []).append((a["id"], _anchor_utilisation(a)))
    return {fam: (min(u for _, u in xs) * derate, max(u for _, u in xs), tuple(xs))
            for fam, xs in out.items()}


def utilisation(family: str) -> tuple[float, float]:
    """(low, high) fraction of the peak a training step reaches, from the anchors."""
    lo, hi, _ = _utilisations()[family]
    return lo, hi


def anchor_table() -> list[dict[str, Any]]:
    """Each anchor with the utilisation it implies (for the page)."""
    uts = {aid: u for _, (_, _, xs) in _utilisations().items() for aid, u in xs}
    return [{**a, "utilisation": uts[a["id"]]} for a in load_devices()["anchors"]]


# ----------------------------------------------------------------------------- runs
def _vision_pre(cfg: dict[str, Any], dataset: str) -> dict[str, Any]:
    v = cfg.get("vision") or {}
    return {**(v.get("pretrain") or {}),
            **((v.get("pretrain_by_dataset") or {}).get(dataset) or {})}


def vision_steps(cfg: dict[str, Any], dataset: str) -> int:
    """Optimiser steps of one pretraining run of ``dataset`` under ``cfg``."""
    pre = _vision_pre(cfg, dataset)
    split = pre.get("train_split", "train")
    n = TRAIN_IMAGES.get((dataset, split))
    if n is None:
        raise ValueError(f"no official training-split size for {dataset} ({split}); add it "
                         f"to weince.pipeline.cost.TRAIN_IMAGES")
    if pre.get("max_train_images"):
        n = min(n, int(pre["max_train_images"]))
    return int(pre.get("epochs", 100)) * max(1, n // int(pre.get("batch_size", 256)))


def ablation_runs(cfg: dict[str, Any]) -> list[layout.VisionRun]:
    """The pretraining runs of the profile's ablation plan (parsed from its inputs)."""


    pat = re.compile(r"vision/([^/]+)/([^/]+)/([^/]+)/seed(\d+)/")
    out = {}
    try:
        files = ablation_inputs(ablation_plan(cfg))
    except (KeyError, ValueError):
        return []
    for f in files:
        m = pat.search(str(f).replace("\\", "/"))
        if m:
            d, b, a, s = m.groups()
            out[(d, b, a, int(s))] = layout.VisionRun(d, b, a, int(s))
    return list(out.values())


def paper_vision_runs(cfg: dict[str, Any]) -> list[tuple[layout.VisionRun, bool]]:
    """Every pretraining run the profile trains: ``(run, is_ablation)`` (a final grid arm
    adopting its chosen point's runs is not trained again)."""

    garms = set(grid_arms(cfg))
    adopted = set(adopted_seeds(cfg))
    runs = {}
    for r in layout.vision_runs(cfg):
        if r.arm in garms and r.seed in adopted:
            continue
        runs[(r.dataset, r.backbone, r.arm, r.seed)] = (r, False)
    for r in layout.vision_runs(cfg, grid=True):
        runs[(r.dataset, r.backbone, r.arm, r.seed)] = (r, False)
    for r in ablation_runs(cfg):
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


@dataclass
class SettingCost:
    """One training setting (a data set and backbone, or the SimCSE model): its step."""

    stage: str                # vision | text
    key: str                  # "cifar100/resnet18" | "text/bert-base-uncased"
    steps: int
    flops_per_step: float
    precision: str
    family: str
    step_s: tuple[float, float]           # (low, high) seconds per step on the GPU
    measured_s: float | None = None       # cost.step_s of the config: replaces the estimate

    @property
    def hours(self) -> tuple[float, float]:
        if self.measured_s is not None:
            h = self.measured_s * self.steps / 3600.0
            return h, h
        return (self.step_s[0] * self.steps / 3600.0, self.step_s[1] * self.steps / 3600.0)

    @property
    def source(self) -> str:
        return "measured" if self.measured_s is not None else "estimated"


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
    gpu: str
    device: dict[str, Any]
    settings: dict[str, SettingCost] = field(default_factory=dict)
    runs: list[RunEstimate] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    def total(self, runs: Iterable[RunEstimate] | None = None) -> tuple[float, float]:
        rs = list(self.runs if runs is None else runs)
        return sum(r.hours[0] for r in rs), sum(r.hours[1] for r in rs)


def _step_seconds(flops: float, gpu: str, precision: str, family: str) -> tuple[float, float]:
    peak = float(_device(gpu)[precision]) * 1e12
    lo, hi = utilisation(family)
    return flops / (peak * hi), flops / (peak * lo)


def _vision_setting(cfg: dict[str, Any], dataset: str, backbone: str, gpu: str) -> SettingCost:
    from weince.data.vision import DATASETS

    spec = DATASETS[dataset]
    pre = _vision_pre(cfg, dataset)
    batch = int(pre.get("batch_size", 256))
    flops = vision_step_flops(backbone, spec.image_size, spec.channels, batch,
                              int(pre.get("proj_dim", 64)))
    fam = family_of(backbone)
    prec = precision_of(fam, bool(pre.get("amp")), bool(pre.get("tf32")))
    return SettingCost("vision", f"{dataset}/{backbone}", vision_steps(cfg, dataset), flops,
                       prec, fam, _step_seconds(flops, gpu, prec, fam))


def text_steps(cfg: dict[str, Any]) -> int:
    s = (cfg.get("text") or {}).get("simcse") or {}
    n = int(s.get("n_train") or 0) or WIKI1M_SENTENCES
    steps = int(s.get("epochs", 1)) * max(1, n // int(s.get("batch_size", 64)))
    if s.get("max_steps"):
        steps = min(steps, int(s["max_steps"]))
    return steps


def _text_setting(cfg: dict[str, Any], model: str, gpu: str) -> SettingCost:
    s = (cfg.get("text") or {}).get("simcse") or {}
    batch, length = int(s.get("batch_size", 64)), int(s.get("max_length", 32))
    steps = text_steps(cfg)
    train = simcse_step_flops(batch, length)
    every = int(s.get("eval_every") or 0)
    evals = steps // every if every else 0
    dev = int(s.get("n_sts") or 0) * 2 or STSB_DEV_SENTENCES
    flops = train + evals * dev * _bert_flops_per_sequence(length, backward=False) / steps
    prec = precision_of("transformer", bool(s.get("amp")), bool(s.get("tf32")))
    return SettingCost("text", f"text/{model}", steps, flops, prec, "transformer",
                       _step_seconds(flops, gpu, prec, "transformer"))


def cost_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    """The config's ``cost`` block with its defaults."""
    c = dict(cfg.get("cost") or {})
    c.setdefault("enabled", False)
    c.setdefault("gpu", "h100-sxm")
    c.setdefault("safety_factor", 2.0)
    c.setdefault("max_runtime", 1440)
    c.setdefault("overhead_min", 10)
    c.setdefault("extra_restarts", 2)
    c.setdefault("step_s", {})
    return c


def estimate(cfg: dict[str, Any], gpu: str | None = None,
             measured: dict[str, float] | None = None) -> Estimate:
    """Every training run of ``cfg`` with its GPU-hours on ``gpu`` (default ``cost.gpu``):
    measured seconds per step (``measured``, else the config's ``cost.step_s``) where a
    setting has them, else the counted-FLOPs estimate (low, high)."""
    c = cost_settings(cfg)
    gpu = str(gpu or c["gpu"]).lower()
    dev = _device(gpu)
    meas = {**(c.get("step_s") or {}), **(measured or {})}
    est = Estimate(gpu, dev)

    def setting(key, make):
        if key not in est.settings:
            s = make()
            if key in meas and meas[key]:
                s.measured_s = float(meas[key])
            est.settings[key] = s
        return est.settings[key]

    v = cfg.get("vision") or {}
    if v.get("enabled", True) and v.get("datasets"):
        for run, abl in paper_vision_runs(cfg):
            s = setting(f"{run.dataset}/{run.backbone}",
                        lambda r=run: _vision_setting(cfg, r.dataset, r.backbone, gpu))
            est.runs.append(RunEstimate("vision", s, run.arm, run.seed, abl))
    t = cfg.get("text") or {}
    if t.get("enabled", True) and t.get("models"):
        for r in layout.text_runs(cfg):
            s = setting(f"text/{r.model}", lambda m=r.model: _text_setting(cfg, m, gpu))
            est.runs.append(RunEstimate("text", s, r.arm, r.seed))
    est.assumptions = _assumptions(est)
    return est


def _assumptions(est: Estimate) -> list[str]:
    dev = est.device
    out = [f"GPU: {dev['name']} ({est.gpu}); peaks FP32 {dev['fp32']:g}, TF32 {dev['tf32']:g}, "
           f"BF16 {dev['bf16']:g} TFLOP/s dense, {dev['bandwidth']:g} GB/s ({dev['source']})"]
    for fam in sorted(_utilisations()):
        lo, hi, xs = _utilisations()[fam]
        out.append(f"utilisation of the peak, {fam}: {lo:.1%}-{hi:.1%} (anchors: "
                   + ", ".join(f"{a} {u:.1%}" for a, u in xs)
                   + f"; slow end x{load_devices().get('small_kernel_derate', 1):g}, an "
                   "assumption; devices.yaml)")
    precs = sorted({(s.family, s.precision) for s in est.settings.values()})
    out.append("precision: " + ", ".join(f"{f} steps in {p.upper()}" for f, p in precs)
               + " (convolutions TF32 by cuDNN's default; matmuls full float32 unless "
                 "tf32/amp)")
    out.append("only optimiser steps are counted (and SimCSE's dev evaluations); probes, "
               "k-NN, features, scores and fits are excluded (one forward pass per encoder: "
               "under 1% of its training); start-up, data loading and checkpoints are not")
    return out


def claim_rows(est: Estimate, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Per claim of the registry: training runs and GPU-hours (low, high), then the ablation
    arms and the total (a run serves several claims: rows do not add up)."""

    pairs = set(layout.vision_pairs(cfg))
    rows = []
    for claim in load_claims(cfg.get("claims", "config/claims.yaml"))["claims"]:
        stage = claim.get("stage")
        if stage == "vision":
            want = claim_pairs(claim, pairs)
            runs = [r for r in est.runs if r.stage == "vision" and not r.ablation
                    and tuple(r.setting.key.split("/")) in want]
        elif stage == "text":
            runs = [r for r in est.runs if r.stage == "text"]
        else:
            runs = []
        rows.append(_row(claim["id"], claim.get("title", ""), runs, est))
    abl = [r for r in est.runs if r.ablation]
    if abl:
        rows.append(_row("ablations", "ablation arms (docs/ablations.md)", abl, est))
    rows.append(_row("total", "every training run of the profile", est.runs, est))
    return rows


def _row(cid: str, title: str, runs: list[RunEstimate], est: Estimate) -> dict[str, Any]:
    lo, hi = est.total(runs)
    src = sorted({r.setting.source for r in runs})
    return {"id": cid, "title": title, "runs": len(runs), "low": lo, "high": hi,
            "source": "/".join(src) if src else "-"}


# ----------------------------------------------------------------------------- SLURM
def job_runtime(cfg: dict[str, Any], key: str) -> dict[str, Any]:
    """The SLURM request of one training job of setting ``key`` (``dataset/backbone`` or
    ``text/<model>``): ``need_min`` (the high estimate on ``cost.gpu``, or the measured
    time), ``total_min`` = need x ``cost.safety_factor`` + ``cost.overhead_min``, and
    ``runtime`` (minutes per job) = ``total_min`` up to ``cost.max_runtime``; a longer run
    continues as ``segments`` jobs, each resuming from the checkpoint of the one before."""
    c = cost_settings(cfg)
    est = _settings_for(cfg, key)
    need = est.hours[1] * 60.0
    total = need * float(c["safety_factor"]) + float(c["overhead_min"])
    cap = int(c["max_runtime"])
    if total <= cap:
        return {"need_min": need, "total_min": total, "runtime": max(1, math.ceil(total)),
                "segments": 1, "source": est.source}
    # each segment: its start-up (overhead) and the 2 minutes SIGTERM comes early
    per = cap - float(c["overhead_min"]) - 2.0
    if per <= 0:
        per = cap
    segments = math.ceil((total - float(c["overhead_min"])) / per)
    return {"need_min": need, "total_min": total, "runtime": cap, "segments": segments,
            "source": est.source}


@lru_cache(maxsize=256)
def _settings_cached(cfg_key: str, key: str) -> SettingCost:

    cfg = json.loads(cfg_key)
    c = cost_settings(cfg)
    gpu = str(c["gpu"]).lower()
    if key.startswith("text/"):
        s = _text_setting(cfg, key.split("/", 1)[1], gpu)
    else:
        d, b = key.split("/")
        s = _vision_setting(cfg, d, b, gpu)
    m = (c.get("step_s") or {}).get(key)
    if m:
        s.measured_s = float(m)
    return s


def _settings_for(cfg: dict[str, Any], key: str) -> SettingCost:

    keep = {k: cfg.get(k) for k in ("vision", "text", "cost")}
    return _settings_cached(json.dumps(keep, sort_keys=True, default=str), key)


def retries_for(cfg: dict[str, Any], stage: str) -> int | None:
    """Restarts the training rule needs: its longest setting's segments - 1, plus
    ``cost.extra_restarts`` for failures and preemptions; None without ``cost.enabled``
    (the profile's ``restart-times`` then applies)."""
    c = cost_settings(cfg)
    if not c["enabled"]:
        return None
    keys: set[str] = set()
    if stage == "vision":
        v = cfg.get("vision") or {}
        if v.get("enabled", True):
            keys = {f"{d}/{b}" for d, b in layout.vision_pairs(cfg)}
    else:
        t = cfg.get("text") or {}
        if t.get("enabled", True):
            keys = {f"text/{m}" for m in t.get("models", [])}
    segs = max((job_runtime(cfg, k)["segments"] for k in keys), default=1)
    return segs - 1 + int(c["extra_restarts"])


# ----------------------------------------------------------------------------- options
# The documented options that make the paper profile cheaper (docs/protocol.md, "option"
# rows; weince.train.simclr's docstring), as config overlays, with what they do to a verdict.
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


def with_overlay(cfg: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``cfg`` with ``overlay`` merged in, dict by dict (``cfg`` unchanged)."""
    return deep_merge(copy.deepcopy(cfg), overlay)


def _fmt_h(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else (f"{x:.1f}" if x >= 1 else f"{x:.2f}")


def hours_range(lo: float, hi: float) -> str:
    return "-" if hi == 0 else (_fmt_h(lo) if lo == hi else f"{_fmt_h(lo)}-{_fmt_h(hi)}")


def claims_markdown(cfg: dict[str, Any], gpu: str, config_name: str = "") -> str:
    """The per-claim GPU-hour table of a profile on ``gpu`` with its assumptions and the
    per-setting estimates (docs/cost.md is generated from it)."""
    est = estimate(cfg, gpu)
    L = [f"GPU-hours of the training runs of {config_name or 'the profile'}, **an estimate for "
         f"`--gpu {est.gpu}`** ({est.device['name']}), as a range (fast end - slow end):", "",
         "| claim | what | training runs | GPU-hours | from |", "| --- | --- | ---: | ---: | --- |"]
    for r in claim_rows(est, cfg):
        what = r["title"].replace("|", "\\|")
        L.append(f"| {r['id']} | {what} | {r['runs']} | {hours_range(r['low'], r['high'])} | "
                 f"{r['source']} |")
    L += ["", "A run serves several claims (C3-C6 and C10 share encoders), so the rows do not "
          "add up to the total; claims with no training run (timing, checks, norms) cost "
          "minutes.", "", "Per setting (one run):", "",
          "| setting | steps | TFLOP per step | precision | s per step | GPU-hours per run | "
          "runs | SLURM runtime (min) x segments |",
          "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    counts: dict[str, int] = {}
    for r in est.runs:
        counts[r.setting.key] = counts.get(r.setting.key, 0) + 1
    for key, s in est.settings.items():
        if s.measured_s is not None:
            step = f"{s.measured_s:.3g} (measured)"
        else:
            step = f"{s.step_s[0]:.3g}-{s.step_s[1]:.3g}"
        req = job_runtime(cfg, key) if cost_settings(cfg)["enabled"] else None
        slurm = f"{req['runtime']} x {req['segments']}" if req else "-"
        L.append(f"| {key} | {s.steps:,} | {s.flops_per_step / 1e12:.2f} | "
                 f"{s.precision.upper()} | {step} | {hours_range(*s.hours)} | {counts[key]} | "
                 f"{slurm} |")
    L += ["", "Assumptions:", ""] + [f"- {a}" for a in est.assumptions]
    L += ["", "Devices (`--gpu`; dense peaks, TFLOP/s):", "",
          "| --gpu | device | FP32 | TF32 | BF16 | memory GB/s | source |",
          "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for name, d in load_devices()["devices"].items():
        L.append(f"| {name} | {d['name']} | {d['fp32']:g} | {d['tf32']:g} | {d['bf16']:g} | "
                 f"{d['bandwidth']:g} | {d['source']} |")
    L += ["", "Utilisation anchors (public training times; FLOPs counted by this model):", "",
          "| anchor | family | what | implied utilisation | source |",
          "| --- | --- | --- | ---: | --- |"]
    for a in anchor_table():
        L.append(f"| {a['id']} | {a['family']} | {a['what']} | {a['utilisation']:.1%} | "
                 f"{a['source']} |")
    return "\n".join(L) + "\n"
