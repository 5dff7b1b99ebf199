"""Frozen features of a pretrained encoder, extracted once and cached in a torch file.

    from weince.eval.features import extract_features
    feats = extract_features("run/encoder.pt", "run/features.pt")
    feats["train"]["backbone"]   # (N_train, feat_dim) float32, h = backbone(x)
    feats["train"]["head"]       # (N_train, proj_dim) float32, z = head(h), not normalised
    feats["train"]["labels"]     # (N_train,) int64
    feats["test"][...]; feats["meta"]  # data set, encoder, sizes, normalisation

Images get the evaluation transform only (scale to [0, 1], the normalisation the encoder
was trained with, and a bilinear resize when the training view size differs from the
stored size): no augmentation. The full ``train`` and ``test`` splits are embedded
(``max_train_images`` of pretraining does not apply here). Labels of ``-1`` (unlabeled
images) never occur: only the labelled splits are read.

Command line: ``weince features --encoder run/encoder.pt --out run/features.pt``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from weince.data.augment import EvalTransform
from weince.data.vision import DATASETS, load_vision
from weince.eval.config import FeaturesConfig
from weince.models import load_encoder
from weince.utils import provenance
from weince.utils.checkpoint import save_checkpoint
from weince.utils.device import resolve_device
from weince.utils.finite import check_finite
from weince.utils.runlock import locks_output

__all__ = ["extract_features", "embed_images"]


@torch.no_grad()
def embed_images(model: torch.nn.Module, images: torch.Tensor, *, mean, std,
                 image_size: int, batch_size: int = 512, device: torch.device | str = "cpu",
                 amp: bool = False, progress: bool = False, desc: str = "features"
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h, z)`` float32 on the CPU for uint8 ``images`` ``(N, C, H, W)``, in batches."""
    dev = resolve_device(device)
    tf = EvalTransform(mean, std)
    model = model.to(dev).eval()
    use_amp = bool(amp and dev.type == "cuda")
    hs, zs = [], []
    for i in tqdm(range(0, images.shape[0], batch_size), desc=desc, disable=not progress,
                  leave=False):
        x = tf(images[i:i + batch_size].to(dev))
        if x.shape[-1] != image_size or x.shape[-2] != image_size:
            x = F.interpolate(x, size=(image_size, image_size), mode="bilinear",
                              align_corners=False, antialias=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_amp):
            h, z = model(x)
        hs.append(h.float().cpu())
        zs.append(z.float().cpu())
    return torch.cat(hs), torch.cat(zs)


_D = FeaturesConfig()   # the keyword defaults (the workflow's vision.features block is typed)


@locks_output("out_path", parent=True)   # one writer per output file
def extract_features(encoder_path: str | os.PathLike, out_path: str | os.PathLike | None,
                     dataset: str | None = _D.dataset, data_root: str | None = _D.data_root,
                     batch_size: int = _D.batch_size, device: str = _D.device, *,
                     download: bool = _D.download, progress: bool | None = _D.progress,
                     max_images: int | None = _D.max_images) -> dict[str, Any]:
    """Embed the train and test splits with a frozen encoder; save and return the dict.

    Args:
        encoder_path: ``encoder.pt`` written by ``weince pretrain``.
        out_path: where to save the torch file (``None``: return only).
        dataset: data set to embed (default: the one the encoder was trained on).
        data_root: data folder (default: the training config's, else ``$WEINCE_DATA``).
        batch_size: images per forward pass.
        device: ``auto`` (CUDA if available), ``cpu`` or ``cuda[:N]``.
        max_images: embed at most this many images of each split (a fixed seeded subset,
            the same for every encoder; None: all). The rehearsal's size, never the paper's.

    Returns:
        ``{"train": {"backbone", "head", "labels"}, "test": {...}, "meta": {...}}``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = str(resolve_device(device))
    model, cfg = load_encoder(encoder_path, map_location=device)
    name = (dataset or cfg.get("dataset") or "").lower()
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r} (encoder trained on "
                         f"{cfg.get('dataset')!r}); valid: {', '.join(DATASETS)}")
    spec = DATASETS[name]
    if spec.channels != cfg["channels"]:
        raise ValueError(f"{name} has {spec.channels} channels but the encoder takes "
                         f"{cfg['channels']}")
    root = data_root if data_root is not None else cfg.get("data_root")
    # the normalisation used in training (saved by pretrain), else the data set's
    same = name == cfg.get("dataset")
    mean = cfg.get("norm_mean", spec.mean) if same else spec.mean
    std = cfg.get("norm_std", spec.std) if same else spec.std
    if progress is None:
        progress = bool(os.environ.get("WEINCE_PROGRESS"))
    out: dict[str, Any] = {}
    for split in ("train", "test"):
        data = load_vision(name, root, split, download=download)
        if max_images is not None and int(max_images) < len(data):
            g = torch.Generator().manual_seed(0)
            keep = torch.randperm(len(data), generator=g)[:int(max_images)].sort().values
            data = data.subset(keep)
        h, z = embed_images(model, data.images, mean=mean, std=std,
                            image_size=int(cfg["image_size"]), batch_size=batch_size,
                            device=device, progress=progress, desc=f"features {split}",
                            amp=bool(cfg.get("amp", False)))  # the encoder's training precision
        out[split] = {"backbone": h, "head": z, "labels": data.labels.clone()}
    check_finite(((f"{s}/{k}", out[s][k]) for s in out for k in ("backbone", "head")),
                 f"features of {encoder_path} (nothing written)",
                 "the encoder's finite weights still overflow on this data: re-run the "
                 "pretrain rule (lower lr)")
    out["meta"] = {
        "dataset": name, "encoder": str(Path(encoder_path)), "encoder_cfg": cfg,
        "num_classes": spec.num_classes, "image_size": int(cfg["image_size"]),
        "mean": list(mean) if mean is not None else None,
        "std": list(std) if std is not None else None,
        "n_train": int(out["train"]["labels"].shape[0]),
        "n_test": int(out["test"]["labels"].shape[0]),
        "backbone_dim": int(out["train"]["backbone"].shape[1]),
        "head_dim": int(out["train"]["head"].shape[1]),
    }
    out["meta"]["provenance"] = provenance(
        {"encoder_cfg": cfg, "dataset": name, "batch_size": batch_size,
         "max_images": max_images}, cfg.get("seed"))
    if out_path is not None:
        save_checkpoint(out_path, **out)  # atomic: temporary file, then rename
    return out
