"""The two top-M terms of the authors' CIFAR-100 training recipe (``docs/method.md``,
"The authors' recipe"), and the loss modules that carry them (:class:`WEINCERecipeLoss`,
:class:`WEINCERecipeNoWeibLoss`, :class:`InfoNCETopMLoss`).

The official WEINCE runs add ``0.5 * L_weib_topM + 0.5 * L_soft_topM`` (M = 50) to the
WEINCE loss, while their InfoNCE baseline gets neither: a confound that the artifact
exposes with the ``infonce_topm`` arm. ``beta_t`` is a batch-level Weibull exponent kept as
an exponential moving average by :class:`weince.losses.WEINCERecipeLoss`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from weince.losses._common import (cached, check_batch, check_reduction, cpu_selection,
                                   invert, inverse_tau, largest_per_row, loss_tau,
                                   negative_values, upcast)
from weince.losses.infonce import _info_nce
from weince.losses.modules import WEINCELoss, _TwoViewLoss, fill_docs, loss_forward, register_loss
from weince.losses.weince import _weince

__all__ = ["top_negatives", "topm_softmax", "topm_weibull", "fit_batch_beta",
           "InfoNCETopMLoss", "WEINCERecipeLoss", "WEINCERecipeNoWeibLoss"]


def top_negatives(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None, m: int,
                  top_idx: torch.Tensor | None = None) -> torch.Tensor:
    """Column indices ``(B, m')`` of the ``m' = min(m, K)`` most similar negatives of each row.

    ``top_idx``: the sorted top negatives from :func:`weince.losses.weince_statistics` called
    with ``topk_extra=m``; its width is at least ``min(m, K)``, so it is reused as is.
    """
    if top_idx is not None:
        return top_idx[:, : min(int(m), top_idx.shape[1])]
    K = sim.shape[1] - 1 if mask is None else int(mask[0].sum()) - 1
    m = max(1, min(int(m), K))
    neg = negative_values(sim.detach().float(), targets, invert(mask))
    return torch.topk(neg, m, dim=1, largest=True, sorted=True).indices


def _candidates(sim, targets, mask, m, top_idx):
    idx = top_negatives(sim, targets, mask, m, top_idx)
    rows = torch.arange(sim.shape[0], device=sim.device)
    pos = sim[rows, targets].unsqueeze(1)
    return upcast(torch.cat([pos, sim.gather(1, idx)], dim=1))  # positive first


def topm_softmax(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
                 tau: float | torch.Tensor | None = None, m: int = 50,
                 top_idx: torch.Tensor | None = None, *,
                 temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """``L_soft_topM``: cross-entropy over the positive and the ``m`` most similar negatives,
    logits ``s / tau`` (``tau`` default ``0.5``; ``temperature`` is another name for it).
    Shapes as in :func:`weince.losses.info_nce`."""
    tau = loss_tau(tau, temperature, getattr(sim, "dtype", None))
    check_batch(sim, targets, mask, sync=False)  # shapes and dtypes only: no host sync
    cand = _candidates(sim, targets, mask, m, top_idx)
    zeros = torch.zeros(sim.shape[0], dtype=torch.long, device=sim.device)
    return F.cross_entropy(cand / tau, zeros)


def topm_weibull(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
                 beta_t: torch.Tensor | float = 4.0, m: int = 50, eps: float = 1e-6,
                 top_idx: torch.Tensor | None = None) -> torch.Tensor:
    """``L_weib_topM``: the same candidates as :func:`topm_softmax` with logits
    ``-beta_t * log(1 - min(s, 1 - eps))``."""
    check_batch(sim, targets, mask, sync=False)
    cand = _candidates(sim, targets, mask, m, top_idx)
    zeros = torch.zeros(sim.shape[0], dtype=torch.long, device=sim.device)
    return F.cross_entropy(-beta_t * torch.log1p(-cand.clamp(max=1.0 - eps)), zeros)


@torch.no_grad()
def fit_batch_beta(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
                   eps: float = 1e-6, min_points: int = 1024, frac: float = 0.05):
    """Batch-level Weibull exponent of the pooled negative shortfalls (``docs/method.md``,
    "The authors' recipe").

    Pools every (row, negative) shortfall ``1 - s``, keeps the smallest
    ``k = min(count, max(min_points, int(frac * count)))``, drops ``max(1, k // 20)``
    burn-in points and fits ``log F ~ a + beta log delta`` with ``F_m = m / (k + 1)``.

    Returns:
        ``(slope, r2)`` as 0-d float64 tensors (``r2`` clamped to ``[0, 1]``); ``(0, 0)``
        when fewer than 12 shortfalls exist.
    """
    check_batch(sim, targets, mask, sync=False)
    neg = negative_values(sim.detach().float(), targets, invert(mask))
    count = int(torch.isfinite(neg).sum())
    return batch_beta_from_negatives(neg, count, eps, min_points, frac, inplace=True)


def _largest(vals: torch.Tensor, k: int, inplace: bool = False) -> torch.Tensor:
    """The ``k`` largest entries of the 1-D ``vals``, largest first: ``torch.topk``'s values;
    on CPU by :func:`weince.losses._common.largest_per_row` (``torch.topk`` with a large
    sorted ``k`` is several times slower there)."""
    if not cpu_selection(vals):
        return torch.topk(vals, k, largest=True, sorted=True).values
    a = vals.numpy() if inplace else vals.numpy().copy()
    return torch.from_numpy(largest_per_row(a.reshape(1, -1), k)[0])


def pool_size(count: int, min_points: int = 1024, frac: float = 0.05) -> int:
    """The recipe's pooled fit keeps the smallest ``min(count, max(min_points, frac*count))``
    shortfalls."""
    return min(count, max(int(min_points), int(frac * count)))


def pooled_top_cpu(sim: torch.Tensor, k: int, targets: torch.Tensor | None = None,
                   invalid: torch.Tensor | None = None, half: int | None = None) -> torch.Tensor:
    """The ``k`` largest negative similarities of the whole batch, largest first, as float64
    (CPU, NumPy introselect: the same numbers as ``torch.topk`` of the flattened
    :func:`negative_values`). ``half``: the SimCLR layout with ``N = half`` (positive
    ``(i + N) mod 2N``, diagonal invalid) instead of ``targets``/``invalid``."""
    src = sim.data if sim.dtype != torch.bfloat16 else sim.data.float()   # NumPy has no bf16
    a = np.array(np.from_dlpack(src))           # one scratch copy
    rows = np.arange(a.shape[0])
    if half is None:
        if invalid is not None:
            a[invalid.numpy()] = -np.inf
        assert targets is not None, "targets are needed without half"
        a[rows, targets.cpu().numpy()] = -np.inf
    else:
        a[rows, rows] = -np.inf
        a[rows, (rows + half) % a.shape[0]] = -np.inf
    return torch.from_numpy(largest_per_row(a.reshape(1, -1), k)[0].astype(np.float64))


def pooled_top_from_rows(top: torch.Tensor | None, k: int, sim: torch.Tensor,
                         targets: torch.Tensor | None = None, invalid: torch.Tensor | None = None,
                         half: int | None = None) -> torch.Tensor:
    """:func:`pooled_top_cpu` from ``top``, each row's ``w`` largest negative similarities
    (largest first, as WEINCE's statistics select them): the batch's ``k`` largest are
    among them, except in a row whose ``w``-th largest exceeds the ``k``-th largest of all
    of ``top`` (it may hold more): such rows join in full. The same numbers, without a
    copy and a selection over the whole of ``sim`` when few rows are that crowded
    (``top=None``: :func:`pooled_top_cpu` itself)."""
    u = None if top is None else np.from_dlpack(top)
    if u is None or k > u.size or np.isnan(u).any():
        return pooled_top_cpu(sim, k, targets, invalid, half)
    flat = u.reshape(-1).copy()
    flat.partition(flat.size - k)
    crowded = np.flatnonzero(u[:, -1] > flat[flat.size - k:].min())
    if not crowded.size:                                    # the k largest of top are those
        return torch.from_numpy(np.sort(flat[flat.size - k:])[::-1].astype(np.float64))
    src = sim.data if sim.dtype != torch.bfloat16 else sim.data.float()
    full = np.from_dlpack(src)[crowded]               # a copy of those rows
    rows = np.arange(crowded.size)
    if half is None:
        assert targets is not None, "targets are needed without half"
        if invalid is not None:
            full[invalid.numpy()[crowded]] = -np.inf
        full[rows, targets.cpu().numpy()[crowded]] = -np.inf
    else:
        full[rows, crowded] = -np.inf
        full[rows, (crowded + half) % sim.shape[0]] = -np.inf
    rest = np.delete(u, crowded, axis=0).reshape(-1)
    flat = np.concatenate([rest, full.reshape(-1).astype(u.dtype)])
    return torch.from_numpy(largest_per_row(flat.reshape(1, -1), k)[0].astype(np.float64))


@torch.library.custom_op("weince::pooled_top", mutates_args=())
def pooled_top_op(sim: torch.Tensor, k: int, targets: torch.Tensor,
                  invalid: torch.Tensor | None, half: int) -> torch.Tensor:
    """:func:`pooled_top_cpu` as an op a compiled graph calls (``half < 0``: none)."""
    return pooled_top_cpu(sim, k, targets, invalid, None if half < 0 else half)


@pooled_top_op.register_fake
def _(sim, k, targets, invalid, half):
    return sim.new_empty((k,), dtype=torch.float64)


_POOL: dict = {}


def fit_pooled(top: torch.Tensor, k: int, eps: float = 1e-6):
    """The recipe's pooled Weibull fit on ``top``, the ``k`` largest negative similarities
    (largest first): drop ``b = max(1, k // 20)`` burn-in points, regress ``log F_m`` on
    ``log delta``. Returns ``(slope, r2)`` as 0-d float64 tensors, ``(0, 0)`` when ``k < 10``.
    A dozen ops: the centred responses are cached per ``k``, ``SSE = S_yy - slope S_xy``."""
    b = max(1, k // 20)
    n = k - b
    if k < 10 or n < 2:
        zero = torch.zeros((), dtype=torch.float64, device=top.device)
        return zero, zero
    def build():  # constants in plain Python: no value is read back from a tensor
        y = [math.log(m / (k + 1)) for m in range(b + 1, k + 1)]
        y_mean = sum(y) / n
        yc = [v - y_mean for v in y]
        return (torch.tensor([v / n for v in yc], dtype=torch.float64, device=top.device),
                sum(v * v for v in yc))

    w, syy = cached(_POOL, (k, str(top.device)), build)
    top = top if top.dtype == torch.float64 else top.double()
    x = torch.rsub(top[b:], 1.0).clamp_min_(eps).log_()
    var, mean = torch.var_mean(x, correction=0)              # S_xx / n
    c = (x - mean) @ w                                        # S_xy / n
    slope = c / var.clamp_min(1e-12 / n)
    r2 = (slope * c).mul_(n / max(syy, 1e-12)).clamp_(0.0, 1.0)   # 1 - SSE / S_yy
    return slope, r2


@torch.no_grad()
def batch_beta_from_negatives(neg: torch.Tensor, count: int, eps: float = 1e-6,
                              min_points: int = 1024, frac: float = 0.05, inplace: bool = False):
    """:func:`fit_batch_beta` on ``neg`` (similarities, ``-inf`` off the ``count`` negatives).
    ``inplace``: ``neg`` is a scratch copy that may be reordered (saves a copy on CPU)."""
    k = pool_size(count, min_points, frac)
    if k < 10 or k - max(1, k // 20) < 2:
        return fit_pooled(neg.new_zeros(0), k, eps)
    return fit_pooled(_largest(neg.flatten(), k, inplace), k, eps)


# ---------------------------------------------------------------- the recipe's loss modules


@register_loss("infonce_topm")
class InfoNCETopMLoss(_TwoViewLoss):
    """InfoNCE plus the recipe's softmax top-M term: isolates that term's effect.

    ``InfoNCE + w_soft * L_soft_topM``, where ``L_soft_topM`` is the cross-entropy of
    ``s / tau`` over the positive and the ``top_m`` most similar negatives of each anchor
    (``docs/method.md``, "The authors' recipe"). The authors' WEINCE runs carry this term
    and their InfoNCE baseline does not; this arm shows how much of a gain the term alone
    gives.

    Args:
        {common}
        top_m: number of hardest negatives in the top-M term, ``>= 1`` (``min(top_m, K)``
            are used). Default ``50``.
        w_soft: weight of the top-M term (any real; ``0`` is InfoNCE). Default ``0.5``.
        {gather}
        {bank}

    {shapes}

    ``last_stats`` stays empty.

    Raises:
        ValueError: ``top_m < 1``, or as :class:`InfoNCELoss`.

    Example:
        >>> import torch
        >>> from weince.losses import InfoNCETopMLoss
        >>> _ = torch.manual_seed(0)
        >>> z1, z2 = torch.randn(32, 16), torch.randn(32, 16)
        >>> InfoNCETopMLoss(tau=0.5, top_m=10)(z1, z2).shape
        torch.Size([])
    """

    def __init__(self, tau: float | None = None, layout: str = "simclr", top_m: int = 50,
                 w_soft: float = 0.5, *, temperature: float | None = None,
                 gather_distributed: bool = False, memory_bank_size: int = 0):
        super().__init__(tau, layout, temperature=temperature,
                         gather_distributed=gather_distributed, memory_bank_size=memory_bank_size)
        if top_m < 1:
            raise ValueError(f"top_m must be >= 1, got {top_m!r}")
        if self.local_loss:
            raise ValueError("gather_distributed='local' is for InfoNCELoss and WEINCELoss; "
                             "pass gather_distributed=True")
        self.top_m, self.w_soft = int(top_m), float(w_soft)

    @loss_forward
    def forward(self, z1, z2):
        """The loss of the views ``z1``, ``z2`` (``(N, d)`` each): a 0-d tensor."""
        sim, targets, invalid, K = self.batch(z1, z2)
        if K == 0:
            return self.no_negatives(sim)
        base = _info_nce(sim, targets, invalid, self.tau)
        with torch.no_grad():
            neg = negative_values(sim.detach(), targets, invalid)
            idx = torch.topk(neg, min(self.top_m, K), dim=1, sorted=True).indices
        return base + self.w_soft * topm_softmax(sim, targets, None, self.tau, self.top_m, idx)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", top_m={self.top_m}, w_soft={self.w_soft}"


@register_loss("weince_recipe")
class WEINCERecipeLoss(WEINCELoss):
    """The authors' training recipe: WEINCE plus two top-M terms with a batch exponent.

    ``WEINCE + w_weib * L_weib_topM + w_soft * L_soft_topM`` (``docs/method.md``, "The
    authors' recipe"): both extra terms are cross-entropies over the positive and the
    ``top_m`` most similar negatives of each anchor, with logits ``s / tau`` (soft) and
    ``-beta_t * log(1 - s)`` (Weibull). ``beta_t`` is one exponent for the whole batch,
    kept as an exponential moving average in a buffer (saved in ``state_dict``): in
    training mode each call first fits a line to the pooled tail of the batch's
    negatives and, when the fit is accepted (positive slope, ``R^2 >= r2_min``), moves
    ``beta_t`` towards the clamped slope; then the terms use it. In eval mode ``beta_t``
    stays fixed. This is what the paper's headline WEINCE rows were trained with; its
    InfoNCE baseline has neither extra term (``"infonce_topm"`` isolates one of them).

    Args:
        {common}
        top_m: number of hardest negatives in the top-M terms, ``>= 1``. Default ``50``.
        w_weib: weight of the Weibull top-M term. Default ``0.5``.
        w_soft: weight of the softmax top-M term. Default ``0.5``.
        beta_t_init: the starting value of ``beta_t``. Default ``4.0``.
        momentum: EMA momentum ``m`` in ``[0, 1)``:
            ``beta_t <- m * beta_t + (1 - m) * clamp(slope)``. Default ``0.9``.
        r2_min: the least ``R^2`` of the pooled fit that updates ``beta_t``. Default ``0.85``.
        beta_t_min, beta_t_max: the clamp of the fitted slope. Defaults ``0.5``, ``16.0``.
        pool_min, pool_frac: the pooled fit keeps the
            ``min(count, max(pool_min, int(pool_frac * count)))`` largest negative
            similarities of the batch. Defaults ``1024``, ``0.05``.
        **kwargs: the options of :class:`WEINCELoss` (``q``, ``margin``, ``kappa_rho``,
            ``kappa_aic``, ``tail_frac``, ``min_tail``, ``eps``, ``beta``, ``gate``,
            ``lam``, ``beta_min``, ``beta_max``, ``temperature``, ``gather_distributed``,
            ``memory_bank_size``: with a bank, the pooled fit and the top-M terms take
            the bank's negatives).

    {shapes}

    ``last_stats``: the keys of :class:`WEINCELoss`, and ``beta_t`` (the exponent the
    call used); in training mode also ``beta_hat`` (the batch's fitted slope) and
    ``beta_r2`` (its ``R^2``).

    Raises:
        ValueError: ``top_m < 1``, ``momentum`` outside ``[0, 1)``, or as
            :class:`WEINCELoss`.

    Example:
        >>> import torch
        >>> from weince.losses import WEINCELoss, WEINCERecipeLoss
        >>> _ = torch.manual_seed(0)
        >>> z1 = torch.randn(64, 32, requires_grad=True)
        >>> z2 = z1.detach() + 0.1 * torch.randn(64, 32)
        >>> loss_fn = WEINCERecipeLoss(tau=0.5, top_m=20)
        >>> loss_fn(z1, z2).backward()
        >>> sorted(set(loss_fn.last_stats) - set(WEINCELoss(tau=0.5).last_stats))[:3]
        ['beta_hat', 'beta_r2', 'beta_t']
        >>> "beta_t" in loss_fn.state_dict()
        True
    """

    beta_t: torch.Tensor   # a buffer (register_buffer below)

    def __init__(self, tau: float | None = None, layout: str = "simclr", *, top_m: int = 50,
                 w_weib: float = 0.5, w_soft: float = 0.5, beta_t_init: float = 4.0,
                 momentum: float = 0.9, r2_min: float = 0.85, beta_t_min: float = 0.5,
                 beta_t_max: float = 16.0, pool_min: int = 1024, pool_frac: float = 0.05, **kwargs):
        super().__init__(tau, layout, **kwargs)
        if top_m < 1:
            raise ValueError(f"top_m must be >= 1, got {top_m!r}")
        if self.local_loss:
            raise ValueError("gather_distributed='local' is for InfoNCELoss and WEINCELoss "
                             "(the recipe's pooled fit needs every row); pass "
                             "gather_distributed=True")
        if self.chunk_size:
            raise ValueError("chunk_size is for InfoNCELoss and WEINCELoss (the recipe's pooled "
                             "fit needs every row at once); pass chunk_size=None")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must lie in [0, 1), got {momentum!r}")
        self.top_m, self.w_weib, self.w_soft = int(top_m), float(w_weib), float(w_soft)
        self.beta_t_init = float(beta_t_init)
        self.momentum, self.r2_min = float(momentum), float(r2_min)
        self.beta_t_min, self.beta_t_max = float(beta_t_min), float(beta_t_max)
        self.pool_min, self.pool_frac = int(pool_min), float(pool_frac)
        self.register_buffer("beta_t", torch.tensor(float(beta_t_init)))
        self._zero_targets: torch.Tensor | None = None

    @torch.no_grad()
    def update_beta_t(self, neg: torch.Tensor, count: int, inplace: bool = False) -> None:
        """One EMA step from ``neg`` (similarities with ``-inf`` off the ``count`` negatives;
        ``inplace``: a scratch copy the fit may reorder)."""
        self._ema(*batch_beta_from_negatives(neg, count, self.opts["eps"], self.pool_min,
                                             self.pool_frac, inplace=inplace))

    @torch.no_grad()
    def _ema(self, slope: torch.Tensor, r2: torch.Tensor) -> None:
        """``beta_t <- m beta_t + (1 - m) clamp(slope)`` where the fit is accepted (slope > 0,
        R^2 >= r2_min), else unchanged: one in-place ``lerp_`` whose weight is 0 on rejection."""
        accept = (slope > 0) & (r2 >= self.r2_min)
        target = slope.clamp(self.beta_t_min, self.beta_t_max).to(self.beta_t.dtype)
        self.beta_t.lerp_(target, accept * (1 - self.momentum))
        self.last_stats.update(beta_hat=slope, beta_r2=r2)

    @loss_forward
    def forward(self, z1, z2):
        """The recipe's loss of the views ``z1``, ``z2`` (``(N, d)`` each): a 0-d tensor;
        in training mode updates ``beta_t`` first; updates ``last_stats``."""
        sim, targets, invalid, K = self.batch(z1, z2)
        if K == 0:
            return self.no_negatives(sim)
        loss, stats = self.core(sim, targets, invalid, K, topk_extra=self.top_m)
        eps = self.opts["eps"]
        if self.training:  # the EMA step comes before beta_t is used, as in the official code
            self._ema_step(sim, targets, invalid, K, stats, self.simclr_half(sim))
        idx = stats["top_idx"]
        m = min(self.top_m, K)
        idx = idx if idx.shape[1] == m else idx[:, :m]
        # the candidates (positive first) are gathered once for both top-M terms
        s = sim if sim.dtype in (torch.float32, torch.float64) else sim.float()
        cand = s.gather(1, torch.cat([targets.view(-1, 1), idx], dim=1))
        if self.w_weib and self.w_weib == self.w_soft:
            # both cross-entropies over one stacked batch: w (mean_W + mean_S) = 2w mean_stacked
            weib = torch.log1p(cand.clamp(max=1.0 - eps).neg_()).mul_(-self.beta_t)
            both = torch.cat([weib, cand * inverse_tau(self.tau)], dim=0)
            loss = loss + (2 * self.w_soft) * F.cross_entropy(both, self._zeros(both))
        else:
            if self.w_weib:
                weib = torch.log1p(cand.clamp(max=1.0 - eps).neg_()).mul_(-self.beta_t)
                loss = loss + self.w_weib * F.cross_entropy(weib, self._zeros(weib))
            if self.w_soft:
                soft = cand * inverse_tau(self.tau)
                loss = loss + self.w_soft * F.cross_entropy(soft, self._zeros(soft))
        self.last_stats["beta_t"] = self.beta_t.clone()
        return loss

    def _ema_step(self, sim, targets, invalid, K: int, stats: dict, half) -> None:
        """One EMA step of ``beta_t`` from the batch's pooled tail."""
        k = pool_size(sim.shape[0] * K, self.pool_min, self.pool_frac)
        if stats["neg"] is None:  # CPU path: NumPy selection straight from sim
            top = (pooled_top_from_rows(stats.get("top"), k, sim, targets, invalid, half)
                   if not torch.compiler.is_compiling() else
                   pooled_top_op(sim.detach(), k, targets, invalid, -1 if half is None else half))
        else:
            top = torch.topk(stats["neg"].flatten(), k, sorted=True).values
        self._ema(*fit_pooled(top, k, self.opts["eps"]))

    def with_options(self, z1, z2, mask=None, weight=None, reduction=None, labels=None):
        """The recipe's loss of a call with ``mask`` (equal counts), ``weight`` or
        ``reduction``: each row's WEINCE loss plus its two top-M terms, reduced."""
        if labels is not None:
            raise ValueError("labels (several positives per anchor) are for InfoNCELoss, "
                             "WEINCELoss and DualEncoderLoss: the recipe's top-M terms take "
                             "one positive per anchor")
        reduction = "mean" if reduction is None else reduction
        check_reduction(reduction, None, 1)
        sim, targets, invalid, K, _, row_w, N = self.option_batch(z1, z2, mask, weight, None)
        if not isinstance(K, int):
            raise ValueError("the recipe needs a mask that keeps the same number of negatives "
                             "in every row (its top-M terms and pooled fit)")
        rows, stats = _weince(sim, targets, invalid, K, self.tau, return_stats=True,
                              topk_extra=self.top_m, reduction="none", **self.opts)
        self.logged(rows, stats)
        if self.training:
            self._ema_step(sim, targets, invalid, K, stats, None)
        m = min(self.top_m, K)
        s = upcast(sim)
        cand = s.gather(1, torch.cat([targets.view(-1, 1), stats["top_idx"][:, :m]], dim=1))
        zeros = torch.zeros(cand.shape[0], dtype=torch.long, device=cand.device)
        weib = torch.log1p(cand.clamp(max=1.0 - self.opts["eps"]).neg_()).mul_(-self.beta_t)
        rows = (rows + self.w_weib * F.cross_entropy(weib, zeros, reduction="none")
                + self.w_soft * F.cross_entropy(cand * inverse_tau(self.tau), zeros,
                                                reduction="none"))
        if row_w is not None:
            rows = rows * row_w.to(rows.dtype)
        self.last_stats["beta_t"] = self.beta_t.clone()
        return self.fold(rows, reduction, None if row_w is None else row_w[:N], N)

    def extra_repr(self) -> str:
        return super().extra_repr() + "".join(
            f", {k}={getattr(self, k)!r}" for k in (
                "top_m", "w_weib", "w_soft", "beta_t_init", "momentum", "r2_min", "beta_t_min",
                "beta_t_max", "pool_min", "pool_frac"))

    def _zeros(self, x: torch.Tensor) -> torch.Tensor:
        """Target 0 (the positive is the first candidate) for every row of ``x``, cached."""
        if torch.compiler.is_compiling():  # no Python-side cache inside a graph
            return torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        z = self._zero_targets
        if z is None or z.shape[0] != x.shape[0] or z.device != x.device:
            z = self._zero_targets = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        return z


@register_loss("weince_recipe_no_weib")
class WEINCERecipeNoWeibLoss(WEINCERecipeLoss):
    """Ablation: the recipe without its Weibull top-M term (WEINCE + ``w_soft * L_soft_topM``).

    Takes the arguments of :class:`WEINCERecipeLoss` (``w_weib`` is forced to ``0``);
    ``last_stats`` as there.

    Example:
        >>> import torch
        >>> from weince.losses import WEINCERecipeNoWeibLoss
        >>> _ = torch.manual_seed(0)
        >>> z1, z2 = torch.randn(32, 16), torch.randn(32, 16)
        >>> WEINCERecipeNoWeibLoss(tau=0.5, top_m=10)(z1, z2).shape
        torch.Size([])
    """

    def __init__(self, tau: float | None = None, layout: str = "simclr", **kwargs):
        kwargs["w_weib"] = 0.0
        super().__init__(tau, layout, **kwargs)


fill_docs(InfoNCETopMLoss, WEINCERecipeLoss)
