"""Link selection (``docs/method.md``): the likelihood against a slow per-anchor loop, parameter
recovery from winners simulated from the family, the boundary null, the profile interval,
input handling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from weince.evt import fit_link_selection, link_loglik


def slow_loglik(sim, targets, mask, c, lam, tau=0.5, beta=1.0, eps=1e-6):
    """Per-anchor float64 loop, straight from the formula in ``docs/method.md``."""
    total = 0.0
    for i in range(sim.shape[0]):
        logits = []
        for j in range(sim.shape[1]):
            if mask is not None and not mask[i, j]:
                continue
            s = float(sim[i, j])
            x = (1 - lam) * s / tau + lam * (-beta * math.log(1 - min(s, 1 - eps)))
            logits.append((j, c * x))
        m = max(v for _, v in logits)
        lse = m + math.log(sum(math.exp(v - m) for _, v in logits))
        total += dict(logits)[int(targets[i])] - lse
    return total


def simclr_like(n_views: int, n_batches: int, seed: int):
    """Random unit vectors in the SimCLR layout: 2N views per batch, positive i <-> i+N."""
    rng = np.random.default_rng(seed)
    N = n_views // 2
    sims, targets = [], []
    for _ in range(n_batches):
        base = rng.normal(size=(N, 8))
        z = np.concatenate([base + 0.4 * rng.normal(size=base.shape),
                            base + 0.4 * rng.normal(size=base.shape)])
        z /= np.linalg.norm(z, axis=1, keepdims=True)
        sims.append((z @ z.T).astype(np.float32))
        targets.append((np.arange(2 * N) + N) % (2 * N))
    sim = np.concatenate(sims)
    mask = np.tile(~np.eye(2 * N, dtype=bool), (n_batches, 1))
    return sim, np.concatenate(targets), mask


@pytest.mark.filterwarnings("ignore:only .* anchors")
def test_loglik_equals_the_slow_loop_with_a_simclr_mask():
    sim, t, mask = simclr_like(16, 3, seed=0)
    sim[0, 5] = 1.0                               # exactly 1: clipped inside log(1 - s)
    for c, lam in [(1.0, 0.0), (2.5, 0.4), (0.7, 1.0)]:
        assert link_loglik(sim, t, mask, c=c, lam=lam) == pytest.approx(
            slow_loglik(sim, t, mask, c, lam), rel=1e-10)
    r = fit_link_selection(sim, t, mask)
    assert r.loglik == pytest.approx(slow_loglik(sim, t, mask, r.c, r.lam), rel=1e-10)
    assert r.loglik_softmax == pytest.approx(slow_loglik(sim, t, mask, r.c_softmax, 0.0), rel=1e-10)
    assert r.n_candidates == 15 and r.n_anchors == 48


def test_mle_agrees_with_a_generic_bounded_optimiser(link_data):
    sim, t = link_data(3000, 32, c=3.0, lam=0.4, seed=5)
    r = fit_link_selection(sim, t)

    def nll(p):
        return -link_loglik(sim, t, c=math.exp(p[0]), lam=p[1])

    res = optimize.minimize(nll, x0=[0.0, 0.5], bounds=[(-5, 5), (0, 1)], method="L-BFGS-B",
                            options={"ftol": 1e-14, "gtol": 1e-9})
    assert r.loglik >= -res.fun - 1e-4
    assert r.lam == pytest.approx(res.x[1], abs=2e-3)
    assert r.c == pytest.approx(math.exp(res.x[0]), rel=2e-3)
    # the interval limits are where the profile deviance crosses chi2_1(0.95)
    crit = stats.chi2.ppf(0.95, 1)
    assert r.lam_ci[0] < r.lam < r.lam_ci[1]
    for lim in r.lam_ci:
        prof = optimize.minimize_scalar(
            lambda lc, lim=lim: -link_loglik(sim, t, c=math.exp(lc), lam=lim),
            bounds=(math.log(r.c) - 0.5, math.log(r.c) + 0.5), method="bounded",
            options={"xatol": 1e-7})
        assert 2 * (r.loglik + prof.fun) == pytest.approx(crit, abs=0.02)
    # the stored profile points are the profile likelihood
    i = len(r.profile["lam"]) // 2
    lam_i, c_i = r.profile["lam"][i], r.profile["c"][i]
    assert r.profile["loglik"][i] == pytest.approx(link_loglik(sim, t, c=c_i, lam=lam_i), abs=0.02)


def test_recovers_lambda_04_from_20000_anchors(link_data):
    sim, t = link_data(20_000, 128, c=3.0, lam=0.4, seed=1)
    r = fit_link_selection(sim, t, tau=0.5, beta=1.0)
    assert abs(r.lam - 0.4) < 0.05
    assert r.c == pytest.approx(3.0, rel=0.05)
    assert r.lam_ci[0] < 0.4 < r.lam_ci[1]
    assert r.lr_stat > 50 and r.p_value < 1e-10
    assert r.p_value == pytest.approx(0.5 * stats.chi2.sf(r.lr_stat, 1), rel=1e-9)
    assert r.converged and not r.notes


def test_softmax_data_give_lambda_near_zero_and_the_boundary_null(link_data):
    lams, ps = [], []
    for rep in range(20):
        sim, t = link_data(2000, 64, c=3.0, lam=0.0, seed=100 + rep)
        r = fit_link_selection(sim, t)
        lams.append(r.lam)
        ps.append(r.p_value)
        assert r.lam_ci[0] == 0.0
        if r.lr_stat == 0.0:
            assert r.p_value == 1.0
    lams, ps = np.array(lams), np.array(ps)
    assert lams.max() < 0.15 and np.median(lams) < 0.02
    assert np.sum(ps < 0.05) <= 3                 # nominal 1 of 20
    assert np.sum(ps == 1.0) >= 5                 # half the mass of 0.5 chi2_0 + 0.5 chi2_1
    big = fit_link_selection(*link_data(10_000, 128, c=3.0, lam=0.0, seed=1))
    assert big.lam < 0.02 and big.p_value > 0.2


def test_torch_input_and_mask_compaction_give_the_same_fit():
    torch = pytest.importorskip("torch")
    sim, t, mask = simclr_like(32, 20, seed=3)
    a = fit_link_selection(sim, t, mask)
    b = fit_link_selection(torch.from_numpy(sim), torch.from_numpy(t), torch.from_numpy(mask))
    assert (a.lam, a.c, a.loglik) == (b.lam, b.c, b.loglik)
    # a masked column is the same as a removed one (NaN there is ignored)
    sim2 = sim.copy()
    sim2[~mask] = np.nan
    c = fit_link_selection(sim2, t, mask)
    assert c.loglik == a.loglik and c.lam == a.lam


@pytest.mark.filterwarnings("ignore:only .* anchors")
def test_separable_data_warn_and_are_flagged():
    sim, t, mask = simclr_like(16, 4, seed=0)
    sim[np.arange(sim.shape[0]), t] = 0.999       # the positive always wins
    with pytest.warns(UserWarning, match="separable"):
        r = fit_link_selection(sim, t, mask)
    assert not r.converged and r.top1 == 1.0


@pytest.mark.filterwarnings("ignore:only .* anchors")
def test_bad_link_input_raises_clear_errors():
    sim, t, mask = simclr_like(16, 2, seed=0)
    bad = mask.copy()
    bad[[0, 3], t[[0, 3]]] = False
    with pytest.raises(ValueError, match="2 row\\(s\\) have their positive masked out"):
        fit_link_selection(sim, t, bad)
    uneven = mask.copy()
    uneven[1, (t[1] + 1) % 16 if (t[1] + 1) % 16 != 1 else 2] = False
    with pytest.raises(ValueError, match="same number of valid candidates"):
        fit_link_selection(sim, t, uneven)
    nan = sim.copy()
    nan[2, 0] = np.nan
    with pytest.raises(ValueError, match="1 NaN"):
        fit_link_selection(nan, t, mask)
    far = sim.copy()
    far[0, 1] = 1.5
    with pytest.raises(ValueError, match="outside \\[-1, 1\\]"):
        fit_link_selection(far, t, mask)
    with pytest.raises(ValueError, match="outside \\[0, 16\\)"):
        fit_link_selection(sim, t + 16, mask)
    with pytest.raises(ValueError, match="targets must have shape"):
        fit_link_selection(sim, t[:-1], mask)
    with pytest.raises(ValueError, match="tau"):
        fit_link_selection(sim, t, mask, tau=0.0)
    with pytest.raises(ValueError, match="\\(B, C\\)"):
        fit_link_selection(sim[0], t, mask)
