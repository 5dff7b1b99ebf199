"""Backbones (shapes, stems, patch sizes), projection head, SimCLRModel and encoder files."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from weince.models import (BACKBONES, ProjectionHead, build_backbone,
                           build_simclr_model, load_encoder, save_encoder)
from weince.models.vision import vit_patch_size


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("name, size, channels, feat", [
    ("smallcnn", 16, 1, 128), ("smallcnn", 28, 1, 128), ("smallcnn", 32, 3, 128),
    ("resnet18", 32, 3, 512), ("resnet18", 28, 1, 512), ("resnet18", 96, 3, 512),
    ("resnet50", 32, 3, 2048),
    ("vit_s", 32, 3, 384), ("vit_s", 28, 1, 384),
])
def test_backbone_output_shape(name, size, channels, feat):
    net, dim = build_backbone(name, size, channels)
    assert dim == feat
    net.eval()
    n = 2 if name == "smallcnn" else 1  # keep the large models cheap on a busy CPU
    with torch.no_grad():
        out = net(torch.randn(n, channels, size, size))
    assert out.shape == (n, feat) and torch.isfinite(out).all()


def test_registry_names():
    assert {"resnet18", "resnet50", "vit_s", "smallcnn"} <= set(BACKBONES)
    with pytest.raises(ValueError, match="valid names"):
        build_backbone("resnet34", 32, 3)


def test_resnet_stems():
    small, _ = build_backbone("resnet18", 64, 3)
    assert small.conv1.kernel_size == (3, 3) and small.conv1.stride == (1, 1)
    assert isinstance(small.maxpool, nn.Identity) and isinstance(small.fc, nn.Identity)
    big, _ = build_backbone("resnet18", 96, 3)
    assert big.conv1.kernel_size == (7, 7) and big.conv1.stride == (2, 2)
    assert isinstance(big.maxpool, nn.MaxPool2d)
    gray, _ = build_backbone("resnet50", 32, 1)
    assert gray.conv1.in_channels == 1
    # the CIFAR stem keeps the full 32x32 resolution into layer1
    feats = {}

    def hook(module, inputs, output):
        feats["l1"] = tuple(output.shape)

    small.layer1.register_forward_hook(hook)
    small.eval()
    with torch.no_grad():
        small(torch.randn(1, 3, 32, 32))
    assert feats["l1"][-2:] == (32, 32)


def test_vit_patch_sizes():
    assert [vit_patch_size(s) for s in (32, 64, 96, 28)] == [4, 8, 12, 4]
    vit, _ = build_backbone("vit_s", 64, 3)
    assert vit.vit.patch_size == 8 and vit.vit.hidden_dim == 384
    assert len(vit.vit.encoder.layers) == 12
    assert vit.vit.encoder.layers[0].self_attention.num_heads == 6
    assert vit.vit.encoder.layers[0].mlp[0].out_features == 1536
    assert vit.vit.seq_length == 8 * 8 + 1


def test_projection_head():
    head = ProjectionHead(512)
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(512, 512), (512, 64)]
    assert all(m.bias is None for m in linears)  # official: no biases
    assert not any(isinstance(m, nn.BatchNorm1d) for m in head.modules())
    bn = ProjectionHead(128, 256, 32, batch_norm=True)
    assert any(isinstance(m, nn.BatchNorm1d) for m in bn.modules())
    assert bn(torch.randn(4, 128)).shape == (4, 32)
    with pytest.raises(ValueError, match="out_dim"):
        ProjectionHead(16, out_dim=0)


def test_simclr_model_forward():
    model = build_simclr_model("smallcnn", 28, 1)
    h, z = model(torch.randn(5, 1, 28, 28))
    assert h.shape == (5, 128) and z.shape == (5, 64)
    assert not torch.allclose(z.norm(dim=1), torch.ones(5))  # z is not normalised
    assert torch.allclose(z, model.head(h))


@pytest.mark.parametrize("backbone, size, channels", [("smallcnn", 16, 1), ("resnet18", 16, 3)])
def test_encoder_round_trip(tmp_path, backbone, size, channels):
    model = build_simclr_model(backbone, size, channels, hidden_dim=96, out_dim=32)
    # move BN running stats away from their initial values
    model.train()
    with torch.no_grad():
        model(torch.randn(8, channels, size, size) * 3 + 1)
    model.eval()
    cfg = {"backbone": backbone, "image_size": size, "channels": channels, "loss": "weince",
           "seed": 7}
    path = save_encoder(tmp_path / "run" / "encoder.pt", model, cfg)
    loaded, cfg2 = load_encoder(path)
    assert cfg2 == cfg and not loaded.training
    x = torch.randn(4, channels, size, size)
    with torch.no_grad():
        h1, z1 = model(x)
        h2, z2 = loaded(x)
    assert torch.equal(h1, h2) and torch.equal(z1, z2)
    assert loaded.head.hidden_dim == 96 and loaded.head.out_dim == 32


def test_save_encoder_errors(tmp_path):
    model = build_simclr_model("smallcnn", 16, 1)
    with pytest.raises(ValueError, match="channels"):
        save_encoder(tmp_path / "e.pt", model, {"backbone": "smallcnn", "image_size": 16})
    with pytest.raises(FileNotFoundError, match="nothere.pt"):
        load_encoder(tmp_path / "nothere.pt")
    torch.save({"x": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not an encoder file"):
        load_encoder(tmp_path / "other.pt")


def test_backward_and_channels_last():
    model = build_simclr_model("smallcnn", 32, 3).to(memory_format=torch.channels_last)
    x = torch.randn(4, 3, 32, 32).to(memory_format=torch.channels_last)
    _, z = model(x)
    z.square().mean().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
