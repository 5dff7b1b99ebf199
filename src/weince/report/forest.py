"""Forest plots: one figure per claim, our estimate and interval for every setting x arm beside
the paper's figure.

Each line of a forest plot is one arm in one setting of the claim's table: the dot is our mean
over encoder seeds, the bar its 95% t-interval (no bar with fewer than two encoders), and the
paper's number is an orange diamond on the same line (a band where the paper gives a range,
e.g. C2's ``lambda`` of 0.33-0.50). Claims with gains (primary minus baseline) get a
second panel: the gain's interval and the paper's gain (given, or treatment minus baseline).
Nothing here computes a verdict: the figure only draws :class:`~weince.report.verdicts.ClaimResult`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ForestLine", "forest_lines", "forest_figure", "forest_figures"]


@dataclass
class ForestLine:
    """One line of a forest plot: ``label``, our ``mean`` and interval (``lo``/``hi`` None
    without one), the paper's value (``paper``) or range (``paper_range``), if any."""

    label: str
    mean: float | None          # None: a paper setting this profile did not run
    lo: float | None = None
    hi: float | None = None
    paper: float | None = None
    paper_range: tuple[float, float] | None = None


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(float(x))


def _paper_for_arm(paper: dict, arm: str, arms: dict) -> tuple[float | None, tuple | None]:
    """The paper's figure for one arm of a row: ``baseline``/``treatment`` values belong to
    the claim's baseline/primary arm; a single ``value`` or a ``low``-``high`` range is the
    claim's figure for its primary arm."""
    if arm == arms.get("baseline") and _finite(paper.get("baseline")):
        return float(paper["baseline"]), None
    if arm == arms.get("primary"):
        if _finite(paper.get("treatment")):
            return float(paper["treatment"]), None
        if _finite(paper.get("value")):
            return float(paper["value"]), None
        if _finite(paper.get("low")) and _finite(paper.get("high")):
            return None, (float(paper["low"]), float(paper["high"]))
    return None, None


def forest_lines(result) -> tuple[list[ForestLine], list[ForestLine]]:
    """``(per-arm lines, gain lines)`` of a :class:`ClaimResult`, in table order.

    Per-arm lines: every arm with a finite estimate in every row, and the paper's figure
    alone (``mean`` None) for a paper setting the profile did not run. Gain lines: the primary
    arm's gain over the baseline in rows where we have one (with the paper's ``gain``)."""
    arms = result.claim.get("arms") or {}
    per_arm, gains = [], []
    many_metrics = len({row.label for row in result.rows}) > 1   # e.g. C6: acc@k and R@k
    for row in result.rows:
        where = row.setting.label() + (f" | {row.label}" if many_metrics else "")
        # a paper setting the profile did not run has no cells: its arms with a paper figure
        names = list(row.cells) or [a for a in (arms.get("baseline"), arms.get("primary")) if a]
        for arm in names:
            cell = row.cells.get(arm)
            est = cell.est if cell is not None else None
            paper, band = _paper_for_arm(row.paper or {}, arm, arms)
            if est is None or not _finite(est.mean):
                if paper is not None or band is not None:   # the paper's figure alone
                    per_arm.append(ForestLine(f"{where} | {arm} (not run here)", None,
                                              paper=paper, paper_range=band))
                continue
            per_arm.append(ForestLine(f"{where} | {arm}", float(est.mean),
                                      est.lo if est.has_interval else None,
                                      est.hi if est.has_interval else None, paper, band))
        for arm, est in (row.gains or {}).items():
            if not _finite(est.mean):
                continue
            paper = None
            if arm == arms.get("primary"):
                pp = row.paper or {}
                paper = pp.get("gain")
                if not _finite(paper) and _finite(pp.get("treatment")) and _finite(pp.get("baseline")):
                    paper = float(pp["treatment"]) - float(pp["baseline"])  # the paper's gain
            gains.append(ForestLine(f"{where} | {arm} - {arms.get('baseline', 'baseline')}",
                                    float(est.mean), est.lo if est.has_interval else None,
                                    est.hi if est.has_interval else None,
                                    float(paper) if _finite(paper) else None))
    return per_arm, gains


def _panel(ax, lines: list[ForestLine], xlabel: str) -> None:
    ys = list(range(len(lines)))[::-1]
    paper_labelled = ours_labelled = False
    for y, ln in zip(ys, lines):
        if ln.lo is not None and ln.hi is not None:
            ax.plot([ln.lo, ln.hi], [y, y], color="C0", lw=2, solid_capstyle="butt")
        if ln.mean is not None:
            ax.plot([ln.mean], [y], "o", color="C0", ms=5,
                    label=None if ours_labelled else "ours (mean, 95% interval)")
            ours_labelled = True
        lab = None if paper_labelled else "paper"
        if ln.paper is not None:
            ax.plot([ln.paper], [y], "D", color="C1", ms=6, mfc="none", mew=1.6, label=lab)
            paper_labelled = True
        elif ln.paper_range is not None:
            ax.fill_betweenx([y - 0.35, y + 0.35], *ln.paper_range, color="C1", alpha=0.3,
                             label=lab)
            paper_labelled = True
    ax.set_yticks(ys)
    ax.set_yticklabels([ln.label for ln in lines], fontsize=7)
    ax.set_ylim(-0.7, len(lines) - 0.3)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def forest_figure(result, out: str | Path, profile: str = "") -> Path | None:
    """Draw one claim's forest plot to ``out`` (PNG, 120 dpi); None when the claim has no
    finite estimate at this profile (nothing is drawn empty)."""
    per_arm, gains = forest_lines(result)
    if not any(ln.mean is not None for ln in per_arm + gains):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(lines, xl) for lines, xl in
              ((per_arm, result.claim.get("label") or result.claim.get("metric", "estimate")),
               (gains, "gain (primary - baseline)")) if lines]
    n = max(len(lines) for lines, _ in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 1.5, 0.28 * n + 1.6),
                             squeeze=False)
    for ax, (lines, xl) in zip(axes[0], panels):
        unit = result.claim.get("unit")
        _panel(ax, lines, f"{xl} ({unit})" if unit else xl)
    cid = result.claim["id"]
    fig.suptitle(f"{cid}: {result.claim.get('title', '')} — verdict {result.verdict}"
                 + (f" (profile {profile})" if profile else ""), fontsize=9)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def forest_figures(results, fig_dir: str | Path, profile: str = "") -> list[Path]:
    """``forest_<claim>.png`` in ``fig_dir`` for every claim with something to draw."""
    made = []
    for r in results:
        f = forest_figure(r, Path(fig_dir) / f"forest_{r.claim['id'].lower()}.png", profile)
        if f is not None:
            made.append(f)
    return made
