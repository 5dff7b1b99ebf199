"""Input conversion and validation shared by the tail and link fits (numpy only)."""

from __future__ import annotations

import os
import sys

import numpy as np

__all__ = ["RANGE_TOL", "as_numpy", "check_similarities", "check_scores", "progress"]

# Cosines of L2-normalised float32 embeddings can exceed 1 by a few ulps; values within
# this tolerance of [-1, 1] are clipped, values further out are an error.
RANGE_TOL = 1e-4


def as_numpy(x, name: str, dtype=None) -> np.ndarray:
    """Convert a numpy array, a torch tensor (any device) or a sequence to numpy without
    importing torch."""
    if x is None:
        raise ValueError(f"{name} is None")
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor, duck-typed
        x = x.detach().cpu()
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    arr = np.asarray(x)
    if dtype is not None:
        arr = arr.astype(dtype, copy=False)
    return arr


def check_similarities(values: np.ndarray, name: str) -> np.ndarray:
    """Reject NaN/inf and values outside ``[-1, 1]`` (beyond :data:`RANGE_TOL`), each with
    a count; clip the values within tolerance. Returns a (possibly new) array."""
    n_nan = int(np.count_nonzero(np.isnan(values)))
    if n_nan:
        raise ValueError(f"{name} contains {n_nan} NaN value(s) out of {values.size}; "
                         "check the encoder output (a zero embedding cannot be normalised)")
    n_inf = int(np.count_nonzero(np.isinf(values)))
    if n_inf:
        raise ValueError(f"{name} contains {n_inf} infinite value(s) out of {values.size}")
    lo, hi = float(values.min()), float(values.max())
    if lo < -1 - RANGE_TOL or hi > 1 + RANGE_TOL:
        n_out = int(np.count_nonzero((values < -1 - RANGE_TOL) | (values > 1 + RANGE_TOL)))
        raise ValueError(
            f"{name} has {n_out} value(s) outside [-1, 1] (min {lo:.6g}, max {hi:.6g}); "
            "cosine similarities of L2-normalised embeddings are expected — normalise the "
            "embeddings first")
    if lo < -1 or hi > 1:
        values = np.clip(values, -1.0, 1.0)
    return values


def check_scores(scores, *, check_range: bool = True) -> np.ndarray:
    """Validate pooled scores: 1-D float64, non-empty, finite, not constant and (when
    ``check_range``) inside ``[-1, 1]``. Raises ``ValueError`` naming the problem."""
    s = as_numpy(scores, "scores").reshape(-1)
    if s.size == 0:
        raise ValueError("scores is empty; collect scores first (`weince collect-scores`)")
    if not np.issubdtype(s.dtype, np.number) or np.issubdtype(s.dtype, np.complexfloating):
        raise ValueError(f"scores must be real numbers, got dtype {s.dtype}")
    s = s.astype(np.float64, copy=False)
    if check_range:
        s = check_similarities(s, "scores")
    else:
        n_bad = int(np.count_nonzero(~np.isfinite(s)))
        if n_bad:
            raise ValueError(f"scores contains {n_bad} NaN/infinite value(s) out of {s.size}")
    if s.min() == s.max():
        raise ValueError(f"scores are constant (all {s.size} values equal {s[0]:.6g}); "
                         "a collapsed encoder has no tail to fit")
    return s


def progress(iterable, *, desc: str, total: int | None = None):
    """A tqdm progress bar, shown when stderr is a terminal or ``WEINCE_PROGRESS=1``; the
    plain iterable when tqdm is not installed (the lean install has no tqdm)."""
    try:
        from tqdm.auto import tqdm  # noqa: PLC0415 - the workflow extra's; the core has none
    except ImportError:
        return iterable
    show = os.environ.get("WEINCE_PROGRESS") == "1" or sys.stderr.isatty()
    return tqdm(iterable, desc=desc, total=total, disable=not show, leave=False)
