"""Which runs of an archive ``weince verify --reevaluate N`` re-evaluates: every run that
can be re-evaluated (its encoder or model shipped with ``--with-models``), sorted into
strata by kind and arm, and a seeded pick that takes one run of every stratum before it
fills up to ``N`` at random.

Kinds:

- ``plain``: a vision run of a named arm (``encoder.pt`` beside ``linear.json`` and/or
  ``knn.json``);
- ``grid point``: a grid point's run (``{arm}@{point}/seedN/``);
- ``grid-adopted``: a grid arm's final run, which adopts the chosen point's encoder
  (``linear.json`` with ``selected_point``; its ``knn.json`` may be assembled from several
  points' runs, each metric from its own);
- ``sts``: a SimCSE run whose ``model/`` folder and ``sts.json`` are shipped.

Nothing here imports torch.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Unit", "find_units", "pick_units", "KINDS"]

KINDS = ("plain", "grid-adopted", "grid point", "sts")


@dataclass(frozen=True, order=True)
class Unit:
    """One run to re-evaluate: its folder relative to the unpacked archive, kind and arm
    (a grid point's arm without its ``@point``)."""

    path: str
    kind: str
    arm: str

    @property
    def stratum(self) -> tuple[str, str]:
        return (self.kind, self.arm)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _vision_kind(run: Path, arm: str) -> str:
    if "@" in arm:
        return "grid point"
    if "selected_point" in _json(run / "linear.json") or \
            "selected_point" in _json(run / "knn.json"):
        return "grid-adopted"
    return "plain"


def find_units(root: Path, results: str) -> list[Unit]:
    """Every re-evaluable run under ``root/results`` (sorted by path)."""
    base = root / results
    out = []
    for enc in sorted((base / "vision").rglob("encoder.pt")) if (base / "vision").is_dir() else []:
        run = enc.parent
        if not ((run / "linear.json").is_file() or (run / "knn.json").is_file()):
            continue
        arm = run.parent.name
        out.append(Unit(str(run.relative_to(root)), _vision_kind(run, arm), arm.split("@")[0]))
    for sts in sorted((base / "text").rglob("sts.json")) if (base / "text").is_dir() else []:
        run = sts.parent
        if (run / "model").is_dir() and any((run / "model").iterdir()):
            out.append(Unit(str(run.relative_to(root)), "sts", run.parent.name))
    return sorted(out)


def pick_units(units: list[Unit], n: int, seed: int) -> tuple[list[Unit], int]:
    """``(picks, strata)``: one run of every (kind, arm) stratum, drawn with ``seed``, then
    more at random until ``n`` runs are picked (all of them when ``n`` is at least their
    number); the picks in path order. Fewer than ``n`` strata never leave one out: the
    pick is then larger than ``n``."""
    rng = random.Random(seed)
    strata: dict[tuple[str, str], list[Unit]] = {}
    for u in sorted(units):
        strata.setdefault(u.stratum, []).append(u)
    picked = {rng.choice(members) for _, members in sorted(strata.items())}
    rest = [u for u in sorted(units) if u not in picked]
    rng.shuffle(rest)
    picked |= set(rest[:max(0, n - len(picked))])
    return sorted(picked), len(strata)
