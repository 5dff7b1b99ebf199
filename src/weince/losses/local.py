"""The local-loss form across processes (``gather_distributed="local"``): each process's
own rows against every process's candidates, as open_clip's ``local_loss``.

With ``W`` processes holding ``n_r`` items each (``B = sum n_r``), a process computes the
similarities of its ``n_r`` anchors (``2 n_r`` in the SimCLR layout) against the ``B``
(``2B``) gathered candidates: memory ``B_local x B`` instead of ``B x B``. The gathered
embeddings carry their gradient (:func:`weince.utils.distributed.gather_with_grad`), the
pivot ``rho0`` is the ``q``-quantile of every process's ``rho`` (``B`` numbers gathered),
and each process returns ``W / rows * (sum of its rows' losses)``, so that the mean over
processes is the global mean loss and DDP's averaged gradients equal the one-process
gradients on the whole batch (``tests/losses/test_local_loss.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from weince.losses._common import unit_rows
from weince.losses.chunked import Rows
from weince.utils.distributed import gather_with_grad

__all__ = ["LocalRows", "local_rows"]


def _sizes(n: int, device: torch.device) -> list[int]:
    if torch.compiler.is_compiling():     # a graph cannot read them: equal shares (the gather's)
        return [n] * dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.long, device=device)
             for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([n], device=device))
    return [int(v) for v in sizes]


@dataclass
class LocalRows:
    """One process's rows of the global batch: ``rows`` (:class:`weince.losses.chunked.Rows`,
    its anchors against every process's candidates), ``scale`` (``W / total``), ``total``
    (the global number of anchors)."""
    rows: Rows
    scale: float
    total: int

    @property
    def batch(self) -> tuple:
        """``(sim, targets, invalid, K)`` of this process's rows, built whole."""
        return self.rows.full()

    def pivot(self, q: float):
        """``log rho0`` from every process's ``log rho``: the global quantile."""
        kq = int(round(q * (self.total - 1)))

        def fn(log_rho: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                every = gather_with_grad(log_rho, uneven=True)
            return every.kthvalue(kq + 1).values
        return fn

    def all_rows(self, *cols: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The ``(total,)`` columns of every process (for ``last_stats``), in one gather."""
        with torch.no_grad():      # a context, not a decorator: one compiled graph
            every = gather_with_grad(torch.stack(cols, dim=1), uneven=True)
        return tuple(every.unbind(1))


def local_rows(z1: torch.Tensor, z2: torch.Tensor, layout: str) -> LocalRows:
    """This process's rows against every process's candidates (see the module docstring)."""
    n = z1.shape[0]
    sizes = _sizes(n, z1.device)
    start, total = sum(sizes[: dist.get_rank()]), sum(sizes)
    if total < 2:
        raise ValueError(f"a global batch of {total} pair(s) gives no negatives")
    u1 = unit_rows(gather_with_grad(z1, uneven=True))
    u2 = unit_rows(gather_with_grad(z2, uneven=True))
    own = torch.arange(start, start + n, device=z1.device)
    world = dist.get_world_size()
    if layout == "pairs":
        return LocalRows(Rows(u1[own], u2, own, total - 1), world / total, total)
    u = torch.cat([u1, u2], dim=0)
    rows = torch.cat([own, own + total])
    return LocalRows(Rows(u[rows], u, (rows + total) % (2 * total), 2 * total - 2,
                          self_cols=rows), world / (2 * total), 2 * total)


def local_pair_rows(a: torch.Tensor, b: torch.Tensor, normalize: bool = True
                    ) -> dict[str, LocalRows]:
    """Two encoders' batches in the local-loss mode: this process's rows of ``a`` against
    every process's ``b`` (``"a_to_b"``), and its rows of ``b`` against every ``a``
    (``"b_to_a"``), positives at the global row index; unit rows when ``normalize``."""
    n = a.shape[0]
    sizes = _sizes(n, a.device)
    start, total = sum(sizes[: dist.get_rank()]), sum(sizes)
    if total < 2:
        raise ValueError(f"a global batch of {total} pair(s) gives no negatives")
    ga, gb = gather_with_grad(a, uneven=True), gather_with_grad(b, uneven=True)
    if normalize:
        ga, gb = unit_rows(ga), unit_rows(gb)
    own = torch.arange(start, start + n, device=a.device)
    scale = dist.get_world_size() / total
    return {"a_to_b": LocalRows(Rows(ga[own], gb, own, total - 1), scale, total),
            "b_to_a": LocalRows(Rows(gb[own], ga, own, total - 1), scale, total)}
