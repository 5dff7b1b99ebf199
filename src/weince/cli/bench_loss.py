"""``weince bench-loss``: loss forward+backward time of WEINCE (and the recipe) relative to
InfoNCE, on one or more devices.

    weince bench-loss                      # 2N = 512 and 1024, d = 128, CPU (+ CUDA if present)
    weince bench-loss --sizes 512 4096 --reps 50 --out bench.json

A front end of the C8 timing loop (:func:`weince.timing.time_loss_alone`, one loop for
both commands): the losses are timed side by side in one process, in alternating order so
that machine noise hits every loss alike; the table shows medians and the median paired
ratio to the first loss.
"""

from __future__ import annotations

import argparse

import torch

__all__ = ["bench_losses", "add_arguments", "main"]


def bench_losses(names=("infonce", "weince", "weince_recipe"), sizes=(512, 1024), dim=128,
                 reps=30, warmup=5, device="cpu", compile_loss=False, seed=0) -> list[dict]:
    """One row per size and loss: ``device, 2N, d, loss, median_ms, ratio, ratio_ci``."""
    from weince.timing import TimingConfig, time_loss_alone
    from weince.utils.device import resolve_device

    dev = resolve_device(device)
    cfg = TimingConfig(losses=list(names), sizes=list(sizes), dim=dim, loss_reps=reps,
                       warmup=warmup, device=str(dev), backbone="",
                       compile="compiled" if compile_loss else "eager", seed=seed, n_boot=200)
    rows = []
    for block in time_loss_alone(cfg, dev):
        for name, s in block["losses"].items():
            rows.append({"device": dev.type, "2N": block["2N"], "d": block["d"], "loss": name,
                         "median_ms": s["median_ms"], "ratio": s["ratio"],
                         "ratio_ci": s["ratio_ci"]})
    return rows


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1024], help="batch sizes 2N")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--losses", nargs="+", default=["infonce", "weince", "weince_recipe"],
                   help="first one is the baseline of the ratios")
    p.add_argument("--device", nargs="+", default=None, help="default: cpu, plus cuda when present")
    p.add_argument("--compile", action="store_true", help="torch.compile the losses")
    p.add_argument("--out", default=None, help="also write the rows as JSON")


def main(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    devices = args.device or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    rows = []
    for dev in devices:
        rows += bench_losses(tuple(args.losses), tuple(args.sizes), args.dim, args.reps,
                             device=dev, compile_loss=args.compile)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(tabulate([{k: v for k, v in r.items() if k != "ratio_ci"} for r in rows],
                   headers="keys", floatfmt=".3f"))
    if args.out:
        from weince.utils import write_json
        opts = {k: v for k, v in vars(args).items() if not k.startswith("_")}  # not the dispatcher's
        write_json(args.out, {"rows": rows, "torch": torch.__version__,
                              "threads": torch.get_num_threads()}, cfg=opts)
    return 0
