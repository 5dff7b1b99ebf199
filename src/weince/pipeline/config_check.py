"""The profile config's check against its schema (``config.schema.yaml`` beside this module;
``workflow/schemas/`` links to it), with errors a
person can act on: the config file, the key's path and the valid choices.

The Snakefile calls :func:`check_config` (the one check of the config, which also fills
the schema's defaults) before anything is planned, so a typo fails ``snakemake -n``
instead of the first job (``visoin:`` -> "unknown key 'visoin' at the top
level; did you mean 'vision'?").

    from weince.pipeline.config_check import check_config
    check_config(config, CONFIG_SCHEMA, ["config/smoke.yaml"])
"""

from __future__ import annotations

import difflib
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema

from weince.data.locations import SPLIT_IMAGES
from weince.pipeline.arms import ARMS
from weince.pipeline.profile import Profile
from weince.pipeline.schema import fill_defaults as fill_schema_defaults
from weince.pipeline.schema import read_schema
from weince.utils.config import (MAX_VALUES, YamlSizeError, expanded_size, parse_yaml,
                                 value_children)
from weince.utils.diskspace import parse_size

__all__ = ["ConfigError", "check_config", "config_errors", "set_run_environment",
           "retype_overrides", "COMMAND_LINE", "name_registry", "rule_names", "value_errors",
           "RUN_CEILINGS", "SIZE_CEILINGS", "GRID_CEILING", "SETTINGS_CEILING",
           "LONG_RUNS_ENV", "oversized_key", "read_sources", "inline_refs"]

#: how an error names a value given on the command line (``snakemake --config k=v``)
COMMAND_LINE = "the command line (--config)"


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


SHOWN_CHARS = 80   # a refused value is quoted up to this length
MAX_PROBLEMS = 20  # problems listed (then: and N more)


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _shown(value: Any) -> str:
    """``repr(value)``, at most :data:`SHOWN_CHARS` characters (a list of thousands of
    items is named by its start and its length)."""
    text = repr(value)
    if len(text) <= SHOWN_CHARS:
        return text
    size = f" ({len(value)} items)" if isinstance(value, (list, dict)) else ""
    return text[:SHOWN_CHARS - 3] + "..." + size


def _describe(err: jsonschema.ValidationError, sources: Mapping[str, Any]) -> str:
    keys = list(err.absolute_path)
    where = _path(keys)
    v, s = err.validator, err.schema
    if "propertyNames" in err.schema_path:   # a map keyed by names: the key is the problem
        choices = _choices(err)
        return (f"{_origin(keys + [err.instance], sources)}unknown name "
                f"{_shown(err.instance)} as a "
                f"key of {where}; valid: {choices}")
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


def _choices(err: jsonschema.ValidationError) -> list[Any]:
    if err.validator == "names":
        return list(err.cause.args[0]) if err.cause else []
    return list(err.schema.get("enum", [err.schema.get("const")]))


def _value_problem(err: jsonschema.ValidationError, where: str) -> str:
    v, s = err.validator, err.schema
    if v in ("enum", "const", "names"):
        whose = " (the profile's vision.arms)" if s.get("names") == "vision.arms" else ""
        return (f"{where} = {_shown(err.instance)} is not a valid choice; valid{whose}: "
                f"{_choices(err)}")
    named = [e for e in err.context or [] if e.validator in ("enum", "names")
             and not e.relative_path]
    if v == "oneOf" and named:   # a name or null (``oneOf: [{type: "null"}, {$ref: ...}]``)
        forms = [b.get("type") for b in s["oneOf"]]
        also = " or null" if "null" in forms else " (or a list of them)" if "array" in forms else ""
        return (f"{where} = {_shown(err.instance)} is not a valid choice; valid: "
                f"{_choices(named[0])}{also}")
    if v == "oneOf":
        return (f"{where} = {_shown(err.instance)} matches none of the allowed forms "
                f"({_clip(err.message)})")
    if v == "type":
        want = s["type"] if isinstance(s["type"], list) else [s["type"]]
        hint = ""
        word = err.instance.lower() if isinstance(err.instance, str) else None
        if "boolean" in want and "." not in where and word in ("true", "false"):
            # Snakemake's --config reads only True and False as booleans
            hint = f" (on the command line: --config {where}={word.capitalize()})"
        return f"{where} = {_shown(err.instance)} must be of type {' or '.join(want)}{hint}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=",
              "exclusiveMaximum": "<"}[v]
        return f"{where} = {_shown(err.instance)} must be {op} {err.validator_value}"
    if v == "required":
        return f"{where}: {err.message}"
    return f"{where} = {_shown(err.instance)}: {_clip(err.message)}"


def inline_refs(schema: Any, defs: Mapping[str, Any] | None = None) -> Any:
    """``schema`` with every ``{$ref: "#/$defs/<name>", ...}`` replaced by that definition
    (its own keys beside the reference kept) and ``$defs`` dropped: the tree a reader or a
    test walks key by key. The check itself validates the schema as written."""
    if defs is None and isinstance(schema, Mapping):
        defs = schema.get("$defs", {})
    defs = defs or {}
    if isinstance(schema, list):
        return [inline_refs(x, defs) for x in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: inline_refs(v, defs) for k, v in schema.items() if k not in ("$ref", "$defs")}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        out = {**inline_refs(defs[ref.removeprefix("#/$defs/")], defs), **out}
    return out


# ------------------------------------------------------------------ names
_RULE = re.compile(r"^[ \t]*(?:rule|checkpoint)\s+([A-Za-z_]\w*)\s*:", re.M)


def rule_names(workflow_dir: str | os.PathLike = "workflow") -> list[str] | None:
    """The rules of the workflow (``Snakefile`` beside ``workflow_dir`` and
    ``workflow_dir/rules/*.smk``), ``None`` when none is found there."""
    wd = Path(workflow_dir)
    files = [wd.parent / "Snakefile", *sorted((wd / "rules").glob("*.smk"))]
    found = [m for f in files if f.is_file() for m in _RULE.findall(f.read_text())]
    return sorted(set(found)) or None


def name_registry(kind: str, config: Mapping[str, Any],
                  workflow_dir: str | os.PathLike = "workflow") -> list[str] | None:
    """The valid names of a schema key marked ``names: <kind>`` (``None``: not checkable):
    ``arms`` the named arms (:data:`weince.pipeline.arms.ARMS`, every registered loss among
    them), ``vision.arms`` the profile's own vision arms (a grid, tail-fit or norms arm that
    the profile does not train would silently drop its jobs), ``rules`` the workflow's rules
    (keys of ``resources``) and ``default``, ``settings`` the profile's ``dataset/backbone``
    pairs and ``text/<model>`` (the keys of measured step times), ``settings+default`` those
    and ``default`` (the keys of ``node.jobs_per_gpu``)."""
    if kind == "arms":
        return sorted(ARMS)
    if kind == "vision.arms":
        return list(((config.get("vision") or {}).get("arms")) or [])
    if kind in ("settings", "settings+default"):  # "dataset/backbone", "text/<model>"
        v, t = config.get("vision") or {}, config.get("text") or {}
        return ([f"{d}/{b}" for d in v.get("datasets") or [] for b in v.get("backbones") or []]
                + [f"text/{m}" for m in t.get("models") or []]
                + (["default"] if kind == "settings+default" else []))
    if kind == "rules":
        rules = rule_names(workflow_dir)
        return None if rules is None else ["default", *rules]
    raise ValueError(f"schema keyword names: {kind!r} is not a known registry "
                     f"(arms, vision.arms, rules, settings, settings+default)")


def _validator(schema: Mapping[str, Any], config: Mapping[str, Any],
               workflow_dir: str | os.PathLike):
    """The schema's validator class plus the keyword ``names`` (:func:`name_registry`)."""
    cache: dict[str, list[str] | None] = {}

    def names(validator, kind, instance, _schema):
        if not isinstance(instance, str):
            return
        if kind not in cache:
            cache[kind] = name_registry(kind, config, workflow_dir)
        valid = cache[kind]
        if valid is not None and instance not in valid:
            err = jsonschema.ValidationError(f"{instance!r} is not one of {valid}")
            err.cause = ValueError(valid)
            yield err

    base = jsonschema.validators.validator_for(schema)
    return jsonschema.validators.extend(base, {"names": names})


def read_sources(sources: Iterable[str | os.PathLike]) -> dict[str, Any]:
    """Each config file of ``sources`` that exists, read with the bounded loader (a
    :class:`YamlSizeError` names the file whose aliases expand too far)."""
    data: dict[str, Any] = {}
    for src in sources:
        p = Path(src)
        if p.exists():
            data[str(src)] = parse_yaml(p.read_text(), f"config file {src}") or {}
    return data


def config_errors(config: Mapping[str, Any], schema: Mapping[str, Any],
                  sources: Iterable[str | os.PathLike] = (),
                  workflow_dir: str | os.PathLike = "workflow",
                  command_line: Mapping[str, Any] | None = None) -> list[str]:
    """One sentence per problem of ``config`` under ``schema`` (empty when it is valid),
    each prefixed with the file of ``sources`` (or the command line, ``command_line``,
    applied last) that sets the key, when one does."""
    data = read_sources(sources)
    if command_line:
        data[COMMAND_LINE] = command_line
    cls = _validator(schema, config, workflow_dir)
    errors = sorted(cls(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    return [_describe(e, data) for e in errors] + value_errors(config, data)


# ------------------------------------------------------------------ values the schema lets by
#: the longest run each key may ask for, and the figure to compare it with; past it the
#: check refuses (``WEINCE_LONG_RUNS=1``: a warning instead), naming the optimiser steps
RUN_CEILINGS: dict[tuple[str, ...], tuple[int, str]] = {
    ("vision", "pretrain", "epochs"): (1000, "the paper pretrains 100 epochs"),
    ("vision", "linear", "epochs"): (1000, "the paper's probe trains 100 epochs"),
    ("text", "simcse", "epochs"): (100, "SimCSE trains 1 epoch"),
    ("text", "simcse", "max_steps"): (1_000_000, "SimCSE on wiki1m takes ~15,600 steps"),
    ("timing", "config", "loss_reps"): (10_000, "the default is 30"),
    ("timing", "config", "step_reps"): (10_000, "the default is 10"),
}
LONG_RUNS_ENV = "WEINCE_LONG_RUNS"
#: the most of each thing a profile may list, and the figure to compare it with: past it
#: the check refuses (``WEINCE_LONG_RUNS=1``: a warning), as for :data:`RUN_CEILINGS`. A
#: key path ending in ``*`` is each value of that mapping
SEED_CEILING = (100, "the paper uses 4 encoder seeds and 5 probe seeds")
SIZE_CEILINGS: dict[tuple[str, ...], tuple[int, str]] = {
    ("vision", "seeds"): SEED_CEILING,
    ("vision", "grid", "seeds"): SEED_CEILING,
    ("vision", "linear", "seeds"): SEED_CEILING,
    ("vision", "linear", "seeds_by_arm", "*"): SEED_CEILING,
    ("vision", "knn", "split_seeds"): SEED_CEILING,
    ("text", "seeds"): SEED_CEILING,
    ("ablations", "seeds"): SEED_CEILING,
}
#: grid points (margin x kappa_rho x kappa_aic), data sets x backbones
GRID_CEILING = (500, "the paper's grid has 27 points")
SETTINGS_CEILING = (100, "the paper has 5 data sets x 3 backbones = 15")
# the lists an enabled stage needs, all of them or none (a stage with one of them empty
# plans no job, and the summary would read as if it had run)
_STAGE_LISTS = {"vision": ("datasets", "backbones", "arms", "seeds"),
                "text": ("models", "arms", "seeds")}
# lists that, when a profile gives them, must hold something (null / absent: the default)
_NON_EMPTY = [("vision", "linear", "seeds"), ("vision", "knn", "split_seeds"),
              ("timing", "config", "losses"), ("timing", "config", "sizes"),
              ("ablations", "seeds"), ("ablations", "pairs"), ("vision", "pairs")]


def _walk(value: Any, keys: list[Any]) -> Iterable[tuple[list[Any], Any]]:
    """Every leaf of ``value`` with its key path."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _walk(v, keys + [k])
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, keys + [i])
    else:
        yield keys, value


def _enabled(config: Mapping[str, Any], stage: str) -> bool:
    block = config.get(stage)
    return isinstance(block, Mapping) and block.get("enabled", True) is not False


def _mapping(x: Any) -> Mapping[str, Any]:
    """``x`` when it is a mapping, else an empty one."""
    return x if isinstance(x, Mapping) else {}


def _steps(config: Mapping[str, Any], keys: tuple[str, ...], n: int) -> str:
    """The optimiser steps (or repetitions) ``n`` at ``keys`` means for the profile."""
    v = _mapping(config.get("vision"))
    if keys[:2] == ("vision", "pretrain"):
        pre = _mapping(v.get("pretrain"))
        batch = pre.get("batch_size", 256) if isinstance(pre.get("batch_size"), int) else 256
        images = max([SPLIT_IMAGES.get(d, {}).get("train", 50_000) for d in v.get("datasets") or []
                      if isinstance(d, str)] or [50_000])
        cap = pre.get("max_train_images")
        if isinstance(cap, int) and cap > 0:
            images = min(images, cap)
        runs = 1
        for k in ("datasets", "backbones", "arms", "seeds"):
            runs *= max(1, len(v.get(k) or []) if isinstance(v.get(k), list) else 1)
        return (f"about {n * max(1, images // max(batch, 1)):.2e} optimiser steps per encoder, "
                f"{runs} encoder(s) in this profile")
    if keys[-1] == "epochs":
        return f"{n:,} passes over the training set per run"
    return f"{n:,} {'steps' if keys[-1] == 'max_steps' else 'repetitions'} per run"


def value_errors(config: Mapping[str, Any], sources: Mapping[str, Any] | None = None
                 ) -> list[str]:
    """What the schema's types and ranges let by, one sentence each (blamed on the file
    that sets the key, as :func:`config_errors` does): a number that is not finite (YAML
    ``.nan`` / ``.inf`` pass every ``minimum``), a list an enabled stage needs left empty,
    and a run length past its ceiling (:data:`RUN_CEILINGS`; ``WEINCE_LONG_RUNS=1`` turns
    that refusal into a warning on stderr)."""
    sources = sources or {}
    out = []
    for keys, v in _walk(config, []):
        if isinstance(v, float) and not math.isfinite(v):
            out.append(f"{_origin(keys, sources)}{_path(keys)} = {v!r} is not a finite "
                       f"number; give a finite value (YAML reads .nan and .inf as numbers)")
    for stage, names in _STAGE_LISTS.items():
        block = config.get(stage)
        if not _enabled(config, stage) or not isinstance(block, Mapping):   # enabled: a mapping
            continue
        lists = {n: block.get(n) for n in names}
        empty = [n for n, x in lists.items() if isinstance(x, list) and not x]
        if empty and (len(empty) < len(names) or "enabled" in block):
            given = [n for n in names if n not in empty]
            for n in empty:
                out.append(f"{_origin([stage, n], sources)}{stage}.{n} is empty while "
                           f"{stage}.enabled is true"
                           + (f" and {stage}.{', '.join(given)} are set" if given else "")
                           + f": the {stage} stage would plan no job and the summary would "
                             f"read as if it had run; list at least one, or set "
                             f"{stage}.enabled: false")
    for where in _NON_EMPTY:
        x = _lookup(config, list(where))
        if isinstance(x, list) and not x and _enabled(config, where[0]):
            out.append(f"{_origin(list(where), sources)}{_path(where)} is empty: nothing would "
                       f"run for it; list at least one (or leave the key out for the "
                       f"default)")
    g = _lookup(config, ["vision", "grid"])
    if isinstance(g, Mapping) and g.get("arms") and isinstance(g.get("seeds"), list) \
            and not g["seeds"]:
        out.append(f"{_origin(['vision', 'grid', 'seeds'], sources)}vision.grid.seeds is "
                   f"empty while vision.grid.arms is set: no grid point would be trained and "
                   f"no point chosen; list the seeds (e.g. [7])")
    out += _ceiling_errors(config, sources) + _quota_errors(config, sources)
    return out


def _quota_errors(config: Mapping[str, Any], sources: Mapping[str, Any]) -> list[str]:
    """``disk.quota`` and ``$WEINCE_DISK_QUOTA`` (which overrides it) must read as a size:
    the start-up disk check compares the run's peak with it."""
    out = []
    given = [(f"{_origin(['disk', 'quota'], sources)}disk.quota",
              _lookup(config, ["disk", "quota"])),
             ("the environment: WEINCE_DISK_QUOTA", os.environ.get("WEINCE_DISK_QUOTA"))]
    for where, value in given:
        if value in (None, "", _NOTHING):
            continue
        try:
            parse_size(value)
        except ValueError:
            out.append(f"{where} = {_shown(value)} is not a size; write one such as 2TB, "
                       f"500GB or a number of bytes (or null: only the free space counts)")
    return out


def _ceiling_errors(config: Mapping[str, Any], sources: Mapping[str, Any]) -> list[str]:
    out = []
    targets = list(RUN_CEILINGS.items())
    by_ds = _lookup(config, ["vision", "pretrain_by_dataset"])
    if isinstance(by_ds, Mapping):   # per-data-set overrides share the pretraining ceiling
        targets += [(("vision", "pretrain_by_dataset", d, "epochs"),
                     RUN_CEILINGS[("vision", "pretrain", "epochs")]) for d in by_ds]
    for keys, (ceiling, compare) in targets:
        n = _lookup(config, list(keys))
        if not isinstance(n, int) or isinstance(n, bool) or n <= ceiling:
            continue
        out += _past_ceiling(f"{_origin(list(keys), sources)}{_path(keys)} = {n:,} is past "
                             f"the ceiling of {ceiling:,} ({compare}): "
                             f"{_steps(config, keys, n)}")
    return out


def _past_ceiling(msg: str) -> list[str]:
    """``msg`` as a refusal, or printed as a warning when ``WEINCE_LONG_RUNS`` is set."""
    if os.environ.get(LONG_RUNS_ENV):
        print(f"warning: {msg} ({LONG_RUNS_ENV} is set: running it)", file=sys.stderr)
        return []
    return [f"{msg}; lower it, or set {LONG_RUNS_ENV}=1 to run it anyway"]


def _sized(config: Mapping[str, Any], keys: tuple[str, ...]) -> list[tuple[list[Any], int]]:
    """The lists at ``keys`` (``*``: each value of the mapping there) with their lengths."""
    if keys[-1] != "*":
        x = _lookup(config, list(keys))
        return [(list(keys), len(x))] if isinstance(x, list) else []
    m = _mapping(_lookup(config, list(keys[:-1])))
    return [([*keys[:-1], k], len(v)) for k, v in m.items() if isinstance(v, list)]


def _count(block: Mapping[str, Any], names: tuple[str, ...]) -> int:
    n = 1
    for k in names:
        x = block.get(k)
        n *= max(1, len(x)) if isinstance(x, list) else 1
    return n


def _size_errors(config: Mapping[str, Any], sources: Mapping[str, Any]) -> list[str]:
    """Lists longer than their ceiling (:data:`SIZE_CEILINGS`), more grid points than
    :data:`GRID_CEILING`, more data-set x backbone settings than :data:`SETTINGS_CEILING`:
    a dry run of such a profile would spend minutes and gigabytes building its DAG."""
    out = []
    for keys, (ceiling, compare) in SIZE_CEILINGS.items():
        for where, n in _sized(config, keys):
            if n > ceiling:
                out += _past_ceiling(f"{_origin(where, sources)}{_path(where)} lists {n:,} "
                                     f"seeds, past the ceiling of {ceiling:,} ({compare})")
    v = _mapping(config.get("vision"))
    grid = _mapping(v.get("grid"))
    axes = ("margin", "kappa_rho", "kappa_aic")
    points = _count(grid, axes)
    if points > GRID_CEILING[0] and grid.get("arms"):
        out += _past_ceiling(
            f"{_origin(['vision', 'grid'], sources)}vision.grid has {points:,} points "
            f"({' x '.join(str(len(grid.get(a) or []) or 1) for a in axes)}: "
            f"vision.grid.{', '.join(axes)}), past the ceiling of {GRID_CEILING[0]:,} "
            f"({GRID_CEILING[1]})")
    settings = _count(v, ("datasets", "backbones"))
    if settings > SETTINGS_CEILING[0] and _enabled(config, "vision"):
        out += _past_ceiling(
            f"{_origin(['vision', 'datasets'], sources)}vision.datasets x vision.backbones "
            f"= {len(v.get('datasets') or [])} x {len(v.get('backbones') or [])} = "
            f"{settings:,} settings, past the ceiling of {SETTINGS_CEILING[0]:,} "
            f"({SETTINGS_CEILING[1]})")
    return out


def oversized_key(config: Mapping[str, Any], limit: int = MAX_VALUES) -> str | None:
    """The deepest mapping key under which ``config`` expands past ``limit`` values (shared
    parts counted as often as they are referenced: YAML aliases) and why, or None when it
    does not."""
    try:
        expanded_size(config, value_children, limit=limit)
        return None
    except YamlSizeError as err:
        problem = str(err)
    keys: list[Any] = []
    node: Any = config
    while isinstance(node, Mapping):   # the key that holds it (not an item of its list)
        for k, v in node.items():
            try:
                expanded_size(v, value_children, limit=limit)
            except YamlSizeError as err:
                keys, node, problem = keys + [k], v, str(err)
                break
        else:
            break
    return f"{_path(keys)}: {problem}"


def _scalar(text: str) -> Any:
    """A ``--config`` value as Snakemake reads a top-level one: int, float, ``True`` /
    ``False``, else YAML."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    try:
        return parse_yaml(text)
    except Exception:   # noqa: BLE001 - not YAML: the string as given
        return text


def _retype(over: Any, conf: Any) -> Any:
    """``over`` with each string leaf parsed (:func:`_scalar`); the same leaves of ``conf``
    (the merged config, a dict or list) replaced where they still hold the string."""
    if isinstance(over, dict):
        out = {}
        for k, v in over.items():
            sub = conf.get(k) if isinstance(conf, dict) else None
            out[k] = new = _retype(v, sub)
            if isinstance(conf, dict) and isinstance(v, str) and conf.get(k) == v:
                conf[k] = new
        return out
    if isinstance(over, list):
        items = []
        for i, v in enumerate(over):
            sub = conf[i] if isinstance(conf, list) and i < len(conf) else None
            items.append(_retype(v, sub))
            if isinstance(conf, list) and i < len(conf) and isinstance(v, str) and conf[i] == v:
                conf[i] = items[-1]
        return items
    return _scalar(over) if isinstance(over, str) else over


def retype_overrides(config: dict[str, Any], overrides: Mapping[str, Any] | None
                     ) -> dict[str, Any]:
    """The ``--config`` overrides with nested values typed, and ``config`` with them.

    Snakemake parses a top-level ``--config key=value`` as a number, a boolean or YAML, but
    a nested one (``vision={pretrain: {batch_size: 128}}``) arrives with every value a
    string (``'128'``); each is parsed here as the top-level ones are, in the returned
    overrides and in ``config`` (the merged config the rules read) where it holds them."""
    out = {}
    for k, v in (overrides or {}).items():
        out[k] = _retype(v, config.get(k)) if isinstance(v, (dict, list)) else v
    return out


def check_config(config: dict[str, Any], schema: str | os.PathLike | Mapping[str, Any],
                 sources: Iterable[str | os.PathLike] = (),
                 command_line: Mapping[str, Any] | None = None, *,
                 fill_defaults: bool = True,
                 workflow_dir: str | os.PathLike = "workflow") -> None:
    """Raise :class:`ConfigError` naming ``sources`` (the config files, applied in this
    order) and every problem of ``config`` under ``schema`` (a schema dict or its YAML file),
    each blamed on the file or the command line (``command_line``: the ``--config``
    overrides, :func:`retype_overrides`) that sets the refused value; else, with
    ``fill_defaults``, fill the keys the config leaves out with the schema's defaults (in
    place). ``workflow_dir``: the workflow's folder (its rule names are the valid keys of
    ``resources``)."""
    schema_d = schema if isinstance(schema, Mapping) else read_schema(schema)
    # a file named twice (Snakemake lists a --configfile in configfiles and again in
    # overwrite_configfiles) counts where it is applied last
    names = list(reversed(dict.fromkeys(str(s) for s in reversed(list(sources)))))
    files = ", ".join(names + ([COMMAND_LINE] if command_line else [])) or "the config"
    # the size first, before anything walks the config: Snakemake reads the config files
    # itself, keeping an alias as one shared value, so an alias bomb costs nothing until
    # the first walk (the schema check's) copies it out. Each file with the bounded loader
    # (naming the file), then the merged config (a --config value)
    try:
        data = read_sources(names)
    except YamlSizeError as err:
        raise ConfigError(f"invalid workflow config ({files}): {err}") from None
    big = oversized_key(config)
    if big:
        raise ConfigError(f"invalid workflow config ({files}): {big} (refused before any "
                          f"check or job)")
    # then the sizes (ten thousand seeds): refused before the schema check walks them
    sizes = _size_errors(config, {**data, **({COMMAND_LINE: command_line} if command_line
                                             else {})})
    if sizes:
        raise ConfigError(f"invalid workflow config ({files}):\n  - " + "\n  - ".join(sizes))
    problems = config_errors(config, schema_d, names, workflow_dir, command_line)
    if problems:
        more = len(problems) - MAX_PROBLEMS
        shown = problems[:MAX_PROBLEMS] + ([f"... and {more} more"] if more > 0 else [])
        raise ConfigError(f"invalid workflow config ({files}):\n  - " + "\n  - ".join(shown))
    if fill_defaults:   # the schema's defaults, as Snakemake's validate(set_default=True)
        fill_schema_defaults(config, schema_d)   # without a second pass of the schema


def set_run_environment(prof: Profile, site: object = None) -> None:
    """The environment every job of a run inherits from Snakemake's process: with
    ``offline: true``, ``HF_HUB_OFFLINE=1`` (the Hugging Face libraries read it when they
    are imported, so it is set before any job starts); with a site label
    (``--config site=NAME``), ``WEINCE_SITE`` for every result's provenance."""
    if prof.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    if site:
        os.environ["WEINCE_SITE"] = str(site)
