"""``weince bench-loss``: loss forward+backward time of WEINCE (and the recipe) relative to
InfoNCE, on one or more devices.

    weince bench-loss                      # 2N = 512 and 1024, d = 128, CPU (+ CUDA if present)
    weince bench-loss --sizes 512 4096 --reps 50 --out bench.json
    weince bench-loss --targets --threads 1   # the cost targets, each ratio side by side

A front end of the C8 timing loop (:func:`weince.timing.time_loss_alone`, one loop for
both commands): the losses are timed side by side in one process, in alternating order so
that machine noise hits every loss alike. Each repetition gives a paired ratio (a loss's
time over the first loss's, same repetition); the table shows the median time, the median
ratio with its bootstrap 95% interval and the smallest and largest ratio over the
repetitions, so that the spread is read beside the number. With fewer than
``MIN_STABLE_REPS`` repetitions, or an interval wider than ``MAX_CI_REL`` of the ratio, the
command prints a warning: such a ratio moves from one call to the next.
"""

from __future__ import annotations

import argparse
import sys

import torch
from tabulate import tabulate

from weince.cli.bench_targets import run_targets
from weince.timing import TimingConfig, time_loss_alone
from weince.utils import write_json
from weince.utils.device import resolve_device

__all__ = ["bench_losses", "add_arguments", "main", "noise_warnings", "MIN_STABLE_REPS",
           "MAX_CI_REL"]

# Fewer paired ratios than this and the median's 95% interval spans most of the ratios
# (20 ratios: ranks 6-15 of 20 by the order statistics; 5 and fewer: no such interval at
# all), so the printed ratio is not stable from one call to the next.
MIN_STABLE_REPS = 20
# A 95% interval of the median ratio wider than this share of the ratio (hi - lo > 0.2 x
# ratio) is called noisy, whatever the repetitions.
MAX_CI_REL = 0.2


def bench_losses(names=("infonce", "weince", "weince_recipe"), sizes=(512, 1024), dim=128,
                 reps=30, warmup=5, device="cpu", compile_loss=False, seed=0) -> list[dict]:
    """One row per size and loss: ``device, 2N, d, loss, median_ms, ratio`` (the median
    paired ratio to the first loss), ``ratio_ci`` (its bootstrap 95% interval),
    ``ratio_min``/``ratio_max`` (over the repetitions) and ``reps``."""
    dev = resolve_device(device)
    cfg = TimingConfig(losses=list(names), sizes=list(sizes), dim=dim, loss_reps=reps,
                       warmup=warmup, device=str(dev), backbone="",
                       compile="compiled" if compile_loss else "eager", seed=seed, n_boot=200)
    rows = []
    for block in time_loss_alone(cfg, dev):
        ref = block["losses"][next(iter(block["losses"]))]["times_ms"]
        for name, s in block["losses"].items():
            ratios = [t / r for t, r in zip(s["times_ms"], ref) if r > 0]
            rows.append({"device": dev.type, "2N": block["2N"], "d": block["d"], "loss": name,
                         "median_ms": s["median_ms"], "ratio": s["ratio"],
                         "ratio_ci": s["ratio_ci"],
                         "ratio_min": min(ratios) if ratios else float("nan"),
                         "ratio_max": max(ratios) if ratios else float("nan"),
                         "reps": s["n"]})
    return rows


def noise_warnings(rows: list[dict], reps: int) -> list[str]:
    """The warnings a reader needs before quoting a ratio: too few repetitions
    (``MIN_STABLE_REPS``), and each ratio whose 95% interval is wider than ``MAX_CI_REL`` of
    it."""
    out = []
    if reps < MIN_STABLE_REPS:
        out.append(f"warning: {reps} repetition(s) per loss are too few for a stable ratio "
                   f"(at least {MIN_STABLE_REPS}: --reps {MIN_STABLE_REPS} or more); read the "
                   f"interval and the min-max, not the median alone")
    for r in rows:
        lo, hi = r["ratio_ci"]
        if r["ratio"] > 0 and (hi - lo) > MAX_CI_REL * r["ratio"]:
            out.append(f"warning: {r['loss']} at 2N = {r['2N']} on {r['device']}: ratio "
                       f"{r['ratio']:.2f}x has the 95% interval [{lo:.2f}, {hi:.2f}], wider "
                       f"than {MAX_CI_REL:.0%} of it (a noisy machine or too few repetitions)")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1024],
                   help="batch sizes 2N (default %(default)s)")
    p.add_argument("--dim", type=int, default=128,
                   help="embedding dimension d (default %(default)s)")
    p.add_argument("--reps", type=int, default=30,
                   help="timed repetitions per loss and size, after 5 warm-up ones; fewer "
                        f"than {MIN_STABLE_REPS} print a warning (default %(default)s)")
    p.add_argument("--losses", nargs="+", default=["infonce", "weince", "weince_recipe"],
                   help="losses to time; the first one is the baseline of the ratios "
                        "(default %(default)s)")
    p.add_argument("--device", nargs="+", default=None,
                   help="devices to time on (default: cpu, plus cuda when present)")
    p.add_argument("--compile", action="store_true", help="torch.compile the losses")
    p.add_argument("--targets", action="store_true",
                   help="instead: the loss-cost targets on the CPU, each ratio measured side "
                        "by side (WEINCE/InfoNCE at 2N = 512 and 4096 and with a memory bank, "
                        "the recipe at 512, compiled/eager, and both compiled); --sizes "
                        "limits the cases, --reps (default 20 here) the repetitions")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads before timing (default: torch's own)")
    p.add_argument("--out", default=None, help="also write the rows as JSON (default: none)")


def _main_targets(args: argparse.Namespace) -> int:
    reps = args.reps if args.reps != 30 else 20
    sizes = tuple(args.sizes) if args.sizes != [512, 1024] else None
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, d = {args.dim}, "
          f"{reps} repetitions per case; ratio: the median paired ratio, min-max beside it")
    rows = run_targets(dim=args.dim, reps=reps, sizes=sizes)
    print(tabulate(rows, headers="keys", floatfmt=".3f"))
    if args.out:
        opts = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        write_json(args.out, {"rows": rows, "torch": torch.__version__,
                              "threads": torch.get_num_threads()}, cfg=opts)
    return 0


def main(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.targets:
        return _main_targets(args)
    devices = args.device or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    rows = []
    for dev in devices:
        rows += bench_losses(tuple(args.losses), tuple(args.sizes), args.dim, args.reps,
                             device=dev, compile_loss=args.compile)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}; ratio: the median "
          f"over {args.reps} repetitions of a loss's time over {args.losses[0]}'s in the same "
          f"repetition, with its bootstrap 95% interval and the min-max over repetitions")
    table = [{"device": r["device"], "2N": r["2N"], "d": r["d"], "loss": r["loss"],
              "median_ms": r["median_ms"], "ratio": r["ratio"],
              "95% CI": f"[{r['ratio_ci'][0]:.2f}, {r['ratio_ci'][1]:.2f}]",
              "min-max": f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}", "reps": r["reps"]}
             for r in rows]
    print(tabulate(table, headers="keys", floatfmt=".3f"))
    for w in noise_warnings(rows, args.reps):
        print(w, file=sys.stderr)
    if args.out:
        # the command's options, not the dispatcher's
        opts = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        write_json(args.out, {"rows": rows, "torch": torch.__version__,
                              "threads": torch.get_num_threads()}, cfg=opts)
    return 0
