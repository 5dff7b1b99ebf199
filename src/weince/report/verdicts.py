"""Verdicts computed from result files, one evaluator per claim kind.

Vocabulary (``docs/verdicts.md``): ``reproduced``, ``not reproduced``, ``not run at this
profile``, and
``partially run: k of n rows reproduced`` when only some of a claim's paper rows ran.

Every claim in ``config/claims.yaml`` lists the paper's own settings as ``rows`` (C9, a
property of the loss, uses ``rows: any``; C5 and C10 a ``grid``). Only those rows get a
verdict. A setting the profile ran that the paper did not (``digits`` for CIFAR-100, a
small CNN for ResNet-18, MiniLM on synthetic pairs for BERT on STS-B) is a *scale-model
row*: its numbers and a plain-words reading (``scale model: ...``), never a verdict, and a
claim with only such rows is ``not run at this profile``.

The decision rule of each kind is written once, in words, in :data:`RULES` (rendered with
the claim's own tolerance by :func:`rule_text`); the tables print it beside the verdict
and ``docs/verdicts.md`` repeats it (a test keeps the two equal). ``tol`` is the claim's
``tolerance`` in the paper's unit; every interval is a 95% one (``alpha`` = 0.05):

- ``gain`` (C3, C4, C6, C7): our gain ``g`` (arm - baseline, Welch t-interval across
  encoder seeds) must exclude zero on the side of the paper's gain ``G``, and ``G`` must
  lie inside our interval or within ``tol`` of our mean.
- ``noninferior`` (C5, C10): our mean gain is at least zero and the lower end of its
  interval at least ``-tol`` (the non-inferiority margin), on every row.
- ``sign`` (C1): ``xi < 0``, our interval of ``xi`` below zero, and the paper's value
  inside our interval widened by ``tol`` on each side.
- ``reject`` (C2): every fit rejects the softmax link (``p < alpha``, the pair-robust test
  when the file has it) and our interval of ``lambda`` overlaps the paper's range.
- ``overhead`` (C8): the 95% interval of the overhead across repeated timing runs at or
  below ``tol`` percent and zero trainable parameters (an interval straddling ``tol``:
  not testable on that machine).
- ``exact`` (C9): the largest recorded difference ``<= tol``.
- ``noise_floor`` (C11, the paper's synthetic figure): the Weibit MSE's log-log slope
  (``n >= slope_min_n``) has a 95% interval containing -1, the softmax MSE at the largest
  ``n`` sits at its analytic floor (at most ``tol`` relative above it, not more than 3
  Monte-Carlo standard errors below) and the Weibit MSE there is below the floor. One
  file, one row of verdict (:func:`_evaluate_noise_floor`); the per-``n`` rows are
  readings.
- ``norms`` (N1-N3, the companion claims of ``docs/norms.md``): every testable unit (an
  encoder x loss arm x seed, or a text model) reproduces it; each unit's verdict is the one
  ``weince.norms.verdicts`` computed from the numbers of its ``norms.json`` (the claim's
  ``verdict_key``), and the units combine by :func:`weince.norms.verdicts.combine`, as on
  the norms page.

Each kind's rule is one function ``(row, arm, judging) -> (verdict, why)``, chosen by the
claim's ``kind`` from :data:`KINDS`, which also says what that kind's rows are made of;
:func:`evaluate_claim` only lays out the rows, reads them, applies the rule and assembles.

Gain tables also carry the *attribution* contrasts of :data:`CONTRASTS` (what the
Weibull term adds once InfoNCE has the same top-50 term, and the core loss alone), each
with its interval; :func:`attribution` says in words which one carries a gain.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from weince.evt.noise_floor import loglog_slope
from weince.norms.verdicts import UNIT_RULES, combine, on_paper_model
from weince.report.norms import check_norms_result
from weince.utils.summary import Estimate, diff_estimate, estimate
from weince.utils.claim_rows import Cell, ClaimResult, Row, Setting
from weince.utils.results import (Provenance, ResultSchemaError, encoder_value,
                                  finite_value, get_key, load_result)
from weince.utils.vocabulary import (NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, PARTIAL,
                                     REPRODUCED, SCALE_MODEL, VERDICTS)

__all__ = ["REPRODUCED", "NOT_REPRODUCED", "NOT_RUN", "PARTIAL", "SCALE_MODEL", "RULES",
           "COMMON_RULE", "CONTRASTS", "KINDS", "Kind", "Judging", "Cell", "Row", "ClaimResult",
           "evaluate_claim", "Setting", "rule_text", "attribution", "partial_verdict",
           "overhead_interval", "noise_note"]

COMMON_RULE = ("Only the paper's own settings get a verdict; any other setting is a "
               "scale-model row (its numbers and a plain-words reading, no verdict). When "
               "only some of the paper's rows ran, the claim reads 'partially run: k of n "
               "rows reproduced'.")

RULES = {
    "gain": ("Reproduced when our gain's 95% interval (Welch, across encoder seeds) excludes "
             "zero on the paper's side and the paper's gain lies inside that interval or "
             "within {tol} {unit} of our mean gain; fewer than 2 encoders per arm give no "
             "interval and so no reproduction."),
    "noninferior": ("Reproduced when, on every row, our mean gain is at least zero (the "
                    "paper's '>=') and the lower end of its 95% interval (Welch, across "
                    "encoder seeds) is at least -{tol} {unit} (the non-inferiority margin)."),
    "sign": ("Reproduced when xi < 0, our 95% interval of xi lies below zero, and the "
             "paper's {value} lies inside our interval widened by {tol} on each side. The "
             "interval is the t-interval across encoder seeds (n >= 2), else the fit's "
             "batch-bootstrap interval (else its i.i.d. profile interval, flagged as too "
             "narrow)."),
    "reject": ("Reproduced when every fit rejects the softmax link (p < {alpha}; the "
               "pair-robust score test where the file has it) and our 95% interval of "
               "lambda overlaps the paper's {low}-{high}. The interval is the t-interval "
               "across encoder seeds (n >= 2), else the fit's pair-robust interval (else "
               "its i.i.d. profile interval, flagged)."),
    "overhead": ("Reproduced when the 95% interval of the arm's whole-step time overhead "
                 "over InfoNCE, across repeated timing runs on the machine that ran it, lies "
                 "at or below {tol}% and the arm adds zero trainable parameters; an interval "
                 "above {tol}% is not reproduced, and one that straddles {tol}% (the "
                 "machine's run-to-run noise wider than the margin) is not testable there."),
    "exact": "Reproduced when the largest recorded |difference| is at most {tol}.",
    "noise_floor": ("Reproduced when all three hold on the synthetic experiment's file: (1) "
                    "the 95% interval of the log-log slope of the Weibit estimator's MSE "
                    "against n, fitted over the sample sizes n >= {min_n}, contains -1 (the "
                    "c/n rate; the interval takes the larger of the Monte-Carlo and the "
                    "residual standard error); (2) at the largest n the restricted softmax's "
                    "MSE has levelled off at its analytic squared-bias floor: at most "
                    "{tol_pct}% above it and not below it by more than 3 Monte-Carlo standard "
                    "errors; (3) at the largest n the Weibit MSE plus 3 standard errors is "
                    "below that floor. Replicates without a finite estimate (every draw on "
                    "the lowest, or every draw on the highest, candidate) are counted and "
                    "left out; more than 1% of them at any n is not reproduced."),
    "norms": ("Reproduced when every testable unit on the companion paper's own models "
              "(the claim's rows: {models}) shows it: a unit shows it when {unit_rule}, "
              "computed by weince.norms from its norms.json (docs/norms.md). Any other unit "
              "(our encoders, another text model) is a scale-model reading; with no unit on "
              "those models the claim is not run at this profile, and not testable at this "
              "scale when none of them is testable (fewer than min_n probes, queries or "
              "pairs, or no weight decay)."),
}

# (name, treatment arm, reference arm, what it measures)
CONTRASTS = (
    ("weince_recipe - infonce", "weince_recipe", "infonce",
     "the authors' recipe against plain InfoNCE"),
    ("weince_recipe - infonce_topm", "weince_recipe", "infonce_topm",
     "what the Weibull term adds once InfoNCE gets the same softmax top-50 term"),
    ("weince - infonce", "weince", "infonce", "the core WEINCE loss alone"),
)


def rule_text(claim: dict[str, Any], alpha: float = 0.05) -> str:
    """The decision rule of ``claim`` in words, with its own tolerance and paper figures."""
    p = claim.get("paper") or {}
    rows = claim.get("rows")
    if isinstance(rows, list) and rows:
        p = {**rows[0].get("paper", {}), **p}
    tol = claim.get("tolerance", 0.0)
    unit = claim.get("unit", "").strip()
    unit = {"%": "points", "(x100)": "points (x100)"}.get(unit, unit)
    models = ", ".join(dict.fromkeys(r.get("backbone") or r.get("model") or "?"
                                     for r in rows)) if isinstance(rows, list) else "?"
    return RULES[claim["kind"]].format(tol=f"{tol:g}", unit=unit,
                                       key=claim.get("verdict_key", "?"), models=models,
                                       unit_rule=UNIT_RULES.get(
                                           str(claim.get("verdict_key", "")).split(".")[-1],
                                           "its unit verdict says so"),
                                       alpha=f"{alpha:g}", value=p.get("value", "?"),
                                       low=_f2(p.get("low")), high=_f2(p.get("high")),
                                       min_n=claim.get("slope_min_n", "?"),
                                       tol_pct=f"{100 * tol:g}")


def _f2(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f}"


def partial_verdict(k: int, n: int) -> str:
    return f"{PARTIAL}: {k} of {n} rows reproduced"


@dataclass(frozen=True)
class Judging:
    """What every rule needs besides the row: the claim, its arms, tolerance and alpha."""

    claim: dict[str, Any]
    alpha: float
    base: str | None
    primary: str
    shown: list[str]        # baseline, primary, then the others the profile ran
    tol: float
    unit: str

    @classmethod
    def of(cls, claim: dict[str, Any], arms: list[str], alpha: float) -> "Judging":
        base, primary, others = _arms(claim, arms)
        shown = list(dict.fromkeys(a for a in [base, primary, *others] if a is not None))
        return cls(claim, alpha, base, primary, shown, float(claim.get("tolerance", 0.0)),
                   claim.get("unit", ""))


# --------------------------------------------------------------------------- reading
def _keys(spec: str | list[str] | None) -> list[str]:
    if spec is None:
        return []
    return [spec] if isinstance(spec, str) else list(spec)


def _first_present(data: dict[str, Any], keys: list[str], path: Path, needed_by: str
                   ) -> tuple[Any, str]:
    """The value of the first of ``keys`` present and not null (``(None, last key)`` when
    the keys exist but are all null); a ``ResultSchemaError`` naming them all if none exists."""
    found = False
    for k in keys:
        try:
            v = get_key(data, k, path, needed_by=needed_by)
        except ResultSchemaError:
            continue
        found = True
        if v is not None:
            return v, k
    if not found:
        get_key(data, keys[0], path, needed_by=needed_by + f" (or any of {keys[1:]})"
                if len(keys) > 1 else needed_by)
    return None, keys[-1]


def _read_cell(arm: str, claim: dict[str, Any], metric: str, files: list[Path], alpha: float,
               prov: Provenance, extra_keys: dict[str, str | list[str]]) -> Cell:
    scale = float(claim.get("scale", 1.0))
    vals, present, missing = [], [], []
    extras: dict[str, list[Any]] = {k: [] for k in extra_keys}
    used: dict[str, list[str]] = {k: [] for k in extra_keys}
    needed_by = f"claim {claim['id']} ({claim['title']})"
    for f in files:
        if not f.exists():
            missing.append(f)
            continue
        data = load_result(f)
        key = metric.replace("{arm}", arm)
        v = encoder_value(get_key(data, key, f, needed_by=needed_by), f, key)
        prov.add(data, f)
        present.append(f)
        if v is not None:
            vals.append(v * scale)
        for name, spec in extra_keys.items():
            val, k = _first_present(data, [x.replace("{arm}", arm) for x in _keys(spec)], f,
                                    needed_by)
            extras[name].append(val)
            used[name].append(k)
    cell = Cell(arm, estimate(vals, alpha), present, missing, extras)
    cell.extra["keys_used"] = used
    return cell


def _arms(claim: dict[str, Any], available: list[str]) -> tuple[str | None, str, list[str]]:
    a = claim["arms"]
    others = [x for x in a.get("others", []) if x in available]
    return a.get("baseline"), a["primary"], others


def _fmt(x: float, digits: int = 2, signed: bool = True) -> str:
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _iv(lo: float, hi: float, digits: int = 2, signed: bool = True) -> str:
    return f"[{_fmt(lo, digits, signed)}, {_fmt(hi, digits, signed)}]"


# --------------------------------------------------------------------------- per kind
def _paper_gain(p: dict[str, float]) -> float:
    return p["gain"] if "gain" in p else p["treatment"] - p["baseline"]


def _gain_of(row: Row, arm: str, base: str, alpha: float) -> Estimate | None:
    t, b = row.cells.get(arm), row.cells.get(base)
    if t is None or b is None or t.est.mean is None or b.est.mean is None:
        return None
    g = diff_estimate(t.est, b.est, alpha)
    row.gains[arm] = g
    return g


def _describe_gain(g: Estimate) -> str:
    if not g.has_interval:
        return f"gain {_fmt(g.mean)} (n < 2 encoders: no interval)"
    return f"gain {_fmt(g.mean)} {_iv(g.lo, g.hi)}"


def _scale_gain_reading(g: Estimate) -> str:
    if g.has_interval and g.lo > 0:
        return f"{SCALE_MODEL}: gain > 0 ({_describe_gain(g)})"
    if g.has_interval and g.hi < 0:
        return f"{SCALE_MODEL}: gain < 0 ({_describe_gain(g)})"
    if g.has_interval:
        return f"{SCALE_MODEL}: no resolved gain ({_describe_gain(g)}, interval spans 0)"
    return f"{SCALE_MODEL}: {_describe_gain(g)}"


def _gain_or_early(row: Row, arm: str, base: str, alpha: float
                   ) -> tuple[Estimate | None, tuple[str, str] | None]:
    """The arm's gain over the baseline, or the row's verdict when no rule applies: not run
    (a value missing) or a scale-model reading (not one of the paper's settings)."""
    g = _gain_of(row, arm, base, alpha)
    if g is None:
        return None, (NOT_RUN, f"no value for {arm} or {base}")
    if not row.paper_setting:
        return None, (_scale_gain_reading(g), "not the paper's setting")
    return g, None


def _gain_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``gain``: our gain's interval excludes zero on the paper's side and holds the
    paper's gain, or our mean is within ``tol`` of it."""
    base, tol, alpha, unit = j.base, j.tol, j.alpha, j.unit
    g, early = _gain_or_early(row, arm, base, alpha)
    if early:
        return early
    G = _paper_gain(row.paper)
    if not g.has_interval:
        return NOT_REPRODUCED, f"{_describe_gain(g)}: cannot exclude zero"
    on_side = g.lo > 0 if G > 0 else g.hi < 0
    if not on_side:
        return NOT_REPRODUCED, (f"{_describe_gain(g)} does not exclude zero on the paper's "
                                f"side (paper {_fmt(G)})")
    if g.contains(G):
        return REPRODUCED, f"{_describe_gain(g)} excludes zero and contains the paper's {_fmt(G)}"
    if abs(g.mean - G) <= tol:
        return REPRODUCED, (f"{_describe_gain(g)} excludes zero; the paper's {_fmt(G)} is "
                            f"{abs(g.mean - G):.2f} from our mean (tolerance {tol:g})")
    return NOT_REPRODUCED, (f"{_describe_gain(g)} excludes zero but the paper's {_fmt(G)} is "
                            f"outside it and {abs(g.mean - G):.2f} {unit} from our mean "
                            f"(tolerance {tol:g})").replace("  ", " ")


def _noninferior_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``noninferior``: mean gain >= 0 and the interval's lower end >= -``tol``."""
    base, tol, alpha = j.base, j.tol, j.alpha
    g, early = _gain_or_early(row, arm, base, alpha)
    if early:
        return early
    if not g.has_interval:
        return NOT_REPRODUCED, f"{_describe_gain(g)}: no interval to bound the loss"
    if g.mean < 0:
        return NOT_REPRODUCED, f"{_describe_gain(g)}: mean gain below zero"
    if g.lo >= -tol:
        return REPRODUCED, f"{_describe_gain(g)}: mean >= 0, lower end >= -{tol:g} (margin)"
    return NOT_REPRODUCED, f"{_describe_gain(g)}: lower end below -{tol:g} (margin)"


def _interval(c: Cell, name: str, labels: dict[str, str]) -> tuple[float, float, str] | None:
    """The t-interval across encoders (n >= 2), else the single fit's own interval from
    ``extra[name]`` (first key that the file has); ``labels`` names the fit keys."""
    if c.est.has_interval:
        return c.est.lo, c.est.hi, f"t-interval over {c.est.n} encoders"
    vals = [v for v in c.extra.get(name, []) if v is not None]
    if c.est.n == 1 and vals:
        iv = vals[0]
        if isinstance(iv, (list, tuple)) and len(iv) == 2 and None not in iv:
            key = next((k for k, v in zip(c.extra["keys_used"][name], c.extra[name])
                        if v is not None), "")
            return float(iv[0]), float(iv[1]), labels.get(key.split(".")[-1], f"fit {key}")
    return None


_XI_LABELS = {"xi_ci_batch": "batch-bootstrap interval of the fit",
              "xi_ci": "the fit's i.i.d. profile interval (too narrow: exceedances share images)"}
_LAM_LABELS = {"lam_ci_pairs": "pair-robust interval of the fit",
               "lam_ci": "the fit's i.i.d. profile interval (too narrow: rows share pairs)"}


def _sign_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``sign``: xi on the expected side of zero, the paper's value inside our
    interval widened by ``tol``."""
    claim = j.claim
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN, f"no value for {arm}"
    iv = _interval(c, "interval", _XI_LABELS)
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
    desc = f"xi {m:+.3f} {_iv(lo, hi, 3)} ({src})"
    tail = ("below zero (Weibull-type tail)" if hi < 0 else
            "above zero (heavy tail)" if lo > 0 else "spans zero (domain not resolved)")
    mag = ("" if pv is None else
           f"; the paper's {pv:g} is {'inside' if mag_ok else 'outside'} it widened by {tol:g}")
    why = f"{desc} {tail}{mag}"
    if not row.paper_setting:
        return f"{SCALE_MODEL}: {why}", "not the paper's setting"
    return (REPRODUCED if side_ok and mag_ok else NOT_REPRODUCED), why


def _reject_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
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
    iv = _interval(c, "interval", _LAM_LABELS)
    low, high = row.paper.get("low"), row.paper.get("high")
    if iv is None:
        lam = f"lambda {c.est.mean:.3f}, no interval"
        overlap = False
    else:
        lo, hi, src = iv
        c.extra["lo"], c.extra["hi"], c.extra["interval_source"] = lo, hi, src
        overlap = low is None or (lo <= high and hi >= low)
        lam = f"lambda {c.est.mean:.3f} {_iv(lo, hi, 3, signed=False)} ({src})"
        if low is not None:
            lam += (f" {'overlaps' if overlap else 'misses'} the paper's {low:.2f}-{high:.2f}")
    why = f"{rej}; {lam}"
    if not row.paper_setting:
        return f"{SCALE_MODEL}: {why}", "not the paper's setting"
    return (REPRODUCED if rejected == len(ps) and overlap else NOT_REPRODUCED), why


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


def _overhead_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
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
        what = f"overhead {m:+.2f}% {_iv(iv[0], iv[1])} ({iv[2]}){noise_note(m, *iv[:2])}"
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


def _exact_verdict(row: Row, arm: str, j: Judging) -> tuple[str, str]:
    """Kind ``exact``: the largest recorded difference <= ``tol``."""
    tol = j.tol
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN, f"no value for {arm}"
    worst = max(c.est.values)
    c.extra["worst"] = worst
    return (REPRODUCED if worst <= tol else NOT_REPRODUCED), \
        f"max |diff| {worst:.1e} vs tolerance {tol:.0e}"


# --------------------------------------------------------------------------- attribution
def _contrasts(row: Row, alpha: float) -> None:
    for name, t, r, _ in CONTRASTS:
        a, b = row.cells.get(t), row.cells.get(r)
        if a is None or b is None or a.est.mean is None or b.est.mean is None:
            row.contrasts[name] = None
        else:
            row.contrasts[name] = diff_estimate(a.est, b.est, alpha)


def _status(e: Estimate | None) -> str | None:
    """'+' / '-' when the interval excludes zero, '0' when it spans it, '?' with a value
    but no interval (n < 2), None when an arm did not run."""
    if e is None or e.mean is None:
        return None
    if not e.has_interval:
        return "?"
    return "+" if e.lo > 0 else "-" if e.hi < 0 else "0"


def _no_interval(xs: list[str | None]) -> bool:
    return any(x is not None for x in xs) and all(x in (None, "?") for x in xs)


def attribution(rows: list[Row], primary: str = "weince_recipe") -> str:
    """In words, which difference of :data:`CONTRASTS` carries a gain, over the paper rows
    that ran (else over the scale-model rows, said so). With ``primary = "weince"`` (C7)
    the paper's comparison is the core loss itself."""
    judged = [r for r in rows if r.contrasts and r.paper_setting and r.cells]
    scope = ""
    if not judged:
        judged = [r for r in rows if r.contrasts and r.cells]
        scope = f"{SCALE_MODEL} rows only: "
    if not judged:
        return "no rows ran"
    n = len(judged)
    total, weib, core = ([_status(r.contrasts.get(CONTRASTS[i][0])) for r in judged]
                         for i in range(3))
    runs = lambda xs: sum(x is not None for x in xs)  # noqa: E731
    nointv = " (no interval: n < 2 encoders)"
    if primary == "weince":
        k = sum(x == "+" for x in core)
        txt = (f"the paper's comparison is the core loss alone: weince - infonce gains in {k} "
               f"of {runs(core)} row(s)" + (nointv if _no_interval(core) else "")
               if runs(core) else "weince - infonce: not run")
        if runs(total):
            txt += (f"; the authors' recipe (weince_recipe - infonce) gains in "
                    f"{sum(x == '+' for x in total)} of {runs(total)}")
        return scope + txt
    parts = []
    gained = [i for i, s in enumerate(total) if s == "+"]
    if runs(total) == 0:
        parts.append("weince_recipe - infonce: not run")
    elif not gained:
        parts.append(f"weince_recipe - infonce resolves no gain (0 of {runs(total)} row(s)"
                     + (", no interval: n < 2 encoders)" if _no_interval(total) else ")"))
    else:
        parts.append(f"weince_recipe - infonce gains in {len(gained)} of {n} row(s)")
        w = [weib[i] for i in gained]
        if all(x in (None, "?") for x in w) and runs(w):
            parts.append("cannot attribute: weince_recipe - infonce_topm has no interval")
        elif runs(w) == 0:
            parts.append("cannot say whether the Weibull term or the softmax top-50 term "
                         "carries it: infonce_topm not run")
        elif all(x == "+" for x in w):
            parts.append("the Weibull term carries it: weince_recipe still beats "
                         "infonce_topm (same top-50 term)")
        elif not any(x == "+" for x in w):
            parts.append("the softmax top-50 term carries it: against infonce_topm (same "
                         "top-50 term) weince_recipe gains nothing resolved")
        else:
            parts.append(f"mixed: the Weibull term adds a resolved gain over infonce_topm in "
                         f"{sum(x == '+' for x in w)} of {len(w)} of those rows")
    if runs(core) == 0:
        parts.append("the core loss alone (weince - infonce): not run")
    else:
        k = sum(x == "+" for x in core)
        parts.append(f"the core loss alone (weince - infonce) gains in {k} of {runs(core)} "
                     f"row(s)" + (nointv if _no_interval(core) else "")
                     + (" (so the gain is not the core loss's)" if gained and k == 0
                        else ""))
    return scope + "; ".join(parts)


# --------------------------------------------------------------------------- norms (N1-N3)
def _norms_lines(value: Any, key: str, label: str, path: Path
                 ) -> list[tuple[str, float | None, list[float] | None]]:
    """``(line label, value, [lo, hi])`` of one metric key of a ``norms.json``: a
    correlation ``{r, ci}``, a plain number, or (N3) the list of re-scoring rows, of which
    the primary ones (``primary: true``) are shown with their ``gain`` and ``ci``."""
    if isinstance(value, dict) and "r" in value:
        return [(label, value.get("r"), value.get("ci"))]
    if isinstance(value, list):
        return [(f"{label} {r.get('task', '')} {r.get('metric', '')} {r.get('subset', '')}"
                 .strip(), r.get("gain"), r.get("ci")) for r in value if r.get("primary")]
    if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
        return [(label, value, None)]
    raise ResultSchemaError(f"{path}: key {key!r} holds {type(value).__name__}; a norms claim "
                            f"reads a correlation {{r, ci}}, a number or the n3 rows")


def _norms_paper(claim: dict[str, Any], s: Setting, metric: str) -> tuple[bool, dict, str]:
    """(on the companion paper's models?, the paper's figures for ``metric`` there, the
    metric's label in words) of one setting of a norms claim."""
    rows = claim.get("rows") or []
    fields = {"dataset": s.dataset, "backbone": s.backbone, "model": s.model}
    label = next((r["label"] for r in rows if r.get("metric") == metric and r.get("label")),
                 None)
    metrics = claim.get("metrics") or [claim["metric"]]
    label = label or (claim.get("label") if len(metrics) == 1 else None) or metric
    hit = [r for r in rows if on_paper_model(fields, [r])
           and r.get("metric", metric) == metric]
    return bool(hit) or on_paper_model(fields, rows), dict(hit[0]["paper"]) if hit else {}, label


def _norms_unit(claim: dict[str, Any], s: Setting, f: Path, metrics: list[str],
                per_line: dict[str, dict[str, list]], prov: Provenance, needed_by: str) -> str:
    """Read one unit's ``norms.json``: its verdict word (returned) and its numbers, added
    to ``per_line`` (one entry per line of the claim's table)."""
    data = load_result(f)
    check_norms_result(data, f)
    prov.add(data, f)
    v = get_key(data, claim["verdict_key"], f, needed_by=needed_by)
    if v not in VERDICTS:
        raise ResultSchemaError(f"{f}: {claim['verdict_key']!r} is {v!r}, not a "
                                f"verdict word ({', '.join(VERDICTS)}); re-run "
                                f"the rule that writes it (`snakemake "
                                f"--forcerun {f}`)")
    unit = f.parent.name
    for key in metrics:
        on_paper, paper, lab = _norms_paper(claim, s, key)
        try:
            value = get_key(data, key, f, needed_by=needed_by)
        except ResultSchemaError:
            if v != NOT_TESTABLE:
                raise
            value = None   # e.g. N1 without weight decay: nothing predicted
        for line, val, ci in _norms_lines(value, key, lab, f):
            d = per_line.setdefault(line, {"key": [key], "vals": [], "units": [],
                                           "paper": (on_paper, paper)})
            if val is not None:
                d["vals"].append(float(val))
            iv = (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci and None not in ci
                  else "")
            num = "n/a" if val is None else f"{val:+.2f}"
            # a unit's verdict word only where it counts (the paper's models)
            d["units"].append(f"{unit}: {num}{iv}" + (f" ({v})" if on_paper
                                                      else ""))
    return v


def _norms_verdict(units: list[str], scale_units: list[str], names: str,
                   any_settings: bool) -> tuple[str, str]:
    """A companion claim's verdict and reason from its units on the paper's models."""
    if units:
        verdict = combine(units)
        k = sum(x == REPRODUCED for x in units)
        t = sum(x not in (NOT_TESTABLE, NOT_RUN) for x in units)
        reason = (f"{k} of {t} testable unit(s) on the companion paper's models reproduced "
                  f"({len(units)} unit(s) analysed)")
    else:
        verdict = NOT_RUN
        if scale_units:
            reason = (f"the profile analyses none of the companion paper's models ({names}); "
                      f"{len(scale_units)} scale-model unit(s) shown")
        else:
            reason = ("the profile analyses no unit" if not any_settings else
                      "no norms.json of the profile exists yet")
    return verdict, reason


def _evaluate_norms(claim: dict[str, Any], settings: list[Setting], arms: list[str],
                    files_for: Callable[[Setting, str, str], list[Path]], alpha: float,
                    scale: str) -> ClaimResult:
    """A companion claim N1-N3: the companion paper's models first (its rows: a verdict
    from their units, or not run here), then one line per other setting x shown number
    with one cell per loss arm (its seeds' values and a scale-model reading, no verdict).
    The claim's verdict combines the units on the paper's models only."""
    prov = Provenance()
    needed_by = f"claim {claim['id']} ({claim['title']})"
    metrics = claim.get("metrics") or [claim["metric"]]
    units: list[str] = []   # every present unit's verdict on the paper's models
    scale_units: list[str] = []
    rows: list[Row] = []
    ran_paper: set[tuple] = set()
    for s in settings:
        by_line: dict[str, Row] = {}
        for arm in arms:
            files = files_for(s, arm, claim["file"])
            if not files:
                continue
            per_line: dict[str, dict[str, list]] = {}
            verdicts, present, missing = [], [], []
            for f in files:
                if not f.exists():
                    missing.append(f)
                    continue
                present.append(f)
                verdicts.append(_norms_unit(claim, s, f, metrics, per_line, prov, needed_by))
            on_paper = _norms_paper(claim, s, metrics[0])[0]
            (units if on_paper else scale_units).extend(verdicts)
            lines = per_line or {_norms_paper(claim, s, metrics[0])[2]:
                                 {"key": metrics, "vals": [], "units": [],
                                  "paper": _norms_paper(claim, s, metrics[0])[:2]}}
            for line, d in lines.items():
                row = by_line.get(line)
                if row is None:
                    paper_setting, paper = d["paper"]
                    row = by_line[line] = Row(s, line, d["key"][0], paper_setting, paper)
                    rows.append(row)
                    if paper_setting:
                        ran_paper.add((s.dataset, s.backbone, s.model, d["key"][0]))
                row.cells[arm] = Cell(arm, estimate(d["vals"], alpha), present, missing,
                                      {"units": d["units"]})
                if verdicts:
                    k = sum(x == REPRODUCED for x in verdicts)
                    t = sum(x not in (NOT_TESTABLE, NOT_RUN) for x in verdicts)
                    if row.paper_setting:
                        row.verdicts[arm] = combine(verdicts)
                        row.reasons[arm] = (f"{k} of {t} testable unit(s) reproduced "
                                            f"({len(verdicts)} unit(s))")
                    else:
                        row.verdicts[arm] = (f"{SCALE_MODEL}: {k} of {t} testable unit(s) "
                                             f"show it ({len(verdicts)} unit(s))")
                        row.reasons[arm] = "not the companion paper's model"
            if missing:
                rows[-1].notes.append(f"{s.label()} {arm}: {len(missing)} of {len(files)} "
                                      f"result files missing (first: {missing[0]})")
    # the companion paper's models the profile did not analyse: their figures, not run here
    absent = []
    for r in claim.get("rows") or []:
        key = r.get("metric", metrics[0])
        s = Setting("norms", dataset=r.get("dataset"), backbone=r.get("backbone"),
                    model=r.get("model"))
        if (s.dataset, s.backbone, s.model, key) not in ran_paper:
            absent.append(Row(s, r.get("label") or _norms_paper(claim, s, key)[2], key, True,
                              dict(r.get("paper") or {})))
    rows = absent + rows
    names = ", ".join(dict.fromkeys(r.get("backbone") or r.get("model")
                                    for r in claim.get("rows") or []))
    verdict, reason = _norms_verdict(units, scale_units, names, bool(settings))
    arm_verdicts = {a: combine(vs) for a in arms
                    if (vs := [r.verdicts[a] for r in rows if a in r.verdicts
                               and r.paper_setting])}
    return ClaimResult(claim, rows, verdict, reason, arm_verdicts, prov, scale,
                       rule=rule_text(claim, alpha))


# --------------------------------------------------------------------------- noise floor
NF_MAX_DEGENERATE = 0.01   # more than this share of replicates without an estimate: fail
NF_Z = 3.0                 # Monte-Carlo standard errors allowed on the floor comparisons


def _nf_rows(data: dict[str, Any], f: Path, needed_by: str) -> list[dict[str, float]]:
    rows = get_key(data, "rows", f, needed_by=needed_by)
    if not isinstance(rows, list) or len(rows) < 3:
        raise ResultSchemaError(f"{f}: 'rows' must list at least 3 sample sizes (needed by "
                                f"{needed_by}); re-run the noise_floor rule")
    keys = ("n", "replicates", "used", "degenerate", "mse_weibit", "se_weibit",
            "mse_softmax", "se_softmax", "theory_weibit", "softmax_floor", "theory_softmax")
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ResultSchemaError(f"{f}: rows[{i}] is not an object; re-run the noise_floor "
                                    f"rule")
        out.append({k: finite_value(get_key(r, k, f, needed_by=needed_by), f,
                                    f"rows[{i}].{k}") for k in keys})
    return sorted(out, key=lambda r: r["n"])


def _sci(x: float) -> str:
    return f"{x:.3e}"


def _evaluate_noise_floor(claim: dict[str, Any], settings: list[Setting], arms: list[str],
                          files_for: Callable[[Setting, str, str], list[Path]], alpha: float,
                          scale: str) -> ClaimResult:
    """Kind ``noise_floor`` (C11): one file, the rule of :data:`RULES`; rows: the slope
    (judged), then the MSE of both estimators at each n beside the analytic lines."""
    prov = Provenance()
    primary, base = claim["arms"]["primary"], claim["arms"].get("baseline")
    rule = rule_text(claim, alpha)
    min_n = float(claim.get("slope_min_n", 0))
    label = f"MSE log-log slope, n >= {claim.get('slope_min_n', 0)}"
    setting = settings[0] if settings else Setting(claim["stage"])
    head = Row(setting, label, "slope", True, {"value": -1.0})
    if not settings:
        return ClaimResult(claim, [head], NOT_RUN, "the profile does not run the synthetic "
                           "stage (synthetic.noise_floor.enabled is false)", {}, prov, scale,
                           rule=rule)
    f = files_for(setting, primary, claim["file"])[0]
    if not f.exists():   # named from the profile's folder on: the same wherever results live
        shown = Path(*f.parts[-3:])
        head.notes.append(f"missing: {shown}")
        return ClaimResult(claim, [head], NOT_RUN, f"{shown} does not exist yet (rule "
                           f"noise_floor)", {}, prov, scale, rule=rule)
    needed_by = f"claim {claim['id']} ({claim['title']})"
    data = load_result(f)
    prov.add(data, f)
    rows = _nf_rows(data, f, needed_by)
    sel = [r for r in rows if r["n"] >= min_n]
    if len(sel) < 3:
        raise ResultSchemaError(f"{f}: only {len(sel)} sample size(s) n >= {min_n:g}; the "
                                f"slope needs 3 (config key synthetic.noise_floor."
                                f"sample_sizes, or the claim's slope_min_n)")
    level = 1.0 - alpha
    slopes = {arm: loglog_slope([r["n"] for r in sel], [r[f"mse_{arm}"] for r in sel],
                                [r[f"se_{arm}"] for r in sel], level=level)
              for arm in (primary, base) if arm}
    for arm, sl in slopes.items():
        se = max(sl["se_mc"], sl["se_resid"])
        head.cells[arm] = Cell(arm, Estimate(sl["slope"], se, len(sel), sl["lo"], sl["hi"],
                                             (sl["slope"],)), [f], [], {"slope": sl})
    last = rows[-1]
    floor, tol = last["softmax_floor"], float(claim.get("tolerance", 0.0))
    w = slopes[primary]
    slope_ok = w["lo"] <= -1.0 <= w["hi"]
    ratio = last["mse_softmax"] / floor
    floor_ok = (last["mse_softmax"] <= floor * (1.0 + tol)
                and last["mse_softmax"] >= floor - NF_Z * last["se_softmax"])
    below_ok = last["mse_weibit"] + NF_Z * last["se_weibit"] < floor
    worst = max(rows, key=lambda r: r["degenerate"] / max(r["replicates"], 1))
    deg_share = worst["degenerate"] / max(worst["replicates"], 1)
    deg_ok = deg_share <= NF_MAX_DEGENERATE
    nmax = int(last["n"])
    parts = [
        f"(1) Weibit slope {w['slope']:+.3f} {_iv(w['lo'], w['hi'], 3)} "
        f"{'contains' if slope_ok else 'excludes'} -1",
        f"(2) softmax MSE at n={nmax} {_sci(last['mse_softmax'])} = {ratio:.3f} x floor "
        f"{_sci(floor)} ({'at' if floor_ok else 'not at'} the floor: tolerance "
        f"+{100 * tol:g}%, -{NF_Z:g} SE)",
        f"(3) Weibit MSE there {_sci(last['mse_weibit'])} "
        f"{'below' if below_ok else 'not below'} the floor",
    ]
    total_deg = int(sum(r["degenerate"] for r in rows))
    parts.append(f"{total_deg} degenerate replicate(s) left out"
                 + ("" if deg_ok else f"; {100 * deg_share:.1f}% at n={int(worst['n'])} "
                    f"(more than {100 * NF_MAX_DEGENERATE:g}%)"))
    ok = slope_ok and floor_ok and below_ok and deg_ok
    verdict = REPRODUCED if ok else NOT_REPRODUCED
    why = "; ".join(parts)
    head.verdicts[primary], head.reasons[primary] = verdict, why
    out = [head]
    for r in rows:
        row = Row(setting, f"MSE at n = {int(r['n'])}", "mse", True, {})
        for arm in (primary, base):
            if not arm:
                continue
            m, se = r[f"mse_{arm}"], r[f"se_{arm}"]
            z = 1.959963984540054
            theory = ({"c/n": r["theory_weibit"]} if arm == primary else
                      {"floor": r["softmax_floor"], "floor + c_soft/n": r["theory_softmax"]})
            row.cells[arm] = Cell(arm, Estimate(m, se, int(r["used"]), m - z * se, m + z * se,
                                                (m,)), [f], [],
                                  {"se": se, "theory": theory, "degenerate": int(r["degenerate"]),
                                   "replicates": int(r["replicates"])})
        out.append(row)
    return ClaimResult(claim, out, verdict, why, {}, prov, scale, rule=rule)


# --------------------------------------------------------------------------- kinds
@dataclass(frozen=True)
class Kind:
    """A claim kind: its rule (``(row, arm, judging) -> (verdict, why)``, one per kind) and
    what the rows it judges are made of."""

    rule: Callable[[Row, str, Judging], tuple[str, str]] | None = None
    # (cell extra name, claim key naming the file key(s)): read beside the metric when given
    extra: tuple[tuple[str, str], ...] = ()
    # the baseline is what the others are measured against: it gets no verdict of its own
    reference_base: bool = False
    # the file's values are already relative to the baseline: no baseline cell at all
    relative: bool = False
    # the stage measures every arm itself (timing, special case): read the claim's arms even
    # when the profile's stage did not train them
    any_arm: bool = False
    # the rows carry the attribution contrasts of :data:`CONTRASTS`
    contrasts: bool = False
    # its scale-model rows still compare with the paper's figure (the diagnostics)
    scale_reads_paper: bool = False
    # a whole-claim evaluator instead of rows of arms (norms: units of norms.json)
    evaluate: Callable[..., ClaimResult] | None = None


KINDS: dict[str, Kind] = {
    "gain": Kind(_gain_verdict, reference_base=True, contrasts=True),
    "noninferior": Kind(_noninferior_verdict, reference_base=True, contrasts=True),
    "sign": Kind(_sign_verdict, extra=(("interval", "interval_key"),), scale_reads_paper=True),
    "reject": Kind(_reject_verdict, extra=(("interval", "interval_key"), ("p", "p_key")),
                   scale_reads_paper=True),
    "overhead": Kind(_overhead_verdict, extra=(("interval", "interval_key"),
                                               ("params", "params_key"),
                                               ("attributed", "attributed_key")),
                     reference_base=True, relative=True, any_arm=True),
    "exact": Kind(_exact_verdict, any_arm=True),
    "norms": Kind(evaluate=_evaluate_norms),
    "noise_floor": Kind(evaluate=_evaluate_noise_floor),
}


# --------------------------------------------------------------------------- rows
def _paper_rows(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The paper's own settings of a claim: its ``rows``, or every cell of its ``grid``."""
    if claim.get("grid"):
        g = claim["grid"]
        return [{"dataset": d, "backbone": b, "paper": dict(claim.get("paper", {}))}
                for d in g["datasets"] for b in g["backbones"]]
    return claim["rows"]


def _layout_rows(claim: dict[str, Any], kind: Kind, settings: list[Setting]
                 ) -> tuple[list[tuple[Setting, str, str, bool, dict[str, Any], bool]],
                            list[dict[str, Any] | None], int]:
    """The rows to build, the paper's settings first then a scale-model row for each other
    setting the profile ran: ``(setting, label, metric, paper setting?, paper figures, ran?)``,
    each row's outside reference, and the number of paper rows."""
    if claim.get("rows") == "any":
        plan = [(s, claim.get("label", claim["metric"]), claim["metric"], True,
                 dict(claim.get("paper", {})), True) for s in settings]
        return plan, [None] * len(plan), len(plan)
    keys = {"vision": ("dataset", "backbone"), "text": ("model", "corpus"),
            "timing": ("backbone",)}.get(claim["stage"], ())
    paper_rows = _paper_rows(claim)
    metrics = claim.get("metrics") or [claim.get("metric")]
    expanded = [(r, m, r.get("label", claim.get("label", m)) if len(metrics) == 1
                 else f"{claim.get('label', '')} {m}".strip())
                for r in paper_rows for m in ([r["metric"]] if "metric" in r else metrics)]

    def matches(s: Setting, r: dict[str, Any]) -> bool:
        return all(getattr(s, k) == r.get(k) for k in keys)

    plan, refs = [], []
    for r, metric, label in expanded:
        hit = [s for s in settings if matches(s, r)]
        s = hit[0] if hit else Setting(claim["stage"], **{k: r.get(k) for k in keys})
        plan.append((s, label, metric, True, dict(r["paper"]), bool(hit)))
        refs.append(r.get("reference"))
    seen = list(dict.fromkeys((m, lab) for _, m, lab in expanded))
    for s in settings:
        if any(matches(s, r) for r in paper_rows):
            continue
        # the diagnostics' scale-model readings still compare with the paper's figure
        ref = dict(paper_rows[0]["paper"]) if kind.scale_reads_paper else {}
        for metric, label in seen:
            plan.append((s, claim.get("scale_label") or label, metric, False, ref, True))
            refs.append(None)
    return plan, refs, len(expanded)


def _read_row(plan: tuple, kind: Kind, j: Judging, arms: list[str],
              files_for: Callable[[Setting, str, str], list[Path]], prov: Provenance) -> Row:
    setting, label, metric, paper_setting, paper, ran = plan
    row = Row(setting, label, metric, paper_setting, paper)
    extra = {name: j.claim[key] for name, key in kind.extra if j.claim.get(key)}
    for arm in j.shown if ran else []:
        if (arm not in arms and not kind.any_arm) or (kind.relative and arm == j.base):
            continue
        files = files_for(setting, arm, j.claim["file"])
        if files:
            row.cells[arm] = _read_cell(arm, j.claim, metric, files, j.alpha, prov, extra)
    return row


def _judge_row(row: Row, kind: Kind, j: Judging) -> None:
    """Each arm's verdict (paper rows) or reading (scale-model rows), the contrasts, and the
    notes on missing files and too-narrow intervals."""
    for arm in j.shown:
        if arm == j.base and kind.reference_base:
            continue
        v, why = kind.rule(row, arm, j)
        if arm in row.cells or v != NOT_RUN:
            row.verdicts[arm], row.reasons[arm] = v, why
    if kind.contrasts:
        _contrasts(row, j.alpha)
    for arm, cell in row.cells.items():
        if cell.missing:
            row.notes.append(f"{arm}: {len(cell.missing)} of "
                             f"{len(cell.missing) + len(cell.present)} result files "
                             f"missing (first: {cell.missing[0]})")
        if cell.extra.get("interval_source", "").startswith("the fit's i.i.d."):
            row.notes.append(f"{row.setting.label()} {arm}: judged on "
                             f"{cell.extra['interval_source']}; re-run the tail/link "
                             f"rule for a dependence-aware interval")


def _overall(rows: list[Row], arm: str, n_paper: int) -> tuple[str, str]:
    """An arm's claim-level verdict from its paper rows (scale-model rows never count)."""
    judged = [r for r in rows if r.paper_setting and r.verdicts.get(arm) in
              (REPRODUCED, NOT_REPRODUCED)]
    untestable = [r for r in rows if r.paper_setting and r.verdicts.get(arm) == NOT_TESTABLE]
    if not judged and untestable:   # C8 on a machine whose timing noise exceeds the margin
        r = untestable[0]
        return NOT_TESTABLE, f"{r.setting.label()}: {r.reasons.get(arm, '')}"
    if not judged:
        scale_rows = [r for r in rows if not r.paper_setting and arm in r.verdicts]
        return NOT_RUN, ("the profile ran none of the paper's settings"
                         + (f"; {len(scale_rows)} scale-model row(s) shown"
                            if scale_rows else ""))
    failed = [r for r in judged if r.verdicts[arm] == NOT_REPRODUCED]
    k = len(judged) - len(failed)
    first = (f"; {failed[0].setting.label()} {failed[0].label}: "
             f"{failed[0].reasons.get(arm, '')}" if failed else "")
    if len(judged) < n_paper:
        return (partial_verdict(k, n_paper),
                f"{len(judged)} of the paper's {n_paper} row(s) ran, {k} reproduced" + first)
    v = NOT_REPRODUCED if failed else REPRODUCED
    why = f"{k} of {n_paper} paper row(s) reproduced"
    if len(judged) == 1 and not failed:
        why += f": {judged[0].reasons.get(arm, '')}"
    return v, why + first


# --------------------------------------------------------------------------- driver
def evaluate_claim(claim: dict[str, Any], settings: list[Setting], arms: list[str],
                   files_for: Callable[[Setting, str, str], list[Path]], *, alpha: float,
                   scale: str) -> ClaimResult:
    """Build the rows of one claim from the profile's settings and compute the verdict by
    the rule of the claim's kind (:data:`KINDS`).

    Args:
        claim: one validated registry entry.
        settings: the settings of the claim's stage that the profile ran.
        arms: the loss arms the profile ran for that stage.
        files_for: ``(setting, arm, file name) -> [paths]``, one path per encoder seed the
            profile should have produced (missing ones are reported as missing).
        alpha: 1 - confidence level of the intervals.
        scale: a one-line description of the profile's scale (epochs, data, seeds).
    """
    kind = KINDS.get(claim["kind"])
    if kind is None:
        raise ValueError(f"claim {claim.get('id', '?')}: unknown kind {claim['kind']!r}; the "
                         f"kinds are {', '.join(KINDS)} (config/claims.yaml, "
                         f"src/weince/pipeline/claims.schema.yaml)")
    if kind.evaluate is not None:
        return kind.evaluate(claim, settings, arms, files_for, alpha, scale)
    j, prov = Judging.of(claim, arms, alpha), Provenance()
    plan, refs, n_paper = _layout_rows(claim, kind, settings)
    rows = [_read_row(p, kind, j, arms, files_for, prov) for p in plan]
    for row, ref in zip(rows, refs):
        row.reference = ref
        _judge_row(row, kind, j)
    verdict, reason = _overall(rows, j.primary, n_paper)
    ran = {a for r in rows for a in r.cells}
    arm_verdicts = {a: _overall(rows, a, n_paper)[0] for a in j.shown
                    if a != j.primary and a in ran and not (a == j.base and kind.reference_base)}
    attr = attribution(rows, j.primary) if kind.contrasts else ""
    return ClaimResult(claim, rows, verdict, reason, arm_verdicts, prov, scale,
                       rule=rule_text(claim, alpha), attribution=attr)
