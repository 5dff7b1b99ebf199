"""``weince noise-floor``: the paper's synthetic noise-floor experiment (claim C11).

    weince noise-floor                              # 12,000 replicates per n -> ./noise_floor/
    weince noise-floor --replicates 2000 --seed 1 --out /tmp/nf

Writes ``noise_floor.json`` (with provenance), ``noise_floor.csv`` and ``noise_floor.png``
(both MSE curves on log-log axes, the Weibit c/n line and the softmax's floor) and prints
the per-n table. The workflow runs the same code as its ``noise_floor`` rule
(``results/<profile>/synthetic/``); the setting is the paper's (weince.evt.noise_floor).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from weince.evt.noise_floor import SAMPLE_SIZES, simulate_noise_floor, write_noise_floor
from weince.utils.results import read_json

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replicates", type=int, default=12_000,
                   help="Monte-Carlo samples per sample size (default 12000, the paper's)")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SAMPLE_SIZES), metavar="N",
                   help="sample sizes n (default: the paper's 100 ... 10000)")
    p.add_argument("--seed", type=int, default=20260113, help="seed (default 20260113)")
    p.add_argument("--out", default="noise_floor", help="output folder (default ./noise_floor)")
    p.add_argument("--no-figure", action="store_true", help="skip the PNG (no matplotlib)")


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    r = simulate_noise_floor(replicates=args.replicates, sample_sizes=args.sizes,
                             seed=args.seed)
    cfg = {"replicates": args.replicates, "sample_sizes": args.sizes, "seed": args.seed}
    write_noise_floor(r, out / "noise_floor.json", out / "noise_floor.csv", cfg=cfg)
    print(f"{'n':>6}  {'MSE Weibit':>10}  {'c/n':>10}  {'MSE softmax':>11}  {'floor':>10}  "
          f"degenerate")
    for row in r.rows:
        print(f"{row['n']:>6}  {row['mse_weibit']:10.3e}  {row['theory_weibit']:10.3e}  "
              f"{row['mse_softmax']:11.3e}  {row['softmax_floor']:10.3e}  {row['degenerate']}")
    if not args.no_figure:
        # the figure needs the workflow extra; the simulation runs on the core install
        from weince.report.figures import noise_floor_figure  # noqa: PLC0415

        noise_floor_figure(read_json(out / "noise_floor.json"), out / "noise_floor.png",
                           "Weibit removes the softmax's error floor")
    print(f"wrote {out}/noise_floor.json, .csv" + ("" if args.no_figure else ", .png"))
    return 0
