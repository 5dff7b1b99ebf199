"""The two top-M terms of the authors' CIFAR-100 training recipe (``docs/method.md``,
"The authors' recipe").

The official WEINCE runs add ``0.5 * L_weib_topM + 0.5 * L_soft_topM`` (M = 50) to the
WEINCE loss, while their InfoNCE baseline gets neither: a confound that the artifact
exposes with the ``infonce_topm`` arm. ``beta_t`` is a batch-level Weibull exponent kept as
an exponential moving average by :class:`weince.losses.WEINCERecipeLoss`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from weince.losses._common import (cached, check_batch, cpu_selection, invert,
                                   largest_per_row, loss_tau, negative_values, upcast)

__all__ = ["top_negatives", "topm_softmax", "topm_weibull", "fit_batch_beta"]


def top_negatives(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None, m: int,
                  top_idx: torch.Tensor | None = None) -> torch.Tensor:
    """Column indices ``(B, m')`` of the ``m' = min(m, K)`` most similar negatives of each row.

    ``top_idx``: the sorted top negatives from :func:`weince.losses.weince_statistics` called
    with ``topk_extra=m``; its width is at least ``min(m, K)``, so it is reused as is.
    """
    if top_idx is not None:
        return top_idx[:, : min(int(m), top_idx.shape[1])]
    K = sim.shape[1] - 1 if mask is None else int(mask[0].sum()) - 1
    m = max(1, min(int(m), K))
    neg = negative_values(sim.detach().float(), targets, invert(mask))
    return torch.topk(neg, m, dim=1, largest=True, sorted=True).indices


def _candidates(sim, targets, mask, m, top_idx):
    idx = top_negatives(sim, targets, mask, m, top_idx)
    rows = torch.arange(sim.shape[0], device=sim.device)
    pos = sim[rows, targets].unsqueeze(1)
    return upcast(torch.cat([pos, sim.gather(1, idx)], dim=1))  # positive first


def topm_softmax(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
                 tau: float | torch.Tensor | None = None, m: int = 50,
                 top_idx: torch.Tensor | None = None, *,
                 temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """``L_soft_topM``: cross-entropy over the positive and the ``m`` most similar negatives,
    logits ``s / tau`` (``tau`` default ``0.5``; ``temperature`` is another name for it).
    Shapes as in :func:`weince.losses.info_nce`."""
    tau = loss_tau(tau, temperature, getattr(sim, "dtype", None))
    check_batch(sim, targets, mask, sync=False)  # shapes and dtypes only: no host sync
    cand = _candidates(sim, targets, mask, m, top_idx)
    zeros = torch.zeros(sim.shape[0], dtype=torch.long, device=sim.device)
    return F.cross_entropy(cand / tau, zeros)


def topm_weibull(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
                 beta_t: torch.Tensor | float = 4.0, m: int = 50, eps: float = 1e-6,
                 top_idx: torch.Tensor | None = None) -> torch.Tensor:
    """``L_weib_topM``: the same candidates as :func:`topm_softmax` with logits
    ``-beta_t * log(1 - min(s, 1 - eps))``."""
    check_batch(sim, targets, mask, sync=False)
    cand = _candidates(sim, targets, mask, m, top_idx)
    zeros = torch.zeros(sim.shape[0], dtype=torch.long, device=sim.device)
    return F.cross_entropy(-beta_t * torch.log1p(-cand.clamp(max=1.0 - eps)), zeros)


@torch.no_grad()
def fit_batch_beta(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
                   eps: float = 1e-6, min_points: int = 1024, frac: float = 0.05):
    """Batch-level Weibull exponent of the pooled negative shortfalls (``docs/method.md``,
    "The authors' recipe").

    Pools every (row, negative) shortfall ``1 - s``, keeps the smallest
    ``k = min(count, max(min_points, int(frac * count)))``, drops ``max(1, k // 20)``
    burn-in points and fits ``log F ~ a + beta log delta`` with ``F_m = m / (k + 1)``.

    Returns:
        ``(slope, r2)`` as 0-d float64 tensors (``r2`` clamped to ``[0, 1]``); ``(0, 0)``
        when fewer than 12 shortfalls exist.
    """
    check_batch(sim, targets, mask, sync=False)
    neg = negative_values(sim.detach().float(), targets, invert(mask))
    count = int(torch.isfinite(neg).sum())
    return batch_beta_from_negatives(neg, count, eps, min_points, frac, inplace=True)


def _largest(vals: torch.Tensor, k: int, inplace: bool = False) -> torch.Tensor:
    """The ``k`` largest entries of the 1-D ``vals``, largest first: ``torch.topk``'s values;
    on CPU by :func:`weince.losses._common.largest_per_row` (``torch.topk`` with a large
    sorted ``k`` is several times slower there)."""
    if not cpu_selection(vals):
        return torch.topk(vals, k, largest=True, sorted=True).values
    a = vals.numpy() if inplace else vals.numpy().copy()
    return torch.from_numpy(largest_per_row(a.reshape(1, -1), k)[0])


def pool_size(count: int, min_points: int = 1024, frac: float = 0.05) -> int:
    """The recipe's pooled fit keeps the smallest ``min(count, max(min_points, frac*count))``
    shortfalls."""
    return min(count, max(int(min_points), int(frac * count)))


def pooled_top_cpu(sim: torch.Tensor, k: int, targets: torch.Tensor | None = None,
                   invalid: torch.Tensor | None = None, half: int | None = None) -> torch.Tensor:
    """The ``k`` largest negative similarities of the whole batch, largest first, as float64
    (CPU, NumPy introselect: the same numbers as ``torch.topk`` of the flattened
    :func:`negative_values`). ``half``: the SimCLR layout with ``N = half`` (positive
    ``(i + N) mod 2N``, diagonal invalid) instead of ``targets``/``invalid``."""
    src = sim.data if sim.dtype != torch.bfloat16 else sim.data.float()   # NumPy has no bf16
    a = np.array(np.from_dlpack(src))           # one scratch copy
    rows = np.arange(a.shape[0])
    if half is None:
        if invalid is not None:
            a[invalid.numpy()] = -np.inf
        assert targets is not None, "targets are needed without half"
        a[rows, targets.cpu().numpy()] = -np.inf
    else:
        a[rows, rows] = -np.inf
        a[rows, (rows + half) % a.shape[0]] = -np.inf
    return torch.from_numpy(largest_per_row(a.reshape(1, -1), k)[0].astype(np.float64))


def pooled_top_from_rows(top: torch.Tensor | None, k: int, sim: torch.Tensor,
                         targets: torch.Tensor | None = None, invalid: torch.Tensor | None = None,
                         half: int | None = None) -> torch.Tensor:
    """:func:`pooled_top_cpu` from ``top``, each row's ``w`` largest negative similarities
    (largest first, as WEINCE's statistics select them): the batch's ``k`` largest are
    among them, except in a row whose ``w``-th largest exceeds the ``k``-th largest of all
    of ``top`` (it may hold more): such rows join in full. The same numbers, without a
    copy and a selection over the whole of ``sim`` when few rows are that crowded
    (``top=None``: :func:`pooled_top_cpu` itself)."""
    u = None if top is None else np.from_dlpack(top)
    if u is None or k > u.size or np.isnan(u).any():
        return pooled_top_cpu(sim, k, targets, invalid, half)
    flat = u.reshape(-1).copy()
    flat.partition(flat.size - k)
    crowded = np.flatnonzero(u[:, -1] > flat[flat.size - k:].min())
    if not crowded.size:                                    # the k largest of top are those
        return torch.from_numpy(np.sort(flat[flat.size - k:])[::-1].astype(np.float64))
    src = sim.data if sim.dtype != torch.bfloat16 else sim.data.float()
    full = np.from_dlpack(src)[crowded]               # a copy of those rows
    rows = np.arange(crowded.size)
    if half is None:
        assert targets is not None, "targets are needed without half"
        if invalid is not None:
            full[invalid.numpy()[crowded]] = -np.inf
        full[rows, targets.cpu().numpy()[crowded]] = -np.inf
    else:
        full[rows, crowded] = -np.inf
        full[rows, (crowded + half) % sim.shape[0]] = -np.inf
    rest = np.delete(u, crowded, axis=0).reshape(-1)
    flat = np.concatenate([rest, full.reshape(-1).astype(u.dtype)])
    return torch.from_numpy(largest_per_row(flat.reshape(1, -1), k)[0].astype(np.float64))


@torch.library.custom_op("weince::pooled_top", mutates_args=())
def pooled_top_op(sim: torch.Tensor, k: int, targets: torch.Tensor,
                  invalid: torch.Tensor | None, half: int) -> torch.Tensor:
    """:func:`pooled_top_cpu` as an op a compiled graph calls (``half < 0``: none)."""
    return pooled_top_cpu(sim, k, targets, invalid, None if half < 0 else half)


@pooled_top_op.register_fake
def _(sim, k, targets, invalid, half):
    return sim.new_empty((k,), dtype=torch.float64)


_POOL: dict = {}


def fit_pooled(top: torch.Tensor, k: int, eps: float = 1e-6):
    """The recipe's pooled Weibull fit on ``top``, the ``k`` largest negative similarities
    (largest first): drop ``b = max(1, k // 20)`` burn-in points, regress ``log F_m`` on
    ``log delta``. Returns ``(slope, r2)`` as 0-d float64 tensors, ``(0, 0)`` when ``k < 10``.
    A dozen ops: the centred responses are cached per ``k``, ``SSE = S_yy - slope S_xy``."""
    b = max(1, k // 20)
    n = k - b
    if k < 10 or n < 2:
        zero = torch.zeros((), dtype=torch.float64, device=top.device)
        return zero, zero
    def build():  # constants in plain Python: no value is read back from a tensor
        y = [math.log(m / (k + 1)) for m in range(b + 1, k + 1)]
        y_mean = sum(y) / n
        yc = [v - y_mean for v in y]
        return (torch.tensor([v / n for v in yc], dtype=torch.float64, device=top.device),
                sum(v * v for v in yc))

    w, syy = cached(_POOL, (k, str(top.device)), build)
    top = top if top.dtype == torch.float64 else top.double()
    x = torch.rsub(top[b:], 1.0).clamp_min_(eps).log_()
    var, mean = torch.var_mean(x, correction=0)              # S_xx / n
    c = (x - mean) @ w                                        # S_xy / n
    slope = c / var.clamp_min(1e-12 / n)
    r2 = (slope * c).mul_(n / max(syy, 1e-12)).clamp_(0.0, 1.0)   # 1 - SSE / S_yy
    return slope, r2


@torch.no_grad()
def batch_beta_from_negatives(neg: torch.Tensor, count: int, eps: float = 1e-6,
                              min_points: int = 1024, frac: float = 0.05, inplace: bool = False):
    """:func:`fit_batch_beta` on ``neg`` (similarities, ``-inf`` off the ``count`` negatives).
    ``inplace``: ``neg`` is a scratch copy that may be reordered (saves a copy on CPU)."""
    k = pool_size(count, min_points, frac)
    if k < 10 or k - max(1, k // 20) < 2:
        return fit_pooled(neg.new_zeros(0), k, eps)
    return fit_pooled(_largest(neg.flatten(), k, inplace), k, eps)
