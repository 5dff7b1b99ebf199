"""The rehearsal profile's config (``config/rehearsal.yaml`` over ``config/paper.yaml``):
what changes on a machine without a GPU, and the ``{data_root}`` placeholders of every
profile.

    from weince.pipeline.rehearsal import prepare_config
    prepare_config(config)     # in the Snakefile, after the schema check

- ``{data_root}`` in any string value of the config is replaced by the ``data_root`` key, so
  ``--config data_root=DIR`` moves the text files (wiki1m, STS-B) with the images.
- ``rehearsal.enabled`` and no GPU used (``rehearsal.gpu: false``, or ``auto`` on a machine
  where ``torch.cuda.is_available()`` is false): ``rehearsal.cpu`` is merged over the config
  (CPU-sized batches) and every rule's ``resources.gpu`` becomes 0, so no job asks for a
  GPU that is not there. ``rehearsal.gpu_used`` records the decision for the forecast. There
  ``rehearsal.cpu_pairs`` (when ``vision.pairs`` is not set) narrows the 15 data set x
  backbone pairs to a covering subset, every loader and every backbone once
  (``rehearsal.cpu_pairs_used``); the forecast fills the other pairs from the measured ones.
"""

from __future__ import annotations

import copy
from typing import Any, MutableMapping

__all__ = ["prepare_config", "is_rehearsal", "expand_data_root", "deep_merge", "gpu_used",
           "forecast_outputs", "forecast_inputs"]


def is_rehearsal(cfg: MutableMapping[str, Any] | dict) -> bool:
    return bool((cfg.get("rehearsal") or {}).get("enabled"))


def deep_merge(base: MutableMapping[str, Any], over: dict[str, Any]) -> MutableMapping[str, Any]:
    """Merge ``over`` into ``base`` in place, dict by dict (other values replace)."""
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def expand_data_root(value: Any, data_root: str) -> Any:
    """``value`` with ``{data_root}`` replaced in every string it holds."""
    if isinstance(value, str):
        return value.replace("{data_root}", str(data_root))
    if isinstance(value, list):
        return [expand_data_root(v, data_root) for v in value]
    if isinstance(value, dict):
        return {k: expand_data_root(v, data_root) for k, v in value.items()}
    return value


def gpu_used(cfg: MutableMapping[str, Any]) -> bool:
    """Whether the rehearsal's jobs get GPUs: ``rehearsal.gpu`` true/false, or ``auto`` =
    CUDA visible on this machine."""
    want = (cfg.get("rehearsal") or {}).get("gpu", "auto")
    if want in (True, False):
        return bool(want)
    import torch

    return bool(torch.cuda.is_available())


def prepare_config(cfg: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Apply the placeholders and the rehearsal's CPU sizes to ``cfg`` in place; returns it."""
    root = cfg.get("data_root", "data")
    for key in list(cfg):
        cfg[key] = expand_data_root(cfg[key], root)
    if not is_rehearsal(cfg):
        return cfg
    r = cfg["rehearsal"]
    use_gpu = gpu_used(cfg)
    r["gpu_used"] = use_gpu
    if not use_gpu:
        deep_merge(cfg, expand_data_root(copy.deepcopy(r.get("cpu") or {}), root))
        for res in (cfg.get("resources") or {}).values():
            if isinstance(res, dict) and res.get("gpu"):
                res["gpu"] = 0
        vis = cfg.get("vision")
        if r.get("cpu_pairs") and isinstance(vis, dict) and vis.get("pairs") is None:
            vis["pairs"] = copy.deepcopy(r["cpu_pairs"])   # a `vision.pairs` set wins
            r["cpu_pairs_used"] = True
    return cfg


def forecast_outputs(cfg: MutableMapping[str, Any]) -> dict[str, Any]:
    """``{"md": reports/<profile>/forecast.md, "resources": .../resources.yaml}`` of a
    rehearsal, else ``{}``."""
    if not is_rehearsal(cfg):
        return {}
    from weince.pipeline.layout import report_dir

    d = report_dir(cfg)
    return {"md": d / "forecast.md", "resources": d / "resources.yaml"}


def forecast_inputs(cfg: MutableMapping[str, Any]) -> list[Any]:
    """The ``train.json`` of every pretraining (final and grid) and SimCSE run: their
    ``step_timing`` is what the forecast reads."""
    from weince.pipeline import layout

    root, profile = cfg.get("results", "results"), cfg["profile"]
    runs = [*layout.vision_runs(cfg), *layout.vision_runs(cfg, grid=True),
            *layout.text_runs(cfg)]
    return list(dict.fromkeys(r.dir(root, profile) / "train.json" for r in runs))
