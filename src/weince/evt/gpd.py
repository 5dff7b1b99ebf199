"""Peaks over threshold: generalised Pareto fits of the upper tail of similarity scores.

``docs/method.md``, "Tail diagnostics". Scores ``s`` (cosines of L2-normalised embeddings,
pooled over pairs of
different images) are thresholded at ``u`` = the ``q`` quantile of the pool; the
exceedances ``y = s - u`` (``s > u``) are fitted by maximum likelihood with a generalised
Pareto distribution of location 0,

    F(y) = 1 - (1 + xi * y / sigma) ** (-1 / xi)        (xi != 0)
    F(y) = 1 - exp(-y / sigma)                          (xi = 0, exponential),

which is scipy's ``genpareto(c=xi, scale=sigma)`` (scipy's shape ``c`` *is* ``xi``). A
negative ``xi`` (Weibull domain) implies a finite endpoint ``u - sigma / xi``; the paper
reports ``xi_hat ~ -0.39``.

Likelihood details:
- For fixed ``xi`` the score equation in ``sigma`` is monotone, so the profile likelihood
  ``l_p(xi) = max_sigma l(xi, sigma)`` is computed by a bracketed 1-D root search; the MLE
  maximises ``l_p`` over ``xi`` (coarse grid, then bounded Brent).
- The likelihood is unbounded for ``xi < -1`` (``sigma -> -xi * max(y)``), so ``xi`` is
  restricted to ``[-1, inf)``; for ``-1 < xi < -0.5`` the MLE exists but is non-regular
  (Smith 1985), and the result carries a note to trust the bootstrap check there.
- The 95% interval for ``xi`` is the profile-likelihood interval
  ``{xi : 2 (l_max - l_p(xi)) <= chi2_1(0.95)}``.

Dependence. Pooled scores are not independent: each image of a batch of ``K + 1`` enters
``K`` pairs, so exceedances cluster by image and by batch, and the profile interval (which
treats exceedances as i.i.d.) is too narrow. Given ``groups`` (the batch each score came
from; :func:`weince.evt.scorefile.load_scores` returns them as ``batch``),
:func:`fit_gpd_pot` adds a *batch bootstrap*: resample whole batches with replacement,
re-threshold the pooled resample at its own ``q`` quantile, refit, and take
``xi_hat +- t_{G-1} sd`` of the refits (``xi_ci_batch``, ``G`` batches); the batches
are independent draws, so this interval respects the sharing of images within a batch.

Example::

    from weince.evt import fit_gpd_pot
    r = fit_gpd_pot(scores, q=0.99)
    r.xi, r.sigma, r.threshold, r.n_exceed, r.xi_ci, r.endpoint
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, stats

from weince.evt._checks import check_scores, progress

__all__ = [
    "GPDFit",
    "GPDConvergenceError",
    "fit_gpd",
    "fit_gpd_pot",
    "gpd_loglik",
    "gpd_profile_loglik",
    "threshold_stability",
    "mean_excess",
    "batch_bootstrap_xi",
    "MIN_EXCEED_ERROR",
    "MIN_EXCEED_WARN",
]

MIN_EXCEED_ERROR = 50    # fewer exceedances than this: ValueError
MIN_EXCEED_WARN = 200    # fewer than this: a warning with the count
_XI0 = 1e-8              # |xi| below this is treated as the exponential limit
XI_MIN = -1.0            # the likelihood is unbounded below this


# --------------------------------------------------------------------------- likelihood

def gpd_loglik(y: np.ndarray, xi: float, sigma: float) -> float:
    """Log-likelihood of exceedances ``y`` (1-D, ``y >= 0``) under GPD(xi, sigma, loc=0).

    Equals ``scipy.stats.genpareto.logpdf(y, xi, scale=sigma).sum()``; ``-inf`` when a
    point lies beyond the endpoint ``-sigma / xi`` (``xi < 0``) or ``sigma <= 0``.
    """
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    if not sigma > 0:
        return -math.inf
    if abs(xi) < _XI0:
        return float(-n * math.log(sigma) - y.sum() / sigma)
    z = xi * y / sigma
    if z.min() <= -1.0:
        return -math.inf
    return float(-n * math.log(sigma) - (1.0 + 1.0 / xi) * np.log1p(z).sum())


class GPDConvergenceError(RuntimeError):
    """The scale's root search did not converge (a bootstrap replicate that meets it is
    dropped and counted, never a crashed fit)."""


def _sigma_hat(y: np.ndarray, xi: float, ymax: float, ymean: float) -> float:
    """argmax_sigma l(xi, sigma) for fixed ``xi >= -1`` (root of the monotone score)."""
    n = y.size
    if abs(xi) < _XI0:
        return ymean
    if xi <= -1.0:
        # at xi = -1, l = -n log sigma: decreasing, maximal at the support boundary
        return -xi * ymax
    lower = -xi * ymax if xi < 0 else 0.0
    # The score g(sigma) = (1 + xi) sum y / (sigma + xi y) - n decreases on (lower, inf)
    # from +inf to -n, so it has one root. Safeguarded Newton in v = log(sigma - lower)
    # (keeps sigma feasible), bisecting whenever a step leaves the current bracket.
    v = math.log(max((1.0 - xi) * ymean - lower, 1e-3 * ymean))
    v_lo, v_hi = -math.inf, math.inf
    for _ in range(300):
        s = lower + math.exp(v)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            r = 1.0 / (s + xi * y)
            w = y * r
            g = (1.0 + xi) * float(w.sum()) - n
            dg = -(1.0 + xi) * float((w * r).sum()) * (s - lower)   # dg/dv (no BLAS: threads)
        if not np.isfinite(g) or g > 0:
            v_lo = v
        else:
            v_hi = v
        if np.isfinite(g) and np.isfinite(dg) and dg < 0:
            step = max(-5.0, min(5.0, g / dg))
            if abs(step) <= 1e-11:
                return lower + math.exp(v - step)
            v_new = v - step
        else:
            v_new = v + 5.0
        if not v_lo < v_new < v_hi:
            if math.isinf(v_lo):
                v_new = v_hi - 5.0
            elif math.isinf(v_hi):
                v_new = v_lo + 5.0
            else:
                v_new = 0.5 * (v_lo + v_hi)
        s_new = lower + math.exp(v_new)
        # near xi = -1 the root sits just above `lower`: once a step no longer moves sigma
        # in float64 (tied maxima make s - lower tiny), sigma is as resolved as it can be
        if abs(v_new - v) <= 1e-11 or (v_hi - v_lo) <= 1e-11 or s_new == s:
            return s_new
        v = v_new
    raise GPDConvergenceError(f"GPD scale did not converge at xi={xi}")


def gpd_profile_loglik(y: np.ndarray, xi: float) -> tuple[float, float]:
    """Profile log-likelihood ``(l_p(xi), sigma_hat(xi))`` for ``xi >= -1``."""
    y = np.asarray(y, dtype=np.float64)
    if xi < XI_MIN:
        raise ValueError(f"xi={xi} < -1: the GPD likelihood is unbounded there")
    ymax, ymean = float(y.max()), float(y.mean())
    s = _sigma_hat(y, xi, ymax, ymean)
    if xi <= -1.0:
        return float(-y.size * math.log(s)), s
    return gpd_loglik(y, xi, s), s


def _mle(y: np.ndarray, bracket: tuple[float, float] | None = None) -> tuple[float, float, float]:
    """MLE ``(xi, sigma, loglik)`` over ``xi >= -1`` by maximising the profile likelihood."""
    ymax, ymean = float(y.max()), float(y.mean())

    def lp(xi: float) -> float:
        s = _sigma_hat(y, xi, ymax, ymean)
        if xi <= -1.0:
            return -y.size * math.log(s)
        return gpd_loglik(y, xi, s)

    if bracket is None:
        grid = list(np.round(np.arange(-1.0, 1.0001, 0.1), 10))
        vals = [lp(x) for x in grid]
        i = int(np.nanargmax(vals))
        while i == len(grid) - 1 and grid[-1] < 10.0:   # heavier tail than the grid: extend
            x = grid[-1] + 0.5
            grid.append(x)
            vals.append(lp(x))
            i = int(np.nanargmax(vals))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    else:
        lo, hi = max(bracket[0], XI_MIN), bracket[1]
    res = optimize.minimize_scalar(lambda x: -lp(x), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-7})
    xi, ll = float(res.x), float(-res.fun)
    if lo <= XI_MIN:                                 # the boundary xi = -1 itself
        ll_b = lp(XI_MIN)
        if ll_b >= ll:
            xi, ll = XI_MIN, ll_b
    return xi, _sigma_hat(y, xi, ymax, ymean), ll


def _profile_ci(y: np.ndarray, xi_hat: float, ll_hat: float,
                level: float) -> tuple[tuple[float, float], list[str]]:
    crit = 0.5 * float(stats.chi2.ppf(level, 1))
    notes: list[str] = []

    def f(x: float) -> float:
        return gpd_profile_loglik(y, x)[0] - (ll_hat - crit)

    if xi_hat <= XI_MIN or f(XI_MIN) >= 0:
        lower = XI_MIN
        notes.append("the lower profile limit reaches xi = -1, where the likelihood becomes "
                     "unbounded; the interval is truncated there")
    else:
        lower = optimize.brentq(f, XI_MIN, xi_hat, xtol=1e-6)
    step = 0.05
    x = xi_hat + step
    while f(x) > 0 and x < 50.0:
        step *= 2.0
        x = xi_hat + step
    if f(x) > 0:
        upper = math.inf
        notes.append("the upper profile limit is beyond xi = 50")
    else:
        upper = optimize.brentq(f, xi_hat, x, xtol=1e-6)
    return (float(lower), float(upper)), notes


# ------------------------------------------------------------------------ goodness of fit

def _ad_stat(y_sorted: np.ndarray, xi: float, sigma: float) -> float:
    """Anderson-Darling statistic of sorted exceedances against GPD(xi, sigma)."""
    n = y_sorted.size
    u = stats.genpareto.cdf(y_sorted, xi, scale=sigma)
    u = np.clip(u, 1e-300, 1.0 - 1e-16)
    i = np.arange(1, n + 1)
    return float(-n - np.sum((2 * i - 1) * (np.log(u) + np.log1p(-u[::-1]))) / n)


def _gof(y: np.ndarray, xi: float, sigma: float, n_boot: int,
         rng: np.random.Generator) -> dict[str, Any]:
    ys = np.sort(y)
    ad = _ad_stat(ys, xi, sigma)
    ks = stats.kstest(ys, stats.genpareto(xi, scale=sigma).cdf)
    out: dict[str, Any] = {
        "ad_stat": ad,
        "ks_stat": float(ks.statistic),
        "ks_pvalue_nominal": float(ks.pvalue),
        "note": ("ks_pvalue_nominal ignores that (xi, sigma) were estimated (it is "
                 "conservative: too large); ad_pvalue is a parametric bootstrap with refits"),
        "ad_pvalue": None,
        "n_boot": int(n_boot),
    }
    if n_boot > 0:
        exceed, used = 0, 0
        lo, hi = xi - 0.5, xi + 0.5
        for _ in progress(range(n_boot), desc="GPD goodness-of-fit bootstrap"):
            yb = stats.genpareto.rvs(xi, scale=sigma, size=y.size, random_state=rng)
            try:
                xb, sb, _ = _mle(yb, (lo, hi))
            except GPDConvergenceError:
                continue               # dropped and counted (n_boot_failed)
            used += 1
            exceed += _ad_stat(np.sort(yb), xb, sb) >= ad
        out["n_boot"], out["n_boot_failed"] = used, int(n_boot) - used
        out["ad_pvalue"] = (1 + exceed) / (1 + used) if used else None
    return out


# ---------------------------------------------------------------------------- the result

@dataclass
class GPDFit:
    """A generalised Pareto fit of the exceedances over a threshold.

    Attributes:
        xi, sigma: MLE shape (scipy's ``c``) and scale; location 0 on ``y = s - u``.
        threshold: ``u`` (0.0 when :func:`fit_gpd` got exceedances directly).
        q: the quantile that defined ``u`` (None for :func:`fit_gpd`).
        n_exceed, n_total: number of exceedances / of pooled scores.
        xi_ci: profile-likelihood interval for ``xi`` at ``ci_level``.
        endpoint: ``u - sigma / xi`` when ``xi < 0`` (the implied upper endpoint), else None.
        loglik: maximised log-likelihood.
        sigma0, loglik0: the ``xi = 0`` (exponential, Gumbel-domain) fit.
        lr_stat_exp, p_value_exp: likelihood ratio of the GPD against ``xi = 0`` and its
            chi2_1 p-value (``xi = 0`` is interior, so the regular chi2_1 applies).
        gof: Anderson-Darling and Kolmogorov-Smirnov statistics on the exceedances.
        xi_ci_boot: percentile bootstrap interval (``n_boot`` resamples), or None.
        n_boot_failed, n_boot_batch_failed: bootstrap replicates dropped because their fit
            did not converge (:class:`GPDConvergenceError`); ``n_boot`` / ``n_boot_batch``
            count the replicates used.
        notes: caveats about this fit (boundary, non-regular region).
        xi_ci_batch: normal bootstrap interval of ``xi`` from ``n_boot_batch`` resamples of whole
            batches (:func:`fit_gpd_pot` with ``groups``; None otherwise); ``n_batches`` the
            number of batches.
        exceedances: the fitted ``y`` values (for plots; left out of :meth:`to_dict`).
    """

    xi: float
    sigma: float
    threshold: float
    n_exceed: int
    xi_ci: tuple[float, float]
    endpoint: float | None
    loglik: float
    sigma0: float
    loglik0: float
    lr_stat_exp: float
    p_value_exp: float
    gof: dict[str, Any]
    q: float | None = None
    n_total: int | None = None
    ci_level: float = 0.95
    xi_ci_boot: tuple[float, float] | None = None
    n_boot: int = 0
    n_boot_failed: int = 0
    notes: list[str] = field(default_factory=list)
    xi_ci_batch: tuple[float, float] | None = None
    n_boot_batch: int = 0
    n_boot_batch_failed: int = 0
    n_batches: int | None = None
    exceedances: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no arrays)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name != "exceedances"}
        d["xi_ci"] = [x if math.isfinite(x) else None for x in self.xi_ci]   # strict JSON
        d["xi_ci_boot"] = None if self.xi_ci_boot is None else list(self.xi_ci_boot)
        d["xi_ci_batch"] = None if self.xi_ci_batch is None else list(self.xi_ci_batch)
        d["domain"] = ("Weibull (finite endpoint)" if self.xi_ci[1] < 0 else
                       "Frechet (heavy tail)" if self.xi_ci[0] > 0 else
                       "not resolved (interval contains 0)")
        return d


def _check_exceedances(y: np.ndarray, context: str) -> None:
    n = y.size
    if n < MIN_EXCEED_ERROR:
        raise ValueError(f"only {n} exceedance(s) {context}; a GPD fit needs at least "
                         f"{MIN_EXCEED_ERROR} (use a lower q or more scores)")
    if n < MIN_EXCEED_WARN:
        warnings.warn(f"only {n} exceedances {context}; the GPD fit is unreliable below "
                      f"{MIN_EXCEED_WARN} (use a lower q or more scores)", stacklevel=3)


def fit_gpd(exceedances, *, ci_level: float = 0.95, n_boot: int = 0, gof_boot: int = 0,
            seed: int = 0, threshold: float = 0.0, q: float | None = None,
            n_total: int | None = None) -> GPDFit:
    """Fit GPD(xi, sigma, loc=0) by maximum likelihood to exceedances ``y > 0``.

    Args:
        exceedances: ``(n,)`` positive values (``s - u`` for ``s > u``).
        ci_level: level of the profile-likelihood (and bootstrap) interval for ``xi``.
        n_boot: nonparametric bootstrap resamples for a percentile interval of ``xi``
            (a check on the profile interval; 0 = skip).
        gof_boot: parametric bootstrap replicates for the Anderson-Darling p-value (0 = skip).
        seed: seed of the bootstrap generator.
        threshold, q, n_total: recorded in the result (used by :func:`fit_gpd_pot`); the
            endpoint is ``threshold - sigma / xi``.

    Returns:
        :class:`GPDFit`.

    Raises:
        ValueError: fewer than 50 exceedances, non-finite or non-positive values.
    """
    y = np.asarray(exceedances, dtype=np.float64).reshape(-1)
    n_bad = int(np.count_nonzero(~np.isfinite(y)))
    if n_bad:
        raise ValueError(f"exceedances contain {n_bad} NaN/infinite value(s)")
    if y.size and y.min() <= 0:
        raise ValueError(f"exceedances must be > 0 ({int(np.count_nonzero(y <= 0))} are not); "
                         "pass s - u for s > u")
    _check_exceedances(y, "to fit")
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be in (0, 1), got {ci_level}")
    xi, sigma, ll = _mle(y)
    ci, notes = _profile_ci(y, xi, ll, ci_level)
    if xi < -0.5:
        notes.append(f"xi_hat = {xi:.3f} < -0.5: the MLE is non-regular there (Smith 1985); "
                     "the profile interval is approximate, compare the bootstrap interval")
    if xi <= XI_MIN:
        notes.append("xi_hat is at the boundary xi = -1 (sigma = max exceedance): the tail "
                     "is shorter than any regular GPD fit can describe")
    sigma0 = float(y.mean())
    ll0 = float(-y.size * (math.log(sigma0) + 1.0))
    lr = max(0.0, 2.0 * (ll - ll0))
    rng = np.random.default_rng(seed)
    ci_boot = None
    boot_failed = 0
    if n_boot > 0:
        xis = []
        for _ in progress(range(n_boot), desc="GPD bootstrap"):
            try:
                xis.append(_mle(rng.choice(y, size=y.size, replace=True), (xi - 0.5, xi + 0.5))[0])
            except GPDConvergenceError:
                boot_failed += 1       # dropped and counted (n_boot_failed)
        a = (1.0 - ci_level) / 2.0
        if len(xis) >= 2:
            ci_boot = (float(np.quantile(xis, a)), float(np.quantile(xis, 1.0 - a)))
    gof = _gof(y, xi, sigma, gof_boot, rng)
    endpoint = float(threshold - sigma / xi) if xi < 0 else None
    return GPDFit(xi=float(xi), sigma=float(sigma), threshold=float(threshold),
                  n_exceed=int(y.size), xi_ci=ci, endpoint=endpoint, loglik=float(ll),
                  sigma0=sigma0, loglik0=ll0, lr_stat_exp=float(lr),
                  p_value_exp=float(stats.chi2.sf(lr, 1)), gof=gof, q=q, n_total=n_total,
                  ci_level=ci_level, xi_ci_boot=ci_boot, n_boot=int(n_boot) - boot_failed,
                  n_boot_failed=boot_failed, notes=notes,
                  exceedances=y)


def _threshold(s: np.ndarray, q: float) -> tuple[float, np.ndarray]:
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    u = float(np.quantile(s, q))
    return u, s[s > u] - u


def fit_gpd_pot(scores, q: float = 0.99, *, ci_level: float = 0.95, n_boot: int = 0,
                gof_boot: int = 0, seed: int = 0, check_range: bool = True,
                groups=None, n_boot_batch: int = 0) -> GPDFit:
    """Peaks-over-threshold generalised Pareto fit of pooled similarity scores.

    The paper's tail diagnostic (Erol et al., ICML 2026; ``docs/method.md``, "Tail
    diagnostics"): threshold the pool at its ``q`` quantile ``u``, fit a GPD of location 0
    to the exceedances ``s - u`` by maximum likelihood. A shape ``xi < 0`` is the Weibull
    domain (a finite endpoint ``u - sigma / xi``); ``xi = 0`` the Gumbel domain that a
    softmax link presumes. The paper reports ``xi_hat`` of about ``-0.39`` for a frozen
    encoder's negative similarities.

    Args:
        scores: pooled similarities, any shape (flattened), numpy or torch; values must lie
            in ``[-1, 1]`` (within 1e-4) unless ``check_range=False``.
        q: threshold quantile in ``(0, 1)``; ``u = quantile(scores, q)``, exceedances
            ``s - u`` for ``s > u``. Default ``0.99``.
        ci_level: level of the profile-likelihood interval of ``xi``, in ``(0, 1)``.
            Default ``0.95``.
        n_boot: percentile-bootstrap resamples of the exceedances as a check of the
            interval (0 = skip). Default ``0``.
        gof_boot: parametric-bootstrap resamples for the goodness-of-fit p-values (0 =
            skip). Default ``0``.
        seed: seed of the bootstraps. Default ``0``.
        check_range: refuse scores outside ``[-1, 1]``. Default ``True``.
        groups: optional batch id of each score (same length as ``scores``): enables the
            batch bootstrap (pooled scores are dependent within a batch). Default ``None``.
        n_boot_batch: batch-bootstrap resamples (0 = skip; needs ``groups`` and >= 2
            batches). Default ``0``.

    Returns:
        :class:`GPDFit`: ``xi``, ``sigma``, ``threshold = u``, ``n_exceed``, ``xi_ci``,
        ``endpoint = u - sigma / xi`` (``xi < 0``, else None), the exponential (``xi = 0``)
        comparison ``lr_stat_exp``/``p_value_exp``, ``gof``, the bootstrap intervals.

    Raises:
        ValueError: empty, constant, NaN or out-of-range scores (with counts); fewer than 50
            exceedances. Fewer than 200 exceedances give a warning with the count.

    Example:
        >>> import numpy as np
        >>> from weince.evt import fit_gpd_pot
        >>> rng = np.random.default_rng(0)
        >>> scores = 1.0 - 2.0 * rng.beta(2.0, 5.0, size=200_000)   # endpoint 1, xi = -1/2
        >>> fit = fit_gpd_pot(scores, q=0.99)
        >>> fit.n_exceed, fit.xi_ci[0] < -0.5 < fit.xi_ci[1] + 0.02, abs(fit.endpoint - 1) < 0.01
        (2000, True, True)
    """
    s = check_scores(scores, check_range=check_range)
    u, y = _threshold(s, q)
    _check_exceedances(y, f"above the q={q} threshold u={u:.6g} ({s.size} scores)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the count warning was already given above
        fit = fit_gpd(y, ci_level=ci_level, n_boot=n_boot, gof_boot=gof_boot, seed=seed,
                      threshold=u, q=q, n_total=int(s.size))
    if groups is not None:
        g = np.asarray(groups).reshape(-1)
        if g.shape != (np.asarray(scores).size,):
            raise ValueError(f"groups must give one batch id per score ({np.asarray(scores).size}),"
                             f" got shape {np.asarray(groups).shape}")
        fit.n_batches = int(np.unique(g).size)
        if n_boot_batch > 0:
            fit.xi_ci_batch, used, failed = batch_bootstrap_xi(
                s, g, q, fit.xi, n_boot_batch, ci_level=ci_level, seed=seed + 1)
            fit.n_boot_batch, fit.n_boot_batch_failed = used, failed
    return fit


def batch_bootstrap_xi(scores, groups, q: float, xi_hat: float, n_boot: int, *,
                       ci_level: float = 0.95, seed: int = 0
                       ) -> tuple[tuple[float, float] | None, int, int]:
    """Interval of ``xi`` from resampling whole batches (``groups``) with replacement.

    Each resample is re-thresholded at its own ``q`` quantile and refitted; the interval is
    ``xi_hat +- t_{G-1} * sd(resampled xi)`` with ``G`` the number of batches (a normal
    bootstrap interval: its width rests on a standard deviation, which a few dozen
    resamples estimate well, where percentile end points would need thousands).
    Returns ``(interval or None, resamples used, resamples dropped)``: a resample with fewer
    than 50 exceedances is skipped, one whose fit does not converge (a resample that repeats
    a batch ties the largest exceedances) is dropped and counted, and with fewer than 2
    batches there is no interval."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    g = np.asarray(groups).reshape(-1)
    order = np.argsort(g, kind="stable")
    _, starts = np.unique(g[order], return_index=True)
    blocks = np.split(s[order], starts[1:])
    G = len(blocks)
    if G < 2:
        return None, 0, 0
    rng = np.random.default_rng(seed)
    lo, hi = max(XI_MIN, xi_hat - 0.75), xi_hat + 0.75
    xis, failed = [], 0
    for _ in progress(range(n_boot), desc="GPD batch bootstrap"):
        pool = np.concatenate([blocks[i] for i in rng.integers(0, G, size=G)])
        u = float(np.quantile(pool, q))
        y = pool[pool > u] - u
        if y.size < MIN_EXCEED_ERROR:
            continue
        try:
            xis.append(_mle(y, (lo, hi))[0])
        except GPDConvergenceError:
            failed += 1
    if len(xis) < 2:
        return None, len(xis), failed
    half = float(stats.t.ppf(0.5 + ci_level / 2.0, G - 1)) * float(np.std(xis, ddof=1))
    return (float(xi_hat - half), float(xi_hat + half)), len(xis), failed


def threshold_stability(scores, qs: Sequence[float] = (0.95, 0.975, 0.99, 0.995), *,
                        ci_level: float = 0.95, check_range: bool = True) -> list[dict[str, Any]]:
    """``xi`` (with its profile interval) at several threshold quantiles.

    A stable ``xi`` across ``qs`` indicates the GPD regime has been reached. The modified
    scale ``sigma* = sigma - xi * u`` should also be constant. A ``q`` that leaves fewer
    than 50 exceedances is reported with an ``error`` entry instead of a fit.

    Returns:
        one dict per ``q``: ``q, threshold, n_exceed, xi, xi_ci, sigma, sigma_star,
        endpoint`` (or ``q, threshold, n_exceed, error``).
    """
    s = check_scores(scores, check_range=check_range)
    rows = []
    for q in qs:
        u, y = _threshold(s, float(q))
        if y.size < MIN_EXCEED_ERROR:
            msg = f"only {y.size} exceedances at q={q}; skipped"
            warnings.warn(msg, stacklevel=2)
            rows.append({"q": float(q), "threshold": u, "n_exceed": int(y.size), "error": msg})
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fit_gpd(y, ci_level=ci_level, threshold=u, q=float(q), n_total=int(s.size))
        if y.size < MIN_EXCEED_WARN:
            warnings.warn(f"only {y.size} exceedances at q={q}", stacklevel=2)
        rows.append({"q": float(q), "threshold": u, "n_exceed": r.n_exceed, "xi": r.xi,
                     "xi_ci": list(r.xi_ci), "sigma": r.sigma, "sigma_star": r.sigma - r.xi * u,
                     "endpoint": r.endpoint})
    return rows


def mean_excess(scores, qs: Sequence[float] | None = None, *, min_exceed: int = 10,
                check_range: bool = True) -> dict[str, list[float]]:
    """Mean-excess (mean residual life) data ``e(u) = E[s - u | s > u]``.

    For a GPD tail ``e(u)`` is linear in ``u`` with slope ``xi / (1 - xi)`` (negative in
    the Weibull domain). ``qs`` defaults to 60 quantiles in ``[0.9, 0.999]``; thresholds
    with fewer than ``min_exceed`` exceedances are dropped.

    Returns:
        dict of equal-length lists: ``q``, ``u``, ``mean_excess``, ``ci_lo``, ``ci_hi``
        (normal 95% interval), ``n``.
    """
    s = check_scores(scores, check_range=check_range)
    desc = np.sort(s)[::-1]
    csum = np.cumsum(desc)
    csq = np.cumsum(desc * desc)
    out: dict[str, list[float]] = {k: [] for k in ("q", "u", "mean_excess", "ci_lo", "ci_hi", "n")}
    qa = np.linspace(0.9, 0.999, 60) if qs is None else np.asarray(qs, dtype=np.float64)
    if qa.size and (qa.min() <= 0 or qa.max() >= 1):
        raise ValueError(f"qs must lie in (0, 1), got {qa.tolist()}")
    us = np.quantile(s, qa) if qa.size else np.empty(0)
    for q, u in zip(qa, us):
        u = float(u)
        n = int(np.searchsorted(-desc, -u, side="left"))   # count of s > u
        if n < min_exceed:
            continue
        m = csum[n - 1] / n
        var = max(csq[n - 1] / n - m * m, 0.0) * n / max(n - 1, 1)
        half = 1.96 * math.sqrt(var / n)
        out["q"].append(float(q))
        out["u"].append(u)
        out["mean_excess"].append(float(m - u))
        out["ci_lo"].append(float(m - u - half))
        out["ci_hi"].append(float(m - u + half))
        out["n"].append(n)
    return out
