"""The workflow config's schema as the check reads it: ``config.schema.yaml`` with each stage
block marked ``generated: <dataclass>`` replaced by the schema of that settings dataclass
(:func:`weince.utils.settings.json_schema`), so a stage's keys, types, defaults and ranges
are written once, in its dataclass.

    from weince.pipeline.schema import read_schema
    read_schema("src/weince/pipeline/config.schema.yaml")["$defs"]["pretrain"]["properties"]
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weince.eval.config import (FeaturesConfig, KNNConfig, LinearProbeConfig, ScoresConfig,
                                STSConfig)
from weince.evt.config import LinkConfig, PotConfig
from weince.norms.config import NormsConfig
from weince.train.config import SimCLRConfig, SimCSEConfig, TimingConfig
from weince.utils.config import parse_yaml
from weince.utils.settings import json_schema

__all__ = ["GENERATED", "read_schema", "expand_generated", "fill_defaults"]

#: the settings dataclasses a schema block may be generated from, by the name it gives
GENERATED: dict[str, type] = {cls.__name__: cls for cls in (
    SimCLRConfig, SimCSEConfig, TimingConfig, FeaturesConfig, LinearProbeConfig, KNNConfig,
    ScoresConfig, PotConfig, LinkConfig, NormsConfig, STSConfig)}


def expand_generated(node: Any, where: str = "schema") -> Any:
    """``node`` with every mapping ``{generated: Name, ...}`` replaced by the schema of
    ``GENERATED[Name]`` (the mapping's other keys, e.g. a description, kept; its
    ``properties``, a workflow key beside the dataclass's fields such as
    ``vision.linear.seeds_by_arm``, added to the generated ones)."""
    if isinstance(node, list):
        return [expand_generated(x, where) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: expand_generated(v, f"{where}.{k}") for k, v in node.items() if k != "generated"}
    if "generated" in node:
        name = node["generated"]
        if name not in GENERATED:
            raise ValueError(f"{where}: generated: {name!r} is not a settings dataclass of "
                             f"weince.pipeline.schema.GENERATED ({', '.join(GENERATED)})")
        schema = json_schema(GENERATED[name])
        extra = out.pop("properties", {})
        clash = sorted(set(extra) & set(schema["properties"]))
        if clash:
            raise ValueError(f"{where}: properties {clash} are fields of {name} already")
        out = {**schema, **out, "properties": {**schema["properties"], **extra}}
    return out


def read_schema(path: str | os.PathLike) -> dict[str, Any]:
    """The schema in ``path`` with its generated blocks filled in."""
    path = Path(path)
    return expand_generated(parse_yaml(path.read_text(), f"schema {path}"), path.name)


def _resolve(node: Any, defs: Mapping[str, Any]) -> Any:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**defs[ref.split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def fill_defaults(instance: Any, schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None
                  ) -> None:
    """Write the schema's ``default`` values into ``instance`` (in place, nested objects
    included) where it leaves a key out, without validating: the config check has done
    that (what Snakemake's ``validate(..., set_default=True)`` does, without its second
    pass over the config)."""
    defs = schema.get("$defs", {}) if defs is None else defs
    node = _resolve(schema, defs)
    if not isinstance(instance, dict) or not isinstance(node, dict):
        return
    for name, sub in (node.get("properties") or {}).items():
        sub = _resolve(sub, defs)
        if isinstance(sub, dict) and "default" in sub and name not in instance:
            instance[name] = copy.deepcopy(sub["default"])
        if name in instance:
            fill_defaults(instance[name], sub, defs)
