"""``weince evt``: POT/GPD tail fit and link-selection fit on a saved score file.

    weince evt --scores scores.npz --out DIR [--q 0.99] [--tau 0.5] [--beta 1.0]

Writes ``DIR/pot.json`` (GPD fit at ``q``, threshold stability over SPEC's q grid,
mean-excess data), ``DIR/link.json`` (the SPEC-5 link fit when the file holds ``sim`` and
``targets``; otherwise a ``not_run`` record saying why) and ``DIR/figures/*.png|pdf``.
Warnings raised by the fits are printed and recorded in the JSON files.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from weince.utils import write_json

__all__ = ["add_arguments", "main", "run_evt", "run_pot", "run_link"]

SPEC_QS = (0.95, 0.975, 0.99, 0.995)
PAPER = {"xi": -0.39, "lambda": [0.33, 0.50]}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scores", required=True, help="score file from `weince collect-scores` (.npz)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--q", type=float, default=0.99, help="threshold quantile (default 0.99)")
    p.add_argument("--qs", type=float, nargs="+", default=list(SPEC_QS),
                   help="threshold-stability grid (default 0.95 0.975 0.99 0.995)")
    p.add_argument("--tau", type=float, default=None,
                   help="the encoder's training temperature (default: the score file's meta, else 0.5)")
    p.add_argument("--beta", type=float, default=1.0, help="shortfall exponent of the link family")
    p.add_argument("--n-boot", type=int, default=200,
                   help="bootstrap resamples for the intervals of xi: over exceedances (a check) "
                        "and over batches (xi_ci_batch, what C1 reads); 0 = skip")
    p.add_argument("--gof-boot", type=int, default=100,
                   help="parametric bootstrap replicates for the Anderson-Darling p-value (0 = skip)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-figures", action="store_true", help="skip the figures")


def run_pot(scores_path, out_json, *, q: float = 0.99, qs=SPEC_QS, n_boot: int = 200,
            gof_boot: int = 100, seed: int = 0, figures: bool = True) -> dict[str, Path]:
    """POT/GPD fit (SPEC 4) of the ``scores`` in ``scores_path``: writes ``out_json`` and,
    with ``figures``, ``figures/gpd_density``, ``gpd_qq``, ``xi_threshold``, ``mean_excess``
    (PNG and PDF) next to it. Returns the written paths by name."""
    from weince.evt.collect import load_scores
    from weince.evt.gpd import fit_gpd_pot, mean_excess, threshold_stability

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
        from weince.evt import plots

        fig_dir = out_json.parent / "figures"
        for name, fn, arg in [("gpd_density", plots.plot_exceedance_density, pot),
                              ("gpd_qq", plots.plot_qq, pot),
                              ("xi_threshold", plots.plot_threshold_stability, stab),
                              ("mean_excess", plots.plot_mean_excess, me)]:
            png, pdf = fn(arg, fig_dir / name)
            written[f"figures/{name}.png"], written[f"figures/{name}.pdf"] = png, pdf
    return written


def run_link(scores_path, out_json, *, tau: float | None = None, beta: float = 1.0,
             eps: float = 1e-6, seed: int = 0, figures: bool = True) -> dict[str, Path]:
    """Link-selection fit (SPEC 5) of the ``sim, targets, mask`` in ``scores_path``: writes
    ``out_json`` and ``figures/lambda_profile`` next to it. ``tau`` defaults to the score
    file's ``meta["tau"]`` (the encoder's training temperature), else 0.5. Without link
    batches in the file, ``out_json`` records ``status: not_run`` and the reason."""
    from weince.evt.collect import load_scores
    from weince.evt.link import fit_link_selection, simclr_pair_ids

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
            from weince.evt import plots

            png, pdf = plots.plot_lambda_profile(link, out_json.parent / "figures" / "lambda_profile")
            written["figures/lambda_profile.png"], written["figures/lambda_profile.pdf"] = png, pdf
    else:
        msg = (f"{scores_path} holds no sim/targets (collect them with `weince collect-scores "
               "--link-batches N`, N > 0)")
        print(f"warning: {msg}", file=sys.stderr)
        written["link"] = write_json(out_json, {"status": "not_run", "reason": msg, "meta": meta},
                                     cfg=cfg, seed=seed)
    return written


def run_evt(scores_path, out_dir, *, q: float = 0.99, qs=SPEC_QS, tau: float | None = None,
            beta: float = 1.0, n_boot: int = 200, gof_boot: int = 100, seed: int = 0,
            figures: bool = True) -> dict[str, Path]:
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


def main(args: argparse.Namespace) -> int:
    written = run_evt(args.scores, args.out, q=args.q, qs=tuple(args.qs), tau=args.tau,
                      beta=args.beta, n_boot=args.n_boot, gof_boot=args.gof_boot,
                      seed=args.seed, figures=not args.no_figures)
    from weince.utils import read_json

    pot = read_json(written["pot"])["fit"]
    print(f"POT: xi = {pot['xi']:.4f} [{pot['xi_ci'][0]:.4f}, {pot['xi_ci'][1]:.4f}], "
          f"sigma = {pot['sigma']:.4g}, u = {pot['threshold']:.4f}, n = {pot['n_exceed']}")
    if pot.get("xi_ci_batch"):
        lo, hi = pot["xi_ci_batch"]
        print(f"     batch-bootstrap interval of xi [{lo:.4f}, {hi:.4f}] "
              f"({pot['n_batches']} batches, {pot['n_boot_batch']} resamples)")
    link = read_json(written["link"])
    if link["status"] == "fitted":
        f = link["fit"]
        print(f"link: lambda = {f['lam']:.4f} [{f['lam_ci'][0]:.4f}, {f['lam_ci'][1]:.4f}], "
              f"c = {f['c']:.4g}, LR = {f['lr_stat']:.2f}, p = {f['p_value']:.3g}")
        if f.get("p_value_pairs") is not None:
            ci = f.get("lam_ci_pairs") or [float("nan")] * 2
            print(f"      pair-robust: p = {f['p_value_pairs']:.3g}, lambda interval "
                  f"[{ci[0]:.4f}, {ci[1]:.4f}] ({f['n_pairs']} pairs)")
    else:
        print(f"link: not run ({link['reason']})")
    print(f"wrote {len(written)} files under {args.out}")
    return 0
