"""The linear probe's and the k-NN's options, importable without torch: the one source of
their types, defaults and ranges (the library functions, ``weince eval``, the workflow and
the protocol table read them; the workflow config schema's ``vision.linear`` and
``vision.knn`` blocks are generated from them, :mod:`weince.utils.settings`). The defaults
are the official protocol (``docs/protocol.md``).

    from weince.eval.config import KNNConfig, LinearProbeConfig
    LinearProbeConfig().epochs, KNNConfig().k     # 100, 50
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from weince.utils.settings import setting

__all__ = ["LinearProbeConfig", "KNNConfig"]


@dataclass
class LinearProbeConfig:
    """:func:`weince.eval.linear.linear_probe` options (``docs/protocol.md`` defaults)."""

    feature: Literal["backbone", "head"] = setting("backbone", ref="feature")
    seeds: tuple[int, ...] = setting((1,), ge=0)   # probe seeds (trained together)
    epochs: int = setting(100, ge=1)
    lr: float = setting(3e-4, gt=0, le=10)
    batch_size: int = setting(256, ge=1)
    val_frac: float = setting(0.2, gt=0, lt=1)
    split_seed: int | None = setting(1, ge=0)   # None: one split per probe seed
    select: Literal["final", "best_epoch"] = "final"
    weight_decay: float = setting(0.0, ge=0, le=1)
    standardize: bool = False
    device: str = "cpu"
    progress: bool | None = None
    # None: 1 thread for small problems (see linear_probe)
    threads: int | None = setting(None, ge=1)


@dataclass
class KNNConfig:
    """:func:`weince.eval.knn.knn_eval` options (``docs/protocol.md`` defaults)."""

    feature: Literal["backbone", "head"] = setting("backbone", ref="feature")
    k: int = setting(50, ge=1)
    temperature: float = setting(0.1, gt=0, le=10)
    recall_ks: tuple[int, ...] = (1, 2, 5, 10, 20, 50)
    val_frac: float = setting(0.2, gt=0, lt=1)
    split_seeds: tuple[int, ...] = setting((1, 2, 3, 4, 5), ge=0)
    device: str = "cpu"
    chunk: int = setting(1024, ge=1)
    threads: int | None = setting(None, ge=1)   # None: 1 thread for small problems (knn_eval)
