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


def _call(guarded, self, *args):
    """The method ``guarded`` of a torch optimiser class (a function) on ``self``, as the
    function it wraps outside compiled regions, as itself inside one."""
    raw = inspect.unwrap(guarded)
    if raw is guarded or torch.compiler.is_compiling():
        return guarded(self, *args)
    return raw(self, *args)


def _torch_method(obj, name: str):
    """``name`` of the first ``torch.optim`` class in ``obj``'s bases (a function)."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("torch.optim") and name in vars(cls):
            return vars(cls)[name]
    raise AttributeError(name)


class EagerOptimizer:
    """Mixin, before a ``torch.optim`` class in the bases: its guarded methods run unguarded
    outside ``torch.compile`` (module docstring)."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _call(_torch_method(self, "add_param_group"), self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _call(_torch_method(self, "zero_grad"), self, set_to_none)

    def state_dict(self):
        return _call(_torch_method(self, "state_dict"), self)

    def load_state_dict(self, state_dict) -> None:
        _call(_torch_method(self, "load_state_dict"), self, state_dict)

    def step(self, closure=None):
        guarded = _torch_method(self, "step")
        raw = inspect.unwrap(guarded)
        if raw is guarded or torch.compiler.is_compiling():
            return guarded(self, closure)
        # what torch's guard does around the update in eager mode
        with torch.set_grad_enabled(self.defaults["differentiable"]):  # type: ignore[attr-defined]
            return raw(self, closure)


class Adam(EagerOptimizer, torch.optim.Adam):
    """``torch.optim.Adam`` (same arguments, same updates) without importing
    ``torch._dynamo`` in eager runs."""


class AdamW(EagerOptimizer, torch.optim.AdamW):
    """``torch.optim.AdamW`` (same arguments, same updates) without importing
    ``torch._dynamo`` in eager runs."""
