"""InfoNCE (NT-Xent with SimCLR views): SPEC section 2."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from weince.losses._common import check_batch, check_tau, invert, masked_logits, upcast

__all__ = ["info_nce"]


def _info_nce(sim: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None, tau: float) -> torch.Tensor:
    logits = masked_logits(upcast(sim) / tau, invalid)
    return F.cross_entropy(logits, targets)


def info_nce(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
             tau: float = 0.5) -> torch.Tensor:
    """InfoNCE: mean over rows of the cross-entropy of ``sim / tau`` over the valid columns.

    Args:
        sim: ``(B, C)`` cosine similarities (row = anchor, column = candidate).
        targets: ``(B,)`` integer column of each row's positive.
        mask: optional ``(B, C)`` boolean, ``False`` drops a column for that row.
        tau: temperature, ``> 0``.

    Returns:
        Scalar loss (float32). With SimCLR views (``pair_similarities(z1, z2, "simclr")``)
        this is NT-Xent exactly.

    Raises:
        ValueError: ``tau <= 0``, mismatched shapes, a masked-out positive, or rows with
            unequal numbers of negatives.

    Example:
        >>> sim, targets, mask = pair_similarities(z1, z2, "simclr")
        >>> loss = info_nce(sim, targets, mask, tau=0.5)
    """
    check_tau(tau)
    check_batch(sim, targets, mask)
    return _info_nce(sim, targets, invert(mask), tau)
