"""The machinery every claim kind shares: the claim's rows laid out from the profile's
settings, each arm's cell read from its result files, the rule of the kind applied row by
row, the claim-level verdict assembled, and the attribution contrasts of the gain tables.

A kind (:class:`Kind`, one module each in this package, registered in
:data:`weince.report.verdicts.KINDS`) brings its rule in words and either a rule
``(row, arm, judging) -> (verdict, why)`` that :func:`judge_rows` applies to every arm of
every row, or a whole-claim evaluator (C11, N1-N3) that builds its own rows. The rows,
cells and result are the plain dataclasses of :mod:`weince.utils.claim_rows`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weince.pipeline.claims import ROW_KEYS, paper_rows, row_matches
from weince.utils.claim_rows import Cell, ClaimResult, Row, Setting
from weince.utils.results import (Provenance, ResultSchemaError, encoder_value, get_key,
                                  load_result)
from weince.utils.summary import Estimate, diff_estimate, estimate
from weince.utils.verdict_words import (NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, PARTIAL, READING,
                                     REPRODUCED, SCALE_MODEL, SCALE_ONLY)

__all__ = ["COMMON_RULE", "CONTRASTS", "Kind", "Judging", "rule_fields", "render_rule",
           "partial_verdict", "fmt_value", "fmt_interval", "fit_interval", "attribution",
           "judge_rows"]

COMMON_RULE = ("Only the paper's own settings get a verdict; any other setting is a "
               "scale-model row (its numbers and a plain-words reading, no verdict). When "
               "only some of the paper's rows ran, the claim reads 'partially run: k of n "
               "rows reproduced'.")

# (name, treatment arm, reference arm, what it measures)
CONTRASTS = (
    ("weince_recipe - infonce", "weince_recipe", "infonce",
     "the authors' recipe against plain InfoNCE"),
    ("weince_recipe - infonce_topm", "weince_recipe", "infonce_topm",
     "what the Weibull term adds once InfoNCE gets the same softmax top-50 term"),
    ("weince - infonce", "weince", "infonce", "the core WEINCE loss alone"),
)


def rule_fields(claim: dict[str, Any], alpha: float = 0.05) -> dict[str, str]:
    """The placeholders every kind's rule text may use, from the claim's own tolerance, unit
    and paper figures (a kind adds its own with :attr:`Kind.fields`)."""
    p = claim.get("paper") or {}
    rows = claim.get("rows")
    if isinstance(rows, list) and rows:
        p = {**rows[0].get("paper", {}), **p}
    tol = claim.get("tolerance", 0.0)
    unit = claim.get("unit", "").strip()
    unit = {"%": "points", "(x100)": "points (x100)"}.get(unit, unit)
    return {"tol": f"{tol:g}", "unit": unit, "key": claim.get("verdict_key", "?"),
            "alpha": f"{alpha:g}", "value": p.get("value", "?"), "low": _f2(p.get("low")),
            "high": _f2(p.get("high")), "min_n": claim.get("slope_min_n", "?"),
            "tol_pct": f"{100 * tol:g}"}


def render_rule(kind: Kind, claim: dict[str, Any], alpha: float = 0.05) -> str:
    """``kind``'s rule in words for ``claim`` (its text with the claim's figures)."""
    own = kind.fields(claim) if kind.fields is not None else {}
    return kind.text.format(**rule_fields(claim, alpha), **own)


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
    def of(cls, claim: dict[str, Any], arms: list[str], alpha: float) -> Judging:
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


def fmt_value(x: float, digits: int = 2, signed: bool = True) -> str:
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def fmt_interval(lo: float, hi: float, digits: int = 2, signed: bool = True) -> str:
    return f"[{fmt_value(lo, digits, signed)}, {fmt_value(hi, digits, signed)}]"


def fit_interval(c: Cell, name: str, labels: dict[str, str]) -> tuple[float, float, str] | None:
    """The t-interval across encoders (n >= 2), else the single fit's own interval from
    ``extra[name]`` (first key that the file has); ``labels`` names the fit keys."""
    if c.est.lo is not None and c.est.hi is not None:   # an interval
        return c.est.lo, c.est.hi, f"t-interval over {c.est.n} encoders"
    vals = [v for v in c.extra.get(name, []) if v is not None]
    if c.est.n == 1 and vals:
        iv = vals[0]
        if isinstance(iv, (list, tuple)) and len(iv) == 2 and None not in iv:
            key = next((k for k, v in zip(c.extra["keys_used"][name], c.extra[name])
                        if v is not None), "")
            return float(iv[0]), float(iv[1]), labels.get(key.split(".")[-1], f"fit {key}")
    return None


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
    if e.lo is None or e.hi is None:   # no interval
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

# --------------------------------------------------------------------------- kinds
@dataclass(frozen=True)
class Kind:
    """A claim kind: its rule in words, its rule (``(row, arm, judging) -> (verdict, why)``,
    one per kind) or a whole-claim evaluator, and what the rows it judges are made of."""

    text: str   # the rule in words (:data:`~weince.report.verdicts.RULES`), placeholders
    #             filled by :func:`render_rule`
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
    # the kind's own placeholders of ``text`` (claim -> {name: value}), beside rule_fields'
    fields: Callable[[dict[str, Any]], dict[str, str]] | None = None
    # its verdict compares with the paper's figure on the row: a row without one
    # (``paper: {}``) is a reading
    needs_figure: bool = False


# --------------------------------------------------------------------------- rows
def _expand(claim: dict[str, Any], rows: list[dict[str, Any]], kind: Kind
            ) -> list[tuple[dict[str, Any], str, str, bool]]:
    """``(registry row, metric, label, reading?)`` per line of the claim's paper rows: each
    row's metric(s), then, after a setting's last row, the claim's ``readings`` (metrics
    shown with no verdict). A row of a kind that needs the paper's figure and has none
    (``paper: {}``) is a reading too."""
    metrics = claim.get("metrics") or [claim.get("metric")]
    readings = [m for m in claim.get("readings", []) if m not in metrics]
    keys = ROW_KEYS.get(claim["stage"], ())
    out = []
    for i, r in enumerate(rows):
        for m in [r["metric"]] if "metric" in r else metrics:
            label = (r.get("label", claim.get("label", m)) if len(metrics) == 1
                     else f"{claim.get('label', '')} {m}".strip())
            out.append((r, m, label, kind.needs_figure and not r["paper"]))
        if all(any(r.get(k) != q.get(k) for k in keys) for q in rows[i + 1:]):
            out += [({**r, "paper": {}, "reference": None}, m,
                     f"{claim.get('label', '')} {m}".strip(), True)
                    for m in readings]
    return out


def _layout_rows(claim: dict[str, Any], kind: Kind, settings: list[Setting]
                 ) -> tuple[list[tuple[Setting, str, str, bool, dict[str, Any], bool, bool]],
                            list[dict[str, Any] | None], int]:
    """The rows to build, the paper's settings first then a scale-model row for each other
    setting the profile ran: ``(setting, label, metric, paper setting?, paper figures, ran?,
    reading?)``, each row's outside reference, and the number of paper rows that get a
    verdict (readings do not)."""
    if claim.get("rows") == "any":
        plan = [(s, claim.get("label", claim["metric"]), claim["metric"], True,
                 dict(claim.get("paper", {})), True, False) for s in settings]
        return plan, [None] * len(plan), len(plan)
    stage = claim["stage"]
    keys = ROW_KEYS.get(stage, ())
    rows = paper_rows(claim)
    expanded = _expand(claim, rows, kind)
    plan, refs = [], []
    for r, metric, label, reading in expanded:
        hit = [s for s in settings if row_matches(s, r, stage)]
        s = hit[0] if hit else Setting(claim["stage"], **{k: r.get(k) for k in keys})
        plan.append((s, label, metric, True, dict(r["paper"]), bool(hit), reading))
        refs.append(r.get("reference"))
    seen = list(dict.fromkeys((m, lab, reading) for _, m, lab, reading in expanded))
    for s in settings:
        if any(row_matches(s, r, stage) for r in rows):
            continue
        # the diagnostics' scale-model readings still compare with the paper's figure
        ref = dict(rows[0]["paper"]) if kind.scale_reads_paper else {}
        for metric, label, reading in seen:
            plan.append((s, claim.get("scale_label") or label, metric, False,
                         {} if reading else ref, True, reading))
            refs.append(None)
    return plan, refs, sum(not reading for *_, reading in expanded)


def _read_row(plan: tuple, kind: Kind, j: Judging, arms: list[str],
              files_for: Callable[[Setting, str, str], list[Path]], prov: Provenance) -> Row:
    setting, label, metric, paper_setting, paper, ran, reading = plan
    row = Row(setting, label, metric, paper_setting, paper, reading=reading)
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
    rule = kind.rule
    assert rule is not None   # rows are judged by the kinds that have a row rule
    for arm in j.shown:
        if arm == j.base and kind.reference_base:
            continue
        v, why = rule(row, arm, j)
        if row.reading and v in (REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE):
            v, why = f"{READING}: {why}", "the paper gives no figure for this metric"
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
        scale_rows = [r for r in rows if not r.paper_setting and arm in r.cells
                      and r.cells[arm].est.n > 0]
        if scale_rows:   # numbers stand in the row: no verdict, not "not run"
            return SCALE_ONLY, (f"the profile ran none of the paper's settings; "
                                f"{len(scale_rows)} scale-model row(s) shown, which get no "
                                f"verdict")
        return NOT_RUN, "the profile ran none of the paper's settings, nor any other"
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
def judge_rows(claim: dict[str, Any], kind: Kind, settings: list[Setting], arms: list[str],
               files_for: Callable[[Setting, str, str], list[Path]], alpha: float,
               scale: str) -> ClaimResult:
    """A claim of a row-by-row ``kind``: lay out its rows (:func:`_layout_rows`), read each
    arm's cell, apply the kind's rule to each and assemble the claim's verdicts (the rule in
    words is left to the caller, :func:`weince.report.verdicts.evaluate_claim`)."""
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
                       attribution=attr)
