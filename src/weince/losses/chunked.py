"""Row-chunked losses (``chunk_size=``): the similarity rows of a chunk of anchors against
every candidate at a time, so that no ``B x C`` matrix is ever held whole.

The loss of a batch is a sum of row losses, and WEINCE's per-row statistics are row-local
but for the pivot ``rho0``, the ``q``-quantile of every row's ``rho``. So the rows are seen
in chunks of ``chunk_size`` anchors, three times:

1. without gradient, each chunk's ``log rho`` (``1 - `` its largest negative, floored at
   ``eps``): ``B`` numbers, and from them ``rho0`` (or the given ``rho0``, or the local-loss
   mode's quantile over every process's rows);
2. without gradient, each chunk's statistics (tail fit, ``lambda``) with that pivot;
3. each chunk's row losses, without keeping their activations (:class:`_Recomputed`, the
   idea of :func:`torch.utils.checkpoint.checkpoint`): only the chunk's inputs (views of
   the anchors and the candidates) and its ``(rows,)`` coefficients are kept for the
   backward, which runs the chunk's loss again with gradient and differentiates it. Memory
   is ``chunk_size x C`` per live matrix, forward and backward.

The recompute runs the very ops of the unchunked loss (WEINCE's fused logits with their
written-out backward, the cross-entropy), so the gradients are those of the unchunked loss
by construction, a learnable ``tau``'s included; a hand-written derivative of the whole
chain would save one matmul per chunk in the backward, at the cost of a second
implementation of every derivative. (``torch.utils.checkpoint`` itself would do, but its
first call imports ``torch._dynamo``: two seconds and 0.15 GiB.) The result equals the
unchunked loss and
its gradients to rounding, not bit for bit: a chunk's matmul may round differently from the
whole matrix's (BLAS picks kernels by shape), and the row losses and the candidates'
gradients are summed chunk by chunk (``tests/losses/test_chunked.py``: 1e-12 in float64).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from weince.losses._common import (check_views, custom_bwd, custom_fwd, no_autocast,
                                   reduce_rows, similarity, unit_rows, upcast)
from weince.losses.infonce import _info_nce
from weince.losses.weince import blended_logits, row_log_rho, row_statistics

__all__ = ["Rows", "check_chunk_size", "chunked_info_nce", "chunked_weince", "view_rows"]


def check_chunk_size(chunk_size) -> int | None:
    """``chunk_size`` as an int ``>= 1``, or ``None`` (no chunking); else a ``ValueError``."""
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int (anchors per chunk of similarity "
                         f"rows) or None (no chunking), got {chunk_size!r}")
    return chunk_size


@dataclass
class Rows:
    """The similarity rows ``anchors @ candidates^T`` of a batch, built a chunk at a time.

    ``anchors`` ``(R, d)``, ``candidates`` ``(C, d)`` (unit rows, or as the caller wants
    them), ``targets`` ``(R,)`` the positive's column, ``K`` the negatives per row (an int,
    or the ``(R,)`` counts ``K_i`` of a mask that keeps unequal numbers);
    ``self_cols`` ``(R,)``: a column invalid for each row (the anchor itself, SimCLR's
    layout); ``mask`` ``(R, C)`` boolean of valid columns (``False`` drops one)."""
    anchors: torch.Tensor
    candidates: torch.Tensor
    targets: torch.Tensor
    K: int | torch.Tensor
    self_cols: torch.Tensor | None = None
    mask: torch.Tensor | None = None

    @property
    def n_rows(self) -> int:
        return self.anchors.shape[0]

    def sim(self, r0: int, r1: int) -> torch.Tensor:
        """Rows ``r0:r1`` of the similarities (with gradient, when the inputs have one)."""
        return similarity(self.anchors[r0:r1], self.candidates)

    def invalid(self, r0: int, r1: int) -> torch.Tensor | None:
        """Rows ``r0:r1`` of the invalid columns (``None``: every column valid)."""
        inv = None if self.mask is None else ~self.mask[r0:r1]
        if self.self_cols is not None:
            if inv is None:
                inv = torch.zeros((r1 - r0, self.candidates.shape[0]), dtype=torch.bool,
                                  device=self.anchors.device)
            inv[torch.arange(r1 - r0, device=inv.device), self.self_cols[r0:r1]] = True
        return inv

    def spans(self, chunk_size: int) -> list[tuple[int, int]]:
        R = self.n_rows
        return [(r0, min(R, r0 + chunk_size)) for r0 in range(0, R, chunk_size)]

    def full(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int | torch.Tensor]:
        """``(sim, targets, invalid, K)`` of every row at once (the unchunked batch)."""
        R = self.n_rows
        return self.sim(0, R), self.targets, self.invalid(0, R), self.K


def view_rows(z1: torch.Tensor, z2: torch.Tensor, layout: str) -> Rows:
    """The :class:`Rows` of two views, the rows of
    :func:`weince.losses._common.two_view_batch`: ``"pairs"``, ``z1`` against ``z2``,
    positive on the diagonal; ``"simclr"``, ``cat(z1, z2)`` against itself, the anchor's own
    column invalid, the other view the positive."""
    check_views(z1, z2)
    n = z1.shape[0]
    idx = torch.arange(n, device=z1.device)
    if layout == "pairs":
        return Rows(unit_rows(z1), unit_rows(z2), idx, n - 1)
    u = unit_rows(torch.cat([z1, z2], dim=0))
    return Rows(u, u, torch.cat([idx + n, idx]), 2 * n - 2,
                self_cols=torch.arange(2 * n, device=z1.device))


class _Recomputed(torch.autograd.Function):
    """``fn(*tensors)`` whose activations are not kept: the forward runs it without
    gradient and keeps only ``tensors``; the backward runs it again with gradient (autocast
    off, as the loss computes) and differentiates that."""

    @staticmethod
    @custom_fwd
    def forward(ctx, fn, *tensors):
        ctx.fn = fn
        ctx.save_for_backward(*tensors)
        return fn(*tensors)

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        tensors = [t.detach().requires_grad_(need)
                   for t, need in zip(ctx.saved_tensors, ctx.needs_input_grad[1:])]
        wanted = [t for t in tensors if t.requires_grad]
        with torch.enable_grad(), no_autocast(grad):
            out = ctx.fn(*tensors)
        found = iter(torch.autograd.grad(out, wanted, grad) if wanted else ())
        return (None, *(next(found) if t.requires_grad else None for t in tensors))


def _recomputed(fn, rows: Rows, r0: int, r1: int, tau) -> torch.Tensor:
    """``fn(anchors, candidates, tau)`` of rows ``r0:r1``, recomputed in the backward."""
    args = (rows.anchors[r0:r1], rows.candidates)
    if isinstance(tau, torch.Tensor):
        return _Recomputed.apply(fn, *args, tau)
    return _Recomputed.apply(lambda a, c: fn(a, c, tau), *args)


def chunked_info_nce(rows: Rows, tau, chunk_size: int, reduction: str = "mean",
                     weight: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE of ``rows``, ``chunk_size`` anchors at a time (the module docstring)."""
    def chunk(r0: int, r1: int):
        def fn(anchors, candidates, t):
            return _info_nce(anchors @ candidates.T, rows.targets[r0:r1], rows.invalid(r0, r1),
                             t, "none")
        return fn
    per_row = torch.cat([_recomputed(chunk(r0, r1), rows, r0, r1, tau)
                         for r0, r1 in rows.spans(chunk_size)])
    return reduce_rows(per_row, reduction, weight)


@torch.no_grad()
def _pivot(rows: Rows, chunk_size: int, q: float, eps: float, pivot) -> torch.Tensor:
    """``log rho0``: the ``q``-quantile of every row's ``log rho`` (``pivot``: a function of
    them that returns it, the local-loss mode's), computed chunk by chunk."""
    log_rho = torch.cat([row_log_rho(upcast(rows.sim(r0, r1)), rows.targets[r0:r1],
                                     rows.invalid(r0, r1), eps)
                         for r0, r1 in rows.spans(chunk_size)])
    if pivot is not None:
        return pivot(log_rho)
    return log_rho.kthvalue(int(round(q * (rows.n_rows - 1))) + 1).values


@torch.no_grad()
def chunked_statistics(rows: Rows, chunk_size: int, *, q: float, margin: float,
                       kappa_rho: float, kappa_aic: float, tail_frac: float, min_tail: int,
                       eps: float, gate: str, rho0=None, pivot=None) -> dict:
    """WEINCE's statistics of every row, chunk by chunk, in the form of
    :func:`weince.losses.weince._statistics` (``"d"`` holds the rows' ``rho`` only)."""
    log_rho0 = _pivot(rows, chunk_size, q, eps, pivot) if rho0 is None else None
    parts = []
    for r0, r1 in rows.spans(chunk_size):
        K = rows.K if isinstance(rows.K, int) else rows.K[r0:r1]
        parts.append(row_statistics(rows.sim(r0, r1), rows.targets[r0:r1],
                                    rows.invalid(r0, r1), K, q=q, margin=margin,
                                    kappa_rho=kappa_rho, kappa_aic=kappa_aic,
                                    tail_frac=tail_frac, min_tail=min_tail, eps=eps, gate=gate,
                                    rho0=rho0, pivot=lambda _, v=log_rho0: v))
    first = parts[0]
    joined = {key: torch.cat([p[key] for p in parts]) for key in ("lambda", "daic", "beta_w")}
    joined["d"] = torch.cat([p["d"][:, :1] for p in parts])
    if not isinstance(rows.K, int):      # per-row tail sizes
        joined.update({key: torch.cat([p[key] for p in parts]) for key in ("k", "n")})
    return {"k": first["k"], "n": first["n"], **joined, "kq": int(round(q * (rows.n_rows - 1))),
            "log_rho0": first["log_rho0"] if log_rho0 is None else log_rho0,
            "top_idx": None, "neg": None, "rho0": first["rho0"]}


def chunked_weince(rows: Rows, tau, chunk_size: int, *, q: float, margin: float,
                   kappa_rho: float, kappa_aic: float, tail_frac: float, min_tail: int,
                   eps: float, beta: str, gate: str, lam, return_stats: bool = False,
                   beta_min: float = 0.5, beta_max: float = 16.0, rho0=None,
                   reduction: str = "mean", weight: torch.Tensor | None = None, pivot=None):
    """WEINCE of ``rows``, ``chunk_size`` anchors at a time: ``(loss, stats)`` as
    :func:`weince.losses.weince._weince` returns them (``stats`` ``None`` when nothing needs
    them)."""
    stats = None
    if lam is None or beta == "anchor" or return_stats:
        stats = chunked_statistics(rows, chunk_size, q=q, margin=margin, kappa_rho=kappa_rho,
                                   kappa_aic=kappa_aic, tail_frac=tail_frac, min_tail=min_tail,
                                   eps=eps, gate=gate, rho0=rho0, pivot=pivot)
    dtype = torch.float64 if rows.anchors.dtype == torch.float64 else torch.float32
    if lam is None:
        assert stats is not None
        lam_row = stats["lambda"]
    else:
        lam_row = torch.full((rows.n_rows,), float(lam), device=rows.anchors.device, dtype=dtype)
        if stats is not None:
            stats["lambda"] = lam_row
    beta_row = None
    if beta != "one":
        assert stats is not None
        beta_row = stats["beta_w"].clamp(beta_min, beta_max)

    def chunk(r0: int, r1: int):
        def fn(anchors, candidates, t):
            b = 1.0 if beta_row is None else beta_row[r0:r1]
            logits = blended_logits(anchors @ candidates.T, lam_row[r0:r1], t, b, eps,
                                    rows.invalid(r0, r1))
            return F.cross_entropy(logits, rows.targets[r0:r1], reduction="none")
        return fn

    per_row = torch.cat([_recomputed(chunk(r0, r1), rows, r0, r1, tau)
                         for r0, r1 in rows.spans(chunk_size)])
    return reduce_rows(per_row, reduction, weight), stats
