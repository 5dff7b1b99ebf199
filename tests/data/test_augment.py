"""Batched SimCLR augmentation: per-image parameters, exact agreement with torchvision's
per-image ops for the same parameters, reproducibility, normalisation."""

from __future__ import annotations

import pytest
import torch
import torchvision.transforms as T
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from weince.data.augment import (EvalTransform, PerImageTwoViews, SimCLRAugment, augment_config,
                                 build_augment, reference_transform)
from weince.data.vision import load_vision

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


def _batch(n=8, c=3, size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, c, size, size), dtype=torch.uint8, generator=g)


def _reference_one(img: torch.Tensor, prm: dict, aug: SimCLRAugment) -> torch.Tensor:
    """Slow reference: torchvision functional ops on one float image, given its params."""
    x = img.float() / 255.0
    x = TF.resized_crop(x, prm["top"], prm["left"], prm["height"], prm["width"],
                        [aug.image_size, aug.image_size],
                        interpolation=v2.InterpolationMode.BILINEAR, antialias=True)
    if prm["flip"]:
        x = TF.horizontal_flip(x)
    if prm["jitter"]:
        b, c, s, h = prm["factors"]
        for k in prm["order"]:
            if aug.jitter[k] == 0:
                continue
            if k == 0:
                x = TF.adjust_brightness(x, b)
            elif k == 1:
                x = TF.adjust_contrast(x, c)
            elif k == 2:
                x = TF.adjust_saturation(x, s)
            else:
                x = TF.adjust_hue(x, h)
    if prm["gray"]:
        x = TF.rgb_to_grayscale(x, num_output_channels=3)
    if prm["blur"]:
        k = aug.blur_kernel
        x = TF.gaussian_blur(x, [k, k], [prm["sigma"], prm["sigma"]])
    if aug.mean is not None:
        x = TF.normalize(x, list(aug.mean), list(aug.std))
    return x


@pytest.mark.parametrize("kwargs", [
    dict(),                                                      # official recipe
    dict(blur=True, blur_p=0.7, grayscale_p=0.5),                # blur + more grey
    dict(crop_scale=(0.3, 1.0), jitter=(0.4, 0.4, 0.4, 0.1)),
])
def test_matches_torchvision_per_image(kwargs):
    aug = SimCLRAugment(32, 3, mean=MEAN, std=STD, **kwargs)
    x = _batch(16)
    p = aug.sample_params(16, 32, 32, torch.Generator().manual_seed(1))
    out = aug.apply(x, p)
    assert p.jitter.any() and (~p.jitter).any() and p.flip.any()
    for b in range(16):
        ref = _reference_one(x[b], p[b], aug)
        torch.testing.assert_close(out[b], ref, atol=2e-5, rtol=1e-5)


def test_matches_torchvision_gray_and_larger_source():
    """Grey recipe on 28 px; and a 64 px source to 32 px views, so that crops are up- and
    down-sampled (antialiased, as torchvision)."""
    aug = build_augment("mnist5k")
    x = _batch(16, c=1, size=28)
    p = aug.sample_params(16, 28, 28, torch.Generator().manual_seed(2))
    out = aug.apply(x, p)
    for b in range(16):
        torch.testing.assert_close(out[b], _reference_one(x[b], p[b], aug), atol=2e-5, rtol=1e-5)
    aug = SimCLRAugment(32, 3, crop_scale=(0.1, 1.0))
    x = _batch(16, size=64)
    p = aug.sample_params(16, 64, 64, torch.Generator().manual_seed(3))
    assert (p.height > 32).any() and (p.width < 32).any()
    out = aug.apply(x, p)
    for b in range(16):
        torch.testing.assert_close(out[b], _reference_one(x[b], p[b], aug), atol=2e-5,
                                   rtol=1e-5)


def test_views_differ_per_image():
    """Two copies of one image in the same batch get different crops and colours (a
    batch-level torchvision transform would give them identical views)."""
    aug = build_augment("cifar10")
    img = _batch(1)
    x = img.expand(16, -1, -1, -1).contiguous()
    g = torch.Generator().manual_seed(0)
    p = aug.sample_params(16, 32, 32, g)
    boxes = torch.stack([p.top, p.left, p.height, p.width], 1)
    assert len({tuple(r.tolist()) for r in boxes}) > 12
    v = aug.apply(x, p)
    diffs = (v[:, None] - v[None]).abs().flatten(2).amax(-1)
    off_diag = diffs[~torch.eye(16, dtype=torch.bool)]
    assert (off_diag > 1e-3).all()
    v1, v2_ = aug.two_views(x, torch.Generator().manual_seed(0))
    assert ((v1 - v2_).abs().flatten(1).amax(1) > 1e-3).all()


def test_same_seed_same_views_and_shapes():
    aug = build_augment("cifar100")
    x = _batch(6)
    a = aug(x, torch.Generator().manual_seed(5))
    b = aug(x, torch.Generator().manual_seed(5))
    c = aug(x, torch.Generator().manual_seed(6))
    assert a.shape == (6, 3, 32, 32) and a.dtype == torch.float32
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(3)
    d = aug(x)
    torch.manual_seed(3)
    assert torch.equal(d, aug(x))  # global RNG when no generator is given
    gray = build_augment("digits")(_batch(5, c=1, size=16))
    assert gray.shape == (5, 1, 16, 16)
    up = SimCLRAugment(48, 3)(_batch(2))  # output size differs from the source size
    assert up.shape == (2, 3, 48, 48)


def test_identity_recipe_equals_eval_transform():
    """Full-image crop, no flip/jitter/grey: the view is exactly the normalised image."""
    aug = SimCLRAugment(32, 3, crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip=False,
                        jitter_p=0.0, grayscale_p=0.0, mean=MEAN, std=STD)
    x = _batch(4)
    out = aug(x, torch.Generator().manual_seed(0))
    ev = EvalTransform(MEAN, STD)(x)
    torch.testing.assert_close(out, ev, atol=1e-6, rtol=0)
    expected = (x[1, 2, 3, 4].item() / 255 - MEAN[2]) / STD[2]
    assert ev[1, 2, 3, 4].item() == pytest.approx(expected, abs=1e-6)
    assert torch.equal(EvalTransform()(x), x.float() / 255)


def test_flip_only_mirrors():
    aug = SimCLRAugment(32, 3, crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip=True,
                        jitter_p=0.0, grayscale_p=0.0)
    x = _batch(32)
    p = aug.sample_params(32, 32, 32, torch.Generator().manual_seed(0))
    out = aug.apply(x, p)
    ref = torch.where(p.flip.view(-1, 1, 1, 1), x.flip(-1), x).float() / 255
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)


def test_parameter_distribution_matches_torchvision():
    """Crop area/aspect statistics and the jitter / grey / flip rates agree with
    torchvision's samplers (4,000 draws, tolerances ~5 standard errors)."""
    aug = build_augment("cifar10")
    n = 4000
    p = aug.sample_params(n, 32, 32, torch.Generator().manual_seed(0))
    area = (p.height * p.width).float() / 1024
    assert (p.top >= 0).all() and (p.left >= 0).all()
    assert (p.top + p.height <= 32).all() and (p.left + p.width <= 32).all()
    torch.manual_seed(0)
    img = torch.zeros(3, 32, 32)
    ref = torch.tensor([float(h * w) / 1024 for _, _, h, w in
                        (_tv_crop(img) for _ in range(n))])
    assert abs(area.mean() - ref.mean()) < 0.03
    assert abs(area.std() - ref.std()) < 0.03
    assert abs(p.jitter.float().mean() - 0.8) < 0.03
    assert abs(p.gray.float().mean() - 0.2) < 0.03
    assert abs(p.flip.float().mean() - 0.5) < 0.04
    f = p.factors
    assert f[:, :3].min() >= 0.2 - 1e-6 and f[:, :3].max() <= 1.8 + 1e-6
    assert f[:, 3].abs().max() <= 0.2 + 1e-6
    assert all(sorted(o) == [0, 1, 2, 3] for o in p.order.tolist())
    # every order position is uniformly used (about 1/4 each)
    assert torch.allclose(torch.bincount(p.order[:, 0], minlength=4).float() / n,
                          torch.full((4,), 0.25), atol=0.03)


def _tv_crop(img):
    """One draw of torchvision's RandomResizedCrop parameters (i, j, h, w), defaults."""
    return T.RandomResizedCrop.get_params(img, scale=[0.08, 1.0], ratio=[3 / 4, 4 / 3])


def test_fallback_crop_is_central():
    """Impossible crops (area > 1 with an extreme ratio) fall back to torchvision's
    central crop with the clamped aspect ratio."""
    aug = SimCLRAugment(32, 3, crop_scale=(1.0, 1.0), crop_ratio=(2.0, 2.0))
    p = aug.sample_params(4, 32, 32, torch.Generator().manual_seed(0))
    assert p.width.tolist() == [32] * 4 and p.height.tolist() == [16] * 4
    assert p.top.tolist() == [8] * 4 and p.left.tolist() == [0] * 4


def test_gather_and_masked_jitter_agree():
    """The CPU (gather) and accelerator (whole-batch, masked) jitter paths agree."""
    aug = build_augment("cifar10")
    x = _batch(32).float() / 255
    p = aug.sample_params(32, 32, 32, torch.Generator().manual_seed(4))
    a = aug._jitter(x, p, gather=True)
    b = aug._jitter(x, p, gather=False)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert not torch.equal(a, x)


def test_output_statistics_normalised():
    """Jitter-free views of real digits have roughly zero mean and unit std after
    normalisation with the data set's constants."""
    ds = load_vision("digits", split="train")
    aug = build_augment("digits", crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), jitter_p=0.0)
    v = aug(ds.images, torch.Generator().manual_seed(0))
    assert abs(v.mean().item()) < 0.02 and abs(v.std().item() - 1) < 0.02


def test_bad_arguments():
    with pytest.raises(ValueError, match="RGB"):
        SimCLRAugment(28, 1, jitter=(0.4, 0.4, 0.4, 0.1), grayscale_p=0.0)
    with pytest.raises(ValueError, match="crop_scale"):
        SimCLRAugment(32, 3, crop_scale=(0.5, 0.2))
    with pytest.raises(ValueError, match="channels"):
        SimCLRAugment(32, 2)
    with pytest.raises(ValueError, match="mean/std"):
        SimCLRAugment(32, 3, mean=(0.5,), std=(0.5,))
    with pytest.raises(ValueError, match="unknown augmentation option"):
        build_augment("cifar10", blurr=True)
    with pytest.raises(ValueError, match="valid names"):
        augment_config("svhn")
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        build_augment("cifar10")(_batch(2, c=1))


def test_recipes():
    rgb, gray = augment_config("stl10"), augment_config("mnist5k")
    assert rgb["image_size"] == 96 and rgb["jitter"] == (0.8, 0.8, 0.8, 0.2)
    assert rgb["crop_scale"] == (0.08, 1.0) and not rgb["blur"] and rgb["grayscale_p"] == 0.2
    assert gray["channels"] == 1 and gray["jitter"][2:] == (0.0, 0.0) and not gray["flip"]


def test_reference_path_dataset():
    aug = build_augment("cifar10")
    x = _batch(3)
    ds = PerImageTwoViews(x, torch.arange(3), aug)
    v1, v2_, y = ds[1]
    assert v1.shape == v2_.shape == (3, 32, 32) and v1.dtype == torch.float32 and y == 1
    assert not torch.equal(v1, v2_)
    t = reference_transform(build_augment("mnist5k"))
    assert t(_batch(1, c=1, size=28)[0]).shape == (1, 28, 28)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    aug = build_augment("cifar10", blur=True)
    x = _batch(64)
    p = aug.sample_params(64, 32, 32, torch.Generator().manual_seed(0))
    cpu = aug.apply(x, p)
    gpu = aug.apply(x.cuda(), p.to("cuda"))
    torch.testing.assert_close(gpu.cpu(), cpu, atol=1e-4, rtol=1e-4)
    g = torch.Generator(device="cuda").manual_seed(0)
    assert aug(x.cuda(), g).device.type == "cuda"
