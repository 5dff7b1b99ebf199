"""``weince eval linear|knn``: linear probe or k-NN / recall@k on cached features.

    weince eval linear --features run/features.pt --out run/linear.json [--set epochs=50]
    weince eval knn --features run/features.pt --out run/knn.json [--set split_seeds=[1,2]]

Options are the fields of :class:`weince.eval.config.LinearProbeConfig` /
:class:`~weince.eval.config.KNNConfig` (``docs/protocol.md`` defaults), from
``--config file.yaml`` and ``--set key=value``.
"""

from __future__ import annotations

import argparse
import json

from weince.eval.config import KNNConfig, LinearProbeConfig
from weince.eval.knn import run_knn
from weince.eval.linear import run_linear
from weince.utils.config import config_from_args

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", choices=["linear", "knn"], help="evaluation to run")
    parser.add_argument("--features", required=True, help="features.pt from `weince features`")
    parser.add_argument("--out", required=True, help="result JSON (linear.json / knn.json)")
    # --config / --set as weince.utils.config.add_config_arguments, with examples of eval keys
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="YAML file of LinearProbeConfig (linear) or KNNConfig (knn) keys "
                             "(defaults when omitted)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override one key (value parsed as YAML; repeatable; default: "
                             "none), e.g. --set epochs=50 (linear) or --set k=20 (knn)")


def main(args: argparse.Namespace) -> int:
    if args.method == "linear":
        res = run_linear(args.features, args.out, config_from_args(LinearProbeConfig, args))
        s = res["test_acc"]
        print(json.dumps({"out": args.out, "test_acc": s["mean"], "std": s["std"], "n": s["n"]}))
    else:
        cfg = config_from_args(KNNConfig, args)
        res = run_knn(args.features, args.out, cfg)
        key = f"acc@{cfg.k}"
        print(json.dumps({"out": args.out, key: res[key]["mean"],
                          "recall@1": res.get("recall@1", {}).get("mean")}))
    return 0
