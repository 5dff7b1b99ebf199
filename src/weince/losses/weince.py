"""WEINCE: the per-anchor blend of softmax logits and a Weibull endpoint-shortfall logit.

Paper: Erol et al., *When Softmax Fails at the Top: Extreme Value Corrections for InfoNCE*,
ICML 2026. Definitions follow the authors' official implementation (``shared/SPEC.md``
section 3): for row ``i`` with blend weight ``lambda_i`` (online batch statistics, no
gradient, no trainable parameter) the logit of candidate ``j`` is

    l_ij = (1 - lambda_i) * s_ij / tau + lambda_i * (-beta * log(1 - min(s_ij, 1 - eps)))

and the loss is the mean cross-entropy of ``l_i`` with the positive as target.
``lambda = 0`` is InfoNCE exactly.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from weince.losses._common import check_batch, check_tau, cpu_selection, invert, negative_values, upcast

__all__ = ["weince", "tail_size", "weince_statistics", "GATES", "BETAS"]

GATES = ("both", "rho", "aic")
BETAS = ("one", "anchor")


def tail_size(K: int, tail_frac: float = 0.10, min_tail: int = 32) -> int:
    """SPEC 3.1 step 1: ``k = max(min_tail, round(tail_frac*K))``, then ``min(k, K)``,
    ``max(10, k)``, ``min(k, K)``."""
    k = max(int(min_tail), int(round(tail_frac * K)))
    k = min(k, K)
    k = max(10, k)
    return min(k, K)


def check_weince_args(tau, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps, beta,
                      gate, lam, beta_min, beta_max) -> None:
    check_tau(tau)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q (quantile of rho that sets the pivot rho0) must lie in [0, 1], got {q!r}")
    if not tail_frac > 0:
        raise ValueError(f"tail_frac must be > 0, got {tail_frac!r}")
    if int(min_tail) < 1:
        raise ValueError(f"min_tail must be >= 1, got {min_tail!r}")
    if not 0 < eps < 0.5:
        raise ValueError(f"eps must lie in (0, 0.5), got {eps!r}")
    if kappa_rho < 0 or kappa_aic < 0:
        raise ValueError(f"kappa_rho and kappa_aic must be >= 0, got {kappa_rho!r}, {kappa_aic!r}")
    if not math.isfinite(margin):
        raise ValueError(f"margin must be finite, got {margin!r}")
    if beta not in BETAS:
        raise ValueError(f"beta must be one of {BETAS} ('one': the official code; 'anchor': the "
                         f"paper's per-anchor Weibull slope), got {beta!r}")
    if gate not in GATES:
        raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
    if lam is not None and not 0.0 <= float(lam) <= 1.0:
        raise ValueError(f"lam (forced blend weight) must lie in [0, 1] or be None, got {lam!r}")
    if not 0 < beta_min <= beta_max:
        raise ValueError(f"need 0 < beta_min <= beta_max, got {beta_min!r}, {beta_max!r}")


_DESIGNS: dict = {}


def _design(k: int, b: int, device: torch.device):
    """Centred responses ``(n, 2)`` of the two tail fits (``log F_m``, ``log(-log F_m)`` with
    ``F_m = m / (k + 1)``, ``m = b+1..k``) and their sums of squares ``(2,)``, cached."""
    key = (k, b, str(device))
    if key not in _DESIGNS:
        F_m = torch.arange(b + 1, k + 1, dtype=torch.float64) / (k + 1)
        Y = torch.stack([torch.log(F_m), torch.log(-torch.log(F_m))], dim=1)
        Yc = Y - Y.mean(dim=0)
        _DESIGNS[key] = (Yc.to(device), (Yc * Yc).sum(dim=0).to(device))
    return _DESIGNS[key]


def _top_negatives_cpu(s: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None,
                       k: int, with_indices: bool = False):
    """The ``k`` largest negative similarities of each row, largest first: the same numbers as
    ``torch.topk(negative_values(s, targets, invalid), k).values``, several times faster on
    CPU. Rows go through a small reused buffer in blocks (copy, ``-inf`` at the positive and
    the invalid columns, introselect by ``np.partition``), so no full-size copy of ``s`` is
    made; only the ``k`` survivors of each row are sorted. ``with_indices``: also their
    columns, as ``(values, indices)`` (ties may come in another order than ``torch.topk``'s)."""
    a = s.numpy()
    B, C = a.shape
    t = targets.cpu().numpy()
    inv = None if invalid is None else invalid.numpy()
    rows = max(1, min(B, (1 << 18) // C))  # blocks of about 1 MiB stay in cache
    buf = np.empty((rows, C), dtype=a.dtype)
    out = np.empty((B, k), dtype=a.dtype)
    idx = np.empty((B, k), dtype=np.int64) if with_indices else None
    for r0 in range(0, B, rows):
        r1 = min(B, r0 + rows)
        blk = buf[: r1 - r0]
        np.copyto(blk, a[r0:r1])
        if inv is not None:
            np.copyto(blk, -np.inf, where=inv[r0:r1])
        blk[np.arange(r1 - r0), t[r0:r1]] = -np.inf
        if with_indices:
            cols = np.argpartition(blk, C - k, axis=1)[:, C - k:]
            vals = np.take_along_axis(blk, cols, axis=1)
            order = np.argsort(vals, axis=1)[:, ::-1]
            out[r0:r1] = np.take_along_axis(vals, order, axis=1)
            idx[r0:r1] = np.take_along_axis(cols, order, axis=1)
        else:
            blk.partition(C - k, axis=1)
            out[r0:r1] = blk[:, C - k:]
    if with_indices:
        return torch.from_numpy(out), torch.from_numpy(idx)
    out.sort(axis=1)
    return torch.from_numpy(out[:, ::-1].copy())


def weince_statistics(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None, *,
                      q: float = 0.2, margin: float = 2.0, kappa_rho: float = 10.0,
                      kappa_aic: float = 1.0, tail_frac: float = 0.10, min_tail: int = 32,
                      eps: float = 1e-6, gate: str = "both") -> dict:
    """Per-anchor statistics of SPEC 3.1 (no gradient), as ``weince(..., return_stats=True)``
    returns them: ``(B,)`` tensors ``lambda``, ``rho``, ``daic``, ``beta_w``; ``rho0``, ``k``, ``n``."""
    check_weince_args(0.5, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps, "one", gate,
                      None, 0.5, 16.0)
    K = check_batch(sim, targets, mask)
    st = _statistics(sim, targets, invert(mask), K, q=q, margin=margin, kappa_rho=kappa_rho,
                     kappa_aic=kappa_aic, tail_frac=tail_frac, min_tail=min_tail, eps=eps, gate=gate)
    return {key: val for key, val in st.items() if key not in ("top_idx", "neg")}


@torch.no_grad()
def _statistics(sim: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None, K: int, *,
                q: float, margin: float, kappa_rho: float, kappa_aic: float, tail_frac: float,
                min_tail: int, eps: float, gate: str, topk_extra: int = 0) -> dict:
    """Vectorised SPEC 3.1 over rows. Besides the statistics, returns ``neg`` (the detached
    similarities with positive and invalid columns at ``-inf``; ``None`` on the CPU path,
    which never builds it) and ``top_idx``: the columns of
    the ``max(k, min(topk_extra, K))`` most similar negatives of each row, most similar first
    (the recipe's top-M terms and ``beta_t`` fit reuse both)."""
    s = sim.detach()
    if s.dtype not in (torch.float32, torch.float64):
        s = s.float()
    B = s.shape[0]
    k = tail_size(K, tail_frac, min_tail)
    width = max(k, min(topk_extra, K))
    if cpu_selection(s):
        if topk_extra == 0:
            top_vals, top_idx = _top_negatives_cpu(s, targets, invalid, k), None
        else:
            top_vals, top_idx = _top_negatives_cpu(s, targets, invalid, width, with_indices=True)
        neg = None
    else:
        neg = negative_values(s, targets, invalid)
        top_vals, top_idx = torch.topk(neg, width, dim=1, largest=True, sorted=True)
    top = top_vals[:, :k].double()  # statistics in float64: (B, k) is small
    rho = (1.0 - top[:, 0]).clamp_min(eps)
    kq = int(round(q * (B - 1)))
    rho0 = rho.kthvalue(kq + 1).values.clamp_min(eps)  # sorted rho at index kq
    b = max(1, k // 20)
    n = k - b
    if n >= 2:
        # Two OLS lines against x = log(delta) on the same n points: the Weibull line
        # y = log F_m and the Gumbel proxy y = log(-log F_m). Both responses depend on (k, b)
        # only, so their centred values are cached and the slopes come from one matmul.
        Yc, syy = _design(k, b, s.device)                      # (n, 2), (2,)
        x = torch.log((1.0 - top[:, b:]).clamp_min(eps))      # (B, n), ascending shortfalls
        xc = x - x.mean(dim=1, keepdim=True)
        sxx = (xc * xc).sum(dim=1, keepdim=True).clamp_min(1e-12)
        sxy = xc @ Yc                                          # (B, 2)
        slope = sxy / sxx
        sse = (syy - slope * sxy).clamp_min(1e-12)             # residual sums of squares
        beta_w, g = slope[:, 0], slope[:, 1]
        sse_w = sse[:, 0] + 1e6 * (beta_w <= 0)
        sse_g = sse[:, 1] + 1e6 * (g >= 0)
        # AIC = n log(SSE / n) + 4 for both fits, so dAIC = AIC_G - AIC_W = n log(SSE_G / SSE_W)
        daic = n * torch.log(sse_g / sse_w)
        lam_rho = torch.sigmoid(kappa_rho * torch.log(rho0 / rho))
        lam_aic = torch.sigmoid(kappa_aic * (daic - margin))
        lam = {"both": lam_rho * lam_aic, "rho": lam_rho, "aic": lam_aic}[gate]
    else:  # too few negatives for a tail fit: the loss falls back to InfoNCE
        beta_w = torch.zeros_like(rho)
        daic = torch.zeros_like(rho)
        lam = torch.zeros_like(rho)
    return {
        "lambda": lam.float(), "rho": rho.float(), "daic": daic.float(), "beta_w": beta_w.float(),
        "rho0": rho0.float(), "k": k, "n": n, "top_idx": top_idx, "neg": neg,
    }


class _BlendedLogits(torch.autograd.Function):
    """Fused ``(1 - lam_i) s_ij / tau - c_i log(1 - min(s_ij, 1 - eps))`` with invalid columns
    set to ``-inf``, where ``c_i = lam_i * beta_i``. The backward is written out
    (``d/ds = (1 - lam_i) / tau + c_i / (1 - s_ij)`` below the clamp, 0 above it).

    At a large batch the cost is memory traffic and, on CPU, the page faults of every fresh
    ``(B, C)`` tensor, so each direction allocates one such tensor and works in place:
    forward ``log(max(1 - s, eps))`` scaled by ``-c_i``, plus ``s / (tau / (1 - lam_i))``;
    backward ``1 / (1 - s)`` (``0`` where ``1 - s <= eps``) scaled and shifted per row.
    ``lam_i = 0`` adds ``-0 * log(.)`` to ``s / tau``, so WEINCE with ``lam = 0`` is InfoNCE
    bit for bit."""

    @staticmethod
    def forward(ctx, s, keep, c, tau, eps, invalid):
        x = torch.rsub(s, 1.0).clamp_min_(eps).log_().mul_(c.neg())
        x.addcdiv_(s, tau / keep)  # (1 - lam_i) s / tau; keep = 0 gives tau / 0 = inf, s / inf = 0
        if invalid is not None:
            x.masked_fill_(invalid, float("-inf"))
        ctx.save_for_backward(s, keep, c)
        ctx.tau, ctx.eps = tau, eps
        return x

    @staticmethod
    def backward(ctx, grad):
        s, keep, c = ctx.saved_tensors
        slope = torch.rsub(s, 1.0)
        F.threshold_(slope, ctx.eps, float("inf"))         # 1 - s <= eps: the clamp holds, slope 0
        slope.reciprocal_().mul_(c).add_(keep / ctx.tau).mul_(grad)
        return slope, None, None, None, None, None


def blended_logits(sim: torch.Tensor, lam: torch.Tensor, tau: float, beta: torch.Tensor | float,
                   eps: float, invalid: torch.Tensor | None = None) -> torch.Tensor:
    """``(1 - lam_i) s_ij / tau + lam_i (-beta_i log(1 - min(s_ij, 1 - eps)))`` (float32, or
    float64 for float64 input), ``-inf`` where ``invalid``. ``lam``: ``(B,)``; ``beta``: a
    number or ``(B,)``."""
    s = upcast(sim)
    lam = lam.to(s.dtype)[:, None]
    c = lam * (beta.to(s.dtype)[:, None] if isinstance(beta, torch.Tensor) else float(beta))
    return _BlendedLogits.apply(s, 1.0 - lam, c, float(tau), float(eps), invalid)


def _weince(sim, targets, invalid, K, tau, *, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail,
            eps, beta, gate, lam, return_stats, beta_min=0.5, beta_max=16.0, topk_extra=0):
    need_stats = lam is None or beta == "anchor" or return_stats
    stats = None
    if need_stats:
        stats = _statistics(sim, targets, invalid, K, q=q, margin=margin, kappa_rho=kappa_rho,
                                  kappa_aic=kappa_aic, tail_frac=tail_frac, min_tail=min_tail,
                                  eps=eps, gate=gate, topk_extra=topk_extra)
    if lam is None:
        lam_row = stats["lambda"]
    else:
        lam_row = torch.full((sim.shape[0],), float(lam), device=sim.device)
        if stats is not None:
            stats["lambda"] = lam_row
    beta_val = 1.0 if beta == "one" else stats["beta_w"].clamp(beta_min, beta_max)
    loss = F.cross_entropy(blended_logits(sim, lam_row, tau, beta_val, eps, invalid), targets)
    return loss, stats


def weince(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
           tau: float = 0.5, *, q: float = 0.2, margin: float = 2.0, kappa_rho: float = 10.0,
           kappa_aic: float = 1.0, tail_frac: float = 0.10, min_tail: int = 32, eps: float = 1e-6,
           beta: Literal["one", "anchor"] = "one", gate: Literal["both", "rho", "aic"] = "both",
           lam: float | None = None, return_stats: bool = False, beta_min: float = 0.5,
           beta_max: float = 16.0):
    """WEINCE loss (SPEC section 3).

    Args:
        sim: ``(B, C)`` cosine similarities (row = anchor, column = candidate); any float
            dtype (statistics and logits are computed in float32/float64).
        targets: ``(B,)`` column of each row's positive.
        mask: optional ``(B, C)`` boolean of valid candidates; every row must keep its
            positive and the same number ``K`` of negatives.
        tau: temperature of the softmax part.
        q: quantile of ``rho`` over rows that sets the pivot ``rho0``.
        margin, kappa_rho, kappa_aic: gate offsets and slopes.
        tail_frac, min_tail: tail size ``k`` (SPEC 3.1 step 1).
        eps: floor of shortfalls and of ``1 - s`` in the Weibull logit.
        beta: ``"one"`` (official code, ``beta = 1``) or ``"anchor"`` (paper's printed
            formula: per-anchor Weibull slope clamped to ``[beta_min, beta_max]``).
        gate: ``"both"`` (product of the two sigmoids), ``"rho"`` or ``"aic"``.
        lam: force every row's ``lambda`` (ablations); ``lam=0`` equals :func:`info_nce`.
        return_stats: also return the statistics.

    Returns:
        The scalar loss, or ``(loss, stats)`` with ``stats`` holding ``(B,)`` tensors
        ``lambda``, ``rho``, ``daic``, ``beta_w`` and scalars ``rho0``, ``k``, ``n``.

    Raises:
        ValueError: bad arguments (``tau <= 0``, ``q`` outside ``[0, 1]``, unknown
            ``beta``/``gate``), mismatched shapes, a masked-out positive, unequal negative
            counts.

    Example:
        >>> sim, targets, mask = pair_similarities(z1, z2, "simclr")
        >>> loss, stats = weince(sim, targets, mask, tau=0.5, return_stats=True)
        >>> stats["lambda"].mean()
    """
    check_weince_args(tau, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps, beta, gate,
                      lam, beta_min, beta_max)
    K = check_batch(sim, targets, mask)
    loss, stats = _weince(sim, targets, invert(mask), K, tau, q=q, margin=margin, kappa_rho=kappa_rho,
                          kappa_aic=kappa_aic, tail_frac=tail_frac, min_tail=min_tail, eps=eps,
                          beta=beta, gate=gate, lam=lam, return_stats=return_stats,
                          beta_min=beta_min, beta_max=beta_max)
    if not return_stats:
        return loss
    stats = {key: val for key, val in stats.items() if key not in ("top_idx", "neg")}
    return loss, stats
