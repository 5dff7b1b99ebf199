"""The cost of the full paper run: counted-FLOPs GPU-hours, measured where a rehearsal ran on a GPU.

    from weince.cost.forecast import build_forecast, write_forecast
    fc = build_forecast(prof)            # the rehearsal's Profile; reads results/rehearsal/...
    write_forecast(fc, "reports/rehearsal")         # forecast.md + resources.yaml

Every pretraining and SimCSE run of the rehearsal records, in its ``train.json``,
``step_timing``: the median wall time per optimiser step after warm-up and the peak memory
on its device (:class:`weince.train.step_timer.StepTimer`). The forecast multiplies, for
each run the paper profile (``rehearsal.paper_config``, default ``config/paper.yaml``)
would train, that measured time by the paper's steps: ``epochs x (training images //
batch)`` for SimCLR (the official training-split sizes, :data:`TRAIN_IMAGES`), ``epochs x
(sentences // batch)`` for SimCSE. A rehearsal whose batch was smaller than the paper's
(the CPU sizes of ``rehearsal.cpu``) has its step time scaled linearly to the paper's batch,
and the page says so; on a CPU those figures are CPU-hours of that machine and the page says
they are no forecast. The page opens with the GPU-hours of the paper run on ``cost.gpu``
from counted FLOPs (:mod:`weince.cost.estimate`, docs/cost.md), in which the settings this
rehearsal measured on a GPU take their measured step time; pairs not rehearsed are filled
from a measured pair of the same backbone scaled by the two steps' counted FLOPs. Only
training steps are counted:
data loading before the first step, checkpoints, feature extraction, probes, k-NN, score
collection and fits are not (they are minutes per run on a GPU; their measured rehearsal
times are in ``results/<profile>/benchmarks/``).

``resources.yaml`` is a config overlay holding a ``resources:`` block with the shape of
``config/paper.yaml``'s: each rule's ``gpu`` and ``threads`` as the paper profile sets
them; for ``pretrain`` and ``simcse`` with the paper's ``cost.enabled``, the per-setting
seconds per step measured on a GPU as ``cost.measured`` entries (GPU, setting, precision,
arm, batch, step time, source: the planner's format; each job's runtime then follows its
own setting), else (a GPU rehearsal) ``runtime`` = the longest forecast run x
``safety_factor``; for the other rules the paper profile's value, or the
rehearsal's own measured time x ``safety_factor`` when that is already longer; ``mem_mb``
likewise from the rehearsal's measured peak resident memory.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from weince.cost.counts import dataset_spec
from weince.cost.estimate import (TRAIN_IMAGES, WIKI1M_SENTENCES, CostSettings, ablation_runs,
                                  claim_pairs, family_of_backbone, gpu_set, paper_vision_runs,
                                  precision_of, vision_step_flops, vision_steps, with_overlay)
from weince.cost.pages import claims_markdown
from weince.cost.throughput import device_for_name
from weince.cost.job_times import job_times, per_rule
from weince.pipeline import layout
from weince.pipeline.arms import resolve_arm, split_arm
from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.data.marker import data_note
from weince.utils.config import parse_yaml

__all__ = ["TRAIN_IMAGES", "WIKI1M_SENTENCES", "Forecast", "build_forecast", "paper_profile",
           "forecast_markdown", "resources_overlay", "write_forecast", "measured_entries",
           "timed_runs"]


@dataclass
class RunCost:
    """One training run of the paper profile and its forecast."""

    stage: str                   # vision | text
    setting: str                 # "cifar100/resnet18" or the text model
    arm: str
    seed: int
    loss: str
    steps: int
    step_s: float | None = None  # at the paper's batch (scaled when the rehearsal's differed)
    source: str = ""             # which rehearsal run(s) measured it
    ablation: bool = False
    filled: bool = False         # its pair was not rehearsed: from another pair's runs

    @property
    def hours(self) -> float | None:
        return None if self.step_s is None else self.step_s * self.steps / 3600.0


@dataclass
class Forecast:
    device: str                  # "cuda (NVIDIA ...)" or "cpu"
    unit: str                    # "GPU-hours" or "CPU-hours"
    safety: float
    runs: list[RunCost] = field(default_factory=list)
    measured: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, dict[str, Any]] = field(default_factory=dict)
    benchmarks: dict[str, float] = field(default_factory=dict)    # rule -> max seconds
    bench_rss: dict[str, float] = field(default_factory=dict)     # rule -> max MB
    paper_resources: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    synthetic: bool = False
    paper: Profile | None = None  # the paper profile (rehearsal.paper_config), resolved
    gpu: str = ""                # the GPU(s) of the counted-FLOPs estimate (paper cost.gpu)

    @property
    def cuda(self) -> bool:
        return self.unit == "GPU-hours"

    @property
    def per_setting(self) -> bool:
        """Whether the paper profile's training jobs ask for their own setting's time
        (its ``cost.enabled``)."""
        return self.paper is not None and CostSettings.of(self.paper).enabled

    def measured_entries(self) -> list[dict[str, Any]]:
        """The ``cost.measured`` entries of this rehearsal (:func:`measured_entries`)."""
        return measured_entries(self.measured)


def measured_entries(measured: list[dict[str, Any]], by: str = "weince rehearsal"
                     ) -> list[dict[str, Any]]:
    """``cost.measured`` entries of timed runs (:func:`timed_runs`; ``by``: whose runs, for
    the entries' ``source``): per GPU (its
    devices.yaml key), setting, precision and arm the median seconds per step at the batch
    it ran; none from a CPU run, whose times say nothing about a GPU, nor from a GPU that
    devices.yaml does not list."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    shared: dict[tuple, list[int]] = defaultdict(list)
    for m in measured:
        gpu = device_for_name(m.get("device_name"))
        if not str(m.get("device", "")).startswith("cuda") or gpu is None:
            continue
        key = (f"{m['dataset']}/{m['backbone']}" if "dataset" in m
               else f"text/{m['model']}")
        group = (gpu, key, m["precision"], m["arm"], int(m["batch"]),
                 m.get("device_name") or "")
        groups[group].append(float(m["step_s_median"]))
        slot = m.get("gpu_slot") or {}
        if slot.get("shared"):
            shared[group].append(int(slot.get("jobs_per_gpu") or 2))
    return [{"gpu": gpu, "setting": key, "precision": prec, "arm": arm, "batch": batch,
             "step_s": round(_median(ts), 6),
             "source": f"{by} on {name}, median of {len(ts)} run(s)"
                       + _shared_note(shared.get((gpu, key, prec, arm, batch, name)))}
            for (gpu, key, prec, arm, batch, name), ts in sorted(groups.items())]


def _shared_note(per_gpu: list[int] | None) -> str:
    """What the entry's source says when some of its runs shared their GPU (a slot of the
    machine's pool, weince.utils.gpu_slots): their steps waited for the other jobs', so the
    time is an upper bound of a GPU alone's (a SLURM request sized on it errs long)."""
    if not per_gpu:
        return ""
    return (f"; {len(per_gpu)} of them shared a GPU (up to {max(per_gpu)} jobs on it): an "
            f"upper bound of a GPU alone's step time")


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def timed_runs(prof: Profile) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The profile's timed runs, (vision, text): one dict per train.json with
    ``step_timing``."""
    root, profile = prof.results, prof.name
    pre, sim = prof.vision.pretrain, prof.text.simcse
    vis, txt = [], []
    for r in [*layout.vision_runs(prof), *layout.vision_runs(prof, grid=True),
              *ablation_runs(prof)]:
        d = _load(r.dir(root, profile) / "train.json")
        if d and (d.get("step_timing") or {}).get("step_s_median"):
            vis.append({"dataset": r.dataset, "backbone": r.backbone, "arm": r.arm,
                        "seed": r.seed, "loss": d.get("loss"), "batch": d.get("batch_size"),
                        "precision": precision_of(family_of_backbone(r.backbone),
                                                  pre.amp, pre.tf32),
                        **d["step_timing"]})
    for t in layout.text_runs(prof):
        d = _load(t.dir(root, profile) / "train.json")
        if d and (d.get("step_timing") or {}).get("step_s_median"):
            ident = d.get("model_identity") or {}
            txt.append({"model": t.model, "arm": t.arm, "seed": t.seed, "loss": d.get("loss"),
                        "batch": d.get("batch_size"), "named": ident.get("named_model"),
                        "precision": precision_of("bert", sim.amp, False),
                        **d["step_timing"]})
    return vis, txt


def _loss_of(arm: str, paper: Profile) -> str:
    base, _ = split_arm(arm)
    try:
        return resolve_arm(base, paper.vision.losses, paper.vision.tau)["loss"]
    except (KeyError, ValueError):
        return base


def _benchmarks(prof: Profile) -> tuple[dict[str, float], dict[str, float]]:
    """rule -> (max seconds, max resident MB) over ``results/<profile>/benchmarks/``."""
    rules = per_rule(job_times(prof.results / prof.name / "benchmarks"))
    return ({r.rule: r.max_s for r in rules},
            {r.rule: r.max_rss_mb for r in rules if r.max_rss_mb is not None})


def paper_profile(prof: Profile) -> Profile:
    """The profile the rehearsal ``prof`` forecasts: its ``rehearsal.paper_config`` file (the
    schema's defaults under it, the rehearsal's results root unless it names one), resolved."""
    path = Path(prof.rehearsal.paper_config)
    if not path.is_file():
        raise FileNotFoundError(f"the paper profile {path} (rehearsal.paper_config) does not "
                                f"exist; the forecast needs its sizes")
    paper = parse_yaml(path.read_text(), f"the paper profile {path}") or {}
    paper.setdefault("results", str(prof.results))
    return Profile.of(paper)


def build_forecast(prof: Profile) -> Forecast:
    """The forecast of the paper profile's training cost from the rehearsal ``prof``'s
    measured runs (see the module docstring)."""
    paper = paper_profile(prof)
    safety = prof.rehearsal.safety_factor
    vis, txt = timed_runs(prof)
    devices = {m.get("device_name") or m.get("device") for m in vis + txt}
    cuda = any(str(m.get("device", "")).startswith("cuda") for m in vis + txt)
    fc = Forecast(device=", ".join(sorted(d for d in devices if d)) or "none measured",
                  unit="GPU-hours" if cuda else "CPU-hours", safety=safety, measured=vis + txt,
                  synthetic=bool(data_note(prof.data_root)))
    fc.paper = paper
    unlisted = sorted({m.get("device_name") or "" for m in vis + txt
                       if str(m.get("device", "")).startswith("cuda")
                       and device_for_name(m.get("device_name")) is None})
    if unlisted:
        fc.notes.append(f"measured on {', '.join(unlisted)}, which src/weince/cost/devices.yaml "
                        f"does not list: its step times stay on this page and reach no "
                        f"estimate (add the GPU there to file them)")
    fc.gpu = ",".join(gpu_set(paper))
    fc.benchmarks, fc.bench_rss = _benchmarks(prof)
    fc.paper_resources = dict(paper.resources)
    _vision_costs(fc, paper, vis)
    _text_costs(fc, paper, txt)
    _claim_costs(fc, prof, paper)
    return fc


def _vision_costs(fc: Forecast, paper: Profile, vis: list[dict[str, Any]]) -> None:
    """Every SimCLR run of the paper profile priced from the measured step times (scaled to
    the paper's batch); peak memory per backbone."""
    paper_batch = paper.vision.pretrain.batch_size

    filled: set[tuple[str, str]] = set()   # pairs not rehearsed, filled from another
    # measured step time at the paper's batch, per (dataset, backbone, loss)
    by_key: dict[tuple, list[float]] = defaultdict(list)
    by_pair: dict[tuple, list[float]] = defaultdict(list)
    scaled = False
    for m in vis:
        t = float(m["step_s_median"]) * paper_batch / float(m["batch"])
        scaled |= int(m["batch"]) != paper_batch
        by_key[(m["dataset"], m["backbone"], m["loss"])].append(t)
        by_pair[(m["dataset"], m["backbone"])].append(t)
        mem = fc.memory.setdefault(m["backbone"], {"peak_mem_mb": 0.0, "kind": m["peak_mem_kind"],
                                                  "batch": m["batch"], "at": ""})
        if m["peak_mem_mb"] > mem["peak_mem_mb"]:
            mem.update(peak_mem_mb=m["peak_mem_mb"], kind=m["peak_mem_kind"], batch=m["batch"],
                       at=f"{m['dataset']}/{m['arm']}")
    if scaled:
        fc.notes.append(f"the rehearsal's pretraining batch was smaller than the paper's "
                        f"{paper_batch}; step times are scaled linearly to {paper_batch} (a "
                        f"rough bound: a GPU runs small batches below its throughput)")
    for run, abl in paper_vision_runs(paper):
        loss = _loss_of(run.arm, paper)
        key = (run.dataset, run.backbone, loss)
        rc = RunCost("vision", f"{run.dataset}/{run.backbone}", run.arm, run.seed, loss,
                     vision_steps(paper, run.dataset), ablation=abl)
        if by_key.get(key):
            rc.step_s, rc.source = _median(by_key[key]), f"{loss} measured"
        elif by_pair.get(key[:2]):
            rc.step_s, rc.source = max(by_pair[key[:2]]), "another arm of this pair (max)"
        else:
            est = _same_backbone(run.dataset, run.backbone, by_pair, paper)
            if est is not None:
                (rc.step_s, rc.source), rc.filled = est, True
                filled.add(key[:2])
        fc.runs.append(rc)
    if filled:
        fc.notes.append(
            f"{len(filled)} pair(s) of the paper profile were not rehearsed "
            f"({', '.join('/'.join(p) for p in sorted(filled))}; a rehearsal without a GPU "
            f"runs `rehearsal.cpu_pairs`, every loader and backbone once): their step times "
            f"are those of the same backbone measured on another data set, as measured at the "
            f"same image size, else scaled by the ratio of the two steps' counted FLOPs (an "
            f"estimate, marked per run; weince.cost.counts)")


def _text_costs(fc: Forecast, paper: Profile, txt: list[dict[str, Any]]) -> None:
    """Every SimCSE run of the paper profile priced from the measured step times."""
    pt = paper.text
    if pt.enabled:
        s = pt.simcse
        n = s.n_train or WIKI1M_SENTENCES
        t_batch = s.batch_size
        steps = s.epochs * (n // t_batch)
        if s.max_steps:
            steps = min(steps, s.max_steps)
        t_by: dict[str, list[float]] = defaultdict(list)
        t_any: list[float] = []
        for m in txt:
            t = float(m["step_s_median"]) * t_batch / float(m["batch"])
            if int(m["batch"]) != t_batch and not any("SimCSE batch" in x for x in fc.notes):
                fc.notes.append(f"the rehearsal's SimCSE batch was {m['batch']}, the paper's "
                                f"{t_batch}: step times scaled linearly")
            t_by[m["loss"]].append(t)
            t_any.append(t)
            mem = fc.memory.setdefault(f"text: {m['model']}", {"peak_mem_mb": 0.0,
                                                               "kind": m["peak_mem_kind"],
                                                               "batch": m["batch"], "at": ""})
            if m["peak_mem_mb"] > mem["peak_mem_mb"]:
                mem.update(peak_mem_mb=m["peak_mem_mb"], kind=m["peak_mem_kind"],
                           batch=m["batch"], at=m["arm"])
        for r in layout.text_runs(paper):
            rc = RunCost("text", r.model, r.arm, r.seed, r.arm, steps)
            if t_by.get(r.arm):
                rc.step_s, rc.source = _median(t_by[r.arm]), f"{r.arm} measured"
            elif t_any:
                rc.step_s, rc.source = max(t_any), "another arm (max)"
            fc.runs.append(rc)
        if any(m.get("named") is False for m in txt):
            fc.notes.append("the SimCSE step times come from a stand-in model (e.g. the tiny "
                            "random BERT of `weince synthetic-data`), not the paper's: the C7 "
                            "hours say nothing until a rehearsal runs the real model")
        if txt and any(m["model"] not in pt.models for m in txt):
            fc.notes.append("the SimCSE step times were measured on a different model from "
                            "the paper's")


def _claim_costs(fc: Forecast, prof: Profile, paper: Profile) -> None:
    """The cost of each claim (the runs it needs, read from the rehearsal's registry) and
    of the ablation arms."""
    pairs = set(paper.vision.pairs)
    for claim in load_claims(prof.claims)["claims"]:
        stage = claim.get("stage")
        if stage == "vision":
            want = claim_pairs(claim, pairs)
            runs = [r for r in fc.runs if r.stage == "vision" and not r.ablation
                    and tuple(r.setting.split("/")) in want]
        elif stage == "text":
            runs = [r for r in fc.runs if r.stage == "text"]
        else:
            runs = []
        fc.claims.append(_claim_row(claim, runs))
    abl = [r for r in fc.runs if r.ablation]
    if abl:
        fc.claims.append(_claim_row({"id": "ablations", "title": "ablation arms "
                                     "(docs/ablations.md)", "stage": "vision"}, abl))


def _same_backbone(dataset: str, backbone: str, by_pair: dict[tuple, list[float]],
                   paper: Profile) -> tuple[float, str] | None:
    """The step time of a pair that was not rehearsed, from a measured pair of the same
    backbone: the slowest one at the same image size (the step does not depend on which
    images), else the closest size scaled by the ratio of the two steps' counted FLOPs
    (weince.cost.counts: STL-10's 7x7 stem and max-pool make its 96 px step cheaper than
    a 32 px one); with where it came from."""
    def size(d: str) -> int | None:
        try:
            return dataset_spec(d)["image_size"]
        except ValueError:
            return None

    want = size(dataset)
    cands = [(d, max(ts)) for (d, b), ts in by_pair.items() if b == backbone and ts and size(d)]
    if want is None or not cands:
        return None
    same = [(d, t) for d, t in cands if size(d) == want]
    if same:
        d, t = max(same, key=lambda c: c[1])
        return t, f"{backbone} on {d} (same {want}px images)"
    # (every candidate has a size: cands keeps the sized data sets)
    d, t = min(cands, key=lambda c: (abs(cast(int, size(c[0])) - want), -c[1]))
    pre = paper.vision.pretrain
    batch, proj = pre.batch_size, pre.proj_dim

    def flops(ds: str) -> float:
        return vision_step_flops(backbone, ds, batch, proj)

    ratio = flops(dataset) / flops(d)
    return (t * ratio, f"estimate: {backbone} on {d} x {ratio:.2g} counted FLOPs "
                       f"({size(d)}->{want}px)")


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    k = len(s) // 2
    return s[k] if len(s) % 2 else 0.5 * (s[k - 1] + s[k])


def _claim_row(claim: dict[str, Any], runs: list[RunCost]) -> dict[str, Any]:
    known = [r for r in runs if r.hours is not None]
    return {"id": claim["id"], "title": claim.get("title", ""), "stage": claim.get("stage"),
            "runs": len(runs), "measured_runs": len(known),
            "hours": sum(r.hours for r in known) if known else None,
            "unmeasured": sorted({r.setting for r in runs if r.hours is None}),
            "filled": sorted({r.setting for r in runs if r.filled})}


def _total(fc: Forecast) -> tuple[float, int, int]:
    hours = [r.hours for r in fc.runs if r.hours is not None]
    return sum(hours), len(hours), len(fc.runs)


def _h(x: float | None) -> str:
    if x is None:
        return "not measured"
    return f"{x:,.1f}" if x >= 10 else f"{x:.2f}"


def resources_overlay(fc: Forecast) -> dict[str, Any]:
    """``{"resources": {rule: {gpu, mem_mb, runtime, threads}}}``: the paper profile's
    block with measured runtimes (see the module docstring)."""
    out: dict[str, dict[str, int]] = {}
    longest: dict[str, float] = {}
    for r in fc.runs:
        if r.hours is not None:
            rule = "pretrain" if r.stage == "vision" else "simcse"
            longest[rule] = max(longest.get(rule, 0.0), r.hours * 60.0)
    rules = dict(fc.paper_resources)   # the paper's rules only (a benchmark folder such as
    for rule in longest:               # `norms` holds two rules and is not one itself)
        rules.setdefault(rule, {})
    per_setting = fc.per_setting
    for rule, spec in rules.items():
        spec = dict(spec or {})
        if rule in longest and fc.cuda and not per_setting:
            spec["runtime"] = max(1, math.ceil(longest[rule] * fc.safety))
        elif rule in fc.benchmarks and rule != "default":
            measured_min = math.ceil(fc.benchmarks[rule] / 60.0 * fc.safety)
            spec["runtime"] = max(int(spec.get("runtime", 1)), measured_min, 1)
        if rule in fc.bench_rss:
            spec["mem_mb"] = max(int(spec.get("mem_mb", 1)),
                                 math.ceil(fc.bench_rss[rule] * fc.safety))
        out[rule] = {k: int(v) for k, v in spec.items()
                     if k in ("gpu", "mem_mb", "runtime", "threads")}
    over: dict[str, Any] = {"resources": out}
    measured = fc.measured_entries()
    if per_setting and measured:
        # each setting's own time: the runtime of its jobs follows it (weince.cost.estimate)
        over["cost"] = {"measured": measured}
    return over


def estimate_markdown(fc: Forecast) -> str:
    """The paper run's GPU-hours on ``fc.gpu`` from counted FLOPs, with the settings this
    rehearsal measured on a GPU in place of their estimate (weince.cost.estimate)."""
    if fc.paper is None:
        raise ValueError("the forecast has no paper profile to price (build_forecast sets it)")
    known = [dict(m) for m in CostSettings.of(fc.paper).measured]
    paper = with_overlay(fc.paper, {"cost": {"measured": known + fc.measured_entries()}})
    return claims_markdown(paper, fc.gpu, "config/paper.yaml")


def forecast_markdown(fc: Forecast) -> str:
    total, n_known, n_all = _total(fc)
    L = ["# Cost of the full paper run", "",
         "## GPU-hours (counted FLOPs; measured where this rehearsal ran on a GPU)", "",
         "`from` says per row whether a setting's step time was measured here (on a GPU) or "
         "estimated (docs/cost.md).", "", estimate_markdown(fc).rstrip("\n"), ""]
    if fc.unit == "CPU-hours":
        L += ["## This rehearsal's own step times (a CPU: not a forecast of the paper run)", "",
              f"Measured on: **{fc.device}**. The rows below multiply this CPU's step times by "
              "the paper's steps: **CPU-hours of this machine**, which say nothing about a "
              "GPU's; they show that every setting ran and how its step scales.", ""]
    else:
        L += ["## Measured on this GPU", "",
              f"Measured on: **{fc.device}**; figures are **{fc.unit}**.", ""]
    L += ["Only optimiser steps are counted (time per step after warm-up x the paper's steps "
          "per run x its runs); evaluation, feature extraction and fits are not.", ""]
    if fc.synthetic:
        L += ["The rehearsal ran on SYNTHETIC files in the real formats (`weince "
              "synthetic-data`): step times depend on image size and model, not on the "
              "pixels, so they hold for the real data; nothing else does.", ""]
    L += [f"**Total: {_h(total)} {fc.unit}** for {n_known} of the paper's {n_all} training "
          f"runs" + (f" ({n_all - n_known} runs of settings this rehearsal did not run are "
                     f"not counted)" if n_known < n_all else "") + ".", "",
          "### Per claim table", "",
          f"| claim | what | training runs | {fc.unit} | from another pair | not measured |",
          "| --- | --- | ---: | ---: | --- | --- |"]
    for c in fc.claims:
        if not c["runs"]:
            hours = "no training run"
        elif c["measured_runs"] < c["runs"]:
            hours = (f"{_h(c['hours'])} for the {c['measured_runs']} measured runs"
                     if c["measured_runs"] else "not measured")
        else:
            hours = _h(c["hours"])
        L.append(f"| {c['id']} | {c['title']} | {c['runs']} | {hours} | "
                 f"{', '.join(c.get('filled') or []) or '-'} | "
                 f"{', '.join(c['unmeasured']) or '-'} |")
    L += ["", "A run serves several claims (C3-C6 share encoders), so the rows do not add up "
          "to the total; claims with no training run (timing, checks, norms) cost minutes.",
          "", "### Per setting", "",
          f"| stage | setting | arm (loss) | runs | steps per run | s per step | {fc.unit} | "
          "measured by |", "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    groups: dict[tuple, list[RunCost]] = defaultdict(list)
    for r in fc.runs:
        groups[(r.stage, r.setting, r.loss, r.ablation)].append(r)
    for (stage, setting, loss, abl), rs in sorted(groups.items()):
        hrs = [r.hours for r in rs if r.hours is not None]
        L.append(f"| {stage}{' (ablation)' if abl else ''} | {setting} | {loss} | {len(rs)} | "
                 f"{rs[0].steps:,} | {_f(rs[0].step_s)} | {_h(sum(hrs) if hrs else None)} | "
                 f"{rs[0].source or '-'} |")
    L += ["", "### Peak memory per backbone (on the device it ran on)", "",
          "| backbone | peak MB | measured as | batch | run |", "| --- | ---: | --- | ---: | --- |"]
    for b, m in sorted(fc.memory.items()):
        L.append(f"| {b} | {m['peak_mem_mb']:,.0f} | {m['kind']} | {m['batch']} | {m['at']} |")
    over = resources_overlay(fc)["resources"]
    L += ["", f"### Suggested SLURM runtime per rule (minutes; safety factor {fc.safety:g})", "",
          "`reports/rehearsal/resources.yaml` holds these as a config overlay: "
          "`--configfile config/paper.yaml reports/rehearsal/resources.yaml`.", "",
          "| rule | gpu | runtime (min) | mem_mb | from |", "| --- | ---: | ---: | ---: | --- |"]
    for rule, spec in sorted(over.items()):
        if rule in ("pretrain", "simcse") and fc.per_setting:
            src = "per setting: its estimate or measured step time (cost block, docs/cost.md)"
        elif rule in ("pretrain", "simcse") and fc.cuda:
            src = "longest forecast run x safety"
        else:
            src = "paper profile (or measured x safety if longer)"
        L.append(f"| {rule} | {spec.get('gpu', 0)} | {spec.get('runtime', '-')} | "
                 f"{spec.get('mem_mb', '-')} | {src} |")
    if fc.notes:
        L += ["", "### Notes", ""] + [f"- {n}" for n in fc.notes]
    return "\n".join(L) + "\n"


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def write_forecast(fc: Forecast, out_dir: str | Path) -> tuple[Path, Path]:
    """``forecast.md`` and ``resources.yaml`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "forecast.md"
    md.write_text(forecast_markdown(fc))
    res = out / "resources.yaml"
    head = (f"# Measured resources for the paper profile (weince rehearsal on {fc.device}).\n"
            "#   snakemake --configfile config/paper.yaml reports/rehearsal/resources.yaml ...\n"
            "# pretrain/simcse runtimes: per setting from the cost model (docs/cost.md); a GPU\n"
            "# rehearsal's measured seconds per step (cost.measured) replace the estimates.\n")
    if fc.unit == "CPU-hours":
        head += ("# Measured on a CPU: no step time is carried over (a CPU's say nothing about "
                 "a GPU's); memory and the short rules' times are.\n")
    res.write_text(head + yaml.safe_dump(resources_overlay(fc), sort_keys=True))
    return md, res
