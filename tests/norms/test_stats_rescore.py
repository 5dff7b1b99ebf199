"""Correlations vs scipy, bootstrap coverage, alpha chosen on validation only."""

import numpy as np
import pytest
import torch
from scipy import stats as sps

from weince.eval.knn import knn_eval
from weince.norms.rescore import choose_alpha, discount, hub_items, knn_rescore, sts_rescore
from weince.norms.rules import (NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, combine,
                                correlation_verdict, gain_verdict, interval_side)
from weince.norms.stats import correlation, paired_gain, pearson_rows, spearman_rows


def test_correlations_match_scipy_with_ties_and_rows():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = 0.4 * x + rng.normal(size=200)
    yt = np.round(y)                                   # many ties
    for a, b in ((x, y), (x, yt), (yt, x)):
        assert pearson_rows(a, b) == pytest.approx(sps.pearsonr(a, b)[0], abs=1e-12)
        assert spearman_rows(a, b) == pytest.approx(sps.spearmanr(a, b)[0], abs=1e-12)
    X = rng.normal(size=(5, 50))
    Y = X + rng.normal(size=(5, 50))
    r = spearman_rows(X, Y)
    for i in range(5):
        assert r[i] == pytest.approx(sps.spearmanr(X[i], Y[i])[0], abs=1e-12)
    c = correlation(x, y, "spearman", n_boot=500)
    assert c["r"] == pytest.approx(sps.spearmanr(x, y)[0])
    assert c["p"] == pytest.approx(sps.spearmanr(x, y)[1])
    assert c["ci"][0] < c["r"] < c["ci"][1] and c["n"] == 200


def test_correlation_interval_covers_known_rho():
    """Parameter recovery: bivariate normal with rho = 0.38; the 95% interval covers it in
    most of 40 draws, and excludes 0 (n = 300)."""
    rho, hits, excl = 0.38, 0, 0
    rng = np.random.default_rng(1)
    cov = [[1, rho], [rho, 1]]
    for s in range(40):
        xy = rng.multivariate_normal([0, 0], cov, size=300)
        c = correlation(xy[:, 0], xy[:, 1], n_boot=400, seed=s)
        hits += c["ci"][0] <= rho <= c["ci"][1]
        excl += c["ci"][0] > 0
    assert hits >= 34 and excl == 40


def test_correlation_degenerate_inputs():
    c = correlation([1, 2], [3, 4])
    assert c["n"] == 2 and np.isnan(c["r"])
    c = correlation(np.ones(10), np.arange(10))
    assert np.isnan(c["r"])
    c = correlation([1, 2, np.nan, 4, 5], [2, 1, 3, np.inf, 5])
    assert c["n"] == 3
    with pytest.raises(ValueError, match="method"):
        correlation([1, 2, 3], [1, 2, 3], "kendall")


def test_paired_gain():
    t = np.array([1, 1, 1, 0, 1, 1, 1, 1.0])
    b = np.array([1, 0, 1, 0, 1, 0, 1, 1.0])
    g = paired_gain(t, b, n_boot=500)
    assert g["gain"] == pytest.approx(25.0) and g["treated"] == pytest.approx(87.5)
    assert g["ci"][0] >= 0 and g["ci"][1] <= 50
    g0 = paired_gain(b, b)
    assert g0["gain"] == 0 and g0["ci"] == [0.0, 0.0]


def test_verdicts():
    assert interval_side([0.1, 0.3]) == 1 and interval_side([-0.3, -0.1]) == -1
    assert interval_side([-0.1, 0.2]) == 0 and interval_side([float("nan"), 1]) == 0
    ok = {"r": 0.3, "ci": [0.1, 0.5], "n": 100}
    assert correlation_verdict(ok, "positive", 30) == REPRODUCED
    assert correlation_verdict(ok, "negative", 30) == NOT_REPRODUCED
    assert correlation_verdict({**ok, "n": 10}, "positive", 30) == NOT_TESTABLE
    assert gain_verdict({"testable": True, "ci": [0.2, 1.0]}) == REPRODUCED
    assert gain_verdict({"testable": True, "ci": [0.0, 1.0]}) == NOT_REPRODUCED
    assert gain_verdict({"testable": False, "ci": [0.2, 1.0]}) == NOT_TESTABLE
    assert combine([REPRODUCED, NOT_TESTABLE]) == REPRODUCED
    assert combine([REPRODUCED, NOT_REPRODUCED]) == NOT_REPRODUCED
    assert combine([NOT_TESTABLE]) == NOT_TESTABLE


def test_choose_alpha_ties_go_to_smallest():
    assert choose_alpha([1.0, 2.0, 2.0, 1.5], [0.0, 0.1, 0.2, 0.5]) == 0.1
    assert choose_alpha([3.0, 3.0], [0.0, 1.0]) == 0.0
    assert choose_alpha([float("nan"), 1.0], [0.0, 1.0]) == 1.0
    torch.testing.assert_close(discount(torch.tensor([0.5]), torch.tensor([2.0]), 1.0, 2.0),
                               torch.tensor([0.25]))


def test_hub_items_counts_k_occurrence():
    # a star: point 0 is every other point's nearest neighbour (cos 0.894 vs 0.8)
    x = torch.zeros(50, 50)
    x[:, 0] = 1.0
    x[1:, 1:] = 0.5 * torch.eye(49)
    hubs = hub_items(x, hub_k=1, hub_frac=0.02)
    assert hubs[0] and int(hubs.sum()) == 1
    with pytest.raises(ValueError, match="hub_frac"):
        hub_items(x, hub_frac=1.5)


def _features(seed=0, n_train=600, n_test=300, d=8):
    """Clustered features; bank items of class 0 get large head norms and sit between
    classes (hub-like), so an inverse-norm discount helps."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(4, d, generator=g) * 2

    def make(n):
        y = torch.randint(0, 4, (n,), generator=g)
        x = centers[y] + torch.randn(n, d, generator=g) * 1.5
        head = torch.randn(n, 4, generator=g) * 0.1 + 1.0
        head[y == 0] *= 3.0
        return {"backbone": x, "head": head, "labels": y}

    return {"train": make(n_train), "test": make(n_test)}


def test_knn_rescore_alpha_uses_validation_only():
    feats = _features()
    kw = dict(alphas=[0, 0.1, 0.5, 1.0, 2.0], n_boot=200, k=10, min_n=10)
    r1 = knn_rescore(feats, **kw)
    corrupted = {"train": feats["train"],
                 "test": {**feats["test"], "labels": torch.randint(0, 4, (300,))}}
    r2 = knn_rescore(corrupted, **kw)
    a1 = [(r["metric"], r["subset"], r["alpha"]) for r in r1["rows"]]
    a2 = [(r["metric"], r["subset"], r["alpha"]) for r in r2["rows"]]
    assert a1 == a2                                   # test labels never choose alpha
    assert [r["val_curve"] for r in r1["rows"]] == [r["val_curve"] for r in r2["rows"]]
    assert [r["plain"] for r in r1["rows"]] != [r["plain"] for r in r2["rows"]]
    for r in r1["rows"]:
        assert r["val_best"] == max(r["val_curve"])
        assert r["gain"] == pytest.approx(r["rescored"] - r["plain"])
        if r["alpha"] == 0:
            assert r["gain"] == 0
    sub = {r["subset"]: r["n"] for r in r1["rows"] if r["metric"] == "recall@1"}
    assert sub["all"] == 300 and sub["low_quality"] == pytest.approx(75, abs=2)


def test_knn_rescore_plain_matches_knn_eval():
    feats = _features(seed=2)
    r = knn_rescore(feats, alphas=[0], n_boot=50, k=10)
    ref = knn_eval(feats, k=10, recall_ks=(1,), split_seeds=(0,), val_frac=0.1)
    row = {(x["metric"], x["subset"]): x for x in r["rows"]}
    assert row[("recall@1", "all")]["plain"] == pytest.approx(ref["recall@1"]["mean"])
    assert row[("acc@10", "all")]["plain"] == pytest.approx(ref["acc@10"]["mean"])


def test_sts_rescore_dev_choice_and_gain():
    rng = np.random.default_rng(0)

    def pairs(n):
        gold = rng.uniform(0, 5, n)
        norms = rng.uniform(1, 3, (n, 2))
        # cosine inflated for pairs of large-norm sentences: the discount should help
        cos = gold / 5 * 0.6 + 0.1 * np.sqrt(norms.prod(1)) + rng.normal(0, 0.05, n)
        return cos, norms, gold

    d, t = pairs(300), pairs(300)
    r = sts_rescore(*d, *t, alphas=[0, 0.1, 0.3, 1.0], n_boot=300)
    assert r["alpha"] > 0 and r["gain"] > 0 and r["ci"][0] > 0
    assert r["plain"] == pytest.approx(100 * sps.spearmanr(t[0], t[2])[0])
    # scrambling the test gold changes nothing about alpha
    r2 = sts_rescore(*d, t[0], t[1], rng.permutation(t[2]), alphas=[0, 0.1, 0.3, 1.0],
                     n_boot=50)
    assert r2["alpha"] == r["alpha"]
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        sts_rescore(*d, *t, alphas=[-1.0])
