"""Vision backbones, the SimCLR projection head, and encoder files.

    from weince.models import build_backbone, ProjectionHead, SimCLRModel
    backbone, feat_dim = build_backbone("resnet18", image_size=32, channels=3)
    model = SimCLRModel(backbone, ProjectionHead(feat_dim, out_dim=64))
    h, z = model(x)            # h (B, feat_dim) pooled features; z (B, 64), NOT normalised
    save_encoder("encoder.pt", model, cfg={"backbone": "resnet18", "image_size": 32, ...})
    model, cfg = load_encoder("encoder.pt")

Backbones (``BACKBONES``; every one returns pooled features, the classifier removed):

- ``resnet18`` / ``resnet50`` (torchvision, random init; feat 512 / 2048). For
  ``image_size <= 64`` the CIFAR stem (3x3 conv, stride 1, padding 1, no max-pool), as the
  official code does for CIFAR and ImageNet-32 (and for Tiny-ImageNet);
  above 64 px (STL-10, 96 px) the standard 7x7 stride-2 stem with max-pool. The first conv
  takes ``channels`` inputs.
- ``vit_s``: torchvision ``VisionTransformer`` with ViT-Small dims (hidden 384, 6 heads,
  12 layers, MLP 1536); patch 4 at 32 px, 8 at 64 px, 12 at 96 px (always an 8 x 8 token
  grid); for other sizes ``image_size // 8`` if it divides, else 4, else 2. Features are
  the final class token (after the last LayerNorm); feat 384.
- ``smallcnn``: four 3x3 conv-BN-ReLU blocks (32, 64, 128, 128 channels, the 2nd and 3rd
  with stride 2) and global average pooling; feat 128. About 0.24 M parameters, the CPU
  default for digits / MNIST-5k.

Projection head: as the official code (the Spijkervet SimCLR fork),
``Linear(in, hidden, bias=False) - ReLU - Linear(hidden, out, bias=False)`` with
``hidden = in_dim`` and ``out = 64`` (official); ``batch_norm=True`` inserts a BatchNorm1d
after the first layer (SimCLR v2 style) as an option.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from weince.utils.checkpoint import UnreadableFileError, load_torch_file
from weince.utils.diskspace import atomic_write, payload_bytes
from weince.utils.finite import check_finite
from weince.utils.rerun import snakemake_command

__all__ = ["BACKBONES", "build_backbone", "register_backbone", "ProjectionHead", "SimCLRModel",
           "build_simclr_model", "save_encoder", "load_encoder", "vit_patch_size"]

BACKBONES: dict[str, Callable[[int, int], tuple[nn.Module, int]]] = {}


def register_backbone(name: str):
    """Decorator: ``@register_backbone("name")`` on ``fn(image_size, channels) -> (module,
    feat_dim)``."""
    def deco(fn):
        if name in BACKBONES:
            raise ValueError(f"backbone {name!r} is already registered")
        BACKBONES[name] = fn
        return fn
    return deco


def _resnet(ctor: Callable[..., nn.Module], image_size: int, channels: int
            ) -> tuple[nn.Module, int]:
    net = ctor(weights=None)
    if image_size <= 64:  # CIFAR stem
        net.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
    elif channels != 3:
        net.conv1 = nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    # a replaced conv1 keeps PyTorch's default init, as the official code's does
    # (build_simclr_model(conv1_init="kaiming") re-initialises it)
    feat_dim = cast(nn.Linear, net.fc).in_features
    net.fc = nn.Identity()
    return net, feat_dim


@register_backbone("resnet18")
def _resnet18(image_size: int, channels: int) -> tuple[nn.Module, int]:
    from torchvision.models import resnet18  # noqa: PLC0415 - torchvision costs seconds of imports; smallcnn jobs skip it

    return _resnet(resnet18, image_size, channels)


@register_backbone("resnet50")
def _resnet50(image_size: int, channels: int) -> tuple[nn.Module, int]:
    from torchvision.models import resnet50  # noqa: PLC0415 - torchvision costs seconds of imports; smallcnn jobs skip it

    return _resnet(resnet50, image_size, channels)


def vit_patch_size(image_size: int) -> int:
    """Patch size used by ``vit_s``: 4 at 32 px, 8 at 64 px, 12 at 96 px (an 8 x 8 token
    grid); otherwise ``image_size // 8`` if it divides, else 4, else 2."""
    if image_size % 8 == 0 and image_size >= 16:
        return image_size // 8
    for p in (4, 2):
        if image_size % p == 0:
            return p
    raise ValueError(f"vit_s needs an image size divisible by 2, got {image_size}")


class _ViTFeatures(nn.Module):
    """torchvision ``VisionTransformer`` returning the class-token feature (heads removed)."""

    def __init__(self, image_size: int, channels: int):
        from torchvision.models.vision_transformer import VisionTransformer  # noqa: PLC0415 - as _resnet18

        super().__init__()
        patch = vit_patch_size(image_size)
        vit = VisionTransformer(image_size=image_size, patch_size=patch, num_layers=12,
                                num_heads=6, hidden_dim=384, mlp_dim=1536)
        if channels != 3:
            vit.conv_proj = nn.Conv2d(channels, 384, kernel_size=patch, stride=patch)
            fan_in = channels * patch * patch
            nn.init.trunc_normal_(vit.conv_proj.weight, std=(1.0 / fan_in) ** 0.5)
            nn.init.zeros_(vit.conv_proj.bias)
        vit.heads = nn.Identity()
        self.vit = vit
        self.patch_size = patch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit(x)


@register_backbone("vit_s")
def _vit_s(image_size: int, channels: int) -> tuple[nn.Module, int]:
    return _ViTFeatures(image_size, channels), 384


class SmallCNN(nn.Module):
    """Four conv-BN-ReLU blocks and global average pooling: ``(B, C, H, W) -> (B, 128)``."""

    def __init__(self, channels: int, widths: tuple[int, ...] = (32, 64, 128, 128),
                 strides: tuple[int, ...] = (1, 2, 2, 1)):
        super().__init__()
        layers: list[nn.Module] = []
        c = channels
        for w, s in zip(widths, strides):
            layers += [nn.Conv2d(c, w, 3, stride=s, padding=1, bias=False), nn.BatchNorm2d(w),
                       nn.ReLU(inplace=True)]
            c = w
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.out_dim = c
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.features(x)).flatten(1)


@register_backbone("smallcnn")
def _smallcnn(image_size: int, channels: int) -> tuple[nn.Module, int]:
    net = SmallCNN(channels)
    return net, net.out_dim


def build_backbone(name: str, image_size: int, channels: int = 3) -> tuple[nn.Module, int]:
    """A randomly initialised backbone by name and its feature width.

    Args:
        name: a key of :data:`BACKBONES` (``resnet18``, ``resnet50``, ``vit_s``, ``smallcnn``).
        image_size: input side in pixels (selects the ResNet stem / ViT patch size).
        channels: input channels (1 or 3).

    Returns:
        ``(module, feat_dim)``; ``module(x)`` maps ``(B, channels, S, S)`` to ``(B, feat_dim)``.
    """
    if name not in BACKBONES:
        raise ValueError(f"unknown backbone {name!r}; valid names: {', '.join(BACKBONES)}")
    if int(image_size) < 8:
        raise ValueError(f"image_size must be at least 8, got {image_size}")
    if channels < 1:
        raise ValueError(f"channels must be >= 1, got {channels}")
    return BACKBONES[name](int(image_size), int(channels))


class ProjectionHead(nn.Module):
    """SimCLR projection MLP ``(B, in_dim) -> (B, out_dim)``:
    ``Linear(in, hidden, bias=False) [-> BatchNorm1d] -> ReLU -> Linear(hidden, out,
    bias=False)``; ``hidden_dim=None`` means ``in_dim`` (official code: no BN, no biases)."""

    def __init__(self, in_dim: int, hidden_dim: int | None = None, out_dim: int = 64, *,
                 batch_norm: bool = False):
        super().__init__()
        hidden_dim = in_dim if hidden_dim is None else hidden_dim
        for n, v in (("in_dim", in_dim), ("hidden_dim", hidden_dim), ("out_dim", out_dim)):
            if int(v) < 1:
                raise ValueError(f"{n} must be positive, got {v}")
        self.in_dim, self.hidden_dim, self.out_dim = int(in_dim), int(hidden_dim), int(out_dim)
        self.batch_norm = bool(batch_norm)
        layers: list[nn.Module] = [nn.Linear(self.in_dim, self.hidden_dim, bias=False)]
        if self.batch_norm:
            layers.append(nn.BatchNorm1d(self.hidden_dim))
        layers += [nn.ReLU(inplace=True), nn.Linear(self.hidden_dim, self.out_dim, bias=False)]
        self.net = nn.Sequential(*layers)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.net(h)

    def dims(self) -> dict[str, Any]:
        return dict(in_dim=self.in_dim, hidden_dim=self.hidden_dim, out_dim=self.out_dim,
                    batch_norm=self.batch_norm)


class SimCLRModel(nn.Module):
    """Backbone + projection head: ``forward(x) -> (h, z)`` with ``h`` ``(B, feat_dim)`` the
    pooled backbone features (used for evaluation) and ``z`` ``(B, out_dim)`` the
    projection (NOT normalised: the losses normalise)."""

    def __init__(self, backbone: nn.Module, head: ProjectionHead):
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.backbone(x)
        return h, self.head(h)


def build_simclr_model(backbone: str, image_size: int, channels: int = 3, *,
                       hidden_dim: int | None = None, out_dim: int = 64,
                       batch_norm: bool = False, conv1_init: str = "default") -> SimCLRModel:
    """``SimCLRModel(build_backbone(...), ProjectionHead(feat_dim, hidden_dim, out_dim))``.

    ``conv1_init``: ``"default"`` leaves a ResNet's stem convolution with PyTorch's default
    init (the official code); ``"kaiming"`` re-draws it Kaiming normal (fan_out, ReLU), as
    torchvision initialises its own convolutions. Other backbones ignore it."""
    if conv1_init not in ("default", "kaiming"):
        raise ValueError(f"conv1_init must be 'default' or 'kaiming', got {conv1_init!r}")
    net, feat_dim = build_backbone(backbone, image_size, channels)
    conv1 = getattr(net, "conv1", None)
    if conv1_init == "kaiming" and isinstance(conv1, nn.Conv2d):
        nn.init.kaiming_normal_(conv1.weight, mode="fan_out", nonlinearity="relu")
    return SimCLRModel(net, ProjectionHead(feat_dim, hidden_dim, out_dim, batch_norm=batch_norm))


_ARCH_KEYS = ("backbone", "image_size", "channels")


def save_encoder(path: str | os.PathLike, model: SimCLRModel, cfg: dict[str, Any]) -> Path:
    """Write ``model``'s weights and what rebuilds it to ``path`` (atomic).

    ``cfg`` must hold ``backbone``, ``image_size`` and ``channels`` (the resolved training
    config is a good ``cfg``); the head dimensions are read from ``model.head``. The file is
    ``{"arch": {...}, "state_dict": ..., "cfg": cfg}``.
    """
    missing = [k for k in _ARCH_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"save_encoder: cfg lacks {missing} (needed to rebuild the model)")
    model = getattr(model, "module", model)  # unwrap DDP / DataParallel
    model = getattr(model, "_orig_mod", model)  # unwrap torch.compile
    if not isinstance(model, SimCLRModel):
        raise ValueError(f"save_encoder expects a SimCLRModel, got {type(model).__name__}")
    arch = {k: cfg[k] for k in _ARCH_KEYS}
    arch.update(model.head.dims())
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    blob = {"arch": arch, "state_dict": state, "cfg": dict(cfg)}
    return atomic_write(path, lambda tmp: torch.save(blob, tmp), need=payload_bytes(state))


def load_encoder(path: str | os.PathLike, map_location: str | torch.device = "cpu"
                 ) -> tuple[SimCLRModel, dict[str, Any]]:
    """Rebuild the :class:`SimCLRModel` saved by :func:`save_encoder`, in ``eval()`` mode.

    Returns ``(model, cfg)``. Raises ``FileNotFoundError`` naming the missing file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"encoder file {path} does not exist; run `weince pretrain` "
                                "(or the workflow's pretrain rule) to create it")
    # deleting it is not enough in the workflow: when the files made from it are finished,
    # Snakemake has nothing to do and the encoder stays missing; --forcerun names the file
    remake = (f"rebuild it with {snakemake_command('--forcerun', path)} (it retrains that "
              f"run and re-runs what reads it), or `weince pretrain` outside the workflow")
    blob = load_torch_file(path, what="encoder file", remake=remake, map_location=map_location)
    if not isinstance(blob, dict) or "arch" not in blob or "state_dict" not in blob:
        raise UnreadableFileError(f"{path} is not an encoder file written by save_encoder "
                                  f"(no 'arch'/'state_dict'); {remake}")
    check_finite(blob["state_dict"].items(), f"{path} (encoder weights)",
                 "its pretraining diverged (see the run's train_log.jsonl): re-run the pretrain "
                 "rule with a lower lr")
    a = blob["arch"]
    model = build_simclr_model(a["backbone"], a["image_size"], a["channels"],
                               hidden_dim=a["hidden_dim"], out_dim=a["out_dim"],
                               batch_norm=a.get("batch_norm", False))
    model.load_state_dict(blob["state_dict"])
    if isinstance(map_location, (str, torch.device)):
        model.to(map_location)
    model.eval()
    return model, blob["cfg"]
