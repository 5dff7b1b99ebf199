"""``nn.Module`` losses for two-view batches, and the registry that makes one by name
(:func:`build_loss`, :func:`register_loss`; the recipe's modules are in
:mod:`weince.losses.recipe`, the hard-negative baselines in :mod:`weince.losses.baselines`).

Every module takes ``z1, z2`` of shape ``(N, d)`` (normalised inside), builds the
similarities for its ``layout`` (``"simclr"``: ``2N x 2N`` NT-Xent views; ``"pairs"``:
``N x N`` with the positive on the diagonal, as SimCSE), returns a scalar loss and keeps
``last_stats``: a dict of detached 0-d tensors for logging (``float(v)`` to read; no
host synchronisation happens inside the loss). No module has a trainable parameter.
``gather_distributed=True`` gathers the embeddings of every process (with gradient)
before the loss, so that negatives and batch statistics cover the global batch.

The method, its statistics and its options: ``docs/method.md``; advice for adopters:
``docs/using-the-loss.md``.

Example:
    >>> import torch
    >>> from weince.losses import build_loss
    >>> _ = torch.manual_seed(0)
    >>> z1 = torch.randn(32, 16, requires_grad=True)
    >>> z2 = torch.randn(32, 16, requires_grad=True)
    >>> loss_fn = build_loss("weince", tau=0.5)
    >>> loss = loss_fn(z1, z2)
    >>> loss.backward()
    >>> loss.shape, z1.grad.shape
    (torch.Size([]), torch.Size([32, 16]))
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from weince.losses._common import (LAYOUTS, Layout, cached, check_reduction, check_tau_dtype,
                                   check_views, full_precision, loss_tau, moco_similarities,
                                   negative_counts, no_autocast, pair_similarities,
                                   two_view_batch, unit_rows, upcast)
from weince.losses.bank import MemoryBank, check_bank_size
from weince.losses.infonce import _info_nce
from weince.losses.weince import _weince, check_weince_args
from weince.losses.chunked import (Rows, check_chunk_size, chunked_info_nce, chunked_weince,
                                   view_rows)
from weince.losses.local import LocalRows, local_rows
from weince.losses.clip import check_labels, direction_loss, label_positives, per_example
from weince.utils.distributed import gather_with_grad, is_distributed

__all__ = ["InfoNCELoss", "WEINCELoss", "LOSSES", "register_loss", "build_loss", "fill_docs"]

# ------------------------------------------------------------------ the registry by name
# training configs name their loss; build_loss makes it. Every loss module registers itself
# with register_loss (below, weince.losses.recipe, weince.losses.baselines)
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

    weights = cached(_QUANTILE_W, (n, x.dtype, str(x.device)), build)
    q10, q50, q90 = (x.sort().values @ weights).unbind()
    return {"lambda_mean": x.mean(), "lambda_q10": q10, "lambda_q50": q50, "lambda_q90": q90}


def loss_forward(forward):
    """A loss module's ``forward``, in full precision and compiled once per input shape.

    Precision: ``z1``, ``z2`` narrower than float32 are cast to float32 and autocast is off
    inside, so that the similarities, the statistics and the loss are float32 (float64 for
    float64 input) whatever autocast is active.

    Compilation: ``torch.compile`` compiles it once per input shape, with a memory bank too:
    while the bank fills, its number of rows (the loss's ``K``, a shape) changes on every
    call, so those calls run eagerly (``torch.compiler.disable``) instead of recompiling
    each time; once it is full the shapes stay fixed and the write position
    is a tensor (:meth:`weince.losses.bank.MemoryBank.push`), so the compiled graph serves
    every later call, through every wrap of the bank. The only guard is the bank's
    ``full`` flag: one compilation while filling (around the eager call), one when full."""
    @functools.wraps(forward)
    def wrapped(self, z1, z2, *, mask=None, weight=None, reduction=None, labels=None):
        call = {k: v for k, v in (("mask", mask), ("weight", weight), ("reduction", reduction),
                                  ("labels", labels)) if v is not None}
        with no_autocast(z1):
            z1, z2 = full_precision(z1), full_precision(z2)
            if call:       # this call's options: their own path (no options: the one below)
                return self.with_options(z1, z2, **call)
            bank = self.memory_bank
            if bank is not None and not bank.full and torch.compiler.is_compiling():
                return _outside_graph(forward)(self, z1, z2)
            return forward(self, z1, z2)
    return wrapped


@functools.cache
def _outside_graph(forward):
    """``forward`` run eagerly from inside a compiled region; made on first use, because
    ``torch.compiler.disable`` imports ``torch._dynamo``, which no uncompiled job needs."""
    return torch.compiler.disable(forward)


_GATHER_DOC = """gather_distributed: gather ``z1`` and ``z2`` from every process of the
            default process group (``torch.distributed``, with gradient: see
            :mod:`weince.utils.distributed`) before building the similarities, so that the
            negatives, the statistics and ``last_stats`` cover the global batch; every
            process then computes the same loss. Ranks may hold different ``N``. A no-op
            when no process group is initialised. ``"local"`` (InfoNCE and WEINCE, no
            bank): each process computes only its own rows against every process's
            candidates (open_clip's local loss; memory ``B_local x B``, not ``B^2``), the
            pivot ``rho0`` from every row's ``rho``; it returns ``W * (sum of its rows'
            losses) / B`` (``W`` processes), so the mean over processes is the global
            loss and DDP's averaged gradients are the one-process gradients on the whole
            batch; ``last_stats`` are the global batch's. Default ``False``."""

_BANK_DOC = """memory_bank_size: ``Q``, the number of past embeddings kept as negatives in a FIFO
            (MoCo's queue; ``0``, the default: no bank, the in-batch negatives of
            ``layout``). With a bank every anchor ``z1[i]`` has the positive ``z2[i]`` and
            the bank's filled rows as its ``K`` negatives, the other items of the batch
            are *not* negatives (MoCo's ``(N, 1 + K)`` layout, positive in column 0: see
            :func:`weince.losses.queue_similarities`), and ``layout`` must stay
            ``"simclr"``. After the loss, in training mode, the batch's ``z2`` (unit rows,
            detached) enters the bank, oldest out; in eval mode the bank is only read.
            ``K`` is the number of rows filled so far: ``0`` on the first call (the loss is
            then ``0``, with zero gradients); the bank is full after ``ceil(Q / N)`` calls
            and ``K = Q`` from the next one on (``N``: the global batch with
            ``gather_distributed``, whose gathered ``z2`` every process enqueues, so that
            the banks agree). The bank is
            ``loss_fn.memory_bank`` (:class:`weince.losses.bank.MemoryBank`), a buffer
            saved in ``state_dict`` that moves with ``.to()``."""

_CHUNK_DOC = """chunk_size: ``None`` (default: the similarity matrix is built whole) or the number
            of anchors whose similarity rows are built at a time (against every candidate),
            so that memory grows as ``chunk_size x C`` per matrix, forward and backward,
            not ``B x C`` (:mod:`weince.losses.chunked`: the pivot ``rho0`` from a first
            pass over every row, each chunk recomputed in the backward). Equal to the
            unchunked loss and gradients to rounding (not bit for bit); combines with
            ``gather_distributed`` (``"local"`` too), not with a memory bank."""


class _TwoViewLoss(nn.Module):
    def __init__(self, tau: float | torch.Tensor | None = None, layout: str = "simclr", *,
                 temperature: float | torch.Tensor | None = None,
                 gather_distributed: bool = False, memory_bank_size: int = 0,
                 chunk_size: int | None = None):
        super().__init__()
        tau = loss_tau(tau, temperature, read=True)   # once, at construction
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if gather_distributed and not torch.distributed.is_available():
            raise ValueError("gather_distributed=True needs torch.distributed, which this "
                             "PyTorch build does not have; pass gather_distributed=False")
        if gather_distributed not in (False, True, "local"):
            raise ValueError(f"gather_distributed must be False, True or 'local', got "
                             f"{gather_distributed!r}")
        self.local_loss = gather_distributed == "local"
        size = check_bank_size(memory_bank_size)
        if size and layout != "simclr":
            raise ValueError(f"layout={layout!r} and memory_bank_size={size} do not combine: with "
                             f"a bank every row is z1[i] against z2[i] and the bank (MoCo's "
                             f"layout, no in-batch negatives); leave layout at its default")
        self.tau: float | torch.Tensor = tau   # a tensor that requires grad: learnable
        self.layout: Layout = cast(Layout, layout)   # one of LAYOUTS (checked above)
        self.gather_distributed = bool(gather_distributed)
        self.memory_bank_size = size
        self.memory_bank = MemoryBank(size) if size else None
        if self.local_loss and size:
            raise ValueError("gather_distributed='local' and a memory bank do not combine "
                             "(the bank's negatives are every rank's already); pass "
                             "gather_distributed=True")
        self.chunk_size = check_chunk_size(chunk_size)
        if self.chunk_size and size:
            raise ValueError("chunk_size and a memory bank do not combine (the bank's MoCo rows "
                             "are N x (1 + Q)); pass chunk_size=None or memory_bank_size=0")
        self.last_stats: dict[str, torch.Tensor] = {}
        self._local: LocalRows | None = None

    def views(self, z1: torch.Tensor, z2: torch.Tensor):
        """``(z1, z2)``, gathered from every process when ``gather_distributed`` is set."""
        if self.gather_distributed:
            return gather_with_grad(z1, uneven=True), gather_with_grad(z2, uneven=True)
        return z1, z2

    def similarities(self, z1: torch.Tensor, z2: torch.Tensor):
        """``(sim, targets, mask)`` of the two views for this module's layout, as
        :func:`weince.losses.pair_similarities` returns them (after the gather, if any)."""
        z1, z2 = self.views(z1, z2)
        out = pair_similarities(z1, z2, self.layout)
        check_tau_dtype(self.tau, z1.dtype)  # Python arithmetic: no device work
        return out

    def batch(self, z1: torch.Tensor, z2: torch.Tensor):
        """``(sim, targets, invalid, K)``: as :meth:`similarities` with the mask's complement
        built directly, for the internal loss functions. With a memory bank: MoCo's
        ``(N, 1 + K)`` layout against the bank's ``K`` filled rows (``K = 0`` on the first
        call), then, in training mode, ``z2`` (unit rows, detached) enters the bank."""
        self._local = None
        if self.local_loss and is_distributed():
            check_views(z1, z2, min_n=0)
            self._local = local_rows(z1, z2, self.layout)
            check_tau_dtype(self.tau, z1.dtype)
            return self._local.batch
        z1, z2 = self.views(z1, z2)
        if self.memory_bank is None:
            out = two_view_batch(z1, z2, self.layout)
        else:
            check_views(z1, z2, min_n=1)
            z1, z2 = unit_rows(z1), unit_rows(z2)
            sim, targets = moco_similarities(z1, z2, self.memory_bank.negatives())
            if self.training:
                self.memory_bank.push(z2)
            out = sim, targets, None, sim.shape[1] - 1
        check_tau_dtype(self.tau, z1.dtype)
        return out

    def rows(self, z1: torch.Tensor, z2: torch.Tensor) -> Rows:
        """The rows of :meth:`batch` as :class:`weince.losses.chunked.Rows` (unit rows of
        the anchors and candidates, not their similarities), for ``chunk_size``."""
        self._local = None
        if self.local_loss and is_distributed():
            check_views(z1, z2, min_n=0)
            self._local = local_rows(z1, z2, self.layout)
            check_tau_dtype(self.tau, z1.dtype)
            return self._local.rows
        z1, z2 = self.views(z1, z2)
        check_tau_dtype(self.tau, z1.dtype)
        return view_rows(z1, z2, self.layout)

    def simclr_half(self, sim: torch.Tensor) -> int | None:
        """``N`` when ``sim`` has the SimCLR layout (its ``2N`` rows known without reading
        ``targets``), else ``None``."""
        return (sim.shape[0] // 2 if self.layout == "simclr" and self.memory_bank is None
                and self._local is None else None)

    def no_negatives(self, sim: torch.Tensor) -> torch.Tensor:
        """The loss of a call with an empty memory bank (``K = 0``): nothing to contrast
        with, so ``0``, with zero gradients (the graph is kept, so ``backward`` works)."""
        self.last_stats = {}
        zero = upcast(sim).sum().mul(0.0)
        if isinstance(self.tau, torch.Tensor):          # a learnable tau gets a zero gradient
            zero = zero + self.tau.to(zero.dtype).mul(0.0)
        return zero.add(0.0)                            # +0.0, not -0.0

    def option_batch(self, z1, z2, mask, weight, labels):
        """The batch of a call with options: ``(sim, targets, invalid, K, positives,
        row_weight, N)``, after the gather (``weight``, ``labels`` gathered too)."""
        if self.memory_bank is not None or self.chunk_size or self.local_loss:
            raise ValueError("per-call mask, weight, reduction and labels combine with neither "
                             "a memory bank, chunk_size nor gather_distributed='local'")
        self._local = None
        check_views(z1, z2)
        N = z1.shape[0]
        if weight is not None:
            check_reduction("mean", weight, N)
        if labels is not None:
            check_labels(labels, N)
        if self.gather_distributed:
            weight = None if weight is None else gather_with_grad(weight, uneven=True)
            labels = None if labels is None else gather_with_grad(labels, uneven=True)
        z1, z2 = self.views(z1, z2)
        sim, targets, invalid, K = two_view_batch(z1, z2, self.layout)
        check_tau_dtype(self.tau, z1.dtype)
        N = z1.shape[0]
        simclr = self.layout == "simclr"
        if mask is not None:
            if not isinstance(mask, torch.Tensor) or mask.shape != sim.shape or \
                    mask.dtype != torch.bool:
                raise ValueError(f"mask must be a boolean {tuple(sim.shape)} tensor over the "
                                 f"similarities ({'2N x 2N' if simclr else 'N x N'}), got "
                                 f"{getattr(mask, 'dtype', type(mask).__name__)} of shape "
                                 f"{tuple(getattr(mask, 'shape', ()))}")
            invalid = ~mask if invalid is None else (invalid | ~mask)
            K = negative_counts((~invalid).sum(dim=1) - 1)
        positives = None
        if labels is not None:
            rows = torch.cat([labels, labels]) if simclr else labels
            own = torch.arange(rows.shape[0], device=sim.device) if simclr else None
            positives = label_positives(rows.to(sim.device), rows.to(sim.device), own)
            if invalid is not None:
                positives &= ~invalid
        row_weight = None if weight is None else (torch.cat([weight, weight]) if simclr
                                                  else weight)
        return sim, targets, invalid, K, positives, row_weight, N

    def fold(self, per_row: torch.Tensor, reduction: str, weight, N: int) -> torch.Tensor:
        """Row losses (weighted) to the call's reduction: per example (SimCLR's two rows of
        an example averaged), summed, or their mean (over ``N``, or ``sum w``)."""
        per_ex = per_example(per_row, N) if per_row.shape[0] == 2 * N else per_row
        if reduction == "none":
            return per_ex
        total = per_ex.sum()
        if reduction == "sum":
            return total
        return total / (N if weight is None else weight.to(total.dtype).sum())

    def with_options(self, z1, z2, mask=None, weight=None, reduction=None, labels=None):
        """The loss of a call with ``mask``, ``weight``, ``reduction`` or ``labels``."""
        if not isinstance(self, (InfoNCELoss, WEINCELoss)):
            raise ValueError(f"{type(self).__name__} takes no per-call mask, weight, reduction "
                             f"or labels (InfoNCELoss, WEINCELoss, WEINCERecipeLoss and "
                             f"DualEncoderLoss do)")
        reduction = "mean" if reduction is None else reduction
        check_reduction(reduction, None, 1)
        sim, targets, invalid, K, positives, row_w, N = self.option_batch(z1, z2, mask, weight,
                                                                          labels)
        weince_loss = isinstance(self, WEINCELoss)
        per_row, stats = direction_loss(
            sim, targets, invalid, K, loss="weince" if weince_loss else "infonce",
            opts=getattr(self, "opts", {}), tau=self.tau, positives=positives,
            reduction="none", weight=row_w, return_stats=weince_loss)
        out = self.fold(per_row, reduction, None if row_w is None else row_w[:N], N)
        if stats is not None and isinstance(self, WEINCELoss):
            self.logged(out, stats)
        return out

    def base_repr(self) -> str:
        """The options every two-view loss takes."""
        tau = (f"tensor({float(self.tau.detach()):g}, learnable)"
               if isinstance(self.tau, torch.Tensor) else self.tau)
        return (f"tau={tau}, layout={self.layout!r}, "
                f"gather_distributed={self.gather_distributed}")

    def extra_repr(self) -> str:
        return (self.base_repr() + f", memory_bank_size={self.memory_bank_size}"
                + f", chunk_size={self.chunk_size}")


_COMMON_ARGS = """tau: softmax temperature, a finite number ``> 0`` usable in the inputs' dtype
            (the paper's lie in 0.05 .. 0.5), or a 0-d tensor that requires grad: a
            learnable temperature that receives its gradient (pass an ``nn.Parameter``
            and it is the module's parameter, so ``loss_fn.parameters()`` gives it to the
            optimiser; CLIP learns ``1 / tau``). Default ``0.5``.
        temperature: the same option under lightly's name; pass ``tau`` or
            ``temperature``, not both (a ``ValueError``; the signature's ``tau=None`` tells
            an omitted ``tau`` apart). Default ``None``.
        layout: ``"simclr"`` (default): the ``2N`` views ``cat(z1, z2)`` against each
            other, the anchor itself masked, the other view of the same item the positive,
            ``K = 2N - 2`` negatives per anchor (NT-Xent). ``"pairs"``: ``z1`` against
            ``z2`` (``N x N``), positive on the diagonal, ``K = N - 1`` (SimCSE, dual
            encoders). See :func:`weince.losses.pair_similarities`."""

_SHAPES = """Shape:
        - ``z1``, ``z2``: ``(N, d)`` embeddings of the two views, any floating dtype
          (normalised to unit length inside), ``N >= 2`` (``N >= 1`` with a memory
          bank).
        - output: ``()``, the scalar loss (float32; float64 for float64 input)."""


@register_loss("infonce")
class InfoNCELoss(_TwoViewLoss):
    """InfoNCE (NT-Xent) on two views: the baseline that WEINCE corrects.

    The mean over anchors of the cross-entropy of the logits ``s_ij / tau`` over the
    anchor's valid candidates, the positive as target (``docs/method.md``, "InfoNCE").
    With ``layout="simclr"`` this is SimCLR's NT-Xent; :class:`WEINCELoss` with ``lam=0``
    returns the same number bit for bit.

    Args:
        {common}
        {gather}
        {bank}
        {chunk}

    {shapes}

    ``last_stats`` stays empty (nothing to log).

    Raises:
        ValueError: a bad ``tau`` or ``layout`` (at construction), or views that are not
            two floating ``(N, d)`` tensors of one shape with ``N >= 2`` (on call).

    Example:
        >>> import torch
        >>> from weince.losses import InfoNCELoss
        >>> _ = torch.manual_seed(0)
        >>> z1, z2 = torch.randn(32, 16), torch.randn(32, 16)
        >>> loss = InfoNCELoss(tau=0.5)(z1, z2)
        >>> loss.shape
        torch.Size([])
        >>> queue_loss = InfoNCELoss(tau=0.2, memory_bank_size=64)   # MoCo: a queue of negatives
        >>> for step in range(3):                 # K = 0, 32, then 64 negatives per anchor
        ...     loss = queue_loss(torch.randn(32, 16), torch.randn(32, 16))
        >>> queue_loss.memory_bank.filled
        64
    """

    @loss_forward
    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """The InfoNCE loss of the views ``z1``, ``z2`` (``(N, d)`` each): a 0-d tensor."""
        if self.chunk_size:
            rows = self.rows(z1, z2)
            if self._local is not None:
                return chunked_info_nce(rows, self.tau, self.chunk_size, "sum") * self._local.scale
            return chunked_info_nce(rows, self.tau, self.chunk_size)
        sim, targets, invalid, K = self.batch(z1, z2)
        if K == 0:
            return self.no_negatives(sim)
        if self._local is not None:
            return _info_nce(sim, targets, invalid, self.tau, "sum") * self._local.scale
        return _info_nce(sim, targets, invalid, self.tau)


_WEINCE_ARGS = """q: quantile of the cap proximity ``rho`` over the batch's anchors that sets
            the pivot ``rho0``, in ``[0, 1]``. Default ``0.2``.
        margin: the AIC difference at which the AIC gate is one half (finite). Default
            ``2.0``.
        kappa_rho: slope of the proximity gate, ``>= 0``. Default ``10.0``.
        kappa_aic: slope of the AIC gate, ``>= 0``. Default ``1.0``.
        tail_frac: share of an anchor's ``K`` negatives in its tail fit, ``> 0``.
            Default ``0.10``.
        min_tail: the smallest tail, ``>= 1``; the tail is
            ``k = max(min_tail, round(tail_frac * K))``, at least 10 and at most ``K``.
            A batch with ``K < min_tail`` negatives per anchor fits a shorter tail and
            warns once per process (:class:`weince.losses.ShortTailWarning`); with
            ``K < 3`` no fit is possible and ``lambda = 0`` (InfoNCE). Default ``32``.
        eps: floor of the shortfalls ``1 - s``, in ``(0, 0.5)``. Default ``1e-6``.
        beta: the Weibull exponent of the endpoint logit: ``"one"`` (default; the
            authors' code) or ``"anchor"`` (the paper's printed formula: each anchor's
            fitted Weibull slope, clamped to ``[beta_min, beta_max]``).
        gate: ``"both"`` (default: the product of the two gates), ``"rho"`` or ``"aic"``
            (one gate alone).
        lam: ``None`` (default: the per-anchor blend weight) or a number in ``[0, 1]``
            forced on every anchor (ablations; ``lam=0`` is InfoNCE exactly).
        beta_min, beta_max: the clamp of ``beta="anchor"``, ``0 < beta_min <= beta_max``.
            Defaults ``0.5``, ``16.0``."""

_WEINCE_STATS = """After each call ``last_stats`` holds detached 0-d float64 tensors of the batch
    (read with ``float(v)``; nothing in the loss waits for the device):

    - ``lambda_mean``, ``lambda_q10``, ``lambda_q50``, ``lambda_q90``: the mean and the
      10/50/90% quantiles of the blend weights ``lambda_i`` over the anchors (0: InfoNCE
      for that anchor; 1: the endpoint logit alone);
    - ``rho0``: the pivot of the proximity gate (the ``q``-quantile of ``rho``);
    - ``daic_mean``: the mean AIC difference (positive favours the endpoint geometry);
    - ``beta_w_mean``: the mean fitted Weibull slope of the anchors' tails."""


@register_loss("weince")
class WEINCELoss(_TwoViewLoss):
    """WEINCE on two views: InfoNCE with a per-anchor Weibull endpoint correction.

    From Erol et al., *When Softmax Fails at the Top: Extreme Value Corrections for
    InfoNCE*, ICML 2026 (arXiv 2606.00262). Each anchor ``i`` gets a blend weight
    ``lambda_i`` in ``[0, 1]`` from statistics of its hardest negatives, computed without
    gradient (``docs/method.md``, "WEINCE" / "Per-anchor statistics"): how close its
    nearest negative is to the similarity cap ``1``, relative to the batch, and whether a
    Weibull (finite endpoint) line fits its tail better than a Gumbel one. The logits are

        ``l_ij = (1 - lambda_i) * s_ij / tau + lambda_i * (-beta * log(1 - s_ij))``

    and the loss is their mean cross-entropy with the positive as target
    (``docs/method.md``, "The loss"). ``lambda = 0`` is InfoNCE exactly. No trainable
    parameter. The authors' headline runs use :class:`WEINCERecipeLoss`, which adds two
    top-M terms to this loss (``docs/using-the-loss.md`` on which to pick).

    Args:
        {common}
        {weince}
        {gather}
        {bank}
        {chunk}

    {shapes}

    {stats}

    Raises:
        ValueError: an argument outside its range (at construction; the message names
            it), or views that are not two floating ``(N, d)`` tensors of one shape with
            ``N >= 2`` (on call).

    Example:
        >>> import torch
        >>> from weince.losses import InfoNCELoss, WEINCELoss
        >>> _ = torch.manual_seed(0)
        >>> z1 = torch.randn(64, 32, requires_grad=True)
        >>> z2 = z1.detach() + 0.1 * torch.randn(64, 32)
        >>> loss_fn = WEINCELoss(tau=0.5)
        >>> loss = loss_fn(z1, z2)
        >>> loss.backward()
        >>> print(*sorted(loss_fn.last_stats))
        beta_w_mean daic_mean lambda_mean lambda_q10 lambda_q50 lambda_q90 rho0
        >>> 0.0 <= float(loss_fn.last_stats["lambda_mean"]) <= 1.0
        True
        >>> infonce = InfoNCELoss(tau=0.5)(z1, z2)
        >>> bool(WEINCELoss(tau=0.5, lam=0.0)(z1, z2) == infonce)
        True
    """

    def __init__(self, tau: float | None = None, layout: str = "simclr", *, q: float = 0.2,
                 margin: float = 2.0, kappa_rho: float = 10.0, kappa_aic: float = 1.0,
                 tail_frac: float = 0.10, min_tail: int = 32, eps: float = 1e-6, beta: str = "one",
                 gate: str = "both", lam: float | None = None, beta_min: float = 0.5,
                 beta_max: float = 16.0, temperature: float | None = None,
                 gather_distributed: bool = False, memory_bank_size: int = 0,
                 chunk_size: int | None = None):
        super().__init__(tau, layout, temperature=temperature,
                         gather_distributed=gather_distributed, memory_bank_size=memory_bank_size,
                         chunk_size=chunk_size)
        check_weince_args(self.tau, q, margin, kappa_rho, kappa_aic, tail_frac, min_tail, eps,
                          beta, gate, lam, beta_min, beta_max)
        self.opts: dict[str, Any] = dict(
            q=q, margin=margin, kappa_rho=kappa_rho, kappa_aic=kappa_aic, tail_frac=tail_frac,
            min_tail=min_tail, eps=eps, beta=beta, gate=gate, lam=lam, beta_min=beta_min,
            beta_max=beta_max)

    def core(self, sim, targets, invalid, K, topk_extra: int = 0):
        """``(loss, stats)`` of a :meth:`batch` with ``K >= 1``; ``stats`` holds what the
        recipe reuses."""
        loss, stats = _weince(sim, targets, invalid, K, self.tau, return_stats=True,
                              topk_extra=topk_extra, half=self.simclr_half(sim),
                              **self.row_options())
        return self.logged(loss, stats), stats

    def row_options(self) -> dict:
        """The options of the row losses: the pivot and the reduction of the local mode."""
        local = self._local
        return dict(pivot=None if local is None else local.pivot(self.opts["q"]),
                    reduction="mean" if local is None else "sum", **self.opts)

    def logged(self, loss: torch.Tensor, stats: dict) -> torch.Tensor:
        """``loss`` (scaled to its share in the local mode), after ``last_stats`` is set
        from ``stats``."""
        local = self._local
        if local is not None:      # this rank's rows: their share of the global mean
            loss = loss * local.scale
        lam, daic, beta_w = ((stats["lambda"], stats["daic"], stats["beta_w"]) if local is None
                             else local.all_rows(stats["lambda"], stats["daic"], stats["beta_w"]))
        # 0-d float64 tensors (read with float()); nothing here waits for the device
        self.last_stats = {**_quantiles(lam), "rho0": stats["log_rho0"].exp(),
                           "daic_mean": daic.mean(), "beta_w_mean": beta_w.mean()}
        return loss

    @loss_forward
    def forward(self, z1, z2):
        """The WEINCE loss of the views ``z1``, ``z2`` (``(N, d)`` each): a 0-d tensor;
        updates ``last_stats``."""
        if self.chunk_size:
            loss, stats = chunked_weince(self.rows(z1, z2), self.tau, self.chunk_size,
                                         return_stats=True, **self.row_options())
            return self.logged(loss, stats)
        sim, targets, invalid, K = self.batch(z1, z2)
        if K == 0:
            return self.no_negatives(sim)
        return self.core(sim, targets, invalid, K)[0]

    def extra_repr(self) -> str:
        return super().extra_repr() + ", " + ", ".join(f"{k}={v!r}" for k, v in self.opts.items())


def fill_docs(*classes: type) -> None:
    """Put the shared argument texts (``{common}``, ``{gather}``, ``{shapes}``, ...) into the
    docstrings of ``classes``."""
    parts = dict(common=_COMMON_ARGS, gather=_GATHER_DOC, shapes=_SHAPES, weince=_WEINCE_ARGS,
                 stats=_WEINCE_STATS, bank=_BANK_DOC, chunk=_CHUNK_DOC)
    for cls in classes:
        cls.__doc__ = (cls.__doc__ or "").format(**parts)


fill_docs(InfoNCELoss, WEINCELoss)
