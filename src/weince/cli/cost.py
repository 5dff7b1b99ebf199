"""``weince cost``: the price of one training step of a named model on a named GPU, from
counted FLOPs and published measured throughputs (weince.cost.throughput; docs/cost.md).

    weince cost --model resnet50 --image-size 224 --batch 256 --precision tf32 --gpu a100-80gb
    weince cost --model bert-base --seq-len 384 --batch 32 --precision bf16 --gpu h100-sxm --json
    weince cost --model vit_s --image-size 32 --batch 512 --precision fp32 --gpu h200
    weince cost --calibration                 # each published measurement against the model
    weince cost --recount                     # rewrite the FLOPs table (needs torch)

The price is of a plain supervised step (forward, backward, optimiser) as public benchmarks
measure it: images (or sequences) per second as a range, low to high, and the seconds of
one step at ``--batch``. A model and size the committed FLOPs table lacks is counted here
with torch (``weince.cost.flops``, this command's counter).
"""

from __future__ import annotations

import argparse
import json

from weince.cost.counts import (TEXT_MODELS, VISION_MODELS, canonical_model, load_counts,
                                model_kind, vision_key)
from weince.cost.flops import count_text, count_vision, recount
from weince.cost.pages import calibration_markdown
from weince.cost.throughput import PRECISIONS, device_names, price_step

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help=f"one of {', '.join(VISION_MODELS + TEXT_MODELS)} "
                   "(vit_small_patch16: ViT-S/16; vit_s: the project's ViT-S)")
    p.add_argument("--image-size", type=int, help="image side in pixels (vision models)")
    p.add_argument("--seq-len", type=int, help="tokens per sequence (text models)")
    p.add_argument("--channels", type=int, default=3, help="image channels (default 3)")
    p.add_argument("--classes", type=int, default=1000,
                   help="classes of the supervised head (default 1000)")
    p.add_argument("--batch", type=int, default=256, help="examples per step (default 256)")
    p.add_argument("--precision", choices=PRECISIONS, default="tf32",
                   help="fp32 (no tensor cores), tf32, bf16 (mixed precision); default tf32")
    p.add_argument("--gpu", default="h100-sxm",
                   help=f"one of {', '.join(device_names())} (default h100-sxm)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--calibration", action="store_true",
                   help="print the calibration table (docs/cost.md) instead")
    p.add_argument("--recount", action="store_true",
                   help="count every entry of the FLOPs table again and rewrite it")


def _flops(args: argparse.Namespace, kind: str, size: int) -> float:
    """Counted FLOPs per example: the table's, else a fresh count."""
    if kind == "text":
        found = load_counts()["text"].get(f"{args.model}@{size}")
        return float((found or count_text(args.model, size))["train"])
    key = vision_key(args.model, size, args.channels, f"classes{args.classes}")
    found = load_counts()["vision"].get(key)
    return float((found or count_vision(args.model, size, args.channels,
                                        f"classes{args.classes}"))["train"])


def _text(p: dict) -> str:
    size = (f"{p['image_size']} px" if "image_size" in p else f"{p['seq_len']} tokens")
    lo, hi = p["per_second"]
    return (f"{p['model']} at {size}, batch {p['batch']}, {p['precision'].upper()} on "
            f"{p['gpu']} ({p['device']}):\n"
            f"  {lo:,.0f}-{hi:,.0f} {p['unit']} (low-high), {p['step_s'][0]:.4g}-"
            f"{p['step_s'][1]:.4g} s per step\n"
            f"  {p['flops_per_example'] / 1e9:,.2f} GFLOP per example (forward + backward, "
            f"counted); family {p['family']}; rate: {p['basis']} "
            f"({', '.join(p['calibrated_on'])}) x [{p['band'][0]:g}, {p['band'][1]:g}]")


def main(args: argparse.Namespace) -> int:
    if args.recount:
        print(f"wrote {recount()}")
        return 0
    if args.calibration:
        print(calibration_markdown())
        return 0
    if not args.model:
        raise ValueError("--model is required (e.g. --model resnet50 --image-size 224), "
                         "or --calibration / --recount")
    args.model = canonical_model(args.model)
    kind = model_kind(args.model)
    size = args.seq_len if kind == "text" else args.image_size
    if size is None:
        flag = "--seq-len" if kind == "text" else "--image-size"
        raise ValueError(f"{args.model} needs {flag} (e.g. {flag} "
                         f"{'384' if kind == 'text' else '224'})")
    price = price_step(args.model, size, args.batch, args.precision, args.gpu,
                       args.channels, args.classes, _flops(args, kind, size))
    print(json.dumps(price, indent=2) if args.json else _text(price))
    return 0
