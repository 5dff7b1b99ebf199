"""The training jobs' params (Snakemake's rerun trigger, compared as the ``repr`` it records)
stay what the workflow gave before the settings were typed: a finished run does not retrain
after an upgrade. ``rerun_triggers_adce6c6.json`` holds them, as commit adce6c6 gave them
(``rerun_trigger_fixture.py`` says how it was made), for every pretraining, SimCSE and timing
job of the shipped profiles. A key added at its default changes no params; any value off its
default does. One entry follows a change of a profile, not of the code: the embedded
default's timing job times 20 whole-step repetitions per run since it was set so in
config/config.yaml (40 at adce6c6), and reruns once for that."""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Any

import pytest

import weince.pipeline.profile as profile_mod
from rerun_trigger_fixture import (FIXTURE, PROFILES, profile_triggers, training_jobs,
                                   workflow_config)
from weince.pipeline.profile import Profile
from weince.pipeline.stages import RERUN_FREE, job_config, rerun_trigger, timing_settings
from weince.train.config import SimCLRConfig, SimCSEConfig, TimingConfig
from weince.utils.settings import listed_fields, setting

WANT = json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_training_job_keeps_its_params(name):
    files, over = PROFILES[name]
    got = profile_triggers(files, over, rerun_trigger, timing_settings)
    assert sorted(got) == sorted(WANT[name])
    changed = [job for job in got if got[job] != WANT[name][job]]
    assert not changed, f"{len(changed)} jobs would rerun, e.g. {changed[0]}: " \
                        f"{got[changed[0]]} != {WANT[name][changed[0]]}"


def _profile(name: str) -> Profile:
    return Profile.of(workflow_config(*PROFILES[name]))


def _triggers(prof: Profile) -> dict[str, Any]:
    out = {str(wc): rerun_trigger(prof, wc) for wc in training_jobs(prof)}
    return {**out, "timing": timing_settings(prof)}


def test_a_new_key_at_its_default_changes_no_params(monkeypatch):
    before = _triggers(_profile("smoke"))

    @dataclass
    class WithNewKey(SimCLRConfig):
        new_key: int = setting(3, ge=1)

    monkeypatch.setattr(profile_mod, "SimCLRConfig", WithNewKey)
    prof = _profile("smoke")
    assert isinstance(prof.vision.pretrain, WithNewKey)
    assert _triggers(prof) == before


def _other(cfg: Any, f: dataclasses.Field) -> Any:
    """A valid-looking value of the field ``f`` other than ``cfg``'s."""
    tp, value = typing.get_type_hints(type(cfg))[f.name], getattr(cfg, f.name)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Literal:
        return next(a for a in args if a != value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, str) and bool in args:   # timing's compile: true is "compiled"
        return value != "compiled"
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_other"
    if isinstance(value, dict):
        return {**value, "other": 1}
    if isinstance(value, list):
        return [*value, value[0]] if value else [1]
    base = args[0] if args else tp
    return {int: 7, float: 0.25, str: "other", bool: True}.get(base, "other")


def _changes(prof: Profile, cfg: Any, trigger: Any, skip: frozenset[str]) -> list[str]:
    """The fields of ``cfg`` whose change leaves ``trigger(changed)`` equal."""
    base = trigger(prof, cfg)
    return [f.name for f in dataclasses.fields(cfg) if f.name not in skip
            and trigger(prof, dataclasses.replace(cfg, **{f.name: _other(cfg, f)})) == base]


def test_any_value_off_its_default_changes_the_params(monkeypatch):
    prof = _profile("default")
    wc = {"dataset": "digits", "backbone": "smallcnn", "arm": "weince", "seed": "0"}
    pre = job_config(prof, wc)
    text = job_config(prof, {"model": "minilm", "arm": "weince", "seed": "7"})
    assert isinstance(pre, SimCLRConfig) and isinstance(text, SimCSEConfig)

    def vision(p, cfg):
        monkeypatch.setattr("weince.pipeline.stages.job_config", lambda *_a, **_k: cfg)
        return rerun_trigger(p, wc)

    assert _changes(prof, pre, vision, RERUN_FREE) == []
    assert _changes(prof, text, vision, RERUN_FREE) == []

    def timing(p, cfg):
        return timing_settings(dataclasses.replace(p, timing=dataclasses.replace(
            p.timing, config=cfg)))

    assert isinstance(prof.timing.config, TimingConfig)
    assert _changes(prof, prof.timing.config, timing, frozenset({"device"})) == []


def test_a_key_the_config_writes_is_listed_as_written():
    """A block's key at its default is listed (it was before), and its value as the YAML
    wrote it (``lr: 1`` stays 1, not the typed 1.0: the repr Snakemake compares)."""
    cfg = workflow_config(*PROFILES["smoke"])
    cfg["vision"]["pretrain"].update(lr=1, optimizer="adam")
    prof = Profile.of(cfg)
    wc = {"dataset": "digits", "backbone": "smallcnn", "arm": "infonce", "seed": "0"}
    params = rerun_trigger(prof, wc)
    assert repr(params["lr"]) == "1" and job_config(prof, wc).lr == 1.0
    assert params["optimizer"] == "adam" == SimCLRConfig().optimizer
    assert "momentum" not in params            # not written, at its default


def test_listed_fields_order():
    cfg = dataclasses.replace(SimCLRConfig(), epochs=7, lr=0.5, dataset="cifar10", seed=3)
    assert listed_fields(cfg, {"lr": 0.5, "amp": False}, ("seed", "dataset")) == [
        "lr", "amp", "seed", "dataset", "backbone", "loss", "loss_kwargs", "epochs"]
