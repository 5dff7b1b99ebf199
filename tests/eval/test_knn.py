"""k-NN weighted vote and recall@k against a brute-force per-query reference."""
from __future__ import annotations

import math

import pytest
import torch

from weince.eval.knn import knn_eval, knn_scores
from weince.eval.linear import stratified_split


def brute_force(query, qy, bank, by, k, T, recall_ks):
    """One query at a time, plain Python loops over the bank."""
    acc, hits = 0, {r: 0 for r in recall_ks}
    for q, y in zip(query.tolist(), qy.tolist()):
        qn = math.sqrt(sum(v * v for v in q))
        sims = []
        for b, lab in zip(bank.tolist(), by.tolist()):
            bn = math.sqrt(sum(v * v for v in b))
            sims.append((sum(x * z for x, z in zip(q, b)) / (qn * bn), lab))
        sims.sort(key=lambda t: -t[0])
        smax = sims[0][0]
        votes = {}
        for s, lab in sims[:k]:
            votes[lab] = votes.get(lab, 0.0) + math.exp((s - smax) / T)
        best = max(votes.values())
        pred = min(lab for lab, v in votes.items() if v == best)
        acc += pred == y
        for r in recall_ks:
            hits[r] += any(lab == y for _, lab in sims[:r])
    n = len(qy)
    out = {f"acc@{k}": 100.0 * acc / n}
    out.update({f"recall@{r}": 100.0 * hits[r] / n for r in recall_ks})
    return out


@pytest.mark.parametrize("chunk", [7, 1000])
def test_knn_matches_brute_force(chunk):
    g = torch.Generator().manual_seed(0)
    C, D = 4, 6
    centers = torch.randn(C, D, generator=g) * 1.2
    by = torch.randint(0, C, (120,), generator=g)
    bank = centers[by] + torch.randn(120, D, generator=g)
    qy = torch.randint(0, C, (40,), generator=g)
    query = centers[qy] + torch.randn(40, D, generator=g)
    ks = (1, 2, 5, 10)
    got = knn_scores(query, qy, bank, by, k=10, temperature=0.1, recall_ks=ks, chunk=chunk)
    ref = brute_force(query, qy, bank, by, 10, 0.1, ks)
    assert got.keys() == ref.keys()
    for key in ref:
        assert got[key] == pytest.approx(ref[key], abs=1e-9), key
    # the toy set is neither trivial nor hopeless, so the comparison means something
    assert 30 < got["acc@10"] < 100
    assert got["recall@1"] <= got["recall@2"] <= got["recall@5"] <= got["recall@10"]


def test_vote_weighting_exact_case():
    # bank: one item of class 0 at angle 0, two of class 1 slightly further away
    bank = torch.tensor([[1.0, 0.0], [math.cos(0.3), math.sin(0.3)],
                         [math.cos(0.3), -math.sin(0.3)]])
    by = torch.tensor([0, 1, 1])
    q, qy = torch.tensor([[1.0, 0.0]]), torch.tensor([0])
    s = math.cos(0.3)
    # class 1 weight 2*exp((s-1)/T); class 0 weight 1: vote flips at T* = (1-s)/log 2
    t_star = (1 - s) / math.log(2)
    for scale, acc in ((0.9, 100.0), (1.1, 0.0)):
        assert knn_scores(q, qy, bank, by, k=3, temperature=scale * t_star,
                          recall_ks=(1,))["acc@3"] == acc


def test_knn_eval_splits_and_summaries():
    g = torch.Generator().manual_seed(1)
    C, D = 3, 5
    centers = torch.randn(C, D, generator=g) * 2
    ytr = torch.arange(300) % C
    ytr = ytr[torch.randperm(300, generator=g)]
    yte = torch.arange(60) % C
    feats = {"train": {"backbone": centers[ytr] + torch.randn(300, D, generator=g), "labels": ytr},
             "test": {"backbone": centers[yte] + torch.randn(60, D, generator=g), "labels": yte}}
    res = knn_eval(feats, k=5, recall_ks=(1, 5), split_seeds=(0, 1, 2))
    assert res["acc@5"]["n"] == 3 and len(res["acc@5"]["values"]) == 3
    # official knn_eval.py --val-split-ratio 0.2: the bank is 80% of the training set
    assert res["per_seed"][0]["n_bank"] == 240 and res["settings"]["val_frac"] == 0.2
    # per seed, test numbers equal knn_scores on the bank of that split
    tr, _ = stratified_split(ytr, 0.2, 1)
    ref = knn_scores(feats["test"]["backbone"], yte, feats["train"]["backbone"][tr], ytr[tr],
                     k=5, recall_ks=(1, 5))
    assert res["per_seed"][1]["test"] == pytest.approx(ref)
    assert set(res["val"]) == set(ref) >= {"acc@5", "recall@1", "recall@5"}


def test_knn_bad_args():
    x, y = torch.randn(10, 3), torch.zeros(10, dtype=torch.long)
    with pytest.raises(ValueError, match="bank size"):
        knn_scores(x, y, x, y, k=50)
    with pytest.raises(ValueError, match="temperature"):
        knn_scores(x, y, x, y, k=2, recall_ks=(1,), temperature=0)
