"""Kind ``noise_floor`` (C11, the paper's synthetic figure): one file, one judged row (the
Weibit MSE's log-log slope and the softmax's floor at the largest n), then the MSE of both
estimators at each n beside the analytic lines (readings)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from weince.evt.noise_floor import loglog_slope
from weince.report.verdicts.core import Kind, fmt_interval
from weince.utils.claim_rows import Cell, ClaimResult, Row, Setting
from weince.utils.results import Provenance, ResultSchemaError, finite_value, get_key, load_result
from weince.utils.summary import Estimate
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, REPRODUCED

__all__ = ["RULE", "KIND", "evaluate_noise_floor", "NF_MAX_DEGENERATE", "NF_Z"]

RULE = ("Reproduced when all three hold on the synthetic experiment's file: (1) "
        "the 95% interval of the log-log slope of the Weibit estimator's MSE "
        "against n, fitted over the sample sizes n >= {min_n}, contains -1 (the "
        "c/n rate; the interval takes the larger of the Monte-Carlo and the "
        "residual standard error); (2) at the largest n the restricted softmax's "
        "MSE has levelled off at its analytic squared-bias floor: at most "
        "{tol_pct}% above it and not below it by more than 3 Monte-Carlo standard "
        "errors; (3) at the largest n the Weibit MSE plus 3 standard errors is "
        "below that floor. Replicates without a finite estimate (every draw on "
        "the lowest, or every draw on the highest, candidate) are counted and "
        "left out; more than 1% of them at any n is not reproduced.")

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


def evaluate_noise_floor(claim: dict[str, Any], settings: list[Setting], arms: list[str],
                          files_for: Callable[[Setting, str, str], list[Path]], alpha: float,
                          scale: str) -> ClaimResult:
    """Kind ``noise_floor`` (C11): one file, the rule of :data:`RULE`; rows: the slope
    (judged), then the MSE of both estimators at each n beside the analytic lines."""
    prov = Provenance()
    primary, base = claim["arms"]["primary"], claim["arms"].get("baseline")
    min_n = float(claim.get("slope_min_n", 0))
    label = f"MSE log-log slope, n >= {claim.get('slope_min_n', 0)}"
    setting = settings[0] if settings else Setting(claim["stage"])
    head = Row(setting, label, "slope", True, {"value": -1.0})
    if not settings:
        return ClaimResult(claim, [head], NOT_RUN, "the profile does not run the synthetic "
                           "stage (synthetic.noise_floor.enabled is false)", {}, prov, scale)
    f = files_for(setting, primary, claim["file"])[0]
    if not f.exists():   # named from the profile's folder on: the same wherever results live
        shown = Path(*f.parts[-3:])
        head.notes.append(f"missing: {shown}")
        return ClaimResult(claim, [head], NOT_RUN, f"{shown} does not exist yet (rule "
                           f"noise_floor)", {}, prov, scale)
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
        f"(1) Weibit slope {w['slope']:+.3f} {fmt_interval(w['lo'], w['hi'], 3)} "
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
    return ClaimResult(claim, out, verdict, why, {}, prov, scale)


KIND = Kind(RULE, evaluate=evaluate_noise_floor)
