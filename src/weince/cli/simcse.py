"""``weince simcse``: unsupervised SimCSE training (resumes automatically).

    weince simcse --out runs/simcse_minilm_infonce
    weince simcse --config cfg.yaml --set loss=weince --set seed=1 --out runs/x
    torchrun --nproc_per_node 4 -m weince.cli simcse --config cfg.yaml --out runs/x  # DDP

Config keys: :class:`weince.train.simcse.SimCSEConfig`. Writes ``model/``,
``train.json`` and ``train_log.jsonl`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os

from weince.train.simcse import SimCSEConfig, train_simcse
from weince.utils.config import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output folder (model/, train.json, train_log.jsonl)")


def main(args: argparse.Namespace) -> int:
    cfg = config_from_args(SimCSEConfig, args)
    result = train_simcse(cfg, args.out)
    keys = ("loss", "steps", "best_step", "best_dev_spearman", "dev_spearman_init",
            "sentences_per_s", "synthetic")
    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun: once, not once per rank
        print(json.dumps({k: result.get(k) for k in keys}, indent=2))
    return 0
