"""The files of a norms run: their names, and a ``norms.json`` read back with its checks.

Torch-free, so that the report and the workflow's planning read them without torch.

    from weince.norms.files import RESULT_FILE, load_results
    load_results(["results/.../norms.json"])   # [{... "_path": "results/.../norms.json"}]
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

from weince.utils.results import InvalidResultError, finite_value, read_json
from weince.utils.verdict_words import NOT_REPRODUCED, REPRODUCED
from weince.utils.rerun import snakemake_command

__all__ = ["RESULT_FILE", "PROBES_FILE", "check_norms_result", "load_results"]

RESULT_FILE = "norms.json"
PROBES_FILE = "norms_probes.npz"


def _non_finite(x: Any, key: str = "") -> Iterator[str]:
    """Dotted keys of every NaN/inf float under ``x`` (``write_json`` never writes one)."""
    if isinstance(x, float) and not math.isfinite(x):
        yield key
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _non_finite(v, f"{key}.{k}" if key else str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _non_finite(v, f"{key}[{i}]")


def _deciding(r: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(key, value)`` of every number a judged unit verdict (``reproduced`` / ``not
    reproduced``) rests on: a ``null`` there is a NaN that ``write_json`` wrote as null."""
    judged = (REPRODUCED, NOT_REPRODUCED)
    v = r.get("verdicts") or {}
    corr = {"N1": [("n1", "predicted_vs_measured")],
            "N2": [("n2", "heat_vs_norm"), ("n2", "drift_vs_norm")]}
    for claim, where in corr.items():
        if v.get(claim) not in judged:
            continue
        for part, name in where:
            c = ((r.get(part) or {}).get(name) or {}).get("pearson") or {}
            ci = c.get("ci") or [None, None]
            yield f"{part}.{name}.pearson.r", c.get("r")
            yield f"{part}.{name}.pearson.ci[0]", ci[0]
            yield f"{part}.{name}.pearson.ci[1]", ci[1]
    for i, row in enumerate((r.get("n3") or {}).get("rows") or []):
        if row.get("primary") and row.get("verdict") in judged:
            ci = row.get("ci") or [None, None]
            yield f"n3.rows[{i}].gain", row.get("gain")
            yield f"n3.rows[{i}].ci[0]", ci[0]
            yield f"n3.rows[{i}].ci[1]", ci[1]


def check_norms_result(d: dict[str, Any], path: str | os.PathLike) -> None:
    """Refuse a ``norms.json`` that holds NaN/inf anywhere, or ``null`` where a judged unit
    verdict needs a number: an :class:`InvalidResultError` naming the file, the key and the
    rule to re-run (a not-testable unit's ``null`` correlation is a legitimate absence)."""
    bad = next(_non_finite(d), None)
    if bad is not None:
        raise InvalidResultError(
            f"{path}: {bad!r} is not a finite number, an invalid norms result (the analysis "
            f"failed numerically), not a missing one. Fix the cause, then re-run the rule "
            f"that writes it ({snakemake_command('--forcerun', path)})")
    for key, value in _deciding(d):
        finite_value(value, path, key)


def load_results(paths: Iterable[str | os.PathLike | dict]) -> list[dict[str, Any]]:
    """Result dicts from ``norms.json`` paths (dicts pass through); ``_path`` is added.

    Raises:
        InvalidResultError: NaN/inf in a file, or null where a verdict needs a number
            (:func:`check_norms_result`).
        ValueError: a file that is not a norms result.
    """
    out = []
    for p in paths:
        if isinstance(p, dict):
            out.append(p)
            continue
        d = read_json(p)
        if "n1" not in d or "n2" not in d:
            raise ValueError(f"{p} is not a norms result (no 'n1'/'n2'); it must come from "
                             "`weince norms`")
        check_norms_result(d, p)
        d["_path"] = str(p)
        out.append(d)
    return out
