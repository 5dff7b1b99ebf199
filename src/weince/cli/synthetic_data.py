"""``weince synthetic-data --root DIR``: small files in every real on-disk format
(weince.data.synthetic_formats), for a rehearsal on a machine without the data sets."""

from __future__ import annotations

import argparse

from weince.data.synthetic_formats import write_synthetic_data


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", required=True,
                        help="folder to write (new or empty, or one written by this command)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of every synthetic file (default %(default)s)")
    parser.add_argument("--overwrite", action="store_true",
                        help="rewrite a synthetic tree that is already complete")


def main(args: argparse.Namespace) -> int:
    root = write_synthetic_data(args.root, seed=args.seed, overwrite=args.overwrite)
    print(f"synthetic data in the real formats written under {root}; rehearse with\n"
          f"  snakemake --cores 2 --configfile config/paper.yaml config/rehearsal.yaml "
          f"--config data_root={root}")
    return 0
