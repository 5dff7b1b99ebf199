"""Values the schema's types let by are refused before any job: numbers that are not finite
or out of range, lists an enabled stage needs left empty, run lengths past their ceiling,
and YAML whose aliases expand past a bound (an alias bomb), each named with its file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from weince.pipeline.config_check import ConfigError, check_config, oversized_key
from weince.utils.config import (MAX_VALUES, YamlSizeError, expanded_size, parse_yaml,
                                 value_children)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SMOKE = REPO / "config" / "smoke.yaml"


def smoke() -> dict:
    return yaml.safe_load(SMOKE.read_text())


def refusal(tmp_path: Path, cfg: dict, name: str = "probe.yaml") -> str:
    src = tmp_path / name
    src.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as err:
        check_config(cfg, SCHEMA, [src])
    return str(err.value)


def bomb_text(levels: int, key: str = "seeds") -> str:
    """``key:`` holding nine aliases of nine aliases ... ``levels`` deep: 9**levels values
    from a few hundred characters."""
    def level(i: int) -> str:
        if i == 0:
            return "&a0 [7, 7, 7, 7, 7, 7, 7, 7, 7]"
        return f"&a{i} [" + ", ".join([level(i - 1)] + [f"*a{i - 1}"] * 8) + "]"
    return f"{key}: {level(levels)}\n"


# ------------------------------------------------------------------ bounded YAML
def test_an_alias_bomb_is_refused_before_it_is_built():
    text = bomb_text(9)        # 9**9 = 387,420,489 values
    assert len(text) < 1000
    t0 = time.perf_counter()
    with pytest.raises(YamlSizeError) as err:
        parse_yaml(text, "config file bomb.yaml")
    assert time.perf_counter() - t0 < 1.0
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("config file bomb.yaml: refused before loading")
    assert f"more than {MAX_VALUES:,} values" in msg


def test_aliases_below_the_bound_load_as_before():
    text = bomb_text(3)        # 9**3 = 729 values: an ordinary document
    assert parse_yaml(text) == yaml.safe_load(text)
    assert parse_yaml("a: &x {b: 1}\nc: *x\n") == {"a": {"b": 1}, "c": {"b": 1}}


def test_a_value_that_holds_itself_and_deep_nesting_are_refused():
    with pytest.raises(YamlSizeError, match="contains itself"):
        parse_yaml("a: &x [1, *x]\n", "self.yaml")
    with pytest.raises(YamlSizeError, match="nests more than"):
        parse_yaml("a: &x 1\nb: " + "[" * 100 + "]" * 100 + "\n", "deep.yaml")


def test_expanded_size_counts_shared_parts_as_often_as_they_are_used():
    leaf = [1, 2, 3]
    assert expanded_size(leaf, value_children) == 4
    assert expanded_size([leaf, leaf], value_children) == 1 + 2 * 4
    assert expanded_size({"a": leaf, "b": leaf}, value_children) == 1 + 2 * (1 + 4)
    x: list = [0] * 9
    for _ in range(9):
        x = [x] * 9          # what Snakemake's YAML load makes of an alias bomb
    assert oversized_key({"vision": {"seeds": x}}).startswith("vision.seeds: it expands")
    assert oversized_key(smoke()) is None


def test_a_bomb_in_a_config_file_names_the_file(tmp_path):
    src = tmp_path / "bomb.yaml"
    src.write_text(SMOKE.read_text().replace("  seeds: [7]\n  pretrain:",
                                             "  " + bomb_text(9).rstrip() + "\n  pretrain:", 1))
    cfg = {"profile": "smoke"}
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        check_config(cfg, SCHEMA, [src])
    assert time.perf_counter() - t0 < 2.0
    assert f"config file {src}: refused before loading" in str(err.value)


def test_a_bomb_given_as_a_value_is_refused_by_its_key():
    x: list = [7] * 9
    for _ in range(8):
        x = [x] * 9
    cfg = smoke()
    cfg["vision"]["seeds"] = x     # as a --config value arrives: shared, never copied
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        check_config(cfg, SCHEMA, [])
    assert time.perf_counter() - t0 < 1.0
    msg = str(err.value)
    assert "vision.seeds: it expands to more than" in msg and "\n" not in msg


def test_a_long_refused_value_is_quoted_short(tmp_path):
    cfg = smoke()
    cfg["vision"]["seeds"] = [[7] * 50] * 100    # 5k values, at the seed ceiling
    msg = refusal(tmp_path, cfg)
    assert len(msg) < 5000, len(msg)   # 20 problems, not 100
    assert "... and" in msg and "items)" in msg


# ------------------------------------------------------------------ finite and in range
@pytest.mark.parametrize("path, value", [
    (("vision", "pretrain", "lr"), float("nan")),
    (("vision", "pretrain", "weight_decay"), float("inf")),
    (("text", "simcse", "tau"), float("nan")),
    (("vision", "knn", "temperature"), float("-inf")),
    (("vision", "grid", "margin"), [0.0, float("nan")]),
])
def test_a_number_that_is_not_finite_is_refused(tmp_path, path, value):
    cfg = smoke()
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    msg = refusal(tmp_path, cfg)
    assert "is not a finite number" in msg and ".".join(path) in msg
    assert f"{tmp_path / 'probe.yaml'}: " in msg


def test_nan_written_in_yaml_is_refused_naming_the_file(tmp_path):
    src = tmp_path / "lr_nan.yaml"
    src.write_text(SMOKE.read_text().replace("    lr: 1.0e-3\n    weight_decay",
                                             "    lr: .nan\n    weight_decay", 1))
    cfg = yaml.safe_load(src.read_text())
    with pytest.raises(ConfigError) as err:
        check_config(cfg, SCHEMA, [src])
    assert f"{src}: vision.pretrain.lr = nan is not a finite number" in str(err.value)


@pytest.mark.parametrize("path, value, expected", [
    (("vision", "pretrain", "lr"), 1.0e6, "vision.pretrain.lr = 1000000.0 must be <= 10"),
    (("vision", "pretrain", "weight_decay"), 3.0, "weight_decay = 3.0 must be <= 1"),
    (("vision", "pretrain", "tau"), 50.0, "vision.pretrain.tau = 50.0 must be <= 10"),
    (("vision", "linear", "val_frac"), 1.0, "vision.linear.val_frac = 1.0 must be < 1"),
    (("text", "simcse", "lr"), 20, "text.simcse.lr = 20 must be <= 10"),
])
def test_numbers_out_of_range_are_refused(tmp_path, path, value, expected):
    cfg = smoke()
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    assert expected in refusal(tmp_path, cfg)


# ------------------------------------------------------------------ lists and run lengths
def test_an_enabled_stage_with_an_empty_list_is_refused(tmp_path):
    cfg = smoke()
    cfg["vision"]["seeds"] = []
    cfg["ablations"]["enabled"] = False
    msg = refusal(tmp_path, cfg)
    assert "vision.seeds is empty while vision.enabled is true" in msg
    assert "set vision.enabled: false" in msg
    cfg = smoke()
    cfg["text"]["models"] = []
    assert "text.models is empty while text.enabled is true" in refusal(tmp_path, cfg)


def test_a_stage_switched_off_may_leave_its_lists_empty():
    cfg = smoke()
    cfg["vision"]["seeds"] = []
    cfg["vision"]["enabled"] = False
    cfg["text"].update(models=[], enabled=False)
    check_config(cfg, SCHEMA, fill_defaults=False)
    bare = {"profile": "x", "text": {"models": ["minilm"], "arms": ["infonce"], "seeds": [7]}}
    check_config(bare, SCHEMA)   # a text-only profile: the vision block left at its defaults


@pytest.mark.parametrize("path", [("vision", "linear", "seeds"), ("vision", "grid", "seeds"),
                                  ("timing", "config", "losses"), ("ablations", "seeds")])
def test_other_lists_that_must_hold_something(tmp_path, path):
    cfg = smoke()
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = []
    assert f"{'.'.join(path)} is empty" in refusal(tmp_path, cfg)


def test_a_run_past_its_ceiling_is_refused_naming_the_cost(tmp_path, monkeypatch):
    monkeypatch.delenv("WEINCE_LONG_RUNS", raising=False)
    cfg = smoke()
    cfg["vision"]["pretrain"]["epochs"] = 1_000_000_000
    msg = refusal(tmp_path, cfg)
    # smoke: 512 images in batches of 128 = 4 steps per epoch; 3 arms x 1 seed
    assert ("vision.pretrain.epochs = 1,000,000,000 is past the ceiling of 1,000 (the paper "
            "pretrains 100 epochs): about 4.00e+09 optimiser steps per encoder, 3 encoder(s)"
            in msg), msg
    assert "WEINCE_LONG_RUNS=1" in msg
    cfg = smoke()
    cfg["vision"]["pretrain"]["epochs"] = 1000      # at the ceiling: allowed
    check_config(cfg, SCHEMA)


def test_the_ceiling_can_be_waived_with_a_warning(monkeypatch, capsys):
    monkeypatch.setenv("WEINCE_LONG_RUNS", "1")
    cfg = smoke()
    cfg["text"]["simcse"]["epochs"] = 500
    check_config(cfg, SCHEMA)
    err = capsys.readouterr().err
    assert "warning: text.simcse.epochs = 500 is past the ceiling of 100" in err


@pytest.mark.parametrize("where, size, says", [
    (("vision", "seeds"), 10_000, "vision.seeds lists 10,000 seeds, past the ceiling of 100"),
    (("vision", "grid", "seeds"), 101, "vision.grid.seeds lists 101 seeds"),
    (("text", "seeds"), 101, "text.seeds lists 101 seeds"),
    (("vision", "knn", "split_seeds"), 101, "vision.knn.split_seeds lists 101 seeds"),
    (("vision", "linear", "seeds_by_arm", "infonce"), 101,
     "vision.linear.seeds_by_arm.infonce lists 101 seeds"),
])
def test_a_list_of_seeds_past_its_ceiling_is_refused_naming_count_and_key(
        tmp_path, monkeypatch, where, size, says):
    monkeypatch.delenv("WEINCE_LONG_RUNS", raising=False)
    cfg = smoke()
    node = cfg
    for k in where[:-1]:
        node = node.setdefault(k, {})
    node[where[-1]] = list(range(size))
    msg = refusal(tmp_path, cfg)
    assert f"probe.yaml: {says}" in msg and "WEINCE_LONG_RUNS=1" in msg, msg
    node[where[-1]] = list(range(100))          # at the ceiling: allowed
    check_config(cfg, SCHEMA)


def test_a_grid_or_a_settings_product_past_its_ceiling_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("WEINCE_LONG_RUNS", raising=False)
    cfg = smoke()
    cfg["vision"]["grid"].update(margin=list(range(10)), kappa_rho=list(range(10)),
                                 kappa_aic=list(range(6)))
    msg = refusal(tmp_path, cfg)
    assert ("vision.grid has 600 points (10 x 10 x 6: vision.grid.margin, kappa_rho, "
            "kappa_aic), past the ceiling of 500" in msg), msg
    cfg["vision"]["grid"]["kappa_aic"] = list(range(5))          # 500 points: allowed
    check_config(cfg, SCHEMA)
    cfg = smoke()
    cfg["vision"]["datasets"] = ["digits"] * 101
    msg = refusal(tmp_path, cfg)
    assert ("vision.datasets x vision.backbones = 101 x 1 = 101 settings, past the ceiling "
            "of 100" in msg), msg


def test_a_size_ceiling_can_be_waived_with_a_warning(monkeypatch, capsys):
    monkeypatch.setenv("WEINCE_LONG_RUNS", "1")
    cfg = smoke()
    cfg["vision"]["seeds"] = list(range(101))
    check_config(cfg, SCHEMA)
    assert "warning: vision.seeds lists 101 seeds" in capsys.readouterr().err


# ------------------------------------------------------------------ through Snakemake
def _probe_files(tmp_path: Path) -> dict[str, Path]:
    text = SMOKE.read_text()
    edits = {
        "bomb": text.replace("  seeds: [7]\n  pretrain:",
                             "  " + bomb_text(9).rstrip() + "\n  pretrain:", 1),
        "lr_nan": text.replace("    lr: 1.0e-3\n    weight_decay",
                               "    lr: .nan\n    weight_decay", 1),
        "epochs": text.replace("    epochs: 1\n    batch_size: 128",
                               "    epochs: 1000000000\n    batch_size: 128", 1),
        "seeds": text.replace("  seeds: [7]\n  pretrain:", "  seeds: []\n  pretrain:", 1),
        "many_seeds": text.replace("  seeds: [7]\n  pretrain:",
                                   f"  seeds: {list(range(10_000))}\n  pretrain:", 1),
    }
    out = {}
    for name, t in edits.items():
        assert t != text, name
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(t)
    return out


EXPECTED = {"bomb": "refused before loading: it expands to more than",
            "lr_nan": "vision.pretrain.lr = nan is not a finite number",
            "epochs": "vision.pretrain.epochs = 1,000,000,000 is past the ceiling",
            "seeds": "vision.seeds is empty while vision.enabled is true",
            "many_seeds": "vision.seeds lists 10,000 seeds, past the ceiling of 100"}


@pytest.mark.slow
def test_the_dry_run_refuses_each_probe_in_its_own_words(tmp_path):
    """The hostile values of the review, each in a copy of config/smoke.yaml: `snakemake
    -n` stops before planning, with the reason (no traceback), in seconds."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("WEINCE_LONG_RUNS", None)
    for name, path in _probe_files(tmp_path).items():
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1",
                            "--configfile", str(path)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
        out = r.stdout + r.stderr
        assert r.returncode == 1, (name, out[-2000:])
        assert EXPECTED[name] in out and f"{path}" in out, (name, out[-2000:])
        assert "Traceback" not in out and "Job stats" not in out, (name, out[-2000:])
        assert time.perf_counter() - t0 < 60, name


def test_a_disk_quota_that_is_not_a_size_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("WEINCE_DISK_QUOTA", raising=False)
    cfg = smoke()
    cfg["disk"] = {"quota": "lots"}
    msg = refusal(tmp_path, cfg)
    assert "probe.yaml: disk.quota = 'lots' is not a size; write one such as 2TB" in msg, msg
    cfg["disk"] = {"quota": "50GB"}
    check_config(cfg, SCHEMA)
    monkeypatch.setenv("WEINCE_DISK_QUOTA", "two terabytes")
    assert ("the environment: WEINCE_DISK_QUOTA = 'two terabytes' is not a size"
            in refusal(tmp_path, cfg))
