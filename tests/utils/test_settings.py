"""A stage's settings typed once (weince.utils.settings): the dataclass's annotations and
setting() bounds are the schema block, the range check and the coercion's types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from weince.utils.config import config_from_dict
from weince.utils.settings import bound_problems, json_schema, setting


@dataclass
class Demo:
    n: int = setting(3, ge=1)
    rate: float = setting(0.5, gt=0, le=10)
    frac: float = setting(0.2, ge=0, lt=1)
    name: str = setting("digits", ref="dataset")
    maybe: int | None = setting(None, ge=1, description="none: all")
    mode: Literal["a", "b"] = "a"
    opt_mode: Literal["x", "y"] | None = None
    flag: bool = False
    extra: dict = setting(factory=dict)
    where: str | None = setting(None, ref="dataset")
    sizes: list[int] = setting(factory=lambda: [4, 8], ge=2)
    names: list[str] = setting(factory=list, ref="loss")
    mode_or_flag: str | bool = "eager"


def test_the_schema_block_is_the_dataclass():
    s = json_schema(Demo)
    assert s["type"] == "object" and s["additionalProperties"] is False
    assert s["properties"] == {
        "n": {"type": "integer", "minimum": 1},
        "rate": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
        "frac": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        "name": {"$ref": "#/$defs/dataset"},
        "maybe": {"type": ["integer", "null"], "minimum": 1, "description": "none: all"},
        "mode": {"enum": ["a", "b"]},
        "opt_mode": {"enum": [None, "x", "y"]},
        "flag": {"type": "boolean"},
        "extra": {"type": "object"},
        "where": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/dataset"}]},
        "sizes": {"type": "array", "items": {"type": "integer", "minimum": 2}},
        "names": {"type": "array", "items": {"$ref": "#/$defs/loss"}},
        "mode_or_flag": {"type": ["string", "boolean"]},
    }
    assert Demo().extra == {} and Demo().extra is not Demo().extra   # factory, not shared


def test_bounds_are_checked_from_the_same_declaration():
    assert bound_problems(Demo()) == []
    bad = Demo(n=0, rate=0.0, frac=1.0, maybe=0, sizes=[4, 1])
    assert bound_problems(bad, "x.") == ["x.n must be >= 1, got 0", "x.rate must be > 0, got 0.0",
                                         "x.frac must be < 1, got 1.0",
                                         "x.maybe must be >= 1, got 0",
                                         "x.sizes[1] must be >= 2, got 1"]
    with pytest.raises(ValueError, match="Demo config: n must be >= 1, got 0"):
        config_from_dict(Demo, {"n": 0})
    # a config the workflow's schema check passed is typed, not checked again
    assert config_from_dict(Demo, {"n": 0}, checked=True).n == 0
    assert config_from_dict(Demo, {"rate": 1}).rate == 1.0 and isinstance(
        config_from_dict(Demo, {"rate": 1}, checked=True).rate, float)


def test_a_bound_setting_does_not_know_is_refused():
    with pytest.raises(TypeError, match="bounds are"):
        setting(1, minimum=1)
