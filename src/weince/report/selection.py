"""The grid-selection section of the linear and k-NN claim tables: which WEINCE point each
grid arm uses and what it was chosen on (the ``selection.json`` files of
:mod:`weince.pipeline.selection`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from weince.losses.arms import grid_points
from weince.pipeline import layout
from weince.utils.results import load_result

__all__ = ["selection_markdown", "selection_paths", "selection_section"]

def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def selection_markdown(selections: Mapping[str, Mapping[str, Any]], metrics: Sequence[str]
                       | None = None) -> str:
    """A Markdown section that shows which grid point a table's arm uses, chosen on what.

    Args:
        selections: a label (e.g. ``"cifar100/resnet18 weince_recipe"``) -> selection.json.
        metrics: k-NN metrics to show (their per-metric choices); None: the linear choice.
    """
    if not selections:
        return ""
    lines = ["", "## Grid selection (validation only)", "",
             "| setting / arm | metric | chosen point | mean val (n seeds) | runner-up | "
             "points compared |", "| --- | --- | --- | --- | --- | --- |"]
    for label, sel in selections.items():
        if metrics is None or not sel.get("knn"):
            rows = [(sel["metric"], sel)]
            if metrics is not None:
                rows = [(f"{sel['metric']} (linear point serves k-NN: one-seed grid)", sel)]
        else:
            rows = [(sel["knn"][m]["metric"], sel["knn"][m]) for m in metrics
                    if m in sel["knn"]]
        for name, ch in rows:
            pts = ch["points"]
            best = pts[ch["chosen"]]
            others = sorted((p for p in pts if p != ch["chosen"] and pts[p]["mean"] is not None),
                            key=lambda p: -pts[p]["mean"])
            runner = (f"{others[0]} {_fmt(pts[others[0]]['mean'])}" if others else "-")
            pool = "complete points only" if ch.get("complete_only") else "all (none complete)"
            lines.append(f"| {label} | {name} | {ch['chosen']} | {_fmt(best['mean'])} "
                         f"({best['n']}) | {runner} | {len(pts)}, {pool} |")
    return "\n".join(lines) + "\n"


_SELECTED_FILES = ("linear.json", "knn.json")


def selection_paths(cfg: Mapping[str, Any], claim: Mapping[str, Any]) -> dict[str, Path]:
    """label -> ``selection.json`` of every grid arm a linear/k-NN claim table shows, for
    the claim's (dataset, backbone) rows that the profile runs (all pairs for ``any``)."""
    if claim.get("stage") != "vision" or claim.get("file") not in _SELECTED_FILES:
        return {}
    v = cfg.get("vision") or {}
    g = v.get("grid") or {}
    if not (grid_points(g) and g.get("seeds")):
        return {}
    a = claim.get("arms") or {}
    shown = [x for x in [a.get("baseline"), a.get("primary"), *a.get("others", [])]
             if x in g.get("arms", []) and x in v.get("arms", [])]
    pairs = layout.vision_pairs(dict(cfg))
    rows = claim.get("rows")
    if isinstance(rows, list):
        wanted = {(r.get("dataset"), r.get("backbone")) for r in rows}
        pairs = [p for p in pairs if p in wanted] or pairs
    root = cfg.get("results", "results")
    return {f"{d}/{b} {arm}": Path(layout.VISION_PAIR.format(results=root, profile=cfg["profile"],
                                                            dataset=d, backbone=b))
            / arm / "selection.json"
            for d, b in pairs for arm in dict.fromkeys(shown)}


def selection_section(cfg: Mapping[str, Any], claim: Mapping[str, Any]) -> str:
    """The grid-selection section of a linear/k-NN claim table ("" when none applies);
    selections not yet computed are left out."""
    paths = {k: p for k, p in selection_paths(cfg, claim).items() if p.exists()}
    if not paths:
        return ""
    metrics = None
    if claim.get("file") == "knn.json":
        rows = claim.get("rows")
        metrics = ([r["metric"] for r in rows if r.get("metric")] if isinstance(rows, list)
                   else [claim.get("metric")])
    return selection_markdown({k: load_result(p) for k, p in paths.items()}, metrics)
