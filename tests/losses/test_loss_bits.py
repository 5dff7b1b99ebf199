"""The faster selection and logits give the previous implementation's numbers bit for bit.

Trained encoders depend on every bit of the loss and its gradients, so the NumPy selection
(pieces of short rows, columns recovered from values), the NumPy shortfalls and the
four-pass backward of WEINCE's logits are held against frozen copies of the forms they
replaced (one ``np.partition`` / ``np.argpartition`` per row block, a full flat partition
for the pooled fit, torch's ``max(1 - s, eps)``, a backward in five passes): values,
column choices, losses, gradients and statistics compared as raw bits, on inputs with
ties, signed zeros, NaNs and rows whose largest entries crowd into a few pieces."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import weince.losses.recipe as recipe
from weince.losses import build_loss, pair_similarities, queue_similarities, weince
from weince.losses._common import largest_per_row
from weince.losses.weince import _top_negatives_cpu

weince_mod = __import__("sys").modules["weince.losses.weince"]


def bits(x: torch.Tensor) -> torch.Tensor:
    ints = {torch.float32: torch.int32, torch.float64: torch.int64}
    return x.view(ints[x.dtype]) if x.dtype in ints else x


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Selected similarities, bit for bit, except that ``-0.0`` and ``0.0`` (equal, so
    either selection may put either first) count as one: everything downstream reads them
    through ``1 - s``."""
    return same_bits(a + 0.0, b + 0.0)


# ---------------------------------------------------------------- the previous forms
def ref_top(s, targets, invalid, k, with_indices=False, half=None):
    a = s.detach().numpy()
    B, C = a.shape
    t = (np.arange(B) + half) % B if half is not None else targets.numpy()
    blk = a.copy()
    if invalid is not None and half is None:
        blk[invalid.numpy()] = -np.inf
    if half is not None:
        blk[np.arange(B), np.arange(B)] = -np.inf
    blk[np.arange(B), t] = -np.inf
    if with_indices:
        cols = np.argpartition(blk, C - k, axis=1)[:, C - k:]
        vals = np.take_along_axis(blk, cols, axis=1)
        order = np.argsort(vals, axis=1)[:, ::-1]
        return (torch.from_numpy(np.take_along_axis(vals, order, axis=1).copy()),
                torch.from_numpy(np.take_along_axis(cols, order, axis=1).copy()))
    blk.partition(C - k, axis=1)
    out = np.sort(blk[:, C - k:], axis=1)
    return torch.from_numpy(out[:, ::-1].copy())


def ref_flat_largest(a: np.ndarray, k: int) -> np.ndarray:
    flat = a.reshape(-1).copy()
    flat.partition(flat.size - k)
    return np.sort(flat[flat.size - k:])[::-1].copy()


class RefBlended(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, negc, a, c, eps, invalid):
        if isinstance(invalid, str):
            invalid = torch.eye(s.shape[0], dtype=torch.bool)
        x = torch.rsub(s, 1.0).clamp_min_(eps).log_().mul_(negc)
        x.addcmul_(s, a)
        if invalid is not None:
            x.masked_fill_(invalid, float("-inf"))
        ctx.save_for_backward(s, a, c)
        ctx.eps = eps
        return x

    @staticmethod
    def backward(ctx, grad):
        s, a, c = ctx.saved_tensors
        grad_a = (grad * s).sum(1, keepdim=True) if ctx.needs_input_grad[2] else None
        slope = torch.rsub(s, 1.0)
        F.threshold_(slope, ctx.eps, float("inf"))
        torch.div(c, slope, out=slope)
        slope.add_(a).mul_(grad)
        return slope, None, grad_a, None, None, None


def ref_pooled(sim, k, targets=None, invalid=None, half=None):
    a = np.array(sim.detach().numpy())
    rows = np.arange(a.shape[0])
    if half is None:
        if invalid is not None:
            a[invalid.numpy()] = -np.inf
        a[rows, targets.numpy()] = -np.inf
    else:
        a[rows, rows] = -np.inf
        a[rows, (rows + half) % a.shape[0]] = -np.inf
    return torch.from_numpy(ref_flat_largest(a, k).astype(np.float64))


def ref_pooled_from_rows(top, k, sim, targets=None, invalid=None, half=None):
    return ref_pooled(sim, k, targets, invalid, half)


def ref_largest(vals, k, inplace=False):
    return torch.from_numpy(ref_flat_largest(vals.numpy(), k))


def ref_shortfalls(top, eps, numpy):
    return torch.rsub(top.double(), 1.0).clamp_min_(eps)


@pytest.fixture
def previous_forms(monkeypatch):
    """Switch the loss code to the previous forms (call the returned function)."""
    def switch():
        monkeypatch.setattr(weince_mod, "_top_negatives_cpu", ref_top)
        monkeypatch.setattr(weince_mod, "_BlendedLogits", RefBlended)
        monkeypatch.setattr(recipe, "pooled_top_from_rows", ref_pooled_from_rows)
        monkeypatch.setattr(recipe, "_largest", ref_largest)
        monkeypatch.setattr(weince_mod, "_shortfalls", ref_shortfalls)
    return switch


# ---------------------------------------------------------------- inputs
def matrix(rng, B, C, kind, dtype):
    a = (rng.standard_normal((B, C)) * 0.3).astype(dtype)
    if kind == "ties":
        a = np.round(a * 20) / 20
    elif kind == "nan":
        a[rng.random((B, C)) < 0.001] = np.nan
    elif kind == "crowded":          # every row's largest entries in its first pieces
        a[:, : C // 3] += 0.5
    elif kind == "zeros":
        a[0] = 0.0
        a[1, ::2] = -0.0
    return torch.from_numpy(a)


KINDS = ("plain", "ties", "nan", "crowded", "zeros")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("C", [120, 512, 1100, 2600])
def test_selection_equals_previous_form(kind, C):
    rng = np.random.default_rng(C)
    for dtype in (np.float32, np.float64):
        B = 70
        s = matrix(rng, B, C, kind, dtype)
        t = torch.from_numpy(rng.integers(0, C, B))
        inv = torch.from_numpy(rng.random((B, C)) < 0.05)
        inv[torch.arange(B), t] = False
        for invalid in (None, inv):
            for k in sorted({10, C // 10, 51, C // 3}):
                assert same_values(_top_negatives_cpu(s, t, invalid, k),
                                   ref_top(s, t, invalid, k))
                vals, idx = _top_negatives_cpu(s, t, invalid, k, with_indices=True)
                rvals, ridx = ref_top(s, t, invalid, k, with_indices=True)
                assert same_values(vals, rvals) and torch.equal(idx, ridx)


@pytest.mark.parametrize("C", [120, 512])
def test_columns_with_a_tie_at_the_cut_equal_previous_form(C):
    """Distinct top-k values whose k-th largest recurs further down the row (a tie at the
    cut only): the columns recovered from the values cannot tell which copy the previous
    form chose, so they must give way to it in exactly those rows' blocks."""
    rng = np.random.default_rng(C + 1)
    B = 70
    for k in (10, 29):
        a = matrix(rng, B, C, "plain", np.float32).numpy()
        t = torch.from_numpy(rng.integers(0, C, B))
        a[np.arange(B), t.numpy()] = a.min() - 1.0   # the positive: below every negative
        kth = -np.sort(-a, axis=1)[:, k - 1]
        low = np.argsort(a, axis=1)[:, 1]            # the least negative
        tied = rng.random(B) < 0.3                   # some rows tie at the cut, others not
        a[np.arange(B)[tied], low[tied]] = kth[tied]
        s = torch.from_numpy(a)
        vals, idx = _top_negatives_cpu(s, t, None, k, with_indices=True)
        rvals, ridx = ref_top(s, t, None, k, with_indices=True)
        assert same_bits(vals, rvals) and torch.equal(idx, ridx)
        plain = torch.from_numpy(np.delete(a, np.flatnonzero(tied), axis=0))
        keep = torch.from_numpy(np.delete(t.numpy(), np.flatnonzero(tied)))
        assert torch.equal(_top_negatives_cpu(plain, keep, None, k, with_indices=True)[1],
                           ref_top(plain, keep, None, k, with_indices=True)[1])


def test_simclr_half_selection_equals_previous_form():
    rng = np.random.default_rng(5)
    for n in (64, 256, 700):
        s = matrix(rng, 2 * n, 2 * n, "plain", np.float32)
        for k in (51, min(140, 2 * n - 2)):
            assert same_bits(_top_negatives_cpu(s, None, None, k, half=n),
                             ref_top(s, None, None, k, half=n))
            vals, idx = _top_negatives_cpu(s, None, None, k, with_indices=True, half=n)
            rvals, ridx = ref_top(s, None, None, k, with_indices=True, half=n)
            assert same_bits(vals, rvals) and torch.equal(idx, ridx)


@pytest.mark.parametrize("kind", KINDS)
def test_flat_selection_equals_previous_form(kind):
    rng = np.random.default_rng(7)
    for B in (40, 512, 900):
        a = matrix(rng, B, B, kind, np.float32).numpy()
        for k in (5, 1024, B * B // 20):
            assert np.array_equal(largest_per_row(a.reshape(1, -1).copy(), k)[0],
                                  ref_flat_largest(a, k), equal_nan=True)
            got = largest_per_row(a.reshape(1, -1).copy(), k)[0]
            assert got.view(np.int32).tolist() == ref_flat_largest(a, k).view(np.int32).tolist()


@pytest.mark.parametrize("kind", ["plain", "ties", "nan", "crowded", "zeros", "hubs"])
def test_pooled_from_rows_equals_previous_form(kind):
    rng = np.random.default_rng(11)
    for n, width in ((32, 10), (256, 51), (256, 12)):
        s = matrix(rng, 2 * n, 2 * n, "plain" if kind == "hubs" else kind, np.float32)
        if kind == "hubs":                # a few rows close to everything
            s[: n // 8] += 0.5
        for half, t, inv in ((n, None, None),
                             (None, torch.from_numpy(rng.integers(0, 2 * n, 2 * n)), None)):
            top = _top_negatives_cpu(s, t, inv, width, half=half)
            for k in (5, width * n // 2, 2 * n * width, 2 * n * width + 1):
                assert same_bits(recipe.pooled_top_from_rows(top, k, s, t, inv, half),
                                 ref_pooled(s, k, t, inv, half))


# ---------------------------------------------------------------- whole losses
def views(n, d, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, generator=g, dtype=torch.float64)
    z2 = z1 + 0.4 * torch.randn(n, d, generator=g, dtype=torch.float64)
    z2[:3] = z1[:3]                       # positives at the clamp
    return z1.to(dtype), z2.to(dtype)


def module_run(name, steps, n, dtype, **kw):
    torch.manual_seed(0)
    fn = build_loss(name, **kw).train()
    out = []
    for step in range(steps):
        z1, z2 = views(n, 16, 100 * step + n, dtype)
        a, b = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
        loss = fn(a, b)
        loss.backward()
        stats = [v.detach().clone() for v in fn.last_stats.values()]
        out += [loss.detach(), a.grad, b.grad, *stats]
    return out


CASES = [
    ("weince", 1, 256, {}), ("weince", 1, 40, {"layout": "pairs"}),
    ("weince", 1, 100, {"beta": "anchor"}), ("weince", 1, 100, {"eps": 1e-2, "gate": "rho"}),
    ("weince_recipe", 1, 256, {}), ("weince_recipe", 1, 300, {"layout": "pairs"}),
    ("weince_recipe_no_weib", 1, 100, {"top_m": 20}),
    ("weince", 5, 60, {"memory_bank_size": 1500}),
    ("weince_recipe", 5, 60, {"memory_bank_size": 1500}),
    ("weince", 1, 600, {}),               # 2N = 1200: the selection by pieces
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,steps,n,kw", CASES)
def test_modules_equal_previous_forms(previous_forms, name, steps, n, kw, dtype):
    new = module_run(name, steps, n, dtype, tau=0.2, **kw)
    previous_forms()
    old = module_run(name, steps, n, dtype, tau=0.2, **kw)
    assert len(new) == len(old)
    assert all(same_bits(x, y) for x, y in zip(new, old))


def test_learnable_tau_equals_previous_forms(previous_forms):
    def run():
        tau = torch.nn.Parameter(torch.tensor(0.3))
        z1, z2 = views(100, 16, 3, torch.float32)
        a = z1.clone().requires_grad_(True)
        build_loss("weince_recipe", tau=tau).train()(a, z2).backward()
        return a.grad, tau.grad
    new = run()
    previous_forms()
    assert all(same_bits(x, y) for x, y in zip(new, run()))


def test_functional_with_mask_and_queue_equals_previous_forms(previous_forms):
    def run():
        out = []
        z1, z2 = views(128, 16, 7, torch.float32)
        for layout, kw in (("simclr", {}), ("pairs", {"beta": "anchor"}), ("simclr", {"lam": 0.5})):
            a = z1.clone().requires_grad_(True)
            sim, t, m = pair_similarities(a, z2, layout)
            loss, st = weince(sim, t, m, tau=0.25, return_stats=True, **kw)
            loss.backward()
            out += [loss.detach(), a.grad, st["lambda"], st["daic"], st["rho"]]
        a = z1.clone().requires_grad_(True)
        sim, t = queue_similarities(a, z2, views(1300, 16, 8, torch.float32)[0])
        weince(sim, t, tau=0.2).backward()
        return out + [a.grad]
    new = run()
    previous_forms()
    assert all(same_bits(x, y) for x, y in zip(new, run()))
