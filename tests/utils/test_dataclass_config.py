"""Dataclass configs: YAML + overrides, strict keys, type coercion."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Literal

import pytest

from weince.utils.config import (add_config_arguments, apply_overrides, as_config,
                                 config_from_args, config_from_dict, load_config, to_dict)


@dataclass
class Inner:
    a: int = 1
    b: float = 0.5


@dataclass
class Cfg:
    name: str = "x"
    lr: float = 3e-4
    epochs: int = 10
    amp: bool = True
    mode: Literal["adam", "lars"] = "adam"
    seeds: tuple[int, ...] = (0, 1)
    limit: int | None = None
    kw: dict = field(default_factory=dict)
    inner: Inner = field(default_factory=Inner)


def test_unknown_key_names_key_and_valid_keys():
    with pytest.raises(ValueError, match=r"'epoch'.*valid keys: .*epochs"):
        config_from_dict(Cfg, {"epoch": 3})


def test_unknown_nested_key_is_named_with_prefix():
    with pytest.raises(ValueError, match=r"'inner\.c'"):
        config_from_dict(Cfg, {"inner": {"c": 1}})


def test_yaml_and_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    # PyYAML reads 1e-3 as a string: it must still become a float
    p.write_text("lr: 1e-3\nepochs: 5\nseeds: [3, 4, 5]\nkw: {margin: 2}\n")
    cfg = load_config(Cfg, p, ["epochs=7", "amp=false", "kw.kappa=5", "inner.a=9",
                               "limit=100", "mode=lars"])
    assert cfg.lr == pytest.approx(1e-3) and isinstance(cfg.lr, float)
    assert cfg.epochs == 7 and cfg.amp is False and cfg.mode == "lars"
    assert cfg.seeds == (3, 4, 5)
    assert cfg.kw == {"margin": 2, "kappa": 5}
    assert cfg.inner == Inner(a=9, b=0.5)
    assert cfg.limit == 100


def test_bad_values_raise():
    with pytest.raises(ValueError, match="mode"):
        config_from_dict(Cfg, {"mode": "sgd"})
    with pytest.raises(ValueError, match="epochs"):
        config_from_dict(Cfg, {"epochs": "many"})
    with pytest.raises(ValueError, match="key=value"):
        load_config(Cfg, None, ["epochs"])


def test_unknown_override_key_raises():
    with pytest.raises(ValueError, match="'bogus'"):
        load_config(Cfg, None, ["bogus=1"])


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_config(Cfg, tmp_path / "nope.yaml")


def test_round_trip_and_as_config():
    cfg = Cfg(seeds=(7,), kw={"m": 1})
    d = to_dict(cfg)
    assert d["seeds"] == [7] and d["inner"] == {"a": 1, "b": 0.5}
    assert config_from_dict(Cfg, d) == cfg
    assert as_config(Cfg, cfg) is cfg
    assert as_config(Cfg, {"epochs": 2}).epochs == 2
    assert as_config(Cfg, None) == Cfg()


def test_apply_overrides_does_not_mutate():
    base = {"kw": {"a": 1}}
    out = apply_overrides(base, ["kw.b=2"])
    assert base == {"kw": {"a": 1}} and out == {"kw": {"a": 1, "b": 2}}


def test_cli_arguments(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("epochs: 3\n")
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = parser.parse_args(["--config", str(p), "--set", "epochs=4", "--set", "name=y"])
    cfg = config_from_args(Cfg, args)
    assert cfg.epochs == 4 and cfg.name == "y"
