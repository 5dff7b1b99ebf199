"""Similarity scores of a frozen encoder (tail and link diagnostics) -> ``scores.npz``.

    from weince.eval.scores import collect_score_file
    collect_score_file("encoder.pt", "scores.npz", n_batches=64, link_batches=40)

The file holds ``scores`` (pooled strictly-lower-triangular similarities of single views,
:func:`weince.evt.collect.collect_scores`), the two-view link batches ``sim, targets,
mask`` (:func:`weince.evt.collect.collect_link_batches`; none with ``link_batches=0``) and
``meta`` (the encoder's ``tau``, data set, sizes, seed), ready for
:mod:`weince.evt.fits`. The views use the encoder's own training augmentation (data set
recipe plus the run's ``aug_kwargs``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from weince.data.augment import build_augment
from weince.data.vision import load_vision
from weince.eval.config import ScoresConfig
from weince.evt.collect import collect_link_batches, collect_scores
from weince.evt.scorefile import save_scores, score_batch_ids
from weince.models import load_encoder
from weince.utils.device import resolve_device

__all__ = ["collect_score_file"]


_D = ScoresConfig()   # the keyword defaults (the workflow's vision.evt.collect block is typed)


def collect_score_file(encoder, out, *, dataset: str | None = _D.dataset,
                       data_root=_D.data_root,
                       split: str = _D.split, batch_size: int = _D.batch_size,
                       n_batches: int = _D.n_batches, link_batches: int = _D.link_batches,
                       link_batch_size: int | None = _D.link_batch_size,
                       device: str = _D.device, seed: int = _D.seed,
                       download: bool = _D.download) -> Path:
    """Load ``encoder`` (:func:`weince.models.load_encoder`) and its data set, collect the
    tail scores and the link batches, and write them to ``out`` (:func:`save_scores`).

    ``dataset`` defaults to the encoder config's ``dataset``; the augmentation is
    ``build_augment(dataset, image_size=cfg["image_size"], **cfg["aug_kwargs"])``, as in
    training. Returns ``out``.
    """
    device = str(resolve_device(device))
    model, cfg = load_encoder(encoder, map_location=device)
    cfg = dict(cfg or {})
    name = dataset or cfg.get("dataset")
    if not name:
        raise ValueError(f"{encoder} does not record its data set; pass --dataset NAME")
    if data_root is None:
        data_root = cfg.get("data_root")
    images = load_vision(name, data_root, split, download=download).images
    overrides: dict[str, Any] = dict(cfg.get("aug_kwargs") or {})
    if cfg.get("image_size"):
        overrides.setdefault("image_size", cfg["image_size"])
    augment = build_augment(name, **overrides)

    def embed(x):
        return model(x)[1]

    scores = collect_scores(embed, images, augment, batch_size=batch_size, n_batches=n_batches,
                            device=device, seed=seed)
    link = None
    if link_batches > 0:
        link = collect_link_batches(embed, images, augment,
                                    batch_size=link_batch_size or batch_size,
                                    n_batches=link_batches, device=device, seed=seed)
    meta = {"encoder": os.fspath(encoder), "dataset": name, "split": split,
            "tau": float(cfg.get("tau", 0.5)), "loss": cfg.get("loss"),
            "backbone": cfg.get("backbone"), "batch_size": min(batch_size, images.shape[0]),
            "n_batches": n_batches, "link_batches": link_batches,
            "link_batch_size": min(link_batch_size or batch_size, images.shape[0]),
            "seed": seed, "encoder_seed": cfg.get("seed"), "n_images": int(images.shape[0]),
            "augment": augment.config()}
    batch = score_batch_ids(n_batches, min(batch_size, images.shape[0]))
    return save_scores(out, scores, link, meta=meta, batch=batch)
