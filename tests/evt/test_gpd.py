"""POT/GPD fits: likelihood against scipy, parameter recovery from synthetic draws
(pyextremes-style), profile-interval coverage, the finite-endpoint law, bad input."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize_scalar

from weince.evt import (fit_gpd, fit_gpd_pot, gpd_loglik, gpd_profile_loglik, mean_excess,
                        threshold_stability)
from weince.evt.plots import setting_label

XIS = [-0.5, -0.39, -0.2, 0.1]


def _draws(xi: float, n: int, seed: int, sigma: float = 0.02) -> np.ndarray:
    return stats.genpareto.rvs(xi, scale=sigma, size=n, random_state=np.random.default_rng(seed))


@pytest.mark.parametrize("xi,sigma", [(-0.39, 0.03), (-0.8, 0.1), (0.0, 0.02), (1e-9, 0.02),
                                      (0.3, 0.05)])
def test_loglik_equals_scipy_logpdf_sum(xi, sigma):
    y = _draws(-0.3, 500, seed=1)
    assert gpd_loglik(y, xi, sigma) == pytest.approx(
        stats.genpareto.logpdf(y, xi, scale=sigma).sum(), rel=1e-10)


def test_loglik_is_minus_inf_beyond_the_endpoint():
    y = np.array([0.1, 0.5, 1.0])
    assert gpd_loglik(y, -0.5, 0.4) == -math.inf     # endpoint sigma/|xi| = 0.8 < 1.0
    assert gpd_loglik(y, 0.1, 0.0) == -math.inf


@pytest.mark.parametrize("xi", XIS)
def test_recovers_xi_at_20000_exceedances(xi):
    y = _draws(xi, 20_000, seed=11)
    r = fit_gpd(y)
    assert abs(r.xi - xi) < 0.05
    assert r.sigma == pytest.approx(0.02, rel=0.05)
    assert r.xi_ci[0] < r.xi < r.xi_ci[1]
    # the MLE: scipy's logpdf at our estimate equals our loglik, and scipy's own optimiser
    # finds nothing better
    assert r.loglik == pytest.approx(stats.genpareto.logpdf(y, r.xi, scale=r.sigma).sum(),
                                     rel=1e-12)
    c, _, s = stats.genpareto.fit(y, floc=0)
    assert stats.genpareto.logpdf(y, c, scale=s).sum() <= r.loglik + 1e-6
    if xi < 0:
        assert r.endpoint == pytest.approx(-r.sigma / r.xi)          # threshold 0
        assert r.endpoint >= y.max()
    else:
        assert r.endpoint is None


def test_profile_loglik_is_maximised_at_the_mle_and_drops_by_chi2_at_the_limits():
    y = _draws(-0.39, 5000, seed=5)
    r = fit_gpd(y)
    assert gpd_profile_loglik(y, r.xi)[0] == pytest.approx(r.loglik, abs=1e-6)
    for x in (r.xi - 0.02, r.xi + 0.02):
        assert gpd_profile_loglik(y, x)[0] < r.loglik
    crit = stats.chi2.ppf(0.95, 1) / 2
    for lim in r.xi_ci:
        assert r.loglik - gpd_profile_loglik(y, lim)[0] == pytest.approx(crit, abs=1e-3)
    # sigma_hat(xi) maximises over sigma (compare with a bounded scalar search)
    xi = -0.3
    s_hat = gpd_profile_loglik(y, xi)[1]
    lo = -xi * y.max() * (1 + 1e-9)
    res = minimize_scalar(lambda s: -gpd_loglik(y, xi, s), bounds=(lo, 1.0), method="bounded",
                          options={"xatol": 1e-12})
    assert s_hat == pytest.approx(res.x, rel=1e-4)


@pytest.mark.parametrize("xi", XIS)
def test_profile_interval_covers_truth_in_most_of_20_repetitions(xi):
    # n = 5000 per repetition keeps the loop fast; nominal coverage is 95% (19 of 20)
    covered = 0
    for rep in range(20):
        r = fit_gpd(_draws(xi, 5000, seed=1000 + rep))
        covered += r.xi_ci[0] <= xi <= r.xi_ci[1]
    assert covered >= 16, f"coverage {covered}/20 at xi={xi}"


@pytest.mark.parametrize("alpha", [2.56, 4.0])
def test_endpoint_law_gives_xi_minus_one_over_alpha(alpha, endpoint_scores):
    # s = 1 - 1.5 V^(1/alpha): exceedances over u are exactly GPD(-1/alpha, (1 - u)/alpha)
    s = endpoint_scores(2_000_000, alpha, seed=3)
    r = fit_gpd_pot(s, q=0.99)
    assert r.n_exceed == 20_000
    assert r.threshold == pytest.approx(np.quantile(s, 0.99))
    assert abs(r.xi - (-1 / alpha)) < 0.05
    assert r.sigma == pytest.approx((1 - r.threshold) / alpha, rel=0.05)
    assert r.endpoint == pytest.approx(1.0, abs=0.01)
    assert r.xi_ci[1] < 0 and r.to_dict()["domain"].startswith("Weibull")
    # the exponential (xi = 0) fit is much worse: mean excess, exponential loglik
    y = s[s > r.threshold] - r.threshold
    assert r.sigma0 == pytest.approx(y.mean())
    assert r.loglik0 == pytest.approx(stats.expon.logpdf(y, scale=y.mean()).sum())
    assert r.lr_stat_exp > 100 and r.p_value_exp < 1e-20


def test_threshold_stability_and_mean_excess_on_the_endpoint_law(endpoint_scores):
    s = endpoint_scores(400_000, 2.56, seed=4)
    rows = threshold_stability(s)
    assert [r["q"] for r in rows] == [0.95, 0.975, 0.99, 0.995]
    for r in rows:
        assert abs(r["xi"] - (-1 / 2.56)) < 0.08
        assert r["xi_ci"][0] < r["xi"] < r["xi_ci"][1]
        assert r["n_exceed"] == int(np.sum(s > r["threshold"]))
    # sigma* = sigma - xi u is threshold-invariant: here sigma(u) = (1 - u)/alpha and
    # xi = -1/alpha, so sigma* = 1/alpha at every threshold
    for r in rows:
        assert r["sigma_star"] == pytest.approx(1 / 2.56, abs=0.03)
    me = mean_excess(s, qs=[0.9, 0.95, 0.99])
    for u, m, n in zip(me["u"], me["mean_excess"], me["n"]):
        assert m == pytest.approx(np.mean(s[s > u] - u), rel=1e-9)
        assert n == int(np.sum(s > u))
    assert me["mean_excess"][0] > me["mean_excess"][-1]   # decreasing: Weibull domain


def test_threshold_stability_reports_a_q_with_too_few_exceedances(endpoint_scores):
    s = endpoint_scores(20_000, 2.56, seed=6)
    with pytest.warns(UserWarning, match="exceedances"):
        rows = threshold_stability(s, qs=(0.95, 0.999))
    assert "xi" in rows[0] and "error" in rows[1] and rows[1]["n_exceed"] < 50


def test_bootstrap_interval_agrees_with_the_profile_interval():
    r = fit_gpd(_draws(-0.39, 5000, seed=8), n_boot=60, gof_boot=30, seed=1)
    lo, hi = r.xi_ci_boot
    assert lo < r.xi < hi
    assert max(lo, r.xi_ci[0]) < min(hi, r.xi_ci[1])          # they overlap
    assert 0.5 < (hi - lo) / (r.xi_ci[1] - r.xi_ci[0]) < 2.0
    assert 0 < r.gof["ad_pvalue"] <= 1 and r.gof["n_boot"] == 30


def test_goodness_of_fit_statistics_match_scipy():
    y = _draws(-0.39, 2000, seed=9)
    r = fit_gpd(y)
    ks = stats.kstest(y, stats.genpareto(r.xi, scale=r.sigma).cdf)
    assert r.gof["ks_stat"] == pytest.approx(ks.statistic)
    gof = stats.goodness_of_fit(stats.genpareto, y, statistic="ad", n_mc_samples=9,
                                known_params={"c": r.xi, "loc": 0.0, "scale": r.sigma},
                                rng=np.random.default_rng(0))
    assert r.gof["ad_stat"] == pytest.approx(gof.statistic, rel=1e-8)
    # a wrong model is rejected by the statistic: an exponential sample fitted as GPD is
    # fine, but these xi=-0.39 data against the exponential give a large A^2
    assert r.gof["ad_stat"] < 2.5


def test_the_likelihood_boundary_xi_minus_one():
    y = _draws(-1.3, 3000, seed=10)            # shorter than any regular GPD
    r = fit_gpd(y)
    assert r.xi >= -1.0 and r.xi < -0.9
    assert r.xi_ci[0] == -1.0
    assert any("xi = -1" in n for n in r.notes)
    assert any("non-regular" in n for n in r.notes)


# --------------------------------------------------------------------------- bad input

def test_bad_scores_raise_with_counts(endpoint_scores):
    with pytest.raises(ValueError, match="empty"):
        fit_gpd_pot(np.array([]))
    with pytest.raises(ValueError, match="constant"):
        fit_gpd_pot(np.full(1000, 0.3))
    s = endpoint_scores(10_000, 2.56)
    s[[1, 5, 9]] = np.nan
    with pytest.raises(ValueError, match="3 NaN"):
        fit_gpd_pot(s)
    s = endpoint_scores(10_000, 2.56)
    s[:4] = 1.5
    with pytest.raises(ValueError, match="4 value"):
        fit_gpd_pot(s)
    with pytest.raises(ValueError, match="q must be in"):
        fit_gpd_pot(endpoint_scores(10_000, 2.56), q=1.0)
    with pytest.raises(ValueError, match="> 0"):
        fit_gpd(np.r_[np.ones(100), -1.0])


def test_rounding_above_one_is_clipped_not_rejected(endpoint_scores):
    s = endpoint_scores(100_000, 2.56)
    s[0] = 1.0 + 1e-6                        # float32 cosines can exceed 1 by a few ulps
    assert fit_gpd_pot(s).endpoint is not None


def test_too_few_exceedances_error_and_warning(endpoint_scores):
    s = endpoint_scores(4000, 2.56)           # 40 exceedances at q = 0.99
    with pytest.raises(ValueError, match="only 40 exceedance"):
        fit_gpd_pot(s, q=0.99)
    s = endpoint_scores(10_000, 2.56)         # 100 exceedances
    with pytest.warns(UserWarning, match="only 100 exceedances"):
        fit_gpd_pot(s, q=0.99)


def test_check_range_false_fits_unbounded_data_and_torch_input_matches(endpoint_scores):
    y = _draws(0.1, 20_000, seed=12) + 3.0
    r = fit_gpd_pot(y, q=0.9, check_range=False)
    assert abs(r.xi - 0.1) < 0.1
    with pytest.raises(ValueError, match="outside"):
        fit_gpd_pot(y, q=0.9)
    torch = pytest.importorskip("torch")
    s = endpoint_scores(100_000, 2.56)
    a = fit_gpd_pot(s)
    b = fit_gpd_pot(torch.from_numpy(s))
    assert (a.xi, a.sigma, a.xi_ci) == (b.xi, b.sigma, b.xi_ci)


def test_weince_evt_imports_and_fits_without_torch():
    code = ("import sys, importlib.abc\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r} (blocked)')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import numpy as np\n"
            "import weince.evt, weince.evt.plots, weince.cli.evt, weince.evt.scorefile\n"
            "s = 1 - 1.5 * np.random.default_rng(0).uniform(size=100000) ** (1 / 2.56)\n"
            "r = weince.evt.fit_gpd_pot(s)\n"
            "assert -0.5 < r.xi < -0.3, r.xi\n"
            "assert 'torch' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_figure_titles_name_the_setting_and_the_encoder_seed():
    meta = {"dataset": "digits", "backbone": "smallcnn", "loss": "infonce",
            "encoder": "results/default/vision/digits/smallcnn/infonce/seed21/encoder.pt"}
    assert setting_label(meta) == "digits / smallcnn, infonce, encoder seed 21"
    assert setting_label({**meta, "encoder_seed": 7}).endswith("encoder seed 7")
    assert setting_label({"dataset": "digits"}) == "digits"
    assert setting_label(None) == ""
