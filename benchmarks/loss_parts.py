"""Where WEINCE's time goes beside InfoNCE's, at each loss-cost target: its parts, timed alone.

    python benchmarks/loss_parts.py [--reps 30] [--sizes 512] [--json parts.json]

For each case of ``weince bench-loss --targets`` that compares with InfoNCE (the cases and
their targets are that command's), one process, one thread, the parts interleaved (their
order alternating each repetition), medians in milliseconds:

- ``base``: InfoNCE's module, forward + backward, as the targets time it;
- ``loss``: the WEINCE (recipe) module, forward + backward; ``ratio``: ``loss / base``;
- ``logits``: WEINCE without its statistics: the same similarities, its blended logits
  for a given ``lambda`` (``log(max(1 - s, eps))`` over the whole matrix forward,
  ``a_i + c_i / (1 - s_ij)`` backward) and the cross-entropy, forward + backward;
- ``stats``: the per-anchor statistics (no gradient), of which ``select`` (each row's
  ``k`` largest negatives by this library's CPU selection; the recipe's with their
  columns) and ``fit`` (``var_mean`` over the ``(B, k - b)`` log-shortfalls);
- ``logging``: the module's ``last_stats`` (lambda's mean and quantiles, rho0, means);
- ``pooled`` (the recipe): its pooled selection and fit;
- ``rest``: ``loss - logits - stats - logging - pooled`` (the recipe's top-M terms, the
  module's own work);
- ``budget``: ``target * base - logits``, what the target leaves for everything but the
  logits.

The statistics give the numbers of ``torch.topk`` and ``torch.var_mean`` bit for bit,
which the trained encoders depend on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from tabulate import tabulate

from weince.cli.bench_targets import CASES
from weince.losses import build_loss
from weince.losses._common import moco_similarities, two_view_batch, unit_rows
from weince.losses.recipe import fit_pooled, pool_size, pooled_top_from_rows
from weince.losses.weince import _statistics, _top_negatives_cpu, blended_logits, tail_size
from weince.utils import write_json


def _parts(case, dim: int, seed: int) -> tuple[dict, int]:
    """The timed callables of one case, and its tail size ``k``."""
    g = torch.Generator().manual_seed(seed)
    n = case.two_n // 2
    z1 = torch.randn(n, dim, generator=g)
    z2 = z1 + 0.5 * torch.randn(n, dim, generator=g)
    kw = {"memory_bank_size": case.bank} if case.bank else {}
    base = build_loss(case.base, tau=0.2, **kw).train()
    queue = unit_rows(torch.randn(case.bank, dim, generator=g)) if case.bank else None

    def similarities(x):
        if queue is None:
            sim, targets, _, _ = two_view_batch(x, z2, "simclr")
            return sim, targets
        return moco_similarities(unit_rows(x), unit_rows(z2), queue)

    fill = [torch.randn(n, dim, generator=g) for _ in range(-(-case.bank // n))]
    for z in fill:                                     # fill the baseline's bank
        base(z, z)
    sim, targets = (t.detach() for t in similarities(z1))
    half, K = (None, case.bank) if case.bank else (n, 2 * n - 2)
    k = tail_size(K)
    b = max(1, k // 20)
    lam = torch.rand(sim.shape[0], generator=g, dtype=torch.float64)
    recipe = case.loss == "weince_recipe"
    extra = 50 if recipe else 0                        # the recipe's top-M columns too
    width = max(k, min(extra, K))                     # as the statistics select
    top = _top_negatives_cpu(sim, targets, None, width, with_indices=recipe, half=half)
    top = top[0] if recipe else top
    logd = torch.rsub(top[:, :k].double(), 1.0).clamp_min_(1e-6).log_()

    loss = build_loss(case.loss, tau=0.2, **kw).train()
    for z in fill:                                     # and the loss's
        loss(z, z)
    opts = {key: loss.opts[key] for key in ("q", "margin", "kappa_rho", "kappa_aic",
                                            "tail_frac", "min_tail", "eps", "gate")}
    stats = _statistics(sim, targets, None, K, half=half, topk_extra=extra, **opts)

    def module(fn):
        def run():
            x = z1.clone().requires_grad_(True)
            fn(x, z2).backward()
        return run

    def run_logits():
        x = z1.clone().requires_grad_(True)
        s, t = similarities(x)
        logits = blended_logits(s, lam, 0.2, 1.0, 1e-6, None if queue is not None else "diagonal")
        F.cross_entropy(logits, t).backward()

    parts = {
        "base": module(base),
        "loss": module(loss),
        "logits": run_logits,
        "stats": lambda: _statistics(sim, targets, None, K, half=half, topk_extra=extra,
                                     **opts),
        "select": lambda: _top_negatives_cpu(sim, targets, None, width, with_indices=recipe,
                                             half=half),
        "fit": lambda: torch.var_mean(logd[:, b:], dim=1, correction=0, keepdim=True),
        "logging": lambda: loss.logged(stats["lambda"], stats),
    }
    if recipe:
        pk = pool_size(sim.shape[0] * K)
        pooled = pooled_top_from_rows(top, pk, sim, targets, None, half)

        def pooled_fit():
            pooled_top_from_rows(top, pk, sim, targets, None, half)
            fit_pooled(pooled, pk)
        parts["pooled"] = pooled_fit
    return parts, k


def parts_row(case, dim: int = 128, reps: int = 30, warmup: int = 3, seed: int = 0) -> dict:
    """One case's row: each part's median milliseconds and the ratios."""
    parts, k = _parts(case, dim, seed)
    times: dict[str, list[float]] = {name: [] for name in parts}
    names = list(parts)
    for rep in range(warmup + reps):
        for name in (names if rep % 2 else names[::-1]):
            t0 = time.perf_counter()
            parts[name]()
            dt = time.perf_counter() - t0
            if rep >= warmup:
                times[name].append(dt)
    ms = {name: 1e3 * statistics.median(v) for name, v in times.items()}
    base = ms["base"]
    row = {"case": case.label, "k": k, "target": case.target}
    row.update({f"{name}_ms": v for name, v in ms.items()})
    row["ratio"] = ms["loss"] / base
    row["rest_ms"] = ms["loss"] - sum(ms.get(name, 0.0) for name in
                                      ("logits", "stats", "logging", "pooled"))
    row["budget_ms"] = case.target * base - ms["logits"]
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="only the cases at these 2N (default: every case)")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for case in CASES:
        if case.compiled or case.both or case.base != "infonce" or (args.sizes and
                                                        case.two_n not in args.sizes):
            continue
        rows.append(parts_row(case, dim=args.dim, reps=args.reps))
        print(f"  {case.label}: {rows[-1]['ratio']:.3f}x", flush=True)
    cols = ["case", "target", "ratio", "base_ms", "loss_ms", "logits_ms", "budget_ms",
            "stats_ms", "select_ms", "fit_ms", "logging_ms", "pooled_ms", "rest_ms"]
    print(tabulate([[r.get(c, "") for c in cols] for r in rows], headers=cols,
                   floatfmt=".3f", tablefmt="github"))
    print(f"torch {torch.__version__}, numpy {np.__version__}, one thread, "
          f"{args.reps} repetitions")
    if args.json:
        write_json(args.json, {"rows": rows, "torch": torch.__version__, "numpy": np.__version__,
                               "threads": torch.get_num_threads()}, cfg=vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
