"""The per-call options of every loss and open_clip's form of the dual-encoder loss.

One direction of a contrastive loss is a set of rows (anchors) against columns (candidates):
the cosines ``s`` (for WEINCE's statistics and its endpoint logit), the linear logits (``s /
tau``, or open_clip's ``logit_scale * a @ b.T``), the positive(s) of each row and the
columns a mask drops. :func:`direction_loss` computes it with the options the field's loss
libraries give per call:

- ``positives``: a ``(B, C)`` boolean of every row's positives (labels: every same-label
  candidate, the supervised-contrastive form of pytorch-metric-learning's ``SupConLoss``).
  The row's loss is ``logsumexp_k l_ik - mean_{p in P_i} l_ip`` over its valid columns,
  and WEINCE's tail statistics take the row's negatives only (the columns that are neither
  positive nor dropped); at ``lambda = 0`` it is ``SupConLoss``;
- ``reduction`` and a per-row ``weight`` (as the functional forms take them).

open_clip's operation order (:func:`clip_logits`): ``logit_scale`` multiplies the features
before the matmul (``logit_scale * image_features @ text_features.T``), and the text side is
its own matmul, so that at ``lambda = 0`` (or ``loss="infonce"``) the loss is open_clip's
``ClipLoss`` bit for bit in float32 too; WEINCE blends those logits with the endpoint logit
of the cosines, ``(1 - lambda_i) l_ij - lambda_i beta log(1 - min(s_ij, 1 - eps))``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from weince.losses._common import (custom_bwd, custom_fwd, inverse_tau, masked_logits,
                                   negative_counts, reduce_rows, reduced_cross_entropy,
                                   similarity, upcast)
from weince.losses.weince import blended_logits, row_statistics

__all__ = ["direction_loss", "label_positives", "check_logit_scale", "clip_logits",
           "WEINCE_KEYS"]

# the options of the row losses (weince's keywords that direction_loss reads)
WEINCE_KEYS = ("q", "margin", "kappa_rho", "kappa_aic", "tail_frac", "min_tail", "eps", "beta",
               "gate", "lam", "beta_min", "beta_max")


def check_logit_scale(logit_scale, name: str = "logit_scale"):
    """open_clip's ``logit_scale``: a number, or a floating tensor of one element (0-d or
    shape ``(1,)``, as open_clip's models return it), kept as it is (never read)."""
    if isinstance(logit_scale, torch.Tensor):
        if logit_scale.numel() != 1 or logit_scale.ndim > 1 or not logit_scale.is_floating_point():
            raise ValueError(f"{name} must be a number or a floating tensor of shape () or (1,) "
                             f"(open_clip's model.logit_scale.exp()), got a {logit_scale.dtype} "
                             f"tensor of shape {tuple(logit_scale.shape)}")
        return logit_scale
    if isinstance(logit_scale, bool) or not isinstance(logit_scale, (int, float)) or not (
            0 < float(logit_scale) < float("inf")):
        raise ValueError(f"{name} must be a finite number > 0 or a tensor, got {logit_scale!r}")
    return float(logit_scale)


def clip_logits(a: torch.Tensor, b: torch.Tensor, scale, bias=None) -> torch.Tensor:
    """``scale * a @ b.T (+ bias)`` in open_clip's order: the features scaled first."""
    if isinstance(scale, torch.Tensor):
        scale = scale.to(a.dtype)
    logits = similarity(scale * a, b)
    if bias is not None:
        logits = logits + (bias.to(a.dtype) if isinstance(bias, torch.Tensor) else bias)
    return logits


def label_positives(row_labels: torch.Tensor, col_labels: torch.Tensor,
                    self_cols: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, C)`` boolean: candidate ``j`` is a positive of anchor ``i`` when their labels
    agree (the anchor's own column, ``self_cols[i]``, excluded)."""
    pos = row_labels.view(-1, 1) == col_labels.view(1, -1)
    if self_cols is not None:
        pos[torch.arange(pos.shape[0], device=pos.device), self_cols] = False
    return pos


def check_labels(labels, n: int, name: str = "labels") -> torch.Tensor:
    """``labels`` must be an integer ``(n,)`` tensor: one class per example."""
    if (not isinstance(labels, torch.Tensor) or labels.shape != (n,) or labels.is_floating_point()
            or labels.dtype == torch.bool or labels.is_complex()):
        raise ValueError(f"{name} must be an integer ({n},) tensor (one class per example; "
                         f"every same-label example is a positive), got "
                         f"{getattr(labels, 'dtype', type(labels).__name__)} of shape "
                         f"{tuple(getattr(labels, 'shape', ()))}")
    return labels


def _statistics(s, targets, invalid, K, positives, opts: dict, pivot):
    """WEINCE's statistics of the rows, over each row's negatives only."""
    if positives is not None:          # negatives: neither a positive nor a dropped column
        invalid = positives if invalid is None else (positives | invalid)
        targets = positives.to(torch.uint8).argmax(dim=1)      # one of them, also invalid
        K = negative_counts((~invalid).sum(dim=1))
    keys = [k for k in WEINCE_KEYS if k not in ("beta", "lam", "beta_min", "beta_max")]
    return row_statistics(s, targets, invalid, K, pivot=pivot, **{k: opts[k] for k in keys})


class _ScaledBlend(torch.autograd.Function):
    """Fused ``(1 - lam_i) lin_ij - c_i log(1 - min(s_ij, 1 - eps))`` (``c_i = lam_i
    beta_i``), ``-inf`` where ``invalid``: open_clip's logits ``lin`` blended with the
    endpoint logit of the cosines ``s``. Takes the ``(B, 1)`` columns ``keep = 1 - lam`` and
    ``c`` (no gradient). One ``(B, C)`` tensor forward, written in place; the backward is
    ``grad * keep`` for ``lin`` and ``grad * c / (1 - s)`` for ``s`` (0 where the clamp
    holds). At ``lam = 0`` the logits are ``lin`` and its gradient ``grad``, bit for bit."""

    @staticmethod
    @custom_fwd
    def forward(ctx, lin, s, keep, c, eps, invalid):
        x = torch.rsub(s, 1.0).clamp_min_(eps).log_().mul_(c.neg())
        x.addcmul_(lin, keep)
        if invalid is not None:
            x.masked_fill_(invalid, float("-inf"))
        ctx.save_for_backward(s, keep, c)
        ctx.eps = eps
        return x

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        s, keep, c = ctx.saved_tensors
        grad_lin = grad * keep if ctx.needs_input_grad[0] else None
        grad_s = None
        if ctx.needs_input_grad[1]:
            slope = torch.rsub(s, 1.0)
            slope = F.threshold(slope, ctx.eps, float("inf"))   # 1 - s <= eps: slope 0
            grad_s = torch.div(c, slope).mul_(grad)
        return grad_lin, grad_s, None, None, None, None


def _blend(s, lin, lam, beta, tau, eps: float, invalid):
    """WEINCE's logits of the rows: with ``lin`` (open_clip's scaled logits)
    ``(1 - lam_i) lin_ij - lam_i beta_i log(1 - min(s_ij, 1 - eps))`` (:class:`_ScaledBlend`);
    else the fused :func:`weince.losses.weince.blended_logits` of ``s / tau``."""
    if lin is None:
        return blended_logits(s, lam, tau, beta, eps, invalid)
    col = lam.to(lin.dtype).view(-1, 1)
    c = col * (beta.to(lin.dtype).view(-1, 1) if isinstance(beta, torch.Tensor) else beta)
    return _ScaledBlend.apply(lin, upcast(s), torch.rsub(col, 1.0), c, eps, invalid)


def multi_positive_rows(logits: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """Each row's ``logsumexp_k l_ik - mean_{p in P_i} l_ip`` (``(B,)``): the
    supervised-contrastive loss of its positives (a row without one gives 0)."""
    lse = torch.logsumexp(logits, dim=1)
    count = positives.sum(dim=1)
    picked = torch.where(positives, logits, torch.zeros((), dtype=logits.dtype,
                                                         device=logits.device)).sum(dim=1)
    per_row = lse - picked / count.clamp_min(1).to(logits.dtype)
    return torch.where(count > 0, per_row, torch.zeros_like(per_row))


def direction_loss(s: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None,
                   K, *, loss: str, opts: dict, tau=None, lin: torch.Tensor | None = None,
                   positives: torch.Tensor | None = None, pivot=None, reduction: str = "mean",
                   weight: torch.Tensor | None = None, return_stats: bool = False):
    """One direction's loss: rows of cosines ``s`` ``(B, C)``, the positive ``targets``
    ``(B,)`` (or ``positives`` ``(B, C)``), ``invalid`` columns, ``K`` negatives per row;
    the linear logits are ``lin`` (open_clip's) or ``s / tau``. Returns ``(loss, stats)``
    (``stats``: WEINCE's internal statistics, or ``None``)."""
    stats = None
    if loss == "infonce":
        logits = masked_logits(lin if lin is not None else upcast(s) * inverse_tau(tau), invalid)
    else:
        lam, beta = opts["lam"], opts["beta"]
        if lam is None or beta == "anchor" or return_stats:
            stats = _statistics(s, targets, invalid, K, positives, opts, pivot)
        if lam is None:
            assert stats is not None    # computed above
            lam_row = stats["lambda"]
        else:
            lam_row = torch.full((s.shape[0],), float(lam), device=s.device, dtype=upcast(s).dtype)
            if stats is not None:
                stats["lambda"] = lam_row
        beta_val = 1.0
        if beta == "anchor":
            assert stats is not None    # computed above
            beta_val = stats["beta_w"].clamp(opts["beta_min"], opts["beta_max"])
        logits = _blend(s, lin, lam_row, beta_val, tau, float(opts["eps"]), invalid)
    if positives is None:
        return reduced_cross_entropy(logits, targets, reduction, weight), stats
    return reduce_rows(multi_positive_rows(logits, positives), reduction, weight), stats


def per_example(rows: torch.Tensor, n: int) -> torch.Tensor:
    """The ``(2n,)`` row losses of SimCLR's layout folded to ``(n,)`` examples: the mean of
    example ``i``'s two rows (``i`` and ``i + n``)."""
    return (rows[:n] + rows[n:]) / 2


__all__ += ["check_labels", "multi_positive_rows", "reduce_rows", "per_example"]
