"""Similarity scores from a frozen encoder, for the tail and link diagnostics.

Tail scores (official protocol, ``docs/method.md``, "Tail diagnostics"): draw batches of
``K + 1 = 256`` images, one
augmented view each, embed with the projection head, L2-normalise, and keep the strictly
lower-triangular entries of ``Z Z^T`` (pairs of different images); repeat over 64
batches and pool (64 * 256 * 255 / 2 = 2,088,960 scores).

Link batches (``docs/method.md``, "Link selection"): two-view SimCLR batches in the layout of
``weince.losses.pair_similarities(..., layout="simclr")`` (docs/architecture.md):
``Z = cat(z1, z2)`` of ``2N`` views, ``sim = Z Z^T`` ``(2N, 2N)``, the diagonal masked,
the positive of row ``i`` at column ``(i + N) mod 2N``. Batches are stacked row-wise, so
``sim`` is ``(n_batches * 2N, 2N)``.

Contracts: ``images`` is a uint8 tensor ``(N, C, H, W)`` (``weince.data.vision.ImageSet``);
``augment(uint8 batch (B, C, H, W)) -> float tensor`` (``weince.data.augment.SimCLRAugment``);
``embed_fn(float batch) -> (B, d)`` projection embeddings (normalised here). This module
needs torch; the score file it is saved in (:mod:`weince.evt.scorefile`) and the fits that
read it (the rest of ``weince.evt``) do not.

Example::

    from weince.evt.scorefile import save_scores, score_batch_ids

    model, cfg = weince.models.load_encoder("encoder.pt")
    scores = collect_scores(lambda x: model(x)[1], ds.images, augment)
    link = collect_link_batches(lambda x: model(x)[1], ds.images, augment)
    save_scores("scores.npz", scores, link, batch=score_batch_ids(64, 256))
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch

from weince.evt._checks import progress
from weince.utils.device import resolve_device

__all__ = ["collect_scores", "collect_link_batches"]


def _batch_size(batch_size: int, n_images: int, what: str) -> int:
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2, got {batch_size}")
    if n_images < 2:
        raise ValueError(f"need at least 2 images, got {n_images}")
    if batch_size > n_images:
        warnings.warn(f"{what}: batch_size={batch_size} exceeds the {n_images} images; "
                      f"using batch_size={n_images}", stacklevel=3)
        return n_images
    return batch_size


def _check_images(images) -> None:
    if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8 or images.dim() != 4:
        raise ValueError("images must be a uint8 torch tensor (N, C, H, W), got "
                         f"{type(images).__name__} {getattr(images, 'dtype', '')} "
                         f"{tuple(getattr(images, 'shape', ()))}")


def _embed(embed_fn, augment, images, idx, device):
    x = augment(images[idx].to(device))
    z = embed_fn(x)
    if isinstance(z, (tuple, list)):
        raise ValueError("embed_fn must return the (B, d) projection embeddings, not a "
                         "tuple; for SimCLRModel use `lambda x: model(x)[1]`")
    if z.dim() != 2 or z.shape[0] != len(idx):
        raise ValueError(f"embed_fn returned shape {tuple(z.shape)}, expected ({len(idx)}, d)")
    z = z.float()
    norms = z.norm(dim=1)
    n_zero = int((norms == 0).sum())
    if n_zero:
        raise ValueError(f"{n_zero} embedding(s) are exactly zero and cannot be normalised")
    return torch.nn.functional.normalize(z, dim=1)


def _rng_context(device):
    dev = resolve_device(device)
    # fork the CPU RNG (and the CUDA one of the device used) so seeding here leaves the
    # caller's RNG state untouched
    return torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else [])


def collect_scores(embed_fn: Callable, images, augment: Callable, *, batch_size: int = 256,
                   n_batches: int = 64, device: str = "cpu", seed: int = 0) -> np.ndarray:
    """Pooled strictly-lower-triangular similarities of single augmented views
    (``docs/method.md``, "Tail diagnostics").

    Args:
        embed_fn: ``float (B, C, H, W) -> (B, d)`` projection embeddings (frozen encoder;
            called under ``torch.no_grad``).
        images: uint8 tensor ``(N, C, H, W)``.
        augment: ``uint8 (B, C, H, W) -> float`` one random view per image.
        batch_size: ``K + 1`` views per batch (256 in the paper); capped at ``N`` with a warning.
        n_batches: number of batches pooled (64).
        device: where the augmentation and the encoder run.
        seed: seeds the image draws and the torch RNG (forked: the caller's RNG state is kept).

    Returns:
        float32 ``(n_batches * B * (B - 1) / 2,)`` similarities of pairs of different images.
    """
    _check_images(images)
    if n_batches < 1:
        raise ValueError(f"n_batches must be >= 1, got {n_batches}")
    B = _batch_size(batch_size, images.shape[0], "collect_scores")
    gen = torch.Generator().manual_seed(seed)
    rows, cols = torch.tril_indices(B, B, offset=-1, device=device)
    out = np.empty(n_batches * rows.numel(), dtype=np.float32)
    with _rng_context(device), torch.no_grad():
        torch.manual_seed(seed)
        for b in progress(range(n_batches), desc="tail scores"):
            idx = torch.randperm(images.shape[0], generator=gen)[:B]   # distinct images
            z = _embed(embed_fn, augment, images, idx, device)
            sim = z @ z.T
            out[b * rows.numel():(b + 1) * rows.numel()] = sim[rows, cols].cpu().numpy()
    return out


def collect_link_batches(embed_fn: Callable, images, augment: Callable, *, batch_size: int = 256,
                         n_batches: int = 40, device: str = "cpu",
                         seed: int = 0) -> dict[str, np.ndarray]:
    """Two-view SimCLR batches for the link-selection fit.

    Each batch takes ``N = batch_size`` distinct images, two independent augmented views
    each, ``Z = cat(z1, z2)`` normalised, ``sim = Z Z^T`` with the diagonal masked and the
    positive of row ``i`` at ``(i + N) mod 2N`` (``K = 2N - 2`` negatives).

    Returns:
        ``{"sim": float32 (n_batches * 2N, 2N), "targets": int64 (n_batches * 2N,),
        "mask": bool (n_batches * 2N, 2N)}``.
    """
    _check_images(images)
    if n_batches < 1:
        raise ValueError(f"n_batches must be >= 1, got {n_batches}")
    N = _batch_size(batch_size, images.shape[0], "collect_link_batches")
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    sims = np.empty((n_batches * 2 * N, 2 * N), dtype=np.float32)
    with _rng_context(device), torch.no_grad():
        torch.manual_seed(seed + 1_000_003)
        for b in progress(range(n_batches), desc="link batches"):
            idx = torch.randperm(images.shape[0], generator=gen)[:N]
            z1 = _embed(embed_fn, augment, images, idx, device)
            z2 = _embed(embed_fn, augment, images, idx, device)
            z = torch.cat([z1, z2])
            sims[b * 2 * N:(b + 1) * 2 * N] = (z @ z.T).cpu().numpy()
    i = np.arange(2 * N)
    targets = np.tile((i + N) % (2 * N), n_batches).astype(np.int64)
    mask = np.tile(~np.eye(2 * N, dtype=bool), (n_batches, 1))
    return {"sim": sims, "targets": targets, "mask": mask}
