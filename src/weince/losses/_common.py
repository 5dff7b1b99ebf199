"""Input checks and the similarity layouts shared by every loss.

Checks that cost nothing on the device run everywhere (shapes, a batch of one). The
functional API (:func:`check_batch`) also refuses NaN/inf similarities; the loss modules
do not look at values (that would need a host sync per step): the training loops check
their loss instead (``weince.train.simclr``: once per epoch; SimCSE: every step)."""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
from typing import Literal, overload

import numpy as np
import torch
import torch.nn.functional as F

Layout = Literal["simclr", "pairs"]
LAYOUTS = ("simclr", "pairs")

# On CPU in eager mode the top-k selections go through NumPy (several times faster there
# than ``torch.topk``); ``False`` forces the ``torch.topk`` path that CUDA and compiled code
# take (``benchmarks/op_counts.py`` counts both).
CPU_SELECTION = True


def cached(cache: dict, key, build):
    """``cache[key]``, built by ``build()`` on first use. Inside a compiled graph the constants
    are built in the graph instead (a Python-side cache there would be a side effect)."""
    if torch.compiler.is_compiling():
        return build()
    if key not in cache:
        cache[key] = build()
    return cache[key]


def cpu_selection(x: torch.Tensor) -> bool:
    """Whether the top-k selection of ``x`` takes the NumPy path (CPU, eager, enabled)."""
    return CPU_SELECTION and x.device.type == "cpu" and not torch.compiler.is_compiling()


def compiled_cpu_selection(x: torch.Tensor) -> bool:
    """Whether a compiled graph on CPU takes the same NumPy selection, as an opaque custom
    op (``weince::top_negatives``, ``weince::pooled_top``): the same numbers as eager, at
    eager's speed, where ``torch.topk`` would be several times slower."""
    return CPU_SELECTION and x.device.type == "cpu" and torch.compiler.is_compiling()


# NumPy's introselect is several times faster per entry on rows of at most this many
# entries (and a block that stays in cache): longer rows are cut into pieces of this size.
PIECE = 512


def largest_per_row(blk: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest entries of each row of the 2-D scratch array ``blk`` (which this
    reorders), largest first, as a new array: the same numbers whichever way they are
    selected (NaN counts as the largest, as in ``np.sort``). Rows of at most 2 kB are
    sorted whole, rows longer than two pieces go through :func:`_by_pieces` first."""
    C = blk.shape[1]
    if C * blk.itemsize <= 4 * PIECE:   # short rows: sorting them whole is faster still
        blk.sort(axis=1)
        return blk[:, : C - k - 1 if C > k else None : -1].copy()
    top = _by_pieces(blk, k) if C >= 2 * PIECE else None
    if top is None:
        blk.partition(C - k, axis=1)
        top = blk[:, C - k:]
    top = np.sort(top, axis=1)
    return top[:, ::-1].copy()


def _by_pieces(blk: np.ndarray, k: int) -> np.ndarray | None:
    """Each row's ``k`` largest entries (unsorted), from the ``kp`` largest of each piece of
    ``PIECE`` columns (``kp``: the piece's expected share of the ``k`` plus five standard
    deviations and 16) and the columns past the last whole piece; ``None`` when that saves
    nothing. A piece whose ``kp``-th largest exceeds the row's ``k``-th largest found so
    may hold more of the ``k``: that row is selected again with those pieces whole (a row
    holding a NaN: in full), so the values never depend on how the pieces fell."""
    r, C = blk.shape
    m = C // PIECE
    share = k * PIECE / C
    kp = min(PIECE, math.ceil(share + 5 * math.sqrt(share) + 16))
    if m * kp + C - m * PIECE < k or 2 * (m * kp) > C:
        return None
    pieces = blk[:, : m * PIECE].reshape(r * m, PIECE)
    pieces.partition(PIECE - kp, axis=1)
    kept = pieces[:, PIECE - kp:].reshape(r, m, kp)
    union = np.concatenate([kept.reshape(r, m * kp), blk[:, m * PIECE:]], axis=1)
    u = union.shape[1]
    union.partition(u - k, axis=1)
    top = union[:, u - k:]
    cut = top.min(axis=1)                              # each row's k-th largest (NaN if any)
    full = kept.min(axis=2) > cut[:, None]             # pieces that may hold more of the k
    for i in np.flatnonzero(np.isnan(cut) | full.any(axis=1)):   # rare
        row = blk[i] if np.isnan(cut[i]) else np.concatenate(
            [kept[i][~full[i]].ravel(), pieces.reshape(r, m, PIECE)[i][full[i]].ravel(),
             blk[i, m * PIECE:]])
        row.partition(row.size - k)
        top[i] = row[row.size - k:]
    return top


def columns_of_largest(blk: np.ndarray, top: np.ndarray) -> np.ndarray | None:
    """The columns of ``top`` (each row's ``k`` largest entries of ``blk``, largest first)
    in ``blk``, in the same order; ``None`` when a row holds tied or NaN values among them
    or at the cut (then which of equal entries comes first is up to the selection, and the
    caller keeps its own)."""
    B, k = top.shape
    if np.isnan(top).any() or (k > 1 and (top[:, 1:] == top[:, :-1]).any()):
        return None
    # every row holds at least its k values >= its k-th largest: exactly k in each row
    # when there are B * k in all (more in a row means a tie at the cut)
    flat = np.flatnonzero(np.greater_equal(blk, top[:, -1:]))
    if flat.size != B * k:
        return None
    cols = flat.reshape(B, k) - np.arange(0, B * blk.shape[1], blk.shape[1])[:, None]
    order = np.argsort(np.take_along_axis(blk, cols, axis=1), axis=1)[:, ::-1]
    return np.take_along_axis(cols, order, axis=1)


__all__ = ["reduce_rows", "check_batch", "check_tau", "pick_tau", "real_scalar",
           "pair_similarities", "queue_similarities", "masked_logits", "negative_values",
           "LAYOUTS", "unit_rows"]

DEFAULT_TAU = 0.5


def pick_tau(tau, temperature, default: float = DEFAULT_TAU):
    """The temperature given as ``tau`` or under lightly's name ``temperature`` (unchecked;
    :func:`check_tau` checks it): ``default`` when neither is given, a ``ValueError`` when
    both are."""
    if tau is not None and temperature is not None:
        raise ValueError(f"got tau={tau!r} and temperature={temperature!r}: they are one option "
                         f"(temperature is another name for tau); pass only one of them")
    picked = tau if tau is not None else temperature
    return default if picked is None else picked


def real_scalar(x, name: str) -> float:
    """``x`` as a Python float: an int or float, a NumPy scalar or a 0-d real tensor (one
    read from the device for a CUDA tensor). Anything else, bools included, is a
    ``ValueError`` naming ``name``."""
    if isinstance(x, torch.Tensor):
        if x.ndim != 0 or x.dtype == torch.bool or x.is_complex():
            raise ValueError(f"{name} must be a real number or a 0-d real tensor, got a "
                             f"{x.dtype} tensor of shape {tuple(x.shape)}")
        return float(x.detach())
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name} must be a real number (int, float, NumPy scalar or 0-d "
                         f"tensor), got {type(x).__name__} {x!r}")
    return float(x)


def check_tau(tau, dtype: torch.dtype | None = None) -> float:
    """``tau`` as a float, checked: finite, ``> 0``, and usable with inputs of ``dtype``
    (default: the widest, float64), i.e. the logits ``s / tau`` (``|s| <= 1``) neither
    overflow nor vanish in the dtype the losses compute in (float32 for float32 and
    narrower inputs, float64 for float64). Raises ``ValueError`` naming ``tau``."""
    t = real_scalar(tau, "tau")
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"tau must be a finite positive number (the softmax temperature), "
                         f"got {tau!r}")
    check_tau_dtype(t, torch.float64 if dtype is None else dtype)
    return t


def device_tau(tau) -> bool:
    """Whether a temperature stays a tensor in the loss: one that requires grad (a learnable
    temperature, e.g. CLIP's ``1 / logit_scale``) or that lives on an accelerator (reading
    it would wait for the device). A CPU tensor without grad is read as a constant (free)."""
    return isinstance(tau, torch.Tensor) and (tau.requires_grad or tau.device.type != "cpu")


def check_tensor_tau(tau: torch.Tensor, name: str = "tau") -> torch.Tensor:
    """A tensor temperature checked from its metadata only (0-d, real floating): its value is
    not read, since on an accelerator that read is a host synchronisation per step."""
    if tau.ndim != 0 or not tau.is_floating_point() or tau.is_complex():
        raise ValueError(f"{name} must be a real number or a 0-d real tensor, got a "
                         f"{tau.dtype} tensor of shape {tuple(tau.shape)}")
    return tau


def loss_tau(tau, temperature=None, dtype: torch.dtype | None = None, *, read: bool = False):
    """The temperature as the losses use it: a tensor that :func:`device_tau` keeps (a
    learnable temperature, e.g. CLIP's ``1 / logit_scale``, or one on a GPU) stays that
    tensor, so that it receives its gradient and is never read back from the device (its
    shape and dtype are checked, its value only with ``read=True``: once, at a module's
    construction); anything else becomes a Python float (a constant), checked as
    :func:`check_tau` checks it."""
    picked = pick_tau(tau, temperature)
    if device_tau(picked):
        check_tensor_tau(picked)
        if read:
            check_tau(picked, dtype)
        return picked
    return check_tau(picked, dtype)


def inverse_tau(tau) -> float | torch.Tensor:
    """``1 / tau``: a float for a float, a 0-d tensor (with gradient) for a tensor."""
    return 1.0 / tau if isinstance(tau, torch.Tensor) else 1.0 / float(tau)


def check_tau_dtype(tau, dtype: torch.dtype) -> None:
    """Raise ``ValueError`` when ``1 / tau`` cannot be used in the compute dtype of
    ``dtype`` inputs (Python arithmetic only: no device work, no synchronisation; a tensor
    ``tau`` was checked when it was given and is not read again)."""
    if isinstance(tau, torch.Tensor):
        return
    comp = torch.float64 if dtype == torch.float64 else torch.float32
    fi = torch.finfo(comp)
    lo, hi = 2.0 / fi.max, 1.0 / fi.tiny
    if not lo <= tau <= hi:
        raise ValueError(f"tau={tau!r} cannot be used with {dtype} inputs: the logits s / tau "
                         f"(|s| <= 1) would {'overflow' if tau < lo else 'vanish'} in "
                         f"{comp} (the loss would be NaN or constant); use a tau in "
                         f"[{lo:.3g}, {hi:.3g}] (the paper's lie in 0.05 .. 0.5)")


@overload
def check_batch(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None,
                sync: bool = ..., num_negatives: int | None = ...,
                per_row: Literal[False] = ...) -> int: ...


@overload
def check_batch(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None,
                sync: bool = ..., num_negatives: int | None = ...,
                per_row: bool = ...) -> int | torch.Tensor: ...


def check_batch(sim: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None,
                sync: bool = True, num_negatives: int | None = None,
                per_row: bool = False) -> int | torch.Tensor:
    """Validate a generic batch (``docs/method.md``, "Notation") and return ``K``, the
    number of negatives
    of every row.

    Raises ``ValueError`` for a non-2-D ``sim``, mismatched shapes, a target outside the
    columns, a masked-out positive, or rows whose numbers of negatives differ.
    ``sync=False`` checks shapes and dtypes only (metadata, no device-to-host copy): the
    value checks are skipped, and with a ``mask`` ``K`` is ``num_negatives`` when given
    (otherwise it is read from the mask's first row, one synchronisation).
    ``per_row=True`` (a loss that takes unequal counts): rows whose numbers of negatives
    differ are no error, and ``K`` is then the ``(B,)`` int64 tensor of the counts ``K_i``
    (read from the mask, one synchronisation, with ``sync=False`` too unless
    ``num_negatives`` is given); equal counts still give the int.
    """
    if not isinstance(sim, torch.Tensor) or sim.ndim != 2:
        raise ValueError(f"sim must be a 2-D tensor (rows = anchors, columns = candidates), "
                         f"got {getattr(sim, 'shape', type(sim).__name__)}")
    if not sim.is_floating_point():
        raise ValueError(f"sim must be a floating-point tensor of similarities, got {sim.dtype}; "
                         f"convert it with .float()")
    B, C = sim.shape
    if B == 0 or C < 2:
        raise ValueError(f"sim must have at least one row and two columns, got shape "
                         f"{tuple(sim.shape)}")
    if not isinstance(targets, torch.Tensor) or targets.shape != (B,):
        raise ValueError(f"targets must have shape ({B},) (a tensor: one positive column per "
                         f"row of sim), got {getattr(targets, 'shape', type(targets).__name__)}")
    n_bad = int((~torch.isfinite(sim)).sum()) if sync else 0  # a sync: checked mode only
    if n_bad:
        raise ValueError(f"sim holds {n_bad} NaN/inf value(s) of {sim.numel()}: the embeddings are "
                         f"not finite (a diverged model?); cosine similarities lie in [-1, 1]")
    if targets.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool):
        raise ValueError(f"targets must be an integer tensor of column indices, got "
                         f"{targets.dtype}")
    if sync and bool(((targets < 0) | (targets >= C)).any()):
        raise ValueError(f"targets must index columns of sim, i.e. lie in [0, {C - 1}]")
    if mask is None:
        return C - 1
    if not isinstance(mask, torch.Tensor) or mask.shape != sim.shape or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a boolean tensor of the same shape as sim "
                         f"{tuple(sim.shape)}, got {getattr(mask, 'shape', type(mask))} "
                         f"{getattr(mask, 'dtype', '')}")
    if not sync:
        if num_negatives is not None:
            if not 1 <= int(num_negatives) <= C - 1:
                raise ValueError(f"num_negatives must lie in [1, {C - 1}], got {num_negatives!r}")
            return int(num_negatives)
        if per_row:
            return negative_counts(mask.sum(dim=1) - 1)
        return int(mask[0].sum()) - 1
    rows = torch.arange(B, device=sim.device)
    pos_valid = mask[rows, targets]
    if not bool(pos_valid.all()):
        bad = (~pos_valid).nonzero().flatten()[:5].tolist()
        raise ValueError(f"the positive column is masked out (mask[i, targets[i]] is False) "
                         f"for rows {bad}; every row's positive must be a valid candidate")
    counts = mask.sum(dim=1) - 1
    if per_row:
        return negative_counts(counts)
    if not bool((counts == counts[0]).all()):
        raise ValueError(f"every row must have the same number of negatives (valid columns "
                         f"other than the positive); counts range from {int(counts.min())} "
                         f"to {int(counts.max())}")
    K = int(counts[0])
    if K < 1:
        raise ValueError("every row needs at least one negative (a valid column other than "
                         "the positive)")
    return K


def negative_counts(counts: torch.Tensor) -> int | torch.Tensor:
    """``K`` of rows with ``counts`` negatives: the int when they are equal, else the
    ``(B,)`` tensor (one synchronisation: the least and the largest count)."""
    lo, hi = torch.stack([counts.min(), counts.max()]).tolist()
    if lo < 1:
        raise ValueError("every row needs at least one negative (a valid column other than "
                         "the positive)")
    return int(lo) if lo == hi else counts


def check_views(z1: torch.Tensor, z2: torch.Tensor, min_n: int = 2) -> None:
    """Shape-only checks of two views (no host sync): ``(N, d)`` each, ``N >= min_n``.

    A batch of one pair leaves every anchor without a negative (``K = 2N - 2 = 0`` in the
    SimCLR layout, ``N - 1 = 0`` in pairs): InfoNCE would return 0, DCL ``-inf``, HCL and
    WEINCE's tail statistics would fail deep inside. With a memory bank the negatives come
    from the bank, and ``min_n=1``."""
    for name, z in (("z1", z1), ("z2", z2)):
        if not isinstance(z, torch.Tensor):
            raise ValueError(f"{name} must be a tensor of embeddings of shape (N, d), got "
                             f"{type(z).__name__}")
        if not z.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor of embeddings, got "
                             f"{z.dtype}; convert it with .float()")
    if z1.ndim != 2 or z1.shape != z2.shape:
        raise ValueError(f"z1 and z2 must both have shape (N, d), got {tuple(z1.shape)} and "
                         f"{tuple(z2.shape)}")
    if z1.shape[1] == 0:
        raise ValueError(f"z1 and z2 have d = 0 dimensions (shape {tuple(z1.shape)}); "
                         f"embeddings need d >= 1")
    if z1.shape[0] < min_n:
        raise ValueError(f"a batch of N={z1.shape[0]} pair(s) gives no negatives (K = 2N - 2 for "
                         f"'simclr', N - 1 for 'pairs'); contrastive losses need N >= 2 (and "
                         f"WEINCE's tail statistics a few dozen negatives to mean much)")


def unit_rows(z: torch.Tensor) -> torch.Tensor:
    """``F.normalize(z, dim=1)`` that also holds for huge or tiny rows.

    A row whose largest ``|entry|`` lies outside ``2**-30 .. 2**55`` (about 1e-9 .. 4e16 in
    float32: beyond, the squared norm could overflow, so that norms of ~1e19 and more became
    zero vectors, or fall under ``F.normalize``'s ``eps``) is first scaled by a power of two
    into that range, which is exact in floating point. Every other row is scaled by
    ``2**0``: values and gradients are bit for bit ``F.normalize``'s, and ``F.normalize``
    still sees the caller's vectors (the norms analysis intercepts it). Rows holding
    NaN/inf stay non-finite."""
    # squares of 2**hi stay far from overflow; rows of 2**lo stay far above normalize's eps
    hi = max(0, int(math.log2(torch.finfo(z.dtype).max)) // 2 - 8)  # 55 for float32, 0 for fp16
    lo = -30 if hi else 0
    _, e = torch.frexp(z.detach().abs().amax(dim=1, keepdim=True))
    return F.normalize(torch.ldexp(z, (e.clamp(lo, hi) - e).to(z.dtype)), dim=1)


def pair_similarities(z1: torch.Tensor, z2: torch.Tensor, layout: Layout = "simclr"):
    """Cosine similarities of two views in the generic ``(sim, targets, mask)`` form that
    :func:`weince.losses.info_nce` and :func:`weince.losses.weince` take
    (``docs/method.md``, "Notation").

    Args:
        z1, z2: ``(N, d)`` embeddings of the two views, any floating dtype, ``N >= 2``
            (normalised to unit length here; a gradient flows back to them).
        layout: ``"simclr"`` (default): ``Z = cat(z1, z2)`` ``(2N, d)``, ``sim = Z Z^T``
            ``(2N, 2N)``, the diagonal masked, positive of row ``i`` is ``i + N``
            (mod ``2N``), ``K = 2N - 2`` (NT-Xent). ``"pairs"``: ``sim = z1 z2^T``
            ``(N, N)``, positive on the diagonal, no mask, ``K = N - 1`` (SimCSE, dual
            encoders).

    Returns:
        ``(sim, targets, mask)``: ``sim`` ``(B, C)`` in float32 (float64 for float64
        views; narrower views are cast, and autocast is off inside), ``targets``
        ``(B,)`` int64, ``mask`` ``(B, C)`` bool, or ``None`` for ``"pairs"``.

    Raises:
        ValueError: views that are not floating ``(N, d)`` tensors of one shape with
            ``N >= 2`` and ``d >= 1``, or an unknown ``layout``.

    Example:
        >>> import torch
        >>> from weince.losses import pair_similarities
        >>> sim, targets, mask = pair_similarities(torch.randn(3, 5), torch.randn(3, 5))
        >>> sim.shape, targets.tolist(), mask.diagonal().any().item()
        (torch.Size([6, 6]), [3, 4, 5, 0, 1, 2], False)
        >>> sim, targets, mask = pair_similarities(torch.randn(3, 5), torch.randn(3, 5), "pairs")
        >>> sim.shape, targets.tolist(), mask
        (torch.Size([3, 3]), [0, 1, 2], None)
    """
    check_views(z1, z2)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    with no_autocast(z1):
        return _pair_similarities(full_precision(z1), full_precision(z2), layout)


def _pair_similarities(z1: torch.Tensor, z2: torch.Tensor, layout: Layout):
    n = z1.shape[0]
    z1 = unit_rows(z1)
    z2 = unit_rows(z2)
    idx = torch.arange(n, device=z1.device)
    if layout == "pairs":
        return similarity(z1, z2), idx, None
    z = torch.cat([z1, z2], dim=0)
    sim = similarity(z, z)
    targets = torch.cat([idx + n, idx])
    mask = ~torch.eye(2 * n, dtype=torch.bool, device=z.device)
    return sim, targets, mask


def queue_similarities(z1: torch.Tensor, z2: torch.Tensor, queue: torch.Tensor):
    """Cosine similarities of MoCo's layout, the ``(sim, targets)`` that
    :func:`weince.losses.info_nce` and :func:`weince.losses.weince` take: row ``i`` is the
    anchor ``z1[i]``, column 0 its positive ``z2[i]``, columns ``1..K`` the ``K`` rows of
    ``queue`` (past embeddings: the negatives, shared by every row). The other items of
    the batch are not negatives.

    Args:
        z1, z2: ``(N, d)`` embeddings of the two views (normalised to unit length here;
            a gradient flows back to them), ``N >= 1``.
        queue: ``(K, d)`` negatives, ``K >= 1`` (normalised here too; no gradient is
            expected through them: pass detached embeddings).

    Returns:
        ``(sim, targets)``: ``sim`` ``(N, 1 + K)`` in float32 (float64 for float64
        input; autocast off inside), ``targets`` ``(N,)``
        int64 zeros (the positive's column). No mask: every column is valid.

    Raises:
        ValueError: views that are not floating ``(N, d)`` tensors of one shape, or a
            ``queue`` that is not a floating ``(K, d)`` tensor with ``K >= 1``.

    Example:
        >>> import torch
        >>> from weince.losses import info_nce, queue_similarities
        >>> z1, z2, queue = torch.randn(4, 8), torch.randn(4, 8), torch.randn(100, 8)
        >>> sim, targets = queue_similarities(z1, z2, queue)
        >>> sim.shape, targets.tolist()
        (torch.Size([4, 101]), [0, 0, 0, 0])
        >>> info_nce(sim, targets, tau=0.2).shape
        torch.Size([])
    """
    check_views(z1, z2, min_n=1)
    if (not isinstance(queue, torch.Tensor) or not queue.is_floating_point() or queue.ndim != 2
            or queue.shape[1] != z1.shape[1] or queue.shape[0] < 1):
        raise ValueError(f"queue must be a floating (K, d) tensor with K >= 1 and d = "
                         f"{z1.shape[1]} (z1's), got "
                         f"{getattr(queue, 'dtype', type(queue).__name__)} "
                         f"of shape {tuple(getattr(queue, 'shape', ()))}")
    with no_autocast(z1):
        z1, z2, queue = (unit_rows(full_precision(z)) for z in (z1, z2, queue))
        return moco_similarities(z1, z2, queue)


def moco_similarities(z1: torch.Tensor, z2: torch.Tensor, queue: torch.Tensor):
    """:func:`queue_similarities` on unit rows, unchecked (``queue`` may have ``K = 0``
    rows): the positive ``<z1_i, z2_i>`` in column 0, then ``z1 @ queue^T``."""
    pos = (z1 * z2).sum(dim=1, keepdim=True)
    if queue.shape[0] == 0:              # an empty bank (its first call): no negatives
        return pos, torch.zeros(z1.shape[0], dtype=torch.long, device=z1.device)
    sim = torch.cat([pos, similarity(z1, queue.to(z1.dtype))], dim=1)
    return sim, torch.zeros(z1.shape[0], dtype=torch.long, device=z1.device)


REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction: str, weight: torch.Tensor | None, rows: int) -> None:
    """A ``ValueError`` for an unknown ``reduction`` or a ``weight`` that is not ``(rows,)``."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if weight is not None and (not isinstance(weight, torch.Tensor) or weight.shape != (rows,)
                               or not weight.is_floating_point()):
        raise ValueError(f"weight must be a floating ({rows},) tensor (one weight per row of "
                         f"sim), got {getattr(weight, 'dtype', type(weight).__name__)} of "
                         f"shape {tuple(getattr(weight, 'shape', ()))}")


def reduced_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean",
                          weight: torch.Tensor | None = None) -> torch.Tensor:
    """The cross-entropy of each row, reduced: ``"mean"`` (without ``weight`` exactly
    ``F.cross_entropy``'s mean; with it ``sum_i w_i l_i / sum_i w_i``), ``"sum"``
    (``sum_i w_i l_i``) or ``"none"`` (the ``(B,)`` losses ``w_i l_i``)."""
    if weight is None and reduction != "none":
        return F.cross_entropy(logits, targets, reduction=reduction)
    per_row = F.cross_entropy(logits, targets, reduction="none")
    if weight is not None:
        per_row = per_row * weight.to(per_row.dtype)
    if reduction == "none":
        return per_row
    total = per_row.sum()
    if reduction == "sum" or weight is None:
        return total
    return total / weight.to(per_row.dtype).sum()


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """``x.float()`` for a bf16/fp16 tensor, anything else as it is (the checks that follow
    refuse what is not a floating tensor): what the losses compute from."""
    if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16):
        return x.float()
    return x


def no_autocast(x: torch.Tensor):
    """A context in which ops on ``x``'s device run in their inputs' dtype: autocast off
    when it is on (the similarities and statistics in float32, not bf16), else nothing."""
    dev = x.device.type if isinstance(x, torch.Tensor) else "cpu"
    if torch.is_autocast_enabled(dev):
        return torch.autocast(dev, enabled=False)
    return contextlib.nullcontext()


def _device_type(args) -> str:
    return next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")


def custom_fwd(forward):
    """``torch.amp.custom_fwd`` for a loss that may run on any device: the forward of a
    ``torch.autograd.Function`` records the autocast state of its inputs' device, so that
    :func:`custom_bwd` runs the backward under the same state, wherever ``backward()`` is
    called (inside an autocast block too)."""
    @functools.wraps(forward)
    def wrapped(ctx, *args):
        dev = _device_type(args)
        ctx.amp_state = ((dev, torch.is_autocast_enabled(dev), torch.get_autocast_dtype(dev))
                         if torch.amp.is_autocast_available(dev) else None)
        return forward(ctx, *args)
    return wrapped


def custom_bwd(backward):
    """The backward half of :func:`custom_fwd`: runs under the forward's autocast state."""
    @functools.wraps(backward)
    def wrapped(ctx, *grads):
        state = ctx.amp_state
        if state is None:
            return backward(ctx, *grads)
        dev, enabled, dtype = state
        with torch.autocast(dev, enabled=enabled, dtype=dtype):
            return backward(ctx, *grads)
    return wrapped


def _column_major(t: torch.Tensor) -> bool:
    return t.stride(0) == 1 and t.stride(1) == t.shape[0]


class _Similarity(torch.autograd.Function):
    """``x @ y.T`` whose backward runs under the forward's autocast state (off, inside the
    losses), not the caller's: called inside an autocast block, torch's own matmul backward
    would run in bf16/fp16. The gradients are autograd's own formulas for ``mm``, branch for
    branch (bit for bit torch's, autocast off)."""

    @staticmethod
    @custom_fwd
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x @ y.T

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:   # torch's mm_mat1_backward, mat2 = y.T
            gx = y.T.mm(grad.t()).t() if _column_major(x) else grad.mm(y)
        if ctx.needs_input_grad[1]:   # mm_mat2_backward of y.T, then the transpose's
            yt = y.T
            gy = grad.t().mm(x) if _column_major(yt) else x.t().mm(grad).t()
        return gx, gy


class _SelfSimilarity(torch.autograd.Function):
    """:class:`_Similarity` of one tensor with itself, ``z @ z.T`` (a compiled graph takes no
    autograd function with one tensor as two inputs): the two gradients of torch's ``mm``
    summed, as autograd sums them."""

    @staticmethod
    @custom_fwd
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z @ z.T

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        gx = z.T.mm(grad.t()).t() if _column_major(z) else grad.mm(z)
        gy = grad.t().mm(z) if _column_major(z.T) else z.t().mm(grad).t()
        return gx + gy


def similarity(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x @ y.T`` (2-D), its backward in the forward's autocast state (:class:`_Similarity`);
    a plain matmul where no gradient is wanted."""
    if not (torch.is_grad_enabled() and (x.requires_grad or y.requires_grad)):
        return x @ y.T
    if x is y:
        return _SelfSimilarity.apply(x)
    return _Similarity.apply(x, y)


def upcast(x: torch.Tensor) -> torch.Tensor:
    """float64 stays float64; anything else (bf16/fp16 under autocast) computes in float32."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def invert(mask: torch.Tensor | None) -> torch.Tensor | None:
    """The internal functions take ``invalid = ~mask`` (computed once per call)."""
    return None if mask is None else ~mask


def masked_logits(logits: torch.Tensor, invalid: torch.Tensor | None) -> torch.Tensor:
    """Invalid columns -> ``-inf`` so that they drop out of the softmax."""
    if invalid is None:
        return logits
    return logits.masked_fill(invalid, float("-inf"))


def negative_values(sim: torch.Tensor, targets: torch.Tensor,
                    invalid: torch.Tensor | None) -> torch.Tensor:
    """``sim`` with the positive and the invalid columns set to ``-inf`` (negatives only)."""
    neg = sim.clone() if invalid is None else sim.masked_fill(invalid, float("-inf"))
    return neg.scatter_(1, targets.view(-1, 1), float("-inf"))


def two_view_batch(z1: torch.Tensor, z2: torch.Tensor, layout: Layout):
    """:func:`pair_similarities` for the loss modules: ``(sim, targets, invalid, K)`` with
    ``invalid`` the complement of the mask (the SimCLR diagonal), built directly."""
    check_views(z1, z2)
    if layout == "pairs":
        sim, targets, mask = pair_similarities(z1, z2, layout)
        return sim, targets, invert(mask), sim.shape[1] - 1
    n = z1.shape[0]
    z = unit_rows(torch.cat([z1, z2], dim=0))
    idx = torch.arange(n, device=z.device)
    invalid = torch.eye(2 * n, dtype=torch.bool, device=z.device)
    return similarity(z, z), torch.cat([idx + n, idx]), invalid, 2 * n - 2


def reduce_rows(per_row: torch.Tensor, reduction: str, weight: torch.Tensor | None
                ) -> torch.Tensor:
    """The row losses reduced as the functional forms reduce them."""
    if weight is not None:
        per_row = per_row * weight.to(per_row.dtype)
    if reduction == "none":
        return per_row
    total = per_row.sum()
    if reduction == "sum":
        return total
    return total / (per_row.shape[0] if weight is None else weight.to(per_row.dtype).sum())
