"""docs/protocol.md's step table: each step of the authors' main.py, linear_evaluation.py
and knn_eval.py is linked to one function of ours, by file and name; every file and name it
gives exists (a renamed or moved function fails here, not in a reader's hands)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "protocol.md"
BEGIN, END = "<!-- steps:", "<!-- end of the steps -->"
SCRIPTS = ("main.py", "linear_evaluation.py", "knn_eval.py")
CELL = re.compile(r"^`([\w/.]+\.py)`: `([\w.]+)`$")


def step_rows(text: str) -> list[tuple[str, str, str, str]]:
    """(official file, official name, our file, our name) of each row of the table."""
    block = text[text.index(BEGIN):text.index(END)]
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        official, ours = CELL.match(cells[0]), CELL.match(cells[2])
        assert official and ours, f"a row without `file`: `name` on both sides: {line}"
        rows.append((*official.groups(), *ours.groups()))
    return rows


def defined_names(path: Path) -> set[str]:
    """Top-level functions and classes of ``path``, and ``Class.method`` for methods."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{m.name}" for m in node.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


ROWS = step_rows(PAGE.read_text())


def test_every_official_script_has_its_steps():
    assert {r[0] for r in ROWS} == set(SCRIPTS)
    assert sum(r[0] == "main.py" for r in ROWS) >= 10


@pytest.mark.parametrize("official_file, official_name, ours, name", ROWS,
                         ids=[f"{r[0]}:{r[1]}->{r[3]}" for r in ROWS])
def test_each_step_names_a_function_of_ours_that_exists(official_file, official_name, ours,
                                                        name):
    path = ROOT / ours
    assert path.is_file(), f"docs/protocol.md: {ours} does not exist"
    assert name in defined_names(path), f"docs/protocol.md: {ours} defines no {name}"


def test_the_check_refuses_a_missing_name(tmp_path):
    code = tmp_path / "m.py"
    code.write_text("class A:\n    def f(self):\n        pass\n\ndef g():\n    pass\n")
    assert defined_names(code) == {"A", "A.f", "g"}
    text = (f"{BEGIN} x -->\n| a | b | c |\n| --- | --- | --- |\n"
            f"| `main.py`: `train` | step | `src/x.py`: `h` |\n{END}\n")
    assert step_rows(text) == [("main.py", "train", "src/x.py", "h")]
    with pytest.raises(AssertionError, match="on both sides"):
        step_rows(text.replace("`src/x.py`: `h`", "src/x.py h"))
