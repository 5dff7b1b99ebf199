"""The name -> loss module registry: training configs name their loss, :func:`build_loss`
makes it. Every loss module registers itself with :func:`register_loss`
(:mod:`weince.losses.modules`, :mod:`weince.losses.baselines`).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

__all__ = ["LOSSES", "register_loss", "build_loss"]

LOSSES: dict[str, type[nn.Module]] = {}


def register_loss(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator: make a loss module available to :func:`build_loss` by ``name``.

    Args:
        name: the registry key (the ``loss.name`` of a training config).

    Raises:
        ValueError: ``name`` is already registered to another class.

    Example:
        >>> from weince.losses import LOSSES, InfoNCELoss, build_loss, register_loss
        >>> @register_loss("my_infonce")
        ... class MyInfoNCE(InfoNCELoss):
        ...     pass
        >>> type(build_loss("my_infonce", tau=0.2)).__name__
        'MyInfoNCE'
        >>> del LOSSES["my_infonce"]
    """
    def deco(cls):
        if name in LOSSES and LOSSES[name] is not cls:
            raise ValueError(f"loss name {name!r} is already registered to {LOSSES[name].__name__}")
        LOSSES[name] = cls
        cls.loss_name = name
        return cls
    return deco


def build_loss(name: str, **kwargs) -> nn.Module:
    """Instantiate a registered loss module by name (training code picks losses from config).

    The names: ``"infonce"`` (:class:`InfoNCELoss`), ``"weince"`` (:class:`WEINCELoss`),
    ``"weince_recipe"`` (:class:`WEINCERecipeLoss`, the authors' training recipe),
    ``"weince_recipe_no_weib"`` (:class:`WEINCERecipeNoWeibLoss`), ``"infonce_topm"``
    (:class:`InfoNCETopMLoss`), and the hard-negative baselines ``"hcl"``, ``"dcl"``,
    ``"dclw"`` (:mod:`weince.losses.baselines`); ``LOSSES`` maps every name to its class.

    Args:
        name: a registered name (above, or one added with :func:`register_loss`).
        **kwargs: the class's keyword arguments (``tau``, ``layout``,
            ``gather_distributed``, and the loss's own options).

    Returns:
        The ``nn.Module``; call it as ``loss_fn(z1, z2)``.

    Raises:
        ValueError: an unknown ``name`` (the message lists the valid ones), or options the
            class does not take or refuses.

    Example:
        >>> from weince.losses import build_loss
        >>> loss_fn = build_loss("weince_recipe", tau=0.5, top_m=20)
        >>> type(loss_fn).__name__, float(loss_fn.beta_t)
        ('WEINCERecipeLoss', 4.0)
        >>> build_loss("nce")
        Traceback (most recent call last):
        ...
        ValueError: unknown loss 'nce'; valid names: [...]
    """
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; valid names: {sorted(LOSSES)}")
    try:
        return LOSSES[name](**kwargs)
    except TypeError as err:
        raise ValueError(f"bad options for loss {name!r}: {err}") from err
