"""The losses beside the field's libraries (installed by the ``test`` extra, so none of these
skips): open_clip's ``ClipLoss`` and its training step, pytorch-metric-learning's
``SupConLoss``, lightly's ``NTXentLoss``; and ``torch.compile`` of ``DualEncoderLoss``: one
graph, no break, equal to eager, with and without a gather across processes."""

from __future__ import annotations

import types

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._dynamo.utils import counters

from _ranks import on_ranks

from weince.losses import (DualEncoderLoss, InfoNCELoss, OpenCLIPLoss, WEINCELoss)

pytestmark = pytest.mark.slow     # open_clip's import alone takes ~10 s; spawned processes


def unit_pairs(B=64, d=16, dtype=torch.float64, seed=0, noise=0.3):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(B, d, generator=g, dtype=dtype)
    b = a + noise * torch.randn(B, d, generator=g, dtype=dtype)
    return F.normalize(a, dim=1), F.normalize(b, dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kw", [{"loss": "infonce"}, {"lam": 0.0}])
def test_lambda_zero_is_open_clips_clip_loss_bit_for_bit(dtype, kw):
    from open_clip.loss import ClipLoss  # noqa: PLC0415 - imported when the test runs (seconds)
    a, b = (x.requires_grad_() for x in unit_pairs(dtype=dtype, seed=1))
    for shape in ((), (1,)):
        log_scale = torch.full(shape, 2.659, dtype=dtype, requires_grad=True)
        ref = ClipLoss()(a, b, log_scale.exp(), output_dict=True)["contrastive_loss"]
        out = OpenCLIPLoss(**kw)(a, b, log_scale.exp(), output_dict=True)["contrastive_loss"]
        assert torch.equal(out, ref)
        for g, w in zip(torch.autograd.grad(out, (a, b, log_scale)),
                        torch.autograd.grad(ref, (a, b, log_scale))):
            assert torch.equal(g, w)


def _tiny_clip(seed: int):
    import open_clip  # noqa: PLC0415 - imported when the test runs (seconds)
    torch.manual_seed(seed)
    return open_clip.CLIP(
        embed_dim=16, init_logit_bias=-1.0, nonscalar_logit_scale=True, output_dict=True,
        vision_cfg=open_clip.CLIPVisionCfg(layers=1, width=32, head_width=16, patch_size=8,
                                           image_size=16),
        text_cfg=open_clip.CLIPTextCfg(context_length=8, vocab_size=64, width=32, heads=2,
                                       layers=1))


def _two_steps(loss, B=40, precision="fp32"):
    """Two steps of open_clip's own training step (``open_clip_train.train.train_one_epoch``)
    on a tiny model built offline (no pretrained weights) and random batches."""
    from open_clip_train.train import train_one_epoch  # noqa: PLC0415 - imported when the test runs (seconds)
    model = _tiny_clip(0)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(2 * B, 3, 16, 16, generator=g)
    texts = torch.randint(0, 64, (2 * B, 8), generator=g)

    class Loader(list):
        num_batches, num_samples = 2, 2 * B

    data = {"train": types.SimpleNamespace(
        dataloader=Loader([(images[:B], texts[:B]), (images[B:], texts[B:])]),
        set_epoch=lambda epoch: None)}
    args = types.SimpleNamespace(
        device="cpu", precision=precision, distill=False, accum_freq=1, skip_scheduler=True,
        horovod=False, grad_clip_norm=None, rank=0, world_size=1, log_every_n_steps=1,
        batch_size=B, wandb=False, save_logs=False, distributed=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train_one_epoch(model, data, loss, 0, opt, None, None, None, args)
    return model


def test_open_clips_training_step_runs_with_the_swapped_loss():
    from open_clip.loss import ClipLoss  # noqa: PLC0415 - imported when the test runs (seconds)
    start = _tiny_clip(0).state_dict()
    ref = _two_steps(ClipLoss(cache_labels=True)).state_dict()
    # the swap at lambda = 0: the same two steps, bit for bit (in float32: under autocast
    # ClipLoss multiplies in bf16, the swapped loss in float32)
    same = _two_steps(OpenCLIPLoss(cache_labels=True, rank=0, world_size=1, lam=0.0))
    assert all(torch.equal(v, ref[k]) for k, v in same.state_dict().items())
    # WEINCE, under open_clip's bf16 autocast: its own steps, every parameter finite, the
    # statistics logged
    loss = OpenCLIPLoss(cache_labels=True, rank=0, world_size=1)
    got = _two_steps(loss, precision="amp_bf16").state_dict()
    assert all(torch.isfinite(v).all() for v in got.values())
    assert not torch.equal(got["text_projection"], ref["text_projection"])
    assert not torch.equal(got["logit_scale"], start["logit_scale"])
    assert 0 < float(loss.last_stats["lambda_mean_a_to_b"]) < 1


@pytest.mark.parametrize("name", ["infonce", "weince"])
def test_labels_at_lambda_zero_are_pytorch_metric_learnings_supcon(name):
    from pytorch_metric_learning.losses import SupConLoss  # noqa: PLC0415 - imported when the test runs (seconds)
    a, b = (x.requires_grad_() for x in unit_pairs(B=48, seed=2))
    labels = torch.arange(48) % 7
    ref = SupConLoss(temperature=0.1)(torch.cat([a, b]), torch.cat([labels, labels]))
    fn = InfoNCELoss(tau=0.1) if name == "infonce" else WEINCELoss(tau=0.1, lam=0.0)
    out = fn(a, b, labels=labels)
    torch.testing.assert_close(out, ref, rtol=1e-14, atol=0)
    for g, w in zip(torch.autograd.grad(out, (a, b)), torch.autograd.grad(ref, (a, b))):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-16)


@pytest.mark.parametrize("tau", [0.1, 0.5])
def test_infonce_is_lightlys_ntxent(tau):
    from lightly.loss import NTXentLoss  # noqa: PLC0415 - imported when the test runs (seconds)
    a, b = (x.requires_grad_() for x in unit_pairs(B=48, seed=3))
    ref = NTXentLoss(temperature=tau)(a, b)
    want = torch.autograd.grad(ref, (a, b))
    for fn in (InfoNCELoss(temperature=tau), WEINCELoss(temperature=tau, lam=0.0)):
        out = fn(a, b)
        torch.testing.assert_close(out, ref, rtol=1e-13, atol=0)
        for g, w in zip(torch.autograd.grad(out, (a, b)), want):
            torch.testing.assert_close(g, w, rtol=1e-11, atol=1e-15)


# the variants of DualEncoderLoss that torch.compile must take in one graph
def _variants():
    learnable = torch.nn.Parameter(torch.tensor(0.1))
    log_scale = torch.nn.Parameter(torch.tensor([2.3]))
    out = {}
    for loss in ("weince", "infonce"):
        out[f"{loss}_fixed"] = (DualEncoderLoss(tau=0.1, loss=loss), lambda fn, a, b: fn(a, b))
        out[f"{loss}_module_param"] = (DualEncoderLoss(tau=learnable, loss=loss),
                                       lambda fn, a, b: fn(a, b))
        out[f"{loss}_learnable"] = (DualEncoderLoss(loss=loss),
                                    lambda fn, a, b: fn(a, b, tau=1 / log_scale.exp()))
        out[f"{loss}_open_clip"] = (OpenCLIPLoss(loss=loss),
                                    lambda fn, a, b: fn(a, b, log_scale.exp()))
    return out


def _graphs_and_breaks(fn, call, a0, b0, calls: int = 3):
    torch._dynamo.reset()
    counters.clear()
    comp = torch.compile(fn, backend="aot_eager")
    for _ in range(calls):
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        got = call(comp, a, b)
        got.backward()
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    want = call(fn, a, b)
    want.backward()
    return (counters["stats"]["unique_graphs"], sum(counters["graph_break"].values()),
            float((got - want).abs()))


@pytest.mark.parametrize("name", sorted(_variants()))
def test_compiled_dual_encoder_loss_is_one_graph_equal_to_eager(name):
    fn, call = _variants()[name]
    a, b = unit_pairs(B=96, dtype=torch.float32, seed=4)
    graphs, breaks, diff = _graphs_and_breaks(fn, call, a, b)
    assert (graphs, breaks) == (1, 0)
    assert diff == 0.0


def _gathered_work(rank: int, world: int):
    out = {}
    g = torch.Generator().manual_seed(10 + rank)
    a0, b0 = torch.randn(24, 8, generator=g), torch.randn(24, 8, generator=g)
    for mode in (True, "local"):
        for loss in ("weince", "infonce"):
            log_scale = torch.nn.Parameter(torch.tensor(2.0))
            fn = DualEncoderLoss(tau=0.1, loss=loss, gather_distributed=mode)
            out[(mode, loss)] = _graphs_and_breaks(
                fn, lambda f, a, b, s=log_scale: f(a, b, tau=1 / s.exp()), a0, b0)
    return out


def test_compiled_gathers_are_one_graph_on_two_processes(tmp_path):
    for got in on_ranks(_gathered_work, 2, tmp_path):
        assert got == {key: (1, 0, 0.0) for key in got}, got


def _open_clip_modes(rank: int, world: int):
    """open_clip's ClipLoss and OpenCLIPLoss(lam=0) in each of open_clip's modes, on this
    rank's equal share of one global batch (float64): losses and feature gradients."""
    from open_clip.loss import ClipLoss  # noqa: PLC0415 - imported when the test runs (seconds)
    a_all, b_all = unit_pairs(B=40, seed=5)
    n = 40 // world
    out = {}
    for local, with_grad in ((False, False), (False, True), (True, True)):
        kw = dict(local_loss=local, gather_with_grad=with_grad, rank=rank, world_size=world)
        res = []
        for fn in (ClipLoss(**kw), OpenCLIPLoss(lam=0.0, **kw)):
            a = a_all[rank * n:(rank + 1) * n].clone().requires_grad_()
            b = b_all[rank * n:(rank + 1) * n].clone().requires_grad_()
            loss = fn(a, b, torch.tensor([14.0], dtype=torch.float64))
            res.append((loss.detach(), *torch.autograd.grad(loss, (a, b))))
        out[(local, with_grad)] = res
    return out


def test_open_clips_modes_on_two_processes_equal_clip_loss(tmp_path):
    for got in on_ranks(_open_clip_modes, 2, tmp_path):
        for mode, (ref, ours) in got.items():
            for x, y in zip(ours, ref):
                torch.testing.assert_close(x, y, rtol=1e-14, atol=1e-17, msg=str(mode))
