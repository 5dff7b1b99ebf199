"""The claims registry (``config/claims.yaml``): loading and schema validation.

Read by the pipeline (:func:`weince.pipeline.targets.all_targets`: one table per claim) and
by the report (:mod:`weince.report`: each claim's verdict), so it lives here, below the
report.

The schema (``claims.schema.yaml`` beside this module; ``workflow/schemas/`` links to it)
documents every field. Validation fills the schema's defaults.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from weince.utils.config import parse_yaml
from weince.utils.metrics import metric_of

__all__ = ["SCHEMA_PATH", "ClaimsError", "load_claims", "validate_with_defaults", "ROW_KEYS",
           "paper_rows", "row_matches"]

SCHEMA_PATH = Path(__file__).with_name("claims.schema.yaml")


def _with_defaults(cls):
    """A jsonschema validator class that also writes ``default`` values into the instance
    (the same behaviour as Snakemake's ``validate(..., set_default=True)``)."""
    validate_props = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(name, sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


def validate_with_defaults(instance: dict[str, Any], schema: Mapping[str, Any],
                           what: str) -> None:
    """Validate ``instance`` in place (defaults filled); a ``ValueError`` names the field."""
    cls = _with_defaults(jsonschema.validators.validator_for(schema))
    errors = sorted(cls(schema).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  at {'/'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}"
                 for e in errors[:10]]
        raise ValueError(f"{what} does not follow its schema:\n" + "\n".join(lines))


_LOADED: dict[tuple, dict[str, Any]] = {}   # (path, mtime, size) -> validated registry


def load_claims(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate the registry: its claims, however many, each id once; the report
    lists exactly these (no code counts them).

    Read once per process and file version (Snakemake's input functions ask for it ~20 times
    while building the DAG); each call returns its own copy."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"claims registry {path} does not exist; it ships with the "
                                f"repository as config/claims.yaml")
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        _LOADED[key] = _read_claims(path)
    return copy.deepcopy(_LOADED[key])


class ClaimsError(ValueError):
    """A file given as the claims registry that is not one: one line naming the file and
    the problem, quoting none of the file's content (it may be any file)."""


_FIX = "pass the repository's config/claims.yaml or a copy of it"


def _schema_problem(e: jsonschema.ValidationError) -> str:
    """Where and how ``e`` fails, in words taken from the schema only."""
    where = "/".join(map(str, e.absolute_path)) or "its top level"
    what = {"type": f"is not of type {e.validator_value}",
            "enum": f"is not one of {e.validator_value}",
            "required": "lacks a key the schema requires",
            "additionalProperties": "holds a key the schema does not allow"}.get(
        str(e.validator), f"fails the schema's {e.validator!r} rule")
    return f"at {where}: the value {what}"


def _registry_data(path: Path) -> dict[str, Any]:
    """The YAML mapping of the file at ``path``, or a one-line ClaimsError."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ClaimsError(f"claims registry {path} is not a claims registry (not UTF-8 "
                          f"text); {_FIX}") from None
    try:
        reg = parse_yaml(text, f"claims registry {path}") or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ClaimsError(f"claims registry {path} is not valid YAML{at} "
                          f"({getattr(err, 'problem', None) or type(err).__name__}); "
                          f"{_FIX}") from None
    if not isinstance(reg, dict) or not isinstance(reg.get("claims"), list):
        raise ClaimsError(f"claims registry {path} is not a claims registry (its top level "
                          f"is not a mapping with a `claims:` list); {_FIX}")
    return reg


def _read_claims(path: Path) -> dict[str, Any]:
    reg = _registry_data(path)
    schema = parse_yaml(SCHEMA_PATH.read_text())
    cls = _with_defaults(jsonschema.validators.validator_for(schema))
    errors = sorted(cls(schema).iter_errors(reg), key=lambda e: list(map(str, e.absolute_path)))
    if errors:   # defaults are filled as the errors are looked for
        raise ClaimsError(f"claims registry {path} does not follow its schema: "
                          f"{_schema_problem(errors[0])} ({len(errors)} problem(s), the "
                          f"first named); {_FIX}")
    ids = [c["id"] for c in reg["claims"]]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"claims registry {path}: claim id(s) {dup} appear more than once")
    for c in reg["claims"]:
        _check_claim(c, path)
    return reg


def _check_claim(c: dict[str, Any], path: Path) -> None:
    where = f"claims registry {path}, claim {c['id']}"
    kind = c["kind"]
    odd = [m for m in c.get("readings", []) if metric_of(m) is None]
    if odd:
        raise ValueError(f"{where}: readings {odd} are not declared metrics; declare them in "
                         f"src/weince/utils/metrics.py (METRICS) or fix the key")
    if kind in ("gain", "noninferior"):   # their rules read a positive gain as the better arm
        judged = [c.get("metric"), *c.get("metrics", []),
                  *(r.get("metric") for r in c.get("rows") or [] if isinstance(r, dict))]
        lower = [m for m in judged if m and (d := metric_of(m)) and not d.higher_is_better]
        if lower:
            raise ValueError(f"{where}: kind {kind!r} judges a gain (higher is better) but "
                             f"{lower} are declared lower-is-better; show them as readings")
    if (kind == "norms") != (c["stage"] == "norms"):
        raise ValueError(f"{where}: kind 'norms' and stage 'norms' go together (the norms "
                         f"results are read by the norms rule only)")
    if kind == "norms":
        if "verdict_key" not in c or ("metric" not in c and "metrics" not in c):
            raise ValueError(f"{where}: kind 'norms' needs verdict_key (the unit verdict in "
                             f"norms.json) and a metric or metrics to show")
        rows = c.get("rows")
        if not isinstance(rows, list) or not all(r.get("backbone") or r.get("model")
                                                 for r in rows):
            raise ValueError(f"{where}: kind 'norms' needs rows naming the companion "
                             f"paper's models (a backbone or a model each): only units on "
                             f"them get a verdict")
        return
    if (kind == "noise_floor") != (c["stage"] == "synthetic"):
        raise ValueError(f"{where}: kind 'noise_floor' and stage 'synthetic' go together (the "
                         f"synthetic experiment's file is read by that kind only)")
    if kind == "noise_floor":
        missing = [k for k in ("tolerance", "slope_min_n") if k not in c]
        if missing or "baseline" not in c["arms"]:
            raise ValueError(f"{where}: kind 'noise_floor' needs tolerance, slope_min_n and "
                             f"arms.baseline (the softmax estimator); missing: "
                             f"{missing or ['arms.baseline']}")
        return
    if kind in ("gain", "noninferior", "overhead") and "baseline" not in c["arms"]:
        raise ValueError(f"{where}: kind {kind!r} needs arms.baseline")
    if kind in ("gain", "noninferior", "sign", "overhead", "exact") and "tolerance" not in c:
        if kind != "sign":
            raise ValueError(f"{where}: kind {kind!r} needs a tolerance")
    if kind == "sign" and "expect" not in c:
        raise ValueError(f"{where}: kind 'sign' needs expect: negative|positive")
    if kind == "reject" and "p_key" not in c:
        raise ValueError(f"{where}: kind 'reject' needs p_key (the p-value's key)")
    if kind == "noninferior" and "grid" not in c:
        raise ValueError(f"{where}: kind 'noninferior' needs grid (datasets, backbones)")
    if kind == "gain":
        if not isinstance(c.get("rows"), list):
            raise ValueError(f"{where}: kind 'gain' needs a list of rows with the paper figures")
        for r in c["rows"]:
            p = r["paper"]
            if p and "gain" not in p and not ("baseline" in p and "treatment" in p):
                raise ValueError(f"{where}: row {r} needs paper.gain or paper.baseline and "
                                 f"paper.treatment (or paper: {{}}, a reading without a "
                                 f"verdict)")
            if "metric" not in r and "metric" not in c:
                raise ValueError(f"{where}: row {r} has no metric and the claim none either")
    elif kind == "overhead" and not isinstance(c.get("rows"), list):
        raise ValueError(f"{where}: kind 'overhead' needs rows naming the timed backbone")
    elif "metric" not in c and "metrics" not in c:
        raise ValueError(f"{where}: kind {kind!r} needs a metric")
    if kind in ("sign", "reject") and c.get("rows") == "any":
        raise ValueError(f"{where}: kind {kind!r} needs the paper's own settings as rows "
                         f"(rows: any would judge every setting a profile ran as the paper's)")


# the setting attributes a registry row names, per stage (a vision row: data set and backbone)
ROW_KEYS: dict[str, tuple[str, ...]] = {"vision": ("dataset", "backbone"),
                                        "text": ("model", "corpus"), "timing": ("backbone",)}


def paper_rows(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The paper's own settings of a claim: its ``rows``, or every cell of its ``grid``
    (``[]`` for ``rows: any``, a claim over every setting a profile runs)."""
    if claim.get("grid"):
        g = claim["grid"]
        return [{"dataset": d, "backbone": b, "paper": dict(claim.get("paper", {}))}
                for d in g["datasets"] for b in g["backbones"]]
    rows = claim.get("rows")
    return rows if isinstance(rows, list) else []


def row_matches(setting: Any, row: dict[str, Any], stage: str) -> bool:
    """Whether ``setting`` (a :class:`weince.pipeline.layout.Setting`) is the registry row's."""
    return all(getattr(setting, k) == row.get(k) for k in ROW_KEYS.get(stage, ()))
