"""InfoNCE (NT-Xent with SimCLR views): ``docs/method.md``, "InfoNCE"."""

from __future__ import annotations

from typing import Literal

import torch

from weince.losses._common import (check_batch, check_reduction, inverse_tau, invert, loss_tau,
                                   masked_logits, no_autocast, reduced_cross_entropy, upcast)

__all__ = ["info_nce"]


def _info_nce(sim: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None,
              tau: float | torch.Tensor, reduction: str = "mean",
              weight: torch.Tensor | None = None) -> torch.Tensor:
    # s * (1 / tau), as WEINCE's blended logits compute it: lambda = 0 is then InfoNCE bit for bit
    logits = masked_logits(upcast(sim) * inverse_tau(tau), invalid)
    return reduced_cross_entropy(logits, targets, reduction, weight)


def info_nce(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
             tau: float | torch.Tensor | None = None, *,
             temperature: float | torch.Tensor | None = None,
             check: bool = True, reduction: Literal["mean", "sum", "none"] = "mean",
             weight: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE: mean over rows of the cross-entropy of ``sim / tau`` over the valid columns.

    The baseline that WEINCE corrects (``docs/method.md``, "InfoNCE"); the softmax of
    ``s / tau`` is the choice model of scores with additive Gumbel noise.

    Args:
        sim: ``(B, C)`` cosine similarities (row = anchor, column = candidate); any
            floating dtype (computed in float32, or float64 for float64 input).
        targets: ``(B,)`` integer column of each row's positive.
        mask: optional ``(B, C)`` boolean, ``False`` drops a column for that row (e.g. a
            known false negative; rows may keep different numbers of negatives, at least
            one each). Default ``None``.
        tau: temperature, a finite number ``> 0`` usable in ``sim``'s dtype, or a 0-d tensor:
            one that requires grad is learnable (it receives its gradient, e.g. CLIP's
            ``tau = 1 / logit_scale``); any other is read as a constant. Default ``0.5``.
        temperature: the same option under lightly's name; pass ``tau`` or
            ``temperature``, not both. Default ``None``.
        check: validate the tensors' contents (finite, targets in range, valid positives,
            a negative in every row); each such check reads a value back from the device,
            i.e. is a host synchronisation. ``check=False`` keeps the free shape/dtype
            checks only, for GPU loops whose batches are well formed by construction.
            Default ``True``.
        reduction: ``"mean"`` (default: over rows), ``"sum"``, or ``"none"`` (the ``(B,)``
            per-row losses).
        weight: optional ``(B,)`` per-row weights ``w_i``: ``"mean"`` gives
            ``sum_i w_i l_i / sum_i w_i``, ``"sum"`` ``sum_i w_i l_i``, ``"none"``
            ``w_i l_i``. Default ``None`` (every row 1).

    Returns:
        Scalar loss (float32; float64 for float64 input). With SimCLR views
        (``pair_similarities(z1, z2, "simclr")``) this is NT-Xent exactly; with a queue of
        negatives (``queue_similarities(z1, z2, queue)``: ``(N, 1 + K)``, positive in
        column 0, no mask) it is MoCo's loss.

    Raises:
        ValueError: a ``tau`` that is not a finite positive number usable in ``sim``'s
            dtype, both ``tau`` and ``temperature``, a ``sim`` that is not a floating-point
            tensor, mismatched shapes, a masked-out positive, or a row without a negative.

    Example:
        >>> import torch
        >>> from weince.losses import info_nce, pair_similarities
        >>> _ = torch.manual_seed(0)
        >>> sim, targets, mask = pair_similarities(torch.randn(8, 4), torch.randn(8, 4), "simclr")
        >>> info_nce(sim, targets, mask, tau=0.5).shape
        torch.Size([])
        >>> sim = torch.tensor([[0.9, 0.2], [0.2, 0.9]])
        >>> round(float(info_nce(sim, torch.tensor([0, 1]), tau=1.0)), 4)  # log(1 + e^-0.7)
        0.4032
    """
    tau = loss_tau(tau, temperature, getattr(sim, "dtype", None))
    if check:
        check_batch(sim, targets, mask, per_row=True)
    else:  # shapes and dtypes only: no device-to-host copy
        check_batch(sim, targets, mask, sync=False, num_negatives=sim.shape[1] - 1)
    check_reduction(reduction, weight, sim.shape[0])
    with no_autocast(sim):       # float32 whatever autocast is active
        return _info_nce(sim, targets, invert(mask), tau, reduction, weight)
