"""``weince collect-scores``: similarity scores of a frozen encoder (SPEC 4-5) -> ``.npz``.

    weince collect-scores --encoder ENCODER.pt --dataset NAME --data-root DIR --out scores.npz \\
        [--batch-size 256] [--n-batches 64] [--link-batches 40] [--seed 0]

The file holds ``scores`` (pooled strictly-lower-triangular similarities of single views,
:func:`weince.evt.collect.collect_scores`), the two-view link batches ``sim, targets,
mask`` (:func:`weince.evt.collect.collect_link_batches`; skipped with ``--link-batches 0``)
and ``meta`` (the encoder's ``tau``, data set, sizes, seed), ready for ``weince evt``.
The views use the encoder's own training augmentation (data set recipe plus the run's
``aug_kwargs``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "main", "collect_score_file"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encoder", required=True, help="encoder.pt from `weince pretrain`")
    p.add_argument("--dataset", default=None,
                   help="data set name (default: the one the encoder was trained on)")
    p.add_argument("--data-root", default=None, help="data folder (default $WEINCE_DATA or ./data)")
    p.add_argument("--split", default="train", help="split to draw images from (default train)")
    p.add_argument("--out", required=True, help="output .npz")
    p.add_argument("--batch-size", type=int, default=256, help="views per tail batch, K + 1 (256)")
    p.add_argument("--n-batches", type=int, default=64, help="tail batches pooled (64)")
    p.add_argument("--link-batches", type=int, default=40,
                   help="two-view batches for the link fit (0 = none; 40 x 512 rows by default)")
    p.add_argument("--link-batch-size", type=int, default=None,
                   help="images per two-view batch, N (2N views; default --batch-size)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--download", action="store_true",
                   help="let torchvision download CIFAR / STL-10 when missing")


def collect_score_file(encoder, out, *, dataset: str | None = None, data_root=None,
                       split: str = "train", batch_size: int = 256, n_batches: int = 64,
                       link_batches: int = 40, link_batch_size: int | None = None,
                       device: str = "auto", seed: int = 0, download: bool = False) -> Path:
    """Load ``encoder`` (:func:`weince.models.load_encoder`) and its data set, collect the
    tail scores and the link batches, and write them to ``out`` (:func:`save_scores`).

    ``dataset`` defaults to the encoder config's ``dataset``; the augmentation is
    ``build_augment(dataset, image_size=cfg["image_size"], **cfg["aug_kwargs"])``, as in
    training. Returns ``out``.
    """
    import torch

    from weince.data.augment import build_augment
    from weince.data.vision import load_vision
    from weince.evt.collect import (collect_link_batches, collect_scores, save_scores,
                                    score_batch_ids)
    from weince.models import load_encoder

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
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
            "seed": seed, "n_images": int(images.shape[0]), "augment": augment.config()}
    batch = score_batch_ids(n_batches, min(batch_size, images.shape[0]))
    return save_scores(out, scores, link, meta=meta, batch=batch)


def main(args: argparse.Namespace) -> int:
    path = collect_score_file(args.encoder, args.out, dataset=args.dataset,
                              data_root=args.data_root, split=args.split,
                              batch_size=args.batch_size, n_batches=args.n_batches,
                              link_batches=args.link_batches,
                              link_batch_size=args.link_batch_size, device=args.device,
                              seed=args.seed, download=args.download)
    print(f"wrote {Path(path)}")
    return 0
