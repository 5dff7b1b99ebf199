"""A temperature given as a tensor that requires grad receives its gradient (CLIP learns
``logit_scale = 1 / tau``); a float, or a tensor without grad, stays a constant."""

import pytest
import torch
from torch import nn

from weince.losses import build_loss, hcl, dcl, info_nce, pair_similarities, weince
from weince.losses.recipe import topm_softmax


def _batch(layout: str, n: int = 24, d: int = 6, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, generator=g, dtype=torch.float64)
    z2 = z1 + 0.3 * torch.randn(n, d, generator=g, dtype=torch.float64)
    return pair_similarities(z1, z2, layout)


FUNCTIONAL = {
    "info_nce": lambda s, t, m, tau: info_nce(s, t, m, tau=tau),
    "weince": lambda s, t, m, tau: weince(s, t, m, tau=tau, min_tail=8),
    "weince_lam": lambda s, t, m, tau: weince(s, t, m, tau=tau, lam=0.4, min_tail=8),
    "weince_anchor": lambda s, t, m, tau: weince(s, t, m, tau=tau, beta="anchor", min_tail=8),
    "topm_softmax": lambda s, t, m, tau: topm_softmax(s, t, m, tau=tau, m=5),
    "hcl": lambda s, t, m, tau: hcl(s, t, m, tau=tau),
    "dcl": lambda s, t, m, tau: dcl(s, t, m, tau=tau),
}


@pytest.mark.parametrize("layout", ["simclr", "pairs"])
@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_tau_gradcheck(name, layout):
    sim, targets, mask = _batch(layout)
    fn = FUNCTIONAL[name]
    tau = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    # WEINCE's statistics carry no gradient by design, so only tau is checked here
    assert torch.autograd.gradcheck(lambda t: fn(sim, targets, mask, t), (tau,))


def test_tensor_tau_equals_float_tau_and_lambda0_is_infonce():
    sim, targets, mask = _batch("simclr", seed=1)
    tau = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    a = weince(sim, targets, mask, tau=tau, min_tail=8)
    b = weince(sim, targets, mask, tau=0.3, min_tail=8)
    torch.testing.assert_close(a, b, rtol=1e-14, atol=0)
    assert torch.equal(weince(sim, targets, mask, tau=tau, lam=0.0),
                       info_nce(sim, targets, mask, tau=tau))
    # float32 too: the factor 1 / tau is the same tensor op in both
    s32 = sim.float()
    t32 = torch.tensor(0.07, requires_grad=True)
    assert torch.equal(weince(s32, targets, mask, tau=t32, lam=0.0),
                       info_nce(s32, targets, mask, tau=t32))


def test_float_and_plain_tensor_stay_constants():
    sim, targets, mask = _batch("pairs")
    tau = torch.tensor(0.3, dtype=torch.float64)       # no grad: read as a constant
    assert weince(sim, targets, mask, tau=tau, min_tail=8).requires_grad is False


@pytest.mark.parametrize("name", ["infonce", "weince", "weince_recipe", "infonce_topm", "hcl",
                                  "dcl", "dclw"])
@pytest.mark.parametrize("bank", [0, 40])
def test_modules_learn_tau(name, bank):
    g = torch.Generator().manual_seed(2)
    kw = {"memory_bank_size": bank} if bank else {}
    if bank and name in ("hcl", "dcl", "dclw"):
        pytest.skip("the baselines take no memory bank")
    tau = nn.Parameter(torch.tensor(0.2, dtype=torch.float64))
    fn = build_loss(name, tau=tau, **kw)
    assert any(p is tau for p in fn.parameters())        # the optimiser finds it there
    for _ in range(3):                                    # fills the bank; then a full call
        z1 = torch.randn(20, 8, generator=g, dtype=torch.float64).requires_grad_(True)
        z2 = z1 + 0.2 * torch.randn(20, 8, generator=g, dtype=torch.float64)
        tau.grad = None
        fn(z1, z2).backward()
    assert tau.grad is not None and torch.isfinite(tau.grad) and tau.grad != 0
    # the gradient is the derivative of the loss in tau (central difference)
    fn.train(False)
    h = 1e-6
    with torch.no_grad():
        tau.add_(h)
        up = fn(z1, z2)
        tau.sub_(2 * h)
        down = fn(z1, z2)
        tau.add_(h)
    tau.grad = None
    fn(z1, z2).backward()
    torch.testing.assert_close(tau.grad, (up - down) / (2 * h), rtol=1e-5, atol=1e-8)
