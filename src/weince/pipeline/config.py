"""The profile config's check against ``workflow/schemas/config.schema.yaml``, with errors a
person can act on: the config file, the key's path and the valid choices.

The Snakefile calls :func:`check_config` (the one check of the config, which also fills
the schema's defaults) before anything is planned, so a typo fails ``snakemake -n``
instead of the first job (``visoin:`` -> "unknown key 'visoin' at the top
level; did you mean 'vision'?").

    from weince.pipeline.config import check_config
    check_config(config, "workflow/schemas/config.schema.yaml", ["config/smoke.yaml"])
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema

from weince.pipeline.claims import validate_with_defaults
from weince.utils.config import parse_yaml

__all__ = ["ConfigError", "check_config", "config_errors", "set_run_environment"]


class ConfigError(ValueError):
    """The profile config does not match the schema; the message lists every problem."""


def _path(parts: Iterable[Any]) -> str:
    return ".".join(str(p) for p in parts) or "the top level"


_NOTHING = object()


def _lookup(data: Any, keys: list[Any]) -> Any:
    """The value at ``keys`` in ``data``, or ``_NOTHING``."""
    for k in keys:
        if isinstance(data, list) and isinstance(k, int) and 0 <= k < len(data):
            data = data[k]
        elif isinstance(data, Mapping) and k in data:
            data = data[k]
        else:
            return _NOTHING
    return data


def _origin(keys: list[Any], sources: Mapping[str, Any], value: Any = _NOTHING) -> str:
    """The config file that sets ``keys``, else '': of the files that set it, the last one
    (``sources`` in the order the workflow applies them: later files override) whose value
    there is ``value``, the one the schema refused."""
    hits = [name for name, data in sources.items() if _lookup(data, keys) is not _NOTHING]
    if value is not _NOTHING:
        hits = [n for n in hits if _lookup(sources[n], keys) == value] or hits
    return f"{hits[-1]}: " if hits else ""


def _describe(err: jsonschema.ValidationError, sources: Mapping[str, Any]) -> str:
    keys = list(err.absolute_path)
    where = _path(keys)
    v, s = err.validator, err.schema
    if v == "additionalProperties":
        allowed = sorted(s.get("properties", {}))
        extra = sorted(k for k in err.instance if k not in allowed)
        parts = []
        for k in extra:
            close = difflib.get_close_matches(str(k), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            parts.append(f"{_origin(keys + [k], sources)}unknown key {k!r} at {where}{hint}")
        return "; ".join(parts) + f" (valid keys: {', '.join(allowed)})"
    return _origin(keys, sources, err.instance) + _value_problem(err, where)


def _value_problem(err: jsonschema.ValidationError, where: str) -> str:
    v, s = err.validator, err.schema
    if v in ("enum", "const"):
        choices = s.get("enum", [s.get("const")])
        return f"{where} = {err.instance!r} is not a valid choice; valid: {choices}"
    if v == "oneOf":
        return f"{where} = {err.instance!r} matches none of the allowed forms ({err.message})"
    if v == "type":
        want = s["type"] if isinstance(s["type"], list) else [s["type"]]
        hint = ""
        word = err.instance.lower() if isinstance(err.instance, str) else None
        if "boolean" in want and "." not in where and word in ("true", "false"):
            # Snakemake's --config reads only True and False as booleans
            hint = f" (on the command line: --config {where}={word.capitalize()})"
        return f"{where} = {err.instance!r} must be of type {' or '.join(want)}{hint}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=",
              "exclusiveMaximum": "<"}[v]
        return f"{where} = {err.instance!r} must be {op} {err.validator_value}"
    if v == "required":
        return f"{where}: {err.message}"
    return f"{where} = {err.instance!r}: {err.message}"


def config_errors(config: Mapping[str, Any], schema: Mapping[str, Any],
                  sources: Iterable[str | os.PathLike] = ()) -> list[str]:
    """One sentence per problem of ``config`` under ``schema`` (empty when it is valid),
    each prefixed with the file of ``sources`` that sets the key, when one does."""
    data = {}
    for src in sources:
        p = Path(src)
        if p.exists():
            data[str(src)] = parse_yaml(p.read_text()) or {}
    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    return [_describe(e, data) for e in errors]


def check_config(config: Mapping[str, Any], schema: str | os.PathLike | Mapping[str, Any],
                 sources: Iterable[str | os.PathLike] = (), *, fill_defaults: bool = True
                 ) -> None:
    """Raise :class:`ConfigError` naming ``sources`` (the config files) and every problem
    of ``config`` under ``schema`` (a schema dict or its YAML file); else, with
    ``fill_defaults``, fill the keys the config leaves out with the schema's defaults (in
    place), so that the workflow checks its config once."""
    if not isinstance(schema, Mapping):
        schema = parse_yaml(Path(schema).read_text())
    # a file named twice (Snakemake lists a --configfile in configfiles and again in
    # overwrite_configfiles) counts where it is applied last
    sources = list(reversed(dict.fromkeys(str(s) for s in reversed(list(sources)))))
    problems = config_errors(config, schema, sources)
    if problems:
        files = ", ".join(sources) or "the config"
        raise ConfigError(f"invalid workflow config ({files}):\n  - " + "\n  - ".join(problems))
    if fill_defaults:   # the schema's defaults, as Snakemake's validate(set_default=True)
        validate_with_defaults(config, schema, "the workflow config")


def set_run_environment(config: Mapping[str, Any]) -> None:
    """The environment every job of a run inherits from Snakemake's process: with
    ``offline: true``, ``HF_HUB_OFFLINE=1`` (the Hugging Face libraries read it when they
    are imported, so it is set before any job starts)."""
    if config.get("offline"):
        os.environ["HF_HUB_OFFLINE"] = "1"
