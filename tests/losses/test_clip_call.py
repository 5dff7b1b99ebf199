"""open_clip's call (``OpenCLIPLoss``, ``DualEncoderLoss(**model_out, output_dict=True)``), a
learnable temperature that is never read back from the device, and backward passes that run
under their forward's autocast state wherever ``backward()`` is called."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from weince.losses import (DualEncoderLoss, InfoNCELoss, OpenCLIPLoss, WEINCELoss,
                           WEINCERecipeLoss, clip_dual_loss)


def features(B=64, d=16, dtype=torch.float32, seed=0, noise=0.3):
    """Unit features, as open_clip's models return them, with gradient."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(B, d, generator=g, dtype=dtype)
    b = a + noise * torch.randn(B, d, generator=g, dtype=dtype)
    return F.normalize(a, dim=1).requires_grad_(), F.normalize(b, dim=1).requires_grad_()


def clip_reference(a, b, logit_scale, logit_bias=None):
    """CLIP's loss in open_clip's operation order: the features scaled before each matmul,
    the text side its own matmul, the bias added to both."""
    per_image = (logit_scale * a) @ b.T
    per_text = (logit_scale * b) @ a.T
    if logit_bias is not None:
        per_image, per_text = per_image + logit_bias, per_text + logit_bias
    labels = torch.arange(a.shape[0])
    return (F.cross_entropy(per_image, labels) + F.cross_entropy(per_text, labels)) / 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(), (1,)])
@pytest.mark.parametrize("kw", [{"loss": "infonce"}, {"lam": 0.0}])
def test_open_clips_call_equals_clips_loss_bit_for_bit(dtype, shape, kw):
    a, b = features(dtype=dtype)
    log_scale = torch.full(shape, 2.659, dtype=dtype, requires_grad=True)   # log(1 / 0.07)
    bias = torch.full(shape, -1.5, dtype=dtype, requires_grad=True)
    for with_bias in (False, True):
        ref = clip_reference(a, b, log_scale.exp(), bias if with_bias else None)
        want = torch.autograd.grad(ref, (a, b, log_scale))
        out = OpenCLIPLoss(**kw)(a, b, log_scale.exp(), bias if with_bias else None,
                                 output_dict=True)
        assert set(out) == {"contrastive_loss"}
        loss = out["contrastive_loss"]
        assert loss.dtype == dtype and torch.equal(loss, ref)
        got = torch.autograd.grad(loss, (a, b, log_scale))
        for g, w in zip(got, want):
            assert g.shape == w.shape and torch.equal(g, w)


def test_dual_encoder_loss_takes_an_open_clip_models_output():
    a, b = features(seed=1)
    model_out = {"image_features": a, "text_features": b,
                 "logit_scale": torch.tensor([10.0]), "logit_bias": torch.tensor([-2.0])}
    fn = DualEncoderLoss(loss="infonce", normalize=False)
    loss = fn(**model_out, output_dict=True)["contrastive_loss"]
    assert torch.equal(loss, clip_reference(a, b, 10.0, -2.0))
    # WEINCE in the same call: the statistics logged per direction, the loss its own
    weince = DualEncoderLoss(normalize=False)
    out = weince(**model_out)
    assert out.ndim == 0 and not torch.equal(out, loss)
    assert {"lambda_mean_a_to_b", "lambda_mean_b_to_a"} <= set(weince.last_stats)


def test_weince_in_open_clips_form_is_the_blend_of_its_logits():
    """Away from lambda = 0: each row's logits are ``(1 - lam) scale s + lam (-log(1 - s))``
    with the statistics of the tau form (scale = 1 / tau): the same loss to rounding."""
    a, b = features(B=96, dtype=torch.float64, seed=2, noise=0.05)
    ours = clip_dual_loss(a, b, 1 / 0.1)
    ref = DualEncoderLoss(tau=0.1, normalize=False)(a, b)
    torch.testing.assert_close(ours, ref, rtol=1e-13, atol=0)
    assert not torch.isclose(ours, clip_reference(a, b, 10.0), rtol=1e-6)


def test_open_clips_form_has_the_gradient_of_its_logits():
    """The fused blend's written-out backward: the features' and the logit scale's gradients
    are the derivatives of the loss (a forced lambda; the statistics carry none)."""
    a, b = features(B=48, d=8, dtype=torch.float64, seed=9, noise=0.1)
    log_scale = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, y, s: clip_dual_loss(x, y, s.exp(), lam=0.4, min_tail=8), (a, b, log_scale))


@pytest.mark.parametrize("call, match", [
    (lambda a, b: OpenCLIPLoss()(a, b, torch.ones(2)), r"shape \(\) or \(1,\)"),
    (lambda a, b: OpenCLIPLoss()(a, b, -1.0), "logit_scale must be a finite number > 0"),
    (lambda a, b: OpenCLIPLoss(use_horovod=True), "use_horovod"),
    (lambda a, b: OpenCLIPLoss(local_loss=True), "gather_with_grad=True"),
    (lambda a, b: DualEncoderLoss()(a, b, tau=0.1, logit_scale=10.0), "not both"),
    (lambda a, b: DualEncoderLoss()(a, b, logit_bias=1.0), "pass logit_scale with it"),
    (lambda a, b: DualEncoderLoss()(a, image_features=a, text_features=b), "not both"),
    (lambda a, b: DualEncoderLoss(chunk_size=8)(a, b, logit_scale=10.0), "chunk_size"),
])
def test_bad_open_clip_calls_are_one_clear_error(call, match):
    a, b = features(B=8)
    with pytest.raises(ValueError, match=match):
        call(a, b)


class _Reads(TorchFunctionMode):
    """Counts the calls that read a tensor's value into Python (a host synchronisation on a
    GPU): ``float()``, ``int()``, ``bool()``, ``.item()``, ``.tolist()``."""

    READS = frozenset({"__float__", "__int__", "__bool__", "__index__", "item", "tolist"})

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.READS:
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


def test_the_counter_counts_reads():
    with _Reads() as reads:
        x = torch.tensor(2.0)
        float(x), x.item(), x.tolist()
    assert reads.seen == ["__float__", "item", "tolist"]


@pytest.mark.parametrize("loss", ["weince", "infonce"])
def test_a_learnable_logit_scale_is_never_read(loss):
    a, b = features(B=96, seed=3)
    log_scale = torch.nn.Parameter(torch.tensor([2.659]))
    calls = {
        "tau": lambda fn: fn(a, b, tau=1 / log_scale.exp()),
        "open_clip": lambda fn: fn(a, b, logit_scale=log_scale.exp()),
        "module_tau": lambda fn: DualEncoderLoss(tau=torch.nn.Parameter(torch.tensor(0.1)),
                                                 loss=loss)(a, b),
    }
    for name, call in calls.items():
        fn = DualEncoderLoss(loss=loss)
        call(fn)                                   # first call: cached constants are built
        with _Reads() as reads:
            out = call(fn)
            out.backward()
        assert reads.seen == [], (name, reads.seen)
    assert log_scale.grad is not None and float(log_scale.grad) != 0


def _grads_inside_and_outside(make_loss, inputs, dtype=torch.bfloat16):
    out = []
    for inside in (False, True):
        xs = [x.detach().clone().requires_grad_() for x in inputs]
        with torch.autocast("cpu", dtype=dtype):
            loss = make_loss(*xs)
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        out.append([x.grad for x in xs])
    return out


@pytest.mark.parametrize("name", ["dual_weince", "dual_infonce", "open_clip", "weince",
                                  "infonce", "recipe", "dual_chunked", "labels"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_backward_inside_autocast_equals_one_outside(name, dtype):
    a, b = features(B=64, seed=4)
    log_scale = torch.tensor(2.3)
    labels = torch.arange(64) % 12
    make = {
        "dual_weince": lambda x, y, s: DualEncoderLoss()(x, y, tau=1 / s.exp()),
        "dual_infonce": lambda x, y, s: DualEncoderLoss(loss="infonce")(x, y, tau=1 / s.exp()),
        "open_clip": lambda x, y, s: OpenCLIPLoss()(x, y, s.exp().view(1)),
        "weince": lambda x, y, s: WEINCELoss(tau=0.2)(x, y),
        "infonce": lambda x, y, s: InfoNCELoss(tau=0.2)(x, y),
        "recipe": lambda x, y, s: WEINCERecipeLoss(tau=0.2).eval()(x, y),
        "dual_chunked": lambda x, y, s: DualEncoderLoss(chunk_size=16)(x, y, tau=1 / s.exp()),
        "labels": lambda x, y, s: WEINCELoss(tau=0.2)(x, y, labels=labels),
    }[name]
    outside, inside = _grads_inside_and_outside(make, (a, b, log_scale), dtype)
    for g_out, g_in in zip(outside, inside):
        if g_out is None:
            assert g_in is None
            continue
        assert g_in.dtype == torch.float32 and torch.equal(g_in, g_out)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("loss", ["weince", "infonce"])
def test_no_host_synchronisation_on_cuda_with_a_learnable_logit_scale(loss):
    a, b = (x.detach().cuda().requires_grad_() for x in features(B=256, seed=5))
    log_scale = torch.nn.Parameter(torch.tensor([2.659], device="cuda"))
    for fn, call in ((DualEncoderLoss(loss=loss), lambda fn: fn(a, b, tau=1 / log_scale.exp())),
                     (OpenCLIPLoss(loss=loss), lambda fn: fn(a, b, log_scale.exp()))):
        call(fn).backward()                        # first call: cached constants are built
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            call(fn).backward()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        assert torch.isfinite(log_scale.grad).all()
