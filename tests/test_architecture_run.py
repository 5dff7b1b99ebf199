"""docs/architecture.md, "One run, top to bottom": every row names a file that exists and,
in it, a function with exactly the parameters the page gives (``inspect.signature``; a
class by its name), or for a config or workflow file the text to look for; and the whole
path stays within a few files (a step that adds a file to it must merge another away)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- one run:", "<!-- end of the run -->"
#: the most files the page's path may name: config file, workflow files and library
#: modules together
MAX_FILES = 14
CELL = re.compile(r"^`([^`]+)`$")


def run_rows(text: str) -> list[tuple[str, str]]:
    """(file, function or text) of each row of the section's table, in order."""
    section = text[text.index("## One run, top to bottom"):]
    block = section[section.index(BEGIN):section.index(END)]
    rows = []
    for line in block.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("step", "---"):
            continue
        assert len(cells) == 3, f"a row of other than three cells: {line}"
        where, what = CELL.match(cells[1]), CELL.match(cells[2])
        assert where and what, f"a row without `file` and `function or text`: {line}"
        rows.append((where.group(1), what.group(1)))
    return rows


def rendered(fn) -> str:
    """``fn``'s parameters as the page writes them: names, ``*`` before the keyword-only
    ones, defaults as ``repr``; a method's ``self`` left out."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    out: list[str] = []
    star = False
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                out.append("*")
                star = True
            out.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return "(" + ", ".join(out) + ")"


def module_of(path: str) -> str:
    return path.removeprefix("src/").removesuffix(".py").replace("/", ".")


ROWS = run_rows(PAGE.read_text())


def test_the_path_is_a_few_files_from_the_config_to_the_loss():
    files = list(dict.fromkeys(f for f, _ in ROWS))
    assert files[0] == "config/paper.yaml"
    assert files[-1] == "src/weince/losses/weince.py"
    assert len(files) <= MAX_FILES, (f"the page's run goes through {len(files)} files, over "
                                     f"{MAX_FILES}: {files}")
    names = [w for _, w in ROWS]
    # the optimiser's step and the loss are both reached
    assert any(n.startswith("eager_step(") for n in names)
    assert any(n.startswith("WEINCELoss.forward(") for n in names)


@pytest.mark.parametrize("path, what", ROWS, ids=[f"{p}:{w.split('(')[0]}" for p, w in ROWS])
def test_each_row_names_what_its_file_holds(path, what):
    file = ROOT / path
    assert file.is_file(), f"docs/architecture.md: {path} does not exist"
    if not path.endswith(".py") or path.startswith("workflow/"):
        assert what in file.read_text(), f"docs/architecture.md: {path} has no {what!r}"
        return
    name, _, params = what.partition("(")
    obj = importlib.import_module(module_of(path))
    for part in name.split("."):
        assert hasattr(obj, part), f"docs/architecture.md: {path} defines no {name}"
        obj = getattr(obj, part)
    home = inspect.unwrap(obj) if callable(obj) else obj
    assert Path(inspect.getfile(home)).resolve() == file.resolve(), \
        f"docs/architecture.md: {name} is defined in {inspect.getfile(home)}, not {path}"
    if not params:
        assert inspect.isclass(obj), f"docs/architecture.md: {name} without parameters"
        return
    assert f"({params}" == rendered(obj), (f"docs/architecture.md: {path}: {name} takes "
                                           f"{rendered(obj)}, the page says ({params}")


def test_a_changed_signature_is_caught():
    def f(a, b=1, *, c=None, **kw):
        return a

    assert rendered(f) == "(a, b=1, *, c=None, **kw)"
    assert rendered(f) != "(a, b=2, *, c=None, **kw)"
