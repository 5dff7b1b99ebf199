"""Losses: InfoNCE, WEINCE, the authors' recipe terms and hard-negative baselines (torch).

Functional API (``docs/method.md`` has the method, ``docs/using-the-loss.md`` advice)::

    from weince.losses import info_nce, weince
    loss = info_nce(sim, targets, mask=None, tau=0.5)
    loss, stats = weince(sim, targets, mask, tau=0.5, return_stats=True)

Modules for two-view batches: ``InfoNCELoss``, ``WEINCELoss``, ``WEINCERecipeLoss``,
``InfoNCETopMLoss`` (each with an optional FIFO memory bank of negatives,
``memory_bank_size=Q``: ``weince.losses.bank``); hard-negative baselines ``HCLLoss``,
``DCLLoss``, ``DCLWLoss`` and their functional forms ``hcl``, ``dcl``
(``weince.losses.baselines``); ``build_loss(name, **kwargs)`` picks one by name. For two
encoders' paired batches (CLIP-style, both directions): ``DualEncoderLoss`` and
``dual_encoder_loss`` (``weince.losses.dual``); open_clip's ``ClipLoss`` call:
``OpenCLIPLoss`` and ``clip_dual_loss``. The public names are also importable from
``weince`` itself (``from weince import WEINCELoss``).

``weince`` below is the function; its module stays reachable as
``sys.modules["weince.losses.weince"]``.
"""

# Layout: the type of a layout argument ("simclr" or "pairs"), for annotations
from weince.losses._common import Layout as Layout
from weince.losses._common import pair_similarities, queue_similarities
from weince.losses.infonce import info_nce
from weince.losses.modules import LOSSES, InfoNCELoss, WEINCELoss, build_loss, register_loss
from weince.losses.recipe import (InfoNCETopMLoss, WEINCERecipeLoss,  # registers the recipe's
                                  WEINCERecipeNoWeibLoss, fit_batch_beta, topm_softmax,
                                  topm_weibull)
from weince.losses.baselines import DCLLoss, DCLWLoss, HCLLoss, dcl, hcl  # registers hcl, dcl, dclw
from weince.losses.dual import DualEncoderLoss, OpenCLIPLoss, clip_dual_loss, dual_encoder_loss
# last: binds the package's name ``weince`` to the function (importing the submodule above
# bound it to the module)
from weince.losses.weince import ShortTailWarning, tail_size, weince, weince_statistics

__all__ = [
    "info_nce", "weince", "weince_statistics", "tail_size", "pair_similarities",
    "queue_similarities", "topm_softmax", "topm_weibull", "fit_batch_beta", "hcl", "dcl",
    "InfoNCELoss", "WEINCELoss", "WEINCERecipeLoss", "WEINCERecipeNoWeibLoss", "InfoNCETopMLoss",
    "HCLLoss", "DCLLoss", "DCLWLoss", "DualEncoderLoss", "dual_encoder_loss",
    "OpenCLIPLoss", "clip_dual_loss",
    "LOSSES", "build_loss", "register_loss", "ShortTailWarning",
]
