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
``embed_fn(float batch) -> (B, d)`` projection embeddings (normalised here). torch is
imported inside the functions, so ``weince.evt`` stays importable without it.

Example::

    model, cfg = weince.models.load_encoder("encoder.pt")
    scores = collect_scores(lambda x: model(x)[1], ds.images, augment)
    link = collect_link_batches(lambda x: model(x)[1], ds.images, augment)
    save_scores("scores.npz", scores, link, batch=score_batch_ids(64, 256))

The batch ids let the tail fit resample whole batches (``weince.evt.gpd``): the scores of
one batch share its images, so they are not independent draws.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from weince.evt._checks import progress

__all__ = ["collect_scores", "collect_link_batches", "save_scores", "load_scores",
           "score_batch_ids"]


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
    import torch

    if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8 or images.dim() != 4:
        raise ValueError("images must be a uint8 torch tensor (N, C, H, W), got "
                         f"{type(images).__name__} {getattr(images, 'dtype', '')} "
                         f"{tuple(getattr(images, 'shape', ()))}")


def _embed(embed_fn, augment, images, idx, device):
    import torch

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
    import torch

    from weince.utils.device import resolve_device

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
    import torch

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
    import torch

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


def score_batch_ids(n_batches: int, batch_size: int) -> np.ndarray:
    """The batch each score of :func:`collect_scores` came from (its scores are laid out
    batch after batch, ``batch_size * (batch_size - 1) / 2`` per batch)."""
    per = batch_size * (batch_size - 1) // 2
    dtype = np.uint8 if n_batches <= 256 else np.uint16 if n_batches <= 65536 else np.int64
    return np.repeat(np.arange(n_batches, dtype=dtype), per)


def save_scores(path, scores, link: dict[str, Any] | None = None,
                meta: dict[str, Any] | None = None, batch=None) -> Path:
    """Write ``scores`` (and optionally the link batches ``sim, targets, mask``, a JSON
    ``meta`` dict, e.g. the encoder's ``tau``, and ``batch``, the batch id of each score,
    which the tail fit's batch bootstrap needs) to an ``.npz`` file, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {"scores": np.asarray(scores, dtype=np.float32).reshape(-1)}
    if batch is not None:
        b = np.asarray(batch).reshape(-1)
        if b.shape != arrays["scores"].shape or not np.issubdtype(b.dtype, np.integer):
            raise ValueError(f"batch must hold one integer batch id per score "
                             f"({arrays['scores'].size}), got {b.dtype} {b.shape}")
        arrays["batch"] = b
    if link is not None:
        missing = {"sim", "targets"} - set(link)
        if missing:
            raise ValueError(f"link needs keys sim, targets (and optionally mask); missing "
                             f"{sorted(missing)}")
        arrays["sim"] = np.asarray(link["sim"], dtype=np.float32)
        arrays["targets"] = np.asarray(link["targets"], dtype=np.int64)
        if link.get("mask") is not None:
            arrays["mask"] = np.asarray(link["mask"], dtype=bool)
    if meta is not None:
        arrays["meta"] = np.array(json.dumps(meta, default=str))
    from weince.utils.diskspace import atomic_write, payload_bytes

    def write(tmp):
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    return atomic_write(path, write, need=payload_bytes(arrays))


def load_scores(path) -> dict[str, Any]:
    """Read a file written by :func:`save_scores`: ``{"scores", ["batch"], ["sim",
    "targets", "mask"], "meta": dict}``.

    Files written before batch ids were stored have no ``batch`` array; when their
    ``meta`` records ``n_batches`` and ``batch_size`` and the score count matches that
    layout, ``batch`` is rebuilt from it (``meta["batch_ids"] = "rebuilt from meta"``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"score file {path} does not exist; make it with `weince "
                                "collect-scores --encoder ENCODER.pt --dataset NAME --data-root "
                                f"DIR --out {path}` (or its workflow rule)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):
        # never numpy's advice to allow pickles: a score file holds plain arrays only
        raise ValueError(f"{path}: not a readable score file (truncated or corrupt); delete it "
                         f"and re-run the collect_scores rule (`weince collect-scores`) that "
                         f"writes it") from None
    if "scores" not in arrays:
        raise ValueError(f"{path} has no 'scores' array (found {sorted(arrays)}); it was not "
                         "written by weince.evt.collect.save_scores")
    out: dict[str, Any] = {k: v for k, v in arrays.items() if k != "meta"}
    out["meta"] = json.loads(str(arrays["meta"])) if "meta" in arrays else {}
    if "batch" not in out:
        nb, bs = out["meta"].get("n_batches"), out["meta"].get("batch_size")
        if isinstance(nb, int) and isinstance(bs, int) and \
                nb * (bs * (bs - 1) // 2) == out["scores"].size:
            out["batch"] = score_batch_ids(nb, bs)
            out["meta"]["batch_ids"] = "rebuilt from meta"
    return out
