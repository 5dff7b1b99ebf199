"""Provenance for every result file: git commit, config hash, versions, date, seed, and
where it was made: the GPU model (or ``cpu``), the container image's digest when run in one
and an optional site label.

Every JSON result written by the artifact goes through
:func:`weince.utils.results.write_json`, which adds a
``provenance`` block, so a number in a table can always be traced to the code and the
configuration that produced it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from weince.utils.gpu_slots import held

__all__ = ["git_commit", "commit_at", "checkout_commit", "recorded_commit", "COMMIT_VARIABLE",
           "config_hash", "versions", "float32_precision", "provenance", "jsonable",
           "gpu_model", "container_digest", "site_label", "DIGEST_VARIABLE", "DIGEST_FILE",
           "SITE_VARIABLE"]


# the commit an image was built from (Dockerfile: `--build-arg WEINCE_GIT_COMMIT=...`, kept
# as an ENV of the image), read where the code is not in a git checkout
COMMIT_VARIABLE = "WEINCE_GIT_COMMIT"
# what a result's provenance may record (weince.utils.results checks the same form)
COMMIT_FORM = re.compile(r"(?:[0-9a-f]{7,40}(?:\+dirty)?|unknown)\Z")


# the container image a result was made in: `WEINCE_IMAGE_DIGEST` (set by whoever starts the
# container and knows its registry digest, e.g. `docker run -e WEINCE_IMAGE_DIGEST=$(docker
# inspect -f '{{.Id}}' weince:0.1.0)`), else the digest the Dockerfile writes into the image
# at build (DIGEST_FILE: a SHA-256 of its software, pip freeze and OS release; an image cannot
# hold its own registry digest)
DIGEST_VARIABLE = "WEINCE_IMAGE_DIGEST"
DIGEST_FILE = Path("/etc/weince/image-digest")
DIGEST_FORM = re.compile(r"(?:[A-Za-z0-9._/:@-]*@)?sha256:[0-9a-f]{64}\Z")
# an optional site label (the workflow's `--config site=NAME` sets it for its jobs)
SITE_VARIABLE = "WEINCE_SITE"
SITE_FORM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+@-]{0,63}\Z")


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          timeout=5)


def checkout_commit(folder: str | os.PathLike) -> str | None:
    """The commit of the git checkout that tracks ``folder`` (``+dirty`` when a tracked file
    is modified), or None: no git, no checkout, or a folder the checkout does not track (an
    installed copy inside some other repository's folder)."""
    folder = Path(folder)
    try:
        if _git(folder, "ls-files", "--error-unmatch", "--", ".").returncode != 0:
            return None
        commit = _git(folder, "rev-parse", "HEAD").stdout.strip()
        if not commit:
            return None
        dirty = _git(folder, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def recorded_commit() -> str:
    """The commit recorded where there is no checkout (``WEINCE_GIT_COMMIT``, set in the
    container), or ``unknown``. Raises ``ValueError`` for a value that is not a commit."""
    value = os.environ.get(COMMIT_VARIABLE, "").strip()
    if not value:
        return "unknown"
    if not COMMIT_FORM.match(value):
        raise ValueError(f"{COMMIT_VARIABLE}={value!r} is not a git commit (7-40 lowercase hex "
                         f"digits, optionally +dirty, or unknown); build the image with "
                         f"--build-arg {COMMIT_VARIABLE}=$(git rev-parse HEAD), or unset it")
    return value


def commit_at(folder: str | os.PathLike) -> str:
    """The commit of the code in ``folder``: its git checkout's (:func:`checkout_commit`),
    else the recorded one (:func:`recorded_commit`: the container's), else ``unknown``."""
    return checkout_commit(folder) or recorded_commit()


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit of the code of this package (:func:`commit_at` of its folder): the git
    checkout that holds it (``+dirty`` if modified), else ``WEINCE_GIT_COMMIT`` (set in
    the container, which has no ``.git``), else ``unknown``."""
    return commit_at(Path(__file__).resolve().parent)


def _in_container() -> bool:
    return any(os.environ.get(v) for v in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")) \
        or Path("/.dockerenv").exists() or Path("/run/.containerenv").exists() \
        or DIGEST_FILE.is_file()


def container_digest() -> str | None:
    """The digest of the container image this process runs in: ``WEINCE_IMAGE_DIGEST``, else
    the one the Dockerfile wrote into the image (``/etc/weince/image-digest``), else
    ``unknown`` inside a container and ``None`` outside one. Raises ``ValueError`` for a
    value that is not a ``sha256:`` digest."""
    value = os.environ.get(DIGEST_VARIABLE, "").strip()
    source = DIGEST_VARIABLE
    if not value and DIGEST_FILE.is_file():
        value, source = DIGEST_FILE.read_text().strip(), str(DIGEST_FILE)
    if not value:
        return "unknown" if _in_container() else None
    if not DIGEST_FORM.match(value):
        raise ValueError(f"{source}={value!r} is not an image digest (sha256: and 64 lowercase "
                         f"hex digits, optionally after NAME@); pass e.g. -e {DIGEST_VARIABLE}="
                         f"$(docker inspect -f '{{{{.Id}}}}' IMAGE), or unset it")
    return value


def site_label() -> str | None:
    """The site label of ``WEINCE_SITE`` (the workflow's ``--config site=NAME`` sets it), or
    None. Raises ``ValueError`` for a label that is not a short plain name."""
    value = os.environ.get(SITE_VARIABLE, "").strip()
    if not value:
        return None
    if not SITE_FORM.match(value):
        raise ValueError(f"{SITE_VARIABLE}={value!r} is not a site label (up to 64 letters, "
                         f"digits, '_', '.', '+', '@', '-'); set e.g. --config site=lab-a")
    return value


def gpu_model() -> str:
    """The GPU this process computed on: the CUDA device's name when torch is loaded and has
    initialised CUDA (a process that only saw a GPU but never used it counts as ``cpu``),
    else ``cpu``."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_available() and cuda.is_initialized():
            return str(cuda.get_device_name(cuda.current_device()))
    except (RuntimeError, AssertionError):
        pass
    return "cpu"


def jsonable(obj: Any) -> Any:
    """``obj`` with paths, numpy/torch scalars and arrays made JSON-able, NaN as ``null``."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        return obj.item()  # numpy / torch scalars
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, float) and obj != obj:
        return None  # NaN -> null (strict JSON)
    return obj


def config_hash(cfg: Any) -> str:
    """Short, order-independent SHA-256 of a JSON-able configuration."""
    blob = json.dumps(jsonable(cfg), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("weince", "torch", "torchvision", "numpy", "scipy", "transformers", "snakemake"):
        mod = sys.modules.get(name)
        if mod is None:
            continue
        out[name] = str(getattr(mod, "__version__", "?"))
    return out


def float32_precision() -> dict[str, Any] | None:
    """How float32 arithmetic runs in this process, read when the result is written:
    matmuls (``torch.get_float32_matmul_precision()``: "highest" = full float32, "high" =
    TF32) and cuDNN convolutions (``torch.backends.cudnn.allow_tf32``: PyTorch's default
    ``True`` runs float32 convolutions in TF32 on Ampere or newer GPUs, also in a run that is
    "float32 throughout"), and the cuDNN algorithm choice. The settings are read on any
    machine; on a CPU none of them changes the arithmetic. ``None`` in a process that has
    not imported torch (e.g. the report's rebuild in ``weince bundle verify``)."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "backends"):
        return None
    out = {"matmul": torch.get_float32_matmul_precision(),
           "cuda_matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
           "cudnn_conv_tf32": bool(torch.backends.cudnn.allow_tf32),
           "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
           "cudnn_deterministic": bool(torch.backends.cudnn.deterministic)}
    conv = getattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision", None)
    if isinstance(conv, str):  # torch >= 2.9 also names it ("tf32" / "ieee")
        out["cudnn_conv_fp32_precision"] = conv
    return out


def provenance(cfg: Any = None, seed: int | None = None, **extra: Any) -> dict[str, Any]:
    """A provenance block: commit, config hash, seed, versions, float32 precision settings
    (matmuls and cuDNN convolutions), host, UTC date, GPU model (or ``cpu``), container
    image digest (None outside a container) and site label (None unless set)."""
    block = {
        "git_commit": git_commit(),
        "config_hash": config_hash(cfg) if cfg is not None else None,
        "seed": seed,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "versions": versions(),
        "float32_precision": float32_precision(),
        "argv": sys.argv,
        "gpu": gpu_model(),
        "container": container_digest(),
        "site": site_label(),
    }
    slot = held()
    if slot is not None:   # the machine's GPU pool: which slot made this file (not a result)
        block["gpu_slot"] = slot.name
    if cfg is not None:
        block["config"] = jsonable(cfg)
    block.update(jsonable(extra))
    return block
