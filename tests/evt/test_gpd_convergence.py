"""A bootstrap replicate that repeats a batch ties the largest exceedances; at the
``xi -> -1`` boundary the scale's Newton steps then fall below float64 resolution (the rehearsal:
a paper-path `pot` job died on "GPD scale did not converge at xi=-0.99999991"). The root
search must stop there, and a replicate that still fails is dropped and counted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from weince.evt import fit_gpd, fit_gpd_pot, gpd_loglik
from weince.evt import gpd as G


def _tied(seed: int) -> np.ndarray:
    """Exceedances of a resample that repeats one batch several times (ties at the top)."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(50, 400)), int(rng.integers(2, 6))
    base = rng.uniform(0, 1, n) ** rng.uniform(0.2, 3) * rng.uniform(1e-4, 0.1)
    return np.concatenate([base] * k)


# seeds and xi values that made the old root search spend its 300 iterations and raise
@pytest.mark.parametrize("seed,xi", [(28, -0.999999), (87, -0.999999), (121, -0.9999999)])
def test_scale_converges_with_tied_maxima_near_xi_minus_one(seed, xi):
    y = _tied(seed)
    ymax = float(y.max())
    s = G._sigma_hat(y, xi, ymax, float(y.mean()))
    lower = -xi * ymax
    assert s > lower                              # feasible: every point inside the support
    ll = gpd_loglik(y, xi, s)
    assert np.isfinite(ll)
    # a maximum: moving sigma away from it (up, or half-way to the support bound) lowers l
    assert ll >= gpd_loglik(y, xi, s + 10 * (s - lower))
    assert ll >= gpd_loglik(y, xi, lower + 0.5 * (s - lower))


def test_batch_bootstrap_with_duplicated_batches_does_not_crash():
    rng = np.random.default_rng(3)
    blocks = [rng.beta(2, 8, size=400) for _ in range(4)]
    s = np.concatenate(blocks + [blocks[0]] * 3)          # batch 0 repeated: tied maxima
    g = np.repeat(np.arange(7), 400)
    fit = fit_gpd_pot(s, q=0.9, groups=g, n_boot_batch=30, n_boot=20, seed=0)
    assert fit.n_boot_batch + fit.n_boot_batch_failed <= 30
    assert np.isfinite(fit.xi)


def test_non_converging_replicates_are_dropped_and_counted(monkeypatch):
    rng = np.random.default_rng(0)
    y = rng.beta(2, 8, size=4000)
    g = np.repeat(np.arange(8), 500)
    real = G._mle
    calls = {"n": 0}

    def flaky(y, bracket=None):
        if bracket is not None:                   # replicates only, never the main fit
            calls["n"] += 1
            if calls["n"] % 3 == 0:
                raise G.GPDConvergenceError("GPD scale did not converge at xi=-0.99999991")
        return real(y, bracket)

    monkeypatch.setattr(G, "_mle", flaky)
    fit = fit_gpd_pot(y, q=0.95, groups=g, n_boot_batch=12, n_boot=9, gof_boot=6, seed=1)
    assert fit.n_boot_failed + fit.n_boot == 9 and fit.n_boot_failed > 0
    assert fit.n_boot_batch_failed + fit.n_boot_batch == 12 and fit.n_boot_batch_failed > 0
    assert fit.gof["n_boot_failed"] + fit.gof["n_boot"] == 6
    d = json.loads(json.dumps(fit.to_dict()))       # what pot.json holds
    assert d["n_boot_failed"] == fit.n_boot_failed
    assert d["n_boot_batch_failed"] == fit.n_boot_batch_failed
    assert d["xi_ci_batch"] is not None


def test_every_replicate_failing_gives_no_interval_not_a_crash(monkeypatch):
    y = np.random.default_rng(2).beta(2, 8, size=2000)
    real = G._mle

    def failing(y, bracket=None):
        if bracket is not None:
            raise G.GPDConvergenceError("no")
        return real(y, bracket)

    monkeypatch.setattr(G, "_mle", failing)
    fit = fit_gpd(y[y > np.quantile(y, 0.9)] - np.quantile(y, 0.9), n_boot=5)
    assert fit.xi_ci_boot is None and fit.n_boot == 0 and fit.n_boot_failed == 5
