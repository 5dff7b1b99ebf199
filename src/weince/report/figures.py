"""Every report figure: the gate (lambda, rho0) over training, tail index and link weight
per encoder, the EVT diagnostic plots collected from the run folders, and the synthetic
noise-floor figure of C11 as the paper draws it.

All figures are written as PNG (and PDF for the ones drawn here) with matplotlib's Agg
backend; a figure whose inputs are all missing is skipped, never drawn empty.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from weince.train.trainlog import read_jsonl
from weince.utils.plotting import pyplot
from weince.utils.rerun import snakemake_command

__all__ = ["training_curves", "training_curves_figure", "estimates_figure",
           "collect_evt_figures", "noise_floor_figure", "LAMBDA_KEYS",
           "GATE_KEYS"]

# a curve name -> the log keys that hold it (first present wins)
LAMBDA_KEYS = ("lambda_mean", "lam_mean", "lambda")
_ALIASES = {"lambda_mean": LAMBDA_KEYS}
GATE_KEYS = ("lambda_mean", "rho0")
_YLABELS = {"lambda_mean": "mean lambda over anchors", "rho0": "rho0 (pivot of the cap gate)"}

Curves = dict[str, dict[str, dict[int, list[float]]]]


def training_curves(logs: Mapping[str, Sequence[Path]], keys: Sequence[str] = ("lambda_mean",),
                    *, allow_missing: bool = True) -> Curves:
    """``arm -> {key: {epoch: [value per log]}}`` from ``train_log.jsonl`` files (``logs``:
    arm -> paths, one per encoder seed); arms and keys that log nothing are left out. A
    missing log is skipped with ``allow_missing``, else raises ``FileNotFoundError``."""
    curves: Curves = {}
    for arm, paths in logs.items():
        for p in paths:
            if not Path(p).exists():
                if allow_missing:
                    continue
                raise FileNotFoundError(f"training log {p} does not exist; it is written by "
                                        f"`weince pretrain` (make it with {snakemake_command(p)})")
            for i, rec in enumerate(read_jsonl(p)):
                ep = int(rec.get("epoch", i + 1))
                for key in keys:
                    v = next((rec[k] for k in _ALIASES.get(key, (key,))
                              if isinstance(rec.get(k), (int, float))), None)
                    if v is not None and math.isfinite(v):
                        curves.setdefault(arm, {}).setdefault(key, {}).setdefault(
                            ep, []).append(float(v))
    return curves


def training_curves_figure(curves: Curves, out: Path, title: str,
                           keys: Sequence[str] = ("lambda_mean",)) -> Path | None:
    """One panel per key: the mean over encoder seeds per epoch (line) and the min-max band,
    one colour per arm. None when no arm has a curve (nothing is drawn empty)."""
    if not curves:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, len(keys), figsize=(5.0 * len(keys), 3.6), squeeze=False)
    for ci, arm in enumerate(sorted(curves)):
        for ax, key in zip(axes[0], keys):
            series = curves[arm].get(key)
            if not series:
                continue
            eps = sorted(series)
            means = [sum(series[e]) / len(series[e]) for e in eps]
            ax.plot(eps, means, color=f"C{ci % 10}", ls=("-", "--", ":")[(ci // 10) % 3],
                    marker="o", ms=3, label=arm)
            if any(len(series[e]) > 1 for e in eps):
                ax.fill_between(eps, [min(series[e]) for e in eps], [max(series[e]) for e in eps],
                                color=f"C{ci % 10}", alpha=0.15, linewidth=0)
    for ax, key in zip(axes[0], keys):
        ax.set_xlabel("epoch")
        ax.set_ylabel(_YLABELS.get(key, key))
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7)
    fig.suptitle(title + " (line: mean over encoder seeds; band: min-max)", fontsize=9)
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
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(pts) + 2), 3.5))
    xs = range(len(pts))
    for x, (_lab, v, lo, hi) in zip(xs, pts):
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


def noise_floor_figure(data: Mapping[str, Any], out: str | os.PathLike, title: str = ""
                       ) -> Path:
    """C11 as the paper draws it, from ``noise_floor.json``'s content: both estimators' MSE
    of the top-vs-reference log-odds against n on log-log axes (bars: 95% Monte-Carlo
    intervals), the Weibit ``c / n`` line and the softmax's squared-bias floor."""
    plt = pyplot()
    rows = sorted(data["rows"], key=lambda r: r["n"])
    n = np.array([r["n"] for r in rows], dtype=float)
    th = data.get("theory") or {}
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for key, lab, color, marker in (
            ("weibit", "Weibit estimator (correctly specified)", "C0", "o"),
            ("softmax", "restricted softmax estimator", "C3", "s")):
        m = np.array([r[f"mse_{key}"] for r in rows], dtype=float)
        se = np.array([r[f"se_{key}"] for r in rows], dtype=float)
        ax.errorbar(n, m, yerr=1.96 * se, color=color, marker=marker, ms=5, lw=1.6,
                    capsize=2, label=f"{lab}: MSE")
    # the analytic lines in black, drawn over the curves: the Weibit MSE lies on c/n
    ax.plot(n, [r["theory_weibit"] for r in rows], color="k", ls=":", lw=1.8, zorder=4,
            label=f"Weibit theory c/n (c = {th.get('weibit_c', float('nan')):.2f}, Fisher)")
    floor = float(rows[0]["softmax_floor"])
    ax.axhline(floor, color="k", ls="--", lw=1.2, zorder=4,
               label=f"softmax squared-bias floor ({floor:.3g})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sample size n (draws per replicate)")
    ax.set_ylabel("MSE of the top-vs-reference log-odds")
    st = data.get("setting") or {}
    sub = (f"scores {st.get('scores')}, endpoint {st.get('endpoint')}, beta {st.get('beta')}, "
           f"seed {st.get('seed')}\n{st.get('replicates')} replicates per n; bars: 95% "
           f"Monte-Carlo intervals (most smaller than the markers)")
    ax.set_title((title + "\n" if title else "") + sub, fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return _save(plt, fig, Path(out))
