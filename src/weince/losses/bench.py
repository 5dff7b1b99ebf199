"""Benchmark: loss forward+backward time of WEINCE (and the recipe) relative to InfoNCE.

    weince bench-loss                      # 2N = 512 and 1024, d = 128, CPU (+ CUDA if present)
    weince bench-loss --sizes 512 4096 --reps 50 --out bench.json

The losses are timed side by side in one process, interleaved round-robin so that machine
noise hits every loss alike; the table shows medians and the ratio to InfoNCE.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from weince.losses import build_loss

__all__ = ["bench_losses", "add_arguments", "main"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_losses(names=("infonce", "weince", "weince_recipe"), sizes=(512, 1024), dim=128,
                 reps=30, warmup=5, device="cpu", compile_loss=False, seed=0) -> list[dict]:
    """Median forward+backward time per loss at each ``2N`` in ``sizes``; rows of dicts."""
    device = torch.device(device)
    g = torch.Generator(device="cpu").manual_seed(seed)
    rows = []
    for two_n in sizes:
        n = two_n // 2
        z1 = torch.randn(n, dim, generator=g).to(device)
        z2 = (z1 + 0.5 * torch.randn(n, dim, generator=g).to(device))
        fns = {name: build_loss(name, tau=0.5).to(device).train() for name in names}
        if compile_loss:
            fns = {k: torch.compile(v) for k, v in fns.items()}
        times = {name: [] for name in names}

        def step(fn):
            a = z1.detach().requires_grad_(True)
            b = z2.detach().requires_grad_(True)
            fn(a, b).backward()

        for _ in range(warmup):
            for fn in fns.values():
                step(fn)
        for _ in range(reps):
            for name, fn in fns.items():  # interleaved: every loss sees the same noise
                _sync(device)
                t0 = time.perf_counter()
                step(fn)
                _sync(device)
                times[name].append(time.perf_counter() - t0)
        base = statistics.median(times[names[0]])
        for name in names:
            med = statistics.median(times[name])
            rows.append({"device": device.type, "2N": two_n, "d": dim, "loss": name,
                         "median_ms": 1e3 * med, "ratio": med / base})
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
    print(tabulate(rows, headers="keys", floatfmt=".3f"))
    if args.out:
        from weince.utils import write_json
        opts = {k: v for k, v in vars(args).items() if not k.startswith("_")}  # not the dispatcher's
        write_json(args.out, {"rows": rows, "torch": torch.__version__,
                              "threads": torch.get_num_threads()}, cfg=opts)
    return 0
