"""Claim C9 as a computed result (the ``special_case`` stage): WEINCE with ``lambda = 0``
is InfoNCE, exactly.

:func:`special_case_check` compares, on random batches of both layouts (SimCLR ``2N x 2N``
with the diagonal masked, and SimCSE ``B x B`` pairs), in float32 and float64:

- ``weince(sim, targets, mask, tau, lam=0)`` against ``info_nce(sim, targets, mask, tau)``
  (functional API), and the gradients of both with respect to ``sim``;
- the modules ``build_loss("weince", lam=0)`` against ``build_loss("infonce")`` on two
  views, with the gradients with respect to the embeddings.

It also counts the trainable parameters of every loss arm (C8: zero). The result file
``special_case.json`` holds ``max_abs_diff`` (the largest difference over all cases,
losses and gradients) and one record per case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch

from weince.losses import Layout, build_loss, info_nce, pair_similarities, weince

__all__ = ["special_case_check", "DEFAULT_CASES"]

# (layout, N, d, tau); N = images per view (SimCLR) or sentences (pairs)
DEFAULT_CASES: tuple[tuple[str, int, int, float], ...] = (
    ("simclr", 32, 16, 0.5),
    ("simclr", 128, 64, 0.2),
    ("pairs", 64, 32, 0.05),
    ("pairs", 200, 128, 0.5),
)


def _max_diff(a, b) -> float:
    return float((a.detach() - b.detach()).abs().max())


def special_case_check(cases: Sequence[Sequence[Any]] = DEFAULT_CASES, seed: int = 0,
                       arms: Sequence[str] = ("infonce", "weince", "weince_recipe",
                                              "infonce_topm")) -> dict[str, Any]:
    """Run the comparisons; returns the JSON-able result (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    records: list[dict[str, Any]] = []
    for layout, n, d, tau in cases:
        layout, n, d, tau = str(layout), int(n), int(d), float(tau)
        if layout not in ("simclr", "pairs"):
            raise ValueError(f"case layout must be 'simclr' or 'pairs', got {layout!r}")
        for dtype in (torch.float32, torch.float64):
            z1 = torch.randn(n, d, generator=g, dtype=dtype)
            z2 = z1 + 0.7 * torch.randn(n, d, generator=g, dtype=dtype)
            sim, targets, mask = pair_similarities(z1, z2, cast(Layout, layout))
            s1 = sim.detach().clone().requires_grad_(True)
            s2 = sim.detach().clone().requires_grad_(True)
            l_ref = info_nce(s1, targets, mask, tau)
            l_w = weince(s2, targets, mask, tau, lam=0.0)
            l_ref.backward()
            l_w.backward()
            # modules on two views
            a1, b1 = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
            a2, b2 = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
            m_ref = build_loss("infonce", tau=tau, layout=layout)(a1, b1)
            m_w = build_loss("weince", tau=tau, layout=layout, lam=0.0)(a2, b2)
            m_ref.backward()
            m_w.backward()
            rec = {
                "layout": layout, "N": n, "d": d, "tau": tau, "dtype": str(dtype).split(".")[-1],
                "loss_infonce": float(l_ref.detach()), "loss_weince_lam0": float(l_w.detach()),
                "loss_abs_diff": abs(float(l_ref.detach()) - float(l_w.detach())),
                "grad_sim_max_abs_diff": _max_diff(s1.grad, s2.grad),
                "module_loss_abs_diff": abs(float(m_ref.detach()) - float(m_w.detach())),
                "module_grad_max_abs_diff": max(_max_diff(a1.grad, a2.grad),
                                                _max_diff(b1.grad, b2.grad)),
            }
            records.append(rec)
    keys = ("loss_abs_diff", "grad_sim_max_abs_diff", "module_loss_abs_diff",
            "module_grad_max_abs_diff")
    worst = max(r[k] for r in records for k in keys)
    worst64 = max(r[k] for r in records if r["dtype"] == "float64" for k in keys)
    params = {}
    for arm in arms:
        mod = build_loss(arm)
        params[arm] = int(sum(p.numel() for p in mod.parameters() if p.requires_grad))
    return {"max_abs_diff": worst, "max_abs_diff_float64": worst64, "cases": records,
            "trainable_parameters": params}
