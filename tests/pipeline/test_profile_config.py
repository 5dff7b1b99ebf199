"""One profile = one config file, checked by one schema before anything runs:
unknown keys at every level and bad types/ranges fail ``snakemake -n`` with the
file, the key's path and the valid choices; the schema's stage blocks list exactly the
keys the library accepts."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from weince.eval.features import extract_features
from weince.eval.knn import knn_eval
from weince.eval.linear import linear_probe
from weince.eval.scores import collect_score_file
from weince.eval.sts import run_sts
from weince.evt.fits import run_link, run_pot
from weince.norms.config import NormsConfig
from weince.pipeline.schema import read_schema
from weince.pipeline.claims import validate_with_defaults
from weince.pipeline.config_check import (ConfigError, check_config, inline_refs,
                                          set_run_environment)
from weince.pipeline.profile import Profile
from weince.timing import TimingConfig
from weince.train.simclr import SimCLRConfig
from weince.train.simcse import SimCSEConfig

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
PROFILES = ["config.yaml", "smoke.yaml", "paper.yaml"]


def load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.mark.parametrize("name", PROFILES)
def test_shipped_profiles_are_valid(name):
    check_config(load(name), SCHEMA, [f"config/{name}"])


def test_the_one_check_fills_the_schema_s_defaults():
    """The Snakefile checks its config once: the check also fills what the config leaves
    out with the schema's defaults (as Snakemake's validate(set_default=True) did)."""
    cfg = load("smoke.yaml")
    del cfg["download"], cfg["data_root"]
    check_config(cfg, SCHEMA, ["config/smoke.yaml"])
    assert cfg["download"] is False and cfg["data_root"] == "data"
    bare = {"profile": "x"}
    check_config(bare, SCHEMA, fill_defaults=False)
    assert bare == {"profile": "x"}


def _write(tmp_path, cfg, name="bad.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.mark.parametrize("path, value, expected", [
    (("vision", "pretrain", "epochs"), "five",
     "vision.pretrain.epochs = 'five' must be of type integer"),
    (("vision", "pretrain", "tau"), 0, "vision.pretrain.tau = 0 must be > 0"),
    (("vision", "pretrain", "epochs"), -1, "vision.pretrain.epochs = -1 must be >= 1"),
    (("text", "simcse", "lr"), -0.1, "text.simcse.lr = -0.1 must be > 0"),
    (("vision", "backbones"), ["resnet181"], "vision.backbones.0 = 'resnet181' is not a "
                                             "valid choice; valid: ['resnet18'"),
    (("ablations", "groups"), ["gates"], "ablations.groups"),
    (("download",), "false", "download = 'false' must be of type boolean (on the "
                             "command line: --config download=False)"),
    (("norms", "analysis", "pooling"), "max", "norms.analysis.pooling = 'max' is not a valid "
                                              "choice; valid: ['cls', 'mean']"),
])
def test_bad_values_name_the_file_and_the_key(tmp_path, path, value, expected):
    cfg = load("smoke.yaml")
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    src = _write(tmp_path, cfg)
    with pytest.raises(ConfigError) as e:
        check_config(cfg, SCHEMA, [REPO / "config" / "config.yaml", src])
    assert expected in str(e.value) and f"{src}: " in str(e.value)


@pytest.mark.parametrize("path, typo, right", [
    ((), "visoin", "vision"),
    (("vision", "pretrain"), "epochz", "epochs"),
    (("vision", "grid"), "margins", "margin"),
    (("norms", "analysis"), "n_probe", "n_probes"),
    (("resources", "default"), "mem", "mem_mb"),
    (("text",), "simcs", "simcse"),
])
def test_unknown_keys_are_rejected_at_every_level(tmp_path, path, typo, right):
    cfg = load("smoke.yaml")
    node = cfg
    for k in path:
        node = node[k]
    if right in node:
        node[typo] = node.pop(right)
    else:
        node[typo] = 1
    with pytest.raises(ConfigError) as e:
        check_config(cfg, SCHEMA, [_write(tmp_path, cfg)])
    msg = str(e.value)
    where = ".".join(path) or "the top level"
    assert f"unknown key {typo!r} at {where}; did you mean {right!r}?" in msg
    assert "valid keys:" in msg and right in msg


def test_dry_run_stops_on_a_typo_before_any_job(tmp_path):
    """The issue's probe: `visoin:` in a copy of config/smoke.yaml fails `snakemake -n`
    (it used to plan 107 jobs with the default profile's vision block)."""
    text = (REPO / "config" / "smoke.yaml").read_text()
    assert "\nvision:\n" in text
    bad = tmp_path / "smoke_typo.yaml"
    bad.write_text(text.replace("\nvision:\n", "\nvisoin:\n"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert f"{bad}: unknown key 'visoin' at the top level; did you mean 'vision'?" in out
    assert "Job stats" not in out


def test_a_bad_value_is_blamed_on_the_file_that_sets_it(tmp_path):
    """Snakemake lists a ``--configfile`` first in ``configfiles`` and
    again in ``overwrite_configfiles``; a bad value the user's file sets, at a key
    config/config.yaml sets too, was reported as config/config.yaml's."""
    cfg = load("smoke.yaml")
    cfg["vision"]["pretrain"]["epochs"] = "five"
    src = _write(tmp_path, cfg)
    default = REPO / "config" / "config.yaml"
    assert "epochs" in load("config.yaml")["vision"]["pretrain"]
    with pytest.raises(ConfigError) as e:
        check_config(cfg, SCHEMA, [src, default, src])  # the order Snakemake gives
    msg = str(e.value)
    assert f"{src}: vision.pretrain.epochs = 'five' must be of type integer" in msg, msg
    assert f"{default}: vision.pretrain.epochs" not in msg
    assert f"invalid workflow config ({default}, {src})" in msg
    # the value decides between two files that both set the key
    good = load("smoke.yaml")
    assert good["vision"]["pretrain"]["epochs"] != "five"
    later = _write(tmp_path, good, "later.yaml")
    with pytest.raises(ConfigError) as e:
        check_config(cfg, SCHEMA, [src, later])
    assert f"{src}: vision.pretrain.epochs = 'five'" in str(e.value)


def test_dry_run_names_the_configfile_with_the_bad_value(tmp_path):
    text = (REPO / "config" / "smoke.yaml").read_text()
    cfg = yaml.safe_load(text)
    cfg["vision"]["pretrain"]["epochs"] = "five"
    bad = _write(tmp_path, cfg, "smoke_bad.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Job stats" not in out
    assert f"{bad}: vision.pretrain.epochs = 'five' must be of type integer" in out, out
    assert "config/config.yaml: vision.pretrain.epochs" not in out


# ------------------------------------------------------------------ schema vs library
def _schema():
    return inline_refs(read_schema(SCHEMA))


def _block(*path):
    node = _schema()
    for k in path:
        node = node["properties"][k]
    return node


def _dataclass_keys(cls):
    return {f.name for f in dataclasses.fields(cls)}


def _kwargs(fn, skip):
    return {n for n, p in inspect.signature(fn).parameters.items()
            if n not in skip and p.kind != p.VAR_KEYWORD}


def test_stage_blocks_list_exactly_the_library_keys():
    expect = {
        ("vision", "pretrain"): _dataclass_keys(SimCLRConfig),
        ("text", "simcse"): _dataclass_keys(SimCSEConfig),
        ("timing", "config"): _dataclass_keys(TimingConfig),
        ("norms", "analysis"): _dataclass_keys(NormsConfig),
        # plus the workflow's per-arm probe seeds (weince.pipeline.protocol.probe_config)
        ("vision", "linear"): _kwargs(linear_probe, {"features"}) | {"seeds_by_arm"},
        ("vision", "knn"): _kwargs(knn_eval, {"features"}),
        ("vision", "features"): _kwargs(extract_features, {"encoder_path", "out_path"}),
        ("text", "sts"): _kwargs(run_sts, {"model", "out"}),
        ("vision", "evt", "collect"): _kwargs(collect_score_file, {"encoder", "out"}),
        ("vision", "evt", "pot"): _kwargs(run_pot, {"scores_path", "out_json"}),
        ("vision", "evt", "link"): _kwargs(run_link, {"scores_path", "out_json"}),
    }
    for path, keys in expect.items():
        block = _block(*path)
        assert block.get("additionalProperties") is False, path
        assert set(block["properties"]) == keys, (path, set(block["properties"]) ^ keys)


def test_every_object_of_the_schema_is_closed():
    """Every object with named keys says what else it accepts: nothing (``false``) or, for
    the maps keyed by names (arm, rule, model, data set), values of a given form. Free
    keyword maps (``loss_kwargs``, ``aug_kwargs``) are checked by the constructors."""
    def walk(node, where):
        if not isinstance(node, dict):
            return
        if "properties" in node:
            assert node.get("additionalProperties") is False, where
        for k, v in (node.get("properties") or {}).items():
            walk(v, f"{where}.{k}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{where}.*")
    walk(_schema(), "config")


def test_validation_fills_defaults_of_omitted_blocks():
    cfg = {"profile": "x"}
    validate_with_defaults(cfg, _schema(), "config")
    assert cfg["ablations"]["groups"] == [] and cfg["norms"]["vision"]["enabled"] is True
    assert copy.deepcopy(cfg)["vision"]["grid"]["metric"] == "val_acc"


def test_an_offline_profile_sets_hf_hub_offline_for_every_job(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    set_run_environment(Profile.of({"profile": "t", "offline": False}))
    assert "HF_HUB_OFFLINE" not in os.environ
    set_run_environment(Profile.of({"profile": "t", "offline": True}))
    assert os.environ["HF_HUB_OFFLINE"] == "1"
