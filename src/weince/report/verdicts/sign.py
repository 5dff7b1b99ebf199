"""Kind ``sign`` (C1): the tail index xi on the expected side of zero (a Weibull-type
tail: below), its 95% interval too, and the paper's value inside our interval widened by
the claim's tolerance. The interval is the t-interval across encoder seeds, else the fit's
own (:func:`~weince.report.verdicts.core.fit_interval`)."""

from __future__ import annotations

from weince.report.verdicts.core import Judging, Kind, fit_interval, fmt_interval
from weince.utils.claim_rows import Row
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, REPRODUCED, SCALE_MODEL

__all__ = ["RULE", "KIND", "sign_verdict"]

RULE = ("Reproduced when xi < 0, our 95% interval of xi lies below zero, and the "
        "paper's {value} lies inside our interval widened by {tol} on each side. The "
        "interval is the t-interval across encoder seeds (n >= 2), else the fit's "
        "batch-bootstrap interval (else its i.i.d. profile interval, flagged as too "
        "narrow).")

_XI_LABELS = {"xi_ci_batch": "batch-bootstrap interval of the fit",
              "xi_ci": "the fit's i.i.d. profile interval (too narrow: exceedances share images)"}


def sign_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``sign``: xi on the expected side of zero, the paper's value inside our
    interval widened by ``tol``."""
    claim = j.claim
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN, f"no value for {arm}"
    iv = fit_interval(c, "interval", _XI_LABELS)
    tol = float(claim.get("tolerance", 0.0))
    m = c.est.mean
    if iv is None:
        c.extra["lo"] = c.extra["hi"] = None
        why = f"xi {m:+.3f} with no interval (one encoder, no fit interval)"
        return (f"{SCALE_MODEL}: {why}" if not row.paper_setting else NOT_REPRODUCED), why
    lo, hi, src = iv
    c.extra["lo"], c.extra["hi"], c.extra["interval_source"] = lo, hi, src
    neg = claim.get("expect", "negative") == "negative"
    side_ok = (m < 0 and hi < 0) if neg else (m > 0 and lo > 0)
    pv = row.paper.get("value")
    mag_ok = pv is None or (lo - tol <= pv <= hi + tol)
    desc = f"xi {m:+.3f} {fmt_interval(lo, hi, 3)} ({src})"
    tail = ("below zero (Weibull-type tail)" if hi < 0 else
            "above zero (heavy tail)" if lo > 0 else "spans zero (domain not resolved)")
    mag = ("" if pv is None else
           f"; the paper's {pv:g} is {'inside' if mag_ok else 'outside'} it widened by {tol:g}")
    why = f"{desc} {tail}{mag}"
    if not row.paper_setting:
        return f"{SCALE_MODEL}: {why}", "not the paper's setting"
    return (REPRODUCED if side_ok and mag_ok else NOT_REPRODUCED), why


KIND = Kind(RULE, sign_verdict, extra=(("interval", "interval_key"),), scale_reads_paper=True)
