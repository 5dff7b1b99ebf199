"""Per-input heat, radial drift and the equilibrium norm (claims N1-N2).

The quantities (``docs/norms.md`` has the full discussion)
----------------------------------------------------------
An input ``x`` of the training set has a pre-normalisation embedding ``z = f(x)`` (the
projection head output for SimCLR; the pooled sentence vector for text), its norm
``R = ||z||`` and direction ``u = z / R``. Place ``x`` in ``K`` random minibatches of the
training distribution (the other members drawn afresh each time, ``x``'s own two views
held fixed) and evaluate the training loss (a module of :mod:`weince.losses`, mean over
the batch) each time. Two gradients of that loss with respect to ``x``'s embedding are
recorded per resampling ``k``:

- ``g_pre = dL/dz``: autograd through the loss's own normalisation. The loss is
  scale-invariant in ``z``, so ``<g_pre, z> = 0`` exactly (Euler's theorem) and
  ``||g_pre||`` carries a factor ``1 / R``. Its radial part is reported only as a check.
- ``g = dL/du``: the gradient with respect to the unit embedding, the similarities
  ``s_ij = <u_i, u_j>`` treated as functions of free vectors (no re-normalisation in the
  backward pass). Its tangential part is ``R * g_pre``; its radial part
  ``<g, u> = sum_j s_ij dL/ds_ij`` (row and column terms) is the radial force on ``x``.

Per input, over the ``K`` resamplings (each averaged over ``x``'s two views):

- **drift** ``D_rad = mean_k <g_k, u>``: the mean radial component of the gradient
  (paper's N2 quantity). Under gradient **descent** the norm moves along
  ``-<g, u>``, so ``D_out = -D_rad`` is the outward drift of the norm.
- **heat** ``Sigma^2 = sum_dims Var_k(g_k)`` (unbiased, trace of the covariance of the
  minibatch gradients); ``heat_pre`` is the same for ``g_pre`` (``= heat_tangential / R^2``:
  it falls with the norm by construction, which is why ``g`` is the default).
- **equilibrium** (N1): ``R_eq^2 = (D* + sqrt(D*^2 + 2 V*^2)) / 2`` with
  ``D* = D_out / (eta * lambda_rad)`` and ``V*^2 = Sigma^2 / (eta * lambda_rad)``: the
  positive root of ``eta lambda R^4 = D_out R^2 + Sigma^2 / 2``.

``eta * lambda_rad`` is the per-step multiplicative decay ``p <- p - eta * lambda * p``:
``lr * weight_decay`` for AdamW and for SGD (where L2 and decoupled decay coincide). For
Adam with ``weight_decay`` (the embedded default's option, 1e-6; the official WEINCE
protocol has none, so N1 is not testable on its encoders: ``docs/protocol.md``) the decay
is L2-coupled, rescaled per coordinate by Adam's preconditioner: N1's premise
(decoupled decay) does not hold exactly and :func:`decay_rate` says so.

Vectorised: the encoder runs once per input (batched, no parameter gradients); the ``K``
resamplings reuse the cached view embeddings, and each loss call yields the gradients of
``probes_per_batch`` inputs at once (one backward pass). The ``K * n / probes_per_batch``
minibatches are a Python loop of loss calls: ``torch.func.vmap`` over them works for
InfoNCE but not for WEINCE, whose fused backward is a custom ``autograd.Function``
without vmap support, and its first-call overhead outweighs the gain at our sizes.

    from weince.norms.analysis import gradient_statistics, equilibrium_norm_sq
    gs = gradient_statistics(probe_views, bank_views, build_loss("infonce"), resamples=8)
    r_eq = equilibrium_norm_sq(-gs.drift, gs.heat, eta=3e-4, lambda_rad=1e-6).sqrt()
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

__all__ = ["GradientStats", "gradient_statistics", "equilibrium_norm_sq", "decay_rate",
           "straight_through_normalize", "radial_loss", "resample_plan", "DECOUPLED_OPTIMIZERS"]

# optimisers whose weight decay is a per-step multiplicative shrink p <- p (1 - lr * wd)
DECOUPLED_OPTIMIZERS = ("adamw", "sgd", "sgdw")


def equilibrium_norm_sq(drift_out: Any, heat: Any, eta: float, lambda_rad: float) -> torch.Tensor:
    """``R_eq^2 = (D* + sqrt(D*^2 + 2 V*^2)) / 2`` (claim N1).

    Args:
        drift_out: ``D_out``, the outward radial drift of the norm under gradient descent
            (``-<g, u>``), any shape.
        heat: ``Sigma^2 >= 0``, same shape.
        eta, lambda_rad: learning rate and decoupled weight-decay rate (both > 0).
    Returns:
        float64 tensor of ``R_eq^2`` (``D*`` when ``V = 0`` and ``D* > 0``; 0 when ``V = 0``
        and ``D* <= 0``).
    """
    if not (eta > 0 and lambda_rad > 0):
        raise ValueError(f"eta and lambda_rad must be positive (no decay, no equilibrium), got "
                         f"eta={eta}, lambda_rad={lambda_rad}")
    d = torch.as_tensor(drift_out, dtype=torch.float64)
    v2 = torch.as_tensor(heat, dtype=torch.float64)
    if bool((v2 < 0).any()):
        raise ValueError("heat must be non-negative (a variance)")
    c = float(eta) * float(lambda_rad)
    ds, vs2 = d / c, v2 / c
    # (D* + sqrt(D*^2 + 2 V*^2)) / 2, written to avoid cancellation for D* << 0:
    # for D* < 0 it equals V*^2 / (sqrt(D*^2 + 2 V*^2) - D*)
    root = torch.sqrt(ds * ds + 2.0 * vs2)
    pos = (ds + root) / 2.0
    denom = root - ds
    neg = torch.where(denom > 0, vs2 / torch.where(denom > 0, denom, torch.ones_like(denom)),
                      torch.zeros_like(denom))
    return torch.where(ds >= 0, pos, neg)


def decay_rate(optimizer: str, lr: float | None, weight_decay: float | None) -> dict[str, Any]:
    """``eta``, ``lambda_rad`` and whether N1's premise (decoupled decay) holds.

    ``eta = lr`` and ``lambda_rad = weight_decay`` in every case (the per-step shrink
    ``eta * lambda_rad``); ``decoupled`` is False for ``adam`` (L2-coupled decay), and a
    ``note`` says what that means for N1. ``testable`` is False without weight decay.
    """
    opt = str(optimizer or "unknown").lower()
    eta = float(lr) if lr is not None else float("nan")
    lam = float(weight_decay) if weight_decay is not None else float("nan")
    decoupled = opt in DECOUPLED_OPTIMIZERS
    if opt == "adam":
        note = ("Adam's weight_decay is L2-coupled (added to the gradient, then rescaled by "
                "the adaptive preconditioner), so N1's premise of decoupled decay holds only "
                "approximately; eta * lambda_rad = lr * weight_decay is the nominal rate")
    elif decoupled:
        note = f"{opt}: decoupled (or, for SGD, equivalent) decay p <- p - lr * wd * p"
    else:
        note = f"optimizer {opt!r}: decay coupling unknown; nominal rate lr * weight_decay"
    testable = math.isfinite(eta) and math.isfinite(lam) and eta > 0 and lam > 0
    if not testable:
        note += "; no positive lr * weight_decay, so there is no equilibrium to predict"
    return {"optimizer": opt, "eta": eta, "lambda_rad": lam, "decoupled": decoupled,
            "testable": testable, "note": note}


class _StraightNormalize(torch.autograd.Function):
    """``x / ||x||`` forward; identity backward (exact for inputs already of unit norm,
    where it is the gradient with respect to the free unit vector)."""

    @staticmethod
    def forward(ctx, x, dim, eps):
        return x / x.norm(p=2, dim=dim, keepdim=True).clamp_min(eps)

    @staticmethod
    def backward(ctx, g):
        return g, None, None


@contextlib.contextmanager
def straight_through_normalize() -> Iterator[None]:
    """Within the block, ``torch.nn.functional.normalize`` (p=2) passes gradients through
    unchanged, so a loss that normalises inside, fed unit vectors, returns the gradient
    with respect to those unit vectors *including* its radial component.

    Every loss of :mod:`weince.losses` normalises with ``F.normalize`` at call time, so
    this reaches them without touching their code; :func:`gradient_statistics` checks
    that it did (a loss normalising some other way would show no radial component)."""
    orig = F.normalize

    def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
        if p != 2 or out is not None:
            return orig(input, p=p, dim=dim, eps=eps, out=out)
        return _StraightNormalize.apply(input, dim, eps)

    F.normalize = normalize
    try:
        yield
    finally:
        F.normalize = orig


class _RadialLoss(nn.Module):
    def __init__(self, loss_fn: nn.Module):
        super().__init__()
        self.inner = copy.deepcopy(loss_fn).eval()

    def forward(self, u1: torch.Tensor, u2: torch.Tensor) -> torch.Tensor:
        with straight_through_normalize():
            return self.inner(u1, u2)


def radial_loss(loss_fn: nn.Module) -> nn.Module:
    """A copy of a two-view loss module (in eval mode, so the recipe's ``beta_t`` buffer
    is not updated) whose gradient with respect to **unit** inputs keeps the radial
    component: the similarities are treated as dot products of free vectors. Its value
    on unit inputs equals the original's."""
    if not isinstance(loss_fn, nn.Module):
        raise ValueError(f"loss_fn must be a loss module (weince.losses.build_loss), got "
                         f"{type(loss_fn).__name__}")
    return _RadialLoss(loss_fn)


def resample_plan(n: int, m: int, resamples: int, batch_size: int, probes_per_batch: int,
                  generator: torch.Generator) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """Minibatch compositions: for every resampling ``k``, the ``n`` probes are shuffled
    into groups of ``probes_per_batch``; each group is completed to ``batch_size`` with
    fillers drawn without replacement from the ``m`` bank items.

    Returns a list of ``(k, probe_idx, filler_idx)``; every probe occurs once per ``k``.
    """
    if resamples < 2:
        raise ValueError(f"resamples must be at least 2 (a variance needs two draws), got "
                         f"{resamples}")
    if not 1 <= probes_per_batch < batch_size:
        raise ValueError(f"need 1 <= probes_per_batch < batch_size, got {probes_per_batch} and "
                         f"{batch_size}")
    if m < batch_size - 1:
        raise ValueError(f"the filler bank has {m} items but a minibatch of {batch_size} needs "
                         f"up to {batch_size - 1}; raise n_bank or lower batch_size")
    plan = []
    for k in range(resamples):
        perm = torch.randperm(n, generator=generator)
        for start in range(0, n, probes_per_batch):
            idx = perm[start:start + probes_per_batch]
            fill = torch.randperm(m, generator=generator)[:batch_size - len(idx)]
            plan.append((k, idx, fill))
    return plan


@dataclass
class GradientStats:
    """Per-input statistics over ``K`` resamplings (every field ``(n,)`` float64 unless
    stated; see the module docstring for the definitions).

    Attributes:
        drift: ``D_rad``, mean radial component of the unit-embedding gradient.
        heat: trace covariance of the unit-embedding gradient.
        heat_pre: trace covariance of the pre-normalisation gradient.
        drift_pre: mean radial component of the pre-normalisation gradient (``~0``: check).
        grad_sq: mean squared norm of the unit-embedding gradient.
        view_norm: ``(n,)`` mean norm of the two views' pre-normalisation embeddings.
        resamples: ``K``; batch_size: minibatch size.
    """

    drift: torch.Tensor
    heat: torch.Tensor
    heat_pre: torch.Tensor
    drift_pre: torch.Tensor
    grad_sq: torch.Tensor
    view_norm: torch.Tensor
    resamples: int
    batch_size: int


def gradient_statistics(probe_views: torch.Tensor, bank_views: torch.Tensor,
                        loss_fn: nn.Module, *, resamples: int = 8, batch_size: int = 64,
                        probes_per_batch: int = 16, seed: int = 0,
                        plan: list | None = None, progress: bool = False,
                        return_grads: bool = False):
    """Heat and drift of every probe input from ``K`` minibatch resamplings.

    Args:
        probe_views: ``(n, 2, d)`` pre-normalisation embeddings of the probes' two views.
        bank_views: ``(m, 2, d)`` the same for the filler bank (other training inputs).
        loss_fn: a two-view loss module (``build_loss(name, tau=..., layout=...)``).
        resamples: ``K``; batch_size: minibatch size (probes + fillers);
        probes_per_batch: probes sharing one minibatch (their gradients come from one
            backward pass).
        seed: seeds the minibatch compositions (or pass ``plan`` from :func:`resample_plan`).
        return_grads: also return the raw gradients ``(K, n, 2, d)`` of the unit embeddings.
    Returns:
        :class:`GradientStats` (and the gradients when ``return_grads``).
    """
    if probe_views.ndim != 3 or probe_views.shape[1] != 2:
        raise ValueError(f"probe_views must be (n, 2, d) (two views per input), got "
                         f"{tuple(probe_views.shape)}")
    if bank_views.ndim != 3 or bank_views.shape[1:] != probe_views.shape[1:]:
        raise ValueError(f"bank_views must be (m, 2, {probe_views.shape[2]}), got "
                         f"{tuple(bank_views.shape)}")
    n, _, d = probe_views.shape
    if plan is None:
        gen = torch.Generator().manual_seed(int(seed))
        plan = resample_plan(n, bank_views.shape[0], resamples, batch_size, probes_per_batch,
                             gen)
    resamples = 1 + max(k for k, _, _ in plan)
    norms = probe_views.norm(dim=-1)                                    # (n, 2)
    if bool((norms == 0).any()):
        raise ValueError("a probe embedding has zero norm; its direction is undefined")
    u = probe_views / norms.unsqueeze(-1)
    ub = torch.nn.functional.normalize(bank_views, dim=-1)
    rloss = radial_loss(loss_fn)
    grads = torch.zeros(resamples, n, 2, d, dtype=probe_views.dtype, device=probe_views.device)
    steps = plan
    if progress:
        steps = tqdm(plan, desc="resamplings", unit="batch", leave=False)
    for k, idx, fill in steps:
        a = u[idx].detach().clone().requires_grad_(True)                # (p, 2, d)
        z1 = torch.cat([a[:, 0], ub[fill, 0]], 0)
        z2 = torch.cat([a[:, 1], ub[fill, 1]], 0)
        loss = rloss(z1, z2)
        (g,) = torch.autograd.grad(loss, a)
        grads[k, idx] = g.detach()
    radial = (grads * u).sum(-1)                                        # (K, n, 2)
    gnorm = grads.norm(dim=-1)
    if bool((gnorm > 0).any()) and float(radial.abs().max()) <= 1e-9 * float(gnorm.max()):
        raise RuntimeError(
            f"{type(loss_fn).__name__} gave gradients with no radial component: it does not "
            "normalise through torch.nn.functional.normalize, so straight_through_normalize "
            "cannot reach it; the radial drift is undefined for this loss module")
    tang = grads - radial.unsqueeze(-1) * u
    g_pre = tang / norms.unsqueeze(-1)                                  # (K, n, 2, d)
    f64 = torch.float64
    stats = GradientStats(
        drift=radial.mean(0).mean(-1).to(f64),
        heat=grads.var(0, unbiased=True).sum(-1).mean(-1).to(f64),
        heat_pre=g_pre.var(0, unbiased=True).sum(-1).mean(-1).to(f64),
        drift_pre=(g_pre * u).sum(-1).mean(0).mean(-1).to(f64),
        grad_sq=(grads * grads).sum(-1).mean(0).mean(-1).to(f64),
        view_norm=norms.mean(-1).to(f64),
        resamples=int(resamples), batch_size=int(batch_size),
    )
    return (stats, grads) if return_grads else stats
