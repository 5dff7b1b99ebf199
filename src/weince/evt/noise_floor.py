"""The paper's synthetic noise-floor experiment: a correctly specified Weibit link removes
the error floor that a restricted softmax keeps (the paper's synthetic figure; the
authors' ``synthetic/noise_floor_simulation.py`` gives the setting, this implementation is
our own).

Setting. Four bounded scores ``s = (0.15, 0.45, 0.70, 0.90)`` below the endpoint ``e = 1``;
the winner of each draw is candidate ``j`` with probability proportional to
``(e - s_j)^(-beta)``, ``beta = 0.8`` (an endpoint-shortfall, Weibit, law). The target is
the log-odds of the top candidate against the reference (lowest) one,
``lambda = log p_top / p_ref = beta * (x_top - x_ref)`` in the endpoint coordinate
``x = -log(e - s)``.

Two one-parameter exponential families over the four candidates, ``P_theta(j) ∝
exp(theta * f_j)``, each fitted by maximum likelihood to ``n`` draws, i.e. by matching the
sample's mean coordinate ``sum_j f_j N_j / n = E_theta[f]`` (``N`` the multinomial counts):

- Weibit, ``f = x``: correctly specified (``theta = beta``); ``lambda_hat = beta_hat *
  (x_top - x_ref)``. Its MSE falls like ``c / n`` with ``c = (x_top - x_ref)^2 / Var_p(x)``
  (the inverse Fisher information per draw, carried to the log-odds by the delta method).
- restricted softmax, ``f = s``: a slope (inverse temperature) in the raw score;
  ``lambda_hat = theta_hat * (s_top - s_ref)``. It converges to the pseudo-true slope
  ``theta*`` solving ``E_theta*[s] = E_p[s]``, so its MSE tends to the squared bias
  ``(theta* (s_top - s_ref) - lambda)^2``, a floor that more data does not remove; the
  variance part is ``c_soft / n`` with the sandwich ``c_soft = (s_top - s_ref)^2 Var_p(s) /
  Var_theta*(s)^2``.

Degenerate samples. The maximum-likelihood slope is finite exactly when the sample's mean
coordinate lies strictly between the smallest and largest coordinate, i.e. unless every
draw went to the lowest or every draw to the highest candidate (then the likelihood keeps
rising as ``theta -> -inf`` or ``+inf``). Such replicates have no estimate: they are
counted per ``n`` (``degenerate``) and left out of the MSE (never clipped to a finite
value, which would set the MSE by the clip). In this setting their probability is below
``0.55^100`` per replicate at ``n >= 100``.

Computation: counts are multinomial, so each replicate is one ``multinomial(n, p)`` draw
(not ``n`` categorical draws), and the moment equation is solved for all replicates at
once by bracketed Newton steps (the equation is monotone: its derivative is the variance
``Var_theta(f) > 0``).

Example::

    from weince.evt import simulate_noise_floor
    r = simulate_noise_floor(replicates=2000, seed=0)
    r.rows[-1]["mse_weibit"], r.theory["softmax_floor"]
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from weince.utils.diskspace import atomic_write
from weince.utils.results import write_json

__all__ = ["SCORES", "BETA", "ENDPOINT", "SAMPLE_SIZES", "CSV_COLUMNS", "NoiseFloorResult",
           "shortfall_probs", "endpoint_coordinate", "solve_tilt", "fit_tilt_counts",
           "noise_floor_theory", "simulate_noise_floor", "loglog_slope",
           "write_noise_floor"]

SCORES = (0.15, 0.45, 0.70, 0.90)
BETA = 0.8
ENDPOINT = 1.0
SAMPLE_SIZES = (100, 200, 500, 1_000, 2_000, 5_000, 10_000)
# the CSV twin of noise_floor.json: one line per n
CSV_COLUMNS = ("n", "replicates", "used", "degenerate", "mse_weibit", "se_weibit",
               "mse_softmax", "se_softmax", "theory_weibit", "softmax_floor", "theory_softmax",
               "mean_log_odds_weibit", "mean_log_odds_softmax", "seed")


def _check_scores(scores: ArrayLike, endpoint: float) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size < 2:
        raise ValueError(f"scores must be a list of at least two numbers, got {scores!r} "
                         f"(config key synthetic.noise_floor.scores)")
    if not np.all(np.isfinite(s)) or np.any(s >= endpoint):
        raise ValueError(f"every score must lie strictly below the endpoint {endpoint}, got "
                         f"{scores!r} (config keys synthetic.noise_floor.scores / endpoint)")
    if np.unique(s).size != s.size:
        raise ValueError(f"scores must be distinct, got {scores!r} "
                         f"(config key synthetic.noise_floor.scores)")
    return s


def endpoint_coordinate(scores: ArrayLike, endpoint: float = ENDPOINT) -> np.ndarray:
    """``x = -log(endpoint - s)``: the coordinate in which the shortfall law is a softmax."""
    s = _check_scores(scores, endpoint)
    return -np.log(endpoint - s)


def shortfall_probs(scores: ArrayLike, beta: float = BETA,
                    endpoint: float = ENDPOINT) -> np.ndarray:
    """Winner probabilities ``(endpoint - s)^(-beta) / sum_k (endpoint - s_k)^(-beta)``
    (``= softmax(beta * x)``; the power form, so that a seeded multinomial draw sees the
    same probabilities, to the last bit, as any implementation that writes them this way)."""
    s = _check_scores(scores, endpoint)
    w = (endpoint - s) ** (-float(beta))
    return w / w.sum()


def _tilt_moments(theta: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of ``f`` under ``P_theta(j) ∝ exp(theta f_j)``, for every theta."""
    z = theta[:, None] * f[None, :]
    z -= z.max(axis=1, keepdims=True)
    w = np.exp(z)
    w /= w.sum(axis=1, keepdims=True)
    mean = w @ f
    var = w @ (f * f) - mean * mean
    # the variance from raw moments can lose digits; recompute centred where it is small
    small = var < 1e-8 * float(np.ptp(f)) ** 2
    if np.any(small):
        var[small] = np.einsum("ij,ij->i", w[small], (f[None, :] - mean[small, None]) ** 2)
    return mean, var


def solve_tilt(means: np.ndarray | Sequence[float] | float, coord: ArrayLike, *,
               tol: float = 1e-12, max_iter: int = 200) -> np.ndarray:
    """Solve ``E_theta[f] = m`` for ``theta`` (the maximum-likelihood slope of the family
    ``P_theta(j) ∝ exp(theta f_j)`` given the sample mean ``m``), for every ``m`` at once.

    Every ``m`` must lie strictly between ``min(f)`` and ``max(f)`` (the attainable means);
    otherwise no finite solution exists and a ``ValueError`` says so (the simulation drops
    those replicates first, see the module docstring)."""
    f = np.asarray(coord, dtype=np.float64)
    m = np.atleast_1d(np.asarray(means, dtype=np.float64)).ravel()
    lo_f, hi_f = float(f.min()), float(f.max())
    bad = ~((m > lo_f) & (m < hi_f))
    if np.any(bad):
        raise ValueError(f"{int(bad.sum())} mean(s) outside the attainable open interval "
                         f"({lo_f}, {hi_f}) (e.g. {m[bad][0]!r}); a sample with every draw on "
                         f"the lowest or highest candidate has no finite maximum-likelihood "
                         f"slope: leave it out")
    scale = float(np.ptp(f))
    # bracket: g(theta) = E_theta[f] - m is increasing; widen [lo, hi] until it changes sign
    lo = np.full(m.shape, -1.0 / scale)
    hi = np.full(m.shape, 1.0 / scale)
    for _ in range(200):
        g_lo = _tilt_moments(lo, f)[0] - m
        g_hi = _tilt_moments(hi, f)[0] - m
        need_lo, need_hi = g_lo > 0, g_hi < 0
        if not (need_lo.any() or need_hi.any()):
            break
        lo[need_lo] *= 2.0
        hi[need_hi] *= 2.0
    else:
        raise RuntimeError("solve_tilt: could not bracket the moment equation")
    theta = np.zeros_like(m)
    theta = np.clip(theta, lo, hi)
    for _ in range(max_iter):
        mean, var = _tilt_moments(theta, f)
        g = mean - m
        lo = np.where(g < 0, theta, lo)
        hi = np.where(g > 0, theta, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(var > 0, g / var, np.inf)
        new = theta - step
        outside = ~((new > lo) & (new < hi))
        new = np.where(outside, 0.5 * (lo + hi), new)
        done = np.abs(new - theta) <= tol * (1.0 + np.abs(theta))
        theta = new
        if np.all(done):
            return theta
    raise RuntimeError(f"solve_tilt: no convergence in {max_iter} iterations")


def fit_tilt_counts(counts: np.ndarray, coord: ArrayLike
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood slopes from multinomial counts (``(R, K)``, one row a replicate):
    ``(theta, degenerate)``, ``theta`` NaN where ``degenerate`` (every draw on the
    lowest-coordinate or every draw on the highest-coordinate candidate)."""
    f = np.asarray(coord, dtype=np.float64)
    counts = np.asarray(counts)
    n = counts.sum(axis=1)
    degenerate = (counts[:, int(np.argmin(f))] == n) | (counts[:, int(np.argmax(f))] == n)
    theta = np.full(counts.shape[0], np.nan)
    ok = ~degenerate
    if ok.any():
        m = (counts[ok] @ f) / n[ok]
        # a mean one rounding error past the open interval cannot occur for a non-degenerate
        # sample (some mass sits strictly inside); clip against the last-ulp case only
        m = np.clip(m, np.nextafter(f.min(), np.inf), np.nextafter(f.max(), -np.inf))
        theta[ok] = solve_tilt(m, f)
    return theta, degenerate


def noise_floor_theory(scores: ArrayLike = SCORES, beta: float = BETA,
                       endpoint: float = ENDPOINT) -> dict[str, Any]:
    """The analytic quantities of the setting: the true log-odds, the Weibit ``c`` of the
    ``c / n`` line, the softmax's pseudo-true slope and log-odds, its squared-bias floor and
    its sandwich variance coefficient."""
    s = _check_scores(scores, endpoint)
    x = endpoint_coordinate(s, endpoint)
    p = shortfall_probs(s, beta, endpoint)
    ref, top = int(np.argmin(s)), int(np.argmax(s))
    x_gap, s_gap = float(x[top] - x[ref]), float(s[top] - s[ref])
    target = beta * x_gap
    var_x = float(p @ (x - p @ x) ** 2)
    mu_s = float(p @ s)
    theta_star = float(solve_tilt(mu_s, s)[0])
    _, var_q = _tilt_moments(np.array([theta_star]), s)
    var_s = float(p @ (s - mu_s) ** 2)
    pseudo = theta_star * s_gap
    return {
        "true_log_odds": target,
        "weibit_c": x_gap ** 2 / var_x,
        "softmax_pseudo_true_slope": theta_star,
        "softmax_pseudo_true_log_odds": pseudo,
        "softmax_floor": (pseudo - target) ** 2,
        "softmax_c": s_gap ** 2 * var_s / float(var_q[0]) ** 2,
        "x_gap": x_gap,
        "s_gap": s_gap,
        "probs": [float(v) for v in p],
    }


@dataclass
class NoiseFloorResult:
    """Per-``n`` rows (``n``, ``replicates``, ``used``, ``degenerate``, ``mse_weibit``,
    ``se_weibit``, ``mse_softmax``, ``se_softmax``, ``theory_weibit`` (= ``c / n``),
    ``softmax_floor``, ``theory_softmax`` (= floor + ``c_soft / n``), mean estimates), the
    analytic quantities and the setting."""
    rows: list[dict[str, Any]]
    theory: dict[str, Any]
    setting: dict[str, Any] = field(default_factory=dict)

    def column(self, key: str) -> np.ndarray:
        return np.array([r[key] for r in self.rows], dtype=np.float64)


def _mse(err: np.ndarray) -> tuple[float, float]:
    sq = err * err
    se = float(sq.std(ddof=1) / math.sqrt(sq.size)) if sq.size > 1 else math.nan
    return float(sq.mean()), se


def simulate_noise_floor(*, scores: ArrayLike = SCORES, beta: float = BETA,
                         endpoint: float = ENDPOINT,
                         sample_sizes: Sequence[int] = SAMPLE_SIZES,
                         replicates: int = 12_000, seed: int = 0) -> NoiseFloorResult:
    """Monte-Carlo MSE of both estimators of the top-vs-reference log-odds at each ``n``
    (``replicates`` independent samples per ``n``, one generator seeded with ``seed``)."""
    if int(replicates) < 2:
        raise ValueError(f"replicates must be >= 2, got {replicates!r} "
                         f"(config key synthetic.noise_floor.replicates)")
    ns = [int(n) for n in sample_sizes]
    if not ns or min(ns) < 1 or len(set(ns)) != len(ns):
        raise ValueError(f"sample_sizes must be distinct positive integers, got "
                         f"{sample_sizes!r} (config key synthetic.noise_floor.sample_sizes)")
    s = _check_scores(scores, endpoint)
    x = endpoint_coordinate(s, endpoint)
    p = shortfall_probs(s, beta, endpoint)
    th = noise_floor_theory(s, beta, endpoint)
    rng = np.random.default_rng(seed)
    rows = []
    for n in sorted(ns):
        counts = rng.multinomial(n, p, size=int(replicates))
        beta_hat, deg_w = fit_tilt_counts(counts, x)
        theta_hat, deg_s = fit_tilt_counts(counts, s)
        # x is increasing in s: both families have the same extreme candidates
        degenerate = deg_w | deg_s
        ok = ~degenerate
        lam_w = beta_hat[ok] * th["x_gap"]
        lam_s = theta_hat[ok] * th["s_gap"]
        mse_w, se_w = _mse(lam_w - th["true_log_odds"])
        mse_s, se_s = _mse(lam_s - th["true_log_odds"])
        rows.append({
            "n": n,
            "replicates": int(replicates),
            "used": int(ok.sum()),
            "degenerate": int(degenerate.sum()),
            "mse_weibit": mse_w,
            "se_weibit": se_w,
            "mse_softmax": mse_s,
            "se_softmax": se_s,
            "theory_weibit": th["weibit_c"] / n,
            "softmax_floor": th["softmax_floor"],
            "theory_softmax": th["softmax_floor"] + th["softmax_c"] / n,
            "mean_log_odds_weibit": float(lam_w.mean()) if lam_w.size else math.nan,
            "mean_log_odds_softmax": float(lam_s.mean()) if lam_s.size else math.nan,
        })
    setting = {"scores": [float(v) for v in s], "beta": float(beta),
               "endpoint": float(endpoint), "sample_sizes": sorted(ns),
               "replicates": int(replicates), "seed": int(seed)}
    return NoiseFloorResult(rows=rows, theory=th, setting=setting)


def loglog_slope(n: Sequence[float], mse: Sequence[float], se: Sequence[float] | None = None,
                 *, level: float = 0.95) -> dict[str, float]:
    """Least-squares slope of ``log mse`` on ``log n`` with a ``level`` interval.

    The interval's standard error is the larger of two: the Monte-Carlo one (each point's
    ``log mse`` has variance ``(se / mse)^2``; the ``n`` are independent samples) and the
    one from the residuals about the line (t with ``len(n) - 2`` degrees of freedom), so
    that neither Monte-Carlo noise nor curvature of the points (the ``o(1/n)`` terms at
    small ``n``) is hidden. ``slope``, ``lo``, ``hi``, ``se_mc``, ``se_resid``."""
    ln = np.log(np.asarray(n, dtype=np.float64))
    ly = np.log(np.asarray(mse, dtype=np.float64))
    k = ln.size
    if k < 3:
        raise ValueError(f"a slope interval needs at least 3 sample sizes, got {k} "
                         f"(config key synthetic.noise_floor.sample_sizes)")
    lc = ln - ln.mean()
    sxx = float(lc @ lc)
    slope = float(lc @ (ly - ly.mean()) / sxx)
    resid = ly - ly.mean() - slope * lc
    se_resid = math.sqrt(float(resid @ resid) / (k - 2) / sxx)
    # imported here: the report's jobs read this module but need scipy only for this interval
    from scipy.special import ndtri, stdtrit  # noqa: PLC0415

    t = float(stdtrit(k - 2, 0.5 + level / 2))
    z = float(ndtri(0.5 + level / 2))
    se_mc = math.nan
    half = t * se_resid
    if se is not None:
        rel = np.asarray(se, dtype=np.float64) / np.asarray(mse, dtype=np.float64)
        se_mc = math.sqrt(float((lc / sxx) ** 2 @ rel ** 2))
        half = max(half, z * se_mc)
    return {"slope": slope, "lo": slope - half, "hi": slope + half,
            "se_mc": se_mc, "se_resid": se_resid, "level": level}


def write_noise_floor(result: NoiseFloorResult, json_path: str | Path,
                      csv_path: str | Path | None = None, *, cfg: Any = None) -> Path:
    """``noise_floor.json`` (setting, analytic quantities, per-``n`` rows; with provenance)
    and its CSV twin (:data:`CSV_COLUMNS`, one line per ``n``), each written atomically."""
    seed = int(result.setting.get("seed", 0))
    out = write_json(json_path, {"setting": result.setting, "theory": result.theory,
                                 "rows": result.rows}, cfg=cfg, seed=seed)
    if csv_path is not None:
        def write_csv(tmp: Path) -> None:
            with tmp.open("w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(CSV_COLUMNS)
                for r in result.rows:
                    w.writerow([repr(r[k]) if isinstance(r.get(k), float) else r.get(k, seed)
                                for k in CSV_COLUMNS])

        atomic_write(csv_path, write_csv)
    return out
