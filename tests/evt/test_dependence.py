"""Dependence-aware intervals: batch ids in score files, the batch
bootstrap of xi, the pair-robust link test, and their calibration on null data with the
dependence of real batches (shared images, shared positive pairs)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from weince.evt.scorefile import load_scores, save_scores, score_batch_ids
from weince.evt.gpd import fit_gpd_pot
from weince.evt.link import fit_link_selection, pair_score_test, simclr_pair_ids


def binomial_band(p: float, n: int, k: float = 3.0) -> tuple[float, float]:
    sd = (p * (1 - p) / n) ** 0.5
    return p - k * sd, p + k * sd


# ----------------------------------------------------------------------------- score files
def test_score_file_keeps_batch_ids(tmp_path):
    ids = score_batch_ids(3, 5)
    assert ids.tolist() == [0] * 10 + [1] * 10 + [2] * 10
    f = save_scores(tmp_path / "s.npz", np.linspace(-0.5, 0.5, 30), batch=ids)
    assert load_scores(f)["batch"].tolist() == ids.tolist()
    with pytest.raises(ValueError, match="one integer batch id per score"):
        save_scores(tmp_path / "bad.npz", np.zeros(30), batch=ids[:-1])


def test_old_score_files_stay_readable(tmp_path):
    # written before batch ids: rebuilt from meta when the layout matches, else absent
    f = save_scores(tmp_path / "old.npz", np.zeros(30), meta={"n_batches": 3, "batch_size": 5})
    d = load_scores(f)
    assert d["batch"].tolist() == score_batch_ids(3, 5).tolist()
    assert d["meta"]["batch_ids"] == "rebuilt from meta"
    g = save_scores(tmp_path / "older.npz", np.zeros(30), meta={"tau": 0.5})
    assert "batch" not in load_scores(g)


def test_simclr_pair_ids_pair_rows_i_and_i_plus_n():
    N, nb = 3, 2
    i = np.arange(2 * N)
    targets = np.tile((i + N) % (2 * N), nb)
    ids = simclr_pair_ids(targets, 2 * N)
    assert ids.tolist() == [0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5]
    assert simclr_pair_ids(targets[::-1], 2 * N) is None


# ----------------------------------------------------------------------------- link test
def null_pairs(P: int, K1: int, c: float, tau: float, rng):
    """Softmax-link (lambda = 0) winners; row i + P holds the same candidate set as row i
    in another order with the same positive: the two rows of a SimCLR pair share their
    positive similarity, here in the strongest form (identical likelihood terms)."""
    s = np.tanh(rng.normal(0, 0.6, size=(P, K1)))
    t = np.argmax(c * s / tau + rng.gumbel(size=s.shape), axis=1)
    perm = np.argsort(rng.uniform(size=(P, K1)), axis=1)
    s2 = np.take_along_axis(s, perm, axis=1)
    t2 = np.argmax(perm == t[:, None], axis=1)
    return (np.concatenate([s, s2]).astype(np.float32), np.concatenate([t, t2]),
            np.concatenate([np.arange(P), np.arange(P)]))


def test_pair_robust_link_test_holds_its_level_on_paired_null_data():
    rng = np.random.default_rng(0)
    R = 600
    rob = iid = 0
    for _ in range(R):
        sim, tg, pairs = null_pairs(100, 16, 1.0, 0.5, rng)
        o = pair_score_test(sim, tg, pairs=pairs, tau=0.5)
        rob += o["p_value_pairs"] < 0.05
        iid += o["p_value_score_iid"] < 0.05
    lo, hi = binomial_band(0.05, R)
    assert lo <= rob / R <= hi, rob / R
    # the test that treats the rows as independent is too confident on the same data
    assert iid / R > hi, iid / R


def test_pair_robust_test_detects_a_weibull_link(link_data):
    sim, tg = link_data(1500, 32, c=2.0, lam=0.5, seed=3)
    sim = np.concatenate([sim, sim])
    tg = np.concatenate([tg, tg])
    pairs = np.tile(np.arange(1500), 2)
    f = fit_link_selection(sim, tg, tau=0.5, pairs=pairs)
    assert f.p_value_pairs < 1e-3 and f.n_pairs == 1500
    lo, hi = f.lam_ci_pairs
    assert lo < 0.5 < hi and lo <= f.lam <= hi
    # duplicated rows double the i.i.d. information: the robust interval is wider
    assert hi - lo > (f.lam_ci[1] - f.lam_ci[0]) * 1.2
    d = f.to_dict()
    assert json.dumps(d) and d["lam_ci_pairs"] == [lo, hi]


# ----------------------------------------------------------------------------- xi bootstrap
XI = -0.3


def batched_scores(G: int, B: int, rng, r_img: float = 0.5, r_batch: float = 0.2):
    """Scores of all pairs of B images per batch, with a marginal that is exactly
    GPD(XI, 0.3) shifted to [-0.5, 0.5] (so exceedances over any threshold have shape XI),
    made dependent through a Gaussian copula: an effect per image (each image is in B - 1
    pairs) and one per batch."""
    ii, jj = np.tril_indices(B, -1)
    s, g = [], []
    for b in range(G):
        a, c = rng.normal(size=B), rng.normal()
        z = (np.sqrt(r_img / 2) * (a[ii] + a[jj]) + np.sqrt(r_batch) * c
             + np.sqrt(1 - r_img - r_batch) * rng.normal(size=ii.size))
        s.append(stats.genpareto.ppf(stats.norm.cdf(z), XI, scale=0.3) - 0.5)
        g.append(np.full(ii.size, b))
    return np.concatenate(s), np.concatenate(g)


def test_batch_bootstrap_interval_is_recorded():
    rng = np.random.default_rng(5)
    s, g = batched_scores(20, 25, rng)
    f = fit_gpd_pot(s, q=0.95, groups=g, n_boot_batch=20)
    assert f.n_batches == 20 and f.n_boot_batch == 20
    lo, hi = f.xi_ci_batch
    assert lo < f.xi < hi
    assert f.to_dict()["xi_ci_batch"] == [lo, hi]
    assert fit_gpd_pot(s, q=0.95).xi_ci_batch is None
    with pytest.raises(ValueError, match="one batch id per score"):
        fit_gpd_pot(s, q=0.95, groups=g[:-1], n_boot_batch=5)


@pytest.mark.slow
def test_batch_bootstrap_covers_xi_at_the_nominal_level_on_dependent_null_data():
    rng = np.random.default_rng(2)
    R = 120
    miss_batch = miss_profile = 0
    for r in range(R):
        s, g = batched_scores(30, 25, rng)
        f = fit_gpd_pot(s, q=0.95, groups=g, n_boot_batch=40, seed=r)
        miss_batch += not f.xi_ci_batch[0] <= XI <= f.xi_ci_batch[1]
        miss_profile += not f.xi_ci[0] <= XI <= f.xi_ci[1]
    lo, hi = binomial_band(0.05, R)
    assert miss_batch / R <= hi, miss_batch / R
    # the i.i.d. profile interval misses more often on the same data
    assert miss_profile > miss_batch, (miss_profile, miss_batch)
