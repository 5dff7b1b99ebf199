"""Fixtures shared across test folders, and the order the test modules run in.

The suite runs on two processes (``pytest-xdist``: ``-n`` and ``--dist loadscope`` in
``pyproject.toml``): each test module runs whole on one process, so a module's expensive
fixture (the smoke DAG, a bundle, a trained model) is built once. The heaviest modules
are handed out first, longest first, then the other end-to-end (``slow``) ones, so that the
long ones start at once instead of trailing behind the quick ones.
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


# The heaviest modules, longest first (seconds of one process, `pytest --durations`, 2 workers,
# 2026-12-01): handed out before the rest so that neither process is left with a long module
# at the end while the other one idles.
LONGEST_FIRST = (
    "tests/workflow/test_workflow.py",            # 175 s: the smoke DAG, killed and resumed
    "tests/test_gpu_acceptance.py",               # 115 s: the acceptance script's CPU mode
    "tests/train/test_torchrun_simcse_rule.py",   # 49 s
    "tests/test_lean_install.py",                 # 35 s
    "tests/test_bundle_hostile.py",               # 30 s
    "tests/train/test_preempt.py",                # 27 s
    "tests/train/test_simcse_ddp.py",             # 27 s
    "tests/train/test_step_compile.py",           # 26 s
    "tests/train/test_torchrun_rule.py",          # 26 s
)


def pytest_collection_modifyitems(session, config, items):
    """The heaviest modules first (``LONGEST_FIRST``), then the other modules with a ``slow``
    test, then the rest; each module's tests kept together and in order (a module-scoped
    fixture is set up once per module run). The same order on every process, as xdist
    requires."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(name: str) -> tuple[int, int]:
        if name in rank:
            return 0, rank[name]
        return (1 if any(i.get_closest_marker("slow") for i in modules[name]) else 2), 0

    items[:] = [item for name in sorted(modules, key=key) for item in modules[name]]
