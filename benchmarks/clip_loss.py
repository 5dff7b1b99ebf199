"""The open_clip-call loss beside open_clip's own ``ClipLoss``: forward+backward time.

    python benchmarks/clip_loss.py                      # N = 256 and 2048, d = 512
    python benchmarks/clip_loss.py --sizes 256 --reps 20 --device cuda

For each batch size ``N`` the three losses take the same unit features ``(N, d)`` and a
learnable logit scale of shape ``(1,)`` (open_clip's call: ``loss(image_features,
text_features, logit_scale)``): open_clip's ``ClipLoss``, ``OpenCLIPLoss(loss="infonce")``
(WEINCE off) and ``OpenCLIPLoss()`` (WEINCE on). One rep runs each of them once, in a
rotating order, so that a change of the machine's load falls on all three (interleaved);
the table gives each loss's median wall time and its median CPU time (the process's, all
threads) per forward+backward, and the ratios to ``ClipLoss``. Needs open_clip
(``pip install ".[test]"``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

from weince.losses import OpenCLIPLoss


def _losses() -> dict:
    from open_clip.loss import ClipLoss  # noqa: PLC0415 - an optional package, seconds to import
    return {"ClipLoss": ClipLoss(), "WEINCE off": OpenCLIPLoss(loss="infonce"),
            "WEINCE on": OpenCLIPLoss()}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_size(N: int, d: int, reps: int, device: str, losses: dict) -> dict[str, dict]:
    """Median wall and CPU seconds of one forward+backward of each loss at batch ``N``."""
    g = torch.Generator().manual_seed(N)
    a = F.normalize(torch.randn(N, d, generator=g), dim=1)
    b = F.normalize(a + 0.5 * torch.randn(N, d, generator=g), dim=1)
    a, b = a.to(device).requires_grad_(), b.to(device).requires_grad_()
    log_scale = torch.nn.Parameter(torch.tensor([2.659], device=device))
    names = list(losses)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(reps + 1):                       # rep 0 warms up (caches, kernels)
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            a.grad = b.grad = log_scale.grad = None
            _sync(device)
            w0, c0 = time.perf_counter(), time.process_time()
            losses[name](a, b, log_scale.exp()).backward()
            _sync(device)
            if rep:
                wall[name].append(time.perf_counter() - w0)
                cpu[name].append(time.process_time() - c0)
    return {n: {"wall": statistics.median(wall[n]), "cpu": statistics.median(cpu[n])}
            for n in names}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 2048])
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    losses = _losses()
    print(f"forward+backward, d = {args.dim}, {args.reps} interleaved reps, device "
          f"{args.device}, torch threads {torch.get_num_threads()}, load "
          f"{os.getloadavg()[0]:.2f}")
    print("| N | loss | wall ms | CPU ms | wall / ClipLoss | CPU / ClipLoss |")
    print("| --- | --- | --- | --- | --- | --- |")
    for N in args.sizes:
        t = time_size(N, args.dim, args.reps, args.device, losses)
        ref = t["ClipLoss"]
        for name, v in t.items():
            print(f"| {N} | {name} | {1e3 * v['wall']:.2f} | {1e3 * v['cpu']:.2f} | "
                  f"{v['wall'] / ref['wall']:.2f} | {v['cpu'] / ref['cpu']:.2f} |")


if __name__ == "__main__":
    main()
