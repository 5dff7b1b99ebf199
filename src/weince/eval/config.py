"""The evaluations' options, importable without torch: the one source of their types,
defaults and ranges (the library functions, ``weince eval``, the workflow and the protocol
table read them; the workflow config schema's ``vision.features``, ``vision.linear``,
``vision.knn``, ``vision.evt.collect`` and ``text.sts`` blocks are generated from them,
:mod:`weince.utils.settings`). The probes' defaults are the official protocol
(``docs/protocol.md``).

    from weince.eval.config import FeaturesConfig, KNNConfig, LinearProbeConfig
    LinearProbeConfig().epochs, KNNConfig().k     # 100, 50
    FeaturesConfig().batch_size                   # 512 (extract_features' default)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from weince.utils.settings import setting

__all__ = ["FeaturesConfig", "LinearProbeConfig", "KNNConfig", "ScoresConfig", "STSConfig"]


@dataclass
class FeaturesConfig:
    """:func:`weince.eval.features.extract_features` options (its keyword defaults are
    these)."""

    max_images: int | None = setting(None, ge=1)   # per split (None: all)
    dataset: str | None = setting(None, ref="dataset")   # None: the encoder's
    data_root: str | None = None    # None: the training config's, else $WEINCE_DATA
    batch_size: int = setting(512, ge=1)
    device: str = "auto"
    download: bool = False
    progress: bool | None = None


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


@dataclass
class ScoresConfig:
    """:func:`weince.eval.scores.collect_score_file` options, the score collection of the
    tail and link diagnostics (its keyword defaults are these)."""

    dataset: str | None = setting(None, ref="dataset")   # None: the encoder's
    data_root: str | None = None    # None: the encoder config's
    split: str = "train"
    batch_size: int = setting(256, ge=1)
    n_batches: int = setting(64, ge=1)
    link_batches: int = setting(40, ge=0)
    link_batch_size: int | None = setting(None, ge=1)   # None: batch_size
    device: str = "auto"
    seed: int = setting(0, ge=0)
    download: bool = False


@dataclass
class STSConfig:
    """:func:`weince.eval.sts.run_sts` options (its keyword defaults are these; ``data``, a
    required argument of ``run_sts``, is ``"synthetic"`` unless set)."""

    data: str = setting("synthetic", description="synthetic | stsb | a folder")
    splits: tuple[Literal["train", "dev", "test"], ...] = ("dev", "test")
    n_synthetic: int = setting(500, ge=0)
    seed: int = setting(0, ge=0)
    pooling: Literal["cls", "mean"] = setting("cls", ref="pooling")
    batch_size: int = setting(128, ge=1)
    max_length: int | None = setting(None, ge=1)
    device: str | None = "auto"     # None: CPU
    offline: bool = True
