"""The dual-encoder (CLIP-style) loss: symmetric, each direction with its own statistics, and
CLIP's loss exactly at lambda = 0."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import weince.losses.dual as dual_mod
from weince.losses import (DualEncoderLoss, dual_encoder_loss, info_nce, pair_similarities,
                           weince, weince_statistics)


def clip_loss(image: torch.Tensor, text: torch.Tensor, logit_scale: float) -> torch.Tensor:
    """CLIP's loss as its paper writes it: logits = (I T^T) * scale on unit rows, the
    cross-entropy against arange over rows and over columns, averaged."""
    logits = F.normalize(image, dim=1) @ F.normalize(text, dim=1).T * logit_scale
    labels = torch.arange(image.shape[0])
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def pairs(B=96, d=16, dtype=torch.float32, seed=0, noise=0.3):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(B, d, generator=g, dtype=dtype)
    b = a + noise * torch.randn(B, d, generator=g, dtype=dtype)
    return a.requires_grad_(), b.requires_grad_()


def grads(loss, *xs):
    return torch.autograd.grad(loss, xs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("tau", [0.07, 0.5])
@pytest.mark.parametrize("kw", [{"loss": "infonce"}, {"loss": "weince", "lam": 0.0}])
def test_lambda_zero_is_clips_loss_bit_for_bit(dtype, tau, kw):
    a, b = pairs(dtype=dtype)
    ours = dual_encoder_loss(a, b, tau=tau, **kw)
    ref = clip_loss(a, b, 1.0 / tau)
    assert ours.dtype == dtype and torch.equal(ours, ref)
    # the gradients: bit for bit where 1 / tau is a power of two; otherwise to rounding
    # (CLIP's form scales the sum of both directions' gradients, the functional loss each)
    for g_ours, g_ref in zip(grads(ours, a, b), grads(ref, a, b)):
        if tau == 0.5:
            assert torch.equal(g_ours, g_ref)
        else:
            torch.testing.assert_close(g_ours, g_ref, rtol=8 * torch.finfo(dtype).eps,
                                       atol=8 * torch.finfo(dtype).eps * float(g_ref.abs().max()))
    # the module too
    module = DualEncoderLoss(tau=tau, **kw)(a, b)
    assert torch.equal(module, ref)


@pytest.mark.slow          # importing open_clip (timm, torchvision) takes ~10 s
@pytest.mark.parametrize("dtype, rtol", [(torch.float64, 1e-13), (torch.float32, 1e-6)])
def test_lambda_zero_equals_open_clips_clip_loss(dtype, rtol):
    import open_clip.loss as open_clip_loss  # noqa: PLC0415 - imported when the test runs (seconds)
    a, b = pairs(dtype=dtype, seed=3)
    tau = 0.07
    # open_clip's ClipLoss takes normalised features and the (exponentiated) logit scale; it
    # scales the features before its two matmuls, so it agrees to rounding, not bit for bit
    ref = open_clip_loss.ClipLoss()(F.normalize(a, dim=1), F.normalize(b, dim=1), 1.0 / tau)
    g_refs = grads(ref, a, b)
    for kw in ({"loss": "infonce"}, {"loss": "weince", "lam": 0.0}):
        ours = dual_encoder_loss(a, b, tau=tau, **kw)
        torch.testing.assert_close(ours, ref, rtol=rtol, atol=0.0)
        for g_ours, g_ref in zip(grads(ours, a, b), g_refs):
            torch.testing.assert_close(g_ours, g_ref, rtol=100 * rtol, atol=100 * rtol)


def test_symmetric_is_the_mean_of_two_directions_each_with_its_own_statistics():
    a, b = pairs(B=128, seed=1)
    S = pair_similarities(a, b, "pairs")[0]
    t = torch.arange(128)
    loss, stats = dual_encoder_loss(a, b, tau=0.1, return_stats=True)
    ab = weince(S, t, tau=0.1)
    ba = weince(S.T, t, tau=0.1)
    assert torch.equal(loss, (ab + ba) / 2)
    assert torch.equal(dual_encoder_loss(a, b, tau=0.1, direction="a_to_b"), ab)
    assert torch.equal(dual_encoder_loss(a, b, tau=0.1, direction="b_to_a"), ba)
    # the statistics of each direction are those of its own rows (image i against every
    # caption; caption i against every image), and they differ
    for side, s in (("a_to_b", S), ("b_to_a", S.T)):
        ref = weince_statistics(s, t)
        for key in ("lambda", "rho", "daic", "beta_w", "rho0"):
            assert torch.equal(stats[side][key], ref[key]), (side, key)
    assert not torch.equal(stats["a_to_b"]["rho"], stats["b_to_a"]["rho"])
    assert set(dual_encoder_loss(a, b, direction="b_to_a", return_stats=True)[1]) == {"b_to_a"}


def test_the_correction_is_active_and_changes_the_loss():
    """Not InfoNCE in disguise: on near-duplicate pairs the blend weights are non-zero and the
    loss differs from CLIP's."""
    a, b = pairs(B=128, d=32, seed=2, noise=0.05)
    loss, stats = dual_encoder_loss(a, b, tau=0.1, return_stats=True)
    assert float(stats["a_to_b"]["lambda"].max()) > 0.01
    assert not torch.isclose(loss, clip_loss(a, b, 10.0), rtol=1e-6)


def test_module_equals_the_functional_form_and_logs_each_direction():
    a, b = pairs(B=64, seed=4)
    fn = DualEncoderLoss(tau=0.2, margin=1.0)
    out = fn(a, b)
    loss, stats = dual_encoder_loss(a, b, tau=0.2, margin=1.0, return_stats=True)
    assert torch.equal(out, loss)
    assert set(fn.last_stats) == {f"{k}_{d}" for k in ("lambda_mean", "rho0", "daic_mean",
                                                         "beta_w_mean")
                                  for d in ("a_to_b", "b_to_a")}
    assert all(v.dtype == torch.float64 and v.ndim == 0 and not v.requires_grad
               for v in fn.last_stats.values())
    assert float(fn.last_stats["rho0_b_to_a"]) == float(stats["b_to_a"]["rho0"])
    assert float(fn.last_stats["lambda_mean_a_to_b"]) == pytest.approx(
        float(stats["a_to_b"]["lambda"].mean()))
    one_way = DualEncoderLoss(tau=0.2, direction="a_to_b")
    one_way(a, b)
    assert all(k.endswith("_a_to_b") for k in one_way.last_stats)
    assert "direction='a_to_b'" in repr(one_way)
    out.backward()
    assert a.grad is not None and b.grad is not None


def test_normalize_false_uses_the_features_as_given():
    a, b = pairs(seed=5)
    with torch.no_grad():
        an, bn = F.normalize(a, dim=1), F.normalize(b, dim=1)
        raw = dual_encoder_loss(an, bn, tau=0.5, loss="infonce", normalize=False)
        S = an @ bn.T
        ref = (F.cross_entropy(S * 2.0, torch.arange(96)) +
               F.cross_entropy(S.T * 2.0, torch.arange(96))) / 2
        assert torch.equal(raw, ref)
        # unnormalised features change the loss when normalize=False, not when True
        assert torch.equal(dual_encoder_loss(3 * a, b, tau=0.5), dual_encoder_loss(a, b, tau=0.5))
        assert not torch.equal(dual_encoder_loss(3 * a, b, tau=0.5, normalize=False),
                               dual_encoder_loss(a, b, tau=0.5, normalize=False))


def test_a_tensor_tau_and_the_mask_reach_the_functional_loss_unchanged(monkeypatch):
    seen = []

    def spy(sim, targets, mask=None, tau=None, return_stats=False, **kw):
        seen.append((sim, mask, tau))
        z = sim.sum() * 0.0
        row = z.view(1).detach()
        return (z, {"lambda": row, "rho0": z, "daic": row, "beta_w": row}) if return_stats else z

    monkeypatch.setattr(dual_mod, "weince", spy)
    a, b = pairs(B=8)
    tau = torch.tensor(0.07, requires_grad=True)
    mask = torch.ones(8, 8, dtype=torch.bool)
    mask[0, 3] = False
    DualEncoderLoss(tau=0.5)(a, b, tau=tau)
    dual_encoder_loss(a, b, tau, mask=mask)
    assert all(t is tau for _, _, t in seen)
    (s_ab, m_ab, _), (s_ba, m_ba, _) = seen[2:]
    assert m_ab is mask and torch.equal(m_ba, mask.T) and torch.equal(s_ba, s_ab.T)
    param = torch.nn.Parameter(torch.tensor(0.1))
    fn = DualEncoderLoss(tau=param)
    assert list(fn.parameters()) == [param]       # a learnable temperature is a parameter


def _tensor_tau_gets_a_gradient() -> bool:
    tau = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    sim = torch.tensor([[0.9, 0.1], [0.2, 0.8]], dtype=torch.float64)
    try:
        loss = info_nce(sim, torch.tensor([0, 1]), tau=tau)
    except (TypeError, ValueError):
        return False
    return loss.requires_grad


@pytest.mark.skipif(not _tensor_tau_gets_a_gradient(),
                    reason="the functional losses take tau as a number here (a tensor tau is "
                           "read as a float): no gradient reaches it")
@pytest.mark.parametrize("loss", ["infonce", "weince"])
def test_a_learnable_temperature_gets_its_gradient(loss):
    a, b = pairs(B=48, dtype=torch.float64, seed=6)
    log_scale = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)   # CLIP's
    fn = DualEncoderLoss(loss=loss)
    out = fn(a, b, tau=1 / log_scale.exp())
    (g,) = torch.autograd.grad(out, log_scale)
    assert torch.isfinite(g) and float(g) != 0.0
    # the same value as a constant tau
    assert torch.allclose(out, fn(a, b, tau=float(1 / log_scale.detach().exp())), rtol=1e-12)
    assert torch.autograd.gradcheck(
        lambda s: dual_encoder_loss(a.detach(), b.detach(), 1 / s.exp(), loss=loss,
                                    **({"lam": 0.3} if loss == "weince" else {})),
        (log_scale,))


def test_autocast_does_not_reach_the_loss():
    """Under bf16 autocast the similarities and the loss stay float32: the same loss and the
    same gradients as without autocast."""
    a, b = pairs(B=64, seed=7)
    ref = dual_encoder_loss(a, b, tau=0.1)
    g_ref = grads(ref, a, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = dual_encoder_loss(a, b, tau=0.1)
    assert out.dtype == torch.float32 and torch.equal(out, ref)
    for g, h in zip(grads(out, a, b), g_ref):
        assert torch.equal(g, h)
    # bf16 inputs: upcast, so the loss is float32 too
    out16 = DualEncoderLoss(tau=0.1)(a.detach().bfloat16(), b.detach().bfloat16())
    assert out16.dtype == torch.float32


@pytest.mark.parametrize("call, match", [
    (lambda a, b: dual_encoder_loss(a, b[:-1]), "a and b must both have shape"),
    (lambda a, b: dual_encoder_loss(a, b[:, :-1]), "a and b must both have shape"),
    (lambda a, b: dual_encoder_loss(a[:1], b[:1]), "B >= 2"),
    (lambda a, b: dual_encoder_loss(a.long(), b), "a must be a floating-point tensor"),
    (lambda a, b: dual_encoder_loss(a, b, direction="text_to_image"), "direction must be one of"),
    (lambda a, b: dual_encoder_loss(a, b, loss="clip"), "loss must be one of"),
    (lambda a, b: dual_encoder_loss(a, b, loss="infonce", margin=1.0), r"\['margin'\] are not"),
    (lambda a, b: dual_encoder_loss(a, b, loss="infonce", return_stats=True),
     "needs loss='weince'"),
    (lambda a, b: dual_encoder_loss(a, b, tau=-1.0), "tau"),
    (lambda a, b: dual_encoder_loss(a, b, tau=0.5, temperature=0.5), "only one"),
    (lambda a, b: DualEncoderLoss(tau=0.0), "tau must be a finite number > 0"),
    (lambda a, b: DualEncoderLoss(tau="0.1"), "tau must be a finite number > 0"),
    (lambda a, b: DualEncoderLoss(tau=0.1, temperature=0.1), "only one"),
    (lambda a, b: DualEncoderLoss(qq=0.1), r"\['qq'\] are not options"),
])
def test_bad_input_is_one_clear_error(call, match):
    a, b = pairs(B=8)
    with pytest.raises(ValueError, match=match):
        call(a, b)
