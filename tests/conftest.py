"""Fixtures shared across test folders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _copy_workflow(dest: Path, extra_configs: dict[str, str] | None = None) -> Path:
    """The workflow files (Snakefile, workflow/, config/) in a fresh folder ``dest``, plus
    ``extra_configs`` (file name -> YAML text) written into its ``config/``."""
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    shutil.copytree(REPO / "workflow", dest / "workflow")
    shutil.copytree(REPO / "config", dest / "config")
    for name, text in (extra_configs or {}).items():
        (dest / "config" / name).write_text(text)
    return dest


@pytest.fixture(scope="session")
def copy_workflow():
    """``copy_workflow(dest, extra_configs=None) -> dest``: a runnable copy of the workflow,
    so that a test never writes into the repository."""
    return _copy_workflow
