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

Only units on the companion paper's own models (the ``rows`` of N1-N3 in
``config/claims.yaml``: CLIP ViT-B/32, MiniLM-L12) count towards a claim's verdict, as for
C1-C10; any other unit is a scale-model reading (:func:`on_paper_model`).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from weince.utils.vocabulary import NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED

__all__ = ["PAPER", "UNIT_RULES", "interval_side", "correlation_verdict", "gain_verdict",
           "combine", "unit_fields", "on_paper_model"]

# the companion paper's figures, as printed
PAPER = {
    "N1": "R_eq^2 = (D* + sqrt(D*^2 + 2 V*^2)) / 2 predicts the norm (decoupled weight decay)",
    "N2": "r(heat, norm) = +0.38, r(drift, norm) = -0.58 (CLIP ViT-B/32, MiniLM-L12)",
    "N3": "cos / (1 + alpha ||z||) gains 1.2-2.3% on frequent items and low-quality samples",
}

# what one unit must show, in words (the claims' rule text and docs/verdicts.md)
UNIT_RULES = {
    "N1": "Pearson's r of the predicted R_eq against the measured norm has its 95% "
          "interval above 0",
    "N2": "r(heat, norm) has its 95% interval above 0 and r(drift, norm) below 0",
    "N3": "every primary re-scoring row gains, with its 95% interval above 0",
}

_UNIT_KEYS = ("dataset", "backbone", "model")


def unit_fields(result: dict[str, Any]) -> dict[str, str | None]:
    """The model a ``norms.json`` is about: ``dataset``/``backbone`` of a vision unit, the
    text model's name (the workflow's ``model_label``) of a text unit."""
    if result.get("kind") == "text":
        return {"model": result.get("model_label") or result.get("model")}
    return {"dataset": result.get("dataset"), "backbone": result.get("backbone")}


def on_paper_model(fields: dict[str, Any], rows: Iterable[dict[str, Any]] | None) -> bool:
    """Whether a unit (its :func:`unit_fields`, or a report setting's) is on one of the
    companion paper's models: every model key a registry row names matches."""
    for row in rows or []:
        named = [k for k in _UNIT_KEYS if row.get(k) is not None]
        if named and all(fields.get(k) == row[k] for k in named):
            return True
    return False


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
