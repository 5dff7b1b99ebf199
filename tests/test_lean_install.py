"""The lean install: the wheel, installed WITHOUT extras into a fresh virtual environment, gives
the losses and the statistics with torch, numpy and scipy only.

The environment is really fresh (``python3.11 -m venv``, no system site-packages) and holds
exactly what pip resolves for the wheel (``pip install --dry-run --report`` against that empty
environment): the wheel itself, installed by pip, and each resolved dependency laid out file
by file from this test environment's copy of the same version (symlinks; another version is
installed from the index). So a core module that imports pandas, tqdm, matplotlib, snakemake
or transformers at import time fails here. pip's resolution takes about 15 s, hence ``slow``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

# packages of the extras that must NOT be in the lean environment
EXTRA_ONLY = ("pandas", "snakemake", "matplotlib", "tqdm", "scikit-learn", "mlxtend",
              "transformers", "tokenizers", "tabulate", "jsonschema", "torchvision", "pyyaml")

USE_THE_CORE = textwrap.dedent("""
    import importlib.util, numpy as np, torch
    from weince.losses import WEINCELoss
    from weince.evt import fit_gpd_pot, fit_link_selection

    torch.manual_seed(0)
    z1 = torch.randn(32, 8, requires_grad=True)
    z2 = torch.randn(32, 8, requires_grad=True)
    loss = WEINCELoss(tau=0.5)(z1, z2)
    loss.backward()
    assert torch.isfinite(loss.detach()) and z1.grad is not None and torch.isfinite(z1.grad).all()
    # one optimiser step on a linear encoder: the loss trains
    enc = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(enc.parameters(), lr=0.1)
    x = torch.randn(32, 8)
    before = WEINCELoss(tau=0.5)(enc(x), enc(x + 0.05 * torch.randn_like(x)))
    before.backward(); opt.step()

    rng = np.random.default_rng(0)
    scores = np.tanh(rng.standard_normal(20000) * 0.3)
    fit = fit_gpd_pot(scores, n_boot=0)
    assert np.isfinite(fit.xi) and fit.n_exceed > 0

    n, k = 400, 16
    s = rng.uniform(-1, 0.6, size=(n, k)); s[:, 0] += 0.35
    link = fit_link_selection(s, np.zeros(n, dtype=int))
    assert np.isfinite(link.lam)
    missing = [m for m in ("pandas", "tqdm", "matplotlib", "snakemake", "transformers")
               if importlib.util.find_spec(m) is not None]
    assert not missing, missing
    print("LEAN-OK", loss.item(), fit.xi, link.lam)
""")


def _run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def _link_distribution(dist, site: Path) -> int:
    """Every file of an installed distribution (its RECORD) symlinked at the same place under
    ``site``: the package as pip would lay it out, without copying it. Returns the count."""
    n = 0
    for rel in dist.files or ():
        if rel.parts[0] == "..":                 # console scripts in bin/: not needed here
            continue
        src = Path(dist.locate_file(rel))
        if not src.is_file():
            continue
        dest = site / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            dest.symlink_to(src)
            n += 1
    return n


def test_wheel_installs_without_extras_and_runs_the_core(tmp_path):
    py = shutil.which("python3.11")
    if py is None:
        pytest.skip("python3.11 not on PATH (needed for a fresh virtual environment)")
    # the wheel of this checkout (no build isolation: setuptools/wheel of the test environment)
    wheels = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(wheels), str(ROOT)])
    (wheel,) = wheels.glob("weince-*.whl")
    venv = tmp_path / "venv"
    _run([py, "-m", "venv", "--without-pip", str(venv)])
    vpy = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    pip = [sys.executable, "-m", "pip", "--python", str(vpy)]   # pip acting on the fresh venv

    # pip resolves the wheel's dependencies for the empty environment ...
    report = tmp_path / "resolved.json"
    _run(pip + ["install", "-q", "--dry-run", "--report", str(report), str(wheel)], env=env)
    resolved = {canonicalize_name(m["metadata"]["name"]): m["metadata"]["version"]
                for m in json.loads(report.read_text())["install"]}
    assert {"weince", "torch", "numpy", "scipy"} <= resolved.keys()
    leaked = resolved.keys() & set(EXTRA_ONLY)
    assert not leaked, f"extras leaked into the core install: {leaked}"

    # ... and the venv gets exactly what it resolved: the wheel installed by pip; each
    # dependency whose resolved version is the one this test environment has is laid out from
    # this environment's files (symlinks: torch and its CUDA wheels are 5 GB, and copying them
    # was most of this test's time); any other version is installed from the index
    site = Path(_run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                     env=env).strip())
    _run(pip + ["install", "-q", "--no-deps", "--no-compile", str(wheel)], env=env)
    to_install = []
    for name, version in resolved.items():
        if name == "weince":
            continue
        try:
            have = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            have = None
        if have is not None and have.version == version and have.files:
            assert _link_distribution(have, site) > 0, name
        else:
            to_install.append(f"{name}=={version}")
    if to_install:
        _run(pip + ["install", "-q", "--no-deps", "--no-compile", *to_install], env=env)

    listed = _run([str(vpy), "-c", "import importlib.metadata as m; "
                   "print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"],
                  env=env)
    names = {canonicalize_name(n) for n in listed.split()}
    assert names == set(resolved), (names ^ set(resolved))
    assert not names & set(EXTRA_ONLY), f"extras leaked into the core install: {names & set(EXTRA_ONLY)}"

    out = _run([str(vpy), "-c", USE_THE_CORE], env=env, cwd=tmp_path)
    assert "LEAN-OK" in out
    version = _run([str(venv / "bin" / "weince"), "--version"], env=env, cwd=tmp_path).strip()
    assert version == "weince 0.1.0"  # an installed wheel: no git commit to report
