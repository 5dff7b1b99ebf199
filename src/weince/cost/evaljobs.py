"""The SLURM runtime of an evaluation job from the work it does, not a blanket limit.

    from weince.cost.evaljobs import eval_job_runtime, EVAL_RULES
    eval_job_runtime(prof, "features", {"dataset": "imagenet32", "backbone": "resnet50",
                                       "arm": "infonce", "seed": "7"})
    # {"need_min": ..., "runtime": ..., "work": "..."}

Each job's work, counted from the resolved profile and the FLOPs table (docs/cluster.md):

- ``features``: one forward pass of the backbone over the labelled training and test
  splits (``TRAIN_IMAGES``, ``TEST_IMAGES``), plus reading them at
  ``cost.eval.host_images_per_s``;
- ``collect_scores``: the forward passes of ``(n_batches + link_batches) x batch x 2``
  views;
- ``linear`` / ``linear_head``: the features' forward pass (a probe extracts its own, in
  memory), then the probe's epochs over the training features (less the validation
  fraction), one optimiser step per batch at ``cost.eval.probe_step_s`` (a small eager step
  is launch-bound, not FLOP-bound; the run's probe seeds share each step);
- ``knn``: the ``queries x training features x dims`` similarity matmuls of every split
  seed;
- ``pot`` / ``link``: CPU fits, ``cost.eval.fit_s`` each (POT: the fit, its bootstrap and
  its goodness-of-fit bootstrap);
- ``sts``: the forward passes over the STS sentences; ``norms_vision`` / ``norms_text``:
  the encoder over the probes and the filler bank, then one loss step per minibatch of
  the resampling plan.

GPU work is priced at the slow end of the slowest GPU of ``cost.gpu``
(:func:`weince.cost.throughput.rate`); the request is ``need x cost.safety_factor +
cost.eval.overhead_min`` (the start-up of a job: imports, reading the encoder), at most
``cost.max_runtime``, like a training job's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from weince.cost.counts import dataset_spec, text_counts, text_geometry, vision_counts
from weince.cost.estimate import (STSB_DEV_SENTENCES, TEST_IMAGES, TRAIN_IMAGES,
                                  CostSettings, EvalWork, family_of_backbone, gpu_set,
                                  precision_of)
from weince.cost.throughput import rate
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import probe_config

__all__ = ["EVAL_RULES", "eval_job_runtime", "work_seconds"]

EVAL_RULES = ("features", "collect_scores", "linear", "linear_head", "knn", "pot", "link",
              "sts", "norms_vision", "norms_text")
STSB_TEST_SENTENCES = 2 * 1_379     # STS-B test: 1,379 pairs
STS_TOKENS = 128                    # an upper bound of an STS sentence's tokens


def _slow_rate(prof: Profile, family: str, precision: str) -> float:
    """FLOP/s at the slow end of the slowest GPU the job may land on."""
    return min(rate(g, family, precision)[0] for g in gpu_set(prof))


def _vision(prof: Profile, wc: Mapping[str, Any]) -> dict[str, Any]:
    d, b = wc["dataset"], wc["backbone"]
    spec = dataset_spec(d)
    pre = prof.vision.pretrain
    fam = family_of_backbone(b)
    prec = precision_of(fam, pre.amp, pre.tf32)
    counts = vision_counts(b, spec["image_size"], spec["channels"], f"proj{pre.proj_dim}")
    return {"spec": spec, "forward": counts["forward"], "feat": counts["feat_dim"],
            "rate": _slow_rate(prof, fam, prec), "n_train": TRAIN_IMAGES[(d, "train")],
            "n_test": TEST_IMAGES[d]}


def _text(prof: Profile, model: str) -> dict[str, Any]:
    t = prof.text.simcse
    geometry = text_geometry(model)
    prec = precision_of("bert", t.amp, False)   # SimCSE has no TF32 switch
    return {"forward": text_counts(geometry, STS_TOKENS)["forward"],
            "rate": _slow_rate(prof, "bert", prec)}


def _features(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    v = _vision(prof, wc)
    n = v["n_train"] + v["n_test"]
    return (n * v["forward"] / v["rate"] + n / e.host_images_per_s,
            f"{n:,} images forward")


def _collect(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    v = _vision(prof, wc)
    c = prof.vision.evt.collect
    n = (c.n_batches + c.link_batches) * c.batch_size * 2
    return (n * v["forward"] / v["rate"] + n / e.host_images_per_s,
            f"{n:,} views forward")


def _linear(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    v = _vision(prof, wc)
    lin = probe_config(prof, wc.get("arm", ""))
    seeds, epochs, batch = len(lin.seeds), lin.epochs, lin.batch_size
    n_fit = math.ceil(v["n_train"] * (1.0 - lin.val_frac))
    # the probe seeds train together, one batched step (weince.eval.linear)
    steps = epochs * math.ceil(n_fit / batch)
    flops = seeds * epochs * (n_fit + v["n_train"] + v["n_test"]) * 6.0 * v["feat"] \
        * v["spec"]["classes"]
    extract, images = _features(prof, wc, e)     # its own features, in memory
    return (extract + steps * e.probe_step_s + flops / v["rate"],
            f"{images}, then {epochs} epochs of {seeds} probe seed(s) in one batched step: "
            f"{steps:,} steps")


def _knn(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    v = _vision(prof, wc)
    k = prof.vision.knn
    splits = len(k.split_seeds)
    queries = v["n_test"] + k.val_frac * v["n_train"]
    flops = splits * queries * v["n_train"] * v["feat"] * 2.0
    return flops / v["rate"], f"{splits} split seed(s): {queries:,.0f} queries"


def _pot(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    p = prof.vision.evt.pot
    fits = 1 + p.n_boot + p.gof_boot
    return fits * e.fit_s, f"{fits} fits (CPU)"


def _link(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    fits = 1   # run_link bootstraps nothing (LinkConfig has no n_boot)
    return fits * e.fit_s, f"{fits} fit(s) (CPU)"


def _sts(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    t = _text(prof, wc["model"])
    n = STSB_TEST_SENTENCES + STSB_DEV_SENTENCES
    return n * t["forward"] / t["rate"], f"{n:,} sentences forward"


def _norms_plan(prof: Profile, text: bool) -> tuple[int, int]:
    a = prof.norms.analysis
    n, bank = (a.text_probes, a.text_bank) if text else (a.n_probes, a.n_bank)
    steps = a.resamples * math.ceil(n / a.probes_per_batch)
    return n + bank, steps


def _norms_vision(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    v = _vision(prof, wc)
    n, steps = _norms_plan(prof, text=False)
    return (n * v["forward"] / v["rate"] + n / e.host_images_per_s
            + steps * e.probe_step_s, f"{n:,} images forward, {steps:,} loss steps")


def _norms_text(prof: Profile, wc: Mapping[str, Any], e: EvalWork) -> tuple[float, str]:
    t = _text(prof, wc["model"])
    n, steps = _norms_plan(prof, text=True)
    return (n * t["forward"] / t["rate"] + steps * e.probe_step_s,
            f"{n:,} sentences forward, {steps:,} loss steps")


_WORK: dict[str, Callable[[Profile, Mapping[str, Any], EvalWork], tuple[float, str]]] = {
    "features": _features, "collect_scores": _collect, "linear": _linear,
         "linear_head": _linear, "knn": _knn, "pot": _pot, "link": _link, "sts": _sts,
         "norms_vision": _norms_vision, "norms_text": _norms_text}


def work_seconds(prof: Profile, rule: str, wildcards: Mapping[str, Any]
                 ) -> tuple[float, str]:
    """Seconds of counted work of one job of ``rule`` and what they are."""
    if rule not in _WORK:
        raise ValueError(f"no work model for rule {rule!r}: the evaluation rules are "
                         f"{', '.join(EVAL_RULES)}")
    return _WORK[rule](prof, dict(wildcards), CostSettings.of(prof).eval)


def eval_job_runtime(prof: Profile, rule: str, wildcards: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """``need_min`` (counted work), ``runtime`` (the request: need x safety factor + the
    evaluation start-up, at most ``cost.max_runtime``) and ``work``."""
    c = CostSettings.of(prof)
    secs, what = work_seconds(prof, rule, wildcards)
    need = secs / 60.0
    total = need * c.safety_factor + c.eval.overhead_min
    return {"need_min": need, "runtime": min(c.max_runtime, max(1, math.ceil(total))),
            "work": what}
