"""The lean install: the wheel, installed WITHOUT extras into a fresh virtual environment, gives
the losses and the statistics with torch, numpy and scipy only.

The environment is really fresh (``python3.11 -m venv``, no system site-packages) and holds
exactly what pip resolves for the wheel (``pip install --dry-run --report`` against that empty
environment): the wheel itself, installed by pip, and each resolved dependency laid out file
by file from this test environment's copy of the same version (symlinks; another version is
installed from the index). So a core module that imports pandas, tqdm, matplotlib, snakemake
or transformers at import time fails here. pip's resolution takes about 15 s, hence ``slow``.

The wheel's metadata declares ranges, not pins, and the Pythons it admits; in a fresh
environment of each Python 3.11+ on the machine that already holds torch, numpy and scipy
at the oldest versions of those ranges, ``pip install <wheel>`` adds the wheel and
replaces nothing (offline: the installed packages are stand-ins made of their metadata,
which is all pip's resolver reads).
"""

from __future__ import annotations

import email
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

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


def _python_blocks(page: Path) -> list[str]:
    """The page's python blocks for the core install (not those marked as needing the extras:
    the dual-encoder example reads scikit-learn's digits and the shipped MiniLM)."""
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)
    return [b for b in blocks if not b.startswith("# needs the extras")]


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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout (no build isolation: setuptools/wheel of the test
    environment, so nothing is downloaded)."""
    wheels = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(wheels), str(ROOT)])
    (whl,) = wheels.glob("weince-*.whl")
    return whl


def wheel_metadata(whl: Path) -> email.message.Message:
    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(z.read(name))


def test_wheel_ships_the_type_marker_and_the_module_entry_point(wheel):
    """``py.typed`` (PEP 561: type checkers read the package's annotations) and
    ``weince/__main__.py`` (``python -m weince``) are in the wheel."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {"weince/py.typed", "weince/__main__.py"} <= names, sorted(names)[:20]


def test_wheel_metadata_declares_ranges_and_pythons(wheel):
    meta = wheel_metadata(wheel)
    python = SpecifierSet(meta["Requires-Python"])
    for v in ("3.11", "3.12", "3.13"):
        assert Version(v) in python, f"Requires-Python {python} refuses {v}"
    assert Version("3.10") not in python        # tomllib, PEP 604 unions at run time
    reqs = [Requirement(r) for r in meta.get_all("Requires-Dist")]
    core = [r for r in reqs if r.marker is None]
    assert {canonicalize_name(r.name) for r in core} == {"torch", "numpy", "scipy"}
    for r in reqs:
        ops = {s.operator for s in r.specifier}
        assert not ops & {"==", "==="}, \
            f"the wheel pins {r} exactly (pins belong in requirements/lock.txt)"
    for r in core:
        assert any(s.operator == ">=" for s in r.specifier), r
        assert not any(s.operator in ("<", "<=") for s in r.specifier), f"core upper bound: {r}"


def _python(v: str) -> str | None:
    """An interpreter of Python ``v``: on PATH, or one that pyenv installed (its shim on PATH
    fails unless that version is selected)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for exe in [shutil.which(f"python{v}"), *sorted(root.glob(f"versions/{v}.*/bin/python{v}"))]:
        if exe is None:
            continue
        out = subprocess.run([str(exe), "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            return str(exe)
    return None


def _stand_in(site: Path, name: str, version: str) -> None:
    """An installed distribution as pip's resolver sees it: its metadata directory."""
    d = site / f"{name}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (d / "INSTALLER").write_text("pip\n")
    (d / "RECORD").write_text(f"{d.name}/METADATA,,\n{d.name}/INSTALLER,,\n{d.name}/RECORD,,\n")


@pytest.mark.parametrize("pyver", ["3.11", "3.12", "3.13"])
def test_wheel_installs_beside_an_existing_torch_without_replacing_it(wheel, tmp_path, pyver):
    py = _python(pyver)
    if py is None:
        pytest.skip(f"no Python {pyver} on this machine")
    meta = wheel_metadata(wheel)
    oldest = {canonicalize_name(r.name): next(s.version for s in r.specifier if s.operator == ">=")
              for r in map(Requirement, meta.get_all("Requires-Dist")) if r.marker is None}
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV"} and not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull   # no configured find-links: only what is installed
    pip = [sys.executable, "-m", "pip"]

    def resolve(versions: dict[str, str], name: str):
        venv = tmp_path / name
        _run([py, "-m", "venv", "--without-pip", str(venv)], env=env)
        site = next(venv.glob("lib/python*/site-packages"))
        for dist, version in versions.items():
            _stand_in(site, dist, version)
        report = tmp_path / f"{name}.json"
        out = subprocess.run(pip + ["--python", str(venv / "bin" / "python"), "install",
                                    "--dry-run", "--no-index", "--report", str(report), str(wheel)],
                             capture_output=True, text=True, env=env)
        if out.returncode:
            return None, out.stdout + out.stderr
        return [m["metadata"]["name"] for m in json.loads(report.read_text())["install"]], ""

    # torch, numpy and scipy at the oldest versions the ranges admit: only the wheel is added
    installs, err = resolve(oldest, "oldest")
    assert installs == ["weince"], (installs, err)
    # a torch older than the range: pip would have to replace it (offline, it cannot)
    installs, err = resolve({**oldest, "torch": "2.12.0"}, "too-old")
    assert installs is None and "torch>=" in err, (installs, err)


def test_wheel_installs_without_extras_and_runs_the_core(tmp_path, wheel):
    py = shutil.which("python3.11")
    if py is None:
        pytest.skip("python3.11 not on PATH (needed for a fresh virtual environment)")
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
    assert not names & set(EXTRA_ONLY), \
        f"extras leaked into the core install: {names & set(EXTRA_ONLY)}"

    out = _run([str(vpy), "-c", USE_THE_CORE], env=env, cwd=tmp_path)
    assert "LEAN-OK" in out
    # the researcher's snippets as copied: the README's, and every block of the loss guide
    # that runs on the core (the two-view example, the MoCo-style queue, open_clip's call form,
    # the per-call options and mixed precision),
    # in the venv of the wheel and torch
    snippets = [_python_blocks(ROOT / "README.md")[0],
                *_python_blocks(ROOT / "docs" / "using-the-loss.md")]
    assert len(snippets) == 6
    for code in snippets:
        script = tmp_path / "snippet.py"
        script.write_text(code)
        _run([str(vpy), "-W", "error::UserWarning", str(script)], env=env, cwd=tmp_path)
    version = _run([str(venv / "bin" / "weince"), "--version"], env=env, cwd=tmp_path).strip()
    assert version == "weince 0.1.0"  # an installed wheel: no git commit to report
    # python -m weince is the console script
    assert _run([str(vpy), "-m", "weince", "--version"], env=env, cwd=tmp_path).strip() == version
