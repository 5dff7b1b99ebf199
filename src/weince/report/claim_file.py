"""One claim's computed result as a small JSON file: the verdict is computed once, by the job
that writes the claim's table, and everything downstream reads it from this file.

``{reports}/{profile}/claims/<id>.json`` holds the registry entry of the claim, its verdict
and reason, the rule in words, the verdict of every arm, the summary's **Ours** cell (and
the headline numbers behind it), the rows (each setting's estimates per arm, the result
files they came from) and the provenance of those result files. The summary (Markdown and
HTML), ``claims.json`` and the figures are built from these files
(:func:`weince.report.build.build_summary`), never from a second evaluation; a bundle's
verification rebuilds them with the installed code and compares them too.

A claim file is bound to what it was computed from: ``inputs`` holds the SHA-256 of the
claim's registry entry (with the registry's ``alpha``) and of every result file the claim
reads (``null`` for one that did not exist), and ``digest`` the SHA-256 of the record
itself. :func:`read_claim_file` refuses a file whose content no longer matches its digest
(edited by hand), :func:`check_inputs` one whose registry entry or result files changed
since (stale); each in one line naming the file and the command that rebuilds it.

    from weince.report.claim_file import write_claim_file, read_claim_file
    write_claim_file(result, "reports/default/claims/c3.json", inputs)
    record = read_claim_file("reports/default/claims/c3.json")
    record.verdict, record.ours
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weince.pipeline.layout import CLAIM_FILES
from weince.pipeline.profile import Profile
from weince.pipeline.grid import selection_paths
from weince.pipeline.targets import claim_inputs
from weince.report.forest import has_forest
from weince.report.glance import headline
from weince.report.verdicts import ClaimResult, Row
from weince.utils.provenance import jsonable
from weince.utils.results import Provenance, write_json
from weince.utils.rerun import snakemake_command

__all__ = ["ClaimRecord", "CLAIM_FILE_FORMAT", "claim_file", "claim_record", "write_claim_file",
           "read_claim_file", "read_claim_files", "record_of", "record_digest",
           "registry_digest", "claim_input_digests", "check_inputs", "rebuild_hint"]

CLAIM_FILE_FORMAT = 2   # 2: bound to its inputs (``inputs``, ``digest``)
def rebuild_hint(path: str | os.PathLike | None = None) -> str:
    """How to make a claim file (of ``path``'s profile) again: the claim tables' command with
    the run's own arguments (:func:`weince.utils.rerun.snakemake_command`), or
    ``weince report``."""
    cmd = snakemake_command("--forcerun", "claim_tables", path=path)
    return f"re-run the claim tables ({cmd}, or `weince report`)"


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
    inputs: dict[str, Any] | None = None   # what it was computed from (see check_inputs)
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
        **({"reading": True} if row.reading else {}),   # no paper figure: no verdict
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


# ------------------------------------------------------------------ what it is bound to
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def record_digest(d: Mapping[str, Any]) -> str:
    """SHA-256 of a claim file's content, its ``digest`` key aside."""
    return _sha256(_canonical({k: v for k, v in d.items() if k != "digest"}))


def registry_digest(claim: Mapping[str, Any], alpha: float) -> str:
    """SHA-256 of one registry entry (as validated: defaults filled) and the registry's
    ``alpha``: everything of the registry its verdict depends on."""
    return _sha256(_canonical({"claim": jsonable(dict(claim)), "alpha": float(alpha)}))


def _file_digest(path: Path) -> str | None:
    try:
        return _sha256(path.read_bytes())
    except FileNotFoundError:
        return None


def _rel(path: Path, root: Path) -> str:
    """``path`` under the results root (so that a moved or unpacked results folder keeps
    its digests), else as given."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def claim_input_digests(prof: Profile, claim: Mapping[str, Any], alpha: float
                        ) -> dict[str, Any]:
    """What a claim's verdict is computed from at the profile ``prof``: the SHA-256 of its
    registry entry and of every result file it reads (the claim table rule's inputs: the
    files of its rows and the grid selections its page shows), each named under the
    results root, ``None`` for a file that does not exist."""
    root = prof.results
    files = [*claim_inputs(prof, claim), *selection_paths(prof, claim).values()]
    return {"root": root.as_posix(), "registry": registry_digest(claim, alpha),
            "files": {_rel(Path(f), root): _file_digest(Path(f))
                      for f in dict.fromkeys(Path(x) for x in files)}}


def check_inputs(record: ClaimRecord, claim: Mapping[str, Any], alpha: float,
                 root: str | os.PathLike | None = None) -> None:
    """Raise ``ValueError`` (one line naming the claim file, what changed and how to
    rebuild it) when the registry entry ``claim`` or a result file differs from what
    ``record`` was computed from; ``root``: the results root (default the one the file
    names)."""
    inputs = record.inputs or {}
    where = f"claim file {record.path or record.id}"
    if inputs.get("registry") != registry_digest(claim, alpha):
        raise ValueError(f"{where} was computed from another registry entry of "
                         f"{record.id} than the installed claims registry's (tolerance, rows "
                         f"or arms changed since); {rebuild_hint(record.path)}")
    base = Path(str(root if root is not None else inputs.get("root", "results")))
    changed = []
    for name, digest in (inputs.get("files") or {}).items():
        path = Path(name) if Path(name).is_absolute() else base / name
        now = _file_digest(path)
        if now != digest:
            state = ("appeared" if digest is None else "is gone" if now is None
                     else "changed")
            changed.append(f"{path} {state}")
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise ValueError(f"{where} is stale: {changed[0]}{more} since the claim tables "
                         f"computed it; {rebuild_hint(record.path)}")


def write_claim_file(res: ClaimResult, path: str | os.PathLike,
                     inputs: dict[str, Any] | None = None) -> Path:
    """Write ``res``'s claim file, bound to ``inputs`` (:func:`claim_input_digests`) and
    sealed with the digest of its content (no provenance block of its own: the file is a
    function of the result files, whose provenance it carries, so a rebuild compares
    equal)."""
    d = json.loads(json.dumps(jsonable({**claim_record(res), "inputs": inputs})))
    d["digest"] = record_digest(d)   # of the content as it will be read back
    return write_json(path, d, add_provenance=False)


def read_claim_file(path: str | os.PathLike) -> ClaimRecord:
    """The record of one claim file; a missing, malformed or hand-edited file (its content
    no longer the digest it was written with) is one line naming it and the rule that
    writes it."""
    path = Path(path)
    fix = rebuild_hint(path)
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
        sealed = d.get("digest") == record_digest(d)
    except (TypeError, ValueError):
        sealed = False
    if not sealed:
        raise ValueError(f"claim file {path} was edited after the claim tables wrote it (its "
                         f"content no longer matches its digest): its verdict is not "
                         f"trusted; {fix}")
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
        headline=d.get("headline"), inputs=d.get("inputs"),
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
