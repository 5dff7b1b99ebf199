"""``chunk_size=``: the similarity rows a chunk of anchors at a time
(:mod:`weince.losses.chunked`). The chunked loss equals the unchunked one, with its
gradients and statistics, to rounding (1e-12 in float64: a chunk's matmul may round
otherwise than the whole matrix's, and the row losses and the candidates' gradients are
summed chunk by chunk), for InfoNCE and WEINCE, both layouts, the dual-encoder loss, a
learnable temperature; and the backward keeps no whole similarity matrix."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from weince.losses import DualEncoderLoss, build_loss, dual_encoder_loss

TOL = dict(rtol=1e-12, atol=1e-14)


def views(n=90, d=12, seed=0, noise=0.3):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, generator=g, dtype=torch.float64)
    z2 = z1 + noise * torch.randn(n, d, generator=g, dtype=torch.float64)
    return z1.requires_grad_(), z2.requires_grad_()


def loss_and_grads(fn, *inputs):
    loss = fn(*inputs)
    return loss.detach(), torch.autograd.grad(loss, inputs)


MODULE_CASES = [("infonce", {}), ("weince", {}), ("weince", {"beta": "anchor"}),
                ("weince", {"lam": 0.3}), ("weince", {"gate": "rho", "q": 0.5}),
                ("weince", {"min_tail": 8, "tail_frac": 0.3})]


@pytest.mark.parametrize("layout", ["simclr", "pairs"])
@pytest.mark.parametrize("name,kw", MODULE_CASES, ids=[f"{n}-{k}" for n, k in MODULE_CASES])
def test_chunked_module_equals_the_unchunked_one(name, kw, layout):
    z1, z2 = views()
    whole = build_loss(name, tau=0.3, layout=layout, **kw)
    ref, ref_g = loss_and_grads(whole, z1, z2)
    assert whole.chunk_size is None
    rows = 2 * z1.shape[0] if layout == "simclr" else z1.shape[0]
    for chunk in (7, rows + 5):
        fn = build_loss(name, tau=0.3, layout=layout, chunk_size=chunk, **kw)
        got, got_g = loss_and_grads(fn, z1, z2)
        torch.testing.assert_close(got, ref, **TOL)
        for a, b in zip(got_g, ref_g):
            torch.testing.assert_close(a, b, **TOL)
        assert fn.last_stats.keys() == whole.last_stats.keys()
        for key, val in whole.last_stats.items():
            torch.testing.assert_close(fn.last_stats[key], val, rtol=1e-12, atol=1e-12)


def test_one_anchor_per_chunk():
    z1, z2 = views(n=40)
    ref, ref_g = loss_and_grads(build_loss("weince", tau=0.3, min_tail=8), z1, z2)
    got, got_g = loss_and_grads(build_loss("weince", tau=0.3, min_tail=8, chunk_size=1), z1, z2)
    torch.testing.assert_close(got, ref, **TOL)
    for a, b in zip(got_g, ref_g):
        torch.testing.assert_close(a, b, **TOL)


def test_chunked_module_in_float32_agrees_to_float32_rounding():
    z1, z2 = (z.detach().float().requires_grad_() for z in views())
    ref, ref_g = loss_and_grads(build_loss("weince", tau=0.2), z1, z2)
    got, got_g = loss_and_grads(build_loss("weince", tau=0.2, chunk_size=16), z1, z2)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-7)
    for a, b in zip(got_g, ref_g):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["infonce", "weince"])
def test_a_learnable_temperature_gets_the_unchunked_gradient(name):
    z1, z2 = views()
    out = []
    for chunk in (None, 13):
        tau = torch.nn.Parameter(torch.tensor(0.25, dtype=torch.float64))
        fn = build_loss(name, tau=tau, chunk_size=chunk)
        assert any(p is tau for p in fn.parameters())
        fn(z1, z2).backward()
        out.append(tau.grad.clone())
    assert out[0] != 0
    torch.testing.assert_close(out[1], out[0], **TOL)


@pytest.mark.parametrize("loss", ["infonce", "weince"])
@pytest.mark.parametrize("direction", ["both", "a_to_b", "b_to_a"])
def test_chunked_dual_encoder_loss_equals_the_unchunked_one(loss, direction):
    a, b = views(n=80, seed=1)
    tau = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)

    def fn(chunk):
        return lambda x, y, t: dual_encoder_loss(x, y, t, loss=loss, direction=direction,
                                                 chunk_size=chunk)
    ref, ref_g = loss_and_grads(fn(None), a, b, tau)
    for chunk in (7, 80):
        got, got_g = loss_and_grads(fn(chunk), a, b, tau)
        torch.testing.assert_close(got, ref, **TOL)
        for x, y in zip(got_g, ref_g):
            torch.testing.assert_close(x, y, **TOL)


@pytest.mark.parametrize("kw", [{"reduction": "none"}, {"reduction": "sum"},
                                {"weight": "w"}, {"beta": "anchor", "normalize": False},
                                {"rho0": 0.05}, {"lam": 0.0}])
def test_chunked_dual_options_and_statistics(kw):
    a, b = views(n=70, seed=2)
    kw = dict(kw)
    if kw.get("weight") == "w":
        kw["weight"] = torch.rand(70, generator=torch.Generator().manual_seed(0),
                                  dtype=torch.float64)
    if not kw.get("normalize", True):
        a, b = (torch.nn.functional.normalize(z.detach(), dim=1).requires_grad_() for z in (a, b))
    mask = torch.ones(70, 70, dtype=torch.bool)
    mask[torch.arange(70), (torch.arange(70) + 3) % 70] = False   # one false negative each
    ref, ref_st = dual_encoder_loss(a, b, 0.2, mask=mask, return_stats=True, **kw)
    got, got_st = dual_encoder_loss(a, b, 0.2, mask=mask, return_stats=True, chunk_size=9, **kw)
    torch.testing.assert_close(got, ref, **TOL)
    for side in ("a_to_b", "b_to_a"):
        assert got_st[side].keys() == ref_st[side].keys()
        for key, val in ref_st[side].items():
            if isinstance(val, torch.Tensor):
                torch.testing.assert_close(got_st[side][key], val, rtol=1e-6, atol=0)
            else:
                assert got_st[side][key] == val


def test_chunked_dual_module_and_its_stats():
    a, b = views(n=64, seed=3)
    whole, chunked = DualEncoderLoss(tau=0.1), DualEncoderLoss(tau=0.1, chunk_size=10)
    torch.testing.assert_close(chunked(a, b), whole(a, b), **TOL)
    for key, val in whole.last_stats.items():
        torch.testing.assert_close(chunked.last_stats[key], val, rtol=1e-12, atol=1e-12)
    assert "chunk_size=10" in repr(chunked)


def saved_bytes(fn, *inputs) -> int:
    """Bytes of the storages that autograd keeps for the backward of ``fn(*inputs)`` (each
    storage once: the chunks keep views of the same anchors and candidates)."""
    storages: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        storages[st.data_ptr()] = st.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(storages.values())


@pytest.mark.parametrize("name", ["infonce", "weince"])
def test_the_backward_keeps_no_whole_similarity_matrix(name):
    z1, z2 = views(n=256, d=8)
    matrix = (2 * 256) ** 2 * 8                      # one float64 2N x 2N matrix
    whole = saved_bytes(build_loss(name, tau=0.5), z1, z2)
    chunked = saved_bytes(build_loss(name, tau=0.5, chunk_size=32), z1, z2)
    assert whole >= matrix                           # the unchunked loss keeps the matrix
    assert chunked < matrix / 8                      # the chunked one: the embeddings, row losses


def test_bad_chunk_sizes_and_combinations():
    for bad in (0, -1, 2.0, True, "8"):
        with pytest.raises(ValueError, match="chunk_size must be a positive int"):
            build_loss("weince", chunk_size=bad)
        with pytest.raises(ValueError, match="chunk_size must be a positive int"):
            dual_encoder_loss(*views(n=8), chunk_size=bad)
    with pytest.raises(ValueError, match="memory bank"):
        build_loss("infonce", chunk_size=8, memory_bank_size=64)
    with pytest.raises(ValueError, match="chunk_size is for InfoNCELoss and WEINCELoss"):
        build_loss("weince_recipe", chunk_size=8)
    a, b = views(n=10)
    bad = torch.ones(10, 10, dtype=torch.bool)
    bad[0, 0] = False
    with pytest.raises(ValueError, match="drops a positive pair"):
        dual_encoder_loss(a, b, mask=bad, chunk_size=4, min_tail=4)
    with pytest.raises(ValueError, match="mask must be a boolean"):
        dual_encoder_loss(a, b, mask=bad[:, :5], chunk_size=4, min_tail=4)


@pytest.mark.slow      # a fresh interpreter
def test_a_chunked_call_imports_no_compiler():
    """The recompute is the losses' own (``torch.utils.checkpoint`` imports ``torch._dynamo``
    on first use: seconds and memory no training job needs)."""
    code = ("import sys, torch\n"
            "from weince.losses import build_loss\n"
            "fn = build_loss('weince', tau=0.1, layout='pairs', chunk_size=16)\n"
            "fn(torch.randn(64, 8, requires_grad=True), torch.randn(64, 8)).backward()\n"
            "assert 'torch._dynamo' not in sys.modules, 'torch._dynamo was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)
