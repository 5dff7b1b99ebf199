"""Writes ``stage_params_045c73d.json``: for every evaluation job of each shipped profile
(features, linear probe, head probe, k-NN, scores, POT and link fits, norms analysis of a
vision or text unit, STS), its params (Snakemake's rerun trigger, as the ``repr`` Snakemake
records) and the keyword arguments its script passes to the library, as the workflow at
commit 045c73d gave them (before these blocks were typed); jobs whose params can only
differ by their arm (and a text job's model) share one entry, the jobs per step are
counted. It uses that commit's API, so it
is run once, against the old tree, and ``test_stage_params.py`` holds the current code to
its output:

    git worktree add /tmp/old 045c73d
    PYTHONPATH=/tmp/old/src python tests/pipeline/stage_params_fixture.py

Not a test module: pytest does not collect it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rerun_trigger_fixture import PROFILES, job_key, workflow_config
from weince.pipeline.fused import _needed, _MAKER, run_wildcards
from weince.pipeline.layout import PRETRAINED_ARM, norms_text_runs, text_runs
from weince.pipeline.profile import Profile

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "stage_params_045c73d.json"

#: the threads Snakemake gives a job (the norms scripts pass them on)
THREADS = 3

#: step -> (profile, wildcards) -> (params, kwargs the script passes to the library)
Api = dict[str, Callable[[Profile, dict[str, Any]], tuple[Any, Any]]]


def stage_jobs(prof: Profile) -> list[tuple[str, dict[str, Any]]]:
    """(step, wildcards) of every evaluation job the profile plans: the per-step vision jobs
    (the files its targets, grid and norms analysis read), then STS and the text norms
    units."""
    jobs = []
    for tag, files in sorted(_needed(prof).items()):
        steps = sorted({_MAKER[f] for f in files} - {"pretrain"})
        jobs += [(step, run_wildcards(tag)) for step in steps]
    if prof.text.enabled:
        jobs += [("sts", dict(r.__dict__)) for r in text_runs(prof)]
    jobs += [("norms_text", dict(r.__dict__)) for r in norms_text_runs(prof)]
    return jobs


def group(step: str, wc: dict[str, Any]) -> str:
    """What a job's params can depend on: its step, its arm and a text job's model (the
    fixture holds one entry per group, the jobs per step are counted)."""
    return "/".join([step, *([wc["model"]] if "model" in wc else []), wc["arm"]])


def stage_params(files: tuple[str, ...], over: dict[str, Any], api: Api
                 ) -> tuple[dict[str, Any], dict[str, int]]:
    """``{"step/[model/]arm": {"params": repr, "kwargs": repr}}`` of every evaluation job
    (a ``ValueError`` if two jobs of one group differ), and the jobs per step."""
    prof = Profile.of(workflow_config(files, over))
    out: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for step, wc in stage_jobs(prof):
        params, kwargs = api[step](prof, wc)
        got = {"params": repr(params), "kwargs": repr(kwargs)}
        if out.setdefault(group(step, wc), got) != got:
            raise ValueError(f"{step} {job_key(wc)}: {got} != {out[group(step, wc)]}")
        counts[step] = counts.get(step, 0) + 1
    return out, counts


def _old_api() -> Api:
    """The rules' params and the scripts' keyword arguments at commit 045c73d."""
    from weince.pipeline.protocol import probe_kwargs  # noqa: PLC0415
    from weince.pipeline.stages import (job_settings, norms_config,  # noqa: PLC0415
                                        result_settings, text_model_key)

    def linear(p, wc, head=False):
        params = result_settings(probe_kwargs(p, wc["arm"]))
        kwargs = job_settings(params, probe_kwargs(p, wc["arm"]), device=p.device)
        if head:
            kwargs["feature"] = "head"
        return params, kwargs

    def block(get, **extra):
        def f(p, wc):
            params = result_settings(get(p))
            return params, job_settings(params, get(p), **{k: getattr(p, a)
                                                          for k, a in extra.items()})
        return f

    def norms_vision(p, wc):
        params = result_settings(norms_config(p))
        return params, dict(job_settings(params, norms_config(p)), threads=THREADS)

    def norms_text(p, wc):
        trun = "TRUN"   # the run folder (the shipped model ignores it)
        cfg = result_settings(norms_config(p, pooling="mean" if wc["arm"] == PRETRAINED_ARM
                                           else "cls"))
        params = {"model": text_model_key(p, wc["model"], wc["arm"], trun), "cfg": cfg}
        return params, dict(job_settings(cfg, norms_config(p)), threads=THREADS)

    def sts(p, wc):
        params = result_settings(p.text.sts)
        kwargs = job_settings(params, p.text.sts, offline=p.offline)
        if p.device != "auto":
            kwargs.setdefault("device", p.device)
        return params, kwargs

    return {
        "linear": linear, "linear_head": lambda p, wc: linear(p, wc, head=True),
        "knn": block(lambda p: p.vision.knn, device="device"),
        "features": block(lambda p: p.vision.features, device="device",
                          data_root="data_root"),
        "collect_scores": block(lambda p: p.vision.evt.collect, device="device",
                                data_root="data_root"),
        "pot": lambda p, wc: (p.vision.evt.pot, p.vision.evt.pot),
        "link": lambda p, wc: (p.vision.evt.link, p.vision.evt.link),
        "norms_vision": norms_vision, "norms_text": norms_text, "sts": sts}


def main() -> int:
    api = _old_api()
    out = {}
    for name, (files, over) in PROFILES.items():
        groups, counts = stage_params(files, over, api)
        out[name] = {"jobs": counts, "groups": groups}
    FIXTURE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"{FIXTURE}: {sum(sum(p['jobs'].values()) for p in out.values())} jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
