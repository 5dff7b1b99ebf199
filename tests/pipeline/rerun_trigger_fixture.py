"""Writes ``rerun_triggers_adce6c6.json``: the params (Snakemake's rerun trigger, as the
``repr`` Snakemake records) of every pretraining, SimCSE and timing job of each shipped
profile, as the workflow at commit adce6c6 gave them. It uses that commit's API
(``result_settings(job_config(...))``, ``timing_settings``), so it is run once, against the
old tree, and the test (``test_rerun_triggers.py``) holds the current code to its output:

    git worktree add /tmp/old adce6c6
    PYTHONPATH=/tmp/old/src python tests/pipeline/rerun_trigger_fixture.py

Not a test module: pytest does not collect it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from snakemake.common.configfile import load_configfile
from snakemake.utils import update_config

from weince.pipeline.ablations import ablation_plan
from weince.pipeline.config_check import check_config
from weince.pipeline.layout import text_runs, vision_runs
from weince.pipeline.profile import CONFIG_SCHEMA, Profile
from weince.pipeline.stages import job_config, result_settings, timing_settings

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURE = HERE / "rerun_triggers_adce6c6.json"

#: profile name -> the config files Snakemake applies (the Snakefile's configfile first),
#: then ``--config`` values (a rehearsal with and without GPUs: its sizes differ)
PROFILES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "default": (("config/config.yaml",), {}),
    "smoke": (("config/config.yaml", "config/smoke.yaml"), {}),
    "paper": (("config/config.yaml", "config/paper.yaml"), {}),
    "paper_cifar100_r18": (("config/config.yaml", "config/paper.yaml",
                            "config/paper_cifar100_r18.yaml"), {}),
    "rehearsal_cpu": (("config/config.yaml", "config/paper.yaml", "config/rehearsal.yaml"),
                      {"rehearsal": {"gpu": False}}),
    "rehearsal_gpu": (("config/config.yaml", "config/paper.yaml", "config/rehearsal.yaml"),
                      {"rehearsal": {"gpu": True}}),
}


def workflow_config(files: tuple[str, ...], over: dict[str, Any]) -> dict[str, Any]:
    """The config the Snakefile checks: each file loaded and merged as Snakemake does, and
    ``over`` (``--config`` values), then the config check (which fills the schema's
    defaults in place)."""
    config: dict[str, Any] = {}
    paths = [str(ROOT / f) for f in files]
    for p in paths:
        update_config(config, load_configfile(p))
    update_config(config, over)
    check_config(config, CONFIG_SCHEMA, paths, workflow_dir=str(ROOT / "workflow"))
    return config


def training_jobs(prof: Any) -> list[dict[str, Any]]:
    """The wildcards of every pretraining and SimCSE job the profile plans: final and
    grid-point vision runs, the ablations' runs, and the text runs."""
    runs = list(vision_runs(prof)) + list(vision_runs(prof, grid=True))
    plan = ablation_plan(prof)
    for dataset, backbone in plan.pairs:
        runs += list(vision_runs(prof, arms=plan.run_arms(), seeds=plan.seeds,
                                 pairs=[(dataset, backbone)]))
    jobs = [dict(r.__dict__) for r in dict.fromkeys(runs)] if prof.vision.enabled else []
    return jobs + [dict(r.__dict__) for r in text_runs(prof)]


def job_key(wc: dict[str, Any]) -> str:
    """A job's name in the fixture: its wildcards, in order."""
    return "/".join(f"{k}={v}" for k, v in wc.items())


def profile_triggers(files: tuple[str, ...], over: dict[str, Any], params: Any, timing: Any
                     ) -> dict[str, str]:
    """``repr`` of each job's params (``params(prof, wildcards)``; ``timing(prof)`` for the
    timing job)."""
    prof = Profile.of(workflow_config(files, over))
    out = {job_key(wc): repr(params(prof, wc)) for wc in training_jobs(prof)}
    if prof.timing.enabled:
        out["timing"] = repr(timing(prof))
    return out


def main() -> int:
    out = {name: profile_triggers(files, over,
                                  lambda p, wc: result_settings(job_config(p, wc)),
                                  timing_settings)
           for name, (files, over) in PROFILES.items()}
    FIXTURE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"{FIXTURE}: {sum(map(len, out.values()))} jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
