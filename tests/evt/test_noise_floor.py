"""The synthetic noise-floor experiment (C11): the moment equation against a slow
reference, recovery of the true beta, the Weibit MSE on its Fisher c/n line, the softmax's
convergence to its pseudo-true log-odds, and degenerate samples counted, never clipped."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from scipy.optimize import brentq

from weince.evt import noise_floor_theory, simulate_noise_floor, write_noise_floor
from weince.evt.noise_floor import (BETA, CSV_COLUMNS, SCORES, endpoint_coordinate, fit_tilt_counts,
                                    loglog_slope, shortfall_probs, solve_tilt)

S = np.array(SCORES)
X = endpoint_coordinate(S)


def _tilt_mean(theta, f):
    w = np.exp(theta * f - np.max(theta * f))
    return float(w @ f / w.sum())


def test_probabilities_are_the_shortfall_law_and_a_softmax_in_x():
    p = shortfall_probs(S, BETA)
    q = (1 - S) ** -BETA
    np.testing.assert_allclose(p, q / q.sum(), rtol=1e-15)
    z = np.exp(BETA * X)
    np.testing.assert_allclose(p, z / z.sum(), rtol=1e-13)
    with pytest.raises(ValueError, match="below the endpoint"):
        shortfall_probs([0.2, 1.0])


def test_solve_tilt_matches_a_scalar_root_finder():
    rng = np.random.default_rng(0)
    for f in (S, X, np.array([-3.0, 0.0, 0.5, 7.0])):
        m = f.min() + (f.max() - f.min()) * rng.uniform(1e-4, 1 - 1e-4, size=200)
        got = solve_tilt(m, f)
        ref = [brentq(lambda t, mm=mm, f=f: _tilt_mean(t, f) - mm, -1e4, 1e4, xtol=1e-14)
               for mm in m]
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="attainable"):
        solve_tilt([S.max()], S)


def test_the_population_mean_gives_back_the_true_beta_and_the_pseudo_true_slope():
    p = shortfall_probs(S, BETA)
    assert solve_tilt(p @ X, X)[0] == pytest.approx(BETA, abs=1e-12)
    th = noise_floor_theory()
    # the pseudo-true softmax matches the law's mean score, and misses the true log-odds
    assert _tilt_mean(th["softmax_pseudo_true_slope"], S) == pytest.approx(p @ S, abs=1e-12)
    assert th["true_log_odds"] == pytest.approx(math.log(p[-1] / p[0]), rel=1e-12)
    assert th["softmax_floor"] == pytest.approx(
        (th["softmax_pseudo_true_log_odds"] - th["true_log_odds"]) ** 2, rel=1e-12)
    assert th["softmax_floor"] > 0.01
    # Fisher information per draw of beta is Var_p(x): the derivative of E_beta[x]
    h = 1e-6
    fisher = (_tilt_mean(BETA + h, X) - _tilt_mean(BETA - h, X)) / (2 * h)
    assert th["weibit_c"] == pytest.approx(th["x_gap"] ** 2 / fisher, rel=1e-6)


def test_weibit_recovers_beta_at_large_n():
    rng = np.random.default_rng(1)
    counts = rng.multinomial(1_000_000, shortfall_probs(S, BETA), size=400)
    beta_hat, deg = fit_tilt_counts(counts, X)
    assert not deg.any()
    se = beta_hat.std(ddof=1) / math.sqrt(beta_hat.size)
    assert abs(beta_hat.mean() - BETA) < 4 * se + 1e-6
    # and the estimator's spread is the Fisher one: sd^2 ~ 1 / (n Var_p(x))
    th = noise_floor_theory()
    var_fisher = th["weibit_c"] / th["x_gap"] ** 2 / 1_000_000
    assert beta_hat.var(ddof=1) == pytest.approx(var_fisher, rel=0.25)


def test_weibit_mse_sits_on_c_over_n_and_softmax_converges_to_its_pseudo_true_value():
    r = simulate_noise_floor(sample_sizes=(5_000, 20_000, 100_000), replicates=3_000, seed=3)
    th = r.theory
    for row in r.rows:
        # Weibit: on the Fisher line within Monte-Carlo error (o(1/n) terms are ~0.1% here)
        assert abs(row["mse_weibit"] - row["theory_weibit"]) < 4 * row["se_weibit"]
        assert row["degenerate"] == 0 and row["used"] == 3_000
    big = r.rows[-1]
    # softmax: its mean log-odds converges to the pseudo-true one, not the true one
    sd = math.sqrt(th["softmax_c"] / big["n"])
    assert abs(big["mean_log_odds_softmax"] - th["softmax_pseudo_true_log_odds"]) \
        < 4 * sd / math.sqrt(3_000)
    assert abs(big["mean_log_odds_softmax"] - th["true_log_odds"]) > 50 * sd / math.sqrt(3_000)
    # and its MSE is the floor plus the vanishing sandwich variance
    assert abs(big["mse_softmax"] - big["theory_softmax"]) < 4 * big["se_softmax"]
    assert big["mse_softmax"] > th["softmax_floor"] > 20 * big["mse_weibit"]
    sl = loglog_slope(r.column("n"), r.column("mse_weibit"), r.column("se_weibit"))
    assert sl["lo"] <= -1 <= sl["hi"]


def test_degenerate_samples_are_counted_and_left_out_not_clipped():
    counts = np.array([[5, 0, 0, 0], [0, 0, 0, 5], [0, 5, 0, 0], [1, 0, 0, 4]])
    theta, deg = fit_tilt_counts(counts, X)
    assert deg.tolist() == [True, True, False, False]
    assert np.isnan(theta[:2]).all() and np.isfinite(theta[2:]).all()
    # n = 1: every draw on the lowest or the highest score is degenerate (p_ref + p_top)
    r = simulate_noise_floor(sample_sizes=(1, 2, 3), replicates=20_000, seed=4)
    p = shortfall_probs(S, BETA)
    one = r.rows[0]
    assert one["used"] + one["degenerate"] == 20_000
    share = one["degenerate"] / 20_000
    assert abs(share - (p[0] + p[-1])) < 4 * math.sqrt(share * (1 - share) / 20_000)
    assert all(math.isfinite(row["mse_weibit"]) for row in r.rows)


def test_result_file_and_csv_twin(tmp_path):
    r = simulate_noise_floor(replicates=50, seed=5)
    write_noise_floor(r, tmp_path / "nf.json", tmp_path / "nf.csv", cfg={"replicates": 50})
    data = json.loads((tmp_path / "nf.json").read_text())
    assert data["setting"]["seed"] == 5 and data["provenance"]
    with (tmp_path / "nf.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [int(x["n"]) for x in rows] == [int(x["n"]) for x in data["rows"]]
    assert float(rows[-1]["mse_weibit"]) == data["rows"][-1]["mse_weibit"]
    assert int(rows[0]["seed"]) == 5


def test_the_same_seed_gives_the_same_numbers_and_bad_settings_fail_naming_the_key():
    a = simulate_noise_floor(replicates=100, seed=6).rows
    b = simulate_noise_floor(replicates=100, seed=6).rows
    assert a == b
    with pytest.raises(ValueError, match="replicates"):
        simulate_noise_floor(replicates=1)
    with pytest.raises(ValueError, match="sample_sizes"):
        simulate_noise_floor(sample_sizes=(100, 100, 200))
