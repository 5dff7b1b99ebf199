"""Verdicts computed from result files, one evaluator per claim kind.

Vocabulary (SPEC 6): ``reproduced``, ``not reproduced``, ``not run at this profile``.

Decision rules (``tol`` = the claim's tolerance, in the paper's unit):

- ``gain``: per row and treatment arm, with ``g`` our gain (arm - baseline; Welch
  interval across encoder seeds) and ``G`` the paper's gain: reproduced when ``g`` has the
  sign of ``G`` and ``|g - G| <= tol``, or when both paper per-arm values lie inside our
  per-arm 95% intervals and each interval is informative (half-width <= ``tol``).
- ``noninferior``: ``g >= -tol`` on every row.
- ``sign``: the row's 95% interval of the metric lies strictly on the expected side of 0
  (t-interval across encoders; with one encoder, the fit's own interval).
- ``reject``: every fit of the row has ``p < alpha`` and a positive estimate.
- ``overhead``: the primary arm's overhead <= ``tol`` and its trainable parameters = 0.
- ``exact``: the largest recorded difference <= ``tol``.

The claim's verdict is the primary arm's, over the paper's own settings that the profile
ran (all must pass). Settings the profile ran that are not the paper's (``digits`` for
CIFAR-100, MiniLM on synthetic pairs for BERT on STS-B) are shown as *scale-model rows*:
their numbers and direction are reported, but they never make a paper claim
``reproduced``; with only such rows the claim is ``not run at this profile``. Claims about
the method itself (C1, C2, C8, C9: ``rows: any``) are judged on whatever the profile ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from weince.pipeline.layout import Setting
from weince.report.results import Provenance, encoder_value, get_key, load_result
from weince.report.stats import Estimate, diff_estimate, estimate
from weince.utils.vocabulary import NOT_REPRODUCED, NOT_RUN, REPRODUCED

__all__ = ["REPRODUCED", "NOT_REPRODUCED", "NOT_RUN", "Cell", "Row", "ClaimResult",
           "evaluate_claim", "Setting"]

@dataclass
class Cell:
    """One arm in one row: per-encoder values, the estimate, files present and missing."""

    arm: str
    est: Estimate
    present: list[Path] = field(default_factory=list)
    missing: list[Path] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Row:
    setting: Setting
    label: str
    metric: str
    paper_setting: bool
    paper: dict[str, float]
    cells: dict[str, Cell] = field(default_factory=dict)
    gains: dict[str, Estimate] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)  # arm -> verdict (or direction)
    notes: list[str] = field(default_factory=list)


@dataclass
class ClaimResult:
    claim: dict[str, Any]
    rows: list[Row]
    verdict: str
    reason: str
    arm_verdicts: dict[str, str]
    provenance: Provenance
    scale: str


# --------------------------------------------------------------------------- reading
def _read_cell(setting: Setting, arm: str, claim: dict[str, Any], metric: str,
               files: list[Path], alpha: float, prov: Provenance,
               extra_keys: dict[str, str] | None = None) -> Cell:
    scale = float(claim.get("scale", 1.0))
    vals, present, missing = [], [], []
    extras: dict[str, list[Any]] = {k: [] for k in (extra_keys or {})}
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
        for name, k in (extra_keys or {}).items():
            extras[name].append(get_key(data, k.replace("{arm}", arm), f, needed_by=needed_by))
    return Cell(arm, estimate(vals, alpha), present, missing, extras)


def _arms(claim: dict[str, Any], available: list[str]) -> tuple[str | None, str, list[str]]:
    a = claim["arms"]
    others = [x for x in a.get("others", []) if x in available]
    return a.get("baseline"), a["primary"], others


# --------------------------------------------------------------------------- per kind
def _paper_gain(p: dict[str, float]) -> float:
    return p["gain"] if "gain" in p else p["treatment"] - p["baseline"]


def _row_gain(row: Row, arm: str, base: str, alpha: float) -> tuple[Estimate | None, str | None]:
    """The arm's gain over ``base`` (recorded on the row), or the verdict that ends the
    judgement early: ``NOT_RUN`` when a value is missing, the direction on a scale-model row."""
    t, b = row.cells.get(arm), row.cells.get(base)
    if t is None or b is None or t.est.mean is None or b.est.mean is None:
        return None, NOT_RUN
    g = diff_estimate(t.est, b.est, alpha)
    row.gains[arm] = g
    return g, (None if row.paper_setting else _direction(g))


def _gain_verdict(row: Row, arm: str, base: str, tol: float, alpha: float) -> str:
    g, early = _row_gain(row, arm, base, alpha)
    if early is not None:
        return early
    t, b = row.cells[arm], row.cells[base]
    G = _paper_gain(row.paper)
    if (g.mean > 0) == (G > 0) and abs(g.mean - G) <= tol:
        return REPRODUCED
    p = row.paper
    if "baseline" in p and "treatment" in p:
        def inside(est: Estimate, x: float) -> bool:
            return est.has_interval and est.contains(x) and (est.hi - est.lo) / 2 <= tol
        if inside(b.est, p["baseline"]) and inside(t.est, p["treatment"]):
            return REPRODUCED
    return NOT_REPRODUCED


def _direction(g: Estimate) -> str:
    """A scale-model row's observation (not a verdict on the paper's claim)."""
    if g.mean is None:
        return NOT_RUN
    if g.has_interval and g.lo > 0:
        return "scale model: gain > 0"
    if g.has_interval and g.hi < 0:
        return "scale model: gain < 0"
    return f"scale model: gain {g.mean:+.2f}" + (" (interval spans 0)" if g.has_interval
                                                else " (n < 2, no interval)")


def _noninferior_verdict(row: Row, arm: str, base: str, tol: float, alpha: float) -> str:
    g, early = _row_gain(row, arm, base, alpha)
    if early is not None:
        return early
    return REPRODUCED if g.mean >= -tol else NOT_REPRODUCED


def _sign_verdict(row: Row, arm: str, claim: dict[str, Any]) -> str:
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN
    lo, hi = c.est.lo, c.est.hi
    if c.est.n == 1 and c.extra.get("interval"):
        iv = c.extra["interval"][0]
        if isinstance(iv, (list, tuple)) and len(iv) == 2 and None not in iv:
            lo, hi = float(iv[0]), float(iv[1])
            c.extra["fit_interval_used"] = True
    if lo is None or hi is None:
        row.notes.append(f"{arm}: one encoder and no fit interval; judged on the estimate")
        lo = hi = c.est.mean
    ok = hi < 0 if claim["expect"] == "negative" else lo > 0
    c.extra["lo"], c.extra["hi"] = lo, hi
    return REPRODUCED if ok else NOT_REPRODUCED


def _reject_verdict(row: Row, arm: str, alpha: float) -> str:
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN
    ps = [p for p in c.extra.get("p", []) if p is not None]
    if not ps:
        return NOT_RUN
    rejected = sum(1 for p in ps if float(p) < alpha)
    c.extra["rejected"] = f"{rejected}/{len(ps)}"
    positive = all(v > 0 for v in c.est.values)
    return REPRODUCED if rejected == len(ps) and positive else NOT_REPRODUCED


def _overhead_verdict(row: Row, arm: str, tol: float) -> str:
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN
    params = [p for p in c.extra.get("params", [])]
    zero = all(p == 0 for p in params) and bool(params)
    c.extra["params_total"] = sum(params) if params else None
    if not row.paper_setting:
        return (f"scale model: overhead {c.est.mean:+.2f}%, "
                f"{'zero' if zero else 'non-zero'} trainable parameters")
    return REPRODUCED if (c.est.mean <= tol and zero) else NOT_REPRODUCED


def _exact_verdict(row: Row, arm: str, tol: float) -> str:
    c = row.cells.get(arm)
    if c is None or c.est.mean is None:
        return NOT_RUN
    worst = max(c.est.values)
    c.extra["worst"] = worst
    return REPRODUCED if worst <= tol else NOT_REPRODUCED


# --------------------------------------------------------------------------- driver
def evaluate_claim(claim: dict[str, Any], settings: list[Setting], arms: list[str],
                   files_for: Callable[[Setting, str, str], list[Path]], *, alpha: float,
                   scale: str) -> ClaimResult:
    """Build the rows of one claim from the profile's settings and compute the verdict.

    Args:
        claim: one validated registry entry.
        settings: the settings of the claim's stage that the profile ran.
        arms: the loss arms the profile ran for that stage.
        files_for: ``(setting, arm, file name) -> [paths]``, one path per encoder seed the
            profile should have produced (missing ones are reported as missing).
        alpha: 1 - confidence level of the intervals.
        scale: a one-line description of the profile's scale (epochs, data, seeds).
    """
    prov = Provenance()
    kind = claim["kind"]
    tol = float(claim.get("tolerance", 0.0))
    base, primary, others = _arms(claim, arms)
    shown = [a for a in [base, primary, *others] if a is not None]
    shown = list(dict.fromkeys(shown))
    rows: list[Row] = []

    def make_row(setting: Setting, label: str, metric: str, paper_setting: bool,
                 paper: dict[str, float]) -> Row:
        row = Row(setting, label, metric, paper_setting, paper)
        extra: dict[str, str] = {}
        if kind == "sign" and claim.get("interval_key"):
            extra["interval"] = claim["interval_key"]
        if kind == "reject":
            extra["p"] = claim["p_key"]
        if kind == "overhead" and claim.get("params_key"):
            extra["params"] = claim["params_key"]
        if kind == "overhead":
            extra.update({name: claim[key] for name, key in
                          (("interval", "interval_key"), ("attributed", "attributed_key"))
                          if claim.get(key)})
        for arm in shown:
            if arm not in arms and kind not in ("overhead", "exact"):
                continue
            if kind == "overhead" and arm == base:
                continue  # overheads are already relative to the baseline
            files = files_for(setting, arm, claim["file"])
            if not files:
                continue
            row.cells[arm] = _read_cell(setting, arm, claim, metric, files, alpha, prov,
                                        extra)
        return row

    # ---- rows
    if claim.get("rows") == "any" or kind == "noninferior":
        grid = claim.get("grid")
        for s in settings:
            ps = True
            if grid is not None:
                ps = s.dataset in grid["datasets"] and s.backbone in grid["backbones"]
            rows.append(make_row(s, claim.get("label", claim["metric"]), claim["metric"], ps,
                                 dict(claim.get("paper", {}))))
    else:
        paper_rows = claim["rows"]
        keys = {"vision": ("dataset", "backbone"), "text": ("model", "corpus"),
                "timing": ("backbone",)}.get(claim["stage"], ())

        def matches(s: Setting, r: dict[str, Any]) -> bool:
            return all(getattr(s, k) == r.get(k) for k in keys)

        for r in paper_rows:
            hit = [s for s in settings if matches(s, r)]
            s = hit[0] if hit else Setting(claim["stage"], **{k: r.get(k) for k in keys})
            label = r.get("label", claim.get("label", r.get("metric", claim.get("metric"))))
            metric = r.get("metric", claim.get("metric"))
            row = (make_row(s, label, metric, True, dict(r["paper"])) if hit
                   else Row(s, label, metric, True, dict(r["paper"])))
            rows.append(row)
        metrics = list(dict.fromkeys((r.get("metric", claim.get("metric")),
                                      r.get("label", claim.get("label", "")))
                                     for r in paper_rows))
        for s in settings:
            if any(matches(s, r) for r in paper_rows):
                continue
            for metric, label in metrics:
                rows.append(make_row(s, label, metric, False, {}))

    # ---- per-row verdicts for every non-baseline arm shown
    for row in rows:
        for arm in shown:
            if arm == base and kind in ("gain", "noninferior", "overhead"):
                continue
            if kind == "gain":
                v = _gain_verdict(row, arm, base, tol, alpha)
            elif kind == "noninferior":
                v = _noninferior_verdict(row, arm, base, tol, alpha)
            elif kind == "sign":
                v = _sign_verdict(row, arm, claim)
            elif kind == "reject":
                v = _reject_verdict(row, arm, alpha)
            elif kind == "overhead":
                v = _overhead_verdict(row, arm, tol)
            else:
                v = _exact_verdict(row, arm, tol)
            if arm in row.cells or v != NOT_RUN:
                row.verdicts[arm] = v
        for arm, cell in row.cells.items():
            if cell.missing:
                row.notes.append(f"{arm}: {len(cell.missing)} of "
                                 f"{len(cell.missing) + len(cell.present)} result files "
                                 f"missing (first: {cell.missing[0]})")

    # ---- claim verdict (primary arm) and the other arms' verdicts
    if claim.get("grid"):
        n_paper = len(claim["grid"]["datasets"]) * len(claim["grid"]["backbones"])
    elif isinstance(claim.get("rows"), list):
        n_paper = len(claim["rows"])
    else:
        n_paper = sum(1 for r in rows if r.paper_setting)

    def overall(arm: str) -> tuple[str, str]:
        judged = [r for r in rows if r.paper_setting and r.verdicts.get(arm) in
                  (REPRODUCED, NOT_REPRODUCED)]
        if not judged:
            scale_rows = [r for r in rows if not r.paper_setting and arm in r.verdicts]
            why = ("the profile ran none of the paper's settings"
                   + (f"; {len(scale_rows)} scale-model row(s) shown" if scale_rows else ""))
            return NOT_RUN, why
        failed = [r for r in judged if r.verdicts[arm] == NOT_REPRODUCED]
        v = NOT_REPRODUCED if failed else REPRODUCED
        why = f"{len(judged) - len(failed)} of {len(judged)} judged row(s) pass"
        if len(judged) < n_paper:
            why += f"; {n_paper - len(judged)} of the paper's {n_paper} row(s) not run"
        return v, why

    verdict, reason = overall(primary)
    ran = {a for r in rows for a in r.cells}
    arm_verdicts = {a: overall(a)[0] for a in shown
                    if a != primary and a in ran
                    and not (a == base and kind in ("gain", "noninferior", "overhead"))}
    return ClaimResult(claim, rows, verdict, reason, arm_verdicts, prov, scale)
