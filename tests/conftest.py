"""Fixtures shared across test folders, the suite's tiers, and the order test modules run in.

Tiers (``docs/testing.md``): the README's test command runs the fast tier, which is what
``pyproject.toml``'s ``-m`` deselects to; ``slow`` (end-to-end runs, subprocess-heavy CI
machinery), ``cluster`` and ``rehearsal`` are ``.ci/run``'s own steps
(``python -m pytest -m slow``, ...). A fixture whose setup is slow-tier work is named in
:data:`SLOW_FIXTURES`; every test that uses it, directly or through another fixture, is marked
``slow`` at collection, so the fast tier can never pull one in by accident
(``tests/test_tiers.py`` checks the mechanism).

The suite runs on two processes (``pytest-xdist``: ``-n`` and ``--dist loadscope`` in
``pyproject.toml``): each test module runs whole on one process, so a module's expensive
fixture (the smoke DAG, a bundle, a trained model) is built once. The heaviest modules
are handed out first, longest first, then the other end-to-end (``slow``) ones, so that the
long ones start at once instead of trailing behind the quick ones.

The test processes share the cores: with ``-n N`` each of them, and every process it starts
that does not set its own count, runs OpenMP (torch's CPU kernels) on ``cores // N``
threads (``OMP_NUM_THREADS``, unless it is set already). With torch's default of one thread
per core, the two processes put four threads on two cores, and an OpenMP barrier then waits
for a thread that is not running. Snakemake jobs are unaffected: Snakemake sets their
threads itself.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from importlib import metadata
from collections.abc import Sequence
from typing import Any

import pytest
from packaging.requirements import Requirement

from weince.evt.noise_floor import simulate_noise_floor, write_noise_floor
from weince.pipeline import layout
from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.utils import write_json

pytest_plugins = ["pytester"]   # tests/test_tiers.py runs a mini suite under this conftest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake") if (BIN / "snakemake").exists() else "snakemake"

# Fixtures whose setup is slow-tier work (a whole DAG, a kill and resume): a test that uses
# one, directly or through another fixture, is slow itself (pytest_collection_modifyitems).
SLOW_FIXTURES = frozenset({"smoke_kill", "smoke_resumed"})


# ----------------------------------------------------------------------------- the workflow
def _copy_workflow(dest: Path, extra_configs: dict[str, str] | None = None) -> Path:
    """The workflow files (Snakefile, workflow/, config/, profiles/) in a fresh folder
    ``dest``, plus ``extra_configs`` (file name -> YAML text) written into its ``config/``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    shutil.copytree(REPO / "workflow", dest / "workflow", symlinks=False)
    shutil.copytree(REPO / "config", dest / "config")
    shutil.copytree(REPO / "profiles", dest / "profiles")   # read without a flag (resume)
    for name, text in (extra_configs or {}).items():
        (dest / "config" / name).write_text(text)
    return dest


def _snakemake(cwd: Path, *args: str, timeout: int = 600, **extra_env: str
               ) -> subprocess.CompletedProcess:
    """``snakemake ARGS`` in ``cwd``, offline, output captured."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **extra_env}
    return subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _job_counts(output: str) -> dict[str, int]:
    """The ``Job stats`` table of a (dry) run: rule -> count."""
    counts: dict[str, int] = {}
    block = output.split("Job stats:", 1)[-1]
    for line in block.splitlines():
        m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s+(\d+)\s*", line)
        if m:
            counts[m.group(1)] = int(m.group(2))
        elif counts and not line.strip():
            break
    return counts


@pytest.fixture(scope="session")
def copy_workflow():
    """``copy_workflow(dest, extra_configs=None) -> dest``: a runnable copy of the workflow,
    so that a test never writes into the repository."""
    return _copy_workflow


@pytest.fixture(scope="session")
def run_snakemake():
    """``run_snakemake(cwd, *args, timeout=600, **env) -> CompletedProcess``."""
    return _snakemake


@pytest.fixture(scope="session")
def job_counts():
    """``job_counts(stdout) -> {rule: count}`` from a (dry) run's ``Job stats`` table."""
    return _job_counts


# ----------------------------------------------------------------------------- fabricated results
# Result files of every kind the claims registry reads, made up for the report, bundle and
# verify tests (real tables are computed from the files the workflow writes).
# per (dataset, arm): per-encoder linear test accuracy; probe seeds spread +-0.1 around it
FIXTURE_LINEAR = {
    ("cifar100", "infonce"): [49.8, 50.1, 50.2],
    ("cifar100", "weince_recipe"): [53.0, 53.3, 53.5],
    ("cifar100", "weince"): [49.9, 50.0, 50.4],
    ("digits", "infonce"): [80.0, 81.0, 82.0],
    ("digits", "weince_recipe"): [84.0, 85.0, 86.0],
    ("digits", "weince"): [79.0, 80.5, 80.0],
}


def _summary(values: list[float]) -> dict[str, Any]:
    n = len(values)
    m = sum(values) / n
    sd = (sum((v - m) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else None
    return {"mean": m, "std": sd, "n": n, "values": values}


def _fixture_config(tmp: Path) -> dict[str, Any]:
    return {
        "profile": "fx",
        "results": str(tmp / "results"),
        "reports": str(tmp / "reports"),
        "claims": str(REPO / "config" / "claims.yaml"),
        "vision": {"datasets": ["cifar100", "digits"], "backbones": ["resnet18"],
                   "arms": ["infonce", "weince_recipe", "weince"], "seeds": [7, 21, 63],
                   "pretrain": {"epochs": 2, "batch_size": 64},
                   "evt": {"arms": ["infonce"]}},
        "text": {"models": ["minilm"], "corpus": "synthetic", "arms": ["infonce", "weince"],
                 "seeds": [7, 21], "simcse": {"epochs": 1, "batch_size": 32}},
        "timing": {"enabled": True, "config": {"backbone": "resnet18"}},
        "checks": {"enabled": True},
    }


def _claim_keys(claims: str, file: str) -> list[str]:
    """The keys the claims of the registry ``claims`` read from ``file``: their metrics,
    each row's metric and their readings, in the registry's order."""
    keys: list[str] = []
    for c in load_claims(claims)["claims"]:
        if c["file"] == file:
            keys += [c.get("metric"), *c.get("metrics", []),
                     *(r.get("metric") for r in c.get("rows") or [] if isinstance(r, dict)),
                     *c.get("readings", [])]
    return list(dict.fromkeys(k for k in keys if k))


def _write_fixture_results(cfg: dict[str, Any]) -> None:
    """One result file of every kind the registry reads, for every run of ``cfg``."""
    prof = Profile.of(cfg)
    for run in layout.vision_runs(prof):
        d = layout.run_dir(prof, run)
        i = cfg["vision"]["seeds"].index(run.seed)
        acc = FIXTURE_LINEAR[(run.dataset, run.arm)][i]
        write_json(d / "linear.json", {"test_acc": _summary([acc - 0.1, acc, acc + 0.1]),
                                       "val_acc": _summary([acc + 1, acc + 1.2])}, seed=run.seed)
        # every key a claim reads from knn.json (its metrics and readings, from the registry)
        knn = {k: _summary([acc - 10.0, acc - 10.0]) if k.startswith("acc@")
               else _summary([acc - 12 + int(k.rsplit("@", 1)[1]) * 0.5])
               for k in _claim_keys(cfg["claims"], "knn.json")}
        write_json(d / "knn.json", knn, seed=run.seed)
        if run.arm in cfg["vision"]["evt"]["arms"]:
            write_json(d / "pot.json", {"fit": {"xi": -0.35 - 0.02 * i, "sigma": 0.05,
                                                "xi_ci": [-0.45, -0.3]}}, seed=run.seed)
            write_json(d / "link.json", {"status": "fitted",
                                         "fit": {"lam": 0.4 + 0.01 * i, "p_value": 1e-6,
                                                 "lam_ci": [0.3, 0.5]}}, seed=run.seed)
        # lambda over training, for the figure
        if run.arm.startswith("weince"):
            d.joinpath("train_log.jsonl").write_text(
                "".join(f'{{"epoch": {e}, "lambda_mean": {0.1 * e + 0.01 * i}}}\n'
                        for e in range(3)))
    for run in layout.text_runs(prof):
        d = layout.run_dir(prof, run)
        sp = {"infonce": 70.0, "weince": 72.0}[run.arm] + 0.5 * run.seed / 7
        write_json(d / "sts.json", {"test": {"spearman": sp, "pearson": sp},
                                    "dev": {"spearman": sp, "pearson": sp}}, seed=run.seed)
    root, name = cfg["results"], cfg["profile"]
    write_json(Path(layout.TIMING.format(results=root, profile=name)) / "timing.json",
               {"whole_step": {"losses": {"weince": {"overhead_pct": 0.9,
                                                     "overhead_ci": [0.2, 1.4]},
                                          "weince_recipe": {"overhead_pct": 3.5,
                                                            "overhead_ci": [2.9, 4.0]}},
                               "attributed": {"weince": {"overhead_pct": 0.25},
                                              "weince_recipe": {"overhead_pct": 1.5}}},
                "trainable_parameters": {"infonce": 0, "weince": 0, "weince_recipe": 0}})
    write_json(Path(layout.CHECKS.format(results=root, profile=name)) / "special_case.json",
               {"max_abs_diff": 0.0, "cases": []})
    # C11's own computation, at few replicates (numpy, a fraction of a second)
    write_noise_floor(simulate_noise_floor(replicates=500, seed=1),
                      Path(layout.SYNTHETIC.format(results=root, profile=name))
                      / "noise_floor.json")
    for run in layout.norms_vision_runs(prof):
        write_json(layout.run_dir(prof, run) / "norms.json",
                   {**_norms_unit(run.seed, run.arm), "dataset": run.dataset,
                    "backbone": run.backbone}, seed=run.seed)


def _corr(r: float | None, lo: float | None, hi: float | None, n: int = 200) -> dict[str, Any]:
    return {"r": r, "ci": [lo, hi], "n": n}


def _norms_unit(seed: int, arm: str) -> dict[str, Any]:
    """A fabricated norms.json: N2 reproduced everywhere except infonce seed 21, N1 not
    testable for weince (no decay: nothing predicted), N3 reproduced on its primary row."""
    good = not (arm == "infonce" and seed == 21)
    n1 = ({"premise": {"decoupled": True}, "predicted_vs_measured":
           {"pearson": _corr(0.4, 0.2, 0.6)}} if arm != "weince" else
          {"premise": {"decoupled": False, "note": "no decay"}})
    drift = _corr(-0.5, -0.7, -0.3) if good else _corr(-0.1, -0.3, 0.1)
    return {
        "kind": "vision", "arm": arm, "seed": seed, "loss": arm,
        "n1": n1, "n2": {"heat_vs_norm": {"pearson": _corr(0.4, 0.2, 0.6)},
                         "drift_vs_norm": {"pearson": drift}},
        "n3": {"rows": [{"task": "knn", "metric": "recall@1", "subset": "frequent",
                         "gain": 1.5, "ci": [0.5, 2.5], "primary": True,
                         "verdict": "reproduced"},
                        {"task": "knn", "metric": "recall@5", "subset": "all",
                         "gain": None, "ci": [None, None], "primary": False,
                         "verdict": "not testable at this scale"}]},
        "verdicts": {"N1": "not testable at this scale" if arm == "weince" else "reproduced",
                     "N2": "reproduced" if good else "not reproduced", "N3": "reproduced"},
    }


@pytest.fixture(scope="session")
def fabricate_results():
    """``fabricate_results(tmp) -> cfg``: a profile config ``fx`` whose results and reports
    live under ``tmp``, with one made-up result file of every kind the registry reads."""
    def make(tmp: Path) -> dict[str, Any]:
        cfg = _fixture_config(tmp)
        _write_fixture_results(cfg)
        return cfg
    return make


@pytest.fixture(scope="session")
def fixture_linear() -> dict[tuple[str, str], list[float]]:
    """The per-encoder linear test accuracies the fabricated results hold."""
    return FIXTURE_LINEAR


@pytest.fixture
def fx(tmp_path, fabricate_results):
    return fabricate_results(tmp_path)


@pytest.fixture(scope="module")
def fx_module(tmp_path_factory, fabricate_results):
    """The same results written once for a test module, for tests that only read them."""
    return fabricate_results(tmp_path_factory.mktemp("fx"))


# ----------------------------------------------------------------------------- report-only venv
# what `weince verify` needs: the report's own dependencies (tables, statistics, figures)
REPORT_DEPS = ["numpy", "scipy", "PyYAML", "jsonschema", "matplotlib"]


def _closure(names: list[str]) -> list[metadata.Distribution]:
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        dist = metadata.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


# `weince verify FILE` in a subprocess that fails if anything imported torch
_VERIFY_NO_TORCH = ("import sys; from weince.cli import main; rc = main(['verify', sys.argv[1]]); "
                    "assert 'torch' not in sys.modules; sys.exit(rc)")


def _report_only_venv(dest: Path) -> Path:
    """A fresh virtual environment (no system site-packages) holding only the report's
    dependencies and what they require, linked from this environment, plus weince's
    source: no torch, no snakemake, no transformers."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True,
                   timeout=120)
    site = next(dest.glob("lib/python*/site-packages"))
    for dist in _closure(REPORT_DEPS):
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            src = Path(dist.locate_file(top))
            if src.exists() and not (site / top).exists():
                (site / top).symlink_to(src)
    (site / "weince_src.pth").write_text(str(REPO / "src") + "\n")
    return dest / "bin" / "python"


@pytest.fixture(scope="session")
def report_only_venv():
    """``report_only_venv(dest) -> python``: a venv with the report's dependencies only."""
    return _report_only_venv


@pytest.fixture(scope="session")
def verify_no_torch() -> str:
    """Python code running ``weince verify ARGV[1]`` that fails if anything imported torch."""
    return _VERIFY_NO_TORCH


def _modules_loaded(code: str, names: Sequence[str]) -> dict[str, bool]:
    """Run ``code`` in a fresh interpreter; which of ``names`` it left in ``sys.modules``."""
    probe = f"{code}\nimport sys\nprint(repr({{n: n in sys.modules for n in {list(names)!r}}}))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def modules_loaded():
    """``modules_loaded(code, names)``: which of ``names`` a fresh interpreter running
    ``code`` has imported (an import-layer check: torch, matplotlib)."""
    return _modules_loaded


# ----------------------------------------------------------------------------- order and tiers
# The heaviest modules, longest first: handed out before the rest so that neither process
# is left with a long module at the end while the other one idles.
LONGEST_FIRST = (
    "tests/workflow/test_workflow.py",            # the smoke DAG, once
    "tests/workflow/test_resume.py",              # slow tier: the smoke DAG killed and resumed
    "tests/cost/test_estimate.py",                # slow tier: the paper profile's dry runs
    "tests/train/test_step_compile.py",           # slow tier: four Inductor compilations
    "tests/test_gpu_acceptance.py",               # slow tier: the acceptance script's CPU mode
    "tests/train/test_torchrun_simcse_rule.py",   # slow tier
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


@pytest.hookimpl(tryfirst=True)   # before the mark plugin deselects with -m
def pytest_collection_modifyitems(session, config, items):
    """Every test that uses a fixture of :data:`SLOW_FIXTURES` is marked ``slow`` (before
    ``-m`` deselects). Then the order: the heaviest modules first (``LONGEST_FIRST``), then
    the other modules with a ``slow`` test, then the rest; each module's tests kept together
    and in order (a module-scoped fixture is set up once per module run). The same order on
    every process, as xdist requires."""
    for item in items:
        own_tier = item.get_closest_marker("cluster") or item.get_closest_marker("rehearsal")
        if not own_tier and SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(name: str) -> tuple[int, int]:
        if name in rank:
            return 0, rank[name]
        return (1 if any(i.get_closest_marker("slow") for i in modules[name]) else 2), 0

    items[:] = [item for name in sorted(modules, key=key) for item in modules[name]]


# ----------------------------------------------------------------------------- a small disk
def _small_disk(folder: Path, size: int, leave: int | None = None):
    """A ``size``-byte tmpfs mounted at ``folder`` (root only), filled up to ``leave``
    free bytes; None where it cannot be mounted (the caller simulates ENOSPC instead)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return None
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(folder)], capture_output=True)
    if proc.returncode != 0:
        return None
    if leave is not None:
        free = shutil.disk_usage(folder).free
        if free > leave:
            (folder / "filler").write_bytes(bytes(free - leave))
    return folder


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(size, leave=None)``: a tmpfs of ``size`` bytes under ``tmp_path``
    (unmounted afterwards), or None where none can be mounted."""
    mounted: list[Path] = []

    def make(size: int, leave: int | None = None):
        folder = _small_disk(tmp_path / f"disk{len(mounted)}", size, leave)
        if folder is not None:
            mounted.append(folder)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
