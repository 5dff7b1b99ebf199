"""Where every result lives: the path templates of ``docs/architecture.md``, in one place.

The Snakemake rules (``workflow/rules/common.smk``) and ``weince report`` both build
paths from these templates, so a rule's output and the file the report reads can never
drift apart.

    results/{profile}/vision/{dataset}/{backbone}/{arm}/seed{seed}/   encoder.pt ... link.json
    results/{profile}/vision/{dataset}/{backbone}/{arm}/selection.json   (grid arms)
    results/{profile}/text/{model}/{arm}/seed{seed}/                 train.json sts.json
    results/{profile}/timing/timing.json
    results/{profile}/checks/special_case.json
    reports/{profile}/summary.md, table_c*.md/.tex, figures/

A grid point of a loss arm is spelled ``{arm}@{point}`` in the ``arm`` slot, e.g.
``weince@m2_kr10_ka1``: the same rules train and evaluate it; the final arm ``weince``
reads the point chosen on validation from ``selection.json``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

__all__ = ["VISION_RUN", "TEXT_RUN", "TIMING", "CHECKS", "REPORT", "VisionRun", "TextRun",
           "grid_points", "point_name", "parse_point", "split_arm", "vision_runs",
           "text_runs", "vision_pairs", "run_dir", "GRID_KEYS"]

VISION_RUN = "{results}/{profile}/vision/{dataset}/{backbone}/{arm}/seed{seed}"
VISION_PAIR = "{results}/{profile}/vision/{dataset}/{backbone}"
TEXT_RUN = "{results}/{profile}/text/{model}/{arm}/seed{seed}"
TIMING = "{results}/{profile}/timing"
CHECKS = "{results}/{profile}/checks"
REPORT = "{reports}/{profile}"

# grid keys in the order they appear in a point name, with their short tags
GRID_KEYS: dict[str, str] = {"margin": "m", "kappa_rho": "kr", "kappa_aic": "ka"}
_TAG_TO_KEY = {v: k for k, v in GRID_KEYS.items()}


def _fmt(v: float) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


def point_name(point: dict[str, float]) -> str:
    """``{"margin": 2, "kappa_rho": 10, "kappa_aic": 0.5}`` -> ``"m2_kr10_ka0.5"``."""
    unknown = set(point) - set(GRID_KEYS)
    if unknown:
        raise ValueError(f"unknown grid key(s) {sorted(unknown)}; valid: {list(GRID_KEYS)}")
    return "_".join(f"{GRID_KEYS[k]}{_fmt(point[k])}" for k in GRID_KEYS if k in point)


def parse_point(name: str) -> dict[str, float]:
    """Inverse of :func:`point_name`."""
    out: dict[str, float] = {}
    for part in name.split("_"):
        m = re.fullmatch(r"(kr|ka|m)(-?[0-9.]+(?:e-?[0-9]+)?)", part)
        if not m:
            raise ValueError(f"bad grid point {name!r}: part {part!r} is not <tag><number> "
                             f"with tag in {list(_TAG_TO_KEY)}")
        out[_TAG_TO_KEY[m.group(1)]] = float(m.group(2))
    return out


def split_arm(arm: str) -> tuple[str, dict[str, float] | None]:
    """``"weince@m2_kr10_ka1"`` -> ``("weince", {...})``; ``"weince"`` -> ``("weince", None)``."""
    if "@" in arm:
        base, point = arm.split("@", 1)
        return base, parse_point(point)
    return arm, None


def grid_points(grid: dict[str, Any] | None) -> list[str]:
    """All point names of a grid config ``{"margin": [...], "kappa_rho": [...], ...}``
    (the product of the lists present), in a fixed order; ``[]`` without a grid."""
    if not grid:
        return []
    keys = [k for k in GRID_KEYS if grid.get(k)]
    if not keys:
        return []
    return [point_name(dict(zip(keys, vals)))
            for vals in itertools.product(*(grid[k] for k in keys))]


@dataclass(frozen=True)
class VisionRun:
    dataset: str
    backbone: str
    arm: str
    seed: int

    def dir(self, results: str | Path, profile: str) -> Path:
        return Path(VISION_RUN.format(results=results, profile=profile, **self.__dict__))


@dataclass(frozen=True)
class TextRun:
    model: str
    arm: str
    seed: int

    def dir(self, results: str | Path, profile: str) -> Path:
        return Path(TEXT_RUN.format(results=results, profile=profile, **self.__dict__))


def vision_pairs(cfg: dict[str, Any]) -> list[tuple[str, str]]:
    """(dataset, backbone) pairs a profile runs: every dataset x every backbone."""
    v = cfg.get("vision") or {}
    if not v.get("enabled", True):
        return []
    return [(d, b) for d in v.get("datasets", []) for b in v.get("backbones", [])]


def vision_runs(cfg: dict[str, Any], *, grid: bool = False) -> Iterator[VisionRun]:
    """Every final vision run of a profile (``grid=True``: the grid-point runs instead)."""
    v = cfg.get("vision") or {}
    for dataset, backbone in vision_pairs(cfg):
        if grid:
            g = v.get("grid") or {}
            for arm in g.get("arms", []):
                for point in grid_points(g):
                    for seed in g.get("seeds", []):
                        yield VisionRun(dataset, backbone, f"{arm}@{point}", int(seed))
        else:
            for arm in v.get("arms", []):
                for seed in v.get("seeds", []):
                    yield VisionRun(dataset, backbone, arm, int(seed))


def text_runs(cfg: dict[str, Any]) -> Iterator[TextRun]:
    t = cfg.get("text") or {}
    if not t.get("enabled", True):
        return
    for model in t.get("models", []):
        for arm in t.get("arms", []):
            for seed in t.get("seeds", []):
                yield TextRun(model, arm, int(seed))


def run_dir(cfg: dict[str, Any], run: VisionRun | TextRun) -> Path:
    return run.dir(cfg.get("results", "results"), cfg["profile"])
