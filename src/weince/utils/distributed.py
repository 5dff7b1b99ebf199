"""The all-gather *with gradient*, for contrastive losses over several processes.

Contrastive losses need the negatives of the whole global batch, so each process gathers
every process's embeddings. ``torch.distributed.all_gather`` cuts the autograd graph: the
gathered copies of other ranks' embeddings are constants, and (if each rank then uses
only its own slice's gradient) a rank's encoder never receives the gradient that the
other ranks' losses send to its samples. :func:`gather_with_grad` fixes that with a
custom autograd function:

- forward: ``all_gather`` the local ``(n, d)`` tensors -> ``(W * n, d)`` in rank order;
- backward: ``all_reduce(SUM)`` of the incoming ``(W * n, d)`` gradient, then return this
  rank's slice ``[rank * n : (rank + 1) * n]``.

Scaling with DDP's gradient *averaging*. Every rank gathers ``z1`` and ``z2`` and evaluates
the *same* global loss ``L`` on the full batch (so batch statistics such as WEINCE's
``rho0`` and the recipe's ``beta_t`` see the global batch and stay identical on every
rank); this is what the loss modules do with ``gather_distributed=True`` and what
:mod:`weince.train.simclr` does. Each rank's incoming gradient is then ``dL/dZ``; the
all-reduce makes it ``W * dL/dZ``, the slice gives ``W * dL/dz_r``, and DDP's mean over
ranks of the parameter gradients gives ``(1/W) * sum_r W * dL/dz_r * dz_r/dtheta
= dL/dtheta``: exactly the single-process gradient of the whole batch. (If instead each
rank computed a loss ``L_r`` over its own anchors only, the same sum gives
``d(mean_r L_r)/dtheta``, again the global mean loss.) Taking the local slice *without*
the all-reduce would be off by a factor ``1/W`` (and miss cross-rank terms in the
local-anchor form). ``tests/train/test_distributed.py`` and
``tests/losses/test_gather_distributed.py`` check loss and gradients against one process
on the whole batch, with the gloo backend on CPU.

``gather_with_grad(x, uneven=True)`` lets the ranks hold different numbers of rows (zero
included): :mod:`weince.train.simcse` splits a global batch that is not a multiple of the
number of processes (an epoch's short last batch) into near-equal shards. The rows are
padded to the largest shard for the ``all_gather`` and trimmed after it; the backward pass
is the same all-reduce and slice, at this rank's offset, so the scaling argument above
holds unchanged (a rank with no rows contributes a zero gradient).

Under ``torch.compile`` the gather is torch's traceable
``all_gather_tensor_autograd`` (one graph, no break on reading the shares' sizes): the
ranks must then hold equal shares (``drop_last`` batches, as open_clip's).

This module is in the lowest layer (the losses import it); :mod:`weince.train.ddp`
re-exports its names beside the process-group set-up of the training loops.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["gather_with_grad", "is_distributed", "world_size", "rank"]


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


class _GatherWithGrad(torch.autograd.Function):
    """all_gather forward; all_reduce(sum) + own slice backward (see module docstring)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, uneven: bool) -> torch.Tensor:
        ws, me = dist.get_world_size(), dist.get_rank()
        sizes_t = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(ws)]
        dist.all_gather(sizes_t, torch.tensor([x.shape[0]], device=x.device))
        sizes = [int(s) for s in sizes_t]
        if not uneven and len(set(sizes)) != 1:
            # SimCLR: every rank must contribute the same number of rows (drop_last batches)
            raise ValueError(f"gather_with_grad needs equal local batch sizes on every rank, "
                             f"got {sizes}; use drop_last batches")
        ctx.start, ctx.n = sum(sizes[:me]), x.shape[0]
        x = x.contiguous()
        top = max(sizes)
        if x.shape[0] < top:  # all_gather needs one shape: pad, trim after
            x = torch.cat([x, x.new_zeros((top - x.shape[0], *x.shape[1:]))])
        out = [torch.empty_like(x) for _ in range(ws)]
        dist.all_gather(out, x)
        return torch.cat([o[:k] for o, k in zip(out, sizes)], dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.start:ctx.start + ctx.n], None


def gather_with_grad(x: torch.Tensor, *, uneven: bool = False) -> torch.Tensor:
    """All-gather ``x`` ``(n, ...)`` from every rank -> ``(sum of n, ...)`` in rank order,
    differentiable: the gradient of the gathered tensor (summed over ranks) flows back to
    each rank's own rows. Identity when not running distributed.

    ``uneven=False`` (SimCLR) refuses ranks with different ``n``; ``uneven=True`` accepts
    any ``n >= 0`` per rank (SimCSE's near-equal shards of a batch)."""
    if not is_distributed() or dist.get_world_size() == 1:
        return x
    if torch.compiler.is_compiling():
        # inside a compiled graph: torch's traceable gather (its backward a reduce-scatter:
        # the same all-reduce and slice), so the graph does not break on the shares' sizes,
        # which it cannot read; every rank must then hold the same number of rows
        from torch.distributed._functional_collectives import (  # noqa: PLC0415
            all_gather_tensor_autograd)
        group = dist.group.WORLD
        assert group is not None      # initialised: is_distributed() above
        return all_gather_tensor_autograd(x.contiguous(), 0, group)
    return _GatherWithGrad.apply(x, bool(uneven))
