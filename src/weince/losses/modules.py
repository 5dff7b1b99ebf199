"""``nn.Module`` wrappers for two-view batches, and the name -> loss registry.

Every module takes ``z1, z2`` of shape ``(N, d)`` (normalised inside), builds the
similarities for its ``layout`` (``"simclr"``: ``2N x 2N`` NT-Xent views; ``"pairs"``:
``N x N`` with the positive on the diagonal, as SimCSE), returns a scalar loss and keeps
``last_stats``: a dict of detached 0-d tensors for logging (``float(v)`` to read; no
host synchronisation happens inside the loss). No module has a trainable parameter.

    >>> loss_fn = build_loss("weince", tau=0.5)
    >>> loss = loss_fn(z1, z2); loss.backward()
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from weince.losses._common import (LAYOUTS, cached, check_tau, check_tau_dtype, negative_values,
                                   pair_similarities, two_view_batch)
from weince.losses.infonce import _info_nce
from weince.losses.recipe import (
    batch_beta_from_negatives,
    fit_pooled,
    pool_size,
    pooled_top_cpu,
    topm_softmax,
)
from weince.losses.weince import _weince, check_weince_args

__all__ = ["InfoNCELoss", "WEINCELoss", "WEINCERecipeLoss", "WEINCERecipeNoWeibLoss",
           "InfoNCETopMLoss", "LOSSES", "register_loss", "build_loss"]

LOSSES: dict[str, type[nn.Module]] = {}


def register_loss(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator: make a loss module available to :func:`build_loss` by ``name``."""
    def deco(cls):
        if name in LOSSES and LOSSES[name] is not cls:
            raise ValueError(f"loss name {name!r} is already registered to {LOSSES[name].__name__}")
        LOSSES[name] = cls
        cls.loss_name = name
        return cls
    return deco


def build_loss(name: str, **kwargs) -> nn.Module:
    """Instantiate a registered loss by name (training code picks losses from config)."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; valid names: {sorted(LOSSES)}")
    try:
        return LOSSES[name](**kwargs)
    except TypeError as err:
        raise ValueError(f"bad options for loss {name!r}: {err}") from err


_QUANTILE_W: dict = {}


def _quantiles(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean and the 10/50/90% quantiles (``torch.quantile``'s linear interpolation) from one
    sort and one matmul with cached interpolation weights (``torch.quantile`` itself costs
    more than the rest of the statistics at small B)."""
    n = x.numel()

    def build():
        w = [[0.0] * 3 for _ in range(n)]
        for j, q in enumerate((0.1, 0.5, 0.9)):
            pos = q * (n - 1)
            lo = int(pos)
            w[lo][j] += 1.0 - (pos - lo)
            w[min(lo + 1, n - 1)][j] += pos - lo
        return torch.tensor(w, dtype=x.dtype, device=x.device)

    q10, q50, q90 = (x.sort().values @ cached(_QUANTILE_W, (n, x.dtype, str(x.device)), build)).unbind()
    return {"lambda_mean": x.mean(), "lambda_q10": q10, "lambda_q50": q50, "lambda_q90": q90}


class _TwoViewLoss(nn.Module):
    def __init__(self, tau: float = 0.5, layout: str = "simclr"):
        super().__init__()
        tau = check_tau(tau)
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.tau = tau
        self.layout = layout
        self.last_stats: dict[str, torch.Tensor] = {}

    def similarities(self, z1: torch.Tensor, z2: torch.Tensor):
        """``(sim, targets, mask)`` of the two views for this module's layout (SPEC section 1)."""
        out = pair_similarities(z1, z2, self.layout)
        check_tau_dtype(self.tau, z1.dtype)  # Python arithmetic: no device work
        return out

    def batch(self, z1: torch.Tensor, z2: torch.Tensor):
        """``(sim, targets, invalid, K)``: as :meth:`similarities` with the mask's complement
        built directly, for the internal loss functions."""
        out = two_view_batch(z1, z2, self.layout)
        check_tau_dtype(self.tau, z1.dtype)
        return out

    def extra_repr(self) -> str:
        return f"tau={self.tau}, layout={self.layout!r}"


@register_loss("infonce")
class InfoNCELoss(_TwoViewLoss):
    """InfoNCE / NT-Xent on two views (SPEC section 2)."""

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        sim, targets, invalid, _ = self.batch(z1, z2)
        return _info_nce(sim, targets, invalid, self.tau)


@register_loss("infonce_topm")
class InfoNCETopMLoss(_TwoViewLoss):
    """InfoNCE + ``w_soft * L_soft_topM``: isolates the recipe's softmax top-M term."""

    def __init__(self, tau: float = 0.5, layout: str = "simclr", top_m: int = 50, w_soft: float = 0.5):
        super().__init__(tau, layout)
        if top_m < 1:
            raise ValueError(f"top_m must be >= 1, got {top_m!r}")
        self.top_m, self.w_soft = int(top_m), float(w_soft)

    def forward(self, z1, z2):
        sim, targets, invalid, K = self.batch(z1, z2)
        base = _info_nce(sim, targets, invalid, self.tau)
        with torch.no_grad():
            neg = negative_values(sim.detach(), targets, invalid)
            idx = torch.topk(neg, min(self.top_m, K), dim=1, sorted=True).indices
        return base + self.w_soft * topm_softmax(sim, targets, None, self.tau, self.top_m, idx)


@register_loss("weince")
class WEINCELoss(_TwoViewLoss):
    """WEINCE on two views (SPEC 3.1-3.3); keyword arguments as :func:`weince.losses.weince`."""

    def __init__(self, tau: float = 0.5, layout: str = "simclr", *, q: float = 0.2,
                 margin: float = 2.0, kappa_rho: float = 10.0, kappa_aic: float = 1.0,
                 tail_frac: float = 0.10, min_tail: int = 32, eps: float = 1e-6, beta: str = "one",
                 gate: str = "both", lam: float | None = None, beta_min: float = 0.5,
                 beta_max: float = 16.0):
        super().__init__(tau, layout)
        check_weince_args(tau, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps, beta, gate,
                          lam, beta_min, beta_max)
        self.opts = dict(q=q, margin=margin, kappa_rho=kappa_rho, kappa_aic=kappa_aic,
                         tail_frac=tail_frac, min_tail=min_tail, eps=eps, beta=beta, gate=gate,
                         lam=lam, beta_min=beta_min, beta_max=beta_max)

    def core(self, z1, z2, topk_extra: int = 0):
        sim, targets, invalid, K = self.batch(z1, z2)
        half = z1.shape[0] if self.layout == "simclr" else None
        loss, stats = _weince(sim, targets, invalid, K, self.tau, return_stats=True,
                              topk_extra=topk_extra, half=half, **self.opts)
        # 0-d float64 tensors (read with float()); nothing here waits for the device
        self.last_stats = {**_quantiles(stats["lambda"]), "rho0": stats["log_rho0"].exp(),
                           "daic_mean": stats["daic"].mean(), "beta_w_mean": stats["beta_w"].mean()}
        return loss, sim, targets, invalid, K, stats

    def forward(self, z1, z2):
        return self.core(z1, z2)[0]

    def extra_repr(self) -> str:
        return super().extra_repr() + ", " + ", ".join(f"{k}={v!r}" for k, v in self.opts.items())


@register_loss("weince_recipe")
class WEINCERecipeLoss(WEINCELoss):
    """The authors' training recipe (SPEC 3.4): WEINCE ``+ w_weib * L_weib_topM +
    w_soft * L_soft_topM`` with a batch-level ``beta_t`` kept as an EMA in a buffer (saved in
    ``state_dict``; updated in training mode only, before it is used for the batch, as the
    official code does)."""

    def __init__(self, tau: float = 0.5, layout: str = "simclr", *, top_m: int = 50,
                 w_weib: float = 0.5, w_soft: float = 0.5, beta_t_init: float = 4.0,
                 momentum: float = 0.9, r2_min: float = 0.85, beta_t_min: float = 0.5,
                 beta_t_max: float = 16.0, pool_min: int = 1024, pool_frac: float = 0.05, **kwargs):
        super().__init__(tau, layout, **kwargs)
        if top_m < 1:
            raise ValueError(f"top_m must be >= 1, got {top_m!r}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must lie in [0, 1), got {momentum!r}")
        self.top_m, self.w_weib, self.w_soft = int(top_m), float(w_weib), float(w_soft)
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

    def forward(self, z1, z2):
        loss, sim, targets, invalid, K, stats = self.core(z1, z2, topk_extra=self.top_m)
        eps = self.opts["eps"]
        if self.training:  # the EMA step comes before beta_t is used, as in the official code
            k = pool_size(sim.shape[0] * K, self.pool_min, self.pool_frac)
            if stats["neg"] is None:  # CPU path: NumPy selection straight from sim
                half = z1.shape[0] if self.layout == "simclr" else None
                top = pooled_top_cpu(sim, k, targets, invalid, half)
            else:
                top = torch.topk(stats["neg"].flatten(), k, sorted=True).values
            self._ema(*fit_pooled(top, k, eps))
        idx = stats["top_idx"]
        m = min(self.top_m, K)
        idx = idx if idx.shape[1] == m else idx[:, :m]
        # the candidates (positive first) are gathered once for both top-M terms
        s = sim if sim.dtype in (torch.float32, torch.float64) else sim.float()
        cand = s.gather(1, torch.cat([targets.view(-1, 1), idx], dim=1))
        if self.w_weib and self.w_weib == self.w_soft:
            # both cross-entropies over one stacked batch: w (mean_W + mean_S) = 2w mean_stacked
            weib = torch.log1p(cand.clamp(max=1.0 - eps).neg_()).mul_(-self.beta_t)
            both = torch.cat([weib, cand * (1.0 / self.tau)], dim=0)
            loss = loss + (2 * self.w_soft) * F.cross_entropy(both, self._zeros(both))
        else:
            if self.w_weib:
                weib = torch.log1p(cand.clamp(max=1.0 - eps).neg_()).mul_(-self.beta_t)
                loss = loss + self.w_weib * F.cross_entropy(weib, self._zeros(weib))
            if self.w_soft:
                soft = cand * (1.0 / self.tau)
                loss = loss + self.w_soft * F.cross_entropy(soft, self._zeros(soft))
        self.last_stats["beta_t"] = self.beta_t.clone()
        return loss

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
    """Ablation: the recipe without its Weibull top-M term (WEINCE + ``w_soft * L_soft_topM``)."""

    def __init__(self, tau: float = 0.5, layout: str = "simclr", **kwargs):
        kwargs["w_weib"] = 0.0
        super().__init__(tau, layout, **kwargs)
