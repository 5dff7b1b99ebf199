"""The tail and link fits of a saved score file, written as result files.

    from weince.evt.fits import run_evt, run_pot, run_link
    run_pot("scores.npz", "pot.json")      # + figures/ beside it
    run_link("scores.npz", "link.json")

``pot.json``: GPD fit at ``q``, threshold stability over ``STABILITY_QS``, mean-excess data;
``link.json``: the link-selection fit when the file holds ``sim`` and ``targets`` (otherwise a
``not_run`` record saying why). Warnings raised by the fits are printed and recorded.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from weince.evt import plots
from weince.evt.config import STABILITY_QS, LinkConfig, PotConfig
from weince.evt.gpd import fit_gpd_pot, mean_excess, threshold_stability
from weince.evt.link import fit_link_selection, simclr_pair_ids
from weince.evt.scorefile import load_scores
from weince.utils import write_json

__all__ = ["run_evt", "run_pot", "run_link", "STABILITY_QS", "PAPER"]

PAPER = {"xi": -0.39, "lambda": [0.33, 0.50]}



# the keyword defaults (the workflow's vision.evt.pot and vision.evt.link blocks are typed)
_POT, _LINK = PotConfig(), LinkConfig()


def run_pot(scores_path, out_json, *, q: float = _POT.q, qs=_POT.qs, n_boot: int = _POT.n_boot,
            gof_boot: int = _POT.gof_boot, seed: int = _POT.seed,
            figures: bool = _POT.figures) -> dict[str, Path]:
    """POT/GPD fit (``docs/method.md``, "Tail diagnostics") of the ``scores`` in
    ``scores_path``: writes ``out_json`` and,
    with ``figures``, ``figures/gpd_density``, ``gpd_qq``, ``xi_threshold``, ``mean_excess``
    (PNG and PDF) next to it. Returns the written paths by name."""
    out_json = Path(out_json)
    data = load_scores(scores_path)
    meta = data.get("meta", {})
    cfg = {"scores": str(scores_path), "q": q, "qs": list(qs), "n_boot": n_boot,
           "gof_boot": gof_boot}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        groups = data.get("batch")
        if groups is None:
            warnings.warn(f"{scores_path} records no batch ids: no batch-bootstrap interval "
                          "for xi (the profile interval treats exceedances as independent, "
                          "which they are not); re-collect the scores", stacklevel=1)
        pot = fit_gpd_pot(data["scores"], q=q, n_boot=n_boot, gof_boot=gof_boot, seed=seed,
                          groups=groups, n_boot_batch=n_boot)
        stab = threshold_stability(data["scores"], qs=qs)
        me = mean_excess(data["scores"])
    written = {"pot": write_json(out_json, {
        "fit": pot.to_dict(), "threshold_stability": stab, "mean_excess": me,
        "paper": {"xi": PAPER["xi"]}, "n_scores": int(data["scores"].size),
        "warnings": _report(caught), "meta": meta}, cfg=cfg, seed=seed)}
    if figures:
        fig_dir = out_json.parent / "figures"
        setting = plots.setting_label(meta)
        drawn: list[tuple[str, Callable[..., list[Path]], Any]] = [
            ("gpd_density", plots.plot_exceedance_density, pot), ("gpd_qq", plots.plot_qq, pot),
            ("xi_threshold", plots.plot_threshold_stability, stab),
            ("mean_excess", plots.plot_mean_excess, me)]
        for name, fn, arg in drawn:
            png, pdf = fn(arg, fig_dir / name, setting=setting)
            written[f"figures/{name}.png"], written[f"figures/{name}.pdf"] = png, pdf
    return written


def run_link(scores_path, out_json, *, tau: float | None = _LINK.tau, beta: float = _LINK.beta,
             eps: float = _LINK.eps, seed: int = _LINK.seed,
             figures: bool = _LINK.figures) -> dict[str, Path]:
    """Link-selection fit (``docs/method.md``, "Link selection") of the ``sim, targets,
    mask`` in ``scores_path``: writes
    ``out_json`` and ``figures/lambda_profile`` next to it. ``tau`` defaults to the score
    file's ``meta["tau"]`` (the encoder's training temperature), else 0.5. Without link
    batches in the file, ``out_json`` records ``status: not_run`` and the reason."""
    out_json = Path(out_json)
    data = load_scores(scores_path)
    meta = data.get("meta", {})
    if tau is None:
        tau = float(meta.get("tau", 0.5))
    cfg = {"scores": str(scores_path), "tau": tau, "beta": beta, "eps": eps}
    written: dict[str, Path] = {}
    if "sim" in data and "targets" in data:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pairs = simclr_pair_ids(data["targets"], data["sim"].shape[1])
            if pairs is None:
                warnings.warn("the link batches do not follow the SimCLR layout: no pair-robust "
                              "test (rows are treated as independent)", stacklevel=1)
            link = fit_link_selection(data["sim"], data["targets"], data.get("mask"), tau=tau,
                                      beta=beta, eps=eps, pairs=pairs)
        written["link"] = write_json(out_json, {
            "status": "fitted", "fit": link.to_dict(), "warnings": _report(caught),
            "paper": {"lambda": PAPER["lambda"]}, "meta": meta}, cfg=cfg, seed=seed)
        if figures:
            png, pdf = plots.plot_lambda_profile(link,
                                                 out_json.parent / "figures" / "lambda_profile",
                                                 setting=plots.setting_label(meta))
            written["figures/lambda_profile.png"], written["figures/lambda_profile.pdf"] = png, pdf
    else:
        msg = (f"{scores_path} holds no sim/targets (collect them with `weince collect-scores "
               "--link-batches N`, N > 0)")
        print(f"warning: {msg}", file=sys.stderr)
        written["link"] = write_json(out_json, {"status": "not_run", "reason": msg, "meta": meta},
                                     cfg=cfg, seed=seed)
    return written


def run_evt(scores_path, out_dir, *, q: float = _POT.q, qs=_POT.qs,
            tau: float | None = _LINK.tau, beta: float = _LINK.beta, n_boot: int = _POT.n_boot,
            gof_boot: int = _POT.gof_boot, seed: int = _POT.seed,
            figures: bool = _POT.figures) -> dict[str, Path]:
    """Both fits: ``out_dir/pot.json``, ``out_dir/link.json``, ``out_dir/figures/*``."""
    out = Path(out_dir)
    written = run_pot(scores_path, out / "pot.json", q=q, qs=qs, n_boot=n_boot,
                      gof_boot=gof_boot, seed=seed, figures=figures)
    written.update(run_link(scores_path, out / "link.json", tau=tau, beta=beta, seed=seed,
                            figures=figures))
    return written


def _report(caught) -> list[str]:
    msgs = [str(w.message) for w in caught]
    for m in msgs:
        print(f"warning: {m}", file=sys.stderr)
    return msgs
