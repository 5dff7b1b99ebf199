"""The norms plan (claims N1-N3, ``docs/norms.md``): which units a profile analyses.

The profile's ``norms`` block: ``vision: {enabled, arms, seeds}`` (``null`` arms/seeds:
the profile's vision arms/seeds), ``text: {enabled, models, simcse_runs}`` and ``analysis``
(:class:`weince.norms.run.NormsConfig` keys, see :func:`weince.pipeline.stages.norms_config`).

    from weince.pipeline.norms import norms_results
    norms_results(config)       # every norms.json the report page reads
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from weince.norms.files import RESULT_FILE
from weince.pipeline.layout import TextRun, report_dir, text_runs, vision_runs
from weince.pipeline.stages import PRETRAINED_ARM

__all__ = ["vision_units", "text_units", "norms_results", "norms_outputs"]


def vision_units(cfg: Mapping[str, Any]) -> list[Path]:
    """``{run}/norms.json`` for every dataset x backbone x arm x seed analysed."""
    v, nv = cfg.get("vision") or {}, (cfg.get("norms") or {}).get("vision") or {}
    if not (v.get("enabled", True) and nv.get("enabled", True)):
        return []
    root, profile = cfg.get("results", "results"), cfg["profile"]
    return [r.dir(root, profile) / RESULT_FILE
            for r in vision_runs(cfg, arms=nv.get("arms") or None, seeds=nv.get("seeds") or None)]


def text_units(cfg: Mapping[str, Any]) -> list[Path]:
    """``{run}/norms.json`` for the pretrained models (arm ``pretrained``, seed 0) and,
    with ``simcse_runs``, the first seed of every trained SimCSE arm."""
    t, nt = cfg.get("text") or {}, (cfg.get("norms") or {}).get("text") or {}
    if not nt.get("enabled", True):
        return []
    root, profile = cfg.get("results", "results"), cfg["profile"]
    out = [TextRun(m, PRETRAINED_ARM, 0).dir(root, profile) / RESULT_FILE
           for m in nt.get("models", [])]
    if nt.get("simcse_runs") and t.get("seeds"):
        out += [r.dir(root, profile) / RESULT_FILE
                for r in text_runs(cfg, seeds=t["seeds"][:1])]
    return out


def norms_results(cfg: Mapping[str, Any]) -> list[Path]:
    """Every ``norms.json`` of the profile (vision units, then text units)."""
    return vision_units(cfg) + text_units(cfg)


def norms_outputs(cfg: Mapping[str, Any]) -> dict[str, Path]:
    """The files of the norms page: ``md``, ``summary`` (json) and ``figures`` (folder)."""
    d = report_dir(cfg)
    return {"md": d / "norms.md", "summary": d / "norms_summary.json",
            "figures": d / "norms_figures"}
