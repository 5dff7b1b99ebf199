"""Link selection: is the observed positive chosen by a softmax of ``s / tau``, or does a
Weibull-shortfall term ``-beta * log(1 - s)`` improve the likelihood?
(``docs/method.md``, "Link selection")

For anchor ``i`` with valid candidates ``j`` (the positive ``t_i`` among them), the nested
family is

    P(j wins) = softmax_j( c * [ (1 - lambda) * s_ij / tau + lambda * (-beta * log(1 - s_ij)) ] )

with ``c > 0`` and ``lambda in [0, 1]`` fitted by maximum likelihood, the positive being
the observed winner; ``s`` is clipped at ``1 - eps`` inside the log. ``lambda = 0`` is the
softmax link with a free temperature ``tau / c``.

Computation. Writing ``a = s / tau``, ``b = -beta * log(1 - s)`` and ``(alpha, gamma) =
(c (1 - lambda), c lambda)``, the logits ``alpha * a + gamma * b`` are linear in
``(alpha, gamma)``, so the log-likelihood (a multinomial logit) is concave there: Newton's
method with the exact 2x2 Hessian finds the maximum over the quadrant ``alpha, gamma >= 0``
in a few passes over the data (float32, row chunks that stay in cache). The profile
likelihood ``l_p(lambda) = max_c l(c, lambda)`` is a 1-D concave problem along a ray,
solved by Newton warm-started from the nearest solved ``lambda``; the 95% interval is
``{lambda in [0, 1] : 2 (l_max - l_p(lambda)) <= chi2_1(0.95)}``. Reported
log-likelihoods are re-evaluated in float64.

The likelihood-ratio statistic ``2 (l_max - l_softmax)`` tests ``lambda = 0``, which lies on
the boundary of the parameter space, so its null law is ``0.5 chi2_0 + 0.5 chi2_1``:
``p = 0.5 * P(chi2_1 >= LR)`` for ``LR > 0`` and ``p = 1`` for ``LR = 0``.

Dependence. Both the interval and that p-value treat the anchors as independent. In a
SimCLR batch they are not: rows ``i`` and ``i + N`` share one positive pair (their positive
similarity is the same number), so the i.i.d. test is too confident. Given ``pairs`` (a
cluster id per row; :func:`simclr_pair_ids` derives it from the SimCLR layout), the fit
also reports a *pair-robust* test: the one-sided score test of ``lambda = 0`` against
``lambda > 0`` at the softmax fit, with the efficient score for ``gamma`` (the ``alpha``
direction projected out) summed within each pair and its variance estimated from those
pair sums (a cluster-robust statistic, ``p_value_pairs``), and a sandwich-variance Wald
interval for ``lambda`` (``lam_ci_pairs``). The one-sided score test needs no boundary
mixture: ``Z = U / sqrt(V)`` is standard normal at ``lambda = 0``.

Example::

    from weince.evt import fit_link_selection
    r = fit_link_selection(sim, targets, mask, tau=0.5, beta=1.0)
    r.lam, r.c, r.lam_ci, r.loglik, r.loglik_softmax, r.lr_stat, r.p_value
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, stats

from weince.evt._checks import as_numpy, check_similarities

__all__ = ["LinkFit", "fit_link_selection", "link_loglik", "prepare_link_data",
           "pair_score_test", "simclr_pair_ids"]

_CHUNK_ELEMS = 1 << 17      # entries per chunk (512 KiB of float32): stays in cache
_C_MAX = 1e4                # c beyond this: the positive is (nearly) always the top candidate


@dataclass
class LinkData:
    """Validated, compacted link-selection data.

    Attributes:
        a, b: ``(B, K + 1)`` float32 features ``s / tau`` and ``-beta log(1 - min(s, 1 - eps))``
            of the valid candidates of each row (masked columns removed).
        a_t, b_t: ``(B,)`` the same features of the positive (float64 copies of the
            float32 values, so the float32 passes see consistent numbers).
        s, t: the compacted similarities ``(B, K + 1)`` (float32, or float64 when given
            float64) and the positive's column in them, for exact float64 likelihoods.
        top1: fraction of rows whose positive has the largest similarity.
    """

    a: np.ndarray
    b: np.ndarray
    a_t: np.ndarray
    b_t: np.ndarray
    s: np.ndarray
    t: np.ndarray
    tau: float
    beta: float
    eps: float
    top1: float
    a_t32: np.ndarray = field(init=False, repr=False)
    b_t32: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.a_t32 = self.a_t.astype(np.float32)
        self.b_t32 = self.b_t.astype(np.float32)

    @property
    def n_anchors(self) -> int:
        return self.a.shape[0]

    @property
    def n_candidates(self) -> int:
        return self.a.shape[1]


def prepare_link_data(sim, targets, mask=None, *, tau: float = 0.5, beta: float = 1.0,
                      eps: float = 1e-6) -> LinkData:
    """Validate ``(sim, targets, mask)`` and build the compacted features.

    Args:
        sim: ``(B, C)`` similarities in ``[-1, 1]`` (numpy or torch).
        targets: ``(B,)`` column of each row's positive.
        mask: optional ``(B, C)`` bool, False = not a candidate (e.g. the anchor itself).
        tau, beta, eps: see :func:`fit_link_selection`.

    Raises:
        ValueError: shapes, a target out of range, a masked-out positive, rows with
            different numbers of valid candidates (``docs/method.md``, "Notation"), NaN or
            out-of-range similarities.
    """
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    s = as_numpy(sim, "sim")
    if s.ndim != 2:
        raise ValueError(f"sim must be (B, C), got shape {s.shape}")
    B, C = s.shape
    if B == 0 or C < 2:
        raise ValueError(f"sim of shape {s.shape} has no anchors or fewer than 2 columns")
    t = as_numpy(targets, "targets")
    if t.shape != (B,):
        raise ValueError(f"targets must have shape ({B},) to match sim {s.shape}, got {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        if not np.all(np.equal(np.mod(t, 1), 0)):
            raise ValueError("targets must be integer column indices")
        t = t.astype(np.int64)
    t = t.astype(np.int64, copy=False)
    bad = int(np.count_nonzero((t < 0) | (t >= C)))
    if bad:
        raise ValueError(f"{bad} target(s) outside [0, {C}) (sim has {C} columns)")
    rows = np.arange(B)
    if mask is not None:
        m = as_numpy(mask, "mask")
        if m.shape != s.shape:
            raise ValueError(f"mask must have the shape of sim {s.shape}, got {m.shape}")
        m = m.astype(bool, copy=False)
        lost = np.flatnonzero(~m[rows, t])
        if lost.size:
            raise ValueError(f"{lost.size} row(s) have their positive masked out (first: "
                             f"{lost[:5].tolist()}); the positive must be a valid candidate")
        counts = m.sum(axis=1)
        if counts.min() != counts.max():
            vals, freq = np.unique(counts, return_counts=True)
            raise ValueError("every row must have the same number of valid candidates"
                             f"; found counts {dict(zip(vals.tolist(), freq.tolist()))}")
        if counts[0] < 2:
            raise ValueError("each row needs the positive and at least one valid negative")
        if counts[0] < C:
            # target column after compaction: t minus the masked columns left of it
            r_off, c_off = np.nonzero(~m)
            left = c_off < t[r_off]
            pos_t = t - np.bincount(r_off[left], minlength=B)
            s = s[m].reshape(B, int(counts[0]))
            t = pos_t
    if s.dtype != np.float64:
        s = s.astype(np.float32, copy=False)
    s = check_similarities(s, "sim (valid entries)")
    K1 = s.shape[1]
    a = np.empty((B, K1), np.float32)
    b = np.empty((B, K1), np.float32)
    step = max(1, _CHUNK_ELEMS // K1)
    for i in range(0, B, step):
        blk = s[i:i + step].astype(np.float64)
        a[i:i + step] = blk / tau
        b[i:i + step] = -beta * np.log1p(-np.minimum(blk, 1.0 - eps))
    s_t = s[rows, t]
    top1 = float(np.mean(s_t >= s.max(axis=1)))
    return LinkData(a=a, b=b, a_t=a[rows, t].astype(np.float64), b_t=b[rows, t].astype(np.float64),
                    s=s, t=t, tau=float(tau), beta=float(beta), eps=float(eps), top1=top1)


# ------------------------------------------------------------------ passes over the data

class _Evaluator:
    """Log-likelihood, gradient and Hessian in ``theta = (alpha, gamma)``, chunked."""

    def __init__(self, data: LinkData):
        self.d = data
        K1 = data.n_candidates
        self.step = max(1, _CHUNK_ELEMS // K1)
        self.z = np.empty((self.step, K1), np.float32)
        self.e = np.empty((self.step, K1), np.float32)
        self.w = np.empty((self.step, K1), np.float32)
        self.n_passes = 0

    def full(self, alpha: float, gamma: float) -> tuple[float, np.ndarray, np.ndarray]:
        """``(l, grad (2,), hess (2, 2))`` at ``(alpha, gamma)`` (float32 sums)."""
        self.n_passes += 1
        d = self.d
        ll = 0.0
        g = np.zeros(2)
        H = np.zeros((2, 2))
        a32, g32 = np.float32(alpha), np.float32(gamma)
        for i in range(0, d.n_anchors, self.step):
            A, Bm = d.a[i:i + self.step], d.b[i:i + self.step]
            r = A.shape[0]
            z, e, w = self.z[:r], self.e[:r], self.w[:r]
            np.multiply(A, a32, out=z)
            np.multiply(Bm, g32, out=w)
            z += w
            mx = z.max(axis=1, keepdims=True)
            np.subtract(z, mx, out=e)
            np.exp(e, out=e)
            s0 = e.sum(axis=1).astype(np.float64)
            ea = np.einsum("ij,ij->i", e, A) / s0
            eb = np.einsum("ij,ij->i", e, Bm) / s0
            np.multiply(e, A, out=w)
            eaa = np.einsum("ij,ij->i", w, A) / s0
            eab = np.einsum("ij,ij->i", w, Bm) / s0
            np.multiply(e, Bm, out=w)
            ebb = np.einsum("ij,ij->i", w, Bm) / s0
            at, bt = d.a_t[i:i + r], d.b_t[i:i + r]
            # the positive's logit with the very float32 operations used for z above
            zt = d.a_t32[i:i + r] * a32 + d.b_t32[i:i + r] * g32 - mx[:, 0]
            ll += float(np.sum(zt.astype(np.float64) - np.log(s0)))
            g[0] += float(np.sum(at - ea))
            g[1] += float(np.sum(bt - eb))
            H[0, 0] -= float(np.sum(eaa - ea * ea))
            H[0, 1] -= float(np.sum(eab - ea * eb))
            H[1, 1] -= float(np.sum(ebb - eb * eb))
        H[1, 0] = H[0, 1]
        return ll, g, H

    def ray(self, c: float, lam: float) -> tuple[float, float, float]:
        """``(l, dl/dc, d2l/dc2)`` at ``(c, lam)``: logits ``c * x``, ``x = (1-lam) a + lam b``."""
        self.n_passes += 1
        d = self.d
        ll = dl = d2 = 0.0
        ca, cb = np.float32(c * (1.0 - lam)), np.float32(c * lam)
        for i in range(0, d.n_anchors, self.step):
            A, Bm = d.a[i:i + self.step], d.b[i:i + self.step]
            r = A.shape[0]
            z, e, w = self.z[:r], self.e[:r], self.w[:r]
            np.multiply(A, ca, out=z)
            np.multiply(Bm, cb, out=w)
            z += w
            mx = z.max(axis=1, keepdims=True)
            z -= mx                                   # z - max <= 0
            np.exp(z, out=e)
            s0 = e.sum(axis=1).astype(np.float64)
            m1 = np.einsum("ij,ij->i", e, z) / s0
            np.multiply(e, z, out=w)
            m2 = np.einsum("ij,ij->i", w, z) / s0
            # the positive's logit minus the row max, with the float32 operations used for z
            zt = (d.a_t32[i:i + r] * ca + d.b_t32[i:i + r] * cb - mx[:, 0]).astype(np.float64)
            ll += float(np.sum(zt - np.log(s0)))
            dl += float(np.sum(zt - m1)) / c          # sum (x_t - E_p[x])
            d2 -= float(np.sum(np.maximum(m2 - m1 * m1, 0.0))) / (c * c)
        return ll, dl, d2


def _loglik64(data: LinkData, alpha: float, gamma: float) -> float:
    """Log-likelihood at ``(alpha, gamma)`` in float64 from the similarities themselves
    (for the reported numbers)."""
    ll = 0.0
    step = max(1, _CHUNK_ELEMS // data.n_candidates)
    for i in range(0, data.n_anchors, step):
        s = data.s[i:i + step].astype(np.float64)
        z = (alpha / data.tau) * s - (gamma * data.beta) * np.log1p(-np.minimum(s, 1.0 - data.eps))
        mx = z.max(axis=1)
        lse = mx + np.log(np.exp(z - mx[:, None]).sum(axis=1))
        ll += float(np.sum(z[np.arange(z.shape[0]), data.t[i:i + step]] - lse))
    return ll


def link_loglik(sim, targets, mask=None, *, c: float, lam: float, tau: float = 0.5,
                beta: float = 1.0, eps: float = 1e-6) -> float:
    """Log-likelihood of the tested link family at ``(c, lam)``, summed over anchors (float64)."""
    data = prepare_link_data(sim, targets, mask, tau=tau, beta=beta, eps=eps)
    return _loglik64(data, c * (1.0 - lam), c * lam)



def _row_scores(data: LinkData, alpha: float, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-row score vector ``(a_t - E_p[a], b_t - E_p[b])`` at ``(alpha, gamma)`` (float64)."""
    ua = np.empty(data.n_anchors)
    ub = np.empty(data.n_anchors)
    step = max(1, _CHUNK_ELEMS // data.n_candidates)
    for i in range(0, data.n_anchors, step):
        s = data.s[i:i + step].astype(np.float64)
        a = s / data.tau
        b = -data.beta * np.log1p(-np.minimum(s, 1.0 - data.eps))
        z = alpha * a + gamma * b
        e = np.exp(z - z.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        r = np.arange(s.shape[0])
        t = data.t[i:i + step]
        ua[i:i + step] = a[r, t] - (p * a).sum(axis=1)
        ub[i:i + step] = b[r, t] - (p * b).sum(axis=1)
    return ua, ub


def _cluster_sums(x: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Sums of ``x`` (rows, or rows x k) within each cluster id of ``pairs``."""
    _, inv = np.unique(pairs, return_inverse=True)
    n = int(inv.max()) + 1
    if x.ndim == 1:
        return np.bincount(inv, weights=x, minlength=n)
    return np.stack([np.bincount(inv, weights=x[:, j], minlength=n) for j in range(x.shape[1])],
                    axis=1)


def _check_pairs(pairs, n_rows: int) -> np.ndarray:
    p = np.asarray(pairs).reshape(-1)
    if p.shape != (n_rows,):
        raise ValueError(f"pairs must give one cluster id per row ({n_rows}), got shape "
                         f"{np.asarray(pairs).shape}")
    if not np.issubdtype(p.dtype, np.integer):
        raise ValueError(f"pairs must be integer cluster ids, got dtype {p.dtype}")
    return p


def _score_test(data: LinkData, c_soft: float, pairs: np.ndarray | None
                ) -> dict[str, float | None]:
    """One-sided score test of ``gamma = 0`` at the softmax fit ``(c_soft, 0)``: the
    efficient score ``s_i = u_b,i - (I_ab / I_aa) u_a,i`` summed, with the model-based
    variance (rows independent) and, given ``pairs``, the cluster-robust one."""
    ua, ub = _row_scores(data, c_soft, 0.0)
    ev = _Evaluator(data)
    _, _, H = ev.full(c_soft, 0.0)
    i_aa, i_ab, i_bb = -H[0, 0], -H[0, 1], -H[1, 1]
    eff = ub - (i_ab / i_aa) * ua if i_aa > 0 else ub
    U = float(eff.sum())
    v_model = i_bb - i_ab * i_ab / i_aa if i_aa > 0 else i_bb
    out: dict[str, float | None] = {"score": U, "z_iid": None, "p_value_score_iid": None,
                                    "z_pairs": None, "p_value_pairs": None, "n_pairs": None}
    if v_model > 0:
        z = U / math.sqrt(v_model)
        out["z_iid"], out["p_value_score_iid"] = z, float(stats.norm.sf(z))
    if pairs is not None:
        sums = _cluster_sums(eff, pairs)
        G = sums.size
        v_rob = float(np.sum(sums * sums)) * G / max(G - 1, 1)   # small-sample factor
        out["n_pairs"] = G
        if v_rob > 0:
            z = U / math.sqrt(v_rob)
            out["z_pairs"], out["p_value_pairs"] = z, float(stats.norm.sf(z))
    return out


def pair_score_test(sim, targets, mask=None, *, pairs, tau: float = 0.5, beta: float = 1.0,
                    eps: float = 1e-6) -> dict[str, float | None]:
    """The pair-robust score test of ``lambda = 0`` alone (no full fit): softmax fit, then
    :func:`fit_link_selection`'s ``p_value_pairs``. Returns ``score, z_iid,
    p_value_score_iid, z_pairs, p_value_pairs, n_pairs, c_softmax``."""
    data = prepare_link_data(sim, targets, mask, tau=tau, beta=beta, eps=eps)
    p = _check_pairs(pairs, data.n_anchors)
    c, _, _ = _newton_ray(_Evaluator(data), 0.0, 1.0)
    out = _score_test(data, c, p)
    out["c_softmax"] = c
    return out


def simclr_pair_ids(targets, n_cols: int) -> np.ndarray | None:
    """Cluster ids that put rows ``i`` and ``i + N`` of each stacked SimCLR batch together
    (``2N = n_cols`` rows per batch, positive of row ``i`` at ``(i + N) mod 2N``); None when
    ``targets`` do not follow that layout."""
    t = np.asarray(targets).reshape(-1)
    if n_cols < 2 or n_cols % 2 or t.size % n_cols:
        return None
    n = n_cols // 2
    r = np.arange(t.size)
    i = r % n_cols
    if not np.array_equal(t, (i + n) % n_cols):
        return None
    return (r // n_cols) * n + i % n


# ----------------------------------------------------------------------------- fitting

def _noise(ll: float) -> float:
    """Tolerance for a log-likelihood decrease in a line search: float32 passes are exact
    to about 1e-8 relative (plus rounding of the logits), so smaller drops are noise."""
    return 1e-3 + 1e-8 * abs(ll)


def _newton_ray(ev: _Evaluator, lam: float, c0: float, tol: float = 1e-2,
                max_iter: int = 60) -> tuple[float, float, bool]:
    """max over ``c > 0`` along the ray ``lam`` (concave in ``c``); returns ``(c, l, converged)``.

    Stops once the Newton decrement ``dec = dl^2 / |d2l|`` is below ``tol`` and returns the
    quadratic-model maximum ``(c + step, l + dec / 2)``, exact to ``O(step^3)`` (a warm
    start from a neighbouring ``lambda`` usually needs one pass).
    """
    c = max(c0, 1e-8)
    ll, dl, d2 = ev.ray(c, lam)
    for _ in range(max_iter):
        if not d2 < 0:   # flat direction (all candidates tie): no information about c
            return c, ll, False
        step = -dl / d2
        dec = dl * step                        # l_max - l ~ dec / 2
        if dec < tol and c + step > 0:
            return c + step, ll + 0.5 * dec, True
        c_new = c + step
        if c_new <= 0:
            c_new = 0.5 * c
        if c_new > _C_MAX:
            return c_new, ll, False
        while True:
            ll_new, dl_new, d2_new = ev.ray(c_new, lam)
            if ll_new >= ll - _noise(ll) or abs(c_new - c) < 1e-12 * c:
                break
            c_new = 0.5 * (c + c_new)          # backtrack (a bad step)
        c, ll, dl, d2 = c_new, ll_new, dl_new, d2_new
    return c, ll, False


def _newton_2d(ev: _Evaluator, theta0: np.ndarray, tol: float = 1e-2,
               max_iter: int = 60) -> tuple[np.ndarray, float, np.ndarray, bool]:
    """Unconstrained Newton on the concave log-likelihood in ``theta = (alpha, gamma)``;
    finishes with the quadratic-model step once the decrement is below ``tol``."""
    th = np.asarray(theta0, dtype=np.float64)
    ll, g, H = ev.full(*th)
    for _ in range(max_iter):
        try:
            step = -np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            return th, ll, H, False
        dec = float(g @ step)
        if dec < 0:                            # H not negative definite: degenerate data
            return th, ll, H, False
        if dec < tol:
            return th + step, ll + 0.5 * dec, H, True
        t = 1.0
        while True:
            new = th + t * step
            if np.abs(new).max() > _C_MAX:
                return new, ll, H, False
            ll_new, g_new, H_new = ev.full(*new)
            if ll_new >= ll - _noise(ll) or t < 1e-6:
                break
            t *= 0.5
        th, ll, g, H = new, ll_new, g_new, H_new
    return th, ll, H, False


def _root_side(f, x0: float, guess: float, bound: float) -> float:
    """Root of increasing-away-from-``x0`` ``f`` between ``x0`` (``f < 0``) and ``bound``,
    bracketed from a first ``guess``; returns ``bound`` when ``f(bound) <= 0``."""
    sign = 1.0 if bound > x0 else -1.0
    inner = x0
    x = min(max(guess, min(x0, bound)), max(x0, bound))
    if x == x0:
        x = x0 + sign * 1e-3
    while True:
        if sign * (x - bound) >= 0:
            x = bound
        fx = f(x)
        if fx > 0:
            break
        if x == bound:
            return bound
        inner, x = x, x0 + 2.0 * (x - x0)
    lo, hi = sorted((inner, x))
    return float(optimize.brentq(f, lo, hi, xtol=1e-5))


@dataclass
class LinkFit:
    """Result of :func:`fit_link_selection`.

    Attributes:
        lam, c: MLE over ``lambda in [0, 1]``, ``c > 0``.
        lam_ci: profile-likelihood interval for ``lambda`` at ``ci_level``.
        loglik: maximised log-likelihood (float64).
        loglik_softmax, c_softmax: the ``lambda = 0`` fit (softmax link, temperature
            ``tau / c_softmax``).
        lr_stat: ``2 (loglik - loglik_softmax)``.
        p_value: under the boundary null ``0.5 chi2_0 + 0.5 chi2_1``.
        se_lam: Wald standard error of ``lambda`` from the observed information (None on a
            boundary).
        loglik_uniform: log-likelihood of a uniform choice (``c = 0``), a reference.
        top1: fraction of anchors whose positive is the most similar candidate.
        profile: ``{"lam": [...], "loglik": [...]}`` points of the profile likelihood.
        p_value_pairs: one-sided score test of ``lambda = 0`` with a pair-robust variance
            (None without ``pairs``); ``p_value_score_iid`` the same test treating rows as
            independent; ``n_pairs`` the number of clusters.
        lam_ci_pairs, se_lam_pairs: Wald interval of ``lambda`` (clipped to [0, 1]) from the
            pair-robust sandwich variance at the fit (None without ``pairs``).
    """

    lam: float
    c: float
    lam_ci: tuple[float, float]
    loglik: float
    loglik_softmax: float
    c_softmax: float
    lr_stat: float
    p_value: float
    n_anchors: int
    n_candidates: int
    tau: float
    beta: float
    eps: float
    ci_level: float = 0.95
    se_lam: float | None = None
    loglik_uniform: float | None = None
    top1: float | None = None
    converged: bool = True
    n_passes: int = 0
    notes: list[str] = field(default_factory=list)
    profile: dict[str, list[float]] = field(default_factory=dict)
    p_value_pairs: float | None = None
    p_value_score_iid: float | None = None
    z_pairs: float | None = None
    n_pairs: int | None = None
    lam_ci_pairs: tuple[float, float] | None = None
    se_lam_pairs: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["lam_ci"] = list(self.lam_ci)
        d["lam_ci_pairs"] = None if self.lam_ci_pairs is None else list(self.lam_ci_pairs)
        d["temperature_softmax"] = self.tau / self.c_softmax if self.c_softmax > 0 else None
        return d


def fit_link_selection(sim, targets, mask=None, tau: float = 0.5, beta: float = 1.0, *,
                       eps: float = 1e-6, ci_level: float = 0.95,
                       profile_points: int = 7, pairs=None) -> LinkFit:
    """Maximum-likelihood fit of the softmax / Weibull-shortfall link family.

    The artifact's link-selection test (``docs/method.md``, "Link selection"; the paper
    reports ``lambda_hat`` of about 0.33-0.50): each anchor's observed positive is the
    winner of a choice among its candidates with probabilities
    ``softmax_j(c * [(1 - lambda) s_j / tau + lambda (-beta log(1 - s_j))])``; ``c > 0``
    and ``lambda`` in ``[0, 1]`` are fitted, and ``lambda = 0`` (a pure softmax with
    temperature ``tau / c``) is tested by a likelihood ratio with the boundary null
    ``0.5 chi2_0 + 0.5 chi2_1``.

    Args:
        sim: ``(B, C)`` cosine similarities, row = anchor, column = candidate (numpy or
            torch, any device; float32 is enough).
        targets: ``(B,)`` column of each row's positive (the observed winner).
        mask: optional ``(B, C)`` bool of valid candidates (False = excluded, e.g. the
            anchor itself in a SimCLR batch); every row must keep the same number.
            Default ``None``.
        tau: the encoder's training temperature, ``> 0``. Default ``0.5``.
        beta: fixed shortfall exponent, ``> 0``. Default ``1.0`` (as in the loss).
        eps: ``s`` is clipped at ``1 - eps`` inside ``log(1 - s)``. Default ``1e-6``.
        ci_level: level of the profile-likelihood interval for ``lambda``, in ``(0, 1)``.
            Default ``0.95``.
        profile_points: extra profile evaluations on a grid around the interval (for the
            figure; 0 = only those the interval search needs). Default ``7``.
        pairs: optional ``(B,)`` integer cluster id per row (rows sharing a positive pair
            share an id; :func:`simclr_pair_ids`): adds the pair-robust test and interval.
            Default ``None``.

    Returns:
        :class:`LinkFit`: ``lam``, ``c``, ``lam_ci``, ``loglik``, ``loglik_softmax``,
        ``lr_stat``, ``p_value`` and the rest of its fields.

    Raises:
        ValueError: see :func:`prepare_link_data`; a ``ci_level`` outside ``(0, 1)``.
        Fewer than 100 anchors, or separable data, give a warning.

    Example:
        >>> import numpy as np
        >>> from weince.evt import fit_link_selection
        >>> rng = np.random.default_rng(0)
        >>> s = rng.uniform(-0.5, 0.95, size=(2000, 32))
        >>> logits = 0.5 * s / 0.5 + 0.5 * -np.log1p(-s)     # lambda = 0.5, c = 1
        >>> winner = np.argmax(logits + rng.gumbel(size=s.shape), axis=1)
        >>> fit = fit_link_selection(s, winner, tau=0.5)
        >>> fit.lam_ci[0] < 0.5 < fit.lam_ci[1], fit.p_value < 1e-6
        (True, True)
    """
    data = prepare_link_data(sim, targets, mask, tau=tau, beta=beta, eps=eps)
    pairs = None if pairs is None else _check_pairs(pairs, data.n_anchors)
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be in (0, 1), got {ci_level}")
    if data.n_anchors < 100:
        warnings.warn(f"only {data.n_anchors} anchors: the link-selection fit is unreliable",
                      stacklevel=2)
    ev = _Evaluator(data)
    notes: list[str] = []
    if data.top1 >= 1.0:
        msg = ("the positive is the most similar candidate in every row (separable data): the "
               "likelihood increases without bound in c, so c_hat and lambda_hat are not "
               "identified; use more (or harder) batches")
        warnings.warn(msg, stacklevel=2)
        notes.append(msg)
    lp = _ProfileLik(ev)
    c_soft, c_hat, lam_hat, ll_hat, se_lam = _maximise(ev, lp, notes)
    converged = lp.converged
    if data.top1 >= 1.0:
        converged = False
    elif not converged or c_hat >= _C_MAX:
        notes.append(f"c_hat is diverging (>= {_C_MAX:g}) or did not converge: the positive is "
                     "(nearly) always the top candidate, so the likelihood has no finite maximum")
        converged = False
    lo, hi, profile = _profile_interval(lp, lam_hat, ll_hat, se_lam, ci_level, profile_points)
    converged = converged and lp.converged   # a profile search of the interval may fail too

    # the reported likelihoods in float64
    ll64 = _loglik64(data, c_hat * (1 - lam_hat), c_hat * lam_hat)
    ll0_64 = _loglik64(data, c_soft, 0.0)
    if ll64 < ll0_64:          # within float32 noise of the boundary
        ll64 = ll0_64
    lr = 2.0 * (ll64 - ll0_64)
    p = 1.0 if lr <= 0 else 0.5 * float(stats.chi2.sf(lr, 1))
    st = _score_test(data, c_soft, pairs)
    ci_pairs, se_pairs = _pairs_interval(data, c_hat, lam_hat, pairs, ci_level)
    return LinkFit(lam=float(lam_hat), c=float(c_hat), lam_ci=(float(lo), float(hi)),
                   loglik=ll64, loglik_softmax=ll0_64, c_softmax=float(c_soft), lr_stat=lr,
                   p_value=p, n_anchors=data.n_anchors, n_candidates=data.n_candidates,
                   tau=data.tau, beta=data.beta, eps=data.eps, ci_level=ci_level,
                   se_lam=se_lam, loglik_uniform=-data.n_anchors * math.log(data.n_candidates),
                   top1=data.top1, converged=converged, n_passes=ev.n_passes, notes=notes,
                   profile=profile, p_value_pairs=st["p_value_pairs"],
                   p_value_score_iid=st["p_value_score_iid"], z_pairs=st["z_pairs"],
                   n_pairs=None if st["n_pairs"] is None else int(st["n_pairs"]),
                   lam_ci_pairs=ci_pairs, se_lam_pairs=se_pairs)


def _pairs_interval(data, c_hat: float, lam_hat: float, pairs, ci_level: float
                    ) -> tuple[tuple[float, float] | None, float | None]:
    """The pair-robust (sandwich) Wald interval for ``lambda`` and its standard error;
    ``(None, None)`` without pair ids, ``(None, None)`` too where the sandwich is singular."""
    if pairs is None:
        return None, None
    se = _sandwich_se_lam(data, c_hat, lam_hat, pairs)
    if se is None:
        return None, None
    z = float(stats.norm.ppf(0.5 + ci_level / 2))
    return (max(0.0, lam_hat - z * se), min(1.0, lam_hat + z * se)), se


class _ProfileLik:
    """The profile log-likelihood ``l_p(lambda)`` (maximised over ``c`` by Newton along the
    ray), memoised: ``prof[lam] = (c_hat(lam), l_p)`` in float32 passes. ``converged``
    turns False once a Newton search fails."""

    def __init__(self, ev: _Evaluator) -> None:
        self.ev = ev
        self.prof: dict[float, tuple[float, float]] = {}
        self.converged = True

    def __call__(self, lam: float, tol: float = 1e-2) -> float:
        prof = self.prof
        lam = float(min(max(lam, 0.0), 1.0))
        if lam not in prof:
            # warm start: c_hat(lambda) linearly from the two nearest solved lambdas
            near = sorted(prof, key=lambda x: abs(x - lam))[:2]
            if len(near) == 2 and near[0] != near[1]:
                (l1, l2), (c1, c2) = near, (prof[near[0]][0], prof[near[1]][0])
                c0 = c1 + (c2 - c1) * (lam - l1) / (l2 - l1)
                if not c0 > 0:
                    c0 = c1
            else:
                c0 = prof[near[0]][0] if near else 1.0
            c, ll, ok = _newton_ray(self.ev, lam, c0, tol=tol)
            if not ok:
                self.converged = False
            prof[lam] = (c, ll)
        return prof[lam][1]


def _maximise(ev: _Evaluator, lp: _ProfileLik, notes: list[str]
              ) -> tuple[float, float, float, float, float | None]:
    """The softmax fit and the maximum likelihood in ``(c, lambda)``: ``(c_softmax, c_hat,
    lam_hat, loglik_hat, se_lam)`` (``se_lam``: Wald, None on an edge)."""
    prof = lp.prof
    # softmax fit (lambda = 0): 1-D Newton in c from c = 1 (the training temperature)
    lp(0.0)
    c_soft = prof[0.0][0]
    # unconstrained Newton in (alpha, gamma), started at the softmax fit
    th, ll_un, H, ok = _newton_2d(ev, np.array([c_soft, 0.05 * c_soft]))
    se_lam = None
    if ok and th[0] >= 0 and th[1] >= 0 and th.sum() > 0:
        alpha, gamma = float(th[0]), float(th[1])
        c_hat, lam_hat, ll_hat = alpha + gamma, gamma / (alpha + gamma), ll_un
        prof[lam_hat] = (c_hat, ll_hat)
        # Wald s.e. of lam = gamma / (alpha + gamma) by the delta method
        try:
            cov = np.linalg.inv(-H)
            grad = np.array([-gamma, alpha]) / (alpha + gamma) ** 2
            se_lam = float(math.sqrt(max(float(grad @ cov @ grad), 0.0)))
        except np.linalg.LinAlgError:
            pass
    else:
        # the concave maximum lies outside the quadrant, so the constrained one is on an
        # edge (lambda = 0 or 1); if Newton failed, maximise the profile over [0, 1] instead
        lp(1.0)
        if not ok:
            notes.append("the Newton search in (alpha, gamma) did not converge; lambda_hat "
                         "maximises the profile likelihood over [0, 1] (bounded Brent)")
            optimize.minimize_scalar(lambda x: -lp(x), bounds=(0.0, 1.0), method="bounded",
                                     options={"xatol": 1e-4})
        lam_hat = max(prof, key=lambda x: prof[x][1])
        c_hat, ll_hat = prof[lam_hat]
    return c_soft, c_hat, lam_hat, ll_hat, se_lam


def _profile_interval(lp: _ProfileLik, lam_hat: float, ll_hat: float, se_lam: float | None,
                      ci_level: float, profile_points: int
                      ) -> tuple[float, float, dict[str, Any]]:
    """The profile-likelihood interval of ``lambda`` and the profile curve (for the
    figure): ``(lo, hi, profile)``."""
    # profile interval: signed root deviance is near-linear in lambda -> brentq is quick
    crit = float(stats.chi2.ppf(ci_level, 1))

    def f(lam: float) -> float:
        return math.sqrt(max(2.0 * (ll_hat - lp(lam)), 0.0)) - math.sqrt(crit)

    half = 1.96 * se_lam if se_lam else 0.05
    lo = 0.0 if lam_hat <= 0 else _root_side(f, lam_hat, lam_hat - half, 0.0)
    hi = 1.0 if lam_hat >= 1 else _root_side(f, lam_hat, lam_hat + half, 1.0)
    if profile_points > 0:
        w = max(hi - lo, 0.02)
        for x in np.linspace(max(0.0, lo - w), min(1.0, hi + w), profile_points):
            lp(float(x), tol=0.2)          # plotting accuracy: |error| << 0.01
    prof = lp.prof
    lams = sorted(prof)
    profile = {"lam": lams, "loglik": [prof[x][1] for x in lams],
               "c": [prof[x][0] for x in lams], "loglik_max": ll_hat}
    return lo, hi, profile


def _sandwich_se_lam(data: LinkData, c: float, lam: float, pairs: np.ndarray) -> float | None:
    """Pair-robust standard error of ``lambda = gamma / (alpha + gamma)`` at the fit:
    ``H^-1 M H^-1`` with ``M`` the outer products of the per-pair score sums."""
    if not c > 0:
        return None
    alpha, gamma = c * (1.0 - lam), c * lam
    ua, ub = _row_scores(data, alpha, gamma)
    _, _, H = _Evaluator(data).full(alpha, gamma)
    sums = _cluster_sums(np.stack([ua, ub], axis=1), pairs)
    G = sums.shape[0]
    M = sums.T @ sums * G / max(G - 1, 1)
    try:
        Hi = np.linalg.inv(H)
    except np.linalg.LinAlgError:
        return None
    cov = Hi @ M @ Hi
    grad = np.array([-gamma, alpha]) / (alpha + gamma) ** 2
    v = float(grad @ cov @ grad)
    return math.sqrt(v) if v > 0 and math.isfinite(v) else None
