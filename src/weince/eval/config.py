"""The linear probe's and the k-NN's options, importable without torch: the one source of
their defaults (the library functions, ``weince eval``, the workflow and the protocol table
read them). The defaults are the official protocol (``docs/protocol.md``).

    from weince.eval.config import KNNConfig, LinearProbeConfig
    LinearProbeConfig().epochs, KNNConfig().k     # 100, 50
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["LinearProbeConfig", "KNNConfig"]


@dataclass
class LinearProbeConfig:
    """:func:`weince.eval.linear.linear_probe` options (``docs/protocol.md`` defaults)."""

    feature: Literal["backbone", "head"] = "backbone"
    seeds: tuple[int, ...] = (1,)
    epochs: int = 100
    lr: float = 3e-4
    batch_size: int = 256
    val_frac: float = 0.2
    split_seed: int | None = 1      # None: one split per probe seed
    select: Literal["final", "best_epoch"] = "final"
    weight_decay: float = 0.0
    standardize: bool = False
    device: str = "cpu"
    progress: bool | None = None
    threads: int | None = None      # None: 1 thread for small problems (see linear_probe)


@dataclass
class KNNConfig:
    """:func:`weince.eval.knn.knn_eval` options (``docs/protocol.md`` defaults)."""

    feature: Literal["backbone", "head"] = "backbone"
    k: int = 50
    temperature: float = 0.1
    recall_ks: tuple[int, ...] = (1, 2, 5, 10, 20, 50)
    val_frac: float = 0.2
    split_seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    device: str = "cpu"
    chunk: int = 1024
    threads: int | None = None      # None: 1 thread for small problems (see knn_eval)
