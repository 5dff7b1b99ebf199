"""Kind ``exact`` (C9): the largest recorded difference is at most the claim's tolerance."""

from __future__ import annotations

from weince.report.verdicts.core import Judging, Kind
from weince.utils.claim_rows import Row
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, REPRODUCED

__all__ = ["RULE", "KIND", "exact_verdict"]

RULE = "Reproduced when the largest recorded |difference| is at most {tol}."


def exact_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``exact``: the largest recorded difference <= ``tol``."""
    tol = j.tol
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN, f"no value for {arm}"
    worst = max(c.est.values)
    c.extra["worst"] = worst
    return (REPRODUCED if worst <= tol else NOT_REPRODUCED), \
        f"max |diff| {worst:.1e} vs tolerance {tol:.0e}"


KIND = Kind(RULE, exact_verdict, any_arm=True)
