"""The figures of the norms page (claims N1-N3), from the per-probe arrays of each unit
(``norms_probes.npz``): ``norms_n1.png`` (the predicted equilibrium norm against the
measured one) and ``norms_n2.png`` (heat and radial drift against the norm).

    from weince.norms.figures import norms_figures
    norms_figures([("digits/smallcnn weince s0", arrays)], "reports/default/norms_figures")
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from weince.utils.plotting import pyplot

__all__ = ["norms_figures"]


def norms_figures(units: Sequence[tuple[str, Mapping[str, Any]]], fig_dir: str | os.PathLike
                  ) -> dict[str, Path]:
    """The N1-N3 page's figures from per-probe arrays (``norms_probes.npz``), one panel per
    ``(label, arrays)`` unit: ``norms_n1.png`` (predicted ``R_eq`` against measured
    ``||z||``) and ``norms_n2.png`` (heat and radial drift against the norm)."""
    plt = pyplot()
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    if not units:
        return out
    n = len(units)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    for ax, (label, a) in zip(axes.flat, units):
        ok = np.isfinite(a["r_eq"]) & (a["r_eq"] > 0)
        if ok.any():
            ax.scatter(a["r_eq"][ok], a["norm_z"][ok], s=6, alpha=0.6)
            ax.set_xscale("log")
        ax.set_title(label, fontsize=7)
        ax.set_xlabel("predicted R_eq", fontsize=7)
        ax.set_ylabel("measured ||z||", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    out["n1"] = fig_dir / "norms_n1.png"
    fig.savefig(out["n1"], dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(n, 2, figsize=(6.4, 2.6 * n), squeeze=False)
    for (label, a), (ax1, ax2) in zip(units, axes):
        ax1.scatter(a["heat"], a["norm_z"], s=5, alpha=0.6)
        ax1.set_xscale("log")
        ax1.set_xlabel("heat", fontsize=7)
        ax2.scatter(a["drift"], a["norm_z"], s=5, alpha=0.6, color="tab:orange")
        ax2.set_xlabel("radial drift <g, u>", fontsize=7)
        for ax in (ax1, ax2):
            ax.set_ylabel("||z||", fontsize=7)
            ax.set_title(label, fontsize=7)
            ax.tick_params(labelsize=6)
    fig.tight_layout()
    out["n2"] = fig_dir / "norms_n2.png"
    fig.savefig(out["n2"], dpi=120)
    plt.close(fig)
    return out
