"""``weince collect-scores``: similarity scores of a frozen encoder (tail/link fits) -> ``.npz``.

    weince collect-scores --encoder ENCODER.pt --dataset NAME --data-root DIR --out scores.npz \\
        [--batch-size 256] [--n-batches 64] [--link-batches 40] [--seed 0]

The file holds ``scores`` (pooled strictly-lower-triangular similarities of single views,
:func:`weince.evt.collect.collect_scores`), the two-view link batches ``sim, targets,
mask`` (:func:`weince.evt.collect.collect_link_batches`; skipped with ``--link-batches 0``)
and ``meta`` (the encoder's ``tau``, data set, sizes, seed), ready for ``weince evt``.
The views use the encoder's own training augmentation (data set recipe plus the run's
``aug_kwargs``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from weince.eval.scores import collect_score_file
from weince.eval.config import ScoresConfig

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encoder", required=True, help="encoder.pt from `weince pretrain`")
    p.add_argument("--dataset", default=None,
                   help="data set name (default: the one the encoder was trained on)")
    p.add_argument("--data-root", default=None, help="data folder (default $WEINCE_DATA or ./data)")
    p.add_argument("--split", default=ScoresConfig.split,
                   help="split to draw images from (default %(default)s)")
    p.add_argument("--out", required=True, help="output .npz")
    p.add_argument("--batch-size", type=int, default=ScoresConfig.batch_size,
                   help="views per tail batch, K + 1 (default %(default)s)")
    p.add_argument("--n-batches", type=int, default=ScoresConfig.n_batches,
                   help="tail batches pooled (default %(default)s)")
    p.add_argument("--link-batches", type=int, default=ScoresConfig.link_batches,
                   help="two-view batches for the link fit, each of 2N rows (0 = none; "
                        "default %(default)s)")
    p.add_argument("--link-batch-size", type=int, default=None,
                   help="images per two-view batch, N (2N views; default --batch-size)")
    p.add_argument("--device", default=ScoresConfig.device,
                   help="auto | cpu | cuda | cuda:N (default %(default)s)")
    p.add_argument("--seed", type=int, default=ScoresConfig.seed,
                   help="seed of the image draws and augmentations (default %(default)s)")
    p.add_argument("--download", action="store_true",
                   help="no effect: loaders never download; fetch the data "
                   "first with weince fetch-data")


def main(args: argparse.Namespace) -> int:
    path = collect_score_file(args.encoder, args.out, dataset=args.dataset,
                              data_root=args.data_root, split=args.split,
                              batch_size=args.batch_size, n_batches=args.n_batches,
                              link_batches=args.link_batches,
                              link_batch_size=args.link_batch_size, device=args.device,
                              seed=args.seed, download=args.download)
    print(f"wrote {Path(path)}")
    return 0
