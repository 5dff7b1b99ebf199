"""The lean install: the wheel, installed WITHOUT extras into a fresh virtual environment, gives
the losses and the statistics with torch, numpy and scipy only.

The environment is really fresh (``python3.11 -m venv``, no system site-packages): pip resolves
the wheel's own dependencies, so a core module that imports pandas, tqdm, matplotlib, snakemake
or transformers at import time fails here. Installing torch takes about 90 s from the local
wheel cache (minutes from PyPI), hence ``slow``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
    _run([py, "-m", "venv", str(venv)])
    vpy = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    # --no-compile: no byte-compiling of torch's ~2,400 modules at install (what is imported
    # compiles on import); what pip resolves and installs is the same
    _run([str(vpy), "-m", "pip", "install", "-q", "--no-compile", str(wheel)], env=env)

    listed = _run([str(vpy), "-m", "pip", "list", "--format=freeze"], env=env).lower()
    names = {line.split("==")[0] for line in listed.split()}
    assert {"weince", "torch", "numpy", "scipy"} <= names
    assert not names & set(EXTRA_ONLY), f"extras leaked into the core install: {names & set(EXTRA_ONLY)}"

    out = _run([str(vpy), "-c", USE_THE_CORE], env=env, cwd=tmp_path)
    assert "LEAN-OK" in out
    version = _run([str(venv / "bin" / "weince"), "--version"], env=env, cwd=tmp_path).strip()
    assert version == "weince 0.1.0"  # an installed wheel: no git commit to report
