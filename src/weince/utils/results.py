"""Result files, the one home: written with provenance, read with schema checks that name
the problem.

Every result JSON goes through :func:`write_json` (atomic, with a ``provenance`` block:
:func:`weince.utils.provenance.provenance`) and is read back through :func:`load_result`,
:func:`get_key` and :func:`encoder_value` by whoever needs its numbers: the pipeline (grid
selection, adopting a grid run), the report and the bundle check.

A metric is addressed by a dotted key (``"test_acc"``, ``"test.spearman"``,
``"step.overhead_pct"``). Its value is a number or a summary ``{"mean", "std", "n",
"values"}`` over probe/split seeds; a summary counts as one encoder-level value, the mean
of its ``values`` (SPEC 6: average probe/split seeds within an encoder first).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weince.utils.provenance import jsonable, provenance

__all__ = ["write_json", "read_json", "ResultSchemaError", "InvalidResultError", "load_result",
           "get_key", "encoder_value", "finite_value", "Provenance", "collect_provenance"]


def write_json(path: str | os.PathLike, data: dict[str, Any], *, cfg: Any = None,
               seed: int | None = None, add_provenance: bool = True) -> Path:
    """Write ``data`` (plus a ``provenance`` block) atomically: a crash never leaves a
    half-written result that a resumed workflow would take for a finished one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = dict(jsonable(data))
    if add_provenance and "provenance" not in payload:
        payload["provenance"] = provenance(cfg, seed)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"result file {path} does not exist; run the rule that makes it "
                                f"(e.g. `snakemake {path}`)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); delete it and re-run its rule") from err


class ResultSchemaError(ValueError):
    """A result file lacks a key the report needs, or holds the wrong type there."""


class InvalidResultError(ResultSchemaError):
    """A result holds NaN/inf, or ``null`` (how ``write_json`` stores a NaN), where the report
    needs a number: a run that failed numerically, never to be shown as a missing one."""


def _invalid(path: str | Path, key: str, what: str) -> InvalidResultError:
    return InvalidResultError(
        f"{path}: {key!r} is {what}, an invalid result (the stage that wrote it failed "
        f"numerically, e.g. on a diverged encoder), not a missing one. Fix the cause, then "
        f"re-run the rule that writes it (`snakemake --forcerun {path}`)")


def finite_value(v: Any, path: str | Path, key: str) -> float:
    """``v`` as a float; NaN, inf or ``null`` is an :class:`InvalidResultError` naming the
    file, the key and the rule to re-run; any other non-number a ``ResultSchemaError``."""
    if v is None:
        raise _invalid(path, key, "null (a NaN or inf written as null)")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ResultSchemaError(f"{path}: key {key!r} holds {v!r} ({type(v).__name__}), "
                                f"expected a number")
    if not math.isfinite(float(v)):
        raise _invalid(path, key, repr(float(v)))
    return float(v)


def load_result(path: str | Path) -> dict[str, Any]:
    """Parse one result JSON; a file that is not a JSON object is a ``ResultSchemaError``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultSchemaError(f"{path}: not valid JSON ({err}); delete it and re-run the "
                                f"rule that makes it (`snakemake {path}`)") from err
    if not isinstance(data, dict):
        raise ResultSchemaError(f"{path}: expected a JSON object at top level, got "
                                f"{type(data).__name__}")
    return data


def get_key(data: dict[str, Any], key: str, path: str | Path, *, needed_by: str = "") -> Any:
    """``data[a][b]...`` for ``key = "a.b..."``, or a ``ResultSchemaError`` naming the file,
    the missing key and who needs it. A key that itself contains dots (``"acc@50"``) is
    matched whole first."""
    if key in data:
        return data[key]
    cur: Any = data
    walked = []
    for part in key.split("."):
        if not isinstance(cur, dict) or part not in cur:
            where = ".".join(walked) or "<top level>"
            have = sorted(cur) if isinstance(cur, dict) else type(cur).__name__
            raise ResultSchemaError(
                f"{path}: missing key {key!r} (no {part!r} under {where}; found {have})"
                + (f", needed by {needed_by}" if needed_by else "")
                + f". The file does not follow the result schema of its stage: re-run the "
                  f"rule that writes it (`snakemake --forcerun {path}`)")
        walked.append(part)
        cur = cur[part]
    return cur


def encoder_value(value: Any, path: str | Path, key: str) -> float:
    """One number per encoder: a plain number, or the mean of a summary's values.

    NaN, inf and ``null`` (JSON's form of a NaN written by ``write_json``), alone or among a
    summary's values, are an :class:`InvalidResultError` naming the file and the rule to
    re-run; a result that is absent is the caller's "missing", never this. Any other type
    is a ``ResultSchemaError``."""
    if isinstance(value, bool):
        raise ResultSchemaError(f"{path}: key {key!r} is a boolean, expected a number or a "
                                f"{{'mean', 'std', 'n', 'values'}} summary")
    if value is None or isinstance(value, (int, float)):
        return finite_value(value, path, key)
    if isinstance(value, dict):
        if "values" in value and isinstance(value["values"], list):
            if "mean" in value:  # a NaN mean beside finite values is still a broken summary
                finite_value(value["mean"], path, f"{key}.mean")
            vals = [finite_value(v, path, f"{key}.values[{i}]")
                    for i, v in enumerate(value["values"])]
            if not vals:
                raise _invalid(path, f"{key}.values", "empty (no probe/split seed produced a "
                                                      "value)")
            return sum(vals) / len(vals)
        if "mean" in value:
            return finite_value(value["mean"], path, f"{key}.mean")
        raise ResultSchemaError(f"{path}: key {key!r} is a mapping without 'mean' or "
                                f"'values' (keys: {sorted(value)}); expected a summary "
                                f"{{'mean', 'std', 'n', 'values'}}")
    raise ResultSchemaError(f"{path}: key {key!r} has type {type(value).__name__}, expected a "
                            f"number or a {{'mean', 'std', 'n', 'values'}} summary")


# provenance strings reach the tables as they are: each must have its format (a result
# file from elsewhere, e.g. a bundle, could otherwise put Markdown or LaTeX there)
_COMMIT = re.compile(r"(?:[0-9a-f]{7,40}(?:\+dirty)?|unknown)\Z")
_HEX = re.compile(r"[0-9a-f]{6,64}\Z")


def _check_format(value: Any, pattern: re.Pattern, path: str | Path, key: str,
                  what: str) -> None:
    if not (isinstance(value, str) and pattern.match(value)):
        raise ResultSchemaError(f"{path}: provenance.{key} {str(value)[:80]!r} is not {what}; "
                                f"result files are written by weince.utils.write_json (re-run "
                                f"the rule that writes it)")


def _check_date(value: Any, path: str | Path) -> None:
    try:
        ok = isinstance(value, str) and len(value) <= 40 and bool(
            _dt.datetime.fromisoformat(value))
    except ValueError:
        ok = False
    if not ok:
        raise ResultSchemaError(f"{path}: provenance.date {str(value)[:80]!r} is not an ISO "
                                f"8601 date; result files are written by "
                                f"weince.utils.write_json (re-run the rule that writes it)")


@dataclass
class Provenance:
    """Commits, config hashes and dates of the result files a table was built from."""

    commits: set[str] = field(default_factory=set)
    config_hashes: set[str] = field(default_factory=set)
    dates: list[str] = field(default_factory=list)
    files: int = 0

    def add(self, data: dict[str, Any], path: str | Path) -> None:
        prov = data.get("provenance")
        if not isinstance(prov, dict):
            raise ResultSchemaError(f"{path}: missing key 'provenance' (every result is "
                                    f"written by weince.utils.write_json, which adds it); "
                                    f"re-run the rule that writes it")
        commit = prov.get("git_commit", "unknown")
        _check_format(commit, _COMMIT, path, "git_commit", "a git commit (hex, optionally "
                      "'+dirty') or 'unknown'")
        if prov.get("config_hash"):
            _check_format(prov["config_hash"], _HEX, path, "config_hash", "a hex config hash")
        if prov.get("date"):
            _check_date(prov["date"], path)
        self.files += 1
        self.commits.add(commit)
        if prov.get("config_hash"):
            self.config_hashes.add(prov["config_hash"])
        if prov.get("date"):
            self.dates.append(prov["date"])

    def merge(self, other: "Provenance") -> None:
        self.commits |= other.commits
        self.config_hashes |= other.config_hashes
        self.dates += other.dates
        self.files += other.files

    def describe(self) -> dict[str, str]:
        dates = sorted(self.dates)
        if not dates:
            span = "none"
        elif dates[0] == dates[-1]:
            span = dates[0]
        else:
            span = f"{dates[0]} to {dates[-1]}"
        commits = sorted(c[:12] + ("+dirty" if c.endswith("+dirty") else "")
                         for c in self.commits)
        hashes = sorted(self.config_hashes)
        return {
            "files": str(self.files),
            "git_commit": ", ".join(commits) if commits else "none",
            "config_hashes": (", ".join(hashes[:4]) + (f" (+{len(hashes) - 4} more)"
                                                        if len(hashes) > 4 else ""))
            if hashes else "none",
            "dates": span,
        }


def collect_provenance(paths: list[Path]) -> Provenance:
    prov = Provenance()
    for p in paths:
        prov.add(load_result(p), p)
    return prov
