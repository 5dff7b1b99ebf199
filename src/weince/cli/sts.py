"""``weince sts``: STS evaluation (Spearman/Pearson x 100) of a sentence encoder.

    weince sts --model runs/x/model --data synthetic --out runs/x/sts.json
    weince sts --model bert-base-uncased --data data/stsbenchmark --out sts.json

``--data synthetic`` uses the generated pairs of ``weince.data.text`` (labelled
synthetic in the output); any other value is an STS-B root folder (SentEval
``sts-{dev,test}.csv`` or GLUE ``STS-B/{split}.tsv``).
"""

from __future__ import annotations

import argparse
import json

from weince.eval.sts import run_sts
from weince.eval.config import STSConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="DIR_OR_NAME",
                        help="model folder (e.g. a `weince simcse` out_dir/model), 'minilm' "
                             "(the shipped MiniLM-L6) or a hub name cached locally")
    parser.add_argument("--data", required=True, metavar="synthetic|ROOT",
                        help="'synthetic' or an STS-B root folder")
    parser.add_argument("--out", required=True, metavar="FILE", help="result JSON (sts.json)")
    parser.add_argument("--splits", default=",".join(STSConfig.splits),
                        help="comma-separated (default %(default)s)")
    parser.add_argument("--n-synthetic", type=int, default=STSConfig.n_synthetic,
                        help="synthetic pairs per split (default %(default)s)")
    parser.add_argument("--seed", type=int, default=STSConfig.seed,
                        help="data seed of the synthetic pairs (default %(default)s, as training)")
    parser.add_argument("--pooling", choices=("cls", "mean"), default=STSConfig.pooling,
                        help="sentence vector: last-layer [CLS] (SimCSE's evaluation) or the "
                             "mean over tokens (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=STSConfig.batch_size,
                        help="sentences per forward pass (default %(default)s)")
    parser.add_argument("--max-length", type=int, default=0,
                        help="truncate to this many tokens (0: none up to 512)")
    parser.add_argument("--device", default="auto",
                        help="auto (CUDA when available; default), cpu or cuda")
    parser.add_argument("--online", action="store_true",
                        help="allow Hugging Face hub downloads (default: HF_HUB_OFFLINE=1)")


def main(args: argparse.Namespace) -> int:
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    result = run_sts(args.model, args.data, args.out, splits=splits,
                     n_synthetic=args.n_synthetic, seed=args.seed, pooling=args.pooling,
                     batch_size=args.batch_size, max_length=args.max_length or None,
                     device=args.device, offline=not args.online)
    print(json.dumps({s: result[s] for s in splits} | {"synthetic": result["synthetic"]},
                     indent=2))
    return 0
