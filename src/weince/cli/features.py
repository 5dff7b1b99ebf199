"""``weince features``: frozen train/test features of a pretrained encoder, cached once.

    weince features --encoder runs/x/encoder.pt --out runs/x/features.pt
"""

from __future__ import annotations

import argparse

from weince.eval.features import extract_features
from weince.eval.config import FeaturesConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder", required=True, help="encoder.pt from `weince pretrain`")
    parser.add_argument("--out", required=True, help="torch file to write (features.pt)")
    parser.add_argument("--dataset", default=None,
                        help="data set to embed (default: the encoder's training set)")
    parser.add_argument("--data-root", default=None, help="data folder (default: as trained)")
    parser.add_argument("--batch-size", type=int, default=FeaturesConfig.batch_size,
                        help="images per forward pass (default %(default)s)")
    parser.add_argument("--device", default=FeaturesConfig.device,
                        help="auto | cpu | cuda[:N] (default %(default)s)")
    parser.add_argument("--download", action="store_true",
                        help="no effect: loaders never download; fetch the data "
                        "first with weince fetch-data")


def main(args: argparse.Namespace) -> int:
    feats = extract_features(args.encoder, args.out, dataset=args.dataset,
                             data_root=args.data_root, batch_size=args.batch_size,
                             device=args.device, download=args.download)
    m = feats["meta"]
    print(f"wrote {args.out}: {m['dataset']} train {m['n_train']} / test {m['n_test']}, "
          f"backbone {m['backbone_dim']}-d, head {m['head_dim']}-d")
    return 0
