"""Every call from the bundle into the report-building API, in one file.

The bundle must agree with the report on which result files a profile's tables read and on
which files the report writes; it asks the report code rather than listing them again. When
the report modules move, this file is the one to update.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.pipeline.targets import claim_inputs, figure_inputs, report_outputs
from weince.report.build import build_report

__all__ = ["report_inputs", "report_dir", "rebuilt_names", "rebuild"]


def report_inputs(prof: Profile, claims_path: str | Path) -> dict[Path, list[str]]:
    """Result file -> what reads it (claim ids, ``figures``): the inputs of the profile's
    claim tables and of the summary's figures, as the Snakemake report rules declare them."""
    readers: dict[Path, list[str]] = {}
    for claim in load_claims(claims_path)["claims"]:
        for p in claim_inputs(prof, claim):
            readers.setdefault(Path(p), []).append(claim["id"])
    for p in figure_inputs(prof):
        readers.setdefault(Path(p), []).append("figures")
    return readers


def report_dir(prof: Profile) -> Path:
    """``{reports}/{profile}``: where the report of ``prof`` is written."""
    return report_outputs(prof)["summary"].parent


def rebuilt_names(prof: Profile) -> list[str]:
    """Names (relative to the report folder) of the files :func:`rebuild` writes and the
    bundle compares: the summary, ``claims.json``, ``tables.tex``, every claim table and
    every claim file (``claims/<id>.json``)."""
    outs = report_outputs(prof)
    d = outs["summary"].parent
    return [str(p.relative_to(d)) for k, p in outs.items() if k != "figures"]


def rebuild(prof: Profile, claims_path: str | Path, out_dir: str | Path,
            draw: bool = False) -> list[Any]:
    """Rebuild every claim table and claim file, then the summary, ``claims.json`` and the
    figures from those claim files (as the workflow does: each verdict computed once), of
    ``prof`` into ``out_dir`` (the installed report code; no training, no torch). The forest plots,
    ~6 s of a ~8 s rebuild, are named in the summary but drawn only when ``draw`` (the
    rebuilt report is kept for its reader): the comparison reads text, never images."""
    return build_report(prof, claims_path=claims_path, out_dir=out_dir, with_figures=True,
                        draw_forests=draw)
