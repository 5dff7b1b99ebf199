"""``weince bundle --with-audit``: the training states of the audit segments
(:mod:`weince.train.audit`) of every run that feeds a verdict row, so that a reviewer can
replay them (``weince verify --retrain N``, :mod:`weince.bundle.retrain`).

A run feeds a verdict row when a file in its folder is an input of a claim table or of the
summary's figures (the report's own list, :func:`weince.bundle._report.report_inputs`). Of
each such run the bundle takes the start and end state of every segment its ``train.json``
names (``audit.segments``), nothing else of ``audit/``; the total size is printed before
the archive is written. No torch: the files are copied as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from weince.utils.diskspace import human_bytes

__all__ = ["ROLE", "feeding_runs", "segment_files", "audit_files", "state_folder"]

ROLE = "training audit state"


def _summary(run: Path) -> dict[str, Any]:
    try:
        data = json.loads((run / "train.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def feeding_runs(res_dir: Path, readers: Iterable[Path]) -> list[Path]:
    """The training run folders under ``res_dir`` (a ``train.json`` there) that hold a file
    the report reads."""
    read = {Path(p).resolve().parent for p in readers}
    return sorted(p.parent for p in res_dir.rglob("train.json")
                  if p.parent.resolve() in read)


def state_folder(run: Path) -> Path:
    """Where a run's audit states are: its own folder, or, for the final grid arm's run that
    adopted a grid point's run (``selected_point`` in its ``linear.json``; its encoder and
    ``train.json`` are that run's), the point's folder ``<arm>@<point>/seedN`` beside it."""
    if (run / "audit").is_dir():
        return run
    try:
        point = json.loads((run / "linear.json").read_text()).get("selected_point")
    except (OSError, ValueError, AttributeError):
        point = None
    if isinstance(point, str) and point:
        source = run.parent.parent / f"{run.parent.name}@{point}" / run.name
        if (source / "audit").is_dir():
            return source
    return run


def segment_files(run: Path) -> tuple[list[Path], list[str]]:
    """The segment states ``train.json`` names that exist (in :func:`state_folder`), and
    those it names that do not (or, for a run without kept states, why)."""
    audit = _summary(run).get("audit") or {}
    run = state_folder(run)
    found: list[Path] = []
    gone: list[str] = []
    for seg in audit.get("segments") or []:
        for key in ("start_file", "end_file"):
            name = seg.get(key)
            if not name:
                gone.append(f"step {seg.get(key[:-5])} (keep_states: "
                            f"{audit.get('keep_states')})")
            elif (run / name).is_file():
                if run / name not in found:
                    found.append(run / name)
            else:
                gone.append(name)
    return found, gone


def audit_files(res_dir: Path, readers: Iterable[Path], say: Callable[[str], None] = print
                ) -> list[tuple[Path, PurePosixPath]]:
    """``(file, path relative to res_dir)`` of every state to ship; says how many and their
    size (before the archive is written), and which runs lack theirs."""
    out: list[tuple[Path, PurePosixPath]] = []
    runs = feeding_runs(res_dir, readers)
    lacking = []
    for run in runs:
        found, gone = segment_files(run)
        out += [(f, PurePosixPath(f.relative_to(res_dir).as_posix())) for f in found]
        if gone:
            lacking.append(f"{run.relative_to(res_dir)} ({', '.join(gone)})")
    size = sum(f.stat().st_size for f, _ in out)
    say(f"training audit states: {len(out)} file(s) of {len(runs)} run(s) feeding verdict "
        f"rows, {human_bytes(size)}, to be written into the archive")
    for line in lacking:
        say(f"  without its states (--retrain will list it as not checked): {line}")
    return out
