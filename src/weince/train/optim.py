"""``torch.optim`` optimisers whose eager calls do not import ``torch._dynamo``.

torch guards ``Optimizer.add_param_group`` (so every constructor), ``step``, ``zero_grad``,
``state_dict`` and ``load_state_dict`` for ``torch.compile``: the first call of each
imports ``torch._dynamo`` in every process that builds an optimiser, whether or not
anything is compiled (its cost: docs/performance.md, ``benchmarks/optimizer_startup.py``).
Outside a compiled region these guards do nothing else: ``step``'s sets grad mode to the
group's ``differentiable`` flag around the update, the others call the method as it is.

The classes here call the very functions torch's guards wrap (reached through their
``__wrapped__`` chain), with the same arguments, so every update, state and checkpoint is
torch's bit for bit (``tests/train/test_optim.py``); inside a compiled region, or where a
torch release no longer exposes the wrapped function, they defer to torch's guarded method.

    from weince.train.optim import Adam
    opt = Adam(model.parameters(), lr=1e-3)      # torch.optim.Adam, without the start-up

A pretraining run's optimiser and learning-rate schedule come from its config here too
(:func:`build_optimizer`, :func:`build_scheduler`; :class:`LARS` is the option beside Adam).
"""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from weince.train.config import SimCLRConfig

__all__ = ["Adam", "AdamW", "EagerOptimizer", "LARS", "build_optimizer", "build_scheduler"]


_RESOLVED: dict[tuple[type, str], tuple[Any, Any]] = {}


def _methods(cls: type, name: str) -> tuple[Any, Any]:
    """``(guarded, raw)``: ``name`` of the first ``torch.optim`` class in ``cls``'s bases
    (a function) and the function its guards wrap (``guarded`` itself where a torch
    release exposes none); resolved once per class and name."""
    key = (cls, name)
    if key not in _RESOLVED:
        guarded = next(vars(c)[name] for c in cls.__mro__
                       if c.__module__.startswith("torch.optim") and name in vars(c))
        _RESOLVED[key] = guarded, inspect.unwrap(guarded)
    return _RESOLVED[key]


def _call(self, name: str, *args):
    """torch's method ``name`` on ``self``: the function its guards wrap outside compiled
    regions (``step`` in the grad mode torch's guard sets), the guarded method inside one."""
    guarded, raw = _methods(type(self), name)
    if raw is guarded or torch.compiler.is_compiling():
        return guarded(self, *args)
    if name != "step":
        return raw(self, *args)
    # what torch's guard does around the update in eager mode
    with torch.set_grad_enabled(self.defaults["differentiable"]):
        return raw(self, *args)


class EagerOptimizer:
    """Mixin, before a ``torch.optim`` class in the bases: its guarded methods run unguarded
    outside ``torch.compile`` (module docstring)."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _call(self, "add_param_group", param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _call(self, "zero_grad", set_to_none)

    def state_dict(self):
        return _call(self, "state_dict")

    def load_state_dict(self, state_dict) -> None:
        _call(self, "load_state_dict", state_dict)

    def step(self, closure=None):
        return _call(self, "step", closure)


class Adam(EagerOptimizer, torch.optim.Adam):
    """``torch.optim.Adam`` (same arguments, same updates) without importing
    ``torch._dynamo`` in eager runs."""


class AdamW(EagerOptimizer, torch.optim.AdamW):
    """``torch.optim.AdamW`` (same arguments, same updates) without importing
    ``torch._dynamo`` in eager runs."""


class LARS(EagerOptimizer, torch.optim.Optimizer):
    """LARS (You et al. 2017) as used by SimCLR: SGD with momentum where each parameter's
    update is scaled by the trust ratio ``eta * ||w|| / ||g + wd * w||``. Parameters in a
    group with ``lars=False`` (biases, norm layers) get plain SGD with momentum and no
    weight decay."""

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 eta: float = 1e-3):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      eta=eta, lars=True))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if group["lars"]:
                    g = g.add(p, alpha=group["weight_decay"])
                    w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(g)
                    trust = torch.where((w_norm > 0) & (g_norm > 0),
                                        group["eta"] * w_norm / g_norm, torch.ones_like(w_norm))
                    g = g * trust
                buf = self.state[p].get("momentum_buffer")
                if buf is None:
                    buf = self.state[p]["momentum_buffer"] = g.clone()
                else:
                    buf.mul_(group["momentum"]).add_(g)
                p.add_(buf, alpha=-group["lr"])
        return loss


def build_optimizer(cfg: SimCLRConfig, model: nn.Module) -> torch.optim.Optimizer:
    """A pretraining run's optimiser: :class:`Adam` (``optimizer: adam``, the protocol's:
    lr, weight decay as given) or :class:`LARS` with weight decay on the weight matrices
    only (``optimizer: lars``)."""
    if cfg.optimizer == "adam":
        return Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    decay: list[nn.Parameter] = []
    plain: list[nn.Parameter] = []
    for p in model.parameters():
        (plain if p.ndim <= 1 else decay).append(p)
    return LARS([{"params": decay}, {"params": plain, "lars": False, "weight_decay": 0.0}],
                lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def build_scheduler(cfg: SimCLRConfig, opt: torch.optim.Optimizer, steps_per_epoch: int
                    ) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning-rate factor of every step: a linear warmup over ``warmup_epochs``, then
    constant (``schedule: none``, the protocol's) or a cosine decay to zero."""
    total = cfg.epochs * steps_per_epoch
    warm = cfg.warmup_epochs * steps_per_epoch

    def factor(step: int) -> float:
        if warm and step < warm:
            return (step + 1) / warm
        if cfg.schedule == "none":
            return 1.0
        t = (step - warm) / max(1, total - warm)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)
