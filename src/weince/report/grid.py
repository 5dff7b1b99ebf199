"""The grid-selection section of the linear and k-NN claim tables: which WEINCE point each
grid arm uses and what it was chosen on (the ``selection.json`` files of
:mod:`weince.pipeline.grid`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from weince.pipeline.profile import Profile
from weince.pipeline.grid import selection_paths
from weince.utils.results import load_result

__all__ = ["selection_markdown", "selection_section"]

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


def selection_section(prof: Profile, claim: Mapping[str, Any]) -> str:
    """The grid-selection section of a linear/k-NN claim table ("" when none applies);
    selections not yet computed are left out."""
    paths = {k: p for k, p in selection_paths(prof, claim).items() if p.exists()}
    if not paths:
        return ""
    metrics = None
    if claim.get("file") == "knn.json":
        rows = claim.get("rows")
        metrics = ([str(r["metric"]) for r in rows if r.get("metric")]
                   if isinstance(rows, list) else [str(claim.get("metric"))])
    return selection_markdown({k: load_result(p) for k, p in paths.items()}, metrics)
