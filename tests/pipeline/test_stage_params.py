"""The evaluation jobs' params (Snakemake's rerun trigger, compared as the ``repr`` it
records) and the keyword arguments their scripts pass to the library stay what the workflow
gave before the evaluation blocks (``vision.features``, ``vision.linear``, ``vision.knn``,
``vision.evt``, ``norms.analysis``, ``text.sts``) were typed: a finished result does not
rerun after an upgrade, and a rerun computes the same numbers.
``stage_params_045c73d.json`` holds them, as commit 045c73d gave them
(``stage_params_fixture.py`` says how it was made), for every features, probe, k-NN, scores,
tail, link, norms and STS job of the shipped profiles."""

from __future__ import annotations

import ast
import json

import pytest

from rerun_trigger_fixture import PROFILES, workflow_config
from stage_params_fixture import FIXTURE, THREADS, Api, group, stage_jobs
from weince.norms.config import NormsConfig
from weince.pipeline.fused import STEPS, step_params
from weince.pipeline.layout import PRETRAINED_ARM
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import probe_kwargs
from weince.pipeline.stages import (features_settings, job_settings, knn_settings,
                                    link_settings, norms_config, norms_settings, pot_settings,
                                    probe_settings, scores_settings, sts_settings,
                                    text_model_key)
from weince.utils.config import config_from_dict

WANT = json.loads(FIXTURE.read_text())


def _linear(p: Profile, wc: dict, head: bool = False) -> tuple:
    """workflow/rules/eval.smk's and ablations.smk's params, scripts/linear*.py's kwargs."""
    params = probe_settings(p, wc["arm"])
    kwargs = job_settings(params, probe_kwargs(p, wc["arm"]), device=p.vision.linear.device)
    return params, ({**kwargs, "feature": "head"} if head else kwargs)


def _block(settings, typed, given):
    """features.smk's and tail.smk's params, scripts/features.py's and collect_scores.py's
    kwargs (the block as written, with its device and data root)."""
    def f(p: Profile, wc: dict) -> tuple:
        params, cfg = settings(p), typed(p)
        return params, job_settings(params, given(p), device=cfg.device,
                                    data_root=cfg.data_root)
    return f


def _norms_vision(p: Profile, wc: dict) -> tuple:
    params = norms_settings(p)
    return params, dict(job_settings(params, norms_config(p)), threads=THREADS)


def _norms_text(p: Profile, wc: dict) -> tuple:
    cfg = norms_settings(p, pooling="mean" if wc["arm"] == PRETRAINED_ARM else "cls")
    params = {"model": text_model_key(p, wc["model"], wc["arm"], "TRUN"), "cfg": cfg}
    return params, dict(job_settings(cfg, norms_config(p)), threads=THREADS)


def _sts(p: Profile, wc: dict) -> tuple:
    """simcse.smk's sts params, scripts/sts.py's kwargs."""
    params, sts = sts_settings(p), p.text.sts
    kwargs = job_settings(params, p.text.sts_given, offline=sts.offline)
    if sts.device != "auto":
        kwargs.setdefault("device", sts.device)
    return params, kwargs


#: the rules' params and the scripts' keyword arguments now (workflow/rules, scripts)
NEW: Api = {
    "linear": _linear, "linear_head": lambda p, wc: _linear(p, wc, head=True),
    "knn": lambda p, wc: (knn_settings(p), job_settings(knn_settings(p), p.vision.knn_given,
                                                        device=p.vision.knn.device)),
    "features": _block(features_settings, lambda p: p.vision.features,
                       lambda p: p.vision.features_given),
    "collect_scores": _block(scores_settings, lambda p: p.vision.evt.collect,
                             lambda p: p.vision.evt.collect_given),
    # scripts/pot.py and link.py pass their params on as they are
    "pot": lambda p, wc: (pot_settings(p), pot_settings(p)),
    "link": lambda p, wc: (link_settings(p), link_settings(p)),
    "norms_vision": _norms_vision, "norms_text": _norms_text, "sts": _sts}


def _norms_cfg(text: str) -> NormsConfig:
    """The NormsConfig analyse_vision/analyse_text build from a norms script's ``cfg``."""
    return config_from_dict(NormsConfig, ast.literal_eval(text))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_evaluation_job_keeps_its_params_and_kwargs(name):
    files, over = PROFILES[name]
    prof = Profile.of(workflow_config(files, over))
    want = WANT[name]
    counts: dict[str, int] = {}
    for step, wc in stage_jobs(prof):
        params, kwargs = NEW[step](prof, wc)
        old = want["groups"][group(step, wc)]
        where = f"{name}: {step} {wc}"
        assert repr(params) == old["params"], f"{where} would rerun"
        if step.startswith("norms"):   # the script's dict becomes a NormsConfig
            assert _norms_cfg(repr(kwargs)) == _norms_cfg(old["kwargs"]), where
        else:
            assert repr(kwargs) == old["kwargs"], f"{where}: other library kwargs"
        if step in STEPS:              # a per-encoder job gives its steps the same params
            expected = {"norms_vision": {"cfg": params}}.get(step, {"kwargs": params})
            if step.startswith("linear"):   # a probe extracts its features itself
                expected = {**expected, "features": features_settings(prof)}
            assert step_params(prof, step, wc) == expected, where
        counts[step] = counts.get(step, 0) + 1
    assert counts == want["jobs"]
