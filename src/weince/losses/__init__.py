"""Losses: InfoNCE, WEINCE, the authors' recipe terms, and a name -> module registry.

Functional API (SPEC 3.5)::

    from weince.losses import info_nce, weince
    loss = info_nce(sim, targets, mask=None, tau=0.5)
    loss, stats = weince(sim, targets, mask, tau=0.5, return_stats=True)

Modules for two-view batches: ``InfoNCELoss``, ``WEINCELoss``, ``WEINCERecipeLoss``,
``InfoNCETopMLoss``; hard-negative baselines ``hcl``, ``dcl``, ``dclw``
(``weince.losses.baselines``); ``build_loss(name, **kwargs)`` picks one by name.
"""

from weince.losses._common import pair_similarities
from weince.losses.infonce import info_nce
from weince.losses.modules import (
    LOSSES,
    InfoNCELoss,
    InfoNCETopMLoss,
    WEINCELoss,
    WEINCERecipeLoss,
    WEINCERecipeNoWeibLoss,
    build_loss,
    register_loss,
)
from weince.losses.recipe import fit_batch_beta, topm_softmax, topm_weibull
from weince.losses import baselines  # noqa: F401,E402  (registers hcl, dcl, dclw)
from weince.losses.weince import tail_size, weince, weince_statistics

__all__ = [
    "info_nce", "weince", "weince_statistics", "tail_size", "pair_similarities",
    "topm_softmax", "topm_weibull", "fit_batch_beta",
    "InfoNCELoss", "WEINCELoss", "WEINCERecipeLoss", "WEINCERecipeNoWeibLoss", "InfoNCETopMLoss",
    "LOSSES", "build_loss", "register_loss",
]
