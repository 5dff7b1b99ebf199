"""The norms analysis' options, importable without torch: the one source of their types,
defaults and ranges (:mod:`weince.norms.run` takes them, ``weince norms --config`` reads
them, and the workflow config schema's ``norms.analysis`` block is generated from them,
:mod:`weince.utils.settings`).

    from weince.norms.config import NormsConfig
    NormsConfig().n_probes       # 256
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from weince.utils.settings import setting

__all__ = ["NormsConfig", "DEFAULT_ALPHAS"]

#: the discount strengths of the norm-aware re-scoring (N3), chosen on validation
DEFAULT_ALPHAS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


@dataclass
class NormsConfig:
    """Options of the norms analysis (YAML keys of ``weince norms --config``).

    ``None`` for ``lr``/``weight_decay``/``optimizer``/``tau``/``batch_size`` means: read
    it from the encoder's training config (vision) or use the ``text_*`` value (text).
    """

    # N1/N2 gradient statistics
    n_probes: int = setting(256, ge=1)  # inputs whose heat/drift/norm are measured
    n_bank: int = setting(512, ge=1)    # filler inputs the minibatches are completed from
    resamples: int = setting(8, ge=1)   # K minibatch placements per probe
    # minibatch size (None: the encoder's training batch)
    batch_size: int | None = setting(None, ge=1)
    max_batch_size: int = setting(256, ge=1)  # cap on the above (CPU budget)
    probes_per_batch: int = setting(16, ge=1)  # probes sharing one minibatch (one backward)
    gradient: Literal["unit", "pre"] = "unit"  # which heat the verdicts use (docs/norms.md)
    lr: float | None = setting(None, gt=0, le=10)
    weight_decay: float | None = setting(None, ge=0, le=1)
    optimizer: str | None = None
    tau: float | None = setting(None, gt=0, le=10)
    embed_batch: int = setting(512, ge=1)  # inputs per encoder forward pass
    # statistics
    n_boot: int = setting(2000, ge=0)
    min_n: int = setting(30, ge=1)      # fewer units: "not testable at this scale"
    seed: int = setting(0, ge=0)
    # N3
    alphas: list[float] = setting(factory=lambda: list(DEFAULT_ALPHAS), ge=0)
    # the retrieval feature (the k-NN protocol's)
    knn_feature: Literal["backbone", "head"] = setting("backbone", ref="feature")
    # the features whose norms are measured; the first is the primary one
    norm_features: list[str] = setting(factory=lambda: ["head", "backbone"], ref="feature")
    knn_k: int = setting(50, ge=1)
    knn_temperature: float = setting(0.1, gt=0, le=10)
    val_frac: float = setting(0.1, gt=0, lt=1)
    split_seed: int = setting(0, ge=0)
    hub_k: int = setting(10, ge=1)
    hub_frac: float = setting(0.1, gt=0, lt=1)
    low_frac: float = setting(0.25, gt=0, lt=1)
    # text
    # text: None = from the model's SimCSE train.json when it is a trained run, else the
    # nominal values of all-MiniLM-L6-v2's own training (weince.norms.run.TEXT_NOMINAL)
    text_loss: str | None = setting(None, ref="loss")
    text_tau: float | None = setting(None, gt=0, le=10)
    text_lr: float | None = setting(None, gt=0, le=10)
    text_weight_decay: float | None = setting(None, ge=0, le=1)
    text_optimizer: str | None = None
    text_probes: int = setting(128, ge=1)  # sentences whose heat/drift/norm are measured
    text_bank: int = setting(256, ge=1)    # filler sentences
    pooling: Literal["mean", "cls"] = setting("mean", ref="pooling")
    max_length: int = setting(64, ge=1)
    text_train_data: str = "synthetic"
    sts_data: str = "synthetic"
    sts_pairs: int = setting(500, ge=1)   # synthetic dev/test pairs each
    # hardware
    device: str = "cpu"                 # cpu | cuda | cuda:N | auto
    threads: int | None = setting(None, ge=1)
    progress: bool | None = None
