"""No function of the library is longer than about a hundred lines: a longer one is split
into named steps (the training loops are built from ``weince.train.loop``)."""

from __future__ import annotations

import ast
from pathlib import Path

import weince

ROOT = Path(weince.__file__).resolve().parent
MAX_LINES = 100


def long_functions(root: Path, limit: int) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} "
                               f"({n} lines)")
    return out


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert [s.split(" ")[1] for s in long_functions(tmp_path, MAX_LINES)] == ["long"]


def test_no_library_function_is_over_the_limit():
    bad = long_functions(ROOT, MAX_LINES)
    assert not bad, "split these into named steps:\n" + "\n".join(bad)
