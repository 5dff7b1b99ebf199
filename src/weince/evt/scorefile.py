"""The score file of the tail and link diagnostics: ``scores.npz`` written by
:func:`save_scores` and read by :func:`load_scores` (numpy only, importable without torch;
:mod:`weince.evt.collect` collects the scores from a frozen encoder with torch).

The batch ids (:func:`score_batch_ids`) let the tail fit resample whole batches
(``weince.evt.gpd``): the scores of one batch share its images, so they are not independent
draws.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from weince.utils.diskspace import atomic_write, payload_bytes

__all__ = ["save_scores", "load_scores", "score_batch_ids"]


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

    def write(tmp):
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # array names, not options
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
                         "written by weince.evt.scorefile.save_scores")
    out: dict[str, Any] = {k: v for k, v in arrays.items() if k != "meta"}
    out["meta"] = json.loads(str(arrays["meta"])) if "meta" in arrays else {}
    if "batch" not in out:
        nb, bs = out["meta"].get("n_batches"), out["meta"].get("batch_size")
        if isinstance(nb, int) and isinstance(bs, int) and \
                nb * (bs * (bs - 1) // 2) == out["scores"].size:
            out["batch"] = score_batch_ids(nb, bs)
            out["meta"]["batch_ids"] = "rebuilt from meta"
    return out
