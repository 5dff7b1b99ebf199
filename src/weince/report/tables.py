"""Markdown and LaTeX (booktabs) rendering of claim results.

One table per claim, in long format: a line per (setting, metric, arm) with our value,
its 95% t-interval across encoder seeds and ``n``, the gain over the baseline arm (or the
kind's detail), the paper's figure, the verdict and why. Gain tables add a line per
attribution contrast (``weince_recipe - infonce``, ``weince_recipe - infonce_topm``,
``weince - infonce``) with its interval. Scale-model rows carry a reading, never a verdict.
The decision rule stands above each table. Missing results read ``missing``; nothing in a
table is typed by hand.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from weince.report.glance import doc_links, is_companion, ours_cells, summary_row
from weince.report.verdicts import (COMMON_RULE, CONTRASTS, NOT_RUN, SCALE_MODEL, ClaimResult,
                                    Row)
from weince.utils.verdict_words import READING
from weince.utils.escape import md_escape
from weince.utils.summary import Estimate

if TYPE_CHECKING:
    from weince.report.claim_file import ClaimRecord

__all__ = ["claim_lines", "claim_markdown", "claim_latex", "latex_lines", "latex_caption",
           "summary_markdown", "rounding_notes", "latex_document", "latex_escape", "md_escape",
           "fmt_estimate",
           "DETAILS_HEADING", "LATEX_HEADER", "MAX_CAPTION_WORDS"]

HEADER = ["Setting", "Metric", "Arm", "Ours: mean [95% CI] (n)", "vs. baseline / detail",
          "Paper", "Verdict", "Why"]


def _num(x: float | None, digits: int) -> str:
    if x is None:
        return "n/a"
    if abs(x) != 0 and (abs(x) < 10 ** (-digits) or abs(x) >= 1e6):
        return f"{x:.2e}"
    return f"{x:.{digits}f}"


def fmt_estimate(e: Estimate, digits: int = 2, missing: int = 0, signed: bool = False) -> str:
    """``"50.12 [49.31, 50.93] (n=4)"``; ``"missing"`` with no value."""
    if e.mean is None:
        return "missing" if missing or e.n == 0 else "n/a"
    f = (lambda x: f"{x:+.{digits}f}") if signed else (lambda x: _num(x, digits))
    s = f(e.mean)
    s += f" [{f(e.lo)}, {f(e.hi)}]" if e.has_interval else ""
    s += f" (n={e.n}" + (f"; {missing} missing" if missing else "") + ")"
    return s


def _digits(claim: dict[str, Any]) -> int:
    return {"sign": 3, "reject": 3, "exact": 2}.get(claim["kind"], 2)


def _nf_ours(row: Row, arm: str) -> str:
    """Kind noise_floor: the slope with its interval, or an MSE with its Monte-Carlo
    standard error (three significant digits: the MSEs span three decades)."""
    cell = row.cells.get(arm)
    if cell is None or cell.est.mean is None:
        return "missing"
    e = cell.est
    if row.metric == "slope":
        return f"{e.mean:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}] ({e.n} sample sizes)"
    return f"{e.mean:.3e} +- {cell.extra['se']:.1e} SE ({e.n} replicates)"


def _paper_cell(claim: dict[str, Any], row: Row, arm: str, base: str | None) -> str:
    p = row.paper
    kind = claim["kind"]
    if kind == "noise_floor":
        if row.metric != "slope":
            return "-"
        return "slope -1 (MSE ~ c/n)" if arm != base else "levels off at its floor"
    if row.reading and row.paper_setting:
        return "(no paper figure)"
    if not row.paper_setting or (not p and kind != "norms"):
        return "(not the paper's setting)" if not row.paper_setting else "-"
    if kind == "gain":
        if arm == base:
            if "baseline" in p:
                txt = f"{p['baseline']:.2f}" + (f" +- {p['baseline_ci95_half']:.2f} (95% CI)"
                                                if "baseline_ci95_half" in p else "")
                if row.reference:
                    txt += f"; {row.reference['label']}: {row.reference['value']:g}"
                return txt
            return "-"
        if "treatment" in p:
            gain = p.get("gain", p["treatment"] - p["baseline"])
            return f"{p['treatment']:.2f}" + (f" +- {p['treatment_ci95_half']:.2f} (95% CI)"
                                              if "treatment_ci95_half" in p else "") + \
                f" (gain {gain:+.2f})"
        return f"gain {p['gain']:+.2f}"
    if kind == "noninferior":
        return (f"gain >= 0 (margin {claim.get('tolerance', 0):g})" if arm != base else "-")
    if kind == "norms":   # the companion paper's figures on its own models
        if "value" in p:
            return f"r = {p['value']:+.2f}"
        if "low" in p and "high" in p:
            return f"gain {p['low']:g}-{p['high']:g} points"
        return claim.get("short_paper", claim["paper_figure"])
    if "value" in p:
        return f"{p['value']:g}" + (" (ResNet-18, GPU)" if kind == "overhead" else "")
    if "low" in p and "high" in p:
        return f"{p['low']:.2f}-{p['high']:.2f}, non-zero"
    return "-"


def _detail(claim: dict[str, Any], row: Row, arm: str, base: str | None) -> str:
    kind = claim["kind"]
    cell = row.cells.get(arm)
    if kind in ("gain", "noninferior"):
        if arm == base:
            return "baseline"
        g = row.gains.get(arm)
        if g is None or g.mean is None:
            return "n/a"
        return f"gain {g.mean:+.2f}" + (f" [{g.lo:+.2f}, {g.hi:+.2f}]" if g.has_interval
                                        else " (no interval: n < 2)")
    if cell is None:
        return "n/a"
    if kind == "sign":
        lo, hi = cell.extra.get("lo"), cell.extra.get("hi")
        if lo is None:
            return "no interval"
        txt = f"[{lo:.3f}, {hi:.3f}] ({cell.extra.get('interval_source', '')})"
        tol = claim.get("tolerance")
        if tol is not None:
            txt += f"; widened by {tol:g}: [{lo - tol:.3f}, {hi + tol:.3f}]"
        return txt
    if kind == "reject":
        txt = f"softmax rejected (p < alpha) in {cell.extra.get('rejected', 'n/a')} fits"
        if cell.extra.get("lo") is not None:
            txt += (f"; lambda [{cell.extra['lo']:.3f}, {cell.extra['hi']:.3f}] "
                    f"({cell.extra.get('interval_source', '')})")
        return txt
    if kind == "overhead":
        txt = f"trainable parameters: {cell.extra.get('params_total', 'n/a')}"
        iv = cell.extra.get("interval") or []
        if len(iv) == 1 and iv[0] and None not in iv[0]:   # one timing file per profile
            lo, hi = iv[0]
            txt += f"; 95% CI [{lo:+.2f}, {hi:+.2f}]%"
        if len(cell.extra.get("attributed") or []) == 1:
            txt += f"; attributed from the loss alone {cell.extra['attributed'][0]:+.3f}%"
        return txt
    if kind == "norms":
        return "; ".join(cell.extra.get("units", [])) or "n/a"
    if kind == "noise_floor":
        if row.metric == "slope":
            sl = cell.extra["slope"]
            return (f"SE {max(sl['se_mc'], sl['se_resid']):.3f} (Monte Carlo {sl['se_mc']:.3f}, "
                    f"residual {sl['se_resid']:.3f})")
        th = "; ".join(f"{k} {v:.3e}" for k, v in cell.extra["theory"].items())
        deg = cell.extra.get("degenerate", 0)
        return f"theory: {th}" + (f"; {deg} degenerate left out" if deg else "")
    if kind == "exact":
        w = cell.extra.get("worst")
        return f"max |diff| {w:.1e} (tol {claim.get('tolerance'):.0e})" if w is not None \
            else "n/a"
    return ""


def _verdict_cells(row: Row, arm: str, base: str | None) -> tuple[str, str]:
    """(verdict, why): a scale-model row's reading goes to 'why', its verdict cell says
    there is none."""
    v = row.verdicts.get(arm)
    if v is None:
        return ("baseline" if arm == base else NOT_RUN), ""
    for word in (SCALE_MODEL, READING):
        if v.startswith(word + ":"):
            return f"{word} (no verdict)", v[len(word) + 1:].strip()
    return v, row.reasons.get(arm, "")


def _contrast_lines(claim: dict[str, Any], row: Row) -> list[list[str]]:
    out = []
    primary, base = claim["arms"]["primary"], claim["arms"].get("baseline")
    for name, t, r, what in CONTRASTS:
        if name not in row.contrasts:
            continue
        papers = (t, r) == (primary, base)   # the claim's own comparison, on every page
        if papers:
            what += " (the paper's comparison)"
        e = row.contrasts[name]
        if e is None:   # an arm did not run: the attribution line above the table says so
            continue
        ours = fmt_estimate(e, 2, signed=True)
        paper = "-"
        if papers and row.paper_setting and row.paper and claim["kind"] == "gain":
            p = row.paper
            paper = f"gain {p.get('gain', p.get('treatment', 0) - p.get('baseline', 0)):+.2f}"
        out.append([row.setting.label(), row.label or row.metric, name, ours, what, paper,
                    "attribution (no verdict)", ""])
    return out


def _kept_not_run(res: ClaimResult) -> set[tuple[int, str]]:
    """``(row index, arm)`` of the lines with no value of ours that still tell something:
    a missing result (not a setting the profile left out), or a number of the paper's
    that is that setting's own (C4's three gains). A line that would only say "not run"
    beside a figure the paper gives for several settings alike (C1's xi ~ -0.39 on six,
    C5's ``gain >= 0`` on fifteen) is left out; :func:`not_run_settings` lists them."""
    claim = res.claim
    base = claim["arms"].get("baseline")
    keep: set[Any] = set()
    blanket: dict[Any, Any] = {}
    for i, row in enumerate(res.rows):
        arms = list(row.cells) or list(row.verdicts) or [claim["arms"]["primary"]]
        for arm in arms:
            if arm in row.cells:
                continue
            if _verdict_cells(row, arm, base)[0] != NOT_RUN:
                keep.add((i, arm))
                continue
            paper = _paper_cell(claim, row, arm, base) if row.paper_setting else "-"
            if paper in ("-", "") or claim["kind"] == "noninferior":
                continue
            blanket.setdefault((row.label or row.metric, arm, paper), []).append((i, arm))
    for lines in blanket.values():
        if len(lines) == 1:
            keep.update(lines)
    return keep


def not_run_settings(res: ClaimResult) -> list[str]:
    """The paper's settings the profile did not run, whose lines the table leaves out."""
    claim = res.claim
    kept = _kept_not_run(res)
    out = []
    for i, row in enumerate(res.rows):
        if row.cells or not row.paper_setting:
            continue
        arms = list(row.verdicts) or [claim["arms"]["primary"]]
        if not any((i, a) in kept for a in arms):
            out.append(row.setting.label())
    return list(dict.fromkeys(out))


def claim_lines(res: ClaimResult) -> list[list[str]]:
    """The table body: one list of strings per (row, arm), then the row's attribution
    contrasts, in HEADER's column order."""
    claim = res.claim
    base = claim["arms"].get("baseline")
    lines = []
    kept = _kept_not_run(res)
    for i, row in enumerate(res.rows):
        arms = list(row.cells) or list(row.verdicts) or [claim["arms"]["primary"]]
        for arm in arms:
            cell = row.cells.get(arm)
            verdict, why = _verdict_cells(row, arm, base)
            if cell is None and (i, arm) not in kept:
                continue   # listed under the table (not_run_settings)
            if claim["kind"] == "noise_floor":
                ours = _nf_ours(row, arm)
                if row.metric != "slope":
                    verdict = "reading (no verdict)"   # the rule reads these, row 1 says how
            else:
                ours = (fmt_estimate(cell.est, _digits(claim), len(cell.missing))
                        if cell else ("not run here" if verdict == NOT_RUN else "missing"))
            lines.append([row.setting.label(), row.label or row.metric, arm, ours,
                          _detail(claim, row, arm, base), _paper_cell(claim, row, arm, base),
                          verdict, why])
        if row.cells:
            lines += _contrast_lines(claim, row)
    return lines


def _md_table(header: list[str], lines: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in ln] for ln in lines]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(ln) + " |" for ln in esc]
    return "\n".join(out)


def _prov_lines(res: ClaimResult, run_info: dict[str, str]) -> list[str]:
    p = res.provenance.describe()
    return [
        f"Results: {p['files']} file(s); git commit {p['git_commit']}; "
        f"result config hash(es) {p['config_hashes']}; result dates {p['dates']}.",
        f"Profile {run_info['profile']} (workflow config hash {run_info['config_hash']}); "
        f"report built {run_info['built']} at commit {run_info['git_commit']}.",
    ]


DETAILS_HEADING = "### Rule, selection and scale"


def rounding_notes(claim: dict[str, Any]) -> list[str]:
    """Where the paper prints a gain that is not the difference of its printed numbers (to
    the printed digits), one sentence per row saying so: the paper rounded the difference
    of its unrounded numbers; the verdict uses the printed gain."""
    out = []
    for row in claim.get("rows") or []:
        p = (row.get("paper") if isinstance(row, dict) else None) or {}
        if not isinstance(p, dict) or not {"gain", "treatment", "baseline"} <= p.keys():
            continue
        diff = p["treatment"] - p["baseline"]
        if abs(round(diff, 2) - p["gain"]) >= 0.005:
            where = row.get("label") or ", ".join(
                str(row[k]) for k in ("dataset", "backbone", "model") if k in row)
            out.append(f"Paper's rounding ({where}): it prints a gain of {p['gain']:+.2f}, "
                       f"where its printed numbers give {p['treatment']:.2f} - "
                       f"{p['baseline']:.2f} = {diff:+.2f} (the paper's rounding). "
                       f"The verdict uses the printed gain.")
    return out


def claim_markdown(res: ClaimResult, run_info: dict[str, str], nav: str = "") -> str:
    """One claim's page: ``nav`` (links to the summary and the neighbouring claims), then
    the verdict, the paper's figure and the table; the rule, the attribution, the notes
    (selection), the scale and the provenance below :data:`DETAILS_HEADING` (the HTML
    page puts the forest plot just above it)."""
    c = res.claim
    arms = c["arms"]
    others = ", ".join(f"{a}: {v}" for a, v in res.arm_verdicts.items())
    paper = "Companion paper" if is_companion(c) else "Paper"
    parts = ([nav, ""] if nav else []) + [
        f"## {c['id']}: {c['title']}",
        "",
        f"**Verdict ({arms['primary']}): {res.verdict}** ({res.reason})"
        + (f". Other arms: {others}." if others else ""),
        "",
        f"{paper}: {c['paper_figure']}" + (f" ({c['source']})" if c.get("source") else "")
        + f". Profile {run_info['profile']}: rows of the paper's own settings get a verdict; "
        "every other row is a scale-model reading (numbers, no verdict). The words are "
        "explained in docs/glossary.md.",
        "",
        *[x for n in rounding_notes(c) for x in (n, "")],
        _md_table(HEADER, claim_lines(res)),
        "",
    ]
    skipped = not_run_settings(res)
    if skipped:
        whose = "companion paper's models" if is_companion(c) else "paper's settings"
        parts += [f"Not run at this profile ({len(skipped)} of the {whose}, "
                  f"{paper.lower()}: {c.get('short_paper', c['paper_figure'])}): "
                  f"{', '.join(skipped)}.", ""]
    notes = [n for r in res.rows for n in r.notes]
    if notes:
        parts += ["Notes:", "", *[f"- {n}" for n in dict.fromkeys(notes)], ""]
    parts += [DETAILS_HEADING, "",
              f"- Rule: {res.rule}" + (f" {COMMON_RULE}" if c["kind"] != "norms" else "")]
    if res.attribution:
        parts.append(f"- Which difference carries the gain: {res.attribution}")
    for note in res.notes:
        parts.append(f"- Note: {note}")
    refs = [r.reference for r in res.rows if r.reference]
    for ref in {id(x): x for x in refs}.values():
        parts.append(f"- Reference: {ref['label']} = {ref['value']:g} ({ref['source']})")
    parts += [
        f"- Scale: {res.scale}",
        f"- Computed from `{c['file']}` key `{c.get('metric', 'per row')}`"
        + (f" x {c['scale']:g}" if float(c.get("scale", 1.0)) != 1.0 else "")
        + (f"; tolerance {c['tolerance']:g}" if "tolerance" in c else "")
        + (f" {c['unit']}" if c.get("unit") and "tolerance" in c else ""),
        "",
    ]
    parts += [f"_{ln}_" for ln in _prov_lines(res, run_info)]
    return doc_links("\n".join(parts) + "\n")


_LATEX_MAP = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"$\sim$", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX specials; ``+-`` becomes ``\\pm``, ``->`` an arrow, non-ASCII is
    replaced by ASCII look-alikes (the tables compile with plain pdflatex)."""
    text = (text.replace("\u00b1", "+-").replace("\u2192", "->").replace("\u2248", "~")
            .replace("\u2265", ">=").replace("\u2264", "<=").replace("\u00d7", "x")
            .replace("\u2014", "--").replace("\u2013", "-"))
    text = text.encode("ascii", "replace").decode("ascii")
    tokens = re.split(r"(\+-|->|>=|<=)", text)
    out = []
    for t in tokens:
        if t == "+-":
            out.append(r"$\pm$")
        elif t == "->":
            out.append(r"$\rightarrow$")
        elif t == ">=":
            out.append(r"$\geq$")
        elif t == "<=":
            out.append(r"$\leq$")
        else:
            out.append("".join(_LATEX_MAP.get(ch, ch) for ch in t))
    return "".join(out)


LATEX_HEADER = ["Setting", "Arm", "Ours: mean [95% CI] (n)", "Paper", "Verdict"]
MAX_CAPTION_WORDS = 60


def latex_lines(res: ClaimResult) -> list[list[str]]:
    """The LaTeX table's rows, in :data:`LATEX_HEADER`'s columns: the Markdown table's
    lines with the metric folded into the setting (where a setting has several), the gain's
    line (``primary - baseline``) carrying the gain, and verdicts in one or two words."""
    metrics: dict[str, set] = {}
    for r in res.rows:
        metrics.setdefault(r.setting.label(), set()).add(r.label or r.metric)
    out = []
    for ln in claim_lines(res):
        setting, metric, arm, ours, detail, paper, verdict, _ = ln
        if len(metrics.get(setting, ())) > 1:   # this setting has several metrics
            setting = f"{setting}, {metric}"
        paper = paper.replace(" (95% CI)", "")   # the caption says what +- is
        if detail.startswith("[") and "(n=1)" in ours:   # a single fit's own interval
            ours = ours.replace(" (n=1)", f" {detail.split(' (', 1)[0]} (n=1, fit)")
        verdict = {"attribution (no verdict)": "-", f"{SCALE_MODEL} (no verdict)": SCALE_MODEL,
                   f"{READING} (no verdict)": READING}.get(verdict, verdict)
        paper = "-" if paper == "(not the paper's setting)" else paper
        out.append([setting, arm, ours, paper, verdict])
    return out


def latex_caption(res: ClaimResult, run_info: dict[str, str]) -> str:
    """At most :data:`MAX_CAPTION_WORDS` words: the claim, the paper's figure and where it
    stands, the verdict, and where the rule and scale are (the claim's Markdown page)."""
    c = res.claim
    src = f" ({c['source']})" if c.get("source") and len(c["source"]) < 40 else ""
    return (f"{c['id']}: {c.get('short_title', c['title'])}. "
            f"Paper{src}: {c.get('short_paper', c['paper_figure'])}. "
            f"Verdict ({c['arms']['primary']}): {res.verdict}. "
            f"Profile {run_info['profile']}; 95% t-intervals across encoder seeds"
            + ("; the paper's +- is a 95% half-width" if "+-" in " ".join(
                ln[3] for ln in latex_lines(res)) else "")
            + "; only the paper's settings get a verdict"
            + (f" ({len(not_run_settings(res))} did not run)" if not_run_settings(res) else "")
            + f". Rule, selection and scale: table_{c['id'].lower()}.md.")


def claim_latex(res: ClaimResult, run_info: dict[str, str]) -> str:
    c = res.claim
    body = [" & ".join(latex_escape(x) for x in ln) + r" \\" for ln in latex_lines(res)]
    prov = " ".join(latex_escape(x) for x in _prov_lines(res, run_info))
    return "\n".join([
        f"% generated by `weince report`; do not edit ({c['id']})",
        r"\begin{table}[htbp]",
        r"\centering",
        r"\footnotesize",
        rf"\caption{{{latex_escape(latex_caption(res, run_info))}}}",
        rf"\label{{tab:{c['id'].lower()}}}",
        r"\begin{tabular}{llrll}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in LATEX_HEADER) + r" \\",
        r"\midrule",
        *body,
        r"\bottomrule",
        r"\end{tabular}",
        rf"\par\smallskip{{\tiny {prov}}}",
        r"\end{table}",
        "",
    ])


def latex_document(table_files: list[str], title: str) -> str:
    """A standalone document that ``\\input``s every table (compiled by the tests)."""
    inputs = "\n".join(rf"\input{{{f}}}" for f in table_files)
    return "\n".join([
        r"\documentclass{article}",
        r"\usepackage[margin=1.5cm,landscape]{geometry}",
        r"\usepackage{booktabs}",
        r"\usepackage{graphicx}",
        r"\begin{document}",
        rf"\section*{{{latex_escape(title)}}}",
        inputs,
        r"\end{document}",
        "",
    ])


def _figure_note(path: str) -> str:
    """What a figure of the summary's list is of, where a reader could take it for the
    claim's number: an EVT diagnostic is one encoder's fit, the tables the mean over
    seeds."""
    name = path.replace("\\", "/")
    if "/evt/" in f"/{name}":
        if "lambda_profile" in name:
            return (": one encoder's link fit (setting and seed in its title), its lambda "
                    "and profile interval; the C2 row above is the mean of lambda across "
                    "encoder seeds, with its t-interval")
        return (": one encoder's tail (setting and seed in its title); the C1 row above is "
                "the mean of xi across encoder seeds, with its t-interval")
    if name.rsplit("/", 1)[-1].startswith(("c1_estimates", "c2_estimates")):
        return ": one point per encoder, the values the claim's mean is taken over"
    return ""


def summary_markdown(results: list[ClaimRecord], run_info: dict[str, str],
                     figures: list[str], scale: list[str] | str,
                     companions: list[dict] | None = None, rest: str | None = None) -> str:
    """The profile's summary: what it ran (a short list), one short row per claim of the
    paper (claim, what, source, paper, ours, verdict, its page), the companion claims N1-N3
    in their own block under the companion paper they come from, the companion pages and
    the provenance. Rules, attribution, other arms and notes are on each claim's page.
    ``rest``: the line saying what reproducing the remaining claims takes (runs and
    GPU-hours, :func:`weince.cost.pages.rest_line`).
    ``results``: the claims' records as their table job wrote them
    (:mod:`weince.report.claim_file`)."""
    items = [scale] if isinstance(scale, str) else list(scale)
    lines = [
        f"# WEINCE reproduction: claims at profile {run_info['profile']}",
        "",
        "What this profile ran:",
        "",
        *[f"- {x}" for x in items],
        "",
        *([rest, ""] if rest else []),
        "Only the paper's own settings get a verdict (**reproduced** or **not reproduced**); "
        "every other setting is a scale-model reading (its numbers, no verdict): a claim with "
        "only such readings says *no verdict: scale model only*, one with nothing run at all "
        "*not run at this profile*. C9 is an implementation check (an identity of this "
        "code) and C11 the paper's synthetic experiment at its own setting: both get a "
        "verdict on every profile. **Ours** is one number per claim: the primary arm on the "
        "paper's setting when it ran, else on the scale-model row closest to it, which the "
        "cell names first; where several claims have only the same row, it is printed once "
        "and the others say so. An interval is the 95% t-interval across encoder seeds "
        "(n >= 2). Each verdict is computed once from the result files and kept in the "
        "claim's file (`claims/<id>.json`), which this summary reads; the rule, the other "
        "arms and the notes are on the claim's page and in docs/verdicts.md. The words used "
        "here are explained in docs/glossary.md.",
        "",
    ]
    ours = ours_cells(results)

    def row(r: ClaimRecord) -> str:
        cells = summary_row(r, f"table_{r.claim['id'].lower()}.md", ours[r.claim["id"]])
        return "| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |"

    paper = [r for r in results if not is_companion(r.claim)]
    comp = [r for r in results if is_companion(r.claim)]
    if paper:
        lines += ["## The paper's claims", "",
                  "| Claim | What | Source | Paper | Ours | Verdict | Page |",
                  "|---|---|---|---|---|---|---|", *[row(r) for r in paper]]
    if comp:
        ids = [r.claim["id"] for r in comp]
        name = f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else ids[0]
        sources = list(dict.fromkeys(r.claim.get("source", "") for r in comp if
                                     r.claim.get("source")))
        lines += ["", f"## Companion claims {name}: not from the WEINCE paper", "",
                  f"{name} come from a companion paper on embedding norms"
                  + (f" ({'; '.join(sources)})" if sources else "")
                  + ": its figures, on its own models, stand in the Companion paper "
                  "column; only those models would get a verdict here. Definitions: "
                  "docs/norms.md.", "",
                  "| Claim | What | Companion paper | Ours | Verdict | Page |",
                  "|---|---|---|---|---|---|", *[row(r) for r in comp]]
    if companions:
        lines += ["", "## Companion pages", "",
                  "| Page | What | Verdict |", "|---|---|---|"]
        lines += [f"| [{c['page'].removesuffix('.md')}]({c['page']}) | {c['detail']} | "
                  f"{c['verdict']} |"
                  for c in companions]
    lines += ["", "## Provenance", "",
              f"- Profile `{run_info['profile']}`, workflow config hash "
              f"{run_info['config_hash']}",
              f"- Report built {run_info['built']} at git commit {run_info['git_commit']}"]
    commits = sorted({x for r in results for x in r.provenance.commits})
    dates = sorted(d for r in results for d in r.provenance.dates)
    nfiles = sum(r.provenance.files for r in results)
    shown = ", ".join(c[:12] + ("+dirty" if c.endswith("+dirty") else "") for c in commits)
    lines.append(f"- Built from {nfiles} result file reads; result commits: "
                 f"{shown or 'none'}; "
                 f"result dates: {(dates[0] + ' to ' + dates[-1]) if dates else 'none'}")
    if figures:
        lines += ["", "## Figures", ""] + [f"- [{f}]({f}){_figure_note(f)}" for f in figures]
    return doc_links("\n".join(lines) + "\n")
