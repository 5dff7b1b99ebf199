"""One claim's computed result as a small JSON file: the verdict is computed once, by the job
that writes the claim's table, and everything downstream reads it from this file.

``{reports}/{profile}/claims/<id>.json`` holds the registry entry of the claim, its verdict
and reason, the rule in words, the verdict of every arm, the summary's **Ours** cell (and
the headline numbers behind it), the rows (each setting's estimates per arm, the result
files they came from) and the provenance of those result files. The summary (Markdown and
HTML), ``claims.json`` and the figures are built from these files
(:func:`weince.report.build.build_summary`), never from a second evaluation; a bundle's
verification rebuilds them with the installed code and compares them too.

    from weince.report.claim_file import write_claim_file, read_claim_file
    write_claim_file(result, "reports/default/claims/c3.json")
    record = read_claim_file("reports/default/claims/c3.json")
    record.verdict, record.ours
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weince.pipeline.layout import CLAIM_FILES
from weince.report.forest import has_forest
from weince.report.glance import headline
from weince.report.verdicts import ClaimResult, Row
from weince.utils.provenance import jsonable
from weince.utils.results import Provenance, write_json

__all__ = ["ClaimRecord", "CLAIM_FILE_FORMAT", "claim_file", "claim_record", "write_claim_file",
           "read_claim_file", "read_claim_files",
           "record_of"]

CLAIM_FILE_FORMAT = 1


def claim_file(report_dir: str | os.PathLike, claim_id: str) -> Path:
    """``{report_dir}/claims/<id>.json``: where a claim's computed result lives."""
    return Path(report_dir) / CLAIM_FILES / f"{claim_id.lower()}.json"


@dataclass(frozen=True)
class ClaimRecord:
    """A claim's result as read back from its file: what the summary, ``claims.json`` and
    the figures need, with no evaluation behind it."""

    claim: dict[str, Any]
    verdict: str
    reason: str
    rule: str
    attribution: str
    arm_verdicts: dict[str, str]
    notes: list[str]
    scale: str
    ours: str                   # the summary's Ours cell
    rows: list[dict[str, Any]]  # per setting: label, metric, paper_setting, cells per arm
    provenance: Provenance
    forest: bool                # the claim has a forest plot (a finite estimate to draw)
    headline: dict[str, Any] | None = None
    path: Path | None = field(default=None, compare=False)

    @property
    def id(self) -> str:
        return self.claim["id"]


def _estimate(e) -> dict[str, Any] | None:
    return None if e is None else jsonable(dataclasses.asdict(e))


def _row(row: Row) -> dict[str, Any]:
    return {
        "setting": row.setting.label(),
        "label": row.label,
        "metric": row.metric,
        "paper_setting": bool(row.paper_setting),
        "cells": {arm: {"estimate": _estimate(c.est),
                        "files": [str(p) for p in c.present],
                        "missing": [str(p) for p in c.missing],
                        "extra": jsonable(c.extra)}
                  for arm, c in row.cells.items()},
        "gains": {arm: _estimate(g) for arm, g in row.gains.items()},
        "verdicts": dict(row.verdicts),
        "reasons": dict(row.reasons),
    }


def claim_record(res: ClaimResult) -> dict[str, Any]:
    """The JSON-able content of ``res``'s claim file."""
    h = headline(res)
    p = res.provenance
    return {
        "format": CLAIM_FILE_FORMAT,
        "id": res.claim["id"],
        "verdict": res.verdict,
        "reason": res.reason,
        "rule": res.rule,
        "attribution": res.attribution,
        "arm_verdicts": dict(res.arm_verdicts),
        "notes": list(res.notes),
        "scale": res.scale,
        "ours": h.cell() if h is not None else "nothing ran",
        "headline": None if h is None else dataclasses.asdict(h),
        "forest": has_forest(res),
        "rows": [_row(r) for r in res.rows],
        "result_provenance": {"commits": sorted(p.commits),
                              "config_hashes": sorted(p.config_hashes),
                              "dates": sorted(p.dates), "files": p.files},
        "claim": jsonable(res.claim),
    }


def write_claim_file(res: ClaimResult, path: str | os.PathLike) -> Path:
    """Write ``res``'s claim file (no provenance block of its own: the file is a function
    of the result files, whose provenance it carries, so a rebuild compares equal)."""
    return write_json(path, claim_record(res), add_provenance=False)


def read_claim_file(path: str | os.PathLike) -> ClaimRecord:
    """The record of one claim file; a missing or malformed file is one line naming it and
    the rule that writes it."""
    path = Path(path)
    fix = "re-run the claim tables (`snakemake --forcerun claim_tables`, or `weince report`)"
    if not path.is_file():
        raise FileNotFoundError(f"claim file {path} does not exist; {fix}")
    try:
        d = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"claim file {path} is not valid JSON ({err}); {fix}") from err
    if not isinstance(d, dict) or d.get("format") != CLAIM_FILE_FORMAT:
        raise ValueError(f"claim file {path} is not a format-{CLAIM_FILE_FORMAT} claim file; "
                         f"{fix}")
    try:
        return _record(d, path)
    except (KeyError, TypeError) as err:
        raise ValueError(f"claim file {path} lacks key {err}; {fix}") from err


def _record(d: dict[str, Any], path: Path | None = None) -> ClaimRecord:
    p = d["result_provenance"]
    return ClaimRecord(
        claim=d["claim"], verdict=d["verdict"], reason=d["reason"], rule=d["rule"],
        attribution=d["attribution"], arm_verdicts=d["arm_verdicts"], notes=d["notes"],
        scale=d["scale"], ours=d["ours"], rows=d["rows"], forest=bool(d["forest"]),
        headline=d.get("headline"),
        provenance=Provenance(commits=set(p["commits"]), config_hashes=set(p["config_hashes"]),
                              dates=list(p["dates"]), files=int(p["files"])),
        path=path)


def record_of(res: ClaimResult) -> ClaimRecord:
    """The record ``res``'s claim file would hold, without the file (as read back: JSON
    values)."""
    return _record(json.loads(json.dumps(claim_record(res))))


def read_claim_files(report_dir: str | os.PathLike, ids: list[str]) -> list[ClaimRecord]:
    """The records of the claims ``ids`` (registry order) under ``report_dir``."""
    out = []
    for cid in ids:
        rec = read_claim_file(claim_file(report_dir, cid))
        if rec.id != cid:
            raise ValueError(f"claim file {rec.path} holds claim {rec.id}, not {cid}; re-run "
                             f"the claim tables")
        out.append(rec)
    return out
