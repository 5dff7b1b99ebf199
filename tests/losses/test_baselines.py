"""HCL and DCL/DCLW against slow float64 per-row references written from the papers'
formulas, exact special cases, and argument errors."""

import math

import numpy as np
import pytest
import torch

import weince.losses.baselines  # noqa: F401  (registers hcl, dcl, dclw)
from weince.losses import LOSSES, build_loss, info_nce, pair_similarities
from weince.losses.baselines import DCLLoss, DCLWLoss, HCLLoss, dcl, hcl


# ---------------------------------------------------------------- slow references
def _rows(sim, targets, mask):
    """Per row: (positive cosine, list of negative cosines), float64."""
    sim = sim.double().numpy()
    out = []
    for i in range(sim.shape[0]):
        cols = range(sim.shape[1]) if mask is None else np.flatnonzero(mask[i].numpy())
        t = int(targets[i])
        out.append((sim[i, t], [sim[i, j] for j in cols if j != t]))
    return out


def ref_hcl(sim, targets, mask, tau, beta, tau_plus):
    """Robinson et al. (2021), literally: p, n_j, imp_j = exp(beta s_j / tau),
    Ng = (-t+ K p + K sum(imp n) / sum(imp)) / (1 - t+), clamped at K e^{-1/tau}."""
    total = 0.0
    rows = _rows(sim, targets, mask)
    for s_pos, negs in rows:
        K = len(negs)
        p = math.exp(s_pos / tau)
        n = [math.exp(s / tau) for s in negs]
        imp = [math.exp(beta * s / tau) for s in negs]
        reweighted = K * sum(a * b for a, b in zip(imp, n)) / sum(imp)
        ng = (-tau_plus * K * p + reweighted) / (1.0 - tau_plus)
        ng = max(ng, K * math.exp(-1.0 / tau))
        total += -math.log(p / (p + ng))
    return total / len(rows)


def ref_dcl(sim, targets, mask, tau, sigma=None):
    """Yeh et al. (2022): -w_i s_pos / tau + log sum_neg exp(s / tau); DCLW weight
    w_i = 2 - exp(c_i / sigma) / mean_r exp(c_r / sigma)."""
    rows = _rows(sim, targets, mask)
    if sigma is None:
        w = [1.0] * len(rows)
    else:
        e = [math.exp(s_pos / sigma) for s_pos, _ in rows]
        w = [2.0 - x / (sum(e) / len(e)) for x in e]
    total = 0.0
    for (s_pos, negs), wi in zip(rows, w):
        total += -wi * s_pos / tau + math.log(sum(math.exp(s / tau) for s in negs))
    return total / len(rows)


def make_batch(kind, n=12, d=6, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, generator=g, dtype=dtype)
    z2 = z1 + 0.6 * torch.randn(n, d, generator=g, dtype=dtype)
    return pair_similarities(z1, z2, kind)


def random_masked_batch(B=7, C=11, drop=3, seed=1):
    """A generic batch with the positive anywhere and ``drop`` masked columns per row."""
    g = torch.Generator().manual_seed(seed)
    sim = torch.rand(B, C, generator=g, dtype=torch.float64) * 2 - 1
    targets = torch.randint(0, C, (B,), generator=g)
    mask = torch.ones(B, C, dtype=torch.bool)
    for i in range(B):
        others = [j for j in torch.randperm(C, generator=g).tolist() if j != int(targets[i])]
        mask[i, others[:drop]] = False
    return sim, targets, mask


# ---------------------------------------------------------------- HCL
@pytest.mark.parametrize("kind", ["simclr", "pairs"])
@pytest.mark.parametrize("beta,tau_plus,tau", [(1.0, 0.1, 0.5), (0.5, 0.0, 0.2),
                                                (2.0, 0.3, 1.0), (0.0, 0.1, 0.5)])
def test_hcl_matches_slow_reference(kind, beta, tau_plus, tau):
    sim, targets, mask = make_batch(kind)
    got = hcl(sim, targets, mask, tau=tau, beta=beta, tau_plus=tau_plus)
    assert got.dtype == torch.float64
    assert float(got) == pytest.approx(ref_hcl(sim, targets, mask, tau, beta, tau_plus),
                                       rel=1e-10, abs=1e-12)


def test_hcl_generic_masked_layout():
    sim, targets, mask = random_masked_batch()
    got = hcl(sim, targets, mask, tau=0.3, beta=1.5, tau_plus=0.05)
    assert float(got) == pytest.approx(ref_hcl(sim, targets, mask, 0.3, 1.5, 0.05), rel=1e-10)


@pytest.mark.parametrize("kind", ["simclr", "pairs"])
def test_hcl_without_hardness_or_debiasing_is_infonce(kind):
    sim, targets, mask = make_batch(kind, seed=3)
    a = hcl(sim, targets, mask, tau=0.5, beta=0.0, tau_plus=0.0)
    b = info_nce(sim, targets, mask, tau=0.5)
    assert float(a) == pytest.approx(float(b), rel=1e-12)


def test_hcl_clamps_at_theoretical_minimum():
    """A near-perfect positive and a large tau_plus push the corrected term below zero:
    every row then uses Ng = K exp(-1/tau)."""
    tau, tau_plus = 0.5, 0.5
    sim = torch.tensor([[0.99, -0.5, -0.6, -0.4], [-0.5, 0.98, -0.3, -0.7]], dtype=torch.float64)
    targets = torch.tensor([0, 1])
    K = 3
    expect = np.mean([math.log1p(K * math.exp(-1 / tau) / math.exp(s / tau)) for s in (0.99, 0.98)])
    got = hcl(sim, targets, None, tau=tau, beta=1.0, tau_plus=tau_plus)
    assert float(got) == pytest.approx(expect, rel=1e-12)
    assert float(got) == pytest.approx(ref_hcl(sim, targets, None, tau, 1.0, tau_plus), rel=1e-12)
    loss_fn = HCLLoss(tau=tau, beta=1.0, tau_plus=tau_plus)
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    loss_fn(z, z)
    assert float(loss_fn.last_stats["hcl_floor_frac"]) == 1.0


def test_hcl_hardness_raises_loss_and_moves_weight_to_hard_negatives():
    """Up-weighting the most similar negatives can only increase the weighted mean of
    exp(s / tau), hence the loss; and the gradient moves onto the hardest negative."""
    sim, targets, mask = make_batch("simclr", seed=5)
    losses = [float(hcl(sim, targets, mask, beta=b, tau_plus=0.0)) for b in (0.0, 0.5, 1.0, 3.0)]
    assert all(a < b for a, b in zip(losses, losses[1:]))
    s = sim.clone().requires_grad_()
    hcl(s, targets, mask, beta=3.0, tau_plus=0.0).backward()
    g = s.grad[0].clone()
    g[targets[0]] = -math.inf
    g[0] = -math.inf
    neg = sim[0].clone()
    neg[targets[0]] = -math.inf
    neg[0] = -math.inf
    assert int(g.argmax()) == int(neg.argmax())


def test_hcl_finite_at_small_tau_and_float32():
    sim, targets, mask = make_batch("simclr", n=32, d=4, seed=2, dtype=torch.float32)
    for tau in (0.01, 0.05):
        s = sim.clone().requires_grad_()
        loss = hcl(s, targets, mask, tau=tau, beta=1.0, tau_plus=0.1)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(s.grad).all()
    ref = ref_hcl(sim, targets, mask, 0.2, 1.0, 0.1)
    assert float(hcl(sim, targets, mask, tau=0.2)) == pytest.approx(ref, rel=1e-5)


def test_hcl_gradient_matches_finite_differences():
    sim, targets, mask = make_batch("pairs", n=5, d=3, seed=4)
    s = sim.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x: hcl(x, targets, mask, tau=0.5, beta=1.0, tau_plus=0.1), (s,))


# ---------------------------------------------------------------- DCL / DCLW
@pytest.mark.parametrize("kind", ["simclr", "pairs"])
@pytest.mark.parametrize("sigma", [None, 0.5, 2.0])
def test_dcl_matches_slow_reference(kind, sigma):
    sim, targets, mask = make_batch(kind, seed=7)
    got = dcl(sim, targets, mask, tau=0.3, sigma=sigma)
    assert float(got) == pytest.approx(ref_dcl(sim, targets, mask, 0.3, sigma), rel=1e-10)


def test_dcl_generic_masked_layout():
    sim, targets, mask = random_masked_batch(seed=9)
    for sigma in (None, 0.5):
        got = dcl(sim, targets, mask, tau=0.4, sigma=sigma)
        assert float(got) == pytest.approx(ref_dcl(sim, targets, mask, 0.4, sigma), rel=1e-10)


@pytest.mark.parametrize("kind", ["simclr", "pairs"])
def test_dcl_differs_from_infonce_by_the_positive_in_the_denominator(kind):
    sim, targets, mask = make_batch(kind, seed=11)
    tau = 0.5
    gap = 0.0
    for s_pos, negs in _rows(sim, targets, mask):
        gap += math.log1p(math.exp(s_pos / tau) / sum(math.exp(s / tau) for s in negs))
    gap /= sim.shape[0]
    diff = info_nce(sim, targets, mask, tau) - dcl(sim, targets, mask, tau)
    assert float(diff) == pytest.approx(gap, rel=1e-12)
    assert gap > 0


def test_dclw_equal_positives_gives_dcl():
    """Weights average 1 and are all 1 when every positive has the same cosine."""
    sim = torch.tensor([[0.7, 0.1, -0.2], [0.3, 0.7, 0.0], [-0.1, 0.2, 0.7]], dtype=torch.float64)
    targets = torch.arange(3)
    assert float(dcl(sim, targets, None, 0.5, sigma=0.5)) == pytest.approx(
        float(dcl(sim, targets, None, 0.5)), rel=1e-14)
    sim, targets, mask = make_batch("simclr", seed=12)
    m = DCLWLoss(tau=0.5, sigma=0.5)
    z1, z2 = torch.randn(6, 4), torch.randn(6, 4)
    m(z1, z2)
    assert float(m.last_stats["dclw_w_min"]) < 1.0 < float(m.last_stats["dclw_w_max"])


# ---------------------------------------------------------------- modules and registry
def test_registered_and_parameter_free():
    for name, cls in (("hcl", HCLLoss), ("dcl", DCLLoss), ("dclw", DCLWLoss)):
        assert LOSSES[name] is cls
        m = build_loss(name, tau=0.2)
        assert sum(p.numel() for p in m.parameters()) == 0
        assert m.tau == 0.2


@pytest.mark.parametrize("layout", ["simclr", "pairs"])
def test_modules_equal_functional(layout):
    g = torch.Generator().manual_seed(13)
    z1, z2 = torch.randn(9, 5, generator=g), torch.randn(9, 5, generator=g)
    sim, targets, mask = pair_similarities(z1, z2, layout)
    cases = [
        (build_loss("hcl", tau=0.4, layout=layout, beta=0.7, tau_plus=0.05),
         hcl(sim, targets, mask, 0.4, beta=0.7, tau_plus=0.05)),
        (build_loss("dcl", tau=0.4, layout=layout), dcl(sim, targets, mask, 0.4)),
        (build_loss("dclw", tau=0.4, layout=layout, sigma=0.3),
         dcl(sim, targets, mask, 0.4, sigma=0.3)),
    ]
    for module, expect in cases:
        zz1, zz2 = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        loss = module(zz1, zz2)
        assert float(loss.detach()) == pytest.approx(float(expect), rel=1e-6)
        loss.backward()
        assert torch.isfinite(zz1.grad).all() and zz1.grad.abs().sum() > 0


# ---------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("kwargs", [dict(tau=0.0), dict(tau=-1.0), dict(beta=-0.1),
                                    dict(beta=float("nan")), dict(tau_plus=1.0),
                                    dict(tau_plus=-0.1)])
def test_hcl_bad_args(kwargs):
    sim, targets, mask = make_batch("pairs")
    with pytest.raises(ValueError):
        hcl(sim, targets, mask, **kwargs)
    with pytest.raises(ValueError):
        build_loss("hcl", **kwargs)


@pytest.mark.parametrize("kwargs", [dict(tau=0.0), dict(sigma=0.0), dict(sigma=-1.0),
                                    dict(sigma=float("inf"))])
def test_dcl_bad_args(kwargs):
    sim, targets, mask = make_batch("pairs")
    with pytest.raises(ValueError):
        dcl(sim, targets, mask, **kwargs)
    with pytest.raises(ValueError):
        build_loss("dclw", **kwargs)


def test_bad_batches_and_options():
    sim, targets, mask = make_batch("simclr")
    bad_mask = mask.clone()
    bad_mask[0, 1] = False  # row 0 now has one negative fewer
    for fn in (hcl, dcl):
        with pytest.raises(ValueError, match="same number of negatives"):
            fn(sim, targets, bad_mask)
        with pytest.raises(ValueError, match="targets"):
            fn(sim, targets[:-1], mask)
    with pytest.raises(ValueError, match="layout"):
        build_loss("dcl", layout="triplets")
    with pytest.raises(ValueError, match="bad options"):
        build_loss("dcl", sigma=0.5)
    with pytest.raises(ValueError, match="sigma"):
        build_loss("dclw", sigma=None)
