"""Build a profile's report: every claim's table (Markdown + LaTeX), the summary and the
figures, from the claims registry and the result files.

    from weince.report import build_report
    results = build_report(cfg)      # cfg: the workflow config of one profile (a dict)

Writes ``{reports}/{profile}/``: ``summary.md``, ``table_c1.md`` ... ``table_c9.md`` and
``.tex``, ``tables.tex`` (a standalone document that inputs every table), ``claims.json``
(the verdicts, machine-readable) and ``figures/``.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from weince.report import figures as figs
from weince.report.forest import forest_figures
from weince.report import layout
from weince.report.registry import load_claims
from weince.report.tables import (claim_latex, claim_markdown, latex_document,
                                  summary_markdown)
from weince.report.verdicts import ClaimResult, Setting, evaluate_claim
from weince.utils import config_hash, write_json
from weince.utils.provenance import git_commit

__all__ = ["build_report", "evaluate", "write_tables", "settings_for", "files_for", "scale_line",
           "report_outputs", "claim_inputs", "figure_inputs"]


def _results_root(cfg: dict[str, Any]) -> Path:
    return Path(cfg.get("results", "results"))


def settings_for(cfg: dict[str, Any], stage: str) -> tuple[list[Setting], list[str]]:
    """The settings of ``stage`` the profile runs, and the arms it runs there."""
    if stage == "vision":
        return ([Setting("vision", dataset=d, backbone=b) for d, b in layout.vision_pairs(cfg)],
                list((cfg.get("vision") or {}).get("arms", [])))
    if stage == "text":
        t = cfg.get("text") or {}
        if not t.get("enabled", True):
            return [], []
        return ([Setting("text", model=m, corpus=t.get("corpus", "?"))
                 for m in t.get("models", [])], list(t.get("arms", [])))
    if stage == "timing":
        t = cfg.get("timing") or {}
        tc = t.get("config") or {}
        return ([Setting("timing", backbone=tc.get("backbone") or "none")]
                if t.get("enabled", False) else [],
                list(tc.get("losses", ["infonce", "weince", "weince_recipe"])))
    if stage == "checks":
        c = cfg.get("checks") or {}
        return ([Setting("checks")] if c.get("enabled", True) else [], ["weince"])
    raise ValueError(f"unknown stage {stage!r}; valid: vision, text, timing, checks")


EVT_FILES = ("pot.json", "link.json", "scores.npz")


def files_for(cfg: dict[str, Any]):
    """``(setting, arm, file name) -> [paths]``: one path per encoder seed of the profile
    (an empty list when the profile does not produce that file for that arm)."""
    root, profile = _results_root(cfg), cfg["profile"]

    def f(setting: Setting, arm: str, name: str) -> list[Path]:
        if setting.stage == "vision":
            v = cfg.get("vision") or {}
            if arm not in v.get("arms", []):
                return []
            if name in EVT_FILES and arm not in (v.get("evt") or {}).get("arms", []):
                return []
            return [layout.VisionRun(setting.dataset, setting.backbone, arm, int(s))
                    .dir(root, profile) / name for s in v.get("seeds", [])]
        if setting.stage == "text":
            t = cfg.get("text") or {}
            if arm not in t.get("arms", []):
                return []
            return [layout.TextRun(setting.model, arm, int(s)).dir(root, profile) / name
                    for s in t.get("seeds", [])]
        if setting.stage == "timing":
            return [Path(layout.TIMING.format(results=root, profile=profile)) / name]
        if setting.stage == "checks":
            return [Path(layout.CHECKS.format(results=root, profile=profile)) / name]
        return []

    return f


def scale_line(cfg: dict[str, Any], stage: str) -> str:
    """One line on the scale a stage ran at: profile, data, model, epochs, seeds."""
    p = cfg["profile"]
    if stage == "vision":
        v = cfg.get("vision") or {}
        pre = v.get("pretrain") or {}
        g = v.get("grid") or {}
        grid = (f"; grid of {len(layout.grid_points(g))} point(s) for "
                f"{', '.join(g.get('arms', []))} chosen on val" if g.get("arms") else "")
        return (f"profile {p}: {', '.join(v.get('datasets', [])) or 'none'} x "
                f"{', '.join(v.get('backbones', [])) or 'none'}, "
                f"{pre.get('epochs', '?')} epoch(s), batch {pre.get('batch_size', '?')}, "
                f"encoder seeds {', '.join(map(str, v.get('seeds', [])))}{grid}")
    if stage == "text":
        t = cfg.get("text") or {}
        s = t.get("simcse") or {}
        data = t.get("corpus", "?") + (" (SYNTHETIC sentences and pairs, a pipeline check, "
                                       "not STS-B)" if t.get("corpus") == "synthetic" else "")
        return (f"profile {p}: {', '.join(t.get('models', []))} on {data}, "
                f"{s.get('epochs', '?')} epoch(s), batch {s.get('batch_size', '?')}, "
                f"encoder seeds {', '.join(map(str, t.get('seeds', [])))}")
    if stage == "timing":
        t = (cfg.get("timing") or {}).get("config") or {}
        mode = {"both": "compiled (eager timed too)", True: "compiled", False: "eager"}.get(
            t.get("compile", "eager"), t.get("compile", "eager"))
        return (f"profile {p}: timing on device {t.get('device', cfg.get('device', 'auto'))}, "
                f"whole step with backbone {t.get('backbone', '?')} at "
                f"{t.get('image_size', '?')} px, 2 x {t.get('step_batch', '?')} views, "
                f"loss {mode}")
    return f"profile {p}"


def report_outputs(cfg: dict[str, Any]) -> dict[str, Path]:
    """The files :func:`build_report` writes (for the Snakemake rule's ``output:``)."""
    d = Path(layout.REPORT.format(reports=cfg.get("reports", "reports"), profile=cfg["profile"]))
    out = {"summary": d / "summary.md", "claims_json": d / "claims.json",
           "tables_tex": d / "tables.tex", "figures": d / "figures"}
    for i in range(1, 10):
        out[f"c{i}_md"] = d / f"table_c{i}.md"
        out[f"c{i}_tex"] = d / f"table_c{i}.tex"
    return out


def _figures(cfg: dict[str, Any], results: dict[str, ClaimResult], fig_dir: Path) -> list[Path]:
    made: list[Path] = []
    root, profile = _results_root(cfg), cfg["profile"]
    v = cfg.get("vision") or {}
    weince_arms = [a for a in v.get("arms", []) if a.startswith("weince")]
    for d, b in layout.vision_pairs(cfg):
        logs = {a: [layout.VisionRun(d, b, a, int(s)).dir(root, profile) / "train_log.jsonl"
                    for s in v.get("seeds", [])] for a in weince_arms}
        f = figs.lambda_training_figure(logs, fig_dir / f"lambda_training_{d}_{b}.png",
                                        f"lambda over training, {d} / {b} (profile {profile})")
        if f:
            made.append(f)
        evt_arms = (v.get("evt") or {}).get("arms", [])
        if evt_arms and v.get("seeds"):
            run = layout.VisionRun(d, b, evt_arms[0], int(v["seeds"][0])).dir(root, profile)
            made += figs.collect_evt_figures(run, fig_dir / "evt", f"{d}_{b}_{evt_arms[0]}")
    t = cfg.get("text") or {}
    if t.get("enabled", True):
        for m in t.get("models", []):
            logs = {a: [layout.TextRun(m, a, int(s)).dir(root, profile) / "train_log.jsonl"
                        for s in t.get("seeds", [])]
                    for a in t.get("arms", []) if a.startswith("weince")}
            f = figs.lambda_training_figure(logs, fig_dir / f"lambda_training_text_{m}.png",
                                            f"lambda over training, SimCSE {m} "
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


def claim_inputs(cfg: dict[str, Any], claim: dict[str, Any]) -> list[Path]:
    """Every result file one claim reads at this profile (the inputs of its table rule)."""
    settings, arms = settings_for(cfg, claim["stage"])
    fetch = files_for(cfg)
    a = claim["arms"]
    shown = list(dict.fromkeys(x for x in [a.get("baseline"), a["primary"], *a.get("others", [])]
                               if x))
    if claim["kind"] == "overhead" and a.get("baseline") in shown:
        shown.remove(a["baseline"])
    out: list[Path] = []
    for s in settings:
        for arm in shown:
            if claim["stage"] in ("vision", "text") and arm not in arms:
                continue
            out += fetch(s, arm, claim["file"])
    return list(dict.fromkeys(out))


def figure_inputs(cfg: dict[str, Any]) -> list[Path]:
    """Training logs the summary's lambda-over-training figures read."""
    root, profile = _results_root(cfg), cfg["profile"]
    v = cfg.get("vision") or {}
    out = [layout.VisionRun(d, b, a, int(s)).dir(root, profile) / "train_log.jsonl"
           for d, b in layout.vision_pairs(cfg) for a in v.get("arms", [])
           if a.startswith("weince") for s in v.get("seeds", [])]
    t = cfg.get("text") or {}
    if t.get("enabled", True):
        out += [layout.TextRun(m, a, int(s)).dir(root, profile) / "train_log.jsonl"
                for m in t.get("models", []) for a in t.get("arms", []) if a.startswith("weince")
                for s in t.get("seeds", [])]
    return out


def evaluate(cfg: dict[str, Any], *, claims_path: str | Path | None = None,
             only: list[str] | None = None) -> list[ClaimResult]:
    """Evaluate the registry's claims (or those in ``only``) on the profile's results."""
    if "profile" not in cfg:
        raise ValueError("config has no 'profile' key (e.g. profile: default)")
    reg = load_claims(claims_path or cfg.get("claims", "config/claims.yaml"))
    alpha = float(reg.get("alpha", 0.05))
    if only is not None:
        ids = [c["id"] for c in reg["claims"]]
        bad = [i for i in only if i not in ids]
        if bad:
            raise ValueError(f"unknown claim id(s) {bad}; the registry has {ids}")
    fetch = files_for(cfg)
    results: list[ClaimResult] = []
    for claim in reg["claims"]:
        if only is not None and claim["id"] not in only:
            continue
        settings, arms = settings_for(cfg, claim["stage"])
        results.append(evaluate_claim(claim, settings, arms, fetch, alpha=alpha,
                                      scale=scale_line(cfg, claim["stage"])))
    return results


def _run_info(cfg: dict[str, Any]) -> dict[str, str]:
    commit = git_commit()
    return {
        "profile": cfg["profile"],
        "config_hash": config_hash(cfg),
        "built": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit[:12] + ("+dirty" if commit.endswith("+dirty") else ""),
    }


def write_tables(results: list[ClaimResult], cfg: dict[str, Any], out: Path) -> list[Path]:
    """``table_cN.md`` and ``table_cN.tex`` for each claim result."""
    out.mkdir(parents=True, exist_ok=True)
    info = _run_info(cfg)
    written = []
    for res in results:
        stem = f"table_{res.claim['id'].lower()}"
        (out / f"{stem}.md").write_text(claim_markdown(res, info))
        (out / f"{stem}.tex").write_text(claim_latex(res, info))
        written += [out / f"{stem}.md", out / f"{stem}.tex"]
    return written


def companion_rows(out: Path) -> list[dict[str, str]]:
    """Rows for the summary from the pages that other rules wrote beside it: the companion
    claims N1-N3 (``norms_summary.json``, verdicts computed by ``weince.norms``) and a link
    to the ablation report. Nothing for a page that does not exist."""
    import json

    rows = []
    norms = out / "norms_summary.json"
    if norms.exists():
        for cid, c in sorted(json.loads(norms.read_text()).get("claims", {}).items()):
            rows.append({"id": cid, "paper": str(c.get("paper", "")).replace("|", "\\|"),
                         "verdict": c.get("verdict", "missing"),
                         "detail": f"{c.get('n_reproduced', 0)} of {c.get('n_testable', 0)} "
                                   f"testable units reproduced",
                         "page": "norms.md"})
    if (out / "ablations.md").exists():
        rows.append({"id": "ablations", "paper": "not in the paper (issue 9)",
                     "verdict": "verdict-free", "detail": "tables with intervals",
                     "page": "ablations.md"})
    return rows


def with_forest_section(summary: str, forests: list[Path], out: Path) -> str:
    """``summary`` with the forest plots shown inline (Markdown images relative to the
    summary), before its provenance section."""
    if not forests:
        return summary
    block = ["## Claims at a glance", "",
             "Per claim: our mean and 95% interval for every setting x arm (blue), the paper's "
             "figure (orange diamond, or band for a range).", ""]
    for f in forests:
        rel = f.relative_to(out).as_posix()
        block += [f"![forest plot {f.stem.split('_', 1)[1].upper()}]({rel})", ""]
    section = "\n".join(block)
    marker = "\n## Provenance\n"
    if marker in summary:
        return summary.replace(marker, "\n" + section + marker, 1)
    return summary + "\n" + section


def build_report(cfg: dict[str, Any], *, claims_path: str | Path | None = None,
                 out_dir: str | Path | None = None, with_figures: bool = True,
                 only: list[str] | None = None, tables: bool = True, summary: bool = True
                 ) -> list[ClaimResult]:
    """Evaluate the claims on the profile's result files and write the report.

    Args:
        cfg: the workflow config of one profile.
        claims_path: the registry (default ``cfg["claims"]``).
        out_dir: default ``{reports}/{profile}``.
        with_figures: draw ``figures/`` (summary only).
        only: claim ids to evaluate (a per-claim table rule); None = all.
        tables: write ``table_cN.md/.tex``.
        summary: write ``summary.md``, ``tables.tex``, ``claims.json`` and figures (needs
            every claim: ``only`` must be None).

    Raises:
        FileNotFoundError: the registry is missing.
        ResultSchemaError (a ValueError): a result file lacks a key a claim needs; the
            message names the file and the key.
    """
    if summary and only is not None:
        raise ValueError("the summary lists every claim: call with only=None")
    results = evaluate(cfg, claims_path=claims_path, only=only)
    out = Path(out_dir) if out_dir else report_outputs(cfg)["summary"].parent
    out.mkdir(parents=True, exist_ok=True)
    if tables:
        write_tables(results, cfg, out)
    if not summary:
        return results
    info = _run_info(cfg)
    tex_files = [f"table_{r.claim['id'].lower()}.tex" for r in results]
    (out / "tables.tex").write_text(latex_document(
        tex_files, f"WEINCE reproduction: claims at profile {cfg['profile']}"))
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    made = _figures(cfg, {r.claim["id"]: r for r in results}, fig_dir) if with_figures else []
    forests = forest_figures(results, fig_dir, cfg["profile"]) if with_figures else []
    scale = "; ".join(dict.fromkeys(scale_line(cfg, s) for s in ("vision", "text")))
    text = summary_markdown(
        results, info, [str(p.relative_to(out)) for p in made], scale, companion_rows(out))
    (out / "summary.md").write_text(with_forest_section(text, forests, out))
    write_json(out / "claims.json", {
        "profile": cfg["profile"],
        "claims": [{"id": r.claim["id"], "title": r.claim["title"], "verdict": r.verdict,
                    "reason": r.reason, "primary_arm": r.claim["arms"]["primary"],
                    "arm_verdicts": r.arm_verdicts,
                    "result_provenance": r.provenance.describe()} for r in results],
    }, cfg=cfg)
    return results
