"""Result files, the one home: written with provenance, read with schema checks that name
the problem.

Every result JSON goes through :func:`write_json` (atomic, with a ``provenance`` block:
:func:`weince.utils.provenance.provenance`) and is read back through :func:`load_result`,
:func:`get_key` and :func:`encoder_value` by whoever needs its numbers: the pipeline (grid
selection, adopting a grid run), the report and the bundle check.

A metric is addressed by a dotted key (``"test_acc"``, ``"test.spearman"``,
``"step.overhead_pct"``). Its value is a number or a summary ``{"mean", "std", "n",
"values"}`` over probe/split seeds; a summary counts as one encoder-level value, the mean
of its ``values`` (``docs/protocol.md``: average probe/split seeds within an encoder first).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weince.utils.diskspace import atomic_write
from weince.utils.metrics import METRICS, Range
from weince.utils.provenance import COMMIT_FORM, jsonable, provenance
from weince.utils.rerun import snakemake_command

__all__ = ["write_json", "read_json", "ResultSchemaError", "InvalidResultError", "load_result",
           "get_key", "encoder_value", "finite_value", "check_plausible", "RANGES", "Range",
           "Provenance", "collect_provenance", "reading"]

# the files a job read, with their digests (weince.utils.digest), for every result it writes
_INPUTS: ContextVar[dict[str, Any] | None] = ContextVar("weince_inputs", default=None)


@contextmanager
def reading(inputs: Mapping[str, Mapping[str, str]]) -> Iterator[None]:
    """Every result :func:`write_json` writes inside this block records ``inputs`` (role ->
    ``{"path", "sha256"}``: the encoder, model, features or scores it was computed from) as
    ``provenance.inputs``: the link from a result to what it read, which ``weince verify``
    follows."""
    token = _INPUTS.set({k: dict(v) for k, v in inputs.items()})
    try:
        yield
    finally:
        _INPUTS.reset(token)


def write_json(path: str | os.PathLike, data: Mapping[str, Any], *, cfg: Any = None,
               seed: int | None = None, add_provenance: bool = True) -> Path:
    """Write ``data`` (plus a ``provenance`` block) atomically: a crash never leaves a
    half-written result that a resumed workflow would take for a finished one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = dict(jsonable(data))
    if add_provenance and "provenance" not in payload:
        inputs = _INPUTS.get()
        payload["provenance"] = provenance(cfg, seed, **({"inputs": inputs} if inputs else {}))
    text = json.dumps(payload, indent=2, sort_keys=False) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text), need=len(text.encode()))


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"result file {path} does not exist; run the rule that makes it "
                                f"({snakemake_command(path)})")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); delete it and re-run its "
                         f"rule") from err
    return check_plausible(data, path)


class ResultSchemaError(ValueError):
    """A result file lacks a key the report needs, or holds the wrong type there."""


class InvalidResultError(ResultSchemaError):
    """A result holds NaN/inf, or ``null`` (how ``write_json`` stores a NaN), where the report
    needs a number: a run that failed numerically, never to be shown as a missing one."""


def _invalid(path: str | os.PathLike, key: str, what: str) -> InvalidResultError:
    return InvalidResultError(
        f"{path}: {key!r} is {what}, an invalid result (the stage that wrote it failed "
        f"numerically, e.g. on a diverged encoder), not a missing one. Fix the cause, then "
        f"re-run the rule that writes it ({snakemake_command('--forcerun', path)})")


def finite_value(v: Any, path: str | os.PathLike, key: str) -> float:
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


# ------------------------------------------------------------------ plausible values
_TIME = Range("a time", 0.0, open_lo=True)
#: metric key (the last part of a dotted key, matched whole) -> the range of its values:
#: the evaluations' metrics as declared in :data:`weince.utils.metrics.METRICS`, then the
#: other quantities of result files (fits, p-values, times). A number, each number of a list
#: (an interval, a profile) and a summary's mean and values are checked, wherever the key
#: sits in a result file.
RANGES: list[tuple[re.Pattern, Range]] = [(m.pattern, m.range) for m in METRICS] + [
    (re.compile(f"(?:{k})" + r"\Z"), r) for k, r in [
    (r"r", Range("a correlation", -1.0, 1.0)),
    (r"lam|lam_ci|lam_ci_pairs|lambda|lambda_mean|lambda_q\d+", Range("a blend weight lambda",
                                                                      0.0, 1.0)),
    (r"xi|xi_ci|xi_ci_batch", Range("a GPD shape xi")),
    (r"p|p_value\w*|\w*_pvalue\w*", Range("a p-value", 0.0, 1.0)),
    (r"(median|loss|step)_ms|times_ms|step_s_(median|mean)", _TIME),
    (r"wall_s|epoch_s", Range("a duration", 0.0)),
    (r"overhead_pct|overhead_ci", Range("an overhead in percent of a step (a step takes "
                                        "time)", -100.0, open_lo=True)),
    (r"ratio|ratio_ci", Range("a time ratio", 0.0, open_lo=True)),
    (r"max_abs_diff|std", Range("a non-negative size", 0.0)),
]]


def range_of(key: str) -> Range | None:
    """The :data:`RANGES` entry of a (dotted) metric key, by its last part."""
    leaf = str(key).rsplit(".", 1)[-1]
    for pat, rng in RANGES:
        if pat.match(leaf):
            return rng
    return None


def _implausible(path: str | os.PathLike, key: str, v: float, rng: Range) -> InvalidResultError:
    return InvalidResultError(
        f"{path}: {key!r} = {v!r} is outside the range of {rng.what} ({rng}), an impossible "
        f"result (a corrupted or foreign file, or a bug in the stage that wrote it): delete it "
        f"and re-run the rule that writes it ({snakemake_command('--forcerun', path)})")


def _check_number(v: Any, path: str | os.PathLike, key: str, rng: Range | None) -> None:
    if rng is None or v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return   # null and non-numbers: finite_value/encoder_value judge them where read
    x = finite_value(v, path, key)
    if not rng.holds(x):
        raise _implausible(path, key, x, rng)


def _check_summary(d: dict[str, Any], path: str | os.PathLike, key: str) -> None:
    """A stored summary ``{"mean", "values", ...}`` agrees with itself: its mean is the
    mean of its values and its ``n`` their count."""
    vals, mean = d.get("values"), d.get("mean")
    if not (isinstance(vals, list) and vals and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in vals)):
        return
    if isinstance(d.get("n"), int) and not isinstance(d["n"], bool) and d["n"] != len(vals):
        raise InvalidResultError(
            f"{path}: {key + '.n'!r} = {d['n']} but {key + '.values'!r} holds {len(vals)} "
            f"values, a summary that contradicts itself: re-run the rule that writes it "
            f"({snakemake_command('--forcerun', path)})")
    if mean is None or isinstance(mean, bool) or not isinstance(mean, (int, float)):
        return
    m = finite_value(mean, path, f"{key}.mean")
    avg = math.fsum(vals) / len(vals)
    if not math.isclose(m, avg, rel_tol=1e-6, abs_tol=1e-9 * max(1.0, *map(abs, vals))):
        raise InvalidResultError(
            f"{path}: {key + '.mean'!r} = {m!r} but the mean of {key + '.values'!r} is "
            f"{avg!r}, a summary that contradicts itself (a hand-edited or corrupted file): "
            f"re-run the rule that writes it ({snakemake_command('--forcerun', path)})")


def check_plausible(data: Any, path: str | os.PathLike, key: str = "") -> Any:
    """``data`` unchanged, or an :class:`InvalidResultError` naming the file, the key, the
    value and its range (:data:`RANGES`): an accuracy of 150 %, a lambda of 2, a negative
    time, a p-value above 1, a summary whose ``mean`` is not the mean of its ``values``.
    NaN/inf at a ranged key is an invalid result too; ``null`` is left to the reader that
    needs the number."""
    if isinstance(data, dict):
        if "values" in data and "mean" in data:
            _check_summary(data, path, key or "<top level>")
        for k, v in data.items():
            sub = f"{key}.{k}" if key else str(k)
            rng = range_of(str(k))
            if rng is not None and isinstance(v, (int, float)):
                _check_number(v, path, sub, rng)
            elif rng is not None and isinstance(v, list):
                for i, x in enumerate(v):
                    _check_number(x, path, f"{sub}[{i}]", rng)
            elif rng is not None and isinstance(v, dict) and "values" in v:
                _check_number(v.get("mean"), path, f"{sub}.mean", rng)
                for i, x in enumerate(v["values"] if isinstance(v["values"], list) else []):
                    _check_number(x, path, f"{sub}.values[{i}]", rng)
            if isinstance(v, (dict, list)):
                check_plausible(v, path, sub)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            if isinstance(v, (dict, list)):
                check_plausible(v, path, f"{key}[{i}]")
    return data


def load_result(path: str | os.PathLike) -> dict[str, Any]:
    """Parse one result JSON; a file that is not a JSON object is a ``ResultSchemaError``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultSchemaError(f"{path}: not valid JSON ({err}); delete it and re-run the "
                                f"rule that makes it ({snakemake_command(path)})") from err
    if not isinstance(data, dict):
        raise ResultSchemaError(f"{path}: expected a JSON object at top level, got "
                                f"{type(data).__name__}")
    return check_plausible(data, path)


def get_key(data: dict[str, Any], key: str, path: str | os.PathLike, *, needed_by: str = "") -> Any:
    """``data[a][b]...`` for ``key = "a.b..."``, or a ``ResultSchemaError`` naming the file,
    the missing key and who needs it. A key that itself contains dots (``"acc@50"``) is
    matched whole first."""
    if key in data:
        return data[key]
    cur: Any = data
    walked: list[str] = []
    for part in key.split("."):
        if not isinstance(cur, dict) or part not in cur:
            where = ".".join(walked) or "<top level>"
            have = sorted(cur) if isinstance(cur, dict) else type(cur).__name__
            raise ResultSchemaError(
                f"{path}: missing key {key!r} (no {part!r} under {where}; found {have})"
                + (f", needed by {needed_by}" if needed_by else "")
                + f". The file does not follow the result schema of its stage: re-run the "
                  f"rule that writes it ({snakemake_command('--forcerun', path)})")
        walked.append(part)
        cur = cur[part]
    return cur


def encoder_value(value: Any, path: str | os.PathLike, key: str) -> float:
    """One number per encoder: a plain number, or the mean of a summary's values.

    NaN, inf and ``null`` (JSON's form of a NaN written by ``write_json``), alone or among a
    summary's values, are an :class:`InvalidResultError` naming the file and the rule to
    re-run; a result that is absent is the caller's "missing", never this. Any other type
    is a ``ResultSchemaError``."""
    if isinstance(value, bool):
        raise ResultSchemaError(f"{path}: key {key!r} is a boolean, expected a number or a "
                                f"{{'mean', 'std', 'n', 'values'}} summary")
    if value is None or isinstance(value, (int, float)):
        x = finite_value(value, path, key)
        _check_number(x, path, key, range_of(key))
        return x
    if isinstance(value, dict):
        check_plausible({key.rsplit(".", 1)[-1]: value}, path, key.rsplit(".", 1)[0]
                        if "." in key else "")
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
_COMMIT = COMMIT_FORM   # the one form of a commit, as provenance writes it
_HEX = re.compile(r"[0-9a-f]{6,64}\Z")


def _check_format(value: Any, pattern: re.Pattern, path: str | os.PathLike, key: str,
                  what: str) -> None:
    if not (isinstance(value, str) and pattern.match(value)):
        raise ResultSchemaError(f"{path}: provenance.{key} {str(value)[:80]!r} is not {what}; "
                                f"result files are written by weince.utils.write_json (re-run "
                                f"the rule that writes it)")


def _check_date(value: Any, path: str | os.PathLike) -> None:
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

    def add(self, data: dict[str, Any], path: str | os.PathLike) -> None:
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
