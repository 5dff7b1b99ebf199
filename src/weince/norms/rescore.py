"""Norm-aware re-scoring (claim N3): ``cos / (1 + alpha * ||z|| / scale)``.

``scale`` is the median norm of the reference set (the k-NN bank; the STS dev pairs), so
``alpha`` is dimensionless; ``alpha = 0`` is plain cosine and is always in the grid.
``alpha`` is chosen on the **validation split only** (largest validation metric; ties go
to the smaller ``alpha``), then test is scored once with it and the plain-cosine score,
and the gain is the paired difference with a bootstrap interval over test queries (pairs).

k-NN retrieval (vision, cached features)
    The bank is the training set minus a stratified validation split (as
    :mod:`weince.eval.knn`); the discount uses the *bank item's* norm (a query's own norm
    would rescale all its scores alike and change no ranking). Metrics per query:
    ``recall@1`` (the top item shares the label) and ``acc@k`` (weighted vote,
    ``exp((s_j - s_1) / T)``, on the re-scored scores). Sub-populations (label-free,
    from plain cosine, defined the same way on validation and test):

    - ``frequent``: queries whose plain top-1 item is a *hub*, a bank item in the top
      ``hub_frac`` of k-occurrence (how often it is among the ``hub_k`` nearest neighbours
      of the other bank items): the most-retrieved items. (Our offline data sets have
      balanced classes, so "largest classes" would not separate anything.)
    - ``low_quality``: queries in the lowest ``low_frac`` of their split by maximum
      plain cosine to the bank (poorly matched, atypical samples).

STS (text)
    A pair's score is ``cos / (1 + alpha * sqrt(||a|| ||b||) / scale)``; the metric is
    Spearman's rho x 100 against gold; the interval comes from a paired bootstrap over
    pairs (both scores re-ranked in every resample).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from weince.eval.knn import weighted_vote
from weince.eval.linear import features_of, load_features, stratified_split
from weince.norms.config import DEFAULT_ALPHAS
from weince.norms.stats import bootstrap, paired_gain, spearman_rows

__all__ = ["DEFAULT_ALPHAS", "discount", "choose_alpha", "knn_hits", "hub_items",
           "knn_rescore", "sts_rescore"]

SUBSETS = ("all", "frequent", "low_quality")


def _alphas(alphas: Sequence[float]) -> list[float]:
    vals = sorted({float(a) for a in alphas} | {0.0})
    if vals[0] < 0:
        raise ValueError(f"alpha must be >= 0 (an inverse-norm discount), got {vals[0]}")
    return vals


def discount(cos: torch.Tensor, norms: torch.Tensor, alpha: float, scale: float) -> torch.Tensor:
    """``cos / (1 + alpha * norms / scale)``; ``norms`` broadcasts against ``cos``."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    return cos / (1.0 + alpha * norms / scale)


def choose_alpha(val_metric: Sequence[float], alphas: Sequence[float]) -> float:
    """The ``alpha`` with the largest validation metric (ties: the smallest ``alpha``)."""
    vals = np.asarray(val_metric, dtype=np.float64)
    if vals.shape != (len(alphas),):
        raise ValueError(f"need one validation value per alpha ({len(alphas)}), got {vals.shape}")
    order = np.argsort(np.asarray(alphas), kind="stable")
    best = max(order, key=lambda i: (np.nan_to_num(vals[i], nan=-np.inf), -alphas[i]))
    return float(alphas[best])


@torch.no_grad()
def hub_items(bank: torch.Tensor, hub_k: int = 10, hub_frac: float = 0.1,
              chunk: int = 1024) -> torch.Tensor:
    """Boolean ``(M,)``: bank items in the top ``hub_frac`` of k-occurrence (times among
    the ``hub_k`` nearest neighbours of the other bank items, cosine, self excluded)."""
    if not 0 < hub_frac < 1:
        raise ValueError(f"hub_frac must lie in (0, 1), got {hub_frac}")
    b = F.normalize(bank.float(), dim=1)
    m = b.shape[0]
    kk = min(hub_k, m - 1)
    if kk < 1:
        raise ValueError("hub detection needs at least 2 bank items")
    counts = torch.zeros(m)
    for i in range(0, m, chunk):
        s = b[i:i + chunk] @ b.T
        rows = torch.arange(i, min(i + chunk, m))
        s[rows - i, rows] = -float("inf")
        idx = s.topk(kk, dim=1).indices
        counts += torch.bincount(idx.flatten(), minlength=m).float()
    n_hub = max(1, int(round(hub_frac * m)))
    thresh = counts.sort(descending=True).values[n_hub - 1]
    return counts >= thresh


@torch.no_grad()
def knn_hits(query: torch.Tensor, query_labels: torch.Tensor, bank: torch.Tensor,
             bank_labels: torch.Tensor, bank_norms: torch.Tensor, alphas: Sequence[float], *,
             scale: float, k: int = 50, temperature: float = 0.1, num_classes: int | None = None,
             chunk: int = 1024) -> dict[str, torch.Tensor]:
    """Per-query hits of k-NN retrieval for every ``alpha``.

    Args:
        query: ``(Q, D)``; bank: ``(M, D)`` (both L2-normalised here); labels int;
        bank_norms: ``(M,)`` the norms used in the discount; scale: their reference scale.
    Returns:
        ``{"recall@1": (A, Q) bool, "acc@k": (A, Q) bool, "max_cos": (Q,), "top1": (Q,)}``
        (``max_cos`` and ``top1``: plain cosine).
    """
    q = F.normalize(query.float(), dim=1)
    m = F.normalize(bank.float(), dim=1)
    qy, my = query_labels.long(), bank_labels.long()
    nb = bank_norms.float()
    kk = min(k, m.shape[0])
    C = int(num_classes if num_classes is not None else int(max(my.max(), qy.max())) + 1)
    A, Q = len(alphas), q.shape[0]
    rec = torch.zeros(A, Q, dtype=torch.bool)
    acc = torch.zeros(A, Q, dtype=torch.bool)
    max_cos = torch.empty(Q)
    top1 = torch.empty(Q, dtype=torch.long)
    for i in range(0, Q, chunk):
        cos = q[i:i + chunk] @ m.T
        y = qy[i:i + chunk]
        mx, arg = cos.max(1)
        max_cos[i:i + chunk], top1[i:i + chunk] = mx, arg
        for a, alpha in enumerate(alphas):
            s = discount(cos, nb[None, :], alpha, scale) if alpha else cos
            val, idx = s.topk(kk, dim=1)
            nl = my[idx]
            rec[a, i:i + chunk] = nl[:, 0] == y
            acc[a, i:i + chunk] = weighted_vote(val, nl, C, temperature) == y
    return {"recall@1": rec, "acc@k": acc, "max_cos": max_cos, "top1": top1}


def _subsets(hits: dict[str, torch.Tensor], hubs: torch.Tensor, low_frac: float
             ) -> dict[str, torch.Tensor]:
    mc = hits["max_cos"]
    low = mc <= torch.quantile(mc, low_frac)
    return {"all": torch.ones_like(low), "frequent": hubs[hits["top1"]], "low_quality": low}


def knn_rescore(features: str | os.PathLike | dict, *, feature: str = "backbone",
                norm_feature: str = "head", alphas: Sequence[float] = DEFAULT_ALPHAS,
                k: int = 50, temperature: float = 0.1, val_frac: float = 0.1,
                split_seed: int = 0, hub_k: int = 10, hub_frac: float = 0.1,
                low_frac: float = 0.25, n_boot: int = 2000, seed: int = 0, min_n: int = 30,
                chunk: int = 1024) -> dict[str, Any]:
    """N3 on cached features: alpha per (metric, subset) on validation, gains on test.

    Args:
        features: the dict or file written by ``weince features``
            (``{"train": {"backbone", "head", "labels"}, "test": {...}}``).
        feature: the retrieval feature (cosine); norm_feature: whose norm discounts.
        min_n: a (split, subset) with fewer queries is marked not testable.
    Returns:
        ``{"rows": [...], "settings": {...}, "scale", "n_bank", "n_hubs"}``; a row holds
        ``metric, subset, alpha, val_plain, val_best, plain, rescored, gain, ci, n, n_val,
        testable``; percentages.
    """
    feats = load_features(features)
    x_tr, y_tr = features_of(feats, "train", feature)
    x_te, y_te = features_of(feats, "test", feature)
    n_tr = features_of(feats, "train", norm_feature)[0].norm(dim=1)
    alphas = _alphas(alphas)
    tr, va = stratified_split(y_tr, val_frac, split_seed)
    if len(va) == 0:
        raise ValueError("N3 needs a validation split to choose alpha; set val_frac > 0")
    bank, bank_y, bank_n = x_tr[tr], y_tr[tr], n_tr[tr]
    scale = float(bank_n.median())
    if not scale > 0:
        raise ValueError(f"the bank's {norm_feature} norms have median {scale}; cannot scale alpha")
    num_classes = int(max(y_tr.max(), y_te.max())) + 1
    hubs = hub_items(bank, hub_k, hub_frac, chunk)
    kw: dict[str, Any] = dict(scale=scale, k=k, temperature=temperature, num_classes=num_classes,
                              chunk=chunk)
    hv = knn_hits(x_tr[va], y_tr[va], bank, bank_y, bank_n, alphas, **kw)
    ht = knn_hits(x_te, y_te, bank, bank_y, bank_n, alphas, **kw)
    sv, st = _subsets(hv, hubs, low_frac), _subsets(ht, hubs, low_frac)
    rows = []
    for metric in ("recall@1", "acc@k"):
        for sub in SUBSETS:
            mv, mt = sv[sub], st[sub]
            val_curve = [100.0 * float(hv[metric][a][mv].float().mean()) if mv.any() else
                         float("nan") for a in range(len(alphas))]
            alpha = choose_alpha(val_curve, alphas)
            a = alphas.index(alpha)
            g = paired_gain(ht[metric][a][mt].numpy().astype(float),
                            ht[metric][0][mt].numpy().astype(float), n_boot=n_boot, seed=seed)
            rows.append({"task": "knn", "metric": metric if metric != "acc@k" else
                         f"acc@{min(k, len(tr))}", "subset": sub, "alpha": alpha,
                         "val_curve": val_curve, "val_plain": val_curve[0],
                         "val_best": val_curve[a], "plain": g["base"], "rescored": g["treated"],
                         "gain": g["gain"], "ci": g["ci"], "n": g["n"], "n_val": int(mv.sum()),
                         "testable": bool(g["n"] >= min_n and int(mv.sum()) >= min_n)})
    return {"rows": rows, "alphas": alphas, "scale": scale, "n_bank": int(len(tr)),
            "n_hubs": int(hubs.sum()),
            "settings": {"feature": feature, "norm_feature": norm_feature, "k": k,
                         "temperature": temperature, "val_frac": val_frac,
                         "split_seed": split_seed, "hub_k": hub_k, "hub_frac": hub_frac,
                         "low_frac": low_frac, "n_boot": n_boot, "min_n": min_n}}


def _spearman_gain_rows(a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> np.ndarray:
    return 100.0 * (spearman_rows(a, gold) - spearman_rows(b, gold))


def sts_rescore(cos_dev: Any, norms_dev: Any, gold_dev: Any, cos_test: Any, norms_test: Any,
                gold_test: Any, *, alphas: Sequence[float] = DEFAULT_ALPHAS,
                n_boot: int = 2000, seed: int = 0, min_n: int = 30) -> dict[str, Any]:
    """N3 on STS: alpha chosen by dev Spearman, test gain with a paired bootstrap.

    Args:
        cos_*: ``(n,)`` cosine of each pair; norms_*: ``(n, 2)`` the two sentences' norms;
        gold_*: ``(n,)`` gold scores.
    Returns:
        one row dict as :func:`knn_rescore`'s (``metric = "spearman"``, values x 100).
    """
    cd, ct = np.asarray(cos_dev, float), np.asarray(cos_test, float)
    nd, nt = np.asarray(norms_dev, float), np.asarray(norms_test, float)
    gd, gt = np.asarray(gold_dev, float), np.asarray(gold_test, float)
    if nd.shape != (len(cd), 2) or nt.shape != (len(ct), 2):
        raise ValueError("norms_dev/norms_test must be (n, 2): both sentences' norms per pair")
    alphas = _alphas(alphas)
    pd, pt = np.sqrt(nd.prod(1)), np.sqrt(nt.prod(1))
    scale = float(np.median(pd))
    if not scale > 0:
        raise ValueError("the dev pairs' norms have median 0; cannot scale alpha")

    def score(c, p, a):
        return c / (1.0 + a * p / scale)

    val_curve = [100.0 * float(spearman_rows(score(cd, pd, a), gd)) for a in alphas]
    alpha = choose_alpha(val_curve, alphas)
    s1, s0 = score(ct, pt, alpha), ct
    rho1 = 100.0 * float(spearman_rows(s1, gt))
    rho0 = 100.0 * float(spearman_rows(s0, gt))
    lo, hi = bootstrap(_spearman_gain_rows, (s1, s0, gt), n_boot=n_boot, seed=seed)
    return {"task": "sts", "metric": "spearman", "subset": "all", "alpha": alpha,
            "val_curve": val_curve, "val_plain": val_curve[0],
            "val_best": val_curve[alphas.index(alpha)], "plain": rho0, "rescored": rho1,
            "gain": rho1 - rho0, "ci": [lo, hi], "n": int(len(ct)), "n_val": int(len(cd)),
            "testable": bool(len(ct) >= min_n and len(cd) >= min_n), "alphas": alphas,
            "scale": scale}
