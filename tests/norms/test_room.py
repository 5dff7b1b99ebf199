"""The norms room: everything about N1-N3 in ``weince.norms``, below the report and the
pipeline, behind a package face that loads nothing."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import weince.norms
import weince.norms.rules as norms_verdicts
from weince.report.verdicts import KINDS, RULES

ROOM = Path(weince.norms.__file__).resolve().parent


def _weince_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return {m for m in found if m.startswith("weince")}


def test_the_room_imports_neither_the_report_nor_the_pipeline():
    bad = {f"{p.name}: {m}" for p in ROOM.glob("*.py") for m in _weince_imports(p)
           if m.split(".")[1] in ("report", "pipeline", "cli", "bundle", "cost")}
    assert not bad, sorted(bad)


def test_the_package_face_is_a_docstring_that_imports_nothing():
    tree = ast.parse((ROOM / "__init__.py").read_text())
    assert ast.get_docstring(tree)
    assert [type(n) for n in tree.body] == [ast.Expr], "weince/norms/__init__.py has code"
    assert type(weince.norms) is types.ModuleType
    assert not hasattr(weince.norms, "__getattr__")


def test_the_registry_maps_kind_norms_to_the_rooms_evaluator():
    kind = KINDS["norms"]
    assert kind.evaluate is norms_verdicts.evaluate_norms_claim and kind.rule is None
    assert RULES["norms"] is norms_verdicts.RULE
    claim = {"kind": "norms", "verdict_key": "verdicts.N2", "tolerance": 0.0,
             "rows": [{"backbone": "clip_vit_b32"}, {"model": "minilm-l12"}]}
    assert norms_verdicts.rule_fields(claim) == {"models": "clip_vit_b32, minilm-l12",
                                                 "unit_rule": norms_verdicts.UNIT_RULES["N2"]}
    assert norms_verdicts.rule_fields({**claim, "verdict_key": "verdicts.N9"})["unit_rule"] \
        == "its unit verdict says so"


def test_the_page_and_the_claim_rules_load_without_torch(modules_loaded):
    code = ("import weince.norms.page, weince.norms.rules, weince.norms.files, "
            "weince.norms.figures")
    assert modules_loaded(code, ["torch", "matplotlib"]) == {"torch": False,
                                                             "matplotlib": False}
