"""WEINCE: the per-anchor blend of softmax logits and a Weibull endpoint-shortfall logit.

Paper: Erol, Evren, Ozel, Morgan, Ryu, Zheng, *When Softmax Fails at the Top: Extreme
Value Corrections for InfoNCE*, ICML 2026 (arXiv 2606.00262). The definitions follow the
behaviour of the authors' official implementation, with the paper's printed variant as an
option (``docs/method.md``, "WEINCE"): for row ``i`` with blend weight ``lambda_i``
(online batch statistics, no gradient, no trainable parameter) the logit of candidate
``j`` is

    l_ij = (1 - lambda_i) * s_ij / tau + lambda_i * (-beta * log(1 - min(s_ij, 1 - eps)))

and the loss is the mean cross-entropy of ``l_i`` with the positive as target.
``lambda = 0`` is InfoNCE exactly.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from weince.losses._common import (PIECE, cached, check_batch, check_reduction,
                                   columns_of_largest, compiled_cpu_selection, cpu_selection,
                                   custom_bwd, custom_fwd, inverse_tau, invert, largest_per_row,
                                   loss_tau, negative_values, no_autocast, reduced_cross_entropy,
                                   upcast)

__all__ = ["weince", "tail_size", "weince_statistics", "GATES", "BETAS", "ShortTailWarning"]

GATES = ("both", "rho", "aic")
BETAS = ("one", "anchor")


def tail_size(K: int, tail_frac: float = 0.10, min_tail: int = 32) -> int:
    """The number ``k`` of hardest negatives in an anchor's tail fit (``docs/method.md``,
    "Per-anchor statistics"): ``max(min_tail, round(tail_frac * K))``, then at most ``K``,
    at least 10, at most ``K``.

    Example:
        >>> from weince.losses import tail_size
        >>> tail_size(510), tail_size(5000), tail_size(14)
        (51, 500, 14)
    """
    k = max(int(min_tail), int(round(tail_frac * K)))
    k = min(k, K)
    k = max(10, k)
    return min(k, K)


class ShortTailWarning(UserWarning):
    """A batch gives each anchor fewer negatives ``K`` than the configured ``min_tail``:
    the tail fit runs on all ``K`` of them (or, below 3, not at all: ``lambda = 0``).
    Issued once per process; silence it with
    ``warnings.simplefilter("ignore", ShortTailWarning)``."""


_SHORT_TAIL_WARNED = False


def _warn_short_tail(K: int, k: int, min_tail: int) -> None:
    """Warn once per process that the tail is shorter than ``min_tail`` (Python ints only:
    no device work; nothing inside a compiled graph)."""
    global _SHORT_TAIL_WARNED
    if _SHORT_TAIL_WARNED or torch.compiler.is_compiling():
        return
    _SHORT_TAIL_WARNED = True
    what = (f"the tail fit uses all k={k} of them" if k - max(1, k // 20) >= 2 else
            "that is too few for a tail fit, so lambda = 0 (InfoNCE) for every anchor")
    warnings.warn(f"WEINCE: each anchor has K={K} negatives, fewer than min_tail={min_tail}; "
                  f"{what}. The tail statistics need larger batches (K = 2N - 2 for the "
                  f"'simclr' layout, N - 1 for 'pairs'; see docs/using-the-loss.md) or a "
                  f"smaller min_tail. Shown once per process.", ShortTailWarning, stacklevel=4)


def check_weince_args(tau, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps, beta,
                      gate, lam, beta_min, beta_max) -> None:
    loss_tau(tau)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q (quantile of rho that sets the pivot rho0) must lie in [0, 1], "
                         f"got {q!r}")
    if not tail_frac > 0:
        raise ValueError(f"tail_frac must be > 0, got {tail_frac!r}")
    if int(min_tail) < 1:
        raise ValueError(f"min_tail must be >= 1, got {min_tail!r}")
    if not 0 < eps < 0.5:
        raise ValueError(f"eps must lie in (0, 0.5), got {eps!r}")
    if kappa_rho < 0 or kappa_aic < 0:
        raise ValueError(f"kappa_rho and kappa_aic must be >= 0, got {kappa_rho!r}, {kappa_aic!r}")
    if not math.isfinite(margin):
        raise ValueError(f"margin must be finite, got {margin!r}")
    if beta not in BETAS:
        raise ValueError(f"beta must be one of {BETAS} ('one': the official code; 'anchor': the "
                         f"paper's per-anchor Weibull slope), got {beta!r}")
    if gate not in GATES:
        raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
    if lam is not None and not 0.0 <= float(lam) <= 1.0:
        raise ValueError(f"lam (forced blend weight) must lie in [0, 1] or be None, got {lam!r}")
    if not 0 < beta_min <= beta_max:
        raise ValueError(f"need 0 < beta_min <= beta_max, got {beta_min!r}, {beta_max!r}")


_DESIGNS: dict = {}


def _design(k: int, b: int, device: torch.device):
    """Constants of the two tail fits on the points ``m = b+1..k`` (``n = k - b``), cached:
    ``W`` ``(n, 2)``: the centred responses ``log F_m`` and ``-log(-log F_m)`` (the Gumbel
    column negated, so that both fits are penalised where their column of ``xc @ W`` is
    ``<= 0``), each divided by ``n``; ``syy`` ``(2,)``: their sums of squares; ``wd`` ``(2,)``:
    ``(-n, n)``, so that ``log(SSE) @ wd = n log(SSE_G / SSE_W)``."""
    def build():  # plain Python, so that a compiled graph holds them as constants
        n = k - b
        cols = []
        for f in (lambda F: math.log(F), lambda F: -math.log(-math.log(F))):
            y = [f(m / (k + 1)) for m in range(b + 1, k + 1)]
            mu = sum(y) / n
            cols.append([v - mu for v in y])
        W = torch.tensor([[cols[0][i] / n, cols[1][i] / n] for i in range(n)],
                         dtype=torch.float64, device=device)
        syy = torch.tensor([sum(v * v for v in c) for c in cols], dtype=torch.float64,
                           device=device)
        wd = torch.tensor([-float(n), float(n)], dtype=torch.float64, device=device)
        return W, syy, wd
    return cached(_DESIGNS, (k, b, str(device)), build)


def _top_negatives_cpu(s: torch.Tensor, targets: torch.Tensor | None, invalid: torch.Tensor | None,
                       k: int, with_indices: bool = False, half: int | None = None):
    """The ``k`` largest negative similarities of each row, largest first: the same numbers as
    ``torch.topk(negative_values(s, targets, invalid), k).values``, several times faster on
    CPU. Rows go through a small reused buffer in blocks (copy, ``-inf`` at the positive and
    the invalid columns, introselect by ``np.partition``), so no full-size copy of ``s`` is
    made; only the ``k`` survivors of each row are sorted. ``with_indices``: also their
    columns, as ``(values, indices)`` (ties may come in another order than ``torch.topk``'s).
    ``half``: the SimCLR layout with ``N = half`` (positive ``(i + N) mod 2N``, the diagonal
    invalid), known without reading ``targets``/``invalid``."""
    a = np.from_dlpack(s.data)   # a view, without the dispatcher calls of .numpy()
    B, C = a.shape
    if half is None:
        assert targets is not None, "targets are needed without half"
        t = targets.cpu().numpy()
        inv = None if invalid is None else invalid.numpy()
    else:
        t = (np.arange(B) + half) % B
        inv = None
    rows = max(1, min(B, (1 << 18) // C))  # blocks of about 1 MiB stay in cache
    buf = np.empty((rows, C), dtype=a.dtype)
    out = np.empty((B, k), dtype=a.dtype)
    idx = np.empty((B, k) if with_indices else (0, k), dtype=np.int64)
    for r0 in range(0, B, rows):
        r1 = min(B, r0 + rows)
        blk = buf[: r1 - r0]
        np.copyto(blk, a[r0:r1])
        if inv is not None:
            np.copyto(blk, -np.inf, where=inv[r0:r1])
        if half is not None:
            blk[np.arange(r1 - r0), np.arange(r0, r1)] = -np.inf
        blk[np.arange(r1 - r0), t[r0:r1]] = -np.inf
        if with_indices:
            _top_with_columns(blk, k, out[r0:r1], idx[r0:r1])
        else:
            out[r0:r1] = largest_per_row(blk, k)
    return (torch.from_numpy(out), torch.from_numpy(idx)) if with_indices else torch.from_numpy(out)


def _top_with_columns(blk: np.ndarray, k: int, out: np.ndarray, idx: np.ndarray) -> None:
    """Each row's ``k`` largest entries of ``blk`` (largest first) into ``out``, their
    columns into ``idx``. Rows of at most ``PIECE`` entries (``k`` a quarter of them at
    most): distinct values have one
    order, found from the values (NumPy's fast short-row selection, where
    ``argpartition`` has none); longer rows, and a block with ties, take ``argpartition``
    and ``argsort``, whose order among equal values is theirs (kept so that every batch
    selects the columns it always did)."""
    C = blk.shape[1]
    if C <= PIECE and 4 * k <= C:
        out[:] = largest_per_row(blk.copy(), k)
        cols = columns_of_largest(blk, out)
        if cols is not None:
            idx[:] = cols
            return
    cols = np.argpartition(blk, C - k, axis=1)[:, C - k:]
    vals = np.take_along_axis(blk, cols, axis=1)
    order = np.argsort(vals, axis=1)[:, ::-1]
    out[:] = np.take_along_axis(vals, order, axis=1)
    idx[:] = np.take_along_axis(cols, order, axis=1)


@torch.library.custom_op("weince::top_negatives", mutates_args=())
def _top_negatives_op(sim: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None,
                      k: int, with_indices: bool, half: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_top_negatives_cpu` as an op a compiled graph calls (``half < 0``: none);
    without indices the second output is an empty ``(0, k)`` tensor."""
    out = _top_negatives_cpu(sim, targets, invalid, k, with_indices=with_indices,
                             half=None if half < 0 else half)
    if with_indices:
        return out
    return out, torch.empty((0, k), dtype=torch.long)


@_top_negatives_op.register_fake
def _(sim, targets, invalid, k, with_indices, half):
    rows = sim.shape[0] if with_indices else 0
    return sim.new_empty((sim.shape[0], k)), sim.new_empty((rows, k), dtype=torch.long)


def weince_statistics(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None, *,
                      q: float = 0.2, margin: float = 2.0, kappa_rho: float = 10.0,
                      kappa_aic: float = 1.0, tail_frac: float = 0.10, min_tail: int = 32,
                      eps: float = 1e-6, gate: str = "both", check: bool = True) -> dict:
    """WEINCE's per-anchor statistics of a batch, without the loss (no gradient).

    The same numbers as ``weince(..., return_stats=True)`` returns (``docs/method.md``,
    "Per-anchor statistics"); arguments and shapes as in :func:`weince`.

    Returns:
        A dict: ``(B,)`` float32 tensors ``lambda`` (blend weight in ``[0, 1]``), ``rho``
        (cap proximity ``1 - max negative``, at least ``eps``), ``daic`` (AIC of the Gumbel
        line minus AIC of the Weibull line) and ``beta_w`` (Weibull slope); the 0-d tensor
        ``rho0`` (the pivot); the ints ``k`` (tail size) and ``n`` (points in the fits),
        ``(B,)`` int64 tensors when the rows' numbers of negatives differ.

    Raises:
        ValueError: as :func:`weince`.

    Example:
        >>> import torch
        >>> from weince.losses import pair_similarities, weince_statistics
        >>> _ = torch.manual_seed(0)
        >>> sim, targets, mask = pair_similarities(torch.randn(64, 8), torch.randn(64, 8))
        >>> st = weince_statistics(sim, targets, mask)
        >>> st["lambda"].shape, st["k"], st["n"]
        (torch.Size([128]), 32, 31)
    """
    check_weince_args(0.5, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps, "one", gate,
                      None, 0.5, 16.0)
    K = check_batch(sim, targets, mask, sync=check, per_row=True)
    st = row_statistics(sim, targets, invert(mask), K, q=q, margin=margin, kappa_rho=kappa_rho,
                     kappa_aic=kappa_aic, tail_frac=tail_frac, min_tail=min_tail, eps=eps,
                     gate=gate)
    return public_stats(st)


def public_stats(st: dict) -> dict:
    """The documented statistics of an internal dict: float32 ``(B,)`` tensors ``lambda``,
    ``rho``, ``daic``, ``beta_w``; ``rho0``; ``k``, ``n`` (ints, or ``(B,)`` tensors)."""
    rho = st["d"][:, 0]
    rho0 = st.get("rho0")
    rho0 = rho.kthvalue(st["kq"] + 1).values if rho0 is None else rho0
    return {"lambda": st["lambda"].float(), "rho": rho.float(), "daic": st["daic"].float(),
            "beta_w": st["beta_w"].float(), "rho0": rho0.float(),
            "k": st["k"], "n": st["n"]}


def _shortfalls(top: torch.Tensor, eps: float, numpy: bool) -> torch.Tensor:
    """``max(1 - top, eps)`` in float64 (``(B, k)``, ascending): on the NumPy path in one
    conversion and one in-place pass (a float32 value is exact in float64, and the
    subtraction and the maximum round as torch's ``rsub`` and ``clamp_min`` do)."""
    if numpy:
        a = np.subtract(1.0, np.from_dlpack(top), dtype=np.float64)
        return torch.from_numpy(np.maximum(a, eps, out=a))
    return torch.rsub(top.double(), 1.0).clamp_min_(eps)


@torch.no_grad()
def _statistics(sim: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None, K: int, *,
                q: float, margin: float, kappa_rho: float, kappa_aic: float, tail_frac: float,
                min_tail: int, eps: float, gate: str, topk_extra: int = 0,
                half: int | None = None, rho0=None, pivot=None) -> dict:
    """Vectorised per-anchor statistics (``docs/method.md``, "Per-anchor statistics") over
    rows, in few large ops (each op is a kernel launch on a GPU).

    Returns ``lambda`` (float32, the loss needs it so) and ``rho``, ``daic``, ``beta_w``,
    ``rho0`` (float64; :func:`public_stats` converts), ``k``, ``n``; besides, ``neg`` (the
    similarities with positive and invalid columns at ``-inf``; ``None`` on the CPU path,
    which never builds it) and ``top_idx``: the columns of the ``max(k, min(topk_extra, K))``
    most similar negatives of each row, most similar first (the recipe's top-M terms reuse
    both), and ``top``, their similarities (the recipe's pooled fit starts from them).
    ``half``: the module's SimCLR layout with ``N = half`` (lets the CPU path skip
    reading ``targets``/``invalid``). ``rho0``: a pivot given from outside (a number or a
    0-d tensor, floored at ``eps``) in place of the batch quantile; ``"rho0"`` then holds it
    (float64). ``pivot``: a function of the rows' ``log rho`` that returns ``log rho0``
    (the local-loss mode: the quantile over every process's rows)."""
    s = sim if sim.dtype in (torch.float32, torch.float64) else sim.float()
    B = s.shape[0]
    k = tail_size(K, tail_frac, min_tail)
    if K < min_tail:
        _warn_short_tail(K, k, int(min_tail))
    width = max(k, min(topk_extra, K))
    if cpu_selection(s):
        top_vals, top_idx = _top_negatives_cpu(s, targets, invalid, width,
                                               with_indices=topk_extra > 0, half=half) \
            if topk_extra else (_top_negatives_cpu(s, targets, invalid, k, half=half), None)
        neg = None
    elif compiled_cpu_selection(s):   # the same selection inside a compiled graph
        top_vals, top_idx = _top_negatives_op(s.detach(), targets, invalid, width,
                                              topk_extra > 0, -1 if half is None else half)
        top_idx = top_idx if topk_extra else None
        neg = None
    else:
        neg = negative_values(s, targets, invalid)
        top_vals, top_idx = torch.topk(neg, width, dim=1, largest=True, sorted=True)
    top = top_vals if width == k else top_vals[:, :k]
    d = _shortfalls(top, eps, neg is None and not torch.compiler.is_compiling())
    logd = d.log()
    log_rho = logd[:, 0]                                # log max(1 - max negative, eps)
    kq = int(round(q * (B - 1)))
    given = None
    if rho0 is None and pivot is not None:
        log_rho0 = pivot(log_rho)
    elif rho0 is None:
        log_rho0 = log_rho.kthvalue(kq + 1).values      # log of sorted rho at index kq (>= eps)
    else:
        given = torch.as_tensor(rho0, dtype=torch.float64, device=s.device).detach()
        given = given.reshape(()).clamp_min(eps)
        log_rho0 = given.log()
    b = max(1, k // 20)
    n = k - b
    if n >= 2:
        # Both OLS lines against x = log(delta) on the same n points, in one matmul: the
        # responses depend on (k, b) only, so their centred values are cached (_design).
        W, syy, wd = _design(k, b, s.device)
        x = logd[:, b:]
        var, mean = torch.var_mean(x, dim=1, correction=0, keepdim=True)   # sxx / n
        c = (x - mean) @ W                                 # (B, 2) = (sxy_W, -sxy_G) / n
        slope = c / var.clamp_min(1e-12 / n)               # (beta_W, -g)
        sse = torch.addcmul(syy, slope, c, value=-n).clamp_min_(1e-12)
        sse.add_(c <= 0, alpha=1e6)                        # beta_W <= 0, g >= 0: penalised
        # AIC = n log(SSE / n) + 4 for both fits, so dAIC = AIC_G - AIC_W = n log(SSE_G / SSE_W)
        daic = sse.log_() @ wd
        beta_w = slope[:, 0]
        # sigmoid(kappa_rho (log rho0 - log rho)) * sigmoid(kappa_aic (dAIC - margin))
        lam_rho = torch.sub(log_rho0, log_rho).mul_(kappa_rho).sigmoid_()
        lam_aic = torch.sub(daic, margin).mul_(kappa_aic).sigmoid_()
        lam = lam_rho * lam_aic if gate == "both" else lam_rho if gate == "rho" else lam_aic
    else:  # too few negatives for a tail fit: the loss falls back to InfoNCE
        beta_w = torch.zeros_like(log_rho)
        daic = torch.zeros_like(log_rho)
        lam = torch.zeros_like(log_rho)
    # float64; "d", "kq" give rho and rho0 exactly (public_stats); log_rho0 serves the modules
    return {"lambda": lam, "daic": daic, "beta_w": beta_w, "d": d, "kq": kq, "log_rho0": log_rho0,
            "k": k, "n": n, "top_idx": top_idx, "neg": neg, "rho0": given,
            "top": top_vals}


@torch.no_grad()
def row_log_rho(sim: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None,
                eps: float) -> torch.Tensor:
    """Each row's ``log rho = log max(1 - max negative, eps)`` (float64): the numbers
    :func:`_statistics` computes from its top-k, from the largest negative alone (a pivot
    over rows seen in parts: the chunked path, per-row tail sizes)."""
    top = negative_values(sim, targets, invalid).amax(dim=1)
    return torch.rsub(top.double(), 1.0).clamp_min_(eps).log()


def row_statistics(sim: torch.Tensor, targets: torch.Tensor, invalid: torch.Tensor | None,
                   K: int | torch.Tensor, **options) -> dict:
    """:func:`_statistics` of rows with ``K`` negatives each (an int), or with ``K_i``
    negatives (a ``(B,)`` tensor: a mask of unequal counts): then each group of rows with
    one count is a batch of its own (tail size ``tail_size(K_i)``), against the pivot
    ``rho0`` of every row, and ``k``, ``n`` are ``(B,)`` int64 tensors."""
    if isinstance(K, int):
        return _statistics(sim, targets, invalid, K, **options)
    rho0, pivot, q = options.pop("rho0", None), options.pop("pivot", None), options["q"]
    log_rho0 = None
    if rho0 is None:
        log_rho = row_log_rho(sim if sim.dtype in (torch.float32, torch.float64) else sim.float(),
                              targets, invalid, options["eps"])
        log_rho0 = (pivot(log_rho) if pivot is not None else
                    log_rho.kthvalue(int(round(q * (sim.shape[0] - 1))) + 1).values)
    out: dict = {}
    for count in torch.unique(K).tolist():
        rows = (K == count).nonzero().flatten()
        st = _statistics(sim[rows], targets[rows], None if invalid is None else invalid[rows],
                         int(count), rho0=rho0, pivot=lambda _: log_rho0, **options)
        st["k"], st["n"] = (torch.full((len(rows),), st[key], dtype=torch.long,
                                       device=sim.device) for key in ("k", "n"))
        st["d"] = st["d"][:, :1]
        for key in ("lambda", "daic", "beta_w", "d", "k", "n"):
            if key not in out:
                out[key] = st[key].new_empty((sim.shape[0], *st[key].shape[1:]))
            out[key][rows] = st[key]
        out.update(log_rho0=st["log_rho0"], rho0=st["rho0"])
    return {**out, "kq": int(round(q * (sim.shape[0] - 1))), "top_idx": None, "neg": None}


class _BlendedLogits(torch.autograd.Function):
    """Fused ``(1 - lam_i) s_ij / tau - c_i log(1 - min(s_ij, 1 - eps))`` with invalid columns
    set to ``-inf``, where ``c_i = lam_i * beta_i``. Takes three ``(B, 1)`` columns: ``-c_i``,
    ``a_i = (1 - lam_i) / tau`` and ``c_i``. The backward is written out
    (``d/ds = a_i + c_i / (1 - s_ij)`` below the clamp, ``a_i`` above it).

    At a large batch the cost is memory traffic and, on CPU, the page faults of every fresh
    ``(B, C)`` tensor (above glibc's mmap threshold, 32 MiB, each one is fresh), so each
    direction allocates one such tensor and works in place: five passes forward (and the
    mask's, unless it is the diagonal), four backward (``1 - s``, the clamp's threshold,
    ``a + c / (1 - s)`` in one ``addcdiv``, the product with ``grad``). ``invalid`` may be
    the string ``"diagonal"`` (the SimCLR layout): then only the diagonal is written, no
    mask is read. ``lam_i = 0`` gives ``a_i = 1 / tau`` and adds ``-0 * log(.)``: InfoNCE's
    logits ``s * (1 / tau)`` bit for bit."""

    @staticmethod
    @custom_fwd
    def forward(ctx, s, negc, a, c, eps, invalid):
        x = torch.rsub(s, 1.0).clamp_min_(eps).log_().mul_(negc)
        x.addcmul_(s, a)
        if isinstance(invalid, str):
            x.diagonal().fill_(float("-inf"))
        elif invalid is not None:
            x.masked_fill_(invalid, float("-inf"))
        ctx.save_for_backward(s, a, c)
        ctx.eps = eps
        return x

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        s, a, c = ctx.saved_tensors
        # d/da_i = sum_j grad_ij s_ij (a learnable temperature; 0 at the -inf columns)
        grad_a = (grad * s).sum(1, keepdim=True) if ctx.needs_input_grad[2] else None
        slope = torch.rsub(s, 1.0)
        F.threshold_(slope, ctx.eps, float("inf"))  # type: ignore[attr-defined]  # 1 - s <= eps: slope 0
        if torch.compiler.is_compiling():          # one graph: no out= into a (transposed) view
            slope = torch.addcdiv(a, c, slope)
        else:
            torch.addcdiv(a, c, slope, out=slope)   # a + c / (1 - s); a where the clamp holds
        slope.mul_(grad)
        return slope, None, grad_a, None, None, None


_COEF: dict = {}


def _coefficients(lam: torch.Tensor, tau, dtype: torch.dtype):
    """``(-lam, (1 - lam) / tau, lam)`` as ``(B, 1)`` columns of ``dtype``, from one ``addcmul``
    with cached constants (``beta = 1``). A tensor ``tau`` (learnable) gives
    ``(1 - lam) * (1 / tau)`` with its gradient (``lam = 0``: ``1 / tau``, InfoNCE's factor)."""
    if isinstance(tau, torch.Tensor):
        col = lam.view(-1, 1).to(dtype)
        return -col, torch.rsub(col, 1.0) * (1.0 / tau).to(dtype), col
    inv = 1.0 / float(tau)
    w, b = cached(_COEF, (float(tau), lam.dtype, str(lam.device)), lambda: (
        torch.tensor([-1.0, -inv, 1.0], dtype=lam.dtype, device=lam.device).view(3, 1, 1),
        torch.tensor([0.0, inv, 0.0], dtype=lam.dtype, device=lam.device).view(3, 1, 1)))
    coef = torch.addcmul(b, lam.view(1, -1, 1), w)
    return (coef if coef.dtype == dtype else coef.to(dtype)).unbind(0)


def blended_logits(sim: torch.Tensor, lam: torch.Tensor, tau, beta: torch.Tensor | float,
                   eps: float, invalid: torch.Tensor | str | None = None) -> torch.Tensor:
    """``(1 - lam_i) s_ij / tau + lam_i (-beta_i log(1 - min(s_ij, 1 - eps)))`` (float32, or
    float64 for float64 input), ``-inf`` where ``invalid`` (a ``(B, C)`` bool, or
    ``"diagonal"`` for a square ``sim`` whose diagonal is the only invalid entry). ``lam``:
    ``(B,)``; ``beta``: a number or ``(B,)``; ``tau``: a float or a 0-d tensor (learnable:
    it gets its gradient)."""
    s = upcast(sim)
    if isinstance(beta, torch.Tensor) or float(beta) != 1.0:
        lam = lam.to(s.dtype)
        c = (lam * (beta.to(s.dtype) if isinstance(beta, torch.Tensor) else float(beta)))[:, None]
        inv = inverse_tau(tau)
        coef = (-c, (1.0 - lam[:, None]) * (inv.to(s.dtype) if isinstance(inv, torch.Tensor)
                                               else inv), c)
    else:  # beta = 1 (the default)
        coef = _coefficients(lam, tau, s.dtype)
    return _BlendedLogits.apply(s, *coef, float(eps), invalid)


def _weince(sim, targets, invalid, K, tau, *, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail,
            eps, beta, gate, lam, return_stats, beta_min=0.5, beta_max=16.0, topk_extra=0,
            half=None, rho0=None, reduction="mean", weight=None, pivot=None):
    need_stats = lam is None or beta == "anchor" or return_stats
    stats = None
    if need_stats:
        stats = row_statistics(sim, targets, invalid, K, q=q, margin=margin,
                               kappa_rho=kappa_rho, kappa_aic=kappa_aic, tail_frac=tail_frac,
                               min_tail=min_tail, eps=eps, gate=gate, topk_extra=topk_extra,
                               half=half, rho0=rho0, pivot=pivot)
    if lam is None:
        assert stats is not None   # need_stats
        lam_row = stats["lambda"]
    else:
        # in the compute dtype: the coefficient (1 - lam) / tau of float64 input stays float64
        lam_row = torch.full((sim.shape[0],), float(lam), device=sim.device,
                             dtype=upcast(sim).dtype)
        if stats is not None:
            stats["lambda"] = lam_row
    if beta == "one":
        beta_val = 1.0
    else:
        assert stats is not None   # need_stats
        beta_val = stats["beta_w"].clamp(beta_min, beta_max)
    # the SimCLR layout's invalid columns are its diagonal: written as such, not read from a mask
    logits = blended_logits(sim, lam_row, tau, beta_val, eps,
                            invalid if half is None else "diagonal")
    loss = reduced_cross_entropy(logits, targets, reduction, weight)
    return loss, stats


def weince(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
           tau: float | torch.Tensor | None = None, *, q: float = 0.2, margin: float = 2.0,
           kappa_rho: float = 10.0, kappa_aic: float = 1.0, tail_frac: float = 0.10,
           min_tail: int = 32, eps: float = 1e-6,
           beta: Literal["one", "anchor"] = "one", gate: Literal["both", "rho", "aic"] = "both",
           lam: float | None = None, return_stats: bool = False, beta_min: float = 0.5,
           beta_max: float = 16.0, check: bool = True, num_negatives: int | None = None,
           temperature: float | torch.Tensor | None = None,
           rho0: float | torch.Tensor | None = None,
           reduction: Literal["mean", "sum", "none"] = "mean",
           weight: torch.Tensor | None = None):
    """The WEINCE loss of a batch of similarities (the functional form of ``WEINCELoss``).

    From Erol et al., *When Softmax Fails at the Top: Extreme Value Corrections for
    InfoNCE*, ICML 2026 (arXiv 2606.00262); ``docs/method.md``, "WEINCE". Per row ``i``,
    without gradient: the ``k`` hardest negatives' shortfalls ``1 - s`` give a Weibull and
    a Gumbel line (their AIC difference ``daic``) and the cap proximity ``rho``; the blend
    weight is ``lambda_i = sigmoid(kappa_rho (log rho0 - log rho_i)) * sigmoid(kappa_aic
    (daic_i - margin))``. The logits ``(1 - lambda_i) s_ij / tau + lambda_i (-beta
    log(1 - s_ij))`` go into a cross-entropy with the positive as target, averaged over
    rows. ``lambda = 0`` is :func:`info_nce` exactly.

    Args:
        sim: ``(B, C)`` cosine similarities (row = anchor, column = candidate), in
            ``[-1, 1]``; any floating dtype (statistics and logits are computed in float32,
            or float64 for float64 input). A queue of negatives (MoCo) is the ``(N, 1 + K)``
            matrix of :func:`weince.losses.queue_similarities`: positive in column 0, the
            ``K`` queued embeddings after it, targets zeros, no mask.
        targets: ``(B,)`` integer column of each row's positive.
        mask: optional ``(B, C)`` boolean of valid candidates (``False`` drops a column for
            that row, e.g. a known false negative); every row keeps its positive and
            ``K_i >= 1`` negatives, its tail ``k_i = tail_size(K_i)``. Default ``None``.
        tau: softmax temperature ``> 0``, a number or a 0-d tensor (one that requires grad
            is learnable: it gets its gradient). Default ``0.5``.
        q: quantile of ``rho`` over rows that sets the pivot ``rho0``, in ``[0, 1]``.
            Default ``0.2``.
        margin: AIC difference at which the AIC gate is one half (finite). Default ``2.0``.
        kappa_rho, kappa_aic: slopes of the two gates, ``>= 0``. Defaults ``10.0``, ``1.0``.
        tail_frac, min_tail: tail size ``k = max(min_tail, round(tail_frac * K))``, at
            least 10, at most ``K``; ``tail_frac > 0``, ``min_tail >= 1``. Defaults
            ``0.10``, ``32``. ``K < min_tail`` warns once per process
            (:class:`ShortTailWarning`); ``K < 3`` gives ``lambda = 0``.
        eps: floor of the shortfalls and of ``1 - s`` in the Weibull logit, in
            ``(0, 0.5)``. Default ``1e-6``.
        beta: ``"one"`` (default; the official code, ``beta = 1``) or ``"anchor"`` (the
            paper's printed formula: each row's Weibull slope clamped to
            ``[beta_min, beta_max]``).
        gate: ``"both"`` (default; product of the two gates), ``"rho"`` or ``"aic"``.
        lam: ``None`` (default) or a number in ``[0, 1]`` forced on every row (ablations;
            ``lam=0`` equals :func:`info_nce`).
        return_stats: also return the statistics. Default ``False``.
        beta_min, beta_max: clamp of ``beta="anchor"``, ``0 < beta_min <= beta_max``.
            Defaults ``0.5``, ``16.0``.
        check: validate the tensors' contents (finite, targets in range, a valid positive),
            each check a host synchronisation. ``check=False`` skips them (shapes and
            dtypes are still checked) for well-formed GPU batches; with a ``mask`` pass
            ``num_negatives=K`` too when every row has ``K`` (else the counts are read
            from the mask, one sync). Default ``True``.
        num_negatives: ``K``, the number of negatives of every row (see ``check``).
        temperature: the same option as ``tau`` under lightly's name; pass one of the two.
        rho0: a given pivot (number or 0-d tensor, no gradient, floored at ``eps``) in
            place of the batch's ``q``-quantile of ``rho``, e.g. the quantile of ``rho``
            gathered over ranks. Default ``None``.
        reduction, weight: ``"mean"`` (default), ``"sum"`` or ``"none"`` (``(B,)``
            losses); optional ``(B,)`` row weights ``w_i``: ``sum w_i l_i / sum w_i``,
            ``sum w_i l_i``, ``w_i l_i``. The statistics ignore both.
    Returns:
        The scalar loss, or ``(loss, stats)``: ``(B,)`` tensors ``lambda``, ``rho``, ``daic``,
        ``beta_w``, scalars ``rho0``, ``k``, ``n`` (``(B,)`` when the ``K_i`` differ).

    Raises:
        ValueError: an argument outside its range (named), both ``tau`` and ``temperature``,
            a ``sim`` not 2-D floating, mismatched shapes, and, with ``check=True``,
            non-finite values, targets out of range, a masked-out positive, no negative.

    Example:
        >>> import torch
        >>> from weince.losses import info_nce, pair_similarities, weince
        >>> _ = torch.manual_seed(0)
        >>> z1 = torch.randn(64, 16, requires_grad=True)
        >>> sim, targets, mask = pair_similarities(z1, z1.detach() + 0.1 * torch.randn(64, 16))
        >>> loss, stats = weince(sim, targets, mask, tau=0.5, return_stats=True)
        >>> loss.backward()
        >>> stats["lambda"].shape, stats["k"]
        (torch.Size([128]), 32)
        >>> bool(weince(sim, targets, mask, lam=0.0) == info_nce(sim, targets, mask))
        True
    """
    tau = loss_tau(tau, temperature, getattr(sim, "dtype", None))
    check_weince_args(tau, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps, beta, gate,
                      lam, beta_min, beta_max)
    K = check_batch(sim, targets, mask, sync=check, num_negatives=num_negatives, per_row=True)
    check_reduction(reduction, weight, sim.shape[0])
    with no_autocast(sim):
        loss, stats = _weince(sim, targets, invert(mask), K, tau, q=q, margin=margin, eps=eps,
                              kappa_rho=kappa_rho, kappa_aic=kappa_aic, tail_frac=tail_frac,
                              min_tail=min_tail, beta=beta, gate=gate, lam=lam, rho0=rho0,
                              return_stats=return_stats, beta_min=beta_min, beta_max=beta_max,
                              reduction=reduction, weight=weight)
    return (loss, public_stats(stats)) if return_stats else loss
