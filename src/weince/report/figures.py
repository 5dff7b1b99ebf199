"""Report figures: lambda over training, tail index and link weight per encoder, and the
EVT diagnostic plots collected from the run folders.

All figures are written as PNG (and PDF for the ones drawn here) with matplotlib's Agg
backend; a figure whose inputs are all missing is skipped, never drawn empty.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

__all__ = ["lambda_training_figure", "estimates_figure", "collect_evt_figures",
           "read_jsonl"]

LAMBDA_KEYS = ("lambda_mean", "lam_mean", "lambda")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines log; blank lines skipped; a bad line names the file/line."""
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{i}: not a JSON line ({err})") from err
    return out


def _lambda_series(records: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for i, r in enumerate(records):
        key = next((k for k in LAMBDA_KEYS if isinstance(r.get(k), (int, float))), None)
        if key is None:
            continue
        xs.append(float(r.get("epoch", r.get("step", i))))
        ys.append(float(r[key]))
    return xs, ys


def lambda_training_figure(logs: dict[str, list[Path]], out: Path, title: str) -> Path | None:
    """Mean per-anchor ``lambda`` over training, one line per encoder seed, one colour
    per arm. ``logs``: arm -> train_log.jsonl paths. None when no log has lambda."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    drawn = 0
    for ci, (arm, paths) in enumerate(sorted(logs.items())):
        for j, p in enumerate(paths):
            if not p.exists():
                continue
            xs, ys = _lambda_series(read_jsonl(p))
            if not xs:
                continue
            ax.plot(xs, ys, color=f"C{ci}", alpha=0.8, marker="o", ms=3,
                    label=arm if j == 0 else None)
            drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean lambda over anchors")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return _save(plt, fig, out)


def _save(plt, fig, out: Path) -> Path:
    """PNG (120 dpi) and PDF beside it; closes the figure."""
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    fig.savefig(out.with_suffix(".pdf"))
    plt.close(fig)
    return out


def estimates_figure(points: list[tuple[str, float, float | None, float | None]], out: Path,
                     ylabel: str, title: str, ref: tuple[float, float] | float | None = None,
                     zero_line: bool = True) -> Path | None:
    """One point per encoder (label, value, lo, hi) with its interval; ``ref`` a paper
    value (line) or range (band)."""
    pts = [p for p in points if p[1] is not None]
    if not pts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(pts) + 2), 3.5))
    xs = range(len(pts))
    for x, (lab, v, lo, hi) in zip(xs, pts):
        if lo is not None and hi is not None:
            ax.errorbar([x], [v], yerr=[[v - lo], [hi - v]], fmt="o", color="C0", capsize=3)
        else:
            ax.plot([x], [v], "o", color="C0")
    if isinstance(ref, tuple):
        ax.axhspan(ref[0], ref[1], color="C1", alpha=0.2, label="paper")
    elif ref is not None:
        ax.axhline(ref, color="C1", ls="--", label="paper")
    if zero_line:
        ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([p[0] for p in pts], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    if ref is not None:
        ax.legend(fontsize=8)
    return _save(plt, fig, out)


def collect_evt_figures(run_dir: Path, dest: Path, prefix: str) -> list[Path]:
    """Copy the PNG diagnostics ``weince evt`` wrote into a run folder (QQ plot, GPD
    density, threshold stability, lambda profile) to ``dest`` as ``{prefix}_{name}``."""
    out = []
    for src in sorted(Path(run_dir).glob("*.png")) + sorted(Path(run_dir).glob("figures/*.png")):
        dest.mkdir(parents=True, exist_ok=True)
        tgt = dest / f"{prefix}_{src.name}"
        shutil.copyfile(src, tgt)
        out.append(tgt)
    return out
