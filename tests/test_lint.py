"""The field's habits, enforced: ruff over the code and mypy over the library, with the rules
pyproject.toml gives them, run the way .ci/run's lint step and the pre-commit hooks run them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    exe = BIN / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} not installed (pip install -e '.[test]')")
    return found


def test_ruff_finds_nothing():
    proc = subprocess.run([_tool("ruff"), "check", "--no-cache", "src", "tests", "benchmarks",
                           "workflow"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_would_catch_an_unused_import(tmp_path):
    """The rules are on: a file with an unused import and a placeholder-less f-string fails."""
    bad = tmp_path / "bad.py"
    bad.write_text('import os\n\nprint(f"no placeholder")\n')
    proc = subprocess.run([_tool("ruff"), "check", "--no-cache", "--config",
                           str(REPO / "pyproject.toml"), str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "F401" in proc.stdout and "F541" in proc.stdout


@pytest.mark.slow
def test_mypy_is_clean_on_the_library(tmp_path):
    proc = subprocess.run([_tool("mypy"), "--cache-dir", str(tmp_path / "cache")], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


def test_ci_and_pre_commit_run_the_same_checks():
    """.ci/run has a lint step with ruff and mypy; the pre-commit hooks are the same tools,
    local (the lock's versions), with snakefmt for the workflow files."""
    ci = (REPO / ".ci" / "run").read_text()
    lint = [ln for ln in ci.splitlines() if ln.startswith("step lint ")]
    assert lint and "ruff check" in lint[0] and "mypy" in lint[0]
    hooks = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    ids = {h["id"]: h for r in hooks["repos"] for h in r["hooks"]}
    assert {"ruff", "mypy", "snakefmt"} <= set(ids)
    assert all(h["language"] == "system" for h in ids.values())
