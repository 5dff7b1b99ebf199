"""Kind ``reject`` (C2): every link fit rejects the softmax link (the pair-robust score
test where the file has it) and our 95% interval of the link weight lambda overlaps the
paper's range."""

from __future__ import annotations

from weince.report.verdicts.core import Judging, Kind, fit_interval, fmt_interval
from weince.utils.claim_rows import Row
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, REPRODUCED, SCALE_MODEL

__all__ = ["RULE", "KIND", "reject_verdict"]

RULE = ("Reproduced when every fit rejects the softmax link (p < {alpha}; the "
        "pair-robust score test where the file has it) and our 95% interval of "
        "lambda overlaps the paper's {low}-{high}. The interval is the t-interval "
        "across encoder seeds (n >= 2), else the fit's pair-robust interval (else "
        "its i.i.d. profile interval, flagged).")

_LAM_LABELS = {"lam_ci_pairs": "pair-robust interval of the fit",
               "lam_ci": "the fit's i.i.d. profile interval (too narrow: rows share pairs)"}


def reject_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``reject``: every fit rejects the softmax link, lambda overlaps the paper's."""
    alpha = j.alpha
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN, f"no value for {arm}"
    ps = [p for p in c.extra.get("p", []) if p is not None]
    if not ps:
        return NOT_RUN, f"{arm}: no p-value recorded"
    rejected = sum(1 for p in ps if float(p) < alpha)
    c.extra["rejected"] = f"{rejected}/{len(ps)}"
    robust = all(k.endswith("_pairs") for k in c.extra["keys_used"].get("p", []))
    test = "pair-robust test" if robust else "i.i.d. LR test (too confident: rows share pairs)"
    rej = f"softmax rejected in {rejected}/{len(ps)} fit(s) ({test})"
    iv = fit_interval(c, "interval", _LAM_LABELS)
    low, high = row.paper.get("low"), row.paper.get("high")
    if iv is None:
        lam = f"lambda {c.est.mean:.3f}, no interval"
        overlap = False
    else:
        lo, hi, src = iv
        c.extra["lo"], c.extra["hi"], c.extra["interval_source"] = lo, hi, src
        if low is None:
            overlap = True
        else:
            assert high is not None   # the paper's range gives low and high together
            overlap = lo <= high and hi >= low
        lam = f"lambda {c.est.mean:.3f} {fmt_interval(lo, hi, 3, signed=False)} ({src})"
        if low is not None:
            lam += (f" {'overlaps' if overlap else 'misses'} the paper's {low:.2f}-{high:.2f}")
    why = f"{rej}; {lam}"
    if not row.paper_setting:
        return f"{SCALE_MODEL}: {why}", "not the paper's setting"
    return (REPRODUCED if rejected == len(ps) and overlap else NOT_REPRODUCED), why


KIND = Kind(RULE, reject_verdict, extra=(("interval", "interval_key"), ("p", "p_key")),
            scale_reads_paper=True)
