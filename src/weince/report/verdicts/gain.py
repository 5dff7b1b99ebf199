"""Kind ``gain`` (C3, C4, C6, C7): our gain over the baseline (Welch t-interval across
encoder seeds) excludes zero on the paper's side and holds the paper's gain, or our mean is
within the claim's tolerance of it. Its rows carry the attribution contrasts
(:data:`~weince.report.verdicts.core.CONTRASTS`)."""

from __future__ import annotations

from weince.report.verdicts.core import Judging, Kind, fmt_interval, fmt_value
from weince.utils.claim_rows import Row
from weince.utils.summary import Estimate, diff_estimate
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, READING, REPRODUCED, SCALE_MODEL

__all__ = ["RULE", "KIND", "gain_verdict", "gain_or_early", "describe_gain"]

RULE = ("Reproduced when our gain's 95% interval (Welch, across encoder seeds) excludes "
        "zero on the paper's side and the paper's gain lies inside that interval or "
        "within {tol} {unit} of our mean gain; fewer than 2 encoders per arm give no "
        "interval and so no reproduction.")


def _paper_gain(p: dict[str, float]) -> float | None:
    """The paper's gain on a row; None where the paper gives no figure (a reading)."""
    if "gain" in p:
        return p["gain"]
    if "treatment" in p and "baseline" in p:
        return p["treatment"] - p["baseline"]
    return None


def _gain_of(row: Row, arm: str, base: str, alpha: float) -> Estimate | None:
    t, b = row.cells.get(arm), row.cells.get(base)
    if t is None or b is None or t.est.mean is None or b.est.mean is None:
        return None
    g = diff_estimate(t.est, b.est, alpha)
    row.gains[arm] = g
    return g


def describe_gain(g: Estimate) -> str:
    assert g.mean is not None   # a gain is the difference of two means
    if g.lo is None or g.hi is None:   # no interval
        return f"gain {fmt_value(g.mean)} (n < 2 encoders: no interval)"
    return f"gain {fmt_value(g.mean)} {fmt_interval(g.lo, g.hi)}"


def _gain_reading(g: Estimate, word: str = SCALE_MODEL) -> str:
    if g.lo is not None and g.hi is not None and g.lo > 0:
        return f"{word}: gain > 0 ({describe_gain(g)})"
    if g.lo is not None and g.hi is not None and g.hi < 0:
        return f"{word}: gain < 0 ({describe_gain(g)})"
    if g.has_interval:
        return f"{word}: no resolved gain ({describe_gain(g)}, interval spans 0)"
    return f"{word}: {describe_gain(g)}"


def gain_or_early(row: Row, arm: str, base: str, alpha: float
                   ) -> tuple[Estimate | None, tuple[str, str] | None]:
    """The arm's gain over the baseline, or the row's verdict when no rule applies: not run
    (a value missing), a scale-model reading (not one of the paper's settings) or a reading
    (a metric the paper gives no figure for)."""
    g = _gain_of(row, arm, base, alpha)
    if g is None:
        return None, (NOT_RUN, f"no value for {arm} or {base}")
    if not row.paper_setting:
        return None, (_gain_reading(g), "not the paper's setting")
    if row.reading:
        return None, (_gain_reading(g, READING), "the paper gives no figure for this metric")
    return g, None


def gain_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``gain``: our gain's interval excludes zero on the paper's side and holds the
    paper's gain, or our mean is within ``tol`` of it."""
    base, tol, alpha, unit = j.base, j.tol, j.alpha, j.unit
    assert base is not None   # a gain is over the claim's baseline
    g, early = gain_or_early(row, arm, base, alpha)
    if early:
        return early
    assert g is not None and g.mean is not None   # no early verdict: a gain of two means
    G = _paper_gain(row.paper)
    if G is None:   # no figure to compare with: the row is a reading
        return _gain_reading(g, READING), "the paper gives no figure for this metric"
    if g.lo is None or g.hi is None:   # no interval
        return NOT_REPRODUCED, f"{describe_gain(g)}: cannot exclude zero"
    on_side = g.lo > 0 if G > 0 else g.hi < 0
    if not on_side:
        return NOT_REPRODUCED, (f"{describe_gain(g)} does not exclude zero on the paper's "
                                f"side (paper {fmt_value(G)})")
    if g.contains(G):
        return REPRODUCED, (f"{describe_gain(g)} excludes zero and contains the paper's "
                            f"{fmt_value(G)}")
    if abs(g.mean - G) <= tol:
        return REPRODUCED, (f"{describe_gain(g)} excludes zero; the paper's {fmt_value(G)} is "
                            f"{abs(g.mean - G):.2f} from our mean (tolerance {tol:g})")
    return NOT_REPRODUCED, (f"{describe_gain(g)} excludes zero but the paper's {fmt_value(G)} is "
                            f"outside it and {abs(g.mean - G):.2f} {unit} from our mean "
                            f"(tolerance {tol:g})").replace("  ", " ")


KIND = Kind(RULE, gain_verdict, reference_base=True, contrasts=True, needs_figure=True)
