"""Semantic textual similarity (STS) evaluation of a sentence encoder.

Protocol (as SimCSE's STS-B numbers): embed both sentences of every pair with the
encoder's last-layer ``[CLS]`` vector (*before* the SimCSE MLP), score a pair by the cosine
of its two embeddings, and correlate the scores with the gold similarities. Reported
figures are **Spearman and Pearson correlations x 100** (SimCSE tables print
``100 * spearman``), so 76.36 means rho = 0.7636. Spearman is Pearson's correlation of
average ranks (ties share their mean rank), identical to ``scipy.stats.spearmanr``.

    from weince.eval.sts import evaluate_sts, run_sts
    evaluate_sts("out/model", pairs)        # {"spearman": .., "pearson": .., "n": ..}
    run_sts("out/model", "synthetic", "out/sts.json")

``sts.json`` holds ``dev`` and ``test`` results, ``synthetic: true`` when the pairs are
the project's generated stand-in (not STS-B), and a provenance block.
:func:`aggregate_sts` turns several seeds' files into ``{"mean", "std", "n", "values"}``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from weince.data.text import STSPairs, load_sts
from weince.eval.config import STSConfig
from weince.models.text import SimCSEModel, load_text_encoder
from weince.utils import read_json, write_json
from weince.utils.device import resolve_device
from weince.utils.summary import summary

__all__ = ["POOLINGS", "encode", "spearman", "pearson", "evaluate_sts", "run_sts",
           "aggregate_sts"]

POOLINGS = ("cls", "mean")


def _unwrap(model: Any) -> Any:
    """The ``transformers`` encoder inside a :class:`~weince.models.text.SimCSEModel`."""
    return model.encoder if isinstance(model, SimCSEModel) else model


@torch.no_grad()
def encode(model: Any, tokenizer: Any, sentences: Sequence[str],
           pooling: Literal["cls", "mean"] = "cls", batch_size: int = 128,
           max_length: int | None = None, device: str | torch.device | None = None,
           progress: bool = False) -> torch.Tensor:
    """Embed sentences with a ``transformers`` encoder (eval mode: no dropout).

    Args:
        model: an ``AutoModel`` encoder, or a ``SimCSEModel`` (its encoder is used, so the
            MLP is skipped).
        tokenizer: the matching tokenizer.
        sentences: ``n`` strings.
        pooling: ``"cls"`` (last-layer ``[CLS]``, SimCSE's evaluation) or ``"mean"``
            (attention-masked mean of the last layer).
        batch_size: sentences per forward pass (sorted by length to pad less).
        max_length: truncate to this many tokens (None: the model's limit, at most 512;
            SimCSE's evaluation does not truncate STS sentences).
        device: defaults to the model's device.
    Returns:
        float32 CPU tensor ``(n, hidden)`` in the order of ``sentences``.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    sentences = list(sentences)
    encoder = _unwrap(model)
    if device is None:
        device = next(encoder.parameters()).device
    limit = max_length or min(int(getattr(tokenizer, "model_max_length", 512) or 512), 512)
    was_training = encoder.training
    encoder.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out = torch.empty(len(sentences), encoder.config.hidden_size)
    starts = range(0, len(order), batch_size)
    if progress:
        starts = tqdm(starts, desc="encode", unit="batch", leave=False)
    try:
        for start in starts:
            idx = order[start:start + batch_size]
            batch = tokenizer([sentences[i] for i in idx], padding=True, truncation=True,
                              max_length=limit, return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items()}
            hidden = encoder(**batch).last_hidden_state.float()
            if pooling == "cls":
                emb = hidden[:, 0]
            else:
                m = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                emb = (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
            out[torch.tensor(idx)] = emb.cpu()
    finally:
        encoder.train(was_training)
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based; ties get their mean rank)."""
    order = np.argsort(x, kind="mergesort")
    sx = x[order]
    ranks = np.empty(len(x), dtype=np.float64)
    i = 0
    n = len(x)
    while i < n:
        j = i
        while j + 1 < n and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    return ranks


def pearson(x: Iterable[float], y: Iterable[float]) -> float:
    """Pearson correlation of two equal-length vectors (NaN when either is constant)."""
    x = np.asarray(list(x) if not isinstance(x, np.ndarray) else x, dtype=np.float64)
    y = np.asarray(list(y) if not isinstance(y, np.ndarray) else y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"pearson needs two 1-d vectors of equal length, got {x.shape} and "
                         f"{y.shape}")
    if len(x) < 2:
        raise ValueError(f"a correlation needs at least 2 pairs, got {len(x)}")
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if den == 0.0:
        return float("nan")
    return float(np.clip(float(dx @ dy) / den, -1.0, 1.0))


def spearman(x: Iterable[float], y: Iterable[float]) -> float:
    """Spearman rank correlation: Pearson of average ranks (= ``scipy.stats.spearmanr``)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman needs two 1-d vectors of equal length, got {x.shape} and "
                         f"{y.shape}")
    return pearson(_ranks(x), _ranks(y))


def _load_model(model_or_dir: Any, tokenizer: Any, offline: bool):
    if isinstance(model_or_dir, (str, os.PathLike)):
        model, tok = load_text_encoder(model_or_dir, offline=offline)
        return model, (tokenizer or tok)
    if tokenizer is None:
        raise ValueError("evaluate_sts: pass tokenizer= with an in-memory model "
                         "(or give a model folder / name instead)")
    return model_or_dir, tokenizer


def evaluate_sts(model_or_dir: Any, pairs: STSPairs, *, tokenizer: Any = None,
                 pooling: Literal["cls", "mean"] = "cls", batch_size: int = 128,
                 max_length: int | None = None, device: str | torch.device | None = None,
                 offline: bool = True) -> dict[str, float]:
    """Spearman and Pearson (x 100) of cosine similarities against gold scores.

    Args:
        model_or_dir: an encoder (with ``tokenizer=``), a ``SimCSEModel``, a model folder
            or a name accepted by :func:`weince.models.text.load_text_encoder`.
        pairs: :class:`~weince.data.text.STSPairs`.
    Returns:
        ``{"spearman", "pearson", "n"}``; correlations are multiplied by 100.
    """
    if len(pairs) < 2:
        raise ValueError(f"STS evaluation needs at least 2 pairs, got {len(pairs)}")
    model, tok = _load_model(model_or_dir, tokenizer, offline)
    if device is not None and isinstance(model_or_dir, (str, os.PathLike)):
        model.to(device)
    # embed every distinct sentence once
    uniq = sorted(set(pairs.sentences1) | set(pairs.sentences2))
    pos = {s: i for i, s in enumerate(uniq)}
    emb = encode(model, tok, uniq, pooling=pooling, batch_size=batch_size,
                 max_length=max_length, device=device)
    emb = torch.nn.functional.normalize(emb.double(), dim=1)
    a = emb[[pos[s] for s in pairs.sentences1]]
    b = emb[[pos[s] for s in pairs.sentences2]]
    cos = (a * b).sum(1).numpy()
    return {"spearman": 100.0 * spearman(cos, pairs.scores),
            "pearson": 100.0 * pearson(cos, pairs.scores), "n": int(len(pairs))}


_D = STSConfig()   # the keyword defaults (the workflow's text.sts block is typed)


def run_sts(model: str | os.PathLike, data: str | os.PathLike, out: str | os.PathLike | None,
            *, splits: Sequence[str] = _D.splits, n_synthetic: int = _D.n_synthetic,
            seed: int = _D.seed, pooling: Literal["cls", "mean"] = _D.pooling,
            batch_size: int = _D.batch_size, max_length: int | None = _D.max_length,
            device: str | None = _D.device, offline: bool = _D.offline) -> dict[str, Any]:
    """Evaluate a model on the dev and test splits and write ``sts.json``.

    Args:
        model: model folder or name (``"minilm"``, ``out_dir/model``, ``bert-base-uncased``).
        data: ``"synthetic"`` (generated pairs, seed ``seed`` + 1 / + 2 for dev / test) or
            an STS-B root folder (:func:`weince.data.text.load_stsb`).
        out: the JSON path (None: do not write).
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or None (CPU).
    Returns:
        ``{"model", "data", "synthetic", "pooling", "dev": {...}, "test": {...}}``.
    """
    encoder, tok = load_text_encoder(model, offline=offline)
    device = str(resolve_device(device)) if device == "auto" else device
    if device:
        encoder.to(device)
    synthetic = str(data) == "synthetic"
    result: dict[str, Any] = {"model": str(model), "data": str(data), "synthetic": synthetic,
                              "pooling": pooling, "scale": "correlation x 100"}
    if synthetic:
        result["note"] = ("SYNTHETIC graded-similarity pairs generated by weince.data.text; "
                          "a pipeline check, not an STS-B result")
    for split in splits:
        pairs = load_sts(data, split, n_synthetic=n_synthetic, seed=seed)
        r = evaluate_sts(encoder, pairs, tokenizer=tok, pooling=pooling, batch_size=batch_size,
                         max_length=max_length)
        result[split] = {**r, "source": pairs.source}
    if out is not None:
        cfg = {"model": str(model), "data": str(data), "n_synthetic": n_synthetic, "seed": seed,
               "pooling": pooling, "max_length": max_length, "splits": list(splits)}
        write_json(out, result, cfg=cfg, seed=seed)
    return result


def aggregate_sts(paths: Iterable[str | os.PathLike]) -> dict[str, Any]:
    """Summaries over several seeds' ``sts.json``: for each split and metric,
    ``{"mean", "std", "n", "values"}`` (``weince.utils.summary.summary``: sample std,
    None for one value); ``synthetic`` is True if any input was synthetic."""
    paths = list(paths)
    files = [read_json(Path(p)) for p in paths]
    if not files:
        raise ValueError("aggregate_sts needs at least one sts.json")
    out: dict[str, Any] = {"synthetic": any(f.get("synthetic") for f in files),
                           "files": [str(p) for p in paths]}
    for split in ("dev", "test"):
        have = [f[split] for f in files if split in f]
        if have:
            out[split] = {m: summary([h[m] for h in have]) for m in ("spearman", "pearson")}
    return out
