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

The same rules judge the claims of the registry: :func:`evaluate_norms_claim` is kind
``norms``'s evaluator in the report's registry (:data:`weince.report.verdicts.KINDS`), with
:data:`RULE` its rule in words (``docs/verdicts.md``). It reads each unit's verdict at the
claim's ``verdict_key`` of its ``norms.json`` and the numbers the claim's table shows, and
combines the units on the companion paper's models by :func:`combine`, as the norms page
does (:mod:`weince.norms.page`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from weince.norms.files import check_norms_result
from weince.utils.claim_rows import Cell, ClaimResult, Row, Setting
from weince.utils.results import Provenance, ResultSchemaError, get_key, load_result
from weince.utils.summary import estimate
from weince.utils.verdict_words import (NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED,
                                     SCALE_MODEL, SCALE_ONLY, VERDICTS)
from weince.utils.rerun import snakemake_command

__all__ = ["PAPER", "UNIT_RULES", "RULE", "interval_side", "correlation_verdict",
           "gain_verdict", "combine", "unit_fields", "on_paper_model", "rule_fields",
           "evaluate_norms_claim"]

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

# a claim's rule in words (the registry's N1-N3; {models}, {unit_rule}: rule_fields)
RULE = ("Reproduced when every testable unit on the companion paper's own models "
        "(the claim's rows: {models}) shows it: a unit shows it when {unit_rule}, "
        "computed by weince.norms from its norms.json (docs/norms.md). Any other unit "
        "(our encoders, another text model) is a scale-model reading; with no unit on "
        "those models the claim gets no verdict (scale model only, or not run at this "
        "profile when no unit ran either), and not testable at this "
        "scale when none of them is testable (fewer than min_n probes, queries or "
        "pairs, or no weight decay).")

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


# --------------------------------------------------------------------------- N1-N3 claims
def rule_fields(claim: dict[str, Any]) -> dict[str, str]:
    """The placeholders of :data:`RULE` for one claim: the companion paper's models (its
    rows) and what one unit must show (:data:`UNIT_RULES`, by the claim's ``verdict_key``)."""
    rows = claim.get("rows")
    models = ", ".join(dict.fromkeys(r.get("backbone") or r.get("model") or "?"
                                     for r in rows)) if isinstance(rows, list) else "?"
    unit_rule = UNIT_RULES.get(str(claim.get("verdict_key", "")).split(".")[-1],
                               "its unit verdict says so")
    return {"models": models, "unit_rule": unit_rule}


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
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
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
                per_line: dict[str, dict[str, Any]], prov: Provenance, needed_by: str) -> str:
    """Read one unit's ``norms.json``: its verdict word (returned) and its numbers, added
    to ``per_line`` (one entry per line of the claim's table)."""
    data = load_result(f)
    check_norms_result(data, f)
    prov.add(data, f)
    v = get_key(data, claim["verdict_key"], f, needed_by=needed_by)
    if v not in VERDICTS:
        raise ResultSchemaError(f"{f}: {claim['verdict_key']!r} is {v!r}, not a "
                                f"verdict word ({', '.join(VERDICTS)}); re-run "
                                f"the rule that writes it "
                                f"({snakemake_command('--forcerun', f)})")
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
    elif scale_units:   # numbers stand in the rows: no verdict, not "not run"
        verdict = SCALE_ONLY
        reason = (f"the profile analyses none of the companion paper's models ({names}); "
                  f"{len(scale_units)} scale-model unit(s) shown, which get no verdict")
    else:
        verdict = NOT_RUN
        reason = ("the profile analyses no unit" if not any_settings else
                  "no norms.json of the profile exists yet")
    return verdict, reason


def evaluate_norms_claim(claim: dict[str, Any], settings: list[Setting], arms: list[str],
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
            per_line: dict[str, dict[str, Any]] = {}
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
    return ClaimResult(claim, rows, verdict, reason, arm_verdicts, prov, scale)
