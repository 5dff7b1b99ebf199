"""``weince norms``: the embedding-norm dynamics analysis (claims N1-N3).

    weince norms --encoder encoder.pt [--loss weince] [--features features.pt] --out DIR
    weince norms --text-model minilm [--loss infonce] --out DIR
    weince norms report RESULT.json ... --out reports/default/norms.md [--profile default]

Options come from ``--config FILE`` (a flat mapping of
:class:`weince.norms.config.NormsConfig` keys, or a workflow profile such as
``config/smoke.yaml``, whose ``norms.analysis`` block is used) and repeated
``--set key=value``. ``--meta key=value`` adds
identification to the result (``arm=weince seed=0``). Writes ``DIR/norms.json`` and
``DIR/norms_probes.npz``. The library (the norms room, :mod:`weince.norms`):
:func:`weince.norms.run.load_norms_config`, :func:`~weince.norms.run.analyse_vision`,
:func:`~weince.norms.run.analyse_text` and :func:`weince.norms.page.write_norms_report`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from weince.norms.page import write_norms_report
from weince.norms.run import analyse_text, analyse_vision, load_norms_config

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=["run", "report"], default="run",
                   help="run the analysis (default) or write the report from results")
    p.add_argument("results", nargs="*", help="report: norms.json files")
    p.add_argument("--encoder", help="vision: encoder.pt written by `weince pretrain`")
    p.add_argument("--loss", help="loss name (default: the encoder's training loss; text: "
                                  "text_loss)")
    p.add_argument("--features", help="vision: features.pt of the encoder (enables N3)")
    p.add_argument("--text-model", help="text: 'minilm' (the shipped MiniLM-L6), a model "
                                        "folder or a hub name")
    p.add_argument("--out", required=True, help="output folder (run) or Markdown file (report)")
    p.add_argument("--config", help="YAML file of NormsConfig keys, or a workflow profile "
                                    "config (its norms.analysis block)")
    p.add_argument("--profile", default="",
                   help="report: the profile named in the title (default: none)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE",
                   help="override a config key (value parsed as YAML; repeatable; default: none)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="identification stored in the result (arm, seed, model_label, ...; "
                        "repeatable; default: none)")
    p.add_argument("--no-figures", action="store_true", help="report: skip the PNG figures")


def _meta(items: list[str]) -> dict[str, Any]:
    out = {}
    for it in items:
        if "=" not in it:
            raise ValueError(f"--meta expects KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def main(args: argparse.Namespace) -> int:
    if args.action == "report":
        if not args.results:
            raise ValueError("weince norms report needs at least one norms.json")
        cv = write_norms_report(args.results, args.out, profile=args.profile,
                                figures=not args.no_figures)
        for c, v in cv.items():
            print(f"{c}: {v['verdict']} ({v['n_reproduced']}/{v['n_testable']} units)")
        return 0
    if bool(args.encoder) == bool(args.text_model):
        raise ValueError("give exactly one of --encoder (vision) or --text-model (text)")
    cfg = load_norms_config(args.config, args.overrides)
    meta = _meta(args.meta)
    if args.encoder:
        res = analyse_vision(args.encoder, args.loss, features=args.features, cfg=cfg,
                             out_dir=args.out, meta=meta)
    else:
        res = analyse_text(args.text_model, args.loss, cfg=cfg, out_dir=args.out, meta=meta)
    print(f"{Path(args.out) / 'norms.json'}: " +
          ", ".join(f"{k} {v}" for k, v in res["verdicts"].items()))
    return 0
