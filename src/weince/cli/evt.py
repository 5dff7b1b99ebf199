"""``weince evt``: POT/GPD tail fit and link-selection fit on a saved score file.

    weince evt --scores scores.npz --out DIR [--q 0.99] [--tau 0.5] [--beta 1.0]

Writes ``DIR/pot.json``, ``DIR/link.json`` and ``DIR/figures/*.png|pdf``
(:func:`weince.evt.fits.run_evt`).
"""

from __future__ import annotations

import argparse

from weince.evt.config import LinkConfig, PotConfig
from weince.evt.fits import run_evt
from weince.utils import read_json

__all__ = ["add_arguments", "main"]

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scores", required=True, help="score file from `weince collect-scores` (.npz)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--q", type=float, default=PotConfig.q,
                   help="threshold quantile (default %(default)s)")
    p.add_argument("--qs", type=float, nargs="+", default=list(PotConfig.qs),
                   help="threshold-stability grid (default %(default)s)")
    p.add_argument("--tau", type=float, default=None,
                   help="the encoder's training temperature (default: the score file's meta, "
                        "else 0.5)")
    p.add_argument("--beta", type=float, default=LinkConfig.beta,
                   help="shortfall exponent of the link family (default %(default)s)")
    p.add_argument("--n-boot", type=int, default=PotConfig.n_boot,
                   help="bootstrap resamples for the intervals of xi: over exceedances (a check) "
                        "and over batches (xi_ci_batch, what C1 reads); 0 = skip "
                        "(default %(default)s)")
    p.add_argument("--gof-boot", type=int, default=PotConfig.gof_boot,
                   help="parametric bootstrap replicates for the Anderson-Darling p-value "
                        "(0 = skip; default %(default)s)")
    p.add_argument("--seed", type=int, default=PotConfig.seed,
                   help="seed of the bootstrap resamples (default %(default)s)")
    p.add_argument("--no-figures", action="store_true", help="skip the figures")


def main(args: argparse.Namespace) -> int:
    written = run_evt(args.scores, args.out, q=args.q, qs=tuple(args.qs), tau=args.tau,
                      beta=args.beta, n_boot=args.n_boot, gof_boot=args.gof_boot,
                      seed=args.seed, figures=not args.no_figures)
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
