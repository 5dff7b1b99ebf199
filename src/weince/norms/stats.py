"""Correlations and paired gains with percentile-bootstrap intervals (numpy/scipy only).

Every bootstrap here is vectorised: the ``n_boot`` resamples are one ``(n_boot, n)`` index
array (in chunks to bound memory), never a Python loop over resamples.

    from weince.norms.stats import correlation, paired_gain
    c = correlation(heat, norm, method="pearson", n_boot=2000, seed=0)
    c["r"], c["ci"], c["p"], c["n"]
    g = paired_gain(hit_rescored, hit_plain)          # mean difference x 100, with interval

Spearman's rho is Pearson's r of average ranks (ties share their mean rank), as
``scipy.stats.spearmanr``; p-values are scipy's (t distribution, two-sided).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from scipy import stats as sps

__all__ = ["pearson_rows", "spearman_rows", "correlation", "bootstrap", "paired_gain",
           "METHODS"]

METHODS = ("pearson", "spearman")


def pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r along the last axis: ``x``, ``y`` ``(..., n)`` -> ``(...)``; NaN where
    either row is constant."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dx = x - x.mean(axis=-1, keepdims=True)
    dy = y - y.mean(axis=-1, keepdims=True)
    num = (dx * dy).sum(axis=-1)
    den = np.sqrt((dx * dx).sum(axis=-1) * (dy * dy).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(r, -1.0, 1.0)


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho along the last axis (average ranks, so ties are handled as scipy)."""
    rx = sps.rankdata(np.asarray(x, dtype=np.float64), axis=-1)
    ry = sps.rankdata(np.asarray(y, dtype=np.float64), axis=-1)
    return pearson_rows(rx, ry)


_ROWS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "pearson": pearson_rows, "spearman": spearman_rows}


def _check_pair(x: Any, y: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"{name}: x and y need the same length, got {x.size} and {y.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def bootstrap(stat_rows: Callable[..., np.ndarray], arrays: tuple[np.ndarray, ...], *,
              n_boot: int = 2000, seed: int = 0, level: float = 0.95,
              chunk: int = 250) -> tuple[float, float]:
    """Percentile interval of a statistic under resampling of the ``n`` units (paired).

    Args:
        stat_rows: maps arrays of shape ``(b, n)`` (one resample a row) to ``(b,)``.
        arrays: the data, each ``(n,)``, resampled with the same indices.
        n_boot: resamples; level: coverage of the interval.
    Returns:
        ``(low, high)``; NaN resamples (e.g. a constant row) are dropped.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    n = len(arrays[0])
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        idx = rng.integers(0, n, size=(b, n))
        out.append(stat_rows(*(a[idx] for a in arrays)))
    vals = np.concatenate(out)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return float("nan"), float("nan")
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(vals, [a, 1.0 - a])
    return float(lo), float(hi)


def correlation(x: Any, y: Any, method: Literal["pearson", "spearman"] = "pearson", *,
                n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Correlation of two per-unit measurements with a bootstrap interval.

    Non-finite pairs are dropped first. Returns ``{"r", "ci": [lo, hi], "p", "n",
    "method"}``; ``r`` and ``p`` are NaN (and ``ci`` NaNs) with fewer than 3 pairs or a
    constant input.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    x, y = _check_pair(x, y, "correlation")
    n = int(x.size)
    nan = float("nan")
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"r": nan, "ci": [nan, nan], "p": nan, "n": n, "method": method}
    r = float(_ROWS[method](x, y))
    p = float((sps.pearsonr if method == "pearson" else sps.spearmanr)(x, y)[1])
    lo, hi = bootstrap(_ROWS[method], (x, y), n_boot=n_boot, seed=seed, level=level)
    return {"r": r, "ci": [lo, hi], "p": p, "n": n, "method": method}


def paired_gain(treated: Any, base: Any, *, scale: float = 100.0, n_boot: int = 2000,
                seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Mean paired difference ``scale * mean(treated - base)`` with a bootstrap interval
    over units (e.g. per-query hits of a re-scored and a plain retrieval).

    Returns ``{"gain", "ci": [lo, hi], "treated", "base", "n"}`` (``treated``/``base`` are
    the scaled means).
    """
    t, b = _check_pair(treated, base, "paired_gain")
    n = int(t.size)
    nan = float("nan")
    if n == 0:
        return {"gain": nan, "ci": [nan, nan], "treated": nan, "base": nan, "n": 0}
    d = t - b
    lo, hi = bootstrap(lambda dd: dd.mean(axis=-1), (d,), n_boot=n_boot, seed=seed, level=level)
    return {"gain": scale * float(d.mean()), "ci": [scale * lo, scale * hi],
            "treated": scale * float(t.mean()), "base": scale * float(b.mean()), "n": n}
