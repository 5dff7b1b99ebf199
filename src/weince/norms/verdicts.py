"""Verdicts for claims N1-N3, computed from the numbers (never typed by hand).

Per unit (one encoder and loss arm, or one text model):

- **N1**: Pearson's r of predicted ``R_eq`` against measured ``||z||`` is positive with a
  bootstrap 95% interval above 0 -> ``reproduced``; otherwise ``not reproduced``.
- **N2**: r(heat, ||z||) has an interval above 0 **and** r(drift, ||z||) an interval below 0
  (paper: +0.38 and -0.58; ``drift`` = mean radial component of the gradient, see
  :mod:`weince.norms.analysis`) -> ``reproduced``.
- **N3**: each primary row (k-NN ``recall@1`` on the ``frequent`` and ``low_quality``
  queries; STS Spearman on all test pairs) has a gain with interval above 0.

``not testable at this scale``: fewer than ``min_n`` units (probes, queries or pairs), or
(N1) no positive ``lr * weight_decay``. A claim over several units is ``reproduced`` only
when every testable unit is; ``not testable at this scale`` when none is testable.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from weince.utils.vocabulary import NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED

__all__ = ["PAPER", "interval_side", "correlation_verdict", "gain_verdict", "combine"]

# the companion paper's figures, as printed (issue 10)
PAPER = {
    "N1": "R_eq^2 = (D* + sqrt(D*^2 + 2 V*^2)) / 2 predicts the norm (decoupled weight decay)",
    "N2": "r(heat, norm) = +0.38, r(drift, norm) = -0.58 (CLIP ViT-B/32, MiniLM-L12)",
    "N3": "cos / (1 + alpha ||z||) gains 1.2-2.3% on frequent items and low-quality samples",
}


def interval_side(ci: Iterable[float]) -> int:
    """+1 when the interval lies above 0, -1 below, 0 when it contains 0 or is NaN."""
    lo, hi = (float(v) if v is not None else math.nan for v in ci)
    if math.isnan(lo) or math.isnan(hi):
        return 0
    return 1 if lo > 0 else (-1 if hi < 0 else 0)


def correlation_verdict(c: dict[str, Any], expect: str, min_n: int) -> str:
    """Verdict of one correlation (``expect`` ``"positive"`` or ``"negative"``)."""
    if expect not in ("positive", "negative"):
        raise ValueError(f"expect must be 'positive' or 'negative', got {expect!r}")
    if c.get("n", 0) < min_n or c.get("r") is None or (isinstance(c["r"], float) and
                                                         math.isnan(c["r"])):
        return NOT_TESTABLE
    want = 1 if expect == "positive" else -1
    return REPRODUCED if interval_side(c["ci"]) == want else NOT_REPRODUCED


def gain_verdict(row: dict[str, Any]) -> str:
    """Verdict of one N3 row: testable, gain > 0 with its interval above 0."""
    if not row.get("testable", False):
        return NOT_TESTABLE
    return REPRODUCED if interval_side(row["ci"]) == 1 else NOT_REPRODUCED


def combine(verdicts: Iterable[str]) -> str:
    """Claim verdict from unit verdicts: reproduced only when every testable unit is."""
    vs = [v for v in verdicts if v not in (NOT_TESTABLE, NOT_RUN)]
    if not vs:
        return NOT_TESTABLE
    return REPRODUCED if all(v == REPRODUCED for v in vs) else NOT_REPRODUCED
