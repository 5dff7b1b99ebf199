"""Aggregation over seeds or splits: the one summary of a statistic, ``{"mean", "std", "n",
"values"}``, and the estimate with its t-interval across encoder seeds.

``std`` is the sample standard deviation (``ddof=1``), ``None`` when ``n < 2``; non-finite
and ``None`` values are dropped. ``linear.json``, ``knn.json``, ``sts.json`` and the report
all use :func:`summary`, so every result file has the same format.

``docs/protocol.md``, "Aggregation": average the probe/split seeds within an encoder first,
then take the mean and a 95% t-interval across encoder seeds (:func:`estimate`); the gain of
one arm over another has Welch's interval (:func:`diff_estimate`).

    from weince.utils.summary import estimate, summary
    summary([70.1, 71.3])   # {"mean": 70.7, "std": 0.848..., "n": 2, "values": [70.1, 71.3]}
    estimate([70.1, 71.3])  # Estimate(mean=70.7, std=0.848..., n=2, lo=63.08..., hi=78.32..., ...)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


__all__ = ["summary", "Estimate", "estimate", "diff_estimate", "t_quantile"]


def summary(values: Iterable[Any]) -> dict[str, Any]:
    """``{"mean", "std", "n", "values"}`` of the finite values (std None when n < 2)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n == 0:
        return {"mean": None, "std": None, "n": 0, "values": []}
    mean = sum(vals) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "n": n, "values": vals}


def t_quantile(p: float, df: float) -> float:
    """Student t quantile: what ``scipy.stats.t.ppf(p, df)`` computes (it calls this same
    ``scipy.special.stdtrit``), without importing ``scipy.stats`` (~1 s in every report job).
    scipy is imported on the first call: the training and probe jobs that format their
    results here (:func:`summary`) never need it."""
    from scipy.special import stdtrit  # noqa: PLC0415 - a third of a CPU-second, report jobs only

    return float(stdtrit(df, p))


@dataclass(frozen=True)
class Estimate:
    """Mean over encoder seeds with a two-sided t-interval (``lo``/``hi`` None if n < 2)."""

    mean: float | None
    std: float | None
    n: int
    lo: float | None
    hi: float | None
    values: tuple[float, ...] = ()

    @property
    def has_interval(self) -> bool:
        return self.lo is not None and self.hi is not None

    def contains(self, x: float) -> bool:
        return self.lo is not None and self.hi is not None and self.lo <= x <= self.hi


def estimate(values: Sequence[float], alpha: float = 0.05) -> Estimate:
    """Mean and ``1 - alpha`` t-interval (``n - 1`` degrees of freedom) of ``values``."""
    s = summary(values)
    if s["n"] == 0:
        return Estimate(None, None, 0, None, None, ())
    if s["n"] == 1:
        return Estimate(s["mean"], None, 1, None, None, tuple(s["values"]))
    half = t_quantile(1 - alpha / 2, s["n"] - 1) * s["std"] / math.sqrt(s["n"])
    return Estimate(s["mean"], s["std"], s["n"], s["mean"] - half, s["mean"] + half,
                    tuple(s["values"]))


def diff_estimate(treat: Estimate, base: Estimate, alpha: float = 0.05) -> Estimate:
    """``treat - base`` with a Welch t-interval (Welch-Satterthwaite degrees of freedom).

    The arms are trained independently (the same seed does not pair two runs), so the
    interval is the unpaired one. ``lo``/``hi`` are None when either side has n < 2.
    """
    if treat.mean is None or base.mean is None:
        return Estimate(None, None, 0, None, None)
    d = treat.mean - base.mean
    n = min(treat.n, base.n)
    if treat.n < 2 or base.n < 2 or treat.std is None or base.std is None:
        return Estimate(d, None, n, None, None)
    v1, v2 = treat.std ** 2 / treat.n, base.std ** 2 / base.n
    se = math.sqrt(v1 + v2)
    if se == 0.0:
        return Estimate(d, 0.0, n, d, d)
    df = (v1 + v2) ** 2 / (v1 ** 2 / (treat.n - 1) + v2 ** 2 / (base.n - 1))
    half = t_quantile(1 - alpha / 2, df) * se
    return Estimate(d, se, n, d - half, d + half)
