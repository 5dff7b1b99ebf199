"""The losses compute in float32 whatever autocast is active: under bf16/fp16 autocast, and
from bf16/fp16 embeddings, the gradients stay within 1% of float32's."""

from __future__ import annotations

import pytest
import torch

from weince.losses import build_loss, pair_similarities, weince

N, D = 128, 32


def _views(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(N, D, generator=g)
    return z1, z1 + 0.3 * torch.randn(N, D, generator=g)


def _grad(name, z1, z2, autocast_dtype=None, input_dtype=None):
    fn = build_loss(name, tau=0.2).train()
    a = z1.detach().to(input_dtype or z1.dtype).clone().requires_grad_(True)
    b = z2.to(input_dtype or z2.dtype)
    with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16,
                        enabled=autocast_dtype is not None):
        loss = fn(a, b)
    loss.backward()
    return loss, a.grad.float()


def _rel(x, y):
    return float((x - y).norm() / y.norm())


@pytest.mark.parametrize("name", ["infonce", "weince", "weince_recipe"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_and_narrow_inputs_keep_gradients_within_one_percent(name, dtype):
    z1, z2 = _views()
    loss32, g32 = _grad(name, z1, z2)
    # float32 embeddings under autocast: the loss turns autocast off, the same numbers
    loss_ac, g_ac = _grad(name, z1, z2, autocast_dtype=dtype)
    assert loss_ac.dtype == torch.float32
    torch.testing.assert_close(loss_ac, loss32, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(g_ac, g32, rtol=1e-5, atol=1e-7)
    # embeddings that come out of a bf16/fp16 model: cast up before the similarities
    loss_lo, g_lo = _grad(name, z1, z2, autocast_dtype=dtype, input_dtype=dtype)
    assert loss_lo.dtype == torch.float32
    assert _rel(g_lo, g32) < 0.01, _rel(g_lo, g32)


def test_functional_form_under_autocast_is_float32():
    z1, z2 = _views(1)
    want = weince(*pair_similarities(z1, z2), tau=0.2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sim, targets, mask = pair_similarities(z1, z2)
        got = weince(sim, targets, mask, tau=0.2)
    assert sim.dtype == torch.float32 and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
