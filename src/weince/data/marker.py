"""The marker of a tree written by ``weince synthetic-data`` (a leaf module: the loaders,
the text models and the reports read it without importing the writers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "synthetic_marker", "data_note"]

MARKER = "WEINCE_SYNTHETIC.json"


def synthetic_marker(path: str | Path | None) -> dict[str, Any] | None:
    """The marker of the synthetic tree holding ``path`` (a file or folder), or None.

    Looks in ``path`` and each folder above it, so a data root, a data set folder or a
    model folder written by :func:`weince.data.synthetic_formats.write_synthetic_data` are
    all recognised."""
    if not path:
        return None
    p = Path(path).expanduser().absolute()
    for d in [p, *p.parents] if p.is_dir() else list(p.parents):
        m = d / MARKER
        if m.is_file():
            try:
                return json.loads(m.read_text())
            except (OSError, ValueError):
                return {"synthetic": True, "what": str(d)}
    return None


def data_note(data_root: str | None) -> str:
    """``"; data: SYNTHETIC files ..."`` when the profile's ``data_root`` was written by
    ``weince synthetic-data``, else ``""``."""
    if data_root and synthetic_marker(Path(str(data_root))):
        return (f"; data: SYNTHETIC files in the real formats (`weince synthetic-data`, "
                f"{data_root}), not the data sets")
    return ""
