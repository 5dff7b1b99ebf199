"""k-NN classification and recall@k on frozen features (``docs/protocol.md``, claim C6).

Cosine similarity; the bank is the training part of a stratified 80/20 train/validation
split of the training set, one split per split seed (official: seeds 1-5, ``knn_eval.py
--val-split-ratio 0.2``); the validation queries serve only the per-metric grid choice.
For a query ``q`` with nearest bank items ``1..k`` (cosine
``s_1 >= ... >= s_k``):

- ``acc@k``: weighted vote, weight ``exp((s_j - s_1) / T)`` (``T = 0.1``), the class with
  the largest total weight wins (ties: the smallest class index);
- ``recall@k``: 1 if any of the ``k`` nearest shares the query's label, else 0.

Both are averaged over the test queries (and, separately, the validation queries) in
percent, per split seed, then summarised over split seeds.

    from weince.eval.knn import knn_eval
    res = knn_eval("features.pt")
    res["acc@50"], res["recall@1"]        # {"mean", "std", "n", "values"} on test
    res["val"]["acc@50"]                  # the same on the validation queries

Command line: ``weince eval knn --features features.pt --out knn.json``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from weince.eval.config import KNNConfig
from weince.eval.linear import features_of, load_features, probe_feature_file, stratified_split
from weince.utils.config import as_config
from weince.utils.runlock import locks_output
from weince.utils.summary import summary as summarize
from weince.utils.checkpoint import torch_threads
from weince.utils.device import resolve_device
from weince.utils.predictions import knn_block

__all__ = ["knn_eval", "knn_scores", "weighted_vote"]


def weighted_vote(sims: torch.Tensor, labels: torch.Tensor, num_classes: int,
                  temperature: float) -> torch.Tensor:
    """The class each query's neighbours vote for, weighted ``exp((s - s_max) / T)``.

    Args:
        sims: ``(Q, k)`` similarities of the k nearest neighbours, sorted descending.
        labels: ``(Q, k)`` their labels (int).
    Returns:
        ``(Q,)`` the predicted class (ties go to the lower class index).
    """
    w = torch.exp((sims - sims[:, :1]) / temperature)
    votes = torch.zeros(sims.shape[0], num_classes, device=sims.device, dtype=w.dtype)
    votes.scatter_add_(1, labels, w)
    return votes.argmax(1)


def _per_query(s: torch.Tensor, nl: torch.Tensor, y: torch.Tensor, *, k: int,
               recall_ks: Sequence[int], num_classes: int, temperature: float
               ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each metric of a block of queries, per query: ``key -> (score, kept)``, the query's
    0/1 or value (the metric is its mean in percent) and what the predictions block keeps
    of it (its declaration in :data:`weince.utils.metrics.METRICS`).

    Args:
        s, nl: ``(c, kmax)`` the nearest bank items' similarities (descending) and labels.
        y: ``(c,)`` the queries' labels.
    """
    vote = weighted_vote(s[:, :k], nl[:, :k], num_classes, temperature)
    match = nl == y[:, None]                                     # (c, kmax)
    out = {f"acc@{k}": (vote == y, vote)}
    for r in recall_ks:
        hit = match[:, :r].any(1)
        out[f"recall@{r}"] = (hit, hit)
    return out


@torch.no_grad()
def knn_scores(query: torch.Tensor, query_labels: torch.Tensor, bank: torch.Tensor,
               bank_labels: torch.Tensor, *, k: int = 50, temperature: float = 0.1,
               recall_ks: Sequence[int] = (1, 2, 5, 10, 20, 50), num_classes: int | None = None,
               chunk: int = 1024, record: dict[str, Any] | None = None) -> dict[str, float]:
    """``acc@k`` (weighted vote) and ``recall@r`` for every ``r`` in ``recall_ks``, in
    percent over the queries. ``record``, when given, receives each metric's per-query
    values as the predictions block keeps them (``"acc@k"``: the voted label, (Q,);
    ``"recall@r"``: the hit, (Q,) bool), on the CPU.

    Args:
        query: (Q, D) features; query_labels: (Q,) int.
        bank: (M, D) features; bank_labels: (M,) int. Both are L2-normalised here.
        chunk: queries per similarity block (memory ``chunk x M``).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    kmax = max([k, *recall_ks])
    if k < 1 or min(recall_ks, default=1) < 1:
        raise ValueError(f"k and recall_ks must be >= 1, got k={k}, recall_ks={list(recall_ks)}")
    if kmax > bank.shape[0]:
        raise ValueError(f"k={kmax} exceeds the bank size {bank.shape[0]}")
    q = F.normalize(query.float(), dim=1)
    m = F.normalize(bank.float(), dim=1)
    qy = query_labels.long().to(q.device)
    my = bank_labels.long().to(q.device)
    C = int(num_classes if num_classes is not None else int(max(my.max(), qy.max())) + 1)
    # sums stay on the device; one host read per metric at the end (not per chunk)
    totals: dict[str, torch.Tensor] = {}
    kept: dict[str, list[torch.Tensor]] = {}
    for i in range(0, q.shape[0], chunk):
        s, idx = (q[i:i + chunk] @ m.T).topk(kmax, dim=1)          # sorted, descending
        per = _per_query(s, my[idx], qy[i:i + chunk], k=k, recall_ks=recall_ks,
                         num_classes=C, temperature=temperature)
        for key, (score, keep) in per.items():
            total = score.sum()
            totals[key] = totals[key] + total if key in totals else total
            if record is not None:
                kept.setdefault(key, []).append(keep.cpu())
    if record is not None and kept:
        record.update({key: torch.cat(v) for key, v in kept.items()})
    n = q.shape[0]
    return {key: 100.0 * t.item() / n for key, t in totals.items()}


_K = KNNConfig   # the one source of the defaults below


def knn_eval(features: str | os.PathLike | dict, *, k: int = _K.k,
             temperature: float = _K.temperature, recall_ks: Sequence[int] = _K.recall_ks,
             val_frac: float = _K.val_frac, split_seeds: Sequence[int] = _K.split_seeds,
             feature: str = _K.feature, device: str = _K.device, chunk: int = _K.chunk,
             threads: int | None = _K.threads) -> dict[str, Any]:
    """k-NN accuracy and recall@k, per split seed, summarised over split seeds.

    Args:
        features: dict or path written by :func:`weince.eval.features.extract_features`.
        k, temperature: vote size and temperature (official: 50, 0.1).
        recall_ks: the ``k`` of recall@k.
        val_frac: stratified fraction of the training set held out of the bank and used
            as validation queries (0 keeps the whole training set as bank, no val).
        split_seeds: one bank/validation split per seed.
        feature: ``"backbone"`` or ``"head"``.
        threads: CPU threads for torch; ``None`` picks 1 for small problems (under 1e9
            multiply-adds per split, e.g. digits/MNIST) and leaves torch's setting otherwise.

    Returns:
        ``{"acc@50": summary, "recall@1": summary, ...}`` on the test queries, the same
        under ``"val"`` for the validation queries, ``"per_seed"`` records and settings.
    """
    feats = load_features(features)
    x_train, y_train = features_of(feats, "train", feature)
    x_test, y_test = features_of(feats, "test", feature)
    num_classes = int(max(y_train.max(), y_test.max()).item()) + 1
    if threads is None and (x_test.shape[0] + x_train.shape[0]) * x_train.numel() < 1e9:
        threads = 1
    with torch_threads(threads):
        return _knn_eval(x_train, y_train, x_test, y_test, num_classes, k=k,
                         temperature=temperature, recall_ks=recall_ks, val_frac=val_frac,
                         split_seeds=split_seeds, feature=feature, device=device, chunk=chunk)


def _knn_eval(x_train, y_train, x_test, y_test, num_classes, *, k, temperature, recall_ks,
              val_frac, split_seeds, feature, device, chunk) -> dict[str, Any]:
    dev = resolve_device(device)   # 'auto' (the paper profile) -> CUDA when visible
    per_seed = []
    records: list[dict[str, Any]] = []
    split_seeds = [int(s) for s in split_seeds] or [0]
    for seed in split_seeds:
        tr, va = stratified_split(y_train, val_frac, seed)
        bank, bank_y = x_train[tr].to(dev), y_train[tr].to(dev)
        kw = dict(k=k, temperature=temperature, recall_ks=recall_ks, num_classes=num_classes,
                  chunk=chunk)
        seen: dict[str, Any] = {}
        rec = {"seed": seed, "n_bank": int(len(tr)),
               "test": knn_scores(x_test.to(dev), y_test.to(dev), bank, bank_y, **kw,
                                  record=seen)}
        records.append({key: v.numpy() for key, v in seen.items()})
        if len(va):
            rec["val"] = knn_scores(x_train[va].to(dev), y_train[va].to(dev), bank, bank_y, **kw)
        per_seed.append(rec)
    keys = list(per_seed[0]["test"])
    out: dict[str, Any] = {key: summarize(r["test"][key] for r in per_seed) for key in keys}
    if all("val" in r for r in per_seed):
        out["val"] = {key: summarize(r["val"][key] for r in per_seed) for key in keys}
    out["per_seed"] = per_seed
    out["feature"] = feature
    out["n_test"] = int(x_test.shape[0])
    out["num_classes"] = num_classes
    out["settings"] = {"k": k, "temperature": temperature, "recall_ks": list(recall_ks),
                       "val_frac": val_frac, "split_seeds": split_seeds, "metric": "cosine"}
    # per-example test predictions: `weince verify` recomputes every metric from them
    out["predictions"] = knn_block(y_test.numpy(), records, split_seeds, k)
    return out


@locks_output("out_path", parent=True)
def run_knn(features_path, out_path, cfg: KNNConfig | dict | None = None) -> dict:
    """k-NN / recall@k on a feature file; write ``out_path`` (JSON with provenance)."""
    return probe_feature_file(knn_eval, as_config(KNNConfig, cfg), features_path, out_path)
