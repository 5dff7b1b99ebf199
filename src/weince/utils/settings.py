"""A stage's settings typed once: a dataclass whose fields say their type, default and range,
from which the workflow config's schema block is generated.

    @dataclass
    class SimCLRConfig:
        epochs: int = setting(100, ge=1)
        tau: float = setting(0.5, gt=0, le=10)
        dataset: str = setting("digits", ref="dataset")   # a name of the schema's $defs

    json_schema(SimCLRConfig)    # {"type": "object", "additionalProperties": false, ...}
    bound_problems(cfg)          # ["epochs must be >= 1, got 0"] for a config out of range

The annotation gives the JSON type (``int`` -> integer, ``float`` -> number, ``str``,
``bool``, ``dict`` -> object, ``list[X]`` and ``tuple[X, ...]`` -> an array of X, ``X | None``
adds null, ``Literal[...]`` an enum); ``setting`` adds the bounds (``ge``/``gt``/``le``/
``lt``), a reference to a list of names the schema defines once (``ref``) and a
description. A new key is one line of its dataclass: the
schema follows (``weince.pipeline.config_check.read_schema``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["setting", "json_schema", "bound_problems", "listed_fields", "BOUNDS"]

#: setting()'s bound keywords and the JSON-schema keyword each one is
BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}
_HOLDS: dict[str, Callable[[float, float], bool]] = {
    "ge": lambda v, b: v >= b, "gt": lambda v, b: v > b,
    "le": lambda v, b: v <= b, "lt": lambda v, b: v < b}
_SIGN = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean",
               dict: "object", list: "array"}


def setting(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None,
            ref: str | None = None, description: str | None = None, per_run: bool = False,
            **bounds: float) -> Any:
    """A dataclass field with its schema facts: ``default`` (or ``factory`` for a mutable
    one), bounds ``ge``/``gt``/``le``/``lt``, ``ref`` (a ``$defs`` name: the field's
    values are that list's) and ``description``. ``per_run``: the workflow sets the field
    for each run (its data set, seed, loss), so the run's rerun trigger always lists it
    (:func:`listed_fields`)."""
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise TypeError(f"setting() bounds are {sorted(BOUNDS)}, got {sorted(unknown)}")
    meta = {"bounds": bounds, "ref": ref, "description": description, "per_run": per_run}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_schema(tp: Any) -> dict[str, Any]:
    """The JSON-schema type of one annotation."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [_type_schema(a) for a in args if a is not type(None)]
        nullable = type(None) in args
        if len(parts) > 1:   # str | bool: one of the plain types
            if not all(set(p) == {"type"} for p in parts):
                raise TypeError(f"no JSON type for the union {tp!r}")
            return {"type": [p["type"] for p in parts] + (["null"] if nullable else [])}
        (part,) = parts
        if not nullable:
            return part
        if "enum" in part:
            return {"enum": [None, *part["enum"]]}
        return {"type": [part["type"], "null"]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple) and args:   # list[X] or tuple[X, ...]: an array of X
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            raise TypeError(f"no JSON type for the fixed-length tuple {tp!r}")
        return {"type": "array", "items": _type_schema(args[0])}
    base = origin or tp
    if base in _JSON_TYPES:
        return {"type": _JSON_TYPES[base]}
    raise TypeError(f"no JSON type for the annotation {tp!r}")


def json_schema(cls: type) -> dict[str, Any]:
    """The schema of a settings dataclass: a closed object, one property per field."""
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata
        prop = _type_schema(hints[f.name])
        # a list's ref and bounds are its items'
        target = prop["items"] if prop.get("type") == "array" and "items" in prop else prop
        if meta.get("ref"):
            ref = {"$ref": f"#/$defs/{meta['ref']}"}
            nullable = type(None) in typing.get_args(hints[f.name])
            if target is prop:
                prop = target = {"oneOf": [{"type": "null"}, ref]} if nullable else ref
            else:
                prop["items"] = target = ref
        target.update({BOUNDS[k]: v for k, v in (meta.get("bounds") or {}).items()})
        if meta.get("description"):
            prop["description"] = meta["description"]
        props[f.name] = prop
    return {"type": "object", "additionalProperties": False, "properties": props}


def bound_problems(cfg: Any, prefix: str = "") -> list[str]:
    """One sentence per field of the dataclass instance ``cfg`` outside its bounds (a
    list's bounds are its items')."""
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        items = list(enumerate(value)) if isinstance(value, (list, tuple)) else [(None, value)]
        for i, v in items:
            if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            name = f"{prefix}{f.name}" + ("" if i is None else f"[{i}]")
            for k, b in (f.metadata.get("bounds") or {}).items():
                if not _HOLDS[k](v, b):
                    out.append(f"{name} must be {_SIGN[k]} {b:g}, got {v!r}")
    return out


def listed_fields(cfg: Any, given: Iterable[str], order: Iterable[str] = ()) -> list[str]:
    """The fields of the dataclass instance ``cfg`` that a rerun trigger lists: those in
    ``given`` (the keys its config block sets, in that order), those marked
    ``setting(per_run=True)`` and those whose value differs from the field's default, the
    last two in ``order`` (the order the run sets them), then in field order. So a field
    added at its default lists nothing new, and any value off its default is listed."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}

    def default(f: dataclasses.Field) -> Any:
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        return f.default

    def listed(name: str) -> bool:
        f = fields[name]
        return bool(f.metadata.get("per_run")) or getattr(cfg, name) != default(f)

    rest = [n for n in (*order, *fields) if n in fields and listed(n)]
    return list(dict.fromkeys([*(n for n in given if n in fields), *rest]))
