"""The one summary of a statistic over seeds or splits: ``{"mean", "std", "n", "values"}``.

``std`` is the sample standard deviation (``ddof=1``), ``None`` when ``n < 2``; non-finite
and ``None`` values are dropped. ``linear.json``, ``knn.json``, ``sts.json`` and the report
all use :func:`summary`, so every result file has the same format.

    from weince.utils.summary import summary
    summary([70.1, 71.3])   # {"mean": 70.7, "std": 0.848..., "n": 2, "values": [70.1, 71.3]}
"""

from __future__ import annotations

import math
from typing import Any, Iterable

__all__ = ["summary"]


def summary(values: Iterable[Any]) -> dict[str, Any]:
    """``{"mean", "std", "n", "values"}`` of the finite values (std None when n < 2)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n == 0:
        return {"mean": None, "std": None, "n": 0, "values": []}
    mean = sum(vals) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "n": n, "values": vals}
