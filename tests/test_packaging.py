"""What the installed package says about itself: ``python -m weince`` is the ``weince``
command, and the package carries its PEP 561 type marker (the wheel's contents:
tests/test_lean_install.py)."""

from __future__ import annotations

import runpy
import sys
import tomllib
from pathlib import Path

import pytest

import weince
from weince.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [["--version"], []])
def test_python_dash_m_weince_is_the_weince_command(argv, monkeypatch, capsys):
    code = main(list(argv))
    expected = capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["weince", *argv])
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("weince", run_name="__main__", alter_sys=False)
    got = capsys.readouterr()
    assert exc.value.code == code and (got.out, got.err) == (expected.out, expected.err)


def test_the_package_is_marked_typed_and_ships_the_marker():
    assert (Path(weince.__file__).parent / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["weince"]
