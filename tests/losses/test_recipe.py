"""The authors' recipe terms (``docs/method.md``): top-M losses and the beta_t EMA."""

import math

import pytest
import torch

from weince.losses import (LOSSES, InfoNCETopMLoss, WEINCERecipeLoss, build_loss, fit_batch_beta,
                           info_nce, pair_similarities, topm_softmax, topm_weibull, weince)
from weince.losses._common import negative_values
from weince.losses.recipe import pooled_top_cpu


def negatives(sim, t):
    """(neg, count) as WEINCERecipeLoss.update_beta_t takes them."""
    return negative_values(sim, t, None), sim.shape[0] * (sim.shape[1] - 1)


def power_tail_batch(alpha, B=64, C=200, seed=0):
    """Negatives with shortfall 1 - s = 0.8 * U^(1/alpha): P(delta <= x) ~ x^alpha, a
    Weibull-domain tail with endpoint exponent alpha; the positive in column 0 at s = 0.9."""
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(B, C, generator=g, dtype=torch.float64)
    sim = 1.0 - 0.8 * u ** (1.0 / alpha)
    sim[:, 0] = 0.9
    return sim, torch.zeros(B, dtype=torch.long)


@pytest.mark.parametrize("alpha", [2.0, 5.0])
def test_batch_beta_recovers_known_slope(alpha):
    sim, t = power_tail_batch(alpha, B=64, C=400)
    slope, r2 = fit_batch_beta(sim, t)
    assert float(slope) == pytest.approx(alpha, rel=0.06)
    assert float(r2) > 0.97


def test_beta_t_ema_follows_spec():
    sim, t = power_tail_batch(3.0, B=64, C=400)
    slope, r2 = fit_batch_beta(sim, t)
    f = WEINCERecipeLoss(tau=0.5, layout="pairs")
    assert float(f.beta_t) == 4.0
    f.train()
    f.update_beta_t(*negatives(sim, t))
    expected = 0.9 * 4.0 + 0.1 * min(max(float(slope), 0.5), 16.0)
    assert float(f.beta_t) == pytest.approx(expected, rel=1e-6)
    for _ in range(60):
        f.update_beta_t(*negatives(sim, t))
    assert float(f.beta_t) == pytest.approx(float(slope), rel=1e-3)


def test_beta_t_rejects_a_poor_fit_and_clamps():
    f = WEINCERecipeLoss(tau=0.5, layout="pairs", r2_min=1.01)  # nothing is accepted
    sim, t = power_tail_batch(3.0)
    f.update_beta_t(*negatives(sim, t))
    assert float(f.beta_t) == 4.0
    g = WEINCERecipeLoss(tau=0.5, layout="pairs", beta_t_init=16.0)
    sim, t = power_tail_batch(40.0, C=400)  # slope ~40 -> clamped to 16
    g.update_beta_t(*negatives(sim, t))
    assert float(g.beta_t) == pytest.approx(16.0)


def test_beta_t_is_a_saved_buffer_not_a_parameter():
    f = WEINCERecipeLoss()
    assert "beta_t" in f.state_dict() and len(list(f.parameters())) == 0
    f.beta_t.fill_(7.5)
    g = WEINCERecipeLoss()
    g.load_state_dict(f.state_dict())
    assert float(g.beta_t) == 7.5


def test_beta_t_frozen_in_eval_mode():
    f = WEINCERecipeLoss().eval()
    f(torch.randn(64, 8), torch.randn(64, 8))
    assert float(f.beta_t) == 4.0


def ref_topm(sim, targets, mask, m, logit):
    total = 0.0
    for i in range(sim.shape[0]):
        negs = [float(sim[i, j]) for j in range(sim.shape[1])
                if j != int(targets[i]) and (mask is None or bool(mask[i, j]))]
        cand = [float(sim[i, targets[i]])] + sorted(negs, reverse=True)[:m]
        lg = [logit(s) for s in cand]
        mx = max(lg)
        total += -(lg[0] - mx - math.log(sum(math.exp(v - mx) for v in lg)))
    return total / sim.shape[0]


def test_topm_terms_match_reference():
    g = torch.Generator().manual_seed(0)
    sim, t, m = pair_similarities(torch.randn(30, 6, generator=g), torch.randn(30, 6, generator=g))
    sim = sim.double()
    assert float(topm_softmax(sim, t, m, 0.5, 10)) == pytest.approx(
        ref_topm(sim, t, m, 10, lambda s: s / 0.5), rel=1e-5)
    assert float(topm_weibull(sim, t, m, 3.0, 10)) == pytest.approx(
        ref_topm(sim, t, m, 10, lambda s: -3.0 * math.log(1 - min(s, 1 - 1e-6))), rel=1e-5)
    # M larger than K uses all negatives: the softmax term is then InfoNCE
    assert float(topm_softmax(sim, t, m, 0.5, 1000)) == pytest.approx(float(info_nce(sim, t, m)),
                                                                      rel=1e-6)


def test_recipe_module_is_the_sum_of_its_terms():
    g = torch.Generator().manual_seed(3)
    z1, z2 = torch.randn(40, 8, generator=g).double(), torch.randn(40, 8, generator=g).double()
    f = WEINCERecipeLoss(top_m=12).eval()
    sim, t, m = pair_similarities(z1, z2, "simclr")
    expected = (weince(sim, t, m) + 0.5 * topm_weibull(sim, t, m, 4.0, 12)
                + 0.5 * topm_softmax(sim, t, m, 0.5, 12))
    assert float(f(z1, z2)) == pytest.approx(float(expected), rel=1e-6)
    h = InfoNCETopMLoss(top_m=12)
    assert float(h(z1, z2)) == pytest.approx(
        float(info_nce(sim, t, m) + 0.5 * topm_softmax(sim, t, m, 0.5, 12)), rel=1e-6)
    nw = build_loss("weince_recipe_no_weib", top_m=12).eval()
    assert float(nw(z1, z2)) == pytest.approx(
        float(weince(sim, t, m) + 0.5 * topm_softmax(sim, t, m, 0.5, 12)), rel=1e-6)


def test_recipe_rejects_bad_options():
    with pytest.raises(ValueError, match="top_m"):
        WEINCERecipeLoss(top_m=0)
    with pytest.raises(ValueError, match="momentum"):
        WEINCERecipeLoss(momentum=1.0)
    with pytest.raises(ValueError, match="bad options"):
        build_loss("infonce", nonsense=1)


# ---------------------------------------------------------------- every loss x dtype
_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_loss_trains_a_step_in_every_dtype_on_cpu(name, dtype):
    """Inputs in the dtype itself, and a float32 forward under CPU autocast to it: a finite
    float32 loss and finite gradients. The recipe's NumPy top-k used to refuse bfloat16
    (`Unsupported dtype in DLTensor`)."""
    g = torch.Generator().manual_seed(3)
    z1, z2 = torch.randn(64, 16, generator=g), torch.randn(64, 16, generator=g)
    ref = build_loss(name, tau=0.5).train()(z1, z2)
    a = z1.to(dtype).requires_grad_(True)
    loss = build_loss(name, tau=0.5).train()(a, z2.to(dtype))
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert a.grad is not None and torch.isfinite(a.grad.float()).all()
    # the same batch rounded to the dtype: the loss moves by the rounding only
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=0.05)
    if dtype is torch.float32:
        return
    w = torch.nn.Linear(16, 16)
    with torch.autocast("cpu", dtype=dtype):
        out = build_loss(name, tau=0.5).train()(w(z1), w(z2))
    out.backward()
    assert out.dtype == torch.float32 and torch.isfinite(out)
    assert torch.isfinite(w.weight.grad).all()


def test_recipe_top_negatives_of_bf16_are_those_of_its_float32_copy():
    sim, t = power_tail_batch(3.0, B=16, C=64)
    s16 = sim.bfloat16()
    got = pooled_top_cpu(s16, 40, targets=t)
    want = pooled_top_cpu(s16.float(), 40, targets=t)
    assert got.dtype == torch.float64 and torch.equal(got, want)
