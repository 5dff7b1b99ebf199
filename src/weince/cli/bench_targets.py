"""The loss-cost targets of ``weince bench-loss --targets``: each ratio measured side by side.

Every case times a loss and its baseline (forward+backward, on the CPU by default) in one
process, alternating their order each repetition, and reports the median of the paired
ratios (loss time over baseline time in the same repetition) with its min-max, beside the
target it is held to:

- WEINCE / InfoNCE at ``2N = 512`` and ``4096`` (the SimCLR layout, ``d = 128``);
- WEINCE / InfoNCE with a memory bank (``N = 256`` anchors against ``Q`` negatives, the bank
  full before timing starts);
- the recipe / InfoNCE at ``2N = 512``;
- WEINCE compiled (``torch.compile``, Inductor) / WEINCE eager at ``2N = 512`` and ``4096``;
- WEINCE / InfoNCE and the recipe / InfoNCE with both compiled, at the same targets as
  eager (the compiled kernels fuse WEINCE's extra passes, and InfoNCE's).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from weince.losses import build_loss

__all__ = ["Case", "CASES", "run_case", "run_targets"]


@dataclass(frozen=True)
class Case:
    label: str
    loss: str
    base: str
    two_n: int
    target: float
    bank: int = 0            # Q: a full memory bank of Q negatives (N = two_n // 2 anchors)
    compiled: bool = False   # loss = compiled ``base``, baseline = eager ``base``
    both: bool = False       # loss and baseline both compiled


CASES = (
    Case("WEINCE / InfoNCE, 2N = 512", "weince", "infonce", 512, 1.15),
    Case("WEINCE / InfoNCE, 2N = 4096", "weince", "infonce", 4096, 1.05),
    Case("WEINCE / InfoNCE, bank Q = 4096, N = 256", "weince", "infonce", 512, 1.15, bank=4096),
    Case("WEINCE / InfoNCE, bank Q = 65536, N = 256", "weince", "infonce", 512, 1.15,
         bank=65536),
    Case("recipe / InfoNCE, 2N = 512", "weince_recipe", "infonce", 512, 1.5),
    Case("WEINCE compiled / eager, 2N = 512", "weince", "weince", 512, 1.0, compiled=True),
    Case("WEINCE compiled / eager, 2N = 4096", "weince", "weince", 4096, 1.0, compiled=True),
    Case("WEINCE / InfoNCE, both compiled, 2N = 512", "weince", "infonce", 512, 1.15, both=True),
    Case("WEINCE / InfoNCE, both compiled, 2N = 4096", "weince", "infonce", 4096, 1.05,
         both=True),
    Case("recipe / InfoNCE, both compiled, 2N = 512", "weince_recipe", "infonce", 512, 1.5,
         both=True),
)


def _modules(case: Case, tau: float) -> tuple[Any, Any]:
    kw = {"memory_bank_size": case.bank} if case.bank else {}
    loss: Any = build_loss(case.loss, tau=tau, **kw).train()
    base: Any = build_loss(case.base, tau=tau, **kw).train()
    if case.compiled or case.both:  # one graph per shape: none dynamic across the cases
        torch.compiler.reset()
        loss = torch.compile(loss, dynamic=False)
    if case.both:
        base = torch.compile(base, dynamic=False)
    return loss, base


def run_case(case: Case, dim: int = 128, reps: int = 20, warmup: int = 3, seed: int = 0,
             tau: float = 0.2) -> dict:
    """Time one case; returns its row (``ratio`` the median paired ratio)."""
    g = torch.Generator().manual_seed(seed)
    n = case.two_n // 2
    views = []                  # a few batches in turn: a bank holds varied embeddings
    for _ in range(4):
        z1 = torch.randn(n, dim, generator=g)
        views.append((z1, z1 + 0.5 * torch.randn(n, dim, generator=g)))
    loss, base = _modules(case, tau)  # loss: a module or its compiled form
    fill = -(-case.bank // n) if case.bank else 0     # calls that fill the bank
    times: dict[str, list[float]] = {"loss": [], "base": []}
    for rep in range(fill + warmup + reps):
        order = (("loss", loss), ("base", base)) if rep % 2 else (("base", base), ("loss", loss))
        z1, z2 = views[rep % len(views)]
        for key, fn in order:
            a = z1.clone().requires_grad_(True)
            t0 = time.perf_counter()
            fn(a, z2).backward()
            dt = time.perf_counter() - t0
            if rep >= fill + warmup:
                times[key].append(dt)
    ratios = [x / y for x, y in zip(times["loss"], times["base"])]
    ratio = statistics.median(ratios)
    return {"case": case.label, "2N": case.two_n, "bank": case.bank,
            "loss_ms": 1e3 * statistics.median(times["loss"]),
            "base_ms": 1e3 * statistics.median(times["base"]), "ratio": ratio,
            "min-max": f"{min(ratios):.2f}-{max(ratios):.2f}", "target": case.target,
            "within": "yes" if ratio <= case.target else "NO", "reps": reps}


def run_targets(dim: int = 128, reps: int = 20, sizes: tuple[int, ...] | None = None,
                progress=print) -> list[dict]:
    """Every case of :data:`CASES` (those at the ``sizes`` given, if any), one after the
    other."""
    rows = []
    for case in CASES:
        if sizes and case.two_n not in sizes:
            continue
        rows.append(run_case(case, dim=dim, reps=reps))
        if progress:
            progress(f"  {case.label}: {rows[-1]['ratio']:.3f}x")
    return rows
