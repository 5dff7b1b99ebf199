"""Build a profile's report from the claims registry and the result files, in two steps.

1. :func:`build_report` evaluates each claim once and writes its table (``table_<id>.md`` and
   ``.tex``) and its claim file (``claims/<id>.json``: verdict, rows, Ours cell, rule text,
   provenance; :mod:`weince.report.claim_file`).
2. :func:`build_summary` writes ``summary.md``, ``tables.tex`` (a standalone document that
   inputs every table), ``claims.json`` (the verdicts, machine-readable) and ``figures/``
   from the claim files alone: it never evaluates a claim.

    from weince.report import build_report
    results = build_report(Profile.of(cfg))   # cfg: the workflow config of one profile

The workflow runs step 1 in its ``claim_tables`` job and step 2 in its ``report`` job;
``weince report`` and a bundle's verification run both, one after the other. Both take the
resolved :class:`weince.pipeline.profile.Profile`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import weince
from weince.cost.pages import rest_line
from weince.pipeline.claims import load_claims
from weince.pipeline.layout import (VisionRun, files_for, norms_text_runs, norms_vision_runs,
                                    run_dir, summary_logs)
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import protocol_options
from weince.pipeline.targets import claim_settings
from weince.report import figures as figs
from weince.report.claim_file import (ClaimRecord, check_inputs, claim_file,
                                      claim_input_digests, read_claim_files, write_claim_file)
from weince.report.forest import forest_figure
from weince.report.glance import claim_notes, pairs_text, scale_items
from weince.data.marker import data_note
from weince.report.rehearsal import rehearsal_note, text_identity, withhold_verdicts
from weince.report.curves import claim_curves, curves_name, curves_section
from weince.report.grid import selection_section
from weince.report.tables import (claim_latex, claim_markdown, latex_document,
                                  summary_markdown)
from weince.report.verdicts import ClaimResult, evaluate_claim
from weince.utils import write_json
from weince.utils.results import load_result
from weince.utils.config import parse_yaml
from weince.utils.diskspace import write_text
from weince.utils.provenance import git_commit
from weince.utils.verdict_words import VERDICT_FREE
from weince.utils.rerun import snakemake_command

__all__ = ["build_report", "build_summary", "rest_of_paper", "evaluate", "write_tables",
           "scale_line", "companion_rows"]


def scale_line(prof: Profile, stage: str) -> str:
    """One line on the scale a stage ran at: profile, data, model, epochs, seeds; a
    rehearsal's (and a run on synthetic files') says so first."""
    line = _scale_line(prof, stage)
    if prof.rehearsal.enabled and stage != "synthetic":   # C11 runs its own setting
        return f"{rehearsal_note(prof.data_root)}. {line}"
    return line + data_note(prof.data_root)


def _scale_line(prof: Profile, stage: str) -> str:
    p = prof.name
    if stage == "vision":
        v = prof.vision
        pre = v.pretrain
        grid = (f"; grid of {len(v.grid.points)} point(s) for "
                f"{', '.join(v.grid.arms)} chosen on val" if v.grid.arms else "")
        opts = protocol_options(prof)
        return (f"profile {p}: {pairs_text(prof)}, "
                f"{pre.epochs} epoch(s), batch {pre.batch_size}, "
                f"encoder seeds {', '.join(map(str, v.seeds))}{grid}; "
                + (f"options off the official protocol: {'; '.join(opts)}" if opts else
                   "official protocol (docs/protocol.md)"))
    if stage == "text":
        t = prof.text
        s = t.simcse
        data = t.corpus + (" (SYNTHETIC sentences and graded pairs made by the "
                           "project, a pipeline check; not wiki1m, not the STS "
                           "benchmark)" if t.corpus == "synthetic" else "")
        return (f"profile {p}: {', '.join(t.models)} on {data}, "
                f"{s.epochs} epoch(s), batch {s.batch_size}, "
                f"encoder seeds {', '.join(map(str, t.seeds))}")
    if stage == "timing":
        tc = prof.timing.config
        mode = {"both": "compiled (eager timed too)"}.get(str(tc.compile), str(tc.compile))
        return (f"profile {p}: timing on device {tc.device}, "
                f"whole step with backbone {tc.backbone} at "
                f"{tc.image_size} px, 2 x {tc.step_batch} views, loss {mode}")
    if stage == "synthetic":
        nf = prof.noise_floor
        return (f"profile {p}: the paper's synthetic setting (numpy, no training), "
                f"{nf.replicates} replicates at each n in "
                f"{', '.join(map(str, nf.sample_sizes))}, seed {nf.seed}")
    if stage == "norms":
        a = prof.norms.analysis
        return (f"profile {p}: embedding norms of {len(norms_vision_runs(prof))} vision "
                f"and {len(norms_text_runs(prof))} text unit(s), {a.n_probes} "
                f"probes, {a.resamples} minibatch resamplings (docs/norms.md)")
    return f"profile {p}"


def _figures(prof: Profile, records: dict[str, ClaimRecord], fig_dir: Path) -> list[Path]:
    made: list[Path] = []
    profile, evt_arms = prof.name, prof.vision.evt.arms
    seeds = prof.vision.seeds
    logs = summary_logs(prof)
    for d, b in prof.vision.pairs:
        stem = f"lambda_training_{d}_{b}"
        f = figs.training_curves_figure(figs.training_curves(logs.pop(stem)),
                                        fig_dir / f"{stem}.png",
                                        f"lambda over training, {d} / {b} (profile {profile})")
        if f:
            made.append(f)
        if evt_arms and seeds:
            run = run_dir(prof, VisionRun(d, b, evt_arms[0], int(seeds[0])))
            made += figs.collect_evt_figures(run, fig_dir / "evt", f"{d}_{b}_{evt_arms[0]}")
    for stem, text_logs in logs.items():   # the text models'
        f = figs.training_curves_figure(
            figs.training_curves(text_logs), fig_dir / f"{stem}.png",
            f"lambda over training, SimCSE {stem.removeprefix('lambda_training_text_')} "
            f"(profile {profile})")
        if f:
            made.append(f)
    for rec in records.values():   # C11: the paper's synthetic figure, from its file
        if rec.claim.get("kind") != "noise_floor":
            continue
        files = [p for row in rec.rows for c in row["cells"].values() for p in c["files"]]
        if files:
            made.append(figs.noise_floor_figure(
                load_result(files[0]), fig_dir / f"{rec.claim['id'].lower()}_noise_floor.png",
                f"{rec.claim['id']}: Weibit removes the softmax's error floor "
                f"(profile {profile})"))
    for cid, ylabel, ref in (("C1", "xi (POT/GPD)", -0.39), ("C2", "lambda_hat (link)",
                                                                (0.33, 0.50))):
        est_rec = records.get(cid)
        if est_rec is None:
            continue
        pts: list[tuple[str, float, float | None, float | None]] = []
        for row in est_rec.rows:
            for arm, cell in row["cells"].items():
                values = (cell["estimate"] or {}).get("values") or []
                for path, val in zip(cell["files"], values):
                    seed = Path(path).parent.name
                    pts.append((f"{row['setting']} {arm} {seed}", val, None, None))
        f = figs.estimates_figure(pts, fig_dir / f"{cid.lower()}_estimates.png", ylabel,
                                  f"{cid}: one point per encoder (profile {profile})", ref)
        if f:
            made.append(f)
    return made


def evaluate(prof: Profile, *, claims_path: str | Path | None = None,
             only: list[str] | None = None) -> list[ClaimResult]:
    """Evaluate the registry's claims (or those in ``only``) on the profile's results."""
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
        settings, arms = claim_settings(prof, claim)
        # a text setting is judged only when the weights that ran are the named model
        settings, claim_files = text_identity(settings, arms, files_for(prof),
                                              prof.text.model_paths)
        res = evaluate_claim(claim, settings, arms, claim_files, alpha=alpha,
                             scale=scale_line(prof, claim["stage"]))
        if prof.rehearsal.enabled:
            res = withhold_verdicts(res)
        res.notes = claim_notes(prof, claim)
        results.append(res)
    return results


def _run_info(prof: Profile) -> dict[str, str]:
    commit = git_commit()
    return {
        "profile": prof.name,
        "config_hash": prof.config_hash,
        "built": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "git_commit": commit[:12] + ("+dirty" if commit.endswith("+dirty") else ""),
    }


def write_tables(results: list[ClaimResult], prof: Profile, out: Path,
                 claims_path: str | Path | None = None) -> list[Path]:
    """``table_cN.md``, ``table_cN.tex`` and the claim file ``claims/cN.json`` for each
    claim result; ``claims_path``: the registry the results came from (default the
    profile's), for the page navigation."""
    out.mkdir(parents=True, exist_ok=True)
    info = _run_info(prof)
    reg = load_claims(claims_path or prof.claims)
    entries = {c["id"]: c for c in reg["claims"]}
    ids = list(entries)
    written = []
    for res in results:
        cid = res.claim["id"]
        stem = f"table_{cid.lower()}"
        write_text(out / f"{stem}.md", claim_markdown(res, info, claim_nav(ids, cid))
                   + selection_section(prof, res.claim) + curves_section(prof, res.claim))
        write_text(out / f"{stem}.tex", claim_latex(res, info))
        # the claim file, bound to the registry entry and the result files it came from
        inputs = claim_input_digests(prof, entries[cid], reg.get("alpha", 0.05))
        written += [out / f"{stem}.md", out / f"{stem}.tex",
                    write_claim_file(res, claim_file(out, cid), inputs)]
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


def build_report(prof: Profile, *, claims_path: str | Path | None = None,
                 out_dir: str | Path | None = None, with_figures: bool = True,
                 only: list[str] | None = None, summary: bool = True,
                 draw_forests: bool = True) -> list[ClaimResult]:
    """Evaluate the claims on the profile's result files, write each one's table and claim
    file and (``summary``) the summary built from those files.

    Args:
        prof: the profile (:meth:`Profile.of` of its workflow config).
        claims_path: the registry (default the profile's).
        out_dir: default ``{reports}/{profile}``.
        with_figures: draw ``figures/`` (summary only), the forest plots and the training
            curves (``curves_<id>.png``) included.
        only: claim ids to evaluate; None = all.
        summary: then write the summary (:func:`build_summary`; needs every claim: ``only``
            must be None).
        draw_forests: False: the summary names the forest plots without drawing them (a
            bundle's verification compares the text only).

    Raises:
        FileNotFoundError: the registry is missing.
        ResultSchemaError (a ValueError): a result file lacks a key a claim needs; the
            message names the file and the key.
    """
    if summary and only is not None:
        raise ValueError("the summary lists every claim: call with only=None")
    results = evaluate(prof, claims_path=claims_path, only=only)
    out = Path(out_dir) if out_dir else prof.report_dir
    out.mkdir(parents=True, exist_ok=True)
    write_tables(results, prof, out, claims_path)
    if not summary:
        return results
    drawn: dict[str, Path] = {}
    if with_figures and draw_forests:
        for r in results:
            f = forest_figure(r, out / "figures" / f"forest_{r.claim['id'].lower()}.png",
                              prof.name)
            if f is not None:
                drawn[r.claim["id"]] = f
            claim_curves(prof, r.claim, out / "figures")
    _write_summary(prof, claims_path=claims_path, out=out, with_figures=with_figures,
                   forests=drawn, draw_forests=draw_forests)
    return results


def _forest_paths(records: list[ClaimRecord], fig_dir: Path,
                  drawn: Mapping[str, str | Path] | None, draw: bool) -> list[Path]:
    """``figures/forest_<id>.png`` of every claim whose file says it has a forest plot:
    the plot its table job drew, copied (``draw``), or only named (a bundle's check)."""
    made = []
    for rec in records:
        if not rec.forest:
            continue
        out = fig_dir / f"forest_{rec.id.lower()}.png"
        if draw:
            src = Path((drawn or {}).get(rec.id, out))
            if not src.is_file():
                raise FileNotFoundError(
                    f"the forest plot of {rec.id} ({src}) is missing: the claim tables draw "
                    f"it; re-run them ({snakemake_command('--forcerun', 'claim_tables', path=src)}"
                    f" or `weince report`)")
            if src.resolve() != out.resolve():
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, out)
        made.append(out)
    return made


def copy_curves(curves: Mapping[str, str | Path] | None, fig_dir: Path) -> list[Path]:
    """``figures/curves_<id>.png``: each claim's training curves as its table job drew them
    (``curves``: claim id -> that file; a claim whose rows train nothing has none)."""
    made = []
    for cid, src in sorted((curves or {}).items()):
        out = fig_dir / curves_name(cid)
        if Path(src).is_file() and Path(src).resolve() != out.resolve():
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
            made.append(out)
    return made


def build_summary(prof: Profile, *, claims_path: str | Path | None = None,
                  out_dir: str | Path | None = None, with_figures: bool = True,
                  forests: dict[str, str | Path] | None = None, draw_forests: bool = True,
                  curves: Mapping[str, str | Path] | None = None) -> list[ClaimRecord]:
    """Write ``summary.md``, ``tables.tex``, ``claims.json`` and ``figures/`` from the claim
    files that :func:`build_report` wrote (``{out_dir}/claims/<id>.json``, one per claim of
    the registry). No claim is evaluated here.

    ``forests``: ``{claim id: forest_<id>.png}`` as the claim tables drew them, copied into
    ``figures/``; ``draw_forests`` False: named in the summary, not copied. ``curves``:
    ``{claim id: curves_<id>.png}`` as the claim tables drew them, copied into ``figures/``
    (where each claim's table page shows them).

    Raises:
        FileNotFoundError / ValueError: a claim file is missing or malformed, was edited
            after the claim tables wrote it, or is stale (its registry entry or a result
            file changed since); the message names it and the rule that writes it.
    """
    out = Path(out_dir) if out_dir else prof.report_dir
    if with_figures and draw_forests:
        copy_curves(curves, out / "figures")
    return _write_summary(prof, claims_path=claims_path, out=out, with_figures=with_figures,
                          forests=forests, draw_forests=draw_forests)


def rest_of_paper(claims_path: str | os.PathLike,
                  paper_config: str | os.PathLike | None = None) -> str | None:
    """The line on what reproducing the paper's training claims takes
    (:func:`weince.cost.pages.rest_line`), priced on the paper profile with the registry
    ``claims_path``. The profile: ``paper_config``, else the checkout's ``config/paper.yaml``
    (the one the summary was built beside, and a bundle's rebuild from the same code reads),
    else the one a results bundle keeps beside its registry; None where there is none."""
    folder = Path(claims_path).parent
    found = ([Path(paper_config)] if paper_config is not None else
             [Path(weince.__file__).resolve().parents[2] / "config" / "paper.yaml",
              Path("config") / "paper.yaml", folder / "paper.yaml",
              folder / "config" / "paper.yaml"])
    for paper in found:
        if paper.is_file():   # priced with this registry (a bundle keeps it off config/)
            prof = Profile.of(parse_yaml(paper.read_text(), str(paper)) or {})
            return rest_line(dataclasses.replace(prof, claims=Path(claims_path)))
    return None


def _write_summary(prof: Profile, *, claims_path: str | Path | None, out: Path,
                   with_figures: bool, forests: Mapping[str, str | Path] | None,
                   draw_forests: bool) -> list[ClaimRecord]:
    out.mkdir(parents=True, exist_ok=True)
    reg = load_claims(claims_path or prof.claims)
    ids = [c["id"] for c in reg["claims"]]
    records = read_claim_files(out, ids)   # a hand-edited claim file is refused there
    for rec, entry in zip(records, reg["claims"]):   # and a stale one here
        check_inputs(rec, entry, reg.get("alpha", 0.05), root=prof.results)
    info = _run_info(prof)
    tex_files = [f"table_{r.id.lower()}.tex" for r in records]
    write_text(out / "tables.tex", latex_document(
        tex_files, f"WEINCE reproduction: claims at profile {prof.name}"))
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    made = _figures(prof, {r.id: r for r in records}, fig_dir) if with_figures else []
    forest_pngs = _forest_paths(records, fig_dir, forests, draw_forests) if with_figures else []
    scale = scale_items(prof)
    if prof.rehearsal.enabled:
        scale = [rehearsal_note(prof.data_root), *scale]
    elif data_note(prof.data_root):
        scale = [*scale, data_note(prof.data_root).removeprefix("; ")]
    text = summary_markdown(
        records, info, [str(p.relative_to(out)) for p in made], scale,
        companion_rows(out), rest=rest_of_paper(claims_path or prof.claims))
    write_text(out / "summary.md", with_forest_section(text, forest_pngs, out))
    write_json(out / "claims.json", {
        "profile": prof.name,
        "claims": [{"id": r.id, "title": r.claim["title"], "verdict": r.verdict,
                    "reason": r.reason, "rule": r.rule, "attribution": r.attribution,
                    "primary_arm": r.claim["arms"]["primary"],
                    "arm_verdicts": r.arm_verdicts,
                    "result_provenance": r.provenance.describe()} for r in records],
    }, cfg=prof.config)
    return records
