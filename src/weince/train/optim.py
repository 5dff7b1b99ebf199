"""``torch.optim`` optimisers whose eager calls do not import ``torch._dynamo``.

torch guards ``Optimizer.add_param_group`` (so every constructor), ``step``, ``zero_grad``,
``state_dict`` and ``load_state_dict`` for ``torch.compile``: the first call of each
imports ``torch._dynamo``, about 1.3 CPU-seconds (and as much again as ``import torch``
itself) in every process that builds an optimiser, whether or not anything is compiled.
Outside a compiled region these guards do nothing else: ``step``'s sets grad mode to the
group's ``differentiable`` flag around the update, the others call the method as it is.

The classes here call the very functions torch's guards wrap (reached through their
``__wrapped__`` chain), with the same arguments, so every update, state and checkpoint is
torch's bit for bit (``tests/train/test_optim.py``); inside a compiled region, or where a
torch release no longer exposes the wrapped function, they defer to torch's guarded method.

    from weince.train.optim import Adam
    opt = Adam(model.parameters(), lr=1e-3)      # torch.optim.Adam, without the start-up
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

__all__ = ["Adam", "AdamW", "EagerOptimizer"]


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
