"""``torch.compile`` of the loss modules compiles once per input shape, with a memory bank
too: no recompilation as the bank fills or wraps (counted with torch._dynamo's own
counters), and the compiled losses equal the eager ones call for call."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from weince.losses import build_loss

N, D, Q = 16, 8, 56            # 4 calls fill the bank (the last one partly); then it wraps


def _frames() -> int:
    return counters["frames"]["ok"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["infonce", "weince", "weince_recipe", "infonce_topm"])
def test_compiled_bank_loss_compiles_once_through_fill_and_wraps(name):
    torch._dynamo.reset()
    counters.clear()
    g = torch.Generator().manual_seed(0)
    eager = build_loss(name, tau=0.2, memory_bank_size=Q).train()
    comp = torch.compile(build_loss(name, tau=0.2, memory_bank_size=Q).train(),
                         backend="aot_eager")
    seen = []
    for _ in range(14):                          # fill (4 calls), then 2.5 wraps
        z1 = torch.randn(N, D, generator=g)
        z2 = z1 + 0.3 * torch.randn(N, D, generator=g)
        a, b = z1.clone().requires_grad_(True), z1.clone().requires_grad_(True)
        want = eager(a, z2)
        got = comp(b, z2)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        want.backward()
        got.backward()
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-6)
        seen.append(_frames())
    assert comp.memory_bank.full and torch.equal(comp.memory_bank.state, eager.memory_bank.state)
    torch.testing.assert_close(comp.memory_bank.queue, eager.memory_bank.queue)
    filling = seen[:3]                            # calls 1-3: the bank is not full yet
    assert filling == [filling[0]] * 3, f"recompiled while the bank filled: {seen}"
    assert seen[4:] == [seen[4]] * (len(seen) - 4), f"recompiled as the bank wrapped: {seen}"
    assert seen[-1] - seen[0] <= 1, f"more than one compilation after the first: {seen}"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["infonce", "weince", "weince_recipe"])
def test_compiled_loss_without_bank_compiles_once_per_shape(name):
    torch._dynamo.reset()
    counters.clear()
    g = torch.Generator().manual_seed(1)
    comp = torch.compile(build_loss(name, tau=0.5).train(), backend="aot_eager", dynamic=False)
    seen = []
    for n in (24, 24, 24, 32, 32, 24):
        z1 = torch.randn(n, D, generator=g, requires_grad=True)
        comp(z1, z1.detach() + 0.3 * torch.randn(n, D, generator=g)).backward()
        seen.append(_frames())
    assert seen[0] == seen[1] == seen[2] and seen[3] == seen[4] == seen[5], seen
