"""Forest plots: one figure per claim, our estimate and interval for every setting x arm beside
the paper's figure.

Each line of a forest plot is one arm in one setting of the claim's table: the dot is our mean
over encoder seeds, the bar its 95% t-interval (no bar with fewer than two encoders; with one
encoder, the single fit's or timing's own interval where the table shows one, dashed). The
paper's number is an orange diamond on the lines of the paper's own settings only (a band
where the paper gives a range, e.g. C2's ``lambda`` of 0.33-0.50; for C5 and C10 the
paper's ``gain >= 0``, for C9 the exactness tolerance). The paper's settings and the
profile's scale-model settings never share an axis: each has its own panels (values, and
for claims with gains the primary arm's gain over the baseline beside them), the paper's
first, so that no scale-model interval can be read against the paper's figure. A claim with
several metrics (C6, C10) draws them in the same panels (they share a unit), each line
naming its metric.
Nothing here computes a verdict: the figure only draws
:class:`~weince.report.verdicts.ClaimResult`.
"""

from __future__ import annotations

import math
import shutil
import textwrap
from typing import Any
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from weince.utils.plotting import pyplot

__all__ = ["ForestLine", "forest_lines", "forest_panels", "has_forest", "forest_figure",
           "forest_figures"]


@dataclass
class ForestLine:
    """One line of a forest plot: ``label``, our ``mean`` and interval (``lo``/``hi`` None
    without one; ``fit_interval`` True when it is a single fit's own interval, n = 1), the
    paper's value (``paper``) or range (``paper_range``), if any."""

    label: str
    mean: float | None          # None: a paper setting this profile did not run
    lo: float | None = None
    hi: float | None = None
    paper: float | None = None
    paper_range: tuple[float, float] | None = None
    fit_interval: bool = False
    metric: str = ""
    paper_setting: bool = True   # False: a scale-model row (its own panels, no paper mark)


Panel = tuple[str, list[ForestLine], str]   # (title, lines, x label)


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(float(x))


def _paper_for_arm(paper: dict, arm: str, arms: dict) -> tuple[float | None, tuple | None]:
    """The paper's figure for one arm of a row: ``baseline``/``treatment`` values belong to
    the claim's baseline/primary arm; a single ``value`` or a ``low``-``high`` range is the
    claim's figure for its primary arm (kind norms: every arm, ``primary: all``)."""
    primary = arms.get("primary")
    if arm == arms.get("baseline") and _finite(paper.get("baseline")):
        return float(paper["baseline"]), None
    if arm == primary or primary == "all":
        if _finite(paper.get("treatment")):
            return float(paper["treatment"]), None
        if _finite(paper.get("value")):
            return float(paper["value"]), None
        if _finite(paper.get("low")) and _finite(paper.get("high")):
            return None, (float(paper["low"]), float(paper["high"]))
    return None, None


def _paper_gain(paper: dict) -> float | None:
    g = paper.get("gain")
    if g is not None and _finite(g):
        return float(g)
    if _finite(paper.get("treatment")) and _finite(paper.get("baseline")):
        return float(paper["treatment"]) - float(paper["baseline"])
    return None


def _single_interval(cell) -> tuple[float, float] | None:
    """The interval the table shows for a single encoder: the fit's (C1, C2) or the timing
    file's (C8)."""
    if cell is None:
        return None
    ex = cell.extra or {}
    if _finite(ex.get("lo")) and _finite(ex.get("hi")):
        return float(ex["lo"]), float(ex["hi"])
    iv = ex.get("interval")
    if isinstance(iv, list) and len(iv) == 1 and isinstance(iv[0], (list, tuple)) \
            and len(iv[0]) == 2 and all(_finite(v) for v in iv[0]):
        return float(iv[0][0]), float(iv[0][1])
    return None


def forest_lines(result) -> tuple[list[ForestLine], list[ForestLine]]:
    """``(per-arm lines, gain lines)`` of a :class:`ClaimResult`, in table order.

    Per-arm lines: every arm with a finite estimate in every row, and the paper's figure
    alone (``mean`` None) for a paper setting the profile did not run. Gain lines: the
    primary arm's gain over the baseline in rows where we have one, and the paper's gain
    alone on its settings that did not run. Paper figures only on the paper's settings."""
    claim = result.claim
    arms = claim.get("arms") or {}
    kind = claim.get("kind")
    per_arm, gains = [], []
    for row in result.rows:
        where = row.setting.label()
        metric = row.label or row.metric
        paper_row = bool(row.paper_setting)
        pp = (row.paper or {}) if paper_row else {}
        names = list(row.cells) or [a for a in (arms.get("baseline"), arms.get("primary")) if a]
        for arm in names:
            cell = row.cells.get(arm)
            est = cell.est if cell is not None else None
            paper, band = _paper_for_arm(pp, arm, arms)
            if kind == "exact" and paper_row and _finite(claim.get("tolerance")):
                band = (0.0, float(claim["tolerance"]))
            label = arm if arm != "all" else "all units"
            if est is None or not _finite(est.mean):
                if paper is not None or band is not None:   # the paper's figure alone
                    per_arm.append(ForestLine(f"{where} | {label} (not run)", None,
                                              paper=paper, paper_range=band, metric=metric,
                                              paper_setting=paper_row))
                continue
            lo, hi, fit = (est.lo, est.hi, False) if est.has_interval else (None, None, False)
            single = _single_interval(cell) if lo is None and est.n == 1 else None
            if single is not None:
                (lo, hi), fit = single, True
            per_arm.append(ForestLine(f"{where} | {label}", float(est.mean), lo, hi, paper,
                                      band, fit, metric, paper_row))
        base = arms.get("baseline", "baseline")
        prim = arms.get("primary")
        shown = {a: e for a, e in (row.gains or {}).items() if _finite(e.mean)}
        if kind in ("gain", "noninferior") and paper_row and prim and prim not in shown:
            g = _paper_gain(pp)
            if g is not None:   # a number of the paper's; its blanket "gain >= 0" is not drawn
                gains.append(ForestLine(f"{where} | {prim} - {base} (not run)", None,
                                        paper=g, metric=metric))
        for arm, est in shown.items():
            paper, band = None, None
            if arm == prim and paper_row:
                paper = _paper_gain(pp)
                if kind == "noninferior":
                    band = (0.0, math.inf)   # the paper's claim: gain >= 0
            gains.append(ForestLine(f"{where} | {arm} - {base}", float(est.mean),
                                    est.lo if est.has_interval else None,
                                    est.hi if est.has_interval else None, paper, band,
                                    metric=metric, paper_setting=paper_row))
    return per_arm, gains


def _unit(claim: dict) -> str:
    u = (claim.get("unit") or "").strip()
    return u if not u or u.startswith("(") else f"({u})"


def _axis_label(name: str, unit: str) -> str:
    """``name`` with its unit once (the label may carry it already)."""
    return name if not unit or unit in name else f"{name} {unit}"


PAPER_GROUP = "the paper's settings"
SCALE_GROUP = "scale-model settings (no verdict; not the paper's)"


def _relabel(lines: list[ForestLine], several: bool) -> tuple[list[ForestLine], str]:
    """The lines of one panel with the metric in each label (a claim with several) and,
    when every line has the same setting, that setting taken out of the labels (returned,
    for the panel's title)."""
    wheres = {ln.label.split(" | ", 1)[0] for ln in lines}
    common = wheres.pop() if len(wheres) == 1 else ""
    out = []
    for ln in lines:
        where, _, what = ln.label.partition(" | ")
        head = ", ".join(x for x in (("" if common else where), (ln.metric if several
                                                                  else "")) if x)
        out.append(ForestLine(**{**ln.__dict__, "label": f"{head} | {what}" if head
                                 else what}))
    return out, common


def _merge_not_run(lines: list[ForestLine], several: bool = False) -> list[ForestLine]:
    """The paper's figure alone on several settings that did not run, the same figure for
    the same arm (C1's xi ~ -0.39 on six settings): one line, ``"<arm> (6 settings, not
    run)"``, in place of the first, its metric kept where the panel has ``several``; the
    claim's page lists the settings."""
    groups: dict[tuple, list[ForestLine]] = {}
    for ln in lines:
        if ln.mean is None:
            what = ln.label.split(" | ")[-1]
            groups.setdefault((what, ln.paper, ln.paper_range, ln.metric), []).append(ln)
    out = []
    for ln in lines:
        if ln.mean is not None:
            out.append(ln)
            continue
        what = ln.label.split(" | ")[-1]
        same = groups[(what, ln.paper, ln.paper_range, ln.metric)]
        if len(same) == 1:
            out.append(ln)
        elif ln is same[0]:
            label = what.replace(" (not run)", f" ({len(same)} settings, not run)")
            out.append(ForestLine(**{**ln.__dict__, "label": f"{ln.metric} | {label}"
                                     if several and ln.metric else label}))
    return out


def _panel_grid(result) -> list[tuple[Panel | None, ...]]:
    """Rows of (values panel, gain panel), each ``(title, lines, x label)`` or None: the
    paper's settings, then the scale-model settings; a group's metrics share its panels
    (each label names its metric; they share the unit), a single metric names the axis."""
    claim = result.claim
    per_arm, gains = forest_lines(result)
    unit = _unit(claim)
    name = claim.get("label") or claim.get("metric") or "estimate"
    grid = []
    for paper_group, group in ((True, PAPER_GROUP), (False, SCALE_GROUP)):
        mine = [ln for ln in per_arm if ln.paper_setting == paper_group]
        gain = [ln for ln in gains if ln.paper_setting == paper_group]
        metrics = list(dict.fromkeys(ln.metric for ln in mine + gain))
        several = len(metrics) > 1
        value_name = name if several or not metrics else (claim.get("label") or metrics[0]
                                                          or name)
        row: list[Panel | None] = []
        for lines, xl in ((mine, _axis_label(value_name, unit)),
                          (gain, _axis_label("gain (primary - baseline)", unit))):
            if not lines:
                row.append(None)
                continue
            lines, common = _relabel(lines, several)
            lines = _merge_not_run(lines, several)
            title = group[0].upper() + group[1:] + (f": {common}" if common else "")
            if not several and metrics[0] and claim.get("label") is None and "gain" in xl:
                xl = _axis_label(f"gain in {metrics[0]}", unit)
            row.append((title, lines, xl))
        if any(row):
            grid.append(tuple(row))
    return grid


def forest_panels(result) -> list[tuple[str, list[ForestLine], str]]:
    """``(panel title, lines, x label)`` of each panel, in reading order: the paper's
    settings, then the scale-model settings (never one axis for both); our values and
    (gain claims) the gains of each."""
    return [p for row in _panel_grid(result) for p in row if p is not None]


# font sizes (points) for a figure 10.5 in wide at 120 dpi: shown at about 900 px on a
# page, a 9 pt tick label is about 11 px high
_TICK, _LABEL, _TITLE = 9, 9.5, 10
_WRAP = 34   # characters of a y tick label before it wraps at " | "


def _tick_label(label: str) -> str:
    if len(label) <= _WRAP or " | " not in label:
        return label
    where, _, what = label.partition(" | ")
    return f"{where}\n{what}"


# what a point and its interval are, by claim kind: the legend says what is drawn
_OURS = {
    "exact": ("ours (the largest |difference| recorded)", "95% t-interval",
              "interval of the single check (n = 1)"),
    "overhead": ("ours (mean over timing runs)", "95% t-interval across timing files",
                 "95% t-interval across the timing runs of one file"),
    "norms": ("ours (mean over the setting's units)", "95% t-interval across units",
              "interval of the single unit (n = 1)"),
}
_OURS_DEFAULT = ("ours (mean over encoder seeds)", "95% t-interval across encoder seeds",
                 "interval of the single fit (n = 1)")


def legend_words(kind: str | None) -> tuple[str, str, str]:
    """The legend's words for our point, our interval across files, and the interval a
    single file carries, on a claim of ``kind``: a mean over encoder seeds for the training
    claims, over timing runs for C8, the recorded largest difference for C9."""
    return _OURS.get(kind or "", _OURS_DEFAULT)


def _panel(ax, lines: list[ForestLine], xlabel: str, title: str, band_label: str,
           kind: str | None = None) -> list:
    ours_label, interval_label, single_label = legend_words(kind)
    ys = list(range(len(lines)))[::-1]
    handles: dict[str, Any] = {}
    for y, ln in zip(ys, lines):
        if ln.lo is not None and ln.hi is not None:
            h, = ax.plot([ln.lo, ln.hi], [y, y], color="C0", lw=2.2 if not ln.fit_interval
                         else 1.4, ls="-" if not ln.fit_interval else "--",
                         solid_capstyle="butt")
            key = single_label if ln.fit_interval else interval_label
            handles.setdefault(key, h)
        if ln.mean is not None:
            h, = ax.plot([ln.mean], [y], "o", color="C0", ms=6)
            handles.setdefault(ours_label, h)
        if ln.paper is not None:
            h, = ax.plot([ln.paper], [y], "D", color="C1", ms=7, mfc="none", mew=1.8)
            handles.setdefault("the paper's figure (its own settings only)", h)
        if ln.paper_range is not None:
            lo, hi = ln.paper_range
            if math.isinf(hi):   # the paper's "gain >= 0" (C5, C10)
                h, = ax.plot([lo], [y], ">", color="C1", ms=8)
                handles.setdefault("paper: gain >= 0", h)
            else:
                h = ax.fill_betweenx([y - 0.35, y + 0.35], lo, hi, color="C1", alpha=0.3)
                handles.setdefault(band_label, h)
    if "gain" in xlabel:
        ax.axvline(0.0, color="0.6", lw=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([_tick_label(ln.label) for ln in lines], fontsize=_TICK)
    ax.set_ylim(-0.7, len(lines) - 0.3)
    ax.set_xlabel(xlabel, fontsize=_LABEL)
    if title:
        ax.set_title("\n".join(textwrap.wrap(title, 40)), fontsize=_TITLE, loc="left")
    ax.tick_params(axis="x", labelsize=_TICK)
    ax.grid(axis="x", alpha=0.3)
    xs = [float(v) for ln in lines for v in (ln.mean, ln.lo, ln.hi, ln.paper)
          if v is not None and _finite(v)]
    xs += [v for ln in lines if ln.paper_range for v in ln.paper_range if _finite(v)]
    if xs:
        lo, hi = min(xs), max(xs)
        pad = (hi - lo) * 0.08 or max(abs(hi), 1e-3) * 0.5
        ax.set_xlim(lo - pad, hi + pad)
    return list(handles.items())


def has_forest(result) -> bool:
    """Whether the claim has a forest plot: at least one finite estimate to draw. Not the
    noise-floor kind (C11): its rows mix a slope and MSEs over three decades; its figure is
    the paper's (``weince.report.figures.noise_floor_figure``)."""
    if result.claim.get("kind") == "noise_floor":
        return False
    per_arm, gains = forest_lines(result)
    return any(ln.mean is not None for ln in per_arm + gains)


def forest_figure(result, out: str | Path, profile: str = "") -> Path | None:
    """Draw one claim's forest plot to ``out`` (PNG, 120 dpi); None when the claim has no
    finite estimate at this profile (nothing is drawn empty). Rows of panels: the paper's
    settings, then the scale-model settings; columns: values, gains (gain claims)."""
    if not has_forest(result):
        return None
    plt = pyplot()
    claim = result.claim
    grid = _panel_grid(result)
    cols = [c for c in (0, 1) if any(row[c] is not None for row in grid)]
    grid = [tuple(row[c] for c in cols) for row in grid]
    ncols = len(cols)
    nlines = [max(len(p[1]) + sum(_tick_label(ln.label) != ln.label for ln in p[1]) * 0.6
                  for p in row if p is not None) for row in grid]
    width = 10.5 if ncols == 2 else 7.0
    height = sum(0.3 * n + 1.25 for n in nlines) + 1.4
    fig, axes = plt.subplots(len(grid), ncols, figsize=(width, height), squeeze=False,
                             layout="constrained",
                             gridspec_kw={"height_ratios": [n + 3 for n in nlines]})
    band = "tolerance" if claim.get("kind") == "exact" else "paper (range)"
    handles: dict = {}
    for axrow, row in zip(axes, grid):
        for ax, panel in zip(axrow, row):
            if panel is None:
                ax.axis("off")
                continue
            title, lines, xl = panel
            for k, h in _panel(ax, lines, xl, title, band, claim.get("kind")):
                handles.setdefault(k, h)
    cid = claim["id"]
    head = f"{cid}: {claim.get('short_title', claim.get('title', ''))}"
    sub = (result.verdict if result.verdict.startswith("no verdict") else
           f"verdict: {result.verdict}") + (f"   (profile {profile})" if profile else "")
    fig.suptitle("\n".join(textwrap.wrap(head, 80) + [sub]), fontsize=11)
    if handles:
        fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center",
                   ncols=min(3 if ncols == 2 else 2, len(handles)), fontsize=_TICK,
                   frameon=False)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def forest_figures(results, fig_dir: str | Path, profile: str = "",
                   drawn: Mapping[str, str | Path] | None = None, draw: bool = True
                   ) -> list[Path]:
    """``forest_<claim>.png`` in ``fig_dir`` for every claim with something to draw.

    ``draw=False``: only the paths, nothing drawn (the summary's text is the same; a bundle's
    verification compares text and never looks at the images).

    ``drawn``: ``{claim id: PNG}`` already drawn from the same result files (the workflow's
    claim-table jobs draw each claim's plot for its page): such a plot is copied, not drawn
    a second time; a claim missing from it, or whose file is absent, is drawn here."""
    made = []
    for r in results:
        cid = r.claim["id"]
        out = Path(fig_dir) / f"forest_{cid.lower()}.png"
        if not draw:
            if has_forest(r):
                made.append(out)
            continue
        src = (drawn or {}).get(cid)
        if src is not None and Path(src).is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
            made.append(out)
            continue
        f = forest_figure(r, out, profile)
        if f is not None:
            made.append(f)
    return made
