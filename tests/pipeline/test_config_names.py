"""Every key of the profile schema that takes names (arms, losses, data sets, backbones,
rules, ...) refuses a name outside its registry, with the valid choices: a typo in
`vision.grid.arms` used to drop the grid jobs silently. And every error names where the
refused value came from: a config file, or the command line (`--config`), whose nested
values Snakemake hands over as strings (typed here as YAML, like the top-level ones)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from weince.data.vision import DATASETS
from weince.losses import LOSSES
from weince.models.vision import BACKBONES
from weince.pipeline.schema import read_schema
from weince.pipeline.arms import ARMS
from weince.pipeline.config_check import (COMMAND_LINE, ConfigError, check_config, config_errors,
                                          inline_refs, name_registry, retype_overrides,
                                          rule_names)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
BOGUS = "bogus_name"
# keys that take an open set of names, and why no registry can hold them
OPEN = {
    "text.models": "a Hugging Face model name or a local folder",
    "norms.text.models": "a Hugging Face model name or a local folder",
    "text.model_paths": "the map that defines model names",
}


def _schema():
    return inline_refs(read_schema(SCHEMA))


def _is_name(node) -> bool:
    """A schema of one name: a string, or an enum of strings."""
    if not isinstance(node, dict):
        return False
    if "enum" in node:
        return any(isinstance(x, str) for x in node["enum"])
    t = node.get("type")
    return t == "string" or (isinstance(t, list) and "string" in t)


def name_slots(node, path=()):
    """(path, form) of every key of the schema that takes names: a list of names
    ("list"), a list of [dataset, backbone] pairs ("pairs"), a map keyed by names ("map")."""
    if not isinstance(node, dict):
        return
    for branch in node.get("oneOf", []):
        yield from name_slots(branch, path)
    items = node.get("items")
    if isinstance(items, dict) and _is_name(items):
        yield path, "list"
    if (isinstance(items, dict) and "prefixItems" in items) or (
            isinstance(items, dict) and isinstance(items.get("items"), dict)
            and _is_name(items["items"])):
        yield path, "pairs"
    if isinstance(node.get("additionalProperties"), dict):
        yield path, "map"
    for k, sub in (node.get("properties") or {}).items():
        yield from name_slots(sub, path + (k,))


def _value_for(node):
    t = node.get("type") if isinstance(node, dict) else None
    return {"object": {}, "string": "x", "array": [], "number": 1.0, "integer": 1}.get(t, {})


def _node(path):
    node = _schema()
    for k in path:
        node = node["properties"][k]
    return node


def _map_values(node):
    """The schema of a map's values: its own ``additionalProperties``, or that of the
    ``oneOf`` branch that is a map (``node.jobs_per_gpu``: a number or a map)."""
    if isinstance(node.get("additionalProperties"), dict):
        return node["additionalProperties"]
    return next(b["additionalProperties"] for b in node.get("oneOf", [])
                if isinstance(b, dict) and isinstance(b.get("additionalProperties"), dict))


SLOTS = sorted(set(name_slots(_schema())))


def test_the_walk_finds_the_keys_of_names():
    paths = {".".join(p) for p, _ in SLOTS}
    for key in ["vision.arms", "vision.grid.arms", "vision.evt.arms", "vision.datasets",
                "vision.backbones", "vision.pairs", "vision.losses", "text.arms",
                "timing.config.losses", "norms.vision.arms", "ablations.groups",
                "ablations.pairs", "resources", "vision.linear.seeds_by_arm"]:
        assert key in paths, key
    assert set(OPEN) <= paths   # an exemption names a key the schema has


@pytest.mark.parametrize("path, form", SLOTS, ids=[".".join(p) for p, _ in SLOTS])
def test_every_key_of_names_refuses_an_unknown_name(path, form):
    dotted = ".".join(path)
    if dotted in OPEN:
        pytest.skip(f"open set: {OPEN[dotted]}")
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    node = cfg
    for k in path[:-1]:
        node = node.setdefault(k, {})
    if form == "list":
        node[path[-1]] = [BOGUS]
    elif form == "pairs":
        node[path[-1]] = [[BOGUS, BOGUS]]
    else:
        node[path[-1]] = {BOGUS: _value_for(_map_values(_node(path)))}
    problems = config_errors(cfg, _schema(), workflow_dir=REPO / "workflow")
    hits = [p for p in problems if BOGUS in p and dotted in p]
    assert hits, (dotted, problems)
    assert all("valid" in p for p in hits), hits


@pytest.mark.parametrize("key", ["grid", "evt"])
def test_a_vision_arm_typo_names_the_profiles_arms(tmp_path, key):
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["vision"][key]["arms"] = ["weinec"]
    src = tmp_path / "typo.yaml"
    src.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as e:
        check_config(cfg, SCHEMA, [src])
    assert (f"{src}: vision.{key}.arms.0 = 'weinec' is not a valid choice; valid (the "
            f"profile's vision.arms): {cfg['vision']['arms']}") in str(e.value)


def test_schema_name_lists_equal_the_registries():
    """The lists of names the schema spells out, each once in ``$defs``, are the library's
    registries, name for name; the arms are checked against the arm registry itself."""
    defs = read_schema(SCHEMA)["$defs"]
    assert set(defs["dataset"]["enum"]) == set(DATASETS)
    assert set(defs["backbone"]["enum"]) == set(BACKBONES)
    assert set(defs["loss"]["enum"]) == set(LOSSES)
    assert defs["arm"]["names"] == "arms" and "enum" not in defs["arm"]
    v = _schema()["properties"]["vision"]["properties"]
    assert v["pretrain"]["properties"]["loss"]["enum"] == defs["loss"]["enum"]
    assert set(_schema()["properties"]["text"]["properties"]["arms"]["items"]["enum"]) \
        == set(LOSSES)
    assert set(LOSSES) <= set(name_registry("arms", {})) == set(ARMS)
    assert {"pretrain", "simcse", "linear", "default"} <= set(
        name_registry("rules", {}, REPO / "workflow"))
    assert "forecast" in rule_names(REPO / "workflow")   # a rule inside an `if` block


def _enums(node, where="config"):
    """(where, enum) of every ``enum`` of the schema as written."""
    if isinstance(node, dict):
        if "enum" in node:
            yield where, tuple(map(str, node["enum"]))
        for k, v in node.items():
            yield from _enums(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _enums(v, f"{where}.{i}")


def test_no_list_of_names_is_written_twice():
    """Each enum once (a set of names shared by several keys is a ``$defs`` entry), and
    vision.pretrain and every vision.pretrain_by_dataset entry are one definition."""
    seen: dict[frozenset, str] = {}
    for where, enum in _enums(read_schema(SCHEMA)):
        key = frozenset(enum) - {"None"}
        assert key not in seen, f"the same names at {seen[key]} and {where}; use a $defs entry"
        seen[key] = where
    v = read_schema(SCHEMA)["properties"]["vision"]["properties"]
    assert v["pretrain"]["$ref"] == v["pretrain_by_dataset"]["additionalProperties"]["$ref"] \
        == "#/$defs/pretrain"


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_every_registered_arm_is_a_valid_vision_arm(arm):
    """vision.arms takes every arm of weince.pipeline.arms (``dcl`` once failed on a
    narrower enum) and nothing else."""
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["vision"]["arms"] += [arm] if arm not in cfg["vision"]["arms"] else []
    assert config_errors(cfg, read_schema(SCHEMA),
                         workflow_dir=REPO / "workflow") == []


def test_a_command_line_value_is_blamed_on_the_command_line(tmp_path):
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    src = tmp_path / "smoke.yaml"
    src.write_text(yaml.safe_dump(cfg))
    cfg["threads"] = -1
    with pytest.raises(ConfigError) as e:
        check_config(cfg, SCHEMA, [src], command_line={"threads": -1})
    msg = str(e.value)
    assert f"{COMMAND_LINE}: threads = -1 must be >= 1" in msg
    assert f"{src}: threads" not in msg


def test_an_overlay_file_is_blamed_for_its_own_value(tmp_path):
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    base = tmp_path / "smoke.yaml"
    base.write_text(yaml.safe_dump(cfg))
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("vision:\n  pretrain:\n    epochs: 0\n")
    cfg["vision"]["pretrain"]["epochs"] = 0
    with pytest.raises(ConfigError) as e:
        check_config(cfg, SCHEMA, [base, overlay])
    assert f"{overlay}: vision.pretrain.epochs = 0 must be >= 1" in str(e.value)


def test_nested_command_line_values_are_typed_as_yaml():
    """Snakemake's `--config 'vision={pretrain: {batch_size: 128}}'` arrives as strings."""
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    given = {"vision": {"pretrain": {"batch_size": "128", "lr": "1e-3", "amp": "false",
                                     "compile_step": "null"}, "arms": ["infonce", "weince"]},
             "threads": 2}
    merged = copy.deepcopy(cfg)
    for k, v in given["vision"]["pretrain"].items():
        merged["vision"]["pretrain"][k] = v
    merged["vision"]["arms"] = ["infonce", "weince"]
    merged["threads"] = 2
    over = retype_overrides(merged, given)
    assert over["vision"]["pretrain"] == {"batch_size": 128, "lr": 1e-3, "amp": False,
                                          "compile_step": None}
    assert merged["vision"]["pretrain"]["batch_size"] == 128
    assert merged["vision"]["pretrain"]["lr"] == 1e-3 and merged["threads"] == 2
    assert merged["vision"]["arms"] == ["infonce", "weince"]
    merged["vision"]["grid"]["arms"] = ["weince"]
    check_config(merged, SCHEMA, [REPO / "config" / "smoke.yaml"], command_line=over)


def _dry(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                        "config/smoke.yaml", *args], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_dry_run_probes_of_the_command_line():
    """The probes: `--config threads=-1` is the command line's, not config/smoke.yaml's;
    a valid nested override plans; `grid.arms: [weinec]` (nested) fails before any job."""
    rc, out = _dry("--config", "threads=-1")
    assert rc != 0 and f"{COMMAND_LINE}: threads = -1 must be >= 1" in out, out
    assert "Job stats" not in out
    rc, out = _dry("--config", "vision={pretrain: {batch_size: 128}}")
    # plans (or finds the smoke run of this checkout done: 128 is smoke.yaml's own value)
    assert rc == 0 and ("Job stats" in out or "Nothing to be done" in out), out
    rc, out = _dry("--config", "vision={grid: {arms: [weinec]}}")
    assert rc != 0 and "Job stats" not in out
    assert "vision.grid.arms.0 = 'weinec' is not a valid choice" in out, out
