"""A FIFO memory bank of past embeddings: the negatives of MoCo-style training.

The loss modules take ``memory_bank_size=Q`` and keep one :class:`MemoryBank`
(``loss_fn.memory_bank``); ``docs/using-the-loss.md``, "A queue of negatives (MoCo)", has
the layout, the warm-up and the sizes WEINCE's tail statistics need.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MemoryBank", "check_bank_size"]


def check_bank_size(size) -> int:
    """``size`` as an int ``>= 0`` (0: no bank), or a ``ValueError`` naming it."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"memory_bank_size must be an int >= 0 (the number of past embeddings "
                         f"kept as negatives; 0 = no bank), got {size!r}")
    return int(size)


class MemoryBank(nn.Module):
    """The last ``size`` embeddings pushed, oldest out first (a FIFO), as buffers.

    ``queue``: a ``(size, d)`` buffer of unit rows, allocated at the first :meth:`push` (when
    ``d`` is known), float32 (float64 for float64 input). ``state``: a long ``(2,)`` buffer,
    ``[next row to write, rows filled]``. Both are saved in ``state_dict`` and move with
    ``.to()``; neither is a parameter. The number of filled rows is mirrored as a Python int
    (it sets the loss's shapes), so that :attr:`filled` costs no host synchronisation; the
    write position is not (see :meth:`push`).

    Example:
        >>> import torch
        >>> from weince.losses.bank import MemoryBank
        >>> bank = MemoryBank(5)
        >>> for step in range(3):
        ...     bank.push(torch.full((2, 4), float(step)))
        >>> bank.filled, bank.entries()[:, 0].tolist()   # the oldest row (step 0) went out
        (5, [0.0, 1.0, 1.0, 2.0, 2.0])
    """

    queue: torch.Tensor   # buffers (register_buffer below)
    state: torch.Tensor

    def __init__(self, size: int):
        super().__init__()
        self.size = check_bank_size(size)
        if not self.size:
            raise ValueError("a MemoryBank needs size >= 1")
        self.register_buffer("queue", torch.zeros(0, 0))
        self.register_buffer("state", torch.zeros(2, dtype=torch.long))
        self._filled = 0
        self._full = False

    @property
    def filled(self) -> int:
        """The number of rows holding an embedding (``min(size, rows pushed)``)."""
        return self._filled

    @property
    def full(self) -> bool:
        """Whether every row holds an embedding. From then on the bank's shape is fixed and
        its write position lives in ``state`` only (a tensor, moved by index ops), so a
        compiled loss sees nothing change as the bank wraps."""
        return self._full

    def negatives(self) -> torch.Tensor:
        """The filled rows, in storage order (a view): what the losses use as negatives."""
        return self.queue if self._full else self.queue[: self._filled]

    def entries(self) -> torch.Tensor:
        """The filled rows, oldest first (a copy)."""
        if not self._full:
            return self.queue[: self._filled].clone()
        return torch.roll(self.queue, -int(self.state[0]), dims=0)

    @torch.no_grad()
    def push(self, z: torch.Tensor) -> None:
        """Enqueue the rows of ``z`` ``(n, d)`` (detached; the last ``size`` of them when
        ``n > size``), overwriting the oldest. The new queue is a new tensor: one that a
        loss already computed from stays as it was for that loss's backward. The write
        position is read from and written to ``state`` by tensor ops (no Python number of
        it, hence no host synchronisation and nothing for a compiled graph to guard on)."""
        z = z.detach()
        if z.ndim != 2:
            raise ValueError(f"the memory bank takes (n, d) embeddings, got shape {tuple(z.shape)}")
        if self._filled and z.shape[1] != self.queue.shape[1]:
            raise ValueError(f"the memory bank holds d={self.queue.shape[1]} embeddings, got d="
                             f"{z.shape[1]}; one bank serves one embedding size")
        n = min(z.shape[0], self.size)
        z = z[z.shape[0] - n:]
        queue = self.queue
        if queue.shape != (self.size, z.shape[1]):       # first push: d is known now
            dtype = torch.promote_types(queue.dtype, z.dtype)
            queue = torch.zeros(self.size, z.shape[1], dtype=dtype, device=z.device)
        start = self.state[0].to(queue.device)
        rows = torch.arange(n, device=queue.device).add_(start).remainder_(self.size)
        self.queue = queue.index_copy(0, rows, z.to(device=queue.device, dtype=queue.dtype))
        self.state[0].add_(n).remainder_(self.size)      # no host synchronisation
        if not self._full:
            self._filled = min(self.size, self._filled + n)
            self._full = self._filled == self.size
            self.state[1].fill_(self._filled)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # a fresh bank has not allocated its queue yet: take the saved one's shape
        saved = state_dict.get(prefix + "queue")
        if isinstance(saved, torch.Tensor) and saved.shape != self.queue.shape:
            self.queue = torch.zeros(saved.shape, dtype=saved.dtype, device=self.queue.device)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        nxt, filled = (int(v) for v in self.state.tolist())
        rows = self.queue.shape[0]
        if (filled and rows != self.size) or not (0 <= nxt < max(1, self.size)
                                                   and 0 <= filled <= self.size):
            error_msgs.append(f"{prefix}: a memory bank of size {self.size} cannot load a saved "
                              f"bank of {rows} rows with state [{nxt}, {filled}]; build the "
                              f"loss with the saved memory_bank_size")
            return
        self._filled, self._full = filled, filled == self.size

    def extra_repr(self) -> str:
        return f"size={self.size}, filled={self._filled}"
