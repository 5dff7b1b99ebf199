"""Refuse non-finite numbers read from a file, naming the file, the array and the fix.

A diverged training run leaves NaN/inf weights behind; every later stage (features, the
linear probe, k-NN, score collection) would turn them into an ordinary-looking result
(``test_acc 10.03``). The loaders call :func:`check_finite` so that the problem surfaces
where it is cheapest to fix: at the first file that holds it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["NonFiniteError", "check_finite"]


class NonFiniteError(ValueError):
    """A file or result holds NaN/inf where only finite numbers make sense."""


def check_finite(arrays: Iterable[tuple[str, torch.Tensor]], source: str, fix: str) -> None:
    """Raise :class:`NonFiniteError` if any floating tensor in ``arrays`` (``(name, tensor)``
    pairs) holds NaN or inf. ``source`` names where they came from (a file), ``fix`` what
    to do about it. One host sync per tensor; meant for loaders, not training steps."""
    bad, total, first = 0, 0, None
    for name, t in arrays:
        if not torch.is_tensor(t) or not (t.is_floating_point() or t.is_complex()):
            continue
        n = int(t.numel() - torch.isfinite(t).sum())
        total += t.numel()
        if n and first is None:
            first = name
        bad += n
    if bad:
        raise NonFiniteError(f"{source}: {bad} of {total} values are NaN or infinite (first in "
                             f"{first!r}); {fix}")
