"""Figures of the tail and link diagnostics (matplotlib, Agg canvas; PNG and PDF).

Each function takes a fit result and an output stem (``DIR/name``, no suffix), writes
``stem.png`` and ``stem.pdf``, and returns the two paths; ``setting`` (from
:func:`setting_label` of the score file's ``meta``: data set / backbone, arm, encoder seed)
is the title's second line, since each figure shows one encoder's fit, not the mean across
encoder seeds that the claim tables report. pyplot is not used, so nothing here touches a
display or the global backend.

- :func:`plot_exceedance_density` — histogram of the exceedances with the GPD fit and the
  ``xi = 0`` (exponential, Gumbel-domain) fit.
- :func:`plot_qq` — exceedance quantiles against the fitted GPD (and exponential).
- :func:`plot_threshold_stability` — ``xi`` with its profile interval against the threshold.
- :func:`plot_mean_excess` — mean excess ``e(u)`` with a 95% band.
- :func:`plot_lambda_profile` — profile deviance of ``lambda`` with the interval.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from weince.evt.gpd import GPDFit
from weince.evt.link import LinkFit

__all__ = ["save_figure", "plot_exceedance_density", "plot_qq", "plot_threshold_stability",
           "plot_mean_excess", "plot_lambda_profile", "setting_label"]

PAPER_XI = -0.39


def setting_label(meta: Mapping[str, Any] | None) -> str:
    """``"digits / smallcnn, infonce, encoder seed 7"`` from a score file's ``meta`` (the
    encoder's data set, backbone, loss and seed; the seed from ``encoder_seed``, else from
    the run folder ``.../seed<N>/`` of its encoder); the parts it lacks are left out."""
    meta = meta or {}
    where = " / ".join(str(meta[k]) for k in ("dataset", "backbone") if meta.get(k))
    seed = meta.get("encoder_seed")
    if seed is None:
        m = re.search(r"(?:^|[/\\])seed(\d+)(?:[/\\]|$)", str(meta.get("encoder", "")))
        seed = m.group(1) if m else None
    parts = [where, str(meta["loss"]) if meta.get("loss") else "",
             f"encoder seed {seed}" if seed is not None else ""]
    return ", ".join(x for x in parts if x)


def _figure(width: float = 4.8, height: float = 3.4, two_line_title: bool = False):
    # matplotlib (the workflow extra) on the first figure: `weince evt` fits on the core install
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    # fixed margins (constrained layout and mathtext cost seconds on a busy CPU)
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.15,
                        top=0.9 - (0.25 / height if two_line_title else 0.0))
    return fig, fig.add_subplot()


def _title(ax, what: str, setting: str) -> None:
    """``what`` over the setting the figure's fit is of (one encoder)."""
    ax.set_title(what + (f"\n{setting}" if setting else ""), fontsize=10)


def save_figure(fig, stem) -> list[Path]:
    """Write ``stem.png`` (150 dpi) and ``stem.pdf``; returns the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".pdf")]
    fig.savefig(paths[0], dpi=150)
    fig.savefig(paths[1])
    return paths


def _exceedances(fit: GPDFit) -> np.ndarray:
    if fit.exceedances is None:
        raise ValueError("this GPDFit carries no exceedances (loaded from JSON?); refit with "
                         "fit_gpd_pot to plot it")
    return np.sort(fit.exceedances)


def plot_exceedance_density(fit: GPDFit, stem, *, bins: int = 60,
                            setting: str = "") -> list[Path]:
    """Histogram (density) of ``s - u`` with the GPD(xi, sigma) and exponential(sigma0) pdfs."""
    y = _exceedances(fit)
    fig, ax = _figure(two_line_title=bool(setting))
    ax.hist(y, bins=bins, density=True, color="0.8", edgecolor="0.6", label="exceedances")
    top = y.max() if fit.endpoint is None else max(y.max(), fit.endpoint - fit.threshold)
    grid = np.linspace(0, top, 400)
    ax.plot(grid, stats.genpareto.pdf(grid, fit.xi, scale=fit.sigma), color="C3",
            label=f"GPD  ξ̂ = {fit.xi:.3f} [{fit.xi_ci[0]:.3f}, {fit.xi_ci[1]:.3f}]")
    ax.plot(grid, stats.expon.pdf(grid, scale=fit.sigma0), color="C0", ls="--",
            label=f"ξ = 0 (exponential), LR = {fit.lr_stat_exp:.1f}")
    if fit.endpoint is not None:
        ax.axvline(fit.endpoint - fit.threshold, color="C3", ls=":", lw=1,
                   label=f"endpoint s={fit.endpoint:.4f}")
    ax.set_xlabel(f"exceedance s - u  (u = {fit.threshold:.4f}, q = {fit.q})")
    ax.set_ylabel("density")
    _title(ax, f"POT tail, {fit.n_exceed} exceedances", setting)
    ax.legend(fontsize=7)
    return save_figure(fig, stem)


def plot_qq(fit: GPDFit, stem, *, setting: str = "") -> list[Path]:
    """Empirical exceedance quantiles against the fitted GPD and exponential quantiles."""
    y = _exceedances(fit)
    n = y.size
    p = (np.arange(1, n + 1) - 0.5) / n
    if n > 4000:                       # thin the middle, keep every point of the tails
        keep = np.unique(np.r_[np.arange(0, n, n // 2000), np.arange(n - 200, n)])
        y, p = y[keep], p[keep]
    fig, ax = _figure(4.2, 4.0, two_line_title=bool(setting))
    ax.plot(stats.genpareto.ppf(p, fit.xi, scale=fit.sigma), y, ".", ms=2, color="C3",
            label="GPD fit")
    ax.plot(stats.expon.ppf(p, scale=fit.sigma0), y, ".", ms=2, color="C0", alpha=0.5,
            label="ξ = 0 fit")
    lim = [0, float(y.max())]
    ax.plot(lim, lim, color="k", lw=0.8)
    ax.set_xlabel("model quantile")
    ax.set_ylabel("empirical quantile of s - u")
    _title(ax, "QQ plot of exceedances", setting)
    ax.legend(fontsize=7)
    return save_figure(fig, stem)


def plot_threshold_stability(rows: Sequence[dict[str, Any]], stem, *,
                             reference: float | None = PAPER_XI,
                             setting: str = "") -> list[Path]:
    """``xi`` with its interval against the threshold quantile (rows of
    :func:`weince.evt.threshold_stability`); a dashed line marks ``reference`` (the paper)."""
    ok = [r for r in rows if "xi" in r]
    fig, ax = _figure(two_line_title=bool(setting))
    if ok:
        q = np.array([r["q"] for r in ok])
        xi = np.array([r["xi"] for r in ok])
        lo = np.array([r["xi_ci"][0] for r in ok])
        hi = np.array([r["xi_ci"][1] for r in ok])
        ax.errorbar(q, xi, yerr=[xi - lo, hi - xi], fmt="o-", capsize=3, color="C3",
                    label="ξ̂ (profile 95%)")
        for r in ok:
            ax.annotate(str(r["n_exceed"]), (r["q"], r["xi"]), textcoords="offset points",
                        xytext=(4, 4), fontsize=6)
    ax.axhline(0.0, color="0.5", lw=0.8)
    if reference is not None:
        ax.axhline(reference, color="C0", ls="--", lw=1, label=f"paper ξ = {reference}")
    ax.set_xlabel("threshold quantile q (labels: exceedances)")
    ax.set_ylabel("ξ")
    _title(ax, "threshold stability", setting)
    ax.legend(fontsize=7)
    return save_figure(fig, stem)


def plot_mean_excess(me: dict[str, list[float]], stem, *, setting: str = "") -> list[Path]:
    """Mean excess ``e(u)`` against ``u`` with its 95% band (from :func:`weince.evt.mean_excess`);
    linear with slope ``xi / (1 - xi)`` under a GPD tail."""
    fig, ax = _figure(two_line_title=bool(setting))
    u = np.asarray(me["u"])
    ax.fill_between(u, me["ci_lo"], me["ci_hi"], color="C0", alpha=0.25, lw=0)
    ax.plot(u, me["mean_excess"], color="C0")
    ax.set_xlabel("threshold u")
    ax.set_ylabel("mean excess E[s - u | s > u]")
    _title(ax, "mean-excess plot", setting)
    return save_figure(fig, stem)


def plot_lambda_profile(fit: LinkFit, stem, *, setting: str = "") -> list[Path]:
    """Profile deviance ``2 (l_max - l_p(lambda))`` with the chi2_1 cut and this encoder's
    ``lambda_hat`` and interval (one fit: the C2 table's figure is the mean over encoder
    seeds, with its t-interval)."""
    lam = np.asarray(fit.profile.get("lam", []), dtype=float)
    if lam.size == 0:
        raise ValueError("this LinkFit has no profile points")
    ll = np.asarray(fit.profile["loglik"], dtype=float)
    dev = np.maximum(2.0 * (fit.profile.get("loglik_max", ll.max()) - ll), 0.0)
    crit = float(stats.chi2.ppf(fit.ci_level, 1))
    fig, ax = _figure(two_line_title=bool(setting))
    ax.plot(lam, dev, "o-", ms=3, color="C3")
    ax.axhline(crit, color="0.4", ls="--", lw=1, label=f"χ²₁({fit.ci_level:g}) = {crit:.2f}")
    ax.axvspan(fit.lam_ci[0], fit.lam_ci[1], color="C3", alpha=0.12,
               label=f"this fit: λ̂ = {fit.lam:.3f}, profile 95% "
                     f"[{fit.lam_ci[0]:.3f}, {fit.lam_ci[1]:.3f}]")
    ax.axvline(fit.lam, color="C3", lw=0.8)
    ax.set_ylim(0, max(3 * crit, min(float(dev.max()), 10 * crit)) * 1.05)
    ax.set_xlabel("λ (0 = softmax link)")
    ax.set_ylabel("profile deviance")
    _title(ax, f"link selection: LR vs softmax {fit.lr_stat:.1f}, p = {fit.p_value:.2g}",
           setting)
    ax.legend(fontsize=7)
    return save_figure(fig, stem)
