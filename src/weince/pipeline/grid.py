"""The choice of a grid arm's point, on validation only.

    from weince.pipeline.grid import select_grid_point
    select_grid_point({"m0": ["a/linear.json"], "m2": ["b/linear.json"]})
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from weince.losses.arms import parse_point
from weince.report.results import encoder_value, get_key, load_result

__all__ = ["select_grid_point"]


def select_grid_point(files: Mapping[str, Sequence[str | os.PathLike]], metric: str = "val_acc"
                      ) -> dict[str, Any]:
    """Choose the grid point with the best mean validation metric.

    Args:
        files: point name -> the ``linear.json`` of that point's grid runs (one per seed).
        metric: a validation key of ``linear.json`` (a name containing ``test`` is refused:
            the configuration is chosen on validation only).
    Returns:
        ``{"chosen", "params", "metric", "points": {name: {"mean", "values"}}}``; ties go to
        the first point in grid order.
    """
    if "test" in metric.lower():
        raise ValueError(f"grid selection metric {metric!r} looks like a test metric; the "
                         f"WEINCE configuration is chosen on a validation split only")
    if not files:
        raise ValueError("select_grid_point needs at least one grid point")
    table: dict[str, dict[str, Any]] = {}
    for name, paths in files.items():
        vals = []
        for p in paths:
            v = encoder_value(get_key(load_result(p), metric, p, needed_by="grid selection"),
                              p, metric)
            if v is not None:
                vals.append(v)
        table[name] = {"mean": sum(vals) / len(vals) if vals else None, "values": vals}
    scored = [(n, t["mean"]) for n, t in table.items() if t["mean"] is not None]
    if not scored:
        raise ValueError(f"no grid point has a finite {metric!r}; see the linear.json files "
                         f"{[str(p) for ps in files.values() for p in ps][:3]} ...")
    best = max(scored, key=lambda nt: nt[1])[0]
    return {"chosen": best, "params": parse_point(best), "metric": metric, "points": table}
