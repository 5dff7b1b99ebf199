"""Which settings of a result file decide its numbers (its *protocol*), and which result
files belong to one setting.

A result file's ``provenance.config`` records the options of the stage that wrote it (the
probe's epochs, the encoder's epochs, arms, grid point, precision, data split...). Its
protocol is that record without what names *where* or *which replicate* (paths, seeds,
devices, thread counts, progress bars, chunk sizes): two files of one setting must agree on
every key of it, or their numbers come from different experiments. The setting of a result
file is its path with every ``seed<N>`` folder made ``seed*``: the encoder seeds of one
arm of one data set and backbone.

Nothing here imports torch.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["protocol_of", "setting_of", "first_difference", "VOLATILE"]

# keys (leaf names) that say where or which replicate, never how: left out of a protocol
VOLATILE = {"seed", "device", "threads", "progress", "chunk", "num_workers", "workers",
            "out", "out_dir", "path", "features", "encoder", "data_root", "root", "log",
            "cache_dir", "pin_memory", "prefetch_factor", "compile_cache", "keep_checkpoint",
            "keep_states", "download", "timing_warmup"}
_SEED_DIR = re.compile(r"(?<=/)seed\d+(?=/)")


def _pathlike(v: Any) -> bool:
    return isinstance(v, str) and ("/" in v or v.endswith((".pt", ".json", ".npz")))


def protocol_of(config: Any, prefix: str = "") -> dict[str, Any]:
    """The flattened result-relevant settings of a ``provenance.config`` (dotted keys)."""
    out: dict[str, Any] = {}
    if isinstance(config, dict):
        for k, v in config.items():
            if str(k) in VOLATILE:
                continue
            out.update(protocol_of(v, f"{prefix}.{k}" if prefix else str(k)))
    elif not _pathlike(config) and prefix:
        out[prefix] = config
    return out


def setting_of(path: str) -> str:
    """The setting a result file belongs to: its path with ``seed<N>`` folders as ``seed*``."""
    return _SEED_DIR.sub("seed*", "/" + path.lstrip("/"))[1:]


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """``(key, value in a, value in b)`` of the first key (sorted) two protocols disagree
    on, or None; a key only one of them has counts as ``<absent>`` in the other."""
    for key in sorted(a.keys() | b.keys()):
        va, vb = a.get(key, "<absent>"), b.get(key, "<absent>")
        if va != vb:
            return key, va, vb
    return None
