"""Hard-negative baselines from the literature, for the ablations.

Two losses that also change how InfoNCE treats its hardest negatives, so that a gain of
WEINCE can be compared with what existing fixes already give. Both are written from the
papers' formulas on the generic ``(sim, targets, mask)`` batch of ``docs/method.md``,
"Notation" (``K`` negatives per row), with no trainable parameter.

**HCL** -- Robinson, Chuang, Sra, Jegelka, *Contrastive Learning with Hard Negative
Samples*, ICLR 2021. With ``p = exp(s_pos / tau)`` and ``n_j = exp(s_j / tau)`` over the
``K`` negatives ``j`` of a row, the negatives are re-weighted towards the hard ones with
importance weights ``w_j ∝ exp(beta * s_j / tau)`` (concentration ``beta``; ``beta = 0``
is uniform), and the positive-unlabelled debiasing of Chuang et al. (NeurIPS 2020, class
prior ``tau_plus``) removes the expected share of same-class "negatives"::

    Ng   = K / (1 - tau_plus) * ( sum_j w_j n_j / sum_j w_j  -  tau_plus * p )
    Ng   = max(Ng, K * exp(-1 / tau))          # the smallest value K terms can take
    loss = -log( p / (p + Ng) )                # mean over rows

``beta = 0, tau_plus = 0`` is InfoNCE exactly; ``beta = 0, tau_plus > 0`` is the debiased
contrastive loss of Chuang et al. The weights are a differentiable function of the
similarities (no stop-gradient), as the estimator is written in the paper.

**DCL** -- Yeh, Hong, Hsu, Liu, Chen, LeCun, *Decoupled Contrastive Learning*, ECCV 2022.
The positive is taken out of the softmax denominator (the "negative-positive coupling")::

    loss_i = -w_i * s_pos,i / tau + log sum_{j negative} exp(s_ij / tau)

with ``w_i = 1`` (DCL), or (DCLW) the von Mises-Fisher weight
``w_i = 2 - exp(s_pos,i / sigma) / mean_r exp(s_pos,r / sigma)`` over the rows ``r`` of the
batch, which puts more weight on the positive pairs that are far apart (weights average 1).
DCL differs from InfoNCE exactly by the positive term of the denominator:
``info_nce - dcl = mean_i log(1 + exp(s_pos,i / tau) / sum_j exp(s_ij / tau))``.
The loss can be negative.

    >>> import torch
    >>> from weince.losses import build_loss, hcl, pair_similarities
    >>> _ = torch.manual_seed(0)
    >>> z1, z2 = torch.randn(16, 8), torch.randn(16, 8)
    >>> sim, targets, mask = pair_similarities(z1, z2, "simclr")
    >>> hcl(sim, targets, mask, tau=0.5, beta=1.0, tau_plus=0.1).shape
    torch.Size([])
    >>> build_loss("dclw", tau=0.5, sigma=0.5)(z1, z2).shape
    torch.Size([])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from weince.losses._common import check_batch, loss_tau, upcast
from weince.losses.modules import _TwoViewLoss, loss_forward, register_loss

__all__ = ["hcl", "dcl", "HCLLoss", "DCLLoss", "DCLWLoss"]


# ------------------------------------------------------------------ argument checks
def _check_hcl_args(beta: float, tau_plus: float) -> None:
    if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta (HCL concentration on hard negatives) must be a finite number "
                         f">= 0 (0 = uniform weights), got {beta!r}")
    if not (isinstance(tau_plus, (int, float)) and 0.0 <= tau_plus < 1.0):
        raise ValueError(f"tau_plus (HCL class prior: probability that a 'negative' shares the "
                         f"anchor's class) must lie in [0, 1), got {tau_plus!r}")


def _check_sigma(sigma: float | None) -> None:
    if sigma is not None and not (isinstance(sigma, (int, float)) and math.isfinite(sigma)
                                  and sigma > 0):
        raise ValueError(f"sigma (DCLW von Mises-Fisher width) must be a positive number, or "
                         f"None for unweighted DCL, got {sigma!r}")


# ------------------------------------------------------------------ shared pieces
def _split(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None,
           tau: float | torch.Tensor):
    """Scaled logits ``s / tau`` (float32/float64), the positive logit ``(B,)`` and the
    boolean ``(B, C)`` of each row's negatives."""
    s = upcast(sim) / tau
    rows = torch.arange(s.shape[0], device=s.device)
    is_neg = torch.ones_like(s, dtype=torch.bool) if mask is None else mask.clone()
    is_neg[rows, targets] = False
    return s, s[rows, targets], is_neg


# ------------------------------------------------------------------ HCL
def _hcl(sim, targets, mask, K: int, tau: float | torch.Tensor, beta: float, tau_plus: float,
         return_floor: bool = False):
    s, pos, is_neg = _split(sim, targets, mask, tau)
    x = s.masked_fill(~is_neg, 0.0)                      # finite everywhere
    log_w = (beta * x).masked_fill(~is_neg, float("-inf"))  # unnormalised log weights
    # log of the q_beta-weighted mean of exp(s_j / tau) over the negatives
    log_wmean = torch.logsumexp(log_w + x, dim=1) - torch.logsumexp(log_w, dim=1)
    log_k = math.log(K)
    log_floor = torch.zeros_like(pos) + (log_k - 1.0 / tau)   # tau: a float or a tensor
    if tau_plus == 0.0:
        log_ng = torch.maximum(log_k + log_wmean, log_floor)
    else:
        # Ng = K/(1-t+) * wmean * (1 - t+ * p / wmean); d = log(t+ * p / wmean)
        d = math.log(tau_plus) + pos - log_wmean
        ok = d < 0                                        # the correction leaves Ng > 0
        d_safe = d.clamp(max=-1e-6)                       # finite values and gradients
        log_raw = log_k - math.log1p(-tau_plus) + log_wmean + torch.log(-torch.expm1(d_safe))
        log_ng = torch.where(ok, torch.maximum(log_raw, log_floor), log_floor)
    loss = F.softplus(log_ng - pos).mean()                # -log(p / (p + Ng))
    if return_floor:
        return loss, (log_ng <= log_floor).float().mean().detach()
    return loss


def hcl(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
        tau: float | None = None, *, beta: float = 1.0, tau_plus: float = 0.1,
        temperature: float | None = None) -> torch.Tensor:
    """Hard-negative contrastive loss (Robinson et al., ICLR 2021), debiased.

    Args:
        sim: ``(B, C)`` cosine similarities (row = anchor, column = candidate).
        targets: ``(B,)`` integer column of each row's positive.
        mask: optional ``(B, C)`` boolean, ``False`` drops a column for that row; every row
            keeps its positive and the same number ``K`` of negatives.
        tau: temperature, ``> 0``. Default ``0.5``.
        beta: concentration of the importance weights ``∝ exp(beta * s / tau)`` on the
            hardest negatives, ``>= 0`` (``0``: uniform). Paper default 1.0 (SimCLR).
        tau_plus: class prior, the probability that a sampled negative shares the anchor's
            class, in ``[0, 1)``. Paper default 0.1.
        temperature: another name for ``tau``; pass one of the two.

    Returns:
        Scalar loss (float32, float64 for float64 input): mean over rows of
        ``-log(p / (p + Ng))`` with the corrected negative term ``Ng`` clamped at its
        theoretical minimum ``K * exp(-1 / tau)`` (see the module docstring). Computed in
        log space, so it stays finite for small ``tau``.

    Raises:
        ValueError: ``tau <= 0``, ``beta < 0``, ``tau_plus`` outside ``[0, 1)``, mismatched
            shapes, a masked-out positive, or rows with unequal numbers of negatives.

    Example:
        >>> import torch
        >>> from weince.losses import hcl, info_nce, pair_similarities
        >>> sim, targets, mask = pair_similarities(torch.randn(16, 8), torch.randn(16, 8))
        >>> loss = hcl(sim, targets, mask, tau=0.5, beta=1.0, tau_plus=0.1)
        >>> plain = hcl(sim, targets, mask, tau=0.5, beta=0.0, tau_plus=0.0)   # = InfoNCE
        >>> torch.allclose(plain, info_nce(sim, targets, mask, tau=0.5))
        True
    """
    tau = loss_tau(tau, temperature, getattr(sim, "dtype", None))
    _check_hcl_args(beta, tau_plus)
    K = check_batch(sim, targets, mask)
    return _hcl(sim, targets, mask, K, tau, float(beta), float(tau_plus))


# ------------------------------------------------------------------ DCL / DCLW
def _dcl(sim, targets, mask, tau: float | torch.Tensor, sigma: float | None,
         return_weights: bool = False):
    s, pos, is_neg = _split(sim, targets, mask, tau)
    lse_neg = torch.logsumexp(s.masked_fill(~is_neg, float("-inf")), dim=1)
    if sigma is None:
        w = torch.ones_like(pos)
    else:
        # 2 - exp(c_i / sigma) / mean_r exp(c_r / sigma), c = the positive cosine
        w = 2.0 - pos.shape[0] * torch.softmax(pos * (tau / sigma), dim=0)
    loss = (lse_neg - w * pos).mean()
    return (loss, w) if return_weights else loss


def dcl(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
        tau: float | None = None, *, sigma: float | None = None,
        temperature: float | None = None) -> torch.Tensor:
    """Decoupled contrastive loss (Yeh et al., ECCV 2022); DCLW when ``sigma`` is given.

    Args:
        sim, targets, mask: as in :func:`hcl`.
        tau: temperature, ``> 0``. Default ``0.5``.
        sigma: ``None`` for DCL (every positive weighted 1), or the width ``> 0`` of the von
            Mises-Fisher weight of DCLW, ``w_i = 2 - exp(s_pos,i / sigma) /
            mean_r exp(s_pos,r / sigma)`` (paper default 0.5), the mean running over the
            rows of the batch.
        temperature: another name for ``tau``; pass one of the two.

    Returns:
        Scalar loss: mean over rows of ``-w_i s_pos,i / tau + logsumexp_j(s_ij / tau)`` over
        the row's negatives only (the positive is not in the denominator).

    Raises:
        ValueError: ``tau <= 0``, ``sigma <= 0``, mismatched shapes, a masked-out positive,
            or rows with unequal numbers of negatives.

    Example:
        >>> import torch
        >>> from weince.losses import dcl, pair_similarities
        >>> sim, targets, mask = pair_similarities(torch.randn(16, 8), torch.randn(16, 8))
        >>> loss = dcl(sim, targets, mask, tau=0.5)              # DCL
        >>> loss = dcl(sim, targets, mask, tau=0.5, sigma=0.5)   # DCLW
        >>> loss.shape
        torch.Size([])
    """
    tau = loss_tau(tau, temperature, getattr(sim, "dtype", None))
    _check_sigma(sigma)
    check_batch(sim, targets, mask)
    return _dcl(sim, targets, mask, tau, None if sigma is None else float(sigma))


# ------------------------------------------------------------------ modules
def _num_negatives(sim: torch.Tensor, mask: torch.Tensor | None) -> int:
    # pair_similarities: "pairs" has no mask (K = C - 1); "simclr" masks the diagonal
    return sim.shape[1] - 1 if mask is None else sim.shape[1] - 2


@register_loss("hcl")
class HCLLoss(_TwoViewLoss):
    """HCL (Robinson et al., ICLR 2021) on two views; see :func:`hcl`.

    Args:
        tau: temperature. layout: ``"simclr"`` or ``"pairs"`` (see
            :func:`weince.losses.pair_similarities`).
        beta: hardness concentration ``>= 0``. tau_plus: class prior in ``[0, 1)``.
        temperature: another name for ``tau`` (give one of the two).
        gather_distributed: as in :class:`weince.losses.InfoNCELoss`. The baselines take
            no memory bank (their formulas are written for in-batch negatives).

    ``forward(z1, z2)`` with ``z1, z2`` ``(N, d)`` (normalised inside) returns the scalar
    loss; ``last_stats["hcl_floor_frac"]`` is the fraction of rows whose corrected negative
    term sits at its floor ``K exp(-1/tau)``.
    """

    def __init__(self, tau: float | None = None, layout: str = "simclr", *, beta: float = 1.0,
                 tau_plus: float = 0.1, temperature: float | None = None,
                 gather_distributed: bool = False):
        super().__init__(tau, layout, temperature=temperature,
                         gather_distributed=gather_distributed)
        _check_hcl_args(beta, tau_plus)
        self.beta, self.tau_plus = float(beta), float(tau_plus)

    @loss_forward
    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        sim, targets, mask = self.similarities(z1, z2)
        loss, floor_frac = _hcl(sim, targets, mask, _num_negatives(sim, mask), self.tau,
                                self.beta, self.tau_plus, return_floor=True)
        self.last_stats = {"hcl_floor_frac": floor_frac}
        return loss

    def extra_repr(self) -> str:
        return self.base_repr() + f", beta={self.beta}, tau_plus={self.tau_plus}"


@register_loss("dcl")
class DCLLoss(_TwoViewLoss):
    """DCL (Yeh et al., ECCV 2022) on two views: InfoNCE without the positive in the
    denominator; see :func:`dcl`. ``forward(z1, z2)``, ``z1, z2`` ``(N, d)``. Options
    ``tau`` (or ``temperature``), ``layout``, ``gather_distributed`` as in
    :class:`HCLLoss`."""

    sigma: float | None = None

    def __init__(self, tau: float | None = None, layout: str = "simclr", *,
                 temperature: float | None = None, gather_distributed: bool = False):
        super().__init__(tau, layout, temperature=temperature,
                         gather_distributed=gather_distributed)

    @loss_forward
    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        sim, targets, mask = self.similarities(z1, z2)
        loss, w = _dcl(sim, targets, mask, self.tau, self.sigma, return_weights=True)
        if self.sigma is not None:
            w = w.detach()
            self.last_stats = {"dclw_w_min": w.min(), "dclw_w_max": w.max()}
        return loss

    def extra_repr(self) -> str:
        return self.base_repr()


@register_loss("dclw")
class DCLWLoss(DCLLoss):
    """DCLW (Yeh et al., ECCV 2022): DCL with the von Mises-Fisher weight of width
    ``sigma`` (default 0.5) on each positive term; see :func:`dcl`. ``last_stats`` holds
    the smallest and largest weight of the batch."""

    def __init__(self, tau: float | None = None, layout: str = "simclr", *, sigma: float = 0.5,
                 temperature: float | None = None, gather_distributed: bool = False):
        super().__init__(tau, layout, temperature=temperature,
                         gather_distributed=gather_distributed)
        _check_sigma(sigma)
        if sigma is None:
            raise ValueError("DCLWLoss needs a positive sigma; use the 'dcl' loss for no weight")
        self.sigma = float(sigma)

    def extra_repr(self) -> str:
        return self.base_repr() + f", sigma={self.sigma}"
