"""Heat, drift and the equilibrium formula against slow references and exact cases."""

import math

import pytest
import torch

from weince.losses import build_loss, info_nce, weince
from weince.norms.analysis import (decay_rate, equilibrium_norm_sq, gradient_statistics,
                                   radial_loss, resample_plan, straight_through_normalize)


def _tiny_setup(n=6, m=20, d_in=5, d=4, seed=0):
    """A linear encoder z = x W on fixed two-view inputs (float64)."""
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(d_in, d, generator=g, dtype=torch.float64)
    xp = torch.randn(n, 2, d_in, generator=g, dtype=torch.float64)
    xb = torch.randn(m, 2, d_in, generator=g, dtype=torch.float64)
    return xp @ W, xb @ W


def _functional(name, sim, targets, mask, tau):
    if name == "infonce":
        return info_nce(sim, targets, mask, tau)
    return weince(sim, targets, mask, tau)


def _slow_reference(pz, bz, name, tau, plan):
    """Per input, per resampling, one batch at a time:
    - g_pre: autograd through the *unmodified* loss module (normalises inside), only
      this input's two views as leaves;
    - radial component of the unit-embedding gradient: derivative, at c = 1, of the
      functional loss on hand-built similarities with this input's rows and columns scaled
      by c (one c per view)."""
    loss_fn = build_loss(name, tau=tau)
    n, _, d = pz.shape
    K = 1 + max(k for k, _, _ in plan)
    g_pre = torch.zeros(K, n, 2, d, dtype=torch.float64)
    radial = torch.zeros(K, n, 2, dtype=torch.float64)
    for k, idx, fill in plan:
        for pos, i in enumerate(idx.tolist()):
            leaf = pz[i].clone().requires_grad_(True)
            z1 = torch.cat([pz[idx[:pos], 0], leaf[0:1], pz[idx[pos + 1:], 0], bz[fill, 0]])
            z2 = torch.cat([pz[idx[:pos], 1], leaf[1:2], pz[idx[pos + 1:], 1], bz[fill, 1]])
            (g,) = torch.autograd.grad(loss_fn(z1, z2), leaf)
            g_pre[k, i] = g
            # radial part via a per-view scale on the normalised vectors
            c = torch.ones(2, dtype=torch.float64, requires_grad=True)
            u1 = torch.nn.functional.normalize(torch.cat([pz[idx, 0], bz[fill, 0]]), dim=1)
            u2 = torch.nn.functional.normalize(torch.cat([pz[idx, 1], bz[fill, 1]]), dim=1)
            U = torch.cat([u1, u2])
            B = u1.shape[0]
            scale = torch.ones(2 * B, dtype=torch.float64)
            scale = scale.index_put((torch.tensor([pos]),), c[0:1])
            scale = scale.index_put((torch.tensor([pos + B]),), c[1:2])
            sim = (U @ U.T) * scale[:, None] * scale[None, :]
            targets = torch.cat([torch.arange(B) + B, torch.arange(B)])
            mask = ~torch.eye(2 * B, dtype=torch.bool)
            (gc,) = torch.autograd.grad(_functional(name, sim, targets, mask, tau), c)
            radial[k, i] = gc
    return g_pre, radial


@pytest.mark.parametrize("name", ["infonce", "weince"])
def test_heat_and_drift_match_slow_per_input_loop(name):
    pz, bz = _tiny_setup()
    tau = 0.5
    plan = resample_plan(len(pz), len(bz), resamples=4, batch_size=8, probes_per_batch=3,
                         generator=torch.Generator().manual_seed(1))
    gs, grads = gradient_statistics(pz, bz, build_loss(name, tau=tau), plan=plan,
                                    return_grads=True)
    g_pre, radial = _slow_reference(pz, bz, name, tau, plan)
    R = pz.norm(dim=-1)                                   # (n, 2)
    u = pz / R.unsqueeze(-1)
    # unit-embedding gradient = R * g_pre (tangential) + radial * u
    g_unit = R.unsqueeze(-1) * g_pre + radial.unsqueeze(-1) * u
    torch.testing.assert_close(grads, g_unit, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(gs.drift, radial.mean(0).mean(-1), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(gs.heat, g_unit.var(0).sum(-1).mean(-1), rtol=1e-9, atol=1e-14)
    torch.testing.assert_close(gs.heat_pre, g_pre.var(0).sum(-1).mean(-1), rtol=1e-9,
                               atol=1e-14)
    # scale invariance: the pre-normalisation gradient has no radial part
    assert gs.drift_pre.abs().max() < 1e-12
    assert (g_pre * u).sum(-1).abs().max() < 1e-12
    assert gs.drift.abs().min() > 1e-6                   # ... the unit gradient does


@pytest.mark.parametrize("name", ["weince_recipe", "infonce_topm"])
def test_radial_loss_keeps_value_and_tangential_gradient(name):
    """For any registered module: same loss value on unit inputs, and the tangential part of
    the unit-embedding gradient equals R * (autograd gradient through normalisation)."""
    pz, bz = _tiny_setup(n=4, m=60, seed=3)
    z1 = torch.cat([pz[:, 0], bz[:, 0]]).clone().requires_grad_(True)
    z2 = torch.cat([pz[:, 1], bz[:, 1]])
    loss_fn = build_loss(name, tau=0.3, top_m=5).eval()
    (g_pre,) = torch.autograd.grad(loss_fn(z1, z2), z1)
    R = z1.detach().norm(dim=1, keepdim=True)
    u1 = (z1.detach() / R).requires_grad_(True)
    u2 = torch.nn.functional.normalize(z2, dim=1)
    rl = radial_loss(loss_fn)
    val = rl(u1, u2)
    torch.testing.assert_close(val, loss_fn(z1.detach(), z2), rtol=1e-10, atol=1e-12)
    (g_u,) = torch.autograd.grad(val, u1)
    tang = g_u - (g_u * u1).sum(1, keepdim=True) * u1
    torch.testing.assert_close(tang, R * g_pre, rtol=1e-8, atol=1e-12)
    # the patch is undone: the original module still projects out the radial part
    assert torch.nn.functional.normalize is not None
    with straight_through_normalize():
        pass
    (g2,) = torch.autograd.grad(loss_fn(u1, u2), u1)
    assert (g2 * u1).sum(1).abs().max() < 1e-12


def test_loss_normalising_by_hand_is_refused():
    class ByHand(torch.nn.Module):
        def forward(self, z1, z2):
            z1 = z1 / z1.norm(dim=1, keepdim=True)
            z2 = z2 / z2.norm(dim=1, keepdim=True)
            return info_nce(z1 @ z2.T, torch.arange(len(z1)), None, 0.5)

    pz, bz = _tiny_setup(n=4, m=20)
    with pytest.raises(RuntimeError, match="no radial component"):
        gradient_statistics(pz, bz, ByHand(), resamples=2, batch_size=8, probes_per_batch=2)


def test_resample_plan_places_every_probe_once_per_resampling():
    plan = resample_plan(10, 30, resamples=3, batch_size=8, probes_per_batch=4,
                         generator=torch.Generator().manual_seed(0))
    for k in range(3):
        idx = torch.cat([p for kk, p, _ in plan if kk == k])
        assert sorted(idx.tolist()) == list(range(10))
    for _, p, f in plan:
        assert len(p) + len(f) == 8 and len(set(f.tolist())) == len(f)
    with pytest.raises(ValueError, match="resamples"):
        resample_plan(10, 30, 1, 8, 4, torch.Generator())
    with pytest.raises(ValueError, match="filler bank"):
        resample_plan(10, 3, 2, 8, 4, torch.Generator())


def test_equilibrium_exact_cases():
    eta, lam = 0.1, 0.5                                      # eta * lambda = 0.05
    # V = 0: R^2 = D* when D* > 0, and 0 when D* <= 0
    r2 = equilibrium_norm_sq(torch.tensor([0.1, -0.1, 0.0]), torch.zeros(3), eta, lam)
    torch.testing.assert_close(r2, torch.tensor([2.0, 0.0, 0.0], dtype=torch.float64))
    # D = 0: R^2 = V* / sqrt(2)
    r2 = equilibrium_norm_sq(0.0, 0.05 * 8.0, eta, lam)      # V*^2 = 8
    assert float(r2) == pytest.approx(math.sqrt(8.0) / math.sqrt(2.0))
    # D* = 1, V*^2 = 4: (1 + sqrt(1 + 8)) / 2 = 2
    assert float(equilibrium_norm_sq(0.05, 0.2, eta, lam)) == pytest.approx(2.0)
    # the root solves eta*lam*R^4 = D R^2 + Sigma^2 / 2, also for D << 0 (no cancellation)
    d = torch.tensor([3.0, -1e6, -2.0], dtype=torch.float64)
    s2 = torch.tensor([1.0, 1.0, 1e-3], dtype=torch.float64)
    x = equilibrium_norm_sq(d, s2, eta, lam)
    torch.testing.assert_close(0.05 * x * x - d * x - s2 / 2, torch.zeros(3, dtype=torch.float64),
                               atol=1e-12, rtol=0)
    assert float(x[1]) == pytest.approx(1.0 / (2 * 1e6), rel=1e-6)
    with pytest.raises(ValueError, match="no decay"):
        equilibrium_norm_sq(1.0, 1.0, 0.1, 0.0)
    with pytest.raises(ValueError, match="non-negative"):
        equilibrium_norm_sq(1.0, -1.0, 0.1, 0.1)


def test_decay_rate_flags_adam_as_l2_coupled():
    a = decay_rate("adam", 3e-4, 1e-6)
    assert not a["decoupled"] and a["testable"] and "L2-coupled" in a["note"]
    assert a["eta"] == 3e-4 and a["lambda_rad"] == 1e-6
    assert decay_rate("adamw", 1e-3, 0.05)["decoupled"]
    assert not decay_rate("adamw", 1e-3, 0.0)["testable"]
