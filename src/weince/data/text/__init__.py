"""Text data for unsupervised SimCSE: the real corpora (:mod:`weince.data.text.real`:
wiki1m, STS-B) and a synthetic stand-in (:mod:`weince.data.text.synthetic`); the
loaders below pick one by name (``"synthetic"`` or a path).

    from weince.data.text import load_sts, load_train_sentences
    load_sts("synthetic", "dev", n_synthetic=500, seed=0)   # or an STS-B folder
"""

from __future__ import annotations

import os
from pathlib import Path

from weince.data.text.real import SPLITS, STSPairs, load_stsb, load_wiki1m
from weince.data.text.synthetic import generate_corpus, generate_sts_pairs

__all__ = [
    "STSPairs",
    "load_wiki1m",
    "load_stsb",
    "load_sts",
    "load_train_sentences",
    "generate_corpus",
    "generate_sts_pairs",
    "SYNTHETIC_SEED_OFFSET",
]

# seeds of the synthetic splits: dev = seed + 1, test = seed + 2, train corpus = seed
SYNTHETIC_SEED_OFFSET = {"train": 0, "dev": 1, "test": 2}


def load_sts(data: str | os.PathLike, split: str, *, n_synthetic: int = 500,
             seed: int = 0) -> STSPairs:
    """``data == "synthetic"``: :func:`generate_sts_pairs` with seed ``seed + offset``
    (dev +1, test +2); otherwise :func:`load_stsb` on the folder ``data``."""
    if str(data) == "synthetic":
        if split not in SPLITS:
            raise ValueError(f"unknown STS split {split!r}; valid: {', '.join(SPLITS)}")
        return generate_sts_pairs(n_synthetic, seed + SYNTHETIC_SEED_OFFSET[split])
    return load_stsb(data, split)


def load_train_sentences(data: str | Path, *, n: int | None = None, seed: int = 0) -> list[str]:
    """Training sentences: ``"synthetic"`` -> :func:`generate_corpus` (``n`` sentences,
    default 2000), else :func:`load_wiki1m` on the file ``data`` (first ``n``, or all)."""
    if str(data) == "synthetic":
        return generate_corpus(n or 2000, seed + SYNTHETIC_SEED_OFFSET["train"])
    return load_wiki1m(data, limit=n)
