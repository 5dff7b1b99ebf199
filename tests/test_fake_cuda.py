"""The CUDA forward paths, checked on a CPU with fake CUDA tensors.

Inside ``torch._subclasses.fake_tensor.FakeTensorMode`` with ``torch.device("cuda")`` as the
default device, tensors carry a CUDA device, shapes and dtypes but no data, and no GPU is
needed. So a tensor left on the CPU and mixed with CUDA ones raises
``FakeTensorDeviceMismatchError``, and a read of a value on the host (``.item()``,
``bool()``, ``nonzero``, boolean indexing) raises a data-dependent error: the two faults
that only show on a GPU (a device mismatch, a sync per step). :class:`Probe`, a dispatch
mode above the fake one, counts host reads (answering them with a placeholder so the code
goes on) and host-to-device copies, so a test can say how many a loop makes.

Covered here: every backbone x arm forward (the views drawn on the device, ``embed_views``
with ``channels_last``, the loss and its ``last_stats``), feature extraction, the score
collection's embedding step, the k-NN scores and the linear probe's evaluation on CUDA
features, and the SimCSE forward; no host-to-device copy per step after warm-up.

Not covered by fake tensors, and why (the GPU acceptance run checks them,
``benchmarks/gpu_acceptance.sh``): the backward pass and hence the optimisers and the
probe's training steps (autograd's engine asks for a CUDA context, which a CPU build
lacks), CUDA random generators (``torch.Generator(device="cuda")`` needs a driver; the
views here take their uniforms from ``aug.draw`` on the default device), autocast
(dispatch-level casting is not simulated by fake tensors), Inductor/Triton (code generation
needs a GPU), NCCL (process groups need devices), and numerical values of any kind.

One fake mode per test: the losses and the augmentation cache device constants, so the
fixture clears those caches before and after (a fake CUDA constant must never reach a
later test).
"""

from __future__ import annotations

import functools
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import (FakeTensorDeviceMismatchError, FakeTensorMode,
                                           unset_fake_temporarily)
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import BertConfig, BertModel

from weince.data import augment
from weince.data.augment import build_augment
from weince.eval.features import embed_images
from weince.eval.knn import knn_scores
from weince.eval.linear import _accuracy
from weince.evt.collect import _embed
from weince.losses import build_loss, modules, recipe
from weince.models import build_simclr_model
from weince.train.simclr import embed_views

ARMS = ("infonce", "weince", "weince_recipe", "infonce_topm")
BACKBONES = ("smallcnn", "resnet18", "resnet50", "vit_s")
aten = torch.ops.aten


def _clear_device_caches():
    weince_mod = sys.modules["weince.losses.weince"]   # the attribute is the function
    augment._const.cache_clear()
    for cache in (recipe._POOL, weince_mod._DESIGNS, weince_mod._COEF, modules._QUANTILE_W):
        cache.clear()


class Probe(TorchDispatchMode):
    """Counts host reads (answered with ``value``) and host-to-device copies."""

    def __init__(self, value=1):
        super().__init__()
        self.value, self.reads, self.h2d = value, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (aten._local_scalar_dense.default, aten.is_nonzero.default):
            self.reads += 1
            return self.value if func is aten._local_scalar_dense.default else bool(self.value)
        out = func(*args, **kwargs)
        if func in (aten._to_copy.default, aten.copy_.default):
            src = args[1] if func is aten.copy_.default else args[0]
            dst = out
            if (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)
                    and src.device.type == "cpu" and dst.device.type == "cuda"):
                self.h2d += 1
        return out


@pytest.fixture
def fake_cuda(monkeypatch):
    # the resolver's "no CUDA device is visible" error is for real runs; fake CUDA tensors
    # exist without a GPU, so the resolver alone is told that CUDA is visible
    monkeypatch.setattr("weince.utils.device.cuda_visible", lambda: True)
    _clear_device_caches()
    try:
        with FakeTensorMode(allow_non_fake_inputs=False) as mode, torch.device("cuda"):
            yield mode
    finally:
        _clear_device_caches()


class FakeModel(torch.nn.Module):
    """A real module's forward on fake CUDA copies of its weights and buffers
    (``torch.func.functional_call``). The module is built without fake tensors: torchvision's
    ViT initialisation reads values, and ``Module.to`` cannot swap fake parameters."""

    def __init__(self, module: torch.nn.Module, mode: FakeTensorMode):
        super().__init__()
        self.inner = [module]           # not a submodule: .to()/.eval() leave it alone
        self.state = {k: mode.from_tensor(v).to("cuda")
                      for k, v in {**dict(module.named_parameters()),
                                   **dict(module.named_buffers())}.items()}

    def forward(self, x):
        return torch.func.functional_call(self.inner[0], self.state, (x,))


@functools.cache
def _real_model(backbone: str, size: int) -> torch.nn.Module:
    with unset_fake_temporarily(), torch.device("cpu"):
        return build_simclr_model(backbone, size, 3, out_dim=16).train()


def _setup(mode, backbone, arm, size=16):
    model = FakeModel(_real_model(backbone, size), mode)   # fresh fake weights per test
    loss_fn = build_loss(arm, tau=0.5).train()       # built on the fake device (its buffers)
    aug = build_augment("cifar100", image_size=size)
    images = torch.randint(0, 256, (8, 3, size, size), dtype=torch.uint8)
    return model, loss_fn, aug, images


def _forward(model, loss_fn, aug, images):
    u = aug.draw(2 * images.shape[0], None, images.device)
    v1, v2 = aug.two_views(images, u=u)
    z1, z2 = embed_views(model, v1, v2, channels_last=True)
    return loss_fn(z1, z2), v1, z1


def test_fake_cuda_catches_what_it_is_for(fake_cuda):
    """The two faults the other tests rely on being caught."""
    with pytest.raises(FakeTensorDeviceMismatchError):
        torch.randn(3) + torch.randn(3, device="cpu")
    with pytest.raises(Exception, match="[Dd]ata.dependent|_local_scalar_dense"):
        torch.randn(3).sum().item()
    with Probe() as probe:              # and the probe counts what it should
        torch.ones(3, device="cpu").to("cuda")
        torch.zeros(3, device="cuda").copy_(torch.ones(3, device="cpu"))
        assert torch.randn(3).sum().item() == 1 and bool(torch.randn(()) > 0)
    assert (probe.h2d, probe.reads) == (2, 2)


@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("arm", ARMS)
def test_forward_of_every_backbone_and_arm_stays_on_the_device(fake_cuda, backbone, arm):
    model, loss_fn, aug, images = _setup(fake_cuda, backbone, arm)
    loss, v1, z1 = _forward(model, loss_fn, aug, images)
    assert v1.device.type == "cuda" and v1.dtype == torch.float32
    assert z1.device.type == "cuda" and z1.dtype == torch.float32
    assert loss.device.type == "cuda" and loss.shape == ()
    assert arm in ("infonce", "infonce_topm") or loss_fn.last_stats, "no statistics"
    for name, v in loss_fn.last_stats.items():
        assert v.device.type == "cuda", name      # logging them costs no sync per step


@pytest.mark.parametrize("arm", ARMS)
def test_no_host_copy_or_read_per_step_after_warm_up(fake_cuda, arm):
    """Views, forward and loss of a step: the device constants are built once (warm-up),
    then a step neither copies from the host nor reads a value back."""
    model, loss_fn, aug, images = _setup(fake_cuda, "resnet18", arm)
    with Probe() as warm:
        _forward(model, loss_fn, aug, images)
    with Probe() as probe:
        for _ in range(2):
            _forward(model, loss_fn, aug, images)
    assert (probe.h2d, probe.reads) == (0, 0)
    assert warm.reads == 0          # not even the first step reads a value


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("arm", ARMS)
def test_every_arm_takes_every_dtype_on_the_device(fake_cuda, arm, dtype):
    """Embeddings in float16/bfloat16 (as an autocast forward gives them): a float32 loss on
    the device, the recipe's top-k included."""
    loss_fn = build_loss(arm, tau=0.5).train()
    z1, z2 = torch.randn(16, 8, dtype=dtype), torch.randn(16, 8, dtype=dtype)
    loss = loss_fn(z1, z2)
    assert loss.device.type == "cuda" and loss.dtype == torch.float32 and loss.shape == ()


def test_feature_extraction_on_cuda(fake_cuda):
    model, _, aug, images = _setup(fake_cuda, "resnet18", "infonce")
    with Probe() as probe:
        h, z = embed_images(model, torch.cat([images] * 3), mean=aug.mean, std=aug.std,
                            image_size=16, batch_size=8, device="cuda")
    assert h.device.type == "cpu" and h.shape == (24, 512) and z.shape == (24, 16)
    assert probe.reads == 0


def test_score_collection_embeds_on_the_device_with_one_check_per_batch(fake_cuda):
    """The embedding step of the tail scores runs on the device; its zero-embedding
    check is one host read per batch of 256 (by design: a clear error beats a NaN)."""
    model, _, aug, images = _setup(fake_cuda, "resnet18", "infonce")
    idx = torch.arange(8, device="cpu")
    with Probe(value=0) as probe:          # "no zero embedding"
        z = _embed(lambda x: model(x)[1], aug, images.cpu(), idx, "cuda")
        sim = z @ z.T
        rows, cols = torch.tril_indices(8, 8, offset=-1)
        pooled = sim[rows, cols]
    assert pooled.device.type == "cuda" and pooled.shape == (28,)
    assert probe.reads == 1


def test_knn_reads_the_host_once_per_metric_not_per_query(fake_cuda):
    n_bank, dim = 64, 32
    bank, bank_y = torch.randn(n_bank, dim), torch.randint(0, 5, (n_bank,))
    reads = []
    for n_query in (8, 32):              # 1 and 4 chunks of 8 queries
        q, qy = torch.randn(n_query, dim), torch.randint(0, 5, (n_query,))
        with Probe() as probe:
            out = knn_scores(q, qy, bank, bank_y, k=5, recall_ks=(1, 5), num_classes=5, chunk=8)
        reads.append(probe.reads)
        assert {"acc@5", "recall@1", "recall@5"} <= set(out)
    assert reads[0] == reads[1] == len(out)   # one per metric, however many chunks


def test_linear_probe_scores_cuda_features_without_a_read(fake_cuda):
    """The probe's evaluation on CUDA features (its training steps need autograd on the
    device: not covered, see the module docstring)."""
    W, b = torch.randn(2, 16, 4), torch.randn(2, 1, 4)
    X, y = torch.randn(2, 40, 16), torch.randint(0, 4, (40,))
    # the probe runs with the CPU as default device (its counters live there)
    with Probe() as probe, torch.device("cpu"):
        acc = _accuracy(W, b, X, y, chunk=16)
    assert acc.device.type == "cpu" and acc.shape == (2,)
    assert probe.reads == 0


def test_simcse_forward_on_cuda(fake_cuda):
    enc = BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, vocab_size=100)).train()
    loss_fn = build_loss("weince", tau=0.05, layout="pairs").train()
    ids = torch.randint(0, 100, (8, 12))
    att = torch.ones_like(ids)
    with Probe() as probe:
        z1 = enc(input_ids=ids, attention_mask=att).last_hidden_state[:, 0]
        z2 = enc(input_ids=ids, attention_mask=att).last_hidden_state[:, 0]
        loss = loss_fn(z1.float(), z2.float())
    assert loss.device.type == "cuda" and z1.shape == (8, 32)
    assert probe.reads == 0
