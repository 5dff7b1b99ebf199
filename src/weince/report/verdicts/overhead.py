"""Kind ``overhead`` (C8): the 95% interval of the arm's whole-step time overhead over
InfoNCE, across repeated timing runs, at or below the claim's limit, and zero trainable
parameters; an interval straddling the limit is not testable on that machine."""

from __future__ import annotations

from weince.report.verdicts.core import Judging, Kind, fmt_interval
from weince.utils.claim_rows import Cell, Row
from weince.utils.verdict_words import (NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED,
                                        SCALE_MODEL)

__all__ = ["RULE", "KIND", "overhead_verdict", "overhead_interval", "noise_note"]

RULE = ("Reproduced when the 95% interval of the arm's whole-step time overhead "
        "over InfoNCE, across repeated timing runs on the machine that ran it, lies "
        "at or below {tol}% and the arm adds zero trainable parameters; an interval "
        "above {tol}% is not reproduced, and one that straddles {tol}% (the "
        "machine's run-to-run noise wider than the margin) is not testable there.")

_OVERHEAD_LABELS = {"overhead_ci_runs": "across timing runs",
                    "overhead_ci": "timed steps of one run"}


def overhead_interval(c: Cell) -> tuple[float, float, str] | None:
    """The overhead's 95% interval in a C8 cell and where it comes from: across repeated
    timing runs (the machine's run-to-run noise), or, from an older timing file, over the
    timed steps of one run; None when the file has none."""
    ivs = [v for v in c.extra.get("interval", []) if v is not None]
    if len(ivs) != 1 or not isinstance(ivs[0], (list, tuple)) or len(ivs[0]) != 2 \
            or None in ivs[0]:
        return None
    key = next((k for k, v in zip(c.extra["keys_used"].get("interval", []),
                                  c.extra["interval"]) if v is not None), "")
    return float(ivs[0][0]), float(ivs[0][1]), _OVERHEAD_LABELS.get(key.split(".")[-1], key)


def noise_note(mean: float, lo: float, hi: float) -> str:
    """``"; noise +-X% exceeds the effect"`` when the interval's half-width is larger than
    the overhead itself (the timing cannot tell it from zero on that machine), else ''."""
    noise = (hi - lo) / 2.0
    return f"; noise ±{noise:.2f}% exceeds the effect" if noise > abs(mean) else ""


def overhead_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``overhead``: the overhead's interval across timing runs at or below ``tol`` %,
    and no trainable parameter; an interval straddling ``tol`` is not testable there."""
    tol = j.tol
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN, f"no value for {arm}"
    params = [p for p in c.extra.get("params", [])]
    zero = all(p == 0 for p in params) and bool(params)
    c.extra["params_total"] = sum(params) if params else None
    m = c.est.mean
    iv = overhead_interval(c)
    if iv is None:
        what = f"overhead {m:+.2f}% (no interval: the noise is unknown)"
    else:
        c.extra["lo"], c.extra["hi"], c.extra["interval_source"] = iv
        what = f"overhead {m:+.2f}% {fmt_interval(iv[0], iv[1])} ({iv[2]}){noise_note(m, *iv[:2])}"
    why = f"{what}, {'zero' if zero else 'non-zero'} trainable parameters"
    if not row.paper_setting:
        return f"{SCALE_MODEL}: {why}", "not the paper's setting"
    if not zero:
        return NOT_REPRODUCED, why
    if iv is None:
        return NOT_TESTABLE, why + f" (limit {tol:g}%)"
    if iv[1] <= tol:
        return REPRODUCED, why + f" (interval at or below the limit {tol:g}%)"
    if iv[0] > tol:
        return NOT_REPRODUCED, why + f" (interval above the limit {tol:g}%)"
    return NOT_TESTABLE, why + (f" (the interval straddles the limit {tol:g}%: this "
                                f"machine's timing noise is wider than the margin)")


KIND = Kind(RULE, overhead_verdict, extra=(("interval", "interval_key"), ("params", "params_key"),
                                           ("attributed", "attributed_key")),
            reference_base=True, relative=True, any_arm=True)
