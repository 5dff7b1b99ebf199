"""Fixtures shared across test folders, and the order the test modules run in.

The suite runs on two processes (``pytest-xdist``: ``-n`` and ``--dist loadscope`` in
``pyproject.toml``): each test module runs whole on one process, so a module's expensive
fixture (the smoke DAG, a bundle, a trained model) is built once. The modules holding
end-to-end (``slow``) tests are handed out first, so that the longest ones start at once
instead of trailing behind the quick ones.
"""

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


def pytest_collection_modifyitems(session, config, items):
    """Modules with a ``slow`` test first, each module's tests kept together and in order
    (a module-scoped fixture is set up once per module run). The same order on every
    process, as xdist requires."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    slow_first = sorted(modules.values(),
                        key=lambda its: not any(i.get_closest_marker("slow") for i in its))
    items[:] = [item for its in slow_first for item in its]
