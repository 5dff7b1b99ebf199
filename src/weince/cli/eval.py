"""``weince eval linear|knn``: linear probe or k-NN / recall@k on cached features.

    weince eval linear --features run/features.pt --out run/linear.json [--set epochs=50]
    weince eval knn --features run/features.pt --out run/knn.json [--set split_seeds=[1,2]]

Options are the fields of :class:`LinearProbeConfig` / :class:`KNNConfig` (``docs/protocol.md``
defaults), from ``--config file.yaml`` and ``--set key=value``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Literal, Optional

from weince.utils.runlock import locks_output

__all__ = ["LinearProbeConfig", "KNNConfig", "run_linear", "run_knn"]


@dataclass
class LinearProbeConfig:
    """:func:`weince.eval.linear.linear_probe` options (``docs/protocol.md`` defaults)."""

    feature: Literal["backbone", "head"] = "backbone"
    seeds: tuple[int, ...] = (1,)
    epochs: int = 100
    lr: float = 3e-4
    batch_size: int = 256
    val_frac: float = 0.2
    split_seed: Optional[int] = 1      # None: one split per probe seed
    select: Literal["final", "best_epoch"] = "final"
    weight_decay: float = 0.0
    standardize: bool = False
    device: str = "cpu"
    progress: Optional[bool] = None
    threads: Optional[int] = None      # None: 1 thread for small problems (see linear_probe)


@dataclass
class KNNConfig:
    """:func:`weince.eval.knn.knn_eval` options (``docs/protocol.md`` defaults)."""

    feature: Literal["backbone", "head"] = "backbone"
    k: int = 50
    temperature: float = 0.1
    recall_ks: tuple[int, ...] = (1, 2, 5, 10, 20, 50)
    val_frac: float = 0.2
    split_seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    device: str = "cpu"
    chunk: int = 1024
    threads: Optional[int] = None      # None: 1 thread for small problems (see knn_eval)


def _provenance_cfg(cfg, feats_path, meta) -> dict:
    from weince.utils.config import to_dict

    return {"eval": to_dict(cfg), "features": str(feats_path),
            "encoder_cfg": (meta or {}).get("encoder_cfg")}


@locks_output("out_path", parent=True)   # one writer per output file
def run_linear(features_path, out_path, cfg: LinearProbeConfig | dict | None = None) -> dict:
    """Linear probe on a feature file; write ``out_path`` (JSON with provenance)."""
    from weince.eval.linear import linear_probe, load_features
    from weince.utils.config import as_config, to_dict
    from weince.utils import write_json

    cfg = as_config(LinearProbeConfig, cfg)
    feats = load_features(features_path)
    res = linear_probe(feats, **to_dict(cfg))
    res["meta"] = _meta(feats)
    write_json(out_path, res, cfg=_provenance_cfg(cfg, features_path, feats.get("meta")),
               seed=(feats.get("meta") or {}).get("encoder_cfg", {}).get("seed"))
    return res


@locks_output("out_path", parent=True)
def run_knn(features_path, out_path, cfg: KNNConfig | dict | None = None) -> dict:
    """k-NN / recall@k on a feature file; write ``out_path`` (JSON with provenance)."""
    from weince.eval.knn import knn_eval
    from weince.eval.linear import load_features
    from weince.utils.config import as_config, to_dict
    from weince.utils import write_json

    cfg = as_config(KNNConfig, cfg)
    feats = load_features(features_path)
    res = knn_eval(feats, **to_dict(cfg))
    res["meta"] = _meta(feats)
    write_json(out_path, res, cfg=_provenance_cfg(cfg, features_path, feats.get("meta")),
               seed=(feats.get("meta") or {}).get("encoder_cfg", {}).get("seed"))
    return res


def _meta(feats: dict) -> dict:
    m = feats.get("meta") or {}
    enc = m.get("encoder_cfg") or {}
    return {"dataset": m.get("dataset"), "encoder": m.get("encoder"),
            "backbone": enc.get("backbone"), "loss": enc.get("loss"), "seed": enc.get("seed"),
            "epochs": enc.get("epochs")}


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
    from weince.utils.config import config_from_args

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
