"""Dual encoders (CLIP-style): two encoders' batches ``a``, ``b`` of paired items, the loss in
both directions.

Row ``i`` of ``a`` (an image, say) and row ``i`` of ``b`` (its caption) are a positive pair;
the other rows of the other side are the in-batch negatives. With ``S = a b^T`` (cosine
similarities, ``(B, B)``) the ``a -> b`` direction is the loss of ``S`` with the positive
on the diagonal, the ``b -> a`` direction the loss of ``S^T``, and the symmetric loss their
mean, as CLIP trains (``(L(S) + L(S^T)) / 2``). For WEINCE each direction computes its own
per-row statistics: the tail of row ``i`` of ``S`` is image ``i`` against every caption,
the tail of row ``i`` of ``S^T`` caption ``i`` against every image, and each direction has
its own pivot ``rho0``. With ``loss="infonce"`` (or WEINCE at ``lam=0``) the symmetric loss
is CLIP's loss with ``logit_scale = 1 / tau``.

Both forms call the public functional losses (:func:`weince.losses.weince`,
:func:`weince.losses.info_nce`) once per direction.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers

import torch
from torch import nn

from weince.losses._common import (check_reduction, full_precision, loss_tau, negative_counts,
                                   pair_similarities, similarity, unit_rows)
from weince.losses.clip import (WEINCE_KEYS, check_labels, check_logit_scale, clip_logits,
                                direction_loss, label_positives)
from weince.losses.chunked import Rows, check_chunk_size, chunked_info_nce, chunked_weince
from weince.losses.infonce import _info_nce, info_nce
from weince.losses.local import LocalRows, local_pair_rows
from weince.losses.local import _sizes as local_sizes
from weince.losses.weince import _weince, check_weince_args, public_stats, weince
from weince.utils.distributed import gather_with_grad, is_distributed

__all__ = ["dual_encoder_loss", "clip_dual_loss", "DualEncoderLoss", "OpenCLIPLoss", "DIRECTIONS",
           "DUAL_LOSSES"]

DIRECTIONS = ("both", "a_to_b", "b_to_a")
DUAL_LOSSES = ("weince", "infonce")

# keywords of the functional forms that the dual-encoder loss sets itself
_OWN = {"sim", "targets", "mask", "tau", "temperature", "return_stats"}


def _keywords(fn) -> frozenset[str]:
    return frozenset(n for n, p in inspect.signature(fn).parameters.items()
                     if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)) - _OWN


# the options each functional loss takes, read from its signature (so a new keyword of the
# functional form is an option here too)
_OPTIONS = {"weince": _keywords(weince), "infonce": _keywords(info_nce)}


def _options_of(loss: str) -> frozenset[str]:
    return _OPTIONS[loss]


# the functional forms' defaults, for the chunked path (which calls the row losses itself)
_DEFAULTS = {name: {n: p.default for n, p in inspect.signature(fn).parameters.items()
                    if n in _OPTIONS[name]}
             for name, fn in (("weince", weince), ("infonce", info_nce))}


def check_dual_args(loss: str, direction: str, options: dict) -> None:
    """``ValueError`` for an unknown ``loss``, ``direction`` or option."""
    if loss not in DUAL_LOSSES:
        raise ValueError(f"loss must be one of {DUAL_LOSSES}, got {loss!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS} ('both': CLIP's symmetric "
                         f"loss; 'a_to_b': rows of a against b only), got {direction!r}")
    unknown = sorted(set(options) - _options_of(loss))
    if unknown:
        raise ValueError(f"option(s) {unknown} are not options of loss={loss!r}; its options: "
                         f"{sorted(_options_of(loss))}")


def _check_pairs(a, b) -> None:
    for name, z in (("a", a), ("b", b)):
        if not isinstance(z, torch.Tensor) or not z.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor of embeddings of shape "
                             f"(B, d), got {getattr(z, 'dtype', type(z).__name__)}")
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0] or a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must both have shape (B, d) (row i of a paired with row i "
                         f"of b, in one shared space), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] < 2 or a.shape[1] < 1:
        raise ValueError(f"a batch of shape {tuple(a.shape)} gives no negatives: the loss needs "
                         f"B >= 2 pairs (and WEINCE's tail statistics a few dozen) and d >= 1")


def _no_autocast(device: torch.device):
    """A context in which autocast is off on ``device`` (a no-op where autocast does not exist)."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device_type=device.type, enabled=False)
    return contextlib.nullcontext()


def dual_similarities(a: torch.Tensor, b: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """``S = a b^T`` ``(B, B)``: float32 (float64 for float64 input), autocast off; rows
    normalised to unit length first when ``normalize``."""
    _check_pairs(a, b)
    with _no_autocast(a.device):
        wide = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
        a, b = a.to(wide), b.to(wide)
        if normalize:
            return pair_similarities(a, b, "pairs")[0]
        return similarity(a, b)


def dual_encoder_loss(a: torch.Tensor, b: torch.Tensor, tau=None, *, loss: str = "weince",
                      direction: str = "both", mask: torch.Tensor | None = None,
                      normalize: bool = True, temperature=None, return_stats: bool = False,
                      chunk_size: int | None = None, labels: torch.Tensor | None = None,
                      **options):
    """The contrastive loss of two encoders' paired batches, symmetric as in CLIP.

    ``S = a b^T`` (after normalising the rows, unless ``normalize=False``); the loss is
    ``(L(S) + L(S^T)) / 2`` with ``L`` the functional :func:`weince.losses.weince` (or
    :func:`weince.losses.info_nce`), the positive of row ``i`` in column ``i``. Each
    direction computes WEINCE's per-row statistics on its own rows. ``loss="infonce"``,
    and ``loss="weince"`` with ``lam=0``, equal CLIP's loss with ``logit_scale = 1 / tau``
    bit for bit (in CLIP's form: ``cross_entropy(S * logit_scale)`` of ``S`` and of
    ``S.T``, averaged); the gradients agree to rounding.

    Args:
        a: ``(B, d)`` embeddings of the first encoder (images, say), any floating dtype;
            ``B >= 2``.
        b: ``(B, d)`` embeddings of the second encoder (captions), row ``i`` paired with
            ``a[i]``.
        tau: temperature: a number ``> 0``, or a 0-d (or ``(1,)``) tensor (a learnable
            one, e.g. ``1 / logit_scale.exp()``), passed to the functional loss as it is.
            Default ``0.5``.
        loss: ``"weince"`` (default) or ``"infonce"``.
        direction: ``"both"`` (default: ``(a -> b + b -> a) / 2``), ``"a_to_b"`` (rows of
            ``a`` against the candidates ``b``: ``L(S)``) or ``"b_to_a"`` (``L(S^T)``).
        mask: optional ``(B, B)`` boolean over ``S`` (``False``: drop candidate ``j`` for
            anchor ``a[i]``, e.g. a known false negative); ``b -> a`` uses ``mask.T``. The
            functional losses say which masks they accept. Default ``None``.
        normalize: normalise the rows of ``a`` and ``b`` to unit length first (default
            ``True``); ``False`` for features already normalised by the model, as CLIP's
            are.
        temperature: ``tau`` under lightly's name; pass one of the two.
        return_stats: also return WEINCE's statistics of each direction (``loss="weince"``
            only).
        chunk_size: ``None`` (default: ``S`` built whole) or the number of anchors whose
            rows of ``S`` (or ``S^T``) are built at a time, so that memory grows as
            ``chunk_size x B``, forward and backward (:mod:`weince.losses.chunked`); equal
            to the unchunked loss and gradients to rounding.
        labels: optional ``(B,)`` classes: every same-label pair is a positive (the
            supervised-contrastive form, :mod:`weince.losses.clip`), the tails of the
            other-label candidates. Default ``None``.
        **options: the functional loss's own keywords (``q``, ``margin``, ``lam``,
            ``check``, ...: :func:`weince.losses.weince`; ``check`` for InfoNCE).

    Returns:
        The loss (float32; float64 for float64 input: the similarities and the loss are
        computed in that dtype whatever autocast is active), or ``(loss, stats)`` with
        ``stats`` a dict ``{"a_to_b": ..., "b_to_a": ...}`` (the directions computed) of
        the statistics :func:`weince.losses.weince` returns.

    Raises:
        ValueError: ``a``, ``b`` that are not floating ``(B, d)`` tensors of one shape with
            ``B >= 2``, an unknown ``loss``, ``direction`` or option, ``return_stats`` with
            InfoNCE, or whatever the functional loss refuses (a bad ``tau``, say).

    Example:
        >>> import torch
        >>> import torch.nn.functional as F
        >>> from weince.losses import dual_encoder_loss
        >>> _ = torch.manual_seed(0)
        >>> image, text = torch.randn(64, 16), torch.randn(64, 16)
        >>> loss, stats = dual_encoder_loss(image, text, tau=0.07, return_stats=True)
        >>> loss.shape, stats["a_to_b"]["lambda"].shape, stats["b_to_a"]["lambda"].shape
        (torch.Size([]), torch.Size([64]), torch.Size([64]))
        >>> logits = F.normalize(image) @ F.normalize(text).T * (1 / 0.07)   # CLIP's loss
        >>> labels = torch.arange(64)
        >>> clip = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        >>> bool(dual_encoder_loss(image, text, tau=0.07, loss="infonce") == clip)
        True
    """
    check_dual_args(loss, direction, options)
    if return_stats and loss != "weince":
        raise ValueError("return_stats=True needs loss='weince' (InfoNCE has no statistics)")
    chosen = ("a_to_b", "b_to_a") if direction == "both" else (direction,)
    chunk_size = check_chunk_size(chunk_size)
    tau, temperature = scalar_tau(tau), scalar_tau(temperature)
    if labels is not None and chunk_size is not None:
        raise ValueError("labels and chunk_size do not combine; pass chunk_size=None")
    if labels is not None:
        return _labelled_dual(a, b, tau, chosen, loss=loss, mask=mask, normalize=normalize,
                              temperature=temperature, return_stats=return_stats,
                              labels=labels, options=options)
    if chunk_size is not None:
        return _chunked_dual(a, b, tau, chosen, chunk_size, loss=loss, mask=mask,
                             normalize=normalize, temperature=temperature,
                             return_stats=return_stats, options=options)
    return _functional_dual(dual_similarities(a, b, normalize), mask, tau, chosen, loss=loss,
                            temperature=temperature, return_stats=return_stats, options=options)


def _functional_dual(sim, mask, tau, chosen, *, loss: str, temperature, return_stats: bool,
                     options: dict):
    """:func:`dual_encoder_loss` of the similarities ``sim``: the public functional loss of
    each chosen direction, averaged."""
    targets = torch.arange(sim.shape[0], device=sim.device)
    sides = {"a_to_b": (sim, mask), "b_to_a": (sim.T, None if mask is None else mask.T)}
    losses, stats = [], {}
    with _no_autocast(sim.device):
        for name in chosen:
            s, m = sides[name]
            if loss == "infonce":
                losses.append(info_nce(s, targets, m, tau, temperature=temperature, **options))
                continue
            out = weince(s, targets, m, tau, temperature=temperature,
                         return_stats=return_stats, **options)
            if return_stats:
                out, stats[name] = out
            losses.append(out)
    total = (losses[0] + losses[1]) / 2 if len(losses) == 2 else losses[0]
    return (total, stats) if return_stats else total


def _row_options(loss: str, options: dict) -> dict:
    """The functional defaults with ``options`` over them, for :func:`direction_loss`."""
    return {**_DEFAULTS[loss], **options}


def _check_mask(mask, B: int) -> None:
    if mask is not None and (not isinstance(mask, torch.Tensor) or mask.shape != (B, B)
                             or mask.dtype != torch.bool):
        raise ValueError(f"mask must be a boolean ({B}, {B}) tensor over S = a b^T, got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)} of shape "
                         f"{tuple(getattr(mask, 'shape', ()))}")


def _directions(sides: dict, chosen, *, loss: str, opts: dict, targets, labels, tau=None,
                return_stats: bool = False):
    """The loss of each chosen direction (``sides[name] = (s, lin, invalid)``) through
    :func:`weince.losses.clip.direction_loss`, averaged; ``(loss, stats)``."""
    reduction, weight = opts.get("reduction", "mean"), opts.get("weight")
    check_reduction(reduction, weight, targets.shape[0])
    if loss == "weince":
        check_weince_args(0.5 if tau is None else tau, *(opts[k] for k in WEINCE_KEYS))
    losses, stats = [], {}
    for name in chosen:
        s, lin, invalid = sides[name]
        positives = None
        if labels is not None:
            positives = label_positives(labels, labels)
            if invalid is not None:
                positives &= ~invalid
        K = s.shape[1] - 1 if invalid is None else negative_counts((~invalid).sum(dim=1) - 1)
        out, st = direction_loss(s, targets, invalid, K, loss=loss, opts=opts, tau=tau, lin=lin,
                                 positives=positives, reduction=reduction, weight=weight,
                                 return_stats=return_stats)
        if return_stats:
            stats[name] = public_stats(st)
        losses.append(out)
    total = (losses[0] + losses[1]) / 2 if len(losses) == 2 else losses[0]
    return total, stats


def _labelled_dual(a, b, tau, chosen, *, loss: str, mask, normalize: bool, temperature,
                   return_stats: bool, labels, options: dict):
    """:func:`dual_encoder_loss` with ``labels`` (several positives per anchor)."""
    sim = dual_similarities(a, b, normalize)
    B = sim.shape[0]
    check_labels(labels, B)
    _check_mask(mask, B)
    tau = loss_tau(tau, temperature, sim.dtype)
    opts = _row_options(loss, options)
    targets = torch.arange(B, device=sim.device)
    inv = None if mask is None else ~mask
    sides = {"a_to_b": (sim, None, inv), "b_to_a": (sim.T, None, None if inv is None else inv.T)}
    with _no_autocast(sim.device):
        total, stats = _directions(sides, chosen, loss=loss, opts=opts, targets=targets,
                                   labels=labels.to(sim.device), tau=tau,
                                   return_stats=return_stats)
    return (total, stats) if return_stats else total


def clip_dual_loss(a: torch.Tensor, b: torch.Tensor, logit_scale, logit_bias=None, *,
                   loss: str = "weince", direction: str = "both",
                   mask: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                   normalize: bool = False, gathered: bool = False,
                   return_stats: bool = False, **options):
    """The dual-encoder loss in open_clip's form: the logits ``logit_scale * a @ b.T
    (+ logit_bias)`` and ``logit_scale * b @ a.T (+ logit_bias)`` in open_clip's operation
    order (``gathered``: the second is the first's transpose, as open_clip's gathered mode
    computes it), each direction's WEINCE statistics from the cosines ``a @ b.T``. At
    ``lambda = 0`` (or ``loss="infonce"``) it is open_clip's ``ClipLoss`` bit for bit.
    ``normalize`` (default ``False``: open_clip's models return unit features) normalises
    the rows first; other arguments as :func:`dual_encoder_loss`."""
    check_dual_args(loss, direction, options)
    if return_stats and loss != "weince":
        raise ValueError("return_stats=True needs loss='weince' (InfoNCE has no statistics)")
    scale = check_logit_scale(logit_scale)
    if logit_bias is not None and not (isinstance(logit_bias, (torch.Tensor, float, int))
                                       and not isinstance(logit_bias, bool)):
        raise ValueError(f"logit_bias must be a number or a tensor (open_clip's "
                         f"model.logit_bias), got {type(logit_bias).__name__}")
    _check_pairs(a, b)
    chosen = ("a_to_b", "b_to_a") if direction == "both" else (direction,)
    B = a.shape[0]
    _check_mask(mask, B)
    if labels is not None:
        check_labels(labels, B)
    opts = _row_options(loss, options)
    with _no_autocast(a.device):
        wide = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
        a, b = full_precision(a).to(wide), full_precision(b).to(wide)
        if normalize:
            a, b = unit_rows(a), unit_rows(b)
        s = similarity(a, b)
        lin = clip_logits(a, b, scale, logit_bias)
        lin_t = lin.T if gathered else clip_logits(b, a, scale, logit_bias)
        inv = None if mask is None else ~mask
        sides = {"a_to_b": (s, lin, inv), "b_to_a": (s.T, lin_t, None if inv is None else inv.T)}
        total, stats = _directions(sides, chosen, loss=loss, opts=opts,
                                   targets=torch.arange(B, device=a.device),
                                   labels=None if labels is None else labels.to(a.device),
                                   return_stats=return_stats)
    return (total, stats) if return_stats else total


def _dual_rows(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None, normalize: bool,
               check: bool) -> dict[str, Rows]:
    """The :class:`weince.losses.chunked.Rows` of each direction (``a -> b``: rows of ``a``
    against ``b``, ``mask``; ``b -> a``: rows of ``b`` against ``a``, ``mask.T``)."""
    _check_pairs(a, b)
    B = a.shape[0]
    wide = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
    a, b = full_precision(a).to(wide), full_precision(b).to(wide)
    if normalize:
        a, b = unit_rows(a), unit_rows(b)
    idx = torch.arange(B, device=a.device)
    K = B - 1
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.shape != (B, B) or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a boolean ({B}, {B}) tensor over S = a b^T, got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)} of shape "
                             f"{tuple(getattr(mask, 'shape', ()))}")
        if check and not bool(mask.diagonal().all()):
            raise ValueError("the mask drops a positive pair (mask[i, i] is False); every "
                             "pair must stay a valid candidate")
        return {"a_to_b": Rows(a, b, idx, negative_counts(mask.sum(dim=1) - 1), mask=mask),
                "b_to_a": Rows(b, a, idx, negative_counts(mask.sum(dim=0) - 1), mask=mask.T)}
    return {"a_to_b": Rows(a, b, idx, K), "b_to_a": Rows(b, a, idx, K)}


def _chunked_dual(a, b, tau, chosen, chunk_size: int, *, loss: str, mask, normalize: bool,
                  temperature, return_stats: bool, options: dict):
    """:func:`dual_encoder_loss` with ``chunk_size``: each direction's rows a chunk at a
    time (:mod:`weince.losses.chunked`)."""
    opts = {**_DEFAULTS[loss], **options}
    check, reduction, weight = opts.pop("check"), opts.pop("reduction"), opts.pop("weight")
    opts.pop("num_negatives", None)
    sides = _dual_rows(a, b, mask, normalize, bool(check))
    tau = loss_tau(tau, temperature, sides["a_to_b"].anchors.dtype)
    check_reduction(reduction, weight, a.shape[0])
    if loss == "weince":
        check_weince_args(tau, opts["q"], opts["margin"], opts["kappa_rho"], opts["kappa_aic"],
                          opts["tail_frac"], opts["min_tail"], opts["eps"], opts["beta"],
                          opts["gate"], opts["lam"], opts["beta_min"], opts["beta_max"])
    losses, stats = [], {}
    with _no_autocast(a.device):
        for name in chosen:
            if loss == "infonce":
                losses.append(chunked_info_nce(sides[name], tau, chunk_size, reduction, weight))
                continue
            out, st = chunked_weince(sides[name], tau, chunk_size, return_stats=return_stats,
                                     reduction=reduction, weight=weight, **opts)
            if return_stats:
                stats[name] = public_stats(st)
            losses.append(out)
    total = (losses[0] + losses[1]) / 2 if len(losses) == 2 else losses[0]
    return (total, stats) if return_stats else total


def _check_module_tau(tau) -> None:
    """A number must be finite and ``> 0``; a tensor is the caller's (a learnable
    temperature), checked by the functional loss on each call."""
    if tau is None or isinstance(tau, torch.Tensor):
        return
    if isinstance(tau, bool) or not isinstance(tau, numbers.Real) or not (
            math.isfinite(float(tau)) and float(tau) > 0):
        raise ValueError(f"tau must be a finite number > 0 (the softmax temperature) or a 0-d "
                         f"tensor, got {tau!r}")


def scalar_tau(tau):
    """A temperature of shape ``(1,)`` (``1 / logit_scale.exp()`` of an open_clip model
    built with ``nonscalar_logit_scale``) as a 0-d tensor, with its gradient; anything
    else as it is."""
    if isinstance(tau, torch.Tensor) and tau.shape == (1,):
        return tau.reshape(())
    return tau


def _features(a, b, image_features, text_features):
    """``(a, b)`` given positionally or under open_clip's names (one pair of them)."""
    if image_features is not None or text_features is not None:
        if a is not None or b is not None:
            raise ValueError("pass a, b or open_clip's image_features, text_features, not both")
        a, b = image_features, text_features
    if a is None or b is None:
        raise ValueError("the loss needs two batches of embeddings: a and b (or "
                         "image_features and text_features)")
    return a, b


class DualEncoderLoss(nn.Module):
    """The dual-encoder (CLIP-style) loss as a module: :func:`dual_encoder_loss` of two
    encoders' paired batches, symmetric by default, each direction with its own WEINCE
    statistics.

    ``loss_fn(a, b)`` with ``a[i]``, ``b[i]`` a positive pair and the other rows of the
    other side the negatives (``K = B - 1`` per anchor in each direction; WEINCE's tail
    needs a few dozen: ``docs/using-the-loss.md``, "Batch size"). ``loss="infonce"`` is
    CLIP's loss with ``logit_scale = 1 / tau``.

    Args:
        tau: temperature: a number ``> 0`` (default ``0.5``), or a 0-d tensor, e.g. a
            learnable ``nn.Parameter`` (it is then a parameter of this module: give
            ``loss_fn.parameters()`` to the optimiser too), passed to the functional loss
            as it is. ``forward(a, b, tau=...)`` overrides it per call (CLIP keeps
            ``logit_scale`` in the model: ``tau=1 / model.logit_scale.exp()``).
        loss: ``"weince"`` (default) or ``"infonce"``.
        direction: ``"both"`` (default), ``"a_to_b"`` or ``"b_to_a"``.
        temperature: ``tau`` under lightly's name; pass one of the two.
        normalize: normalise the rows of ``a`` and ``b`` first (default ``True``).
        chunk_size: build the similarity rows ``chunk_size`` anchors at a time (default
            ``None``: whole), as :func:`dual_encoder_loss`.
        gather_distributed: ``False`` (default), ``True`` (gather ``a``, ``b`` from every
            process of the default process group, with gradient, so that every process
            computes the loss of the global batch) or ``"local"``: each process computes
            its own rows of each direction against every process's candidates (memory
            ``B_local x B``, open_clip's local loss), each direction's pivot ``rho0``
            from every row's ``rho``, and returns its rows' share of the global loss times
            the number of processes, so that DDP's averaged gradients are the
            one-process gradients on the whole batch; ``last_stats`` are the global
            batch's. A no-op without a process group.
        **options: the functional loss's keywords (:func:`weince.losses.weince`: ``q``,
            ``margin``, ``kappa_rho``, ``lam``, ...). ``check`` defaults to ``False``
            here: like the other loss modules, no host synchronisation per step.

    Shape:
        - ``a``, ``b``: ``(B, d)``, any floating dtype, ``B >= 2``.
        - output: ``()`` (float32; float64 for float64 input).

    With ``loss="weince"``, after each call ``last_stats`` holds detached 0-d float64
    tensors per computed direction ``D`` (``a_to_b``, ``b_to_a``): ``lambda_mean_D``,
    ``rho0_D``, ``daic_mean_D``, ``beta_w_mean_D``.

    Raises:
        ValueError: an unknown ``loss``, ``direction`` or option, or a ``tau`` that is
            not a positive number or a tensor (at construction); bad inputs (on call), as
            :func:`dual_encoder_loss`.

    Example:
        >>> import torch
        >>> from weince.losses import DualEncoderLoss
        >>> _ = torch.manual_seed(0)
        >>> image_enc, text_enc = torch.nn.Linear(64, 16), torch.nn.Linear(384, 16)
        >>> loss_fn = DualEncoderLoss(tau=0.1)
        >>> loss = loss_fn(image_enc(torch.randn(128, 64)), text_enc(torch.randn(128, 384)))
        >>> loss.backward()
        >>> sorted(loss_fn.last_stats)[:2]
        ['beta_w_mean_a_to_b', 'beta_w_mean_b_to_a']
    """

    def __init__(self, tau=None, loss: str = "weince", direction: str = "both", *,
                 temperature=None, normalize: bool = True, chunk_size: int | None = None,
                 gather_distributed: bool | str = False, **options):
        super().__init__()
        check_dual_args(loss, direction, options)
        self.chunk_size = check_chunk_size(chunk_size)
        if gather_distributed not in (False, True, "local"):
            raise ValueError(f"gather_distributed must be False, True or 'local', got "
                             f"{gather_distributed!r}")
        if gather_distributed == "local" and {"reduction", "weight"} & set(options):
            raise ValueError("gather_distributed='local' returns each process's share of the "
                             "mean loss; reduction and weight do not combine with it")
        self.gather_distributed = gather_distributed
        if tau is not None and temperature is not None:
            raise ValueError(f"got tau={tau!r} and temperature={temperature!r}: they are one "
                             f"option; pass only one of them")
        tau = tau if tau is not None else temperature
        _check_module_tau(tau)
        self.tau = tau
        self.loss, self.direction, self.normalize = loss, direction, bool(normalize)
        self.options = {"check": False, **options}
        self.last_stats: dict[str, torch.Tensor] = {}

    def forward(self, a: torch.Tensor | None = None, b: torch.Tensor | None = None, tau=None, *,
                logit_scale=None, logit_bias=None, output_dict: bool = False,
                image_features: torch.Tensor | None = None,
                text_features: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                weight: torch.Tensor | None = None, reduction: str | None = None,
                labels: torch.Tensor | None = None):
        """The loss of the paired batches ``a``, ``b`` (``(B, d)`` each): a 0-d tensor (or
        ``(B,)`` with ``reduction="none"``; ``{"contrastive_loss": loss}`` with
        ``output_dict=True``, as open_clip's ``ClipLoss``).

        ``tau``: this call's temperature (a number or a 0-d tensor), else the module's.
        ``logit_scale`` (open_clip's, ``1 / tau``; a number or a tensor of shape ``()`` or
        ``(1,)``) and ``logit_bias``: the logits in open_clip's form
        (:func:`clip_dual_loss`) instead of ``tau``. ``image_features``,
        ``text_features``: open_clip's names for ``a``, ``b``, so that
        ``loss_fn(**model(images, texts), output_dict=True)`` works. ``mask``, ``weight``,
        ``reduction``, ``labels``: this call's options, as :func:`dual_encoder_loss`
        takes them (``weight`` ``(B,)`` per pair; ``labels`` ``(B,)`` classes: every
        same-label pair is a positive)."""
        a, b = _features(a, b, image_features, text_features)
        call = {k: v for k, v in (("mask", mask), ("weight", weight), ("reduction", reduction),
                                  ("labels", labels)) if v is not None}
        if logit_scale is not None:
            if tau is not None:
                raise ValueError("pass tau or logit_scale (open_clip's 1 / tau), not both")
            out = self._clip_forward(a, b, logit_scale, logit_bias, call)
        elif logit_bias is not None:
            raise ValueError("logit_bias is added to open_clip's scaled logits: pass "
                             "logit_scale with it")
        else:
            out = self._tau_forward(a, b, scalar_tau(self.tau if tau is None else tau), call)
        return {"contrastive_loss": out} if output_dict else out

    def _gathered(self, a, b, call: dict):
        """``a``, ``b`` (and the per-pair ``weight``, ``labels``) of every process, with
        gradient, in the gather mode; as they are otherwise."""
        if not (self.gather_distributed is True and is_distributed()):
            return a, b, call
        call = dict(call)
        for key in ("weight", "labels"):
            if key in call:
                call[key] = gather_with_grad(call[key], uneven=True)
        return gather_with_grad(a, uneven=True), gather_with_grad(b, uneven=True), call

    def _check_local(self, call: dict) -> None:
        if self.gather_distributed == "local" and is_distributed() and call:
            raise ValueError(f"gather_distributed='local' returns each process's share of the "
                             f"mean loss; {sorted(call)} do not combine with it (use "
                             f"gather_distributed=True)")

    def _tau_forward(self, a, b, tau, call: dict):
        self._check_local(call)
        if self.gather_distributed == "local" and is_distributed():
            return self._local_loss(a, b, tau)
        a, b, call = self._gathered(a, b, call)
        opts = {**self.options, **call}
        if self.loss == "infonce":
            return dual_encoder_loss(a, b, tau, loss="infonce", direction=self.direction,
                                     normalize=self.normalize, chunk_size=self.chunk_size,
                                     **opts)
        out, stats = dual_encoder_loss(a, b, tau, direction=self.direction,
                                       normalize=self.normalize, return_stats=True,
                                       chunk_size=self.chunk_size, **opts)
        self._log(stats)
        return out

    def _clip_forward(self, a, b, logit_scale, logit_bias, call: dict):
        if self.chunk_size:
            raise ValueError("logit_scale (open_clip's form) and chunk_size do not combine; "
                             "pass tau=1 / logit_scale, or chunk_size=None")
        self._check_local(call)
        if self.gather_distributed == "local" and is_distributed():
            return self._local_loss(a, b, None, (check_logit_scale(logit_scale), logit_bias))
        gathered = self.gather_distributed is True and is_distributed()   # la.T, as open_clip
        a, b, call = self._gathered(a, b, call)
        opts = {k: v for k, v in {**self.options, **call}.items()
                if k not in ("check", "num_negatives")}
        if self.loss == "infonce":
            return clip_dual_loss(a, b, logit_scale, logit_bias, loss="infonce",
                                  direction=self.direction, normalize=self.normalize,
                                  gathered=gathered, **opts)
        out, stats = clip_dual_loss(a, b, logit_scale, logit_bias, direction=self.direction,
                                    normalize=self.normalize, gathered=gathered,
                                    return_stats=True, **opts)
        self._log(stats)
        return out

    def _log(self, stats: dict) -> None:
        """``last_stats`` from each direction's statistics."""
        logged = {}
        for side, st in stats.items():
            logged[f"lambda_mean_{side}"] = st["lambda"].mean()
            logged[f"rho0_{side}"] = st["rho0"]
            logged[f"daic_mean_{side}"] = st["daic"].mean()
            logged[f"beta_w_mean_{side}"] = st["beta_w"].mean()
        self.last_stats = {k: v.detach().double() for k, v in logged.items()}

    def _local_loss(self, a: torch.Tensor, b: torch.Tensor, tau, clip=None) -> torch.Tensor:
        """The local-loss mode (``gather_distributed="local"``): this process's share.
        ``clip``: ``(logit_scale, logit_bias)`` of open_clip's form (in place of ``tau``)."""
        for name, z in (("a", a), ("b", b)):
            if not isinstance(z, torch.Tensor) or not z.is_floating_point() or z.ndim != 2:
                raise ValueError(f"{name} must be a floating (B, d) tensor of embeddings")
        if a.shape != b.shape:
            raise ValueError(f"a and b must have one shape (B, d), got {tuple(a.shape)} and "
                             f"{tuple(b.shape)}")
        wide = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
        chosen = ("a_to_b", "b_to_a") if self.direction == "both" else (self.direction,)
        with _no_autocast(a.device):
            sides = local_pair_rows(full_precision(a).to(wide), full_precision(b).to(wide),
                                    self.normalize)
            tau = loss_tau(tau, None, wide) if clip is None else None
            parts = [self._local_side(name, sides[name], tau, clip) for name in chosen]
        return (parts[0] + parts[1]) / 2 if len(parts) == 2 else parts[0]

    def _local_side(self, name: str, side: LocalRows, tau, clip=None) -> torch.Tensor:
        """One direction's share of the global loss; sets its ``last_stats``."""
        rows, chunk = side.rows, self.chunk_size
        if clip is not None:
            return self._local_clip_side(name, side, clip)
        if self.loss == "infonce":
            part = (chunked_info_nce(rows, tau, chunk, "sum") if chunk else
                    _info_nce(*rows.full()[:3], tau, "sum"))
            return part * side.scale
        opts = {k: v for k, v in {**_DEFAULTS["weince"], **self.options}.items()
                if k not in ("check", "num_negatives", "reduction", "weight")}
        kw = dict(return_stats=True, pivot=side.pivot(opts["q"]), reduction="sum", **opts)
        part, st = (chunked_weince(rows, tau, chunk, **kw) if chunk else
                    _weince(*rows.full(), tau, **kw))
        self._log_local(name, side, st)
        return part * side.scale

    def _local_clip_side(self, name: str, side: LocalRows, clip) -> torch.Tensor:
        """:meth:`_local_side` in open_clip's form: this process's rows of
        ``logit_scale * a @ all_b.T``, as open_clip's local loss computes them."""
        rows = side.rows
        sim, targets, invalid, K = rows.full()
        lin = clip_logits(rows.anchors, rows.candidates, *clip)
        opts = _row_options(self.loss, self.options)
        part, st = direction_loss(sim, targets, invalid, K, loss=self.loss, opts=opts, lin=lin,
                                  pivot=side.pivot(opts["q"]) if self.loss == "weince" else None,
                                  reduction="sum", return_stats=self.loss == "weince")
        if st is not None:
            self._log_local(name, side, st)
        return part * side.scale

    def _log_local(self, name: str, side: LocalRows, st: dict) -> None:
        """``last_stats`` of one direction in the local-loss mode (every process's rows)."""
        lam, daic, beta_w = side.all_rows(st["lambda"], st["daic"], st["beta_w"])
        if name == "a_to_b" or self.direction != "both":
            self.last_stats = {}
        self.last_stats.update({
            f"lambda_mean_{name}": lam.mean().detach().double(),
            f"rho0_{name}": st["log_rho0"].exp().float().detach().double(),
            f"daic_mean_{name}": daic.mean().detach().double(),
            f"beta_w_mean_{name}": beta_w.mean().detach().double()})

    def extra_repr(self) -> str:
        tau = f"tensor({float(self.tau.detach()):g})" if isinstance(self.tau, torch.Tensor) \
            else self.tau
        extra = "".join(f", {k}={v!r}" for k, v in self.options.items())
        chunk = f", chunk_size={self.chunk_size}" if self.chunk_size else ""
        if self.gather_distributed:
            chunk += f", gather_distributed={self.gather_distributed!r}"
        return (f"tau={tau}, loss={self.loss!r}, direction={self.direction!r}, "
                f"normalize={self.normalize}{chunk}{extra}")


class OpenCLIPLoss(DualEncoderLoss):
    """open_clip's ``ClipLoss`` with WEINCE: the same constructor and call, so that
    open_clip's training script swaps it in (``docs/using-the-loss.md``, "open_clip").

    ``loss_fn(image_features, text_features, logit_scale, logit_bias=None,
    output_dict=False)`` as ``open_clip.loss.ClipLoss`` takes them (``logit_scale`` of
    shape ``()`` or ``(1,)``, already exponentiated; ``logit_bias`` added to the logits as
    open_clip adds it): the logits ``logit_scale * image_features @ text_features.T`` in
    open_clip's operation order, so that with ``loss="infonce"`` or ``lam=0`` the loss is
    ``ClipLoss``'s bit for bit (float32 and float64), and WEINCE blends them per row with
    the endpoint logit of the cosines (:func:`clip_dual_loss`). The features are taken as
    the model returns them (unit rows; ``normalize=True`` normalises them again).

    Args:
        local_loss, gather_with_grad: open_clip's modes over several processes: the
            default gathers every process's features without gradient but its own (the
            global loss on every process); ``gather_with_grad=True`` gathers with
            gradient; ``local_loss=True`` (with ``gather_with_grad=True``) computes each
            process's own rows against every process's candidates
            (``DualEncoderLoss(gather_distributed="local")``: processes may hold unequal
            shares). Without a process group all three are the one-process loss.
        cache_labels, rank, world_size: accepted for open_clip's call and not needed (the
            process group says the rank).
        use_horovod: must be ``False``: the gathers use ``torch.distributed``.
        loss, direction, normalize, **options: as :class:`DualEncoderLoss` (``loss``
            ``"weince"`` by default; ``q``, ``margin``, ``lam``, ...).

    Example:
        >>> import torch
        >>> import torch.nn.functional as F
        >>> from weince.losses import OpenCLIPLoss
        >>> _ = torch.manual_seed(0)
        >>> image = F.normalize(torch.randn(64, 16), dim=1)
        >>> text = F.normalize(image + 0.3 * torch.randn(64, 16), dim=1)
        >>> logit_scale = torch.tensor([1 / 0.07]).log().exp()   # open_clip's shape (1,)
        >>> out = OpenCLIPLoss()(image, text, logit_scale, output_dict=True)
        >>> sorted(out), out["contrastive_loss"].shape
        (['contrastive_loss'], torch.Size([]))
    """

    def __init__(self, local_loss: bool = False, gather_with_grad: bool = False,
                 cache_labels: bool = False, rank: int = 0, world_size: int = 1,
                 use_horovod: bool = False, *, loss: str = "weince", direction: str = "both",
                 normalize: bool = False, **options):
        if use_horovod:
            raise ValueError("use_horovod=True is not supported: the gathers use "
                             "torch.distributed (torchrun); pass use_horovod=False")
        if local_loss and not gather_with_grad:
            raise ValueError("local_loss=True needs gather_with_grad=True here (without it "
                             "open_clip's gradient skips every candidate); pass both, as "
                             "open_clip's --local-loss --gather-with-grad")
        super().__init__(loss=loss, direction=direction, normalize=normalize,
                         gather_distributed="local" if local_loss else True, **options)
        self.local_loss, self.gather_with_grad = bool(local_loss), bool(gather_with_grad)
        del cache_labels, rank, world_size

    def forward(self, image_features, text_features, logit_scale,  # type: ignore[override]
                logit_bias=None, output_dict: bool = False, **call):
        """open_clip's call; ``call``: ``mask``, ``weight``, ``reduction``, ``labels`` as
        :meth:`DualEncoderLoss.forward` takes them."""
        return super().forward(image_features, text_features, logit_scale=logit_scale,
                               logit_bias=logit_bias, output_dict=output_dict, **call)

    def _gathered(self, a, b, call: dict):
        if self.gather_with_grad or not is_distributed():
            return super()._gathered(a, b, call)
        # open_clip's default: every process's features without gradient, its own with it
        call = {k: (gather_with_grad(v.detach(), uneven=True) if k in ("weight", "labels")
                    else v) for k, v in call.items()}
        return _own_with_grad(a), _own_with_grad(b), call

    def extra_repr(self) -> str:
        return (super().extra_repr() + f", local_loss={self.local_loss}, "
                f"gather_with_grad={self.gather_with_grad}")


def _own_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Every process's ``x`` gathered without gradient, this process's rows with it."""
    n = x.shape[0]
    every = gather_with_grad(x.detach(), uneven=True)
    start = sum(local_sizes(n, x.device)[: torch.distributed.get_rank()])
    return torch.cat([every[:start], x, every[start + n:]], dim=0)
