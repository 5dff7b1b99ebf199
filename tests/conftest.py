"""Fixtures shared across test folders, and the order the test modules run in.

The suite runs on two processes (``pytest-xdist``: ``-n`` and ``--dist loadscope`` in
``pyproject.toml``): each test module runs whole on one process, so a module's expensive
fixture (the smoke DAG, a bundle, a trained model) is built once. The heaviest modules
are handed out first, longest first, then the other end-to-end (``slow``) ones, so that the
long ones start at once instead of trailing behind the quick ones.

The test processes share the cores: with ``-n N`` each of them, and every process it starts
that does not set its own count, runs OpenMP (torch's CPU kernels) on ``cores // N``
threads (``OMP_NUM_THREADS``, unless it is set already). With torch's default of one thread
per core, the two processes put four threads on two cores, and an OpenMP barrier then waits
for a thread that is not running: the acceptance script's throughput section took 42 s of
CPU inside the suite against 11 s alone, and the whole suite 5:43 against 5:23 with one
thread each. Snakemake jobs are unaffected: Snakemake sets their threads itself.
"""

from __future__ import annotations

import os
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


# The heaviest modules, longest first (seconds of one process in the suite, 2 workers, an empty
# Inductor cache as on a fresh machine, 2026-12-02): handed out before the rest so that neither
# process is left with a long module at the end while the other one idles.
LONGEST_FIRST = (
    "tests/workflow/test_workflow.py",            # 165 s: the smoke DAG, killed and resumed
    "tests/cost/test_estimate.py",                # ~90 s of CPU: the paper profile's dry run
    "tests/train/test_step_compile.py",           # 77 s: four Inductor compilations
    "tests/test_gpu_acceptance.py",               # 67 s: the acceptance script's CPU mode
    "tests/train/test_torchrun_simcse_rule.py",   # 53 s
    "tests/test_bundle_hostile.py",               # 27 s
    "tests/train/test_simcse_ddp.py",             # 26 s
    "tests/train/test_preempt.py",                # 25 s
    "tests/test_lean_install.py",                 # 19 s
    "tests/train/test_torchrun_rule.py",          # 15 s
)


def threads_per_process(cores: int | None, processes: int) -> int:
    """OpenMP threads for each of ``processes`` test processes on ``cores`` cores."""
    return max(1, (cores or 1) // max(1, processes))


def pytest_configure(config):
    """In the controlling process, before xdist starts the test processes (they inherit the
    environment): their share of the cores (module docstring)."""
    n = getattr(config.option, "numprocesses", None)
    if isinstance(n, int) and n >= 2 and not hasattr(config, "workerinput"):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_process(cores, n)))


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
