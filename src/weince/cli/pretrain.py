"""``weince pretrain``: SimCLR pretraining from a YAML config (resumes automatically).

    weince pretrain --config cfg.yaml --out runs/x [--set loss=weince --set epochs=2]
    torchrun --nproc_per_node 8 -m weince.cli pretrain --config cfg.yaml --out runs/x

Keys: the fields of :class:`weince.train.simclr.SimCLRConfig`. Rerunning the same command
after an interruption continues from ``runs/x/checkpoint.pt``.
"""

from __future__ import annotations

import argparse
import json

from weince.train.simclr import SimCLRConfig, pretrain
from weince.utils.config import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output folder: encoder.pt, train.json, train_log.jsonl, "
                             "checkpoint.pt")


def main(args: argparse.Namespace) -> int:
    cfg = config_from_args(SimCLRConfig, args)
    summary = pretrain(cfg, args.out)
    if summary:
        final = summary.get("final", {})
        print(json.dumps({"out": args.out, "epochs": summary.get("epochs"),
                          "loss": final.get("loss"), "img_s": summary.get("img_s_mean"),
                          "wall_s": summary.get("wall_s")}))
    return 0
