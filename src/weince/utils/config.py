"""Dataclass configs from a dict, a YAML file and ``--set key=value`` overrides.

Every stage's options are a ``@dataclass`` (e.g. ``weince.train.simclr.SimCLRConfig``).
This module turns user input into such a dataclass, strictly: an unknown key is a
``ValueError`` that names the key and lists the valid ones, so a typo in a config file
never silently falls back to a default.

    from weince.utils.config import load_config, to_dict
    cfg = load_config(SimCLRConfig, "cfg.yaml", ["epochs=2", "loss_kwargs.margin=0"])
    to_dict(cfg)    # plain dict, JSON/YAML-able

Values given as strings are coerced to the field's annotated type where that is
unambiguous (PyYAML reads ``3e-4`` as a *string*, so ``lr: 3e-4`` must still work).
Override values are parsed as YAML (``--set seeds=[0,1]``, ``--set amp=false``).
A dotted key ``a.b=v`` sets entry ``b`` of the dict (or nested dataclass) field ``a``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import types
import typing
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from weince.utils.settings import bound_problems

__all__ = ["deep_merge", "expand_data_root", "parse_yaml", "check_yaml_text", "check_yaml_file",
           "event_size", "expanded_size",
           "value_children", "YamlSizeError",
           "MAX_VALUES", "MAX_DEPTH", "load_config", "config_from_dict", "to_dict",
           "parse_overrides",
           "apply_overrides", "as_config", "add_config_arguments", "config_from_args"]

# libyaml's parser when PyYAML was built with it (the wheels are): the same values as
# yaml.safe_load (same constructor and resolver), about ten times faster, which matters in
# the workflow, where the claims registry and the configs are read in every job
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: the most values (scalars, lists and mappings, each alias counted as what it expands to)
#: a YAML document or a config may hold: the largest file the workflow reads, the config
#: schema, has ~2,600 (the paper profile's config ~500), so only an alias bomb (nine
#: aliases of nine aliases ...) or a runaway generated file comes near it
MAX_VALUES = 200_000
MAX_DEPTH = 64   # nesting levels (the configs nest at most 6)


class YamlSizeError(ValueError):
    """A YAML document (or a config built from one) expands past :data:`MAX_VALUES` values,
    nests deeper than :data:`MAX_DEPTH` levels, or holds a value that contains itself."""


def expanded_size(root: Any, children, *, limit: int = MAX_VALUES,
                  max_depth: int = MAX_DEPTH) -> int:
    """The number of values ``root`` stands for once every shared part is copied out (an
    alias or a list referenced twice counts twice), computed without copying anything:
    each distinct container is visited once (``children(node)`` lists its parts, empty for
    a scalar). Raises :class:`YamlSizeError` (without a file name: the caller adds it) as
    soon as the count passes ``limit``, the nesting passes ``max_depth``, or a container
    holds itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    # frames: [node, its parts, index of the next part to visit, depth]
    stack: list[list[Any]] = [[root, None, 0, 1]]
    while stack:
        frame = stack[-1]
        node, parts, i, depth = frame
        if parts is None:
            parts = frame[1] = list(children(node))
            if not parts:
                stack.pop()
                sizes[id(node)] = 1
                continue
            if depth > max_depth:
                raise YamlSizeError(f"it nests more than {max_depth} levels deep; flatten it")
            on_path.add(id(node))
        while i < len(parts) and id(parts[i]) in sizes:
            i += 1
        frame[2] = i
        if i < len(parts):
            child = parts[i]
            if id(child) in on_path:
                raise YamlSizeError("a value contains itself (an anchor used inside its own "
                                    "value); write the value out")
            stack.append([child, None, 0, depth + 1])
            continue
        stack.pop()
        on_path.discard(id(node))
        total = 1 + sum(sizes[id(c)] for c in parts)
        if total > limit:
            raise YamlSizeError(f"it expands to more than {limit:,} values (aliases of "
                                f"aliases: an alias bomb); write the values out instead of "
                                f"aliasing them")
        sizes[id(node)] = total
    return sizes[id(root)]


def value_children(obj: Any) -> list:
    """The parts of a loaded value (a mapping's keys and values, a list's items) for
    :func:`expanded_size`."""
    if isinstance(obj, dict):
        return [x for kv in obj.items() for x in kv]
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return []


def _add(stack: list[list[Any]], n: int, limit: int) -> None:
    """Add ``n`` values to the innermost open container (or the document's count)."""
    stack[-1][0] += n
    if stack[-1][0] > limit:
        raise YamlSizeError(f"it expands to more than {limit:,} values (aliases of aliases: "
                            f"an alias bomb); write the values out instead of aliasing them")


def event_size(text: str, *, limit: int = MAX_VALUES, max_depth: int = MAX_DEPTH) -> int:
    """The number of values the YAML ``text`` stands for once every alias is copied out,
    counted on its event stream (nothing is built: no node, no value): an anchored
    value's count is kept, an alias adds it. Raises :class:`YamlSizeError` as soon as the
    count passes ``limit``, the nesting ``max_depth``, or an alias names the value it is
    in; a stream the parser rejects is left to the load that follows (0)."""
    anchors: dict[str, int] = {}
    stack: list[list[Any]] = [[0, None]]     # [values so far, anchor] per open container
    try:
        for ev in yaml.parse(text, Loader=_SAFE_LOADER):
            if isinstance(ev, yaml.AliasEvent):
                if any(frame[1] == ev.anchor for frame in stack):
                    raise YamlSizeError("a value contains itself (an anchor used inside "
                                        "its own value); write the value out")
                _add(stack, anchors.get(ev.anchor, 1), limit)
            elif isinstance(ev, yaml.ScalarEvent):
                _add(stack, 1, limit)
                if ev.anchor:
                    anchors[ev.anchor] = 1
            elif isinstance(ev, yaml.CollectionStartEvent):
                if len(stack) > max_depth:
                    raise YamlSizeError(f"it nests more than {max_depth} levels deep; "
                                        f"flatten it")
                stack.append([1, ev.anchor])
            elif isinstance(ev, yaml.CollectionEndEvent):
                n, anchor = stack.pop()
                if anchor:
                    anchors[anchor] = n
                _add(stack, n, limit)
    except yaml.YAMLError:
        return 0   # the load that follows names the syntax error
    return int(stack[0][0])


def check_yaml_text(text: str, what: str = "YAML text") -> None:
    """Refuse, in one line naming ``what``, a document whose aliases expand past
    :data:`MAX_VALUES` values (or that nests past :data:`MAX_DEPTH`, or holds itself),
    from its event stream, before any object is built (:func:`event_size`). A document
    without an anchor (``&``) cannot alias anything: it is not parsed twice."""
    if "&" not in text:
        return
    try:
        event_size(text)
    except YamlSizeError as err:
        raise YamlSizeError(f"{what}: refused before loading: {err}") from None


def check_yaml_file(path: str | os.PathLike, what: str | None = None) -> None:
    """:func:`check_yaml_text` on the file at ``path`` (read as text; a file that does not
    exist or is not UTF-8 text is left to its loader); a config file that asks Snakemake to
    run it as a YTE template (a top-level ``__use_yte__`` key: Snakemake's loader then
    evaluates the Python expressions it holds) is refused too, from its events."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return
    what = what or f"config file {path}"
    check_yaml_text(text, what)
    if "__use_yte__" in text and _has_key(text, "__use_yte__"):
        raise YamlSizeError(f"{what}: asks Snakemake to run it as a YTE template "
                            f"(`__use_yte__`), which evaluates the Python expressions it "
                            f"holds; the workflow's configs are plain YAML (refused)")


def _has_key(text: str, key: str) -> bool:
    """Whether the (bounded) YAML mapping of ``text`` has ``key`` at its top level."""
    try:
        data = yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and key in data


def parse_yaml(text: str, what: str = "YAML text") -> Any:
    """``yaml.safe_load(text)``, with libyaml's parser where available, bounded: aliases that
    expand past :data:`MAX_VALUES` values are refused first (:func:`check_yaml_text`,
    a :class:`YamlSizeError` naming ``what``)."""
    check_yaml_text(text, what)
    return yaml.load(text, Loader=_SAFE_LOADER)


T = TypeVar("T")


def to_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass config (nested ones included) as a plain dict; tuples become lists."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"to_dict expects a dataclass instance, got {type(cfg).__name__}")

    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, Path):
            return str(v)
        return v

    return plain(dataclasses.asdict(cfg))


def _coerce(value: Any, tp: Any, name: str) -> Any:
    """Coerce ``value`` to the annotation ``tp`` where unambiguous; else return it as is."""
    if tp is Any or value is None:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _coerce(value, non_none[0], name)
        for a in non_none:  # first member that accepts the value unchanged
            if isinstance(a, type) and isinstance(value, a):
                return value
        return value
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"config key {name!r} must be one of {list(args)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):
            return value
        if isinstance(value, dict):
            return config_from_dict(tp, value, _prefix=name + ".")
        raise ValueError(f"config key {name!r} must be a mapping for {tp.__name__}, "
                         f"got {type(value).__name__}")
    if origin in (tuple, list):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            value = [value]
        if args and not (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
            if origin is tuple and len(args) != len(list(value)):
                raise ValueError(f"config key {name!r} needs {len(args)} values, got {value!r}")
            item_types = list(args) if origin is tuple else [args[0]] * len(list(value))
        else:
            item_types = [args[0] if args else Any] * len(list(value))
        out = [_coerce(v, t, f"{name}[{i}]") for i, (v, t) in enumerate(zip(value, item_types))]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"config key {name!r} must be a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ValueError(f"config key {name!r} must be true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ValueError(f"config key {name!r} must be an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                f = float(value)
            except ValueError:
                f = None
            if f is not None and f.is_integer():
                return int(f)
        raise ValueError(f"config key {name!r} must be an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ValueError(f"config key {name!r} must be a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ValueError(f"config key {name!r} must be a number, got {value!r}")
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ValueError(f"config key {name!r} must be a string, got {value!r}")
    return value


def config_from_dict(cls: type[T], d: dict[str, Any] | None, *, checked: bool = False,
                     _prefix: str = "") -> T:
    """Build ``cls`` (a dataclass) from a mapping; unknown keys raise ``ValueError``.

    Missing keys take the dataclass defaults; a field without a default that is missing
    is a ``ValueError`` too. Values are coerced to the annotated field types, and a value
    outside its field's bounds (``weince.utils.settings.setting``) is a ``ValueError``
    naming them, unless ``checked`` (the mapping was validated against the schema generated
    from ``cls``: the workflow's config check).
    """
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise TypeError(f"config_from_dict expects a dataclass type, got {cls!r}")
    d = {} if d is None else d
    if not isinstance(d, dict):
        raise ValueError(f"a {cls.__name__} config must be a mapping, got {type(d).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in d if k not in fields]
    if unknown:
        raise ValueError(
            f"unknown config key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(_prefix + str(k)) for k in unknown)} for {cls.__name__}; "
            f"valid keys: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for k, v in d.items():
        kwargs[k] = _coerce(v, hints.get(k, Any), _prefix + k)
    missing = [n for n, f in fields.items() if n not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError(f"{cls.__name__} config is missing required key(s) "
                         f"{', '.join(repr(_prefix + m) for m in missing)}")
    cfg = cls(**kwargs)
    problems = [] if checked else bound_problems(cfg, _prefix)
    if problems:
        raise ValueError(f"{cls.__name__} config: {'; '.join(problems)}")
    return cfg


def parse_overrides(overrides: Iterable[str]) -> list[tuple[str, Any]]:
    """``["a=1", "b.c=[1,2]"]`` -> ``[("a", 1), ("b.c", [1, 2])]`` (values parsed as YAML)."""
    out = []
    for item in overrides or ():
        if "=" not in item:
            raise ValueError(f"override {item!r} is not of the form key=value "
                             f"(e.g. --set epochs=2)")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ValueError(f"override {item!r} has an empty key")
        try:
            value = parse_yaml(raw, f"override {item!r}") if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out.append((key, value))
    return out


def apply_overrides(d: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A copy of ``d`` with ``key=value`` overrides applied (dotted keys go into sub-dicts)."""
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in (d or {}).items()}
    for key, value in parse_overrides(overrides):
        parts = key.split(".")
        node = d
        for p in parts[:-1]:
            sub = node.get(p)
            if sub is None:
                sub = node[p] = {}
            elif not isinstance(sub, dict):
                raise ValueError(f"override {key!r}: {p!r} is not a mapping (it is {sub!r})")
            else:
                sub = node[p] = dict(sub)
            node = sub
        node[parts[-1]] = value
    return d


def _read_yaml(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"config file {path} does not exist; pass an existing YAML file "
                                f"to --config (or omit it to use the defaults)")
    data = parse_yaml(path.read_text(), f"config file {path}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a YAML mapping (key: value lines), "
                         f"got {type(data).__name__}")
    return data


def _to_mapping(cfg: Any) -> dict[str, Any]:
    """A dataclass instance or mapping as a shallow dict (nested dataclasses as dicts)."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: (to_dict(getattr(cfg, f.name))
                         if dataclasses.is_dataclass(getattr(cfg, f.name))
                         else getattr(cfg, f.name))
                for f in dataclasses.fields(cfg) if f.init}
    return dict(cfg or {})


def load_config(cls: type[T], path: str | os.PathLike | dict | None = None,
                overrides: Iterable[str] = ()) -> T:
    """``cls`` from a YAML file (or a dict, or ``None`` = defaults) plus ``key=value``
    overrides, applied in order. Unknown keys raise ``ValueError`` naming them."""
    if path is None:
        base: dict[str, Any] = {}
    elif isinstance(path, dict) or dataclasses.is_dataclass(path):
        base = _to_mapping(path)
    else:
        base = _read_yaml(path)
    return config_from_dict(cls, apply_overrides(base, overrides))


def as_config(cls: type[T], cfg: T | dict[str, Any] | None) -> T:
    """Accept a ``cls`` instance (returned as is), a dict or ``None`` (defaults)."""
    if isinstance(cfg, cls):
        return cfg
    return config_from_dict(cls, _to_mapping(cfg))


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config FILE`` and repeatable ``--set key=value`` to a CLI parser."""
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="YAML file with config keys (defaults when omitted)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override one config key (value parsed as YAML; repeatable; "
                             "dotted keys reach into mappings, e.g. loss_kwargs.margin=0; "
                             "default: none)")


def config_from_args(cls: type[T], args: argparse.Namespace) -> T:
    """The config of a CLI call made with :func:`add_config_arguments`."""
    return load_config(cls, getattr(args, "config", None), getattr(args, "overrides", ()) or ())


def deep_merge(base: MutableMapping[str, Any], over: dict[str, Any]) -> MutableMapping[str, Any]:
    """Merge ``over`` into ``base`` in place, dict by dict (other values replace)."""
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def expand_data_root(value: Any, data_root: str) -> Any:
    """``value`` with ``{data_root}`` replaced in every string it holds."""
    if isinstance(value, str):
        return value.replace("{data_root}", str(data_root))
    if isinstance(value, list):
        return [expand_data_root(v, data_root) for v in value]
    if isinstance(value, dict):
        return {k: expand_data_root(v, data_root) for k, v in value.items()}
    return value
