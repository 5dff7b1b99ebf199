"""Provenance for every result file: git commit, config hash, versions, date, seed.

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
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["git_commit", "config_hash", "versions", "float32_precision", "provenance",
           "jsonable"]


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit of the checkout that holds this package (``+dirty`` if modified), or
    ``WEINCE_GIT_COMMIT`` from the environment (set in the container), or ``unknown``."""
    env = os.environ.get("WEINCE_GIT_COMMIT")
    if env:
        return env
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        if not commit:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here, capture_output=True, text=True, timeout=5,
        ).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


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


def float32_precision() -> dict[str, Any]:
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
    (matmuls and cuDNN convolutions), host, UTC date."""
    block = {
        "git_commit": git_commit(),
        "config_hash": config_hash(cfg) if cfg is not None else None,
        "seed": seed,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "versions": versions(),
        "float32_precision": float32_precision(),
        "argv": sys.argv,
    }
    if cfg is not None:
        block["config"] = jsonable(cfg)
    block.update(jsonable(extra))
    return block
