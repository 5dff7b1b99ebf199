"""The pretraining settings typed once: SimCLRConfig is the schema's ``$defs/pretrain``
(generated), the Profile's ``vision.pretrain`` and every run's config; the config is checked
once per process."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import weince.pipeline.profile as profile_mod
from weince.pipeline import schema as schema_mod
from weince.pipeline.claims import validate_with_defaults
from weince.pipeline.config_check import ConfigError, check_config
from weince.pipeline.profile import CONFIG_SCHEMA, Profile
from weince.pipeline.schema import expand_generated, fill_defaults, read_schema
from weince.pipeline.stages import pretrain_config, result_settings, sts_settings
from weince.eval.config import (FeaturesConfig, KNNConfig, LinearProbeConfig, ScoresConfig,
                                STSConfig)
from weince.evt.config import LinkConfig, PotConfig
from weince.norms.config import NormsConfig
from weince.pipeline.protocol import probe_config, probe_kwargs
from weince.train.config import RUNTIME_KEYS, SimCLRConfig, SimCSEConfig, TimingConfig
from weince.utils.settings import json_schema, setting

REPO = Path(__file__).resolve().parents[2]
PROFILES = ["config.yaml", "smoke.yaml", "paper.yaml", "rehearsal.yaml"]


def _load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


def test_the_pretraining_block_is_generated_from_the_dataclass():
    raw = yaml.safe_load(CONFIG_SCHEMA.read_text())["$defs"]["pretrain"]
    assert "properties" not in raw and raw["generated"] == "SimCLRConfig"   # nothing by hand
    block = read_schema(CONFIG_SCHEMA)["$defs"]["pretrain"]
    assert block["properties"] == json_schema(SimCLRConfig)["properties"]
    assert set(block["properties"]) == {f.name for f in dataclasses.fields(SimCLRConfig)}
    assert block["additionalProperties"] is False and "description" in block
    # the names come from the schema's one list of each
    assert block["properties"]["dataset"] == {"$ref": "#/$defs/dataset"}
    assert block["properties"]["loss"] == {"$ref": "#/$defs/loss"}


def test_the_simcse_block_is_generated_from_its_dataclass():
    raw = yaml.safe_load(CONFIG_SCHEMA.read_text())["properties"]["text"]["properties"]
    assert set(raw["simcse"]) == {"generated", "default", "description"}
    block = read_schema(CONFIG_SCHEMA)["properties"]["text"]["properties"]["simcse"]
    assert block["properties"] == json_schema(SimCSEConfig)["properties"]
    assert block["default"] == {} and block["additionalProperties"] is False


def test_the_profile_s_simcse_settings_are_typed():
    cfg = _load("smoke.yaml")
    cfg["text"]["simcse"]["lr"] = 1
    prof = Profile.of(cfg)
    s = prof.text.simcse
    assert isinstance(s, SimCSEConfig) and s.lr == 1.0 and isinstance(s.lr, float)
    assert s.device == prof.device and s.offline == prof.offline        # inherited
    assert s.eval_every == cfg["text"]["simcse"]["eval_every"]
    assert s.max_length == SimCSEConfig().max_length                    # the default


def test_the_timing_block_is_generated_and_typed():
    raw = yaml.safe_load(CONFIG_SCHEMA.read_text())["properties"]["timing"]["properties"]
    assert set(raw["config"]) == {"generated", "default", "description"}
    block = read_schema(CONFIG_SCHEMA)["properties"]["timing"]["properties"]["config"]
    assert block["properties"] == json_schema(TimingConfig)["properties"]
    assert block["properties"]["losses"] == {"type": "array", "items": {"$ref": "#/$defs/loss"}}
    assert block["properties"]["sizes"]["items"] == {"type": "integer", "minimum": 2}
    cfg = _load("smoke.yaml")
    cfg["timing"]["config"]["compile"] = True
    tc = Profile.of(cfg).timing.config
    assert isinstance(tc, TimingConfig) and tc.compile == "compiled"   # read as its mode
    assert tc.device == Profile.of(cfg).device and tc.n_boot == TimingConfig().n_boot


def _typed_blocks(prof):
    v = prof.vision
    return {FeaturesConfig: v.features, LinearProbeConfig: v.linear, KNNConfig: v.knn,
            ScoresConfig: v.evt.collect, PotConfig: v.evt.pot, LinkConfig: v.evt.link,
            NormsConfig: prof.norms.analysis, STSConfig: prof.text.sts}


@pytest.mark.parametrize("path, cls", [(("vision", "features"), FeaturesConfig),
                                       (("vision", "linear"), LinearProbeConfig),
                                       (("vision", "knn"), KNNConfig),
                                       (("vision", "evt", "collect"), ScoresConfig),
                                       (("vision", "evt", "pot"), PotConfig),
                                       (("vision", "evt", "link"), LinkConfig),
                                       (("norms", "analysis"), NormsConfig),
                                       (("text", "sts"), STSConfig)])
def test_the_evaluation_blocks_are_generated_and_typed(path, cls):
    raw, block = yaml.safe_load(CONFIG_SCHEMA.read_text()), read_schema(CONFIG_SCHEMA)
    for key in path:
        raw, block = raw["properties"][key], block["properties"][key]
    assert raw["generated"] == cls.__name__
    # a workflow key (vision.linear.seeds_by_arm) sits beside the generated fields
    assert set(raw.get("properties", {})) == ({"seeds_by_arm"} if cls is LinearProbeConfig
                                              else set())
    assert block["properties"] == {**json_schema(cls)["properties"], **raw.get("properties", {})}
    cfg = _load("paper.yaml")
    prof = Profile.of(cfg)
    typed = _typed_blocks(prof)[cls]
    assert isinstance(typed, cls)
    assert getattr(typed, "device", prof.device) == prof.device   # the fits have none


@pytest.mark.parametrize("fn, cls, required", [
    ("weince.eval.features.extract_features", FeaturesConfig, set()),
    ("weince.eval.scores.collect_score_file", ScoresConfig, set()),
    ("weince.evt.fits.run_pot", PotConfig, set()),
    ("weince.evt.fits.run_link", LinkConfig, set()),
    ("weince.eval.sts.run_sts", STSConfig, {"data"})])
def test_the_library_s_defaults_are_the_dataclass_s(fn, cls, required):
    """A keyword block's defaults are written once, in its dataclass: the library function's
    keyword defaults are its fields' (``run_sts`` takes ``data`` as a required argument; the
    workflow's default for it is the dataclass's)."""
    module, name = fn.rsplit(".", 1)
    params = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    for f in dataclasses.fields(cls):
        if f.name in required:
            assert params[f.name].default is inspect.Parameter.empty, f.name
        else:
            assert params[f.name].default == f.default, f.name


def test_an_sts_job_always_lists_its_data():
    """``text.sts.data`` is a required argument of run_sts: a block that leaves it out lists
    the default last (where the hand-written schema's default put it), one that sets it
    lists it where it is written."""
    cfg = _load("smoke.yaml")
    cfg["text"]["sts"] = {"n_synthetic": 10}
    prof = Profile.of(cfg)
    assert prof.text.sts_given == {"n_synthetic": 10} and prof.text.sts.data == "synthetic"
    assert list(sts_settings(prof).items()) == [("n_synthetic", 10), ("data", "synthetic")]
    cfg["text"]["sts"] = {"data": "folder", "n_synthetic": 10, "device": "cpu"}
    assert list(sts_settings(Profile.of(cfg)).items()) == [("data", "folder"),
                                                            ("n_synthetic", 10)]


def test_seeds_by_arm_replaces_the_probe_seeds_of_its_arm():
    prof = Profile.of(_load("paper.yaml"))
    assert prof.vision.linear_seeds_by_arm == {"infonce": (1, 2, 3, 4, 5)}
    assert "seeds_by_arm" not in prof.vision.linear_given
    assert probe_config(prof, "infonce").seeds == (1, 2, 3, 4, 5)
    assert probe_config(prof, "weince@m2_kr10_ka1").seeds == prof.vision.linear.seeds == (1,)
    assert probe_kwargs(prof, "infonce")["seeds"] == [1, 2, 3, 4, 5]   # as the config writes


def test_a_workflow_key_may_not_shadow_a_generated_field():
    with pytest.raises(ValueError, match=r"properties \['k'\] are fields of KNNConfig"):
        expand_generated({"generated": "KNNConfig", "properties": {"k": {}}}, "knn")


def test_an_unknown_generated_name_is_one_line():
    with pytest.raises(ValueError, match=r"x\.y: generated: 'Nope' is not a settings"):
        expand_generated({"y": {"generated": "Nope"}}, "x")


def test_a_new_pretraining_key_needs_no_schema_edit(tmp_path, monkeypatch):
    """A key added to the dataclass is a key of the config, with its type and range, and
    a bad value is blamed on the file and the key."""

    @dataclass
    class WithNewKey(SimCLRConfig):
        new_key: int = setting(3, ge=1)

    monkeypatch.setitem(schema_mod.GENERATED, "SimCLRConfig", WithNewKey)
    schema = read_schema(CONFIG_SCHEMA)
    cfg = _load("smoke.yaml")
    cfg["vision"]["pretrain"]["new_key"] = 5
    check_config(copy.deepcopy(cfg), schema)
    cfg["vision"]["pretrain"]["new_key"] = 0
    src = tmp_path / "bad.yaml"
    src.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=rf"{src}: vision.pretrain.new_key = 0 must be >= 1"):
        check_config(cfg, schema, [src])


def test_the_profile_holds_the_typed_settings():
    cfg = _load("smoke.yaml")
    cfg["vision"]["pretrain_by_dataset"] = {"stl10": {"train_split": "train+unlabeled",
                                                      "lr": 1}}
    cfg["vision"]["pretrain"].pop("device", None)
    prof = Profile.of(cfg)
    pre = prof.vision.pretrain
    assert isinstance(pre, SimCLRConfig)
    assert pre.epochs == cfg["vision"]["pretrain"]["epochs"]
    assert pre.device == prof.device and pre.data_root == prof.data_root   # inherited
    assert pre.proj_dim == 32 and pre.momentum == SimCLRConfig().momentum  # set; the default
    stl = prof.vision.pretrain_for("stl10")
    assert stl.train_split == "train+unlabeled" and stl.lr == 1.0 and isinstance(stl.lr, float)
    assert stl.epochs == pre.epochs and prof.vision.pretrain_for("cifar10") is pre
    run = pretrain_config(prof, "stl10", "resnet18", "weince", 7)
    assert (run.dataset, run.backbone, run.loss, run.seed) == ("stl10", "resnet18", "weince", 7)
    assert run.train_split == "train+unlabeled" and pre.dataset == SimCLRConfig().dataset
    # the rerun trigger: every field of the run's config but the run-time ones
    params = result_settings(run)
    assert set(params) == {f.name for f in dataclasses.fields(SimCLRConfig)} - RUNTIME_KEYS \
        - {"device"}


def test_a_block_may_set_what_it_inherits():
    cfg = _load("smoke.yaml")
    cfg["vision"]["pretrain"]["device"] = "cpu"
    cfg["device"] = "auto"
    assert Profile.of(cfg).vision.pretrain.device == "cpu"


@pytest.mark.parametrize("name", PROFILES)
def test_filling_defaults_is_what_the_validating_fill_writes(name):
    cfg = _load(name)
    a, b = copy.deepcopy(cfg), copy.deepcopy(cfg)
    schema = read_schema(CONFIG_SCHEMA)
    validate_with_defaults(a, schema, name)
    fill_defaults(b, schema)
    assert a == b


def test_the_snakefile_s_process_checks_the_config_once(monkeypatch):
    """check_config validates (and fills the defaults without a second pass); the profile
    built from the checked config validates nothing again."""
    cfg = _load("smoke.yaml")
    check_config(cfg, CONFIG_SCHEMA)

    def refuse(*_a, **_k):
        raise AssertionError("validated twice")

    monkeypatch.setattr(profile_mod, "validate_with_defaults", refuse)
    prof = Profile.of(cfg, checked=True)
    assert prof.vision.pretrain.epochs == cfg["vision"]["pretrain"]["epochs"]
    with pytest.raises(AssertionError, match="validated twice"):
        Profile.of(cfg)    # a job's process: the one validation is the profile's
