"""Glue between the workflow config and the stage configs, kept here (not in the rules) so
that it is tested: per-run stage configs, grid-point selection on validation, and log
redirection for the rules' scripts.

    from weince.report.workflow import pretrain_config, select_grid_point
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from weince.report.layout import grid_points, parse_point, split_arm
from weince.report.results import encoder_value, get_key, load_result

__all__ = ["pretrain_config", "simcse_config", "select_grid_point", "apply_selection",
           "log_to", "grid_arms"]


def grid_arms(cfg: Mapping[str, Any]) -> list[str]:
    """The vision arms whose final runs use a point chosen on validation."""
    g = (cfg.get("vision") or {}).get("grid") or {}
    return list(g.get("arms", [])) if grid_points(g) and g.get("seeds") else []


def pretrain_config(cfg: Mapping[str, Any], dataset: str, backbone: str, arm: str,
                    seed: int) -> dict[str, Any]:
    """The ``SimCLRConfig`` dict of one run. ``arm`` may carry a grid point
    (``weince@m2_kr10_ka1``); its values override the arm's loss keyword arguments. A
    final grid arm gets the chosen point later (:func:`apply_selection`)."""
    v = cfg.get("vision") or {}
    base, point = split_arm(arm)
    out = copy.deepcopy(dict(v.get("pretrain") or {}))
    out.update(copy.deepcopy(dict((v.get("pretrain_by_dataset") or {}).get(dataset) or {})))
    from weince.ablations import ARMS, arm_settings  # lazy: weince.ablations imports weince.report
    if base in ARMS:
        s = arm_settings(base, v.get("losses"), out.get("tau"))
        loss, loss_kwargs = s["loss"], s["loss_kwargs"]
        if s["tau"] is not None:
            out["tau"] = float(s["tau"])
    else:
        loss, loss_kwargs = base, copy.deepcopy(dict((v.get("losses") or {}).get(base) or {}))
    if point:
        loss_kwargs.update(point)
    out.update(dataset=dataset, backbone=backbone, loss=loss, seed=int(seed),
               loss_kwargs=loss_kwargs)
    out.setdefault("device", cfg.get("device", "auto"))
    out.setdefault("threads", cfg.get("threads"))
    out.setdefault("data_root", cfg.get("data_root"))
    out.setdefault("download", bool(cfg.get("download", False)))
    return out


def apply_selection(run_cfg: dict[str, Any], selection_path: str | os.PathLike) -> dict[str, Any]:
    """Put the grid point chosen in ``selection.json`` into a run config's loss kwargs."""
    sel = load_result(selection_path)
    params = get_key(sel, "params", selection_path, needed_by="the final run of a grid arm")
    run_cfg = copy.deepcopy(run_cfg)
    run_cfg.setdefault("loss_kwargs", {}).update(params)
    return run_cfg


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


def simcse_config(cfg: Mapping[str, Any], model: str, arm: str, seed: int) -> dict[str, Any]:
    """The ``SimCSEConfig`` dict of one text run."""
    t = cfg.get("text") or {}
    out = copy.deepcopy(dict(t.get("simcse") or {}))
    out.update(model=(t.get("model_paths") or {}).get(model, model), loss=arm, seed=int(seed))
    lk = dict((t.get("losses") or {}).get(arm) or {})
    if lk:
        out["loss_kwargs"] = {**out.get("loss_kwargs", {}), **lk}
    out.setdefault("device", cfg.get("device", "auto"))
    out.setdefault("offline", bool(cfg.get("offline", True)))
    return out


@contextlib.contextmanager
def log_to(path: str | os.PathLike | None) -> Iterator[None]:
    """Send stdout, stderr and ``logging`` of a rule's script to its log file."""
    if not path:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = fh
        try:
            yield
        except BaseException:
            traceback.print_exc(file=fh)  # the log names the error; snakemake shows the log
            raise
        finally:
            sys.stdout, sys.stderr = old_out, old_err
            root.removeHandler(handler)
