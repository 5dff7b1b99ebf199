"""Helpers of ``workflow/rules/norms.smk``: the profile's norms settings and its targets.

Kept here (not in the rule file) so that the rules file holds only rules, and so that the
target lists are testable without Snakemake.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import yaml

__all__ = ["PRETRAINED_ARM", "load_profile", "vision_targets", "text_targets",
           "report_targets", "text_model"]

PRETRAINED_ARM = "pretrained"   # text units analysed as shipped (seed 0)


def load_profile(path: str | os.PathLike, profile: str) -> dict[str, Any]:
    """The ``profiles: {profile: ...}`` section of ``config/norms.yaml``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"norms settings {path} do not exist; the workflow expects "
                                "config/norms.yaml (or config key norms_config)")
    profiles = (yaml.safe_load(path.read_text()) or {}).get("profiles") or {}
    if profile not in profiles:
        raise ValueError(f"{path} has no section for profile {profile!r}; add one under "
                         f"`profiles:` (present: {sorted(profiles)})")
    return profiles[profile] or {}


def vision_targets(config: Mapping[str, Any], norms: Mapping[str, Any], vrun: str,
                   profile: str) -> list[str]:
    """``{vrun}/norms.json`` for every dataset x backbone x arm x seed analysed."""
    v, nv = config.get("vision") or {}, norms.get("vision") or {}
    if not (v.get("enabled", True) and nv.get("enabled", True)):
        return []
    arms = nv.get("arms") or v.get("arms", [])
    seeds = nv.get("seeds") or v.get("seeds", [])
    return [f"{vrun}/norms.json".format(profile=profile, dataset=d, backbone=b, arm=a, seed=s)
            for d in v.get("datasets", []) for b in v.get("backbones", [])
            for a in arms for s in seeds]


def text_targets(config: Mapping[str, Any], norms: Mapping[str, Any], trun: str,
                 profile: str) -> list[str]:
    """``{trun}/norms.json`` for the pretrained models (arm ``pretrained``, seed 0) and,
    with ``simcse_runs``, the first seed of every trained SimCSE arm."""
    t, nt = config.get("text") or {}, norms.get("text") or {}
    if not nt.get("enabled", True):
        return []
    out = [f"{trun}/norms.json".format(profile=profile, model=m, arm=PRETRAINED_ARM, seed=0)
           for m in nt.get("models", [])]
    if nt.get("simcse_runs") and t.get("enabled", True) and t.get("seeds"):
        out += [f"{trun}/norms.json".format(profile=profile, model=m, arm=a,
                                            seed=t["seeds"][0])
                for m in t.get("models", []) for a in t.get("arms", [])]
    return out


def report_targets(config: Mapping[str, Any], norms: Mapping[str, Any], report_dir: str,
                   vrun: str, trun: str, profile: str) -> list[str]:
    """What ``rule all`` needs for N1-N3: the report page and its summary (nothing when
    the profile analyses no unit)."""
    if not (vision_targets(config, norms, vrun, profile)
            or text_targets(config, norms, trun, profile)):
        return []
    return [f"{report_dir}/norms.md".format(profile=profile),
            f"{report_dir}/norms_summary.json".format(profile=profile)]


def text_model(config: Mapping[str, Any], model: str, arm: str, trun_dir: str) -> str:
    """The ``--text-model`` of a text unit: the shipped model (``text.model_paths`` or its
    name) for ``pretrained``, else the trained run's ``model/`` folder."""
    if arm == PRETRAINED_ARM:
        return ((config.get("text") or {}).get("model_paths") or {}).get(model, model)
    return f"{trun_dir}/model"
