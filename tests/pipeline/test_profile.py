"""The resolved profile: built once from a workflow config (validated, the schema's defaults
filled, placeholders and a rehearsal's CPU sizes applied), idempotent, typed; and nothing
below the workflow layer reads the raw config dict."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from weince.pipeline.profile import CONFIG_SCHEMA, Profile, config_schema, resolve_config

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "weince"
PROFILES = ["config.yaml", "smoke.yaml", "paper.yaml"]


def _cfg(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


def _schema_paths(schema: dict, prefix: str = "") -> set[str]:
    """Key paths of every property the schema gives a default (its nested objects too)."""
    out = set()
    for k, sub in (schema.get("properties") or {}).items():
        if "default" in sub:
            out.add(prefix + k)
            if sub.get("type") == "object":
                out |= _schema_paths(sub, prefix + k + ".")
    return out


@pytest.mark.parametrize("name", PROFILES)
def test_resolving_fills_every_default_and_is_idempotent(name):
    prof = Profile.of(_cfg(name))
    for path in _schema_paths(config_schema()):
        node = prof.config
        for part in path.split("."):
            assert part in node, f"{name}: {path} not filled"
            node = node[part]
    assert Profile.of(prof.config) == prof        # a job's script resolves it again
    assert Profile.of(prof) is prof


def test_the_typed_fields_are_the_configs():
    prof = Profile.of(_cfg("paper.yaml"))
    v = prof.vision
    assert prof.name == "paper" and prof.report_dir == Path("reports/paper")
    assert len(v.pairs) == 15 and v.pairs[0] == ("cifar10", "resnet18")
    assert v.grid.seeds == v.seeds == (7, 21, 63, 84)
    assert len(v.grid.points) == 27 and v.grid.points[0] == "m0_kr5_ka0.5"
    assert v.grid.active_arms == v.grid.arms
    assert v.tau == 0.5 and v.pretrain.epochs == 100
    assert prof.text.models == ("bert-base-uncased",)


def test_a_one_seed_grid_without_points_has_no_active_arm():
    cfg = _cfg("smoke.yaml")
    cfg["vision"]["grid"].update(margin=[], kappa_rho=[], kappa_aic=[])
    assert Profile.of(cfg).vision.grid.active_arms == ()


def test_resolving_a_profile_leaves_the_config_unchanged():
    cfg = _cfg("smoke.yaml")
    before = yaml.safe_dump(cfg)
    Profile.of(cfg)
    assert yaml.safe_dump(cfg) == before


def test_placeholders_and_the_rehearsal_are_resolved_once(tmp_path):
    cfg = _cfg("paper.yaml")
    for over in ("rehearsal.yaml",):
        cfg = _merge(cfg, _cfg(over))
    cfg["data_root"] = str(tmp_path)
    cfg["rehearsal"]["gpu"] = False
    prof = Profile.of(cfg)
    assert prof.text.simcse.train_data == f"{tmp_path}/wiki1m_for_simcse.txt"
    assert prof.rehearsal.gpu_used is False and prof.rehearsal.cpu_pairs_used
    assert all(not r.get("gpu") for r in prof.resources.values() if isinstance(r, dict))
    again = resolve_config(prof.config)
    assert again == prof.config                  # the CPU sizes are not merged twice


def _merge(base: dict, over: dict) -> dict:
    for k, v in over.items():
        base[k] = _merge(base.get(k) or {}, v) if isinstance(v, dict) else v
    return base


def test_bad_profile_input_names_the_problem():
    with pytest.raises(ValueError, match="no 'profile' key"):
        Profile.of({"vision": {}})
    with pytest.raises(ValueError, match="visoin"):
        Profile.of({"profile": "x", "visoin": {}})
    cfg = _cfg("smoke.yaml")
    cfg["vision"]["pairs"] = [["digits", "resnet50"]]
    with pytest.raises(ValueError, match="not among vision.datasets x vision.backbones"):
        Profile.of(cfg)


def test_the_schema_ships_inside_the_package():
    assert CONFIG_SCHEMA.parent == SRC / "pipeline"
    link = REPO / "workflow" / "schemas" / "config.schema.yaml"
    assert link.resolve() == CONFIG_SCHEMA.resolve()


# --------------------------------------------------------------------------- the raw dict
# the profile's top-level blocks: a subscript or .get() of one of these names on a function's
# own parameter is a read of the raw workflow config
CONFIG_BLOCKS = {"vision", "text", "timing", "checks", "synthetic", "ablations", "norms",
                 "resources", "cost", "rehearsal", "data_root", "download", "offline",
                 "container"}
# where the raw dict is read on purpose: the resolution itself, the schema check (it names
# the file and key of a bad value), and the generic dict helpers
RAW_READERS = {"pipeline/profile.py", "pipeline/config_check.py", "utils/config.py"}


def raw_config_reads(root: Path = SRC) -> list[str]:
    """``file:line function`` of every function outside :data:`RAW_READERS` that reads a
    config block from one of its parameters."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in RAW_READERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]}
            for sub in ast.walk(node):
                key = None
                if (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                        and sub.value.id in params and isinstance(sub.slice, ast.Constant)):
                    key = sub.slice.value
                elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                      and sub.func.attr == "get" and isinstance(sub.func.value, ast.Name)
                      and sub.func.value.id in params and sub.args
                      and isinstance(sub.args[0], ast.Constant)):
                    key = sub.args[0].value
                if key in CONFIG_BLOCKS:
                    found.append(f"{rel}:{sub.lineno} {node.name}")
                    break
    return found


def test_nothing_below_the_workflow_reads_the_raw_config():
    assert raw_config_reads() == []


def test_the_scan_finds_a_raw_read(tmp_path):
    (tmp_path / "mod.py").write_text("def f(cfg):\n    return cfg['vision']['seeds']\n"
                                     "def g(prof):\n    return prof.vision.seeds\n")
    assert raw_config_reads(tmp_path) == ["mod.py:2 f"]
