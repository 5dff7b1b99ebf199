"""Kind ``noninferior`` (C5, C10): on every row our mean gain over the baseline is at
least zero and the lower end of its 95% interval at least minus the claim's tolerance (the
non-inferiority margin)."""

from __future__ import annotations

from weince.report.verdicts.core import Judging, Kind
from weince.report.verdicts.gain import describe_gain, gain_or_early
from weince.utils.claim_rows import Row
from weince.utils.verdict_words import NOT_REPRODUCED, REPRODUCED

__all__ = ["RULE", "KIND", "noninferior_verdict"]

RULE = ("Reproduced when, on every row, our mean gain is at least zero (the "
        "paper's '>=') and the lower end of its 95% interval (Welch, across "
        "encoder seeds) is at least -{tol} {unit} (the non-inferiority margin).")


def noninferior_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``noninferior``: mean gain >= 0 and the interval's lower end >= -``tol``."""
    base, tol, alpha = j.base, j.tol, j.alpha
    assert base is not None   # a gain is over the claim's baseline
    g, early = gain_or_early(row, arm, base, alpha)
    if early:
        return early
    assert g is not None and g.mean is not None   # no early verdict: a gain of two means
    if g.lo is None or g.hi is None:   # no interval
        return NOT_REPRODUCED, f"{describe_gain(g)}: no interval to bound the loss"
    if g.mean < 0:
        return NOT_REPRODUCED, f"{describe_gain(g)}: mean gain below zero"
    if g.lo >= -tol:
        return REPRODUCED, f"{describe_gain(g)}: mean >= 0, lower end >= -{tol:g} (margin)"
    return NOT_REPRODUCED, f"{describe_gain(g)}: lower end below -{tol:g} (margin)"


KIND = Kind(RULE, noninferior_verdict, reference_base=True, contrasts=True)
