"""Build a profile's report: every claim's table (Markdown + LaTeX), the summary and the
figures, from the claims registry and the result files.

    from weince.report import build_report
    results = build_report(cfg)      # cfg: the workflow config of one profile (a dict)

The config is resolved once into a :class:`weince.pipeline.profile.Profile` (its settings,
runs, options and paths), which the steps below share; each also accepts the dict.

Writes ``{reports}/{profile}/``: ``summary.md``, ``table_<id>.md`` and ``.tex`` for every
claim of the registry, ``tables.tex`` (a standalone document that inputs every table), ``claims.json``
(the verdicts, machine-readable) and ``figures/``.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from weince.losses.arms import grid_points
from weince.pipeline.claims import load_claims
from weince.pipeline.layout import VisionRun
from weince.pipeline.profile import Profile
from weince.report import figures as figs
from weince.report.forest import forest_figures
from weince.report.glance import claim_notes, pairs_text, scale_items
from weince.report.rehearsal import (data_note, is_rehearsal, rehearsal_note,
                                     text_identity, withhold_verdicts)
from weince.report.selection import selection_section
from weince.report.tables import (claim_latex, claim_markdown, latex_document,
                                  summary_markdown)
from weince.report.verdicts import ClaimResult, evaluate_claim
from weince.utils import write_json
from weince.utils.provenance import git_commit
from weince.utils.vocabulary import VERDICT_FREE

__all__ = ["build_report", "evaluate", "write_tables", "scale_line", "companion_rows"]


def scale_line(cfg: dict[str, Any] | Profile, stage: str) -> str:
    """One line on the scale a stage ran at: profile, data, model, epochs, seeds; a
    rehearsal's (and a run on synthetic files') says so first."""
    prof = Profile.of(cfg)
    line = _scale_line(prof, stage)
    if is_rehearsal(prof.config):
        return f"{rehearsal_note(prof.config)}. {line}"
    return line + data_note(prof.config)


def stages_run(prof: Profile) -> list[str]:
    """The training stages the profile ran (for the summary's scale line)."""
    out = []
    if prof.vision_pairs:
        out.append("vision")
    if prof.settings("text")[0]:
        out.append("text")
    return out


def _scale_line(prof: Profile, stage: str) -> str:
    p = prof.name
    if stage == "vision":
        v = prof.block("vision")
        pre = v.get("pretrain") or {}
        g = v.get("grid") or {}
        grid = (f"; grid of {len(grid_points(g))} point(s) for "
                f"{', '.join(g.get('arms', []))} chosen on val" if g.get("arms") else "")
        opts = prof.options
        return (f"profile {p}: {pairs_text(prof.config)}, "
                f"{pre.get('epochs', '?')} epoch(s), batch {pre.get('batch_size', '?')}, "
                f"encoder seeds {', '.join(map(str, v.get('seeds', [])))}{grid}; "
                + (f"options off the official protocol: {'; '.join(opts)}" if opts else
                   "official protocol (docs/protocol.md)"))
    if stage == "text":
        t = prof.block("text")
        s = t.get("simcse") or {}
        data = t.get("corpus", "?") + (" (SYNTHETIC sentences and graded pairs made by the "
                                       "project, a pipeline check; not wiki1m, not the STS "
                                       "benchmark)" if t.get("corpus") == "synthetic" else "")
        return (f"profile {p}: {', '.join(t.get('models', []))} on {data}, "
                f"{s.get('epochs', '?')} epoch(s), batch {s.get('batch_size', '?')}, "
                f"encoder seeds {', '.join(map(str, t.get('seeds', [])))}")
    if stage == "timing":
        t = prof.block("timing").get("config") or {}
        mode = {"both": "compiled (eager timed too)", True: "compiled", False: "eager"}.get(
            t.get("compile", "eager"), t.get("compile", "eager"))
        return (f"profile {p}: timing on device "
                f"{t.get('device', prof.config.get('device', 'auto'))}, "
                f"whole step with backbone {t.get('backbone', '?')} at "
                f"{t.get('image_size', '?')} px, 2 x {t.get('step_batch', '?')} views, "
                f"loss {mode}")
    if stage == "norms":
        a = prof.block("norms").get("analysis") or {}
        return (f"profile {p}: embedding norms of {len(prof.norms_vision)} vision "
                f"and {len(prof.norms_text)} text unit(s), {a.get('n_probes', '?')} "
                f"probes, {a.get('resamples', '?')} minibatch resamplings (docs/norms.md)")
    return f"profile {p}"


def _figures(prof: Profile, results: dict[str, ClaimResult], fig_dir: Path) -> list[Path]:
    made: list[Path] = []
    profile, evt_arms = prof.name, prof.evt_arms
    seeds = prof.block("vision").get("seeds")
    logs = prof.summary_logs()
    for d, b in prof.vision_pairs:
        stem = f"lambda_training_{d}_{b}"
        f = figs.training_curves_figure(figs.training_curves(logs.pop(stem)),
                                        fig_dir / f"{stem}.png",
                                        f"lambda over training, {d} / {b} (profile {profile})")
        if f:
            made.append(f)
        if evt_arms and seeds:
            run = prof.run_dir(VisionRun(d, b, evt_arms[0], int(seeds[0])))
            made += figs.collect_evt_figures(run, fig_dir / "evt", f"{d}_{b}_{evt_arms[0]}")
    for stem, text_logs in logs.items():   # the text models'
        f = figs.training_curves_figure(
            figs.training_curves(text_logs), fig_dir / f"{stem}.png",
            f"lambda over training, SimCSE {stem.removeprefix('lambda_training_text_')} "
            f"(profile {profile})")
        if f:
            made.append(f)
    for cid, ylabel, ref in (("C1", "xi (POT/GPD)", -0.39), ("C2", "lambda_hat (link)",
                                                                (0.33, 0.50))):
        res = results.get(cid)
        if res is None:
            continue
        pts = []
        for row in res.rows:
            for arm, cell in row.cells.items():
                for path, val in zip(cell.present, cell.est.values):
                    seed = path.parent.name
                    pts.append((f"{row.setting.label()} {arm} {seed}", val, None, None))
        f = figs.estimates_figure(pts, fig_dir / f"{cid.lower()}_estimates.png", ylabel,
                                  f"{cid}: one point per encoder (profile {profile})", ref)
        if f:
            made.append(f)
    return made


def evaluate(cfg: dict[str, Any] | Profile, *, claims_path: str | Path | None = None,
             only: list[str] | None = None) -> list[ClaimResult]:
    """Evaluate the registry's claims (or those in ``only``) on the profile's results."""
    prof = Profile.of(cfg)
    reg = load_claims(claims_path or prof.claims)
    alpha = float(reg.get("alpha", 0.05))
    if only is not None:
        ids = [c["id"] for c in reg["claims"]]
        bad = [i for i in only if i not in ids]
        if bad:
            raise ValueError(f"unknown claim id(s) {bad}; the registry has {ids}")
    results: list[ClaimResult] = []
    for claim in reg["claims"]:
        if only is not None and claim["id"] not in only:
            continue
        settings, arms = prof.settings(claim["stage"])
        # a text setting is judged only when the weights that ran are the named model
        settings, claim_files = text_identity(settings, arms, prof.files,
                                              prof.block("text").get("model_paths"))
        res = evaluate_claim(claim, settings, arms, claim_files, alpha=alpha,
                             scale=scale_line(prof, claim["stage"]))
        if is_rehearsal(prof.config):
            res = withhold_verdicts(res, prof.config)
        res.notes = claim_notes(prof.config, claim)
        results.append(res)
    return results


def _run_info(prof: Profile) -> dict[str, str]:
    commit = git_commit()
    return {
        "profile": prof.name,
        "config_hash": prof.config_hash,
        "built": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit[:12] + ("+dirty" if commit.endswith("+dirty") else ""),
    }


def write_tables(results: list[ClaimResult], cfg: dict[str, Any] | Profile, out: Path,
                 claims_path: str | Path | None = None) -> list[Path]:
    """``table_cN.md`` and ``table_cN.tex`` for each claim result; ``claims_path``: the
    registry the results came from (default the profile's), for the page navigation."""
    prof = Profile.of(cfg)
    out.mkdir(parents=True, exist_ok=True)
    info = _run_info(prof)
    ids = [c["id"] for c in load_claims(claims_path or prof.claims)["claims"]]
    written = []
    for res in results:
        stem = f"table_{res.claim['id'].lower()}"
        (out / f"{stem}.md").write_text(claim_markdown(res, info, claim_nav(ids, res.claim["id"]))
                                        + selection_section(prof.config, res.claim))
        (out / f"{stem}.tex").write_text(claim_latex(res, info))
        written += [out / f"{stem}.md", out / f"{stem}.tex"]
    return written


def claim_nav(ids: list[str], cid: str) -> str:
    """Links from a claim's page to the summary and to the claims before and after it in
    the registry's order."""
    i = ids.index(cid)
    parts = ["[Summary](summary.md)"]
    if i > 0:
        parts.append(f"previous: [{ids[i - 1]}](table_{ids[i - 1].lower()}.md)")
    if i + 1 < len(ids):
        parts.append(f"next: [{ids[i + 1]}](table_{ids[i + 1].lower()}.md)")
    return " · ".join(parts)


def companion_rows(out: Path) -> list[dict[str, str]]:
    """Rows for the summary from the pages other rules wrote beside it: the ablation report
    (verdict-free) and the norms page (per-unit tables and figures of N1-N3, whose verdicts
    are registry claims like the rest). Nothing for a page that does not exist."""
    rows = []
    if (out / "norms.md").exists():
        rows.append({"id": "N1-N3 per unit", "paper": "companion claims",
                     "verdict": "see N1-N3 above", "detail": "N1-N3 per unit: tables, "
                     "premises and figures", "page": "norms.md"})
    if (out / "ablations.md").exists():
        rows.append({"id": "ablations", "paper": "not in the paper",
                     "verdict": VERDICT_FREE, "detail": "ablations (not in the paper): "
                     "tables with intervals", "page": "ablations.md"})
    if (out / "forecast.md").exists():
        rows.append({"id": "forecast", "paper": "the full paper run's cost",
                     "verdict": VERDICT_FREE, "detail": "device-hours per claim table from "
                     "this rehearsal's measured step times", "page": "forecast.md"})
    return rows


def with_forest_section(summary: str, forests: list[Path], out: Path) -> str:
    """``summary`` with the forest plots shown inline (Markdown images relative to the
    summary), before its provenance section."""
    if not forests:
        return summary
    block = ["## Forest plots", "",
             "Per claim: our mean and 95% interval for every setting x arm (blue), the paper's "
             "figure on the paper's own settings (orange diamond, or band for a range). The "
             "paper's settings and this profile's scale-model settings are drawn in separate "
             "panels, never on one axis.", ""]
    for f in forests:
        rel = f.relative_to(out).as_posix()
        block += [f"![forest plot {f.stem.split('_', 1)[1].upper()}]({rel})", ""]
    section = "\n".join(block)
    marker = "\n## Provenance\n"
    if marker in summary:
        return summary.replace(marker, "\n" + section + marker, 1)
    return summary + "\n" + section


def build_report(cfg: dict[str, Any] | Profile, *, claims_path: str | Path | None = None,
                 out_dir: str | Path | None = None, with_figures: bool = True,
                 only: list[str] | None = None, tables: bool = True, summary: bool = True,
                 forests: dict[str, str | Path] | None = None, draw_forests: bool = True
                 ) -> list[ClaimResult]:
    """Evaluate the claims on the profile's result files and write the report.

    Args:
        cfg: the workflow config of one profile (or its :class:`Profile`).
        claims_path: the registry (default ``cfg["claims"]``).
        out_dir: default ``{reports}/{profile}``.
        with_figures: draw ``figures/`` (summary only).
        only: claim ids to evaluate (a per-claim table rule); None = all.
        tables: write ``table_cN.md/.tex``.
        summary: write ``summary.md``, ``tables.tex``, ``claims.json`` and figures (needs
            every claim: ``only`` must be None).
        forests: ``{claim id: forest_<id>.png}`` the claim-table jobs drew from the same
            result files; copied into ``figures/`` instead of drawn again.
        draw_forests: False: the summary names the forest plots without drawing them (a
            bundle's verification compares the text only).

    Raises:
        FileNotFoundError: the registry is missing.
        ResultSchemaError (a ValueError): a result file lacks a key a claim needs; the
            message names the file and the key.
    """
    if summary and only is not None:
        raise ValueError("the summary lists every claim: call with only=None")
    prof = Profile.of(cfg)
    results = evaluate(prof, claims_path=claims_path, only=only)
    out = Path(out_dir) if out_dir else prof.report_dir
    out.mkdir(parents=True, exist_ok=True)
    if tables:
        write_tables(results, prof, out, claims_path)
    if not summary:
        return results
    info = _run_info(prof)
    tex_files = [f"table_{r.claim['id'].lower()}.tex" for r in results]
    (out / "tables.tex").write_text(latex_document(
        tex_files, f"WEINCE reproduction: claims at profile {prof.name}"))
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    made = _figures(prof, {r.claim["id"]: r for r in results}, fig_dir) if with_figures else []
    forests = (forest_figures(results, fig_dir, prof.name, drawn=forests, draw=draw_forests)
               if with_figures else [])
    scale = scale_items(prof.config)
    if is_rehearsal(prof.config):
        scale = [rehearsal_note(prof.config), *scale]
    elif data_note(prof.config):
        scale = [*scale, data_note(prof.config).removeprefix("; ")]
    text = summary_markdown(
        results, info, [str(p.relative_to(out)) for p in made], scale,
        companion_rows(out))
    (out / "summary.md").write_text(with_forest_section(text, forests, out))
    write_json(out / "claims.json", {
        "profile": prof.name,
        "claims": [{"id": r.claim["id"], "title": r.claim["title"], "verdict": r.verdict,
                    "reason": r.reason, "rule": r.rule, "attribution": r.attribution,
                    "primary_arm": r.claim["arms"]["primary"],
                    "arm_verdicts": r.arm_verdicts,
                    "result_provenance": r.provenance.describe()} for r in results],
    }, cfg=prof.config)
    return results
