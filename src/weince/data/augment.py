"""SimCLR two-view augmentation on whole uint8 batches, per-image random parameters,
on any device.

    from weince.data.augment import build_augment
    aug = build_augment("cifar100")               # official SimCLR recipe, CIFAR stats
    v1, v2 = aug.two_views(x_uint8.cuda())        # (B, 3, 32, 32) float, normalised

Why not torchvision: ``transforms.v2`` applied to a batch tensor draws *one* crop / jitter
parameter set for the whole batch, which is wrong for SimCLR (every image needs its own
views), and applying it image by image in a ``DataLoader`` makes a fast GPU loader-bound.
:class:`SimCLRAugment` draws every parameter per image in one RNG call and applies each
operation to the whole batch as tensor algebra:

- random resized crop + horizontal flip: resampling written as two batched matrix
  products ``R_y @ x @ R_x^T`` with per-image interpolation matrices, which reproduce the
  resize torchvision applies (``interpolate(crop, bilinear, align_corners=False,
  antialias=True)``): plain bilinear with edge clamping inside the crop box when the crop
  is upsampled, antialiased when it is downsampled.
- colour jitter: brightness, contrast, saturation, hue as in torchvision's ``ColorJitter``
  (factors ``U[max(0, 1 - s), 1 + s]``, hue ``U[-h, h]``, a random order of the four per
  image), applied with probability ``jitter_p``;
- random greyscale (ITU-R 601-2 luma, as torchvision), probability ``grayscale_p``;
- optional Gaussian blur (reflect padding, kernel about 10% of the image, per-image
  sigma), as a per-image separable blur matrix;
- normalisation with the data set's mean/std.

Default recipe (:func:`augment_config`): the official WEINCE code (a fork of the Spijkervet
SimCLR code) uses ``RandomResizedCrop(size)`` (scale 0.08-1, ratio 3/4-4/3), flip,
``ColorJitter(0.8, 0.8, 0.8, 0.2)`` with p = 0.8, greyscale p = 0.2, and no blur; we keep
those for every RGB set. For the grey-scale sets (digits, mnist5k) we drop hue,
saturation, greyscale and the flip (a mirrored digit is another glyph) and crop with
scale 0.3-1 (an 8% crop of a 16 px digit is a few original pixels), jitter (0.4, 0.4).
Unlike the official code (``ToTensor`` only) views are normalised with the data set's
mean/std; pass ``mean=None`` to get [0, 1] images instead.

:func:`reference_transform` builds the same recipe from torchvision ``transforms.v2``
ops for the per-image CPU path (:class:`PerImageTwoViews`), used by the tests and by
``benchmarks/bench_augment.py``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch

from weince.data.vision import DATASETS
from weince.utils.device import resolve_device

__all__ = ["SimCLRAugment", "AugmentParams", "EvalTransform", "augment_config",
           "build_augment", "reference_transform", "PerImageTwoViews"]

_N_ATTEMPTS = 10  # RandomResizedCrop tries, as torchvision
_LUMA = (0.2989, 0.587, 0.114)


@dataclass
class AugmentParams:
    """Per-image random parameters of one :class:`SimCLRAugment` call (all ``(B, ...)``).

    ``top, left, height, width``: crop box in source pixels (int64); ``flip``: bool;
    ``jitter``: bool (jitter applied); ``factors``: ``(B, 4)`` brightness, contrast,
    saturation factors and hue shift; ``order``: ``(B, 4)`` a permutation of
    ``0..3`` (the op applied at each position); ``gray``, ``blur``: bool; ``sigma``: float.
    """

    top: torch.Tensor
    left: torch.Tensor
    height: torch.Tensor
    width: torch.Tensor
    flip: torch.Tensor
    jitter: torch.Tensor
    factors: torch.Tensor
    order: torch.Tensor
    gray: torch.Tensor
    blur: torch.Tensor
    sigma: torch.Tensor

    def to(self, device: torch.device | str) -> AugmentParams:
        return AugmentParams(**{k: v.to(device) for k, v in self.__dict__.items()})

    def __getitem__(self, b: int) -> dict[str, Any]:
        """The parameters of image ``b`` as Python scalars (for reference checks)."""
        out = {k: v[b].tolist() for k, v in self.__dict__.items()}
        return out


@lru_cache(maxsize=64)
def _const(values: tuple[float, ...], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """A small constant tensor, made once per device (no host-to-device copy per call)."""
    return torch.tensor(values, device=device, dtype=dtype)


def _pair(v: Sequence[float], name: str) -> tuple[float, float]:
    v = tuple(float(a) for a in v)
    if len(v) != 2 or not v[0] <= v[1]:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {v}")
    return v


def _gray(x: torch.Tensor) -> torch.Tensor:
    """Luma ``(B, 1, H, W)`` of ``(B, C, H, W)`` float images (C = 1 returns x)."""
    if x.shape[1] == 1:
        return x
    w = _const(_LUMA, x.device, x.dtype).view(1, 3, 1, 1)
    return (x * w).sum(dim=1, keepdim=True)


def _blend_ops(x: torch.Tensor, op: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Brightness (op 0), contrast (1) or saturation (2), chosen per image, in one pass:
    each is ``clamp(f * x + (1 - f) * other)`` with ``other`` = black, the mean luma, or
    the luma image (torchvision's definitions). ``f = 1`` leaves an image exactly as is."""
    g = _gray(x)
    m = g.mean(dim=(1, 2, 3), keepdim=True)
    opv = op.view(-1, 1, 1, 1)
    other = torch.where(opv == 2, g, torch.where(opv == 1, m, torch.zeros_like(m)))
    return torch.lerp(other, x, f.view(-1, 1, 1, 1).to(x.dtype)).clamp_(0.0, 1.0)


def _hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rotate the HSV hue of RGB images in [0, 1] by ``shift`` (fraction of a turn), as
    torchvision's ``adjust_hue``. Uses the closed form of HSV -> RGB,
    ``c_n = V - C * clamp(min(k_n, 4 - k_n), 0, 1)`` with chroma ``C = V - min``,
    ``k_n = (n + 6 H) mod 6`` and ``n = 5, 3, 1`` for R, G, B (no sector gather)."""
    r, g, b = x.unbind(1)
    maxc = x.amax(dim=1)
    chroma = maxc - x.amin(dim=1)
    div = torch.where(chroma > 0, chroma, torch.ones_like(chroma))
    h6 = torch.where(maxc == r, (g - b) / div,
                     torch.where(maxc == g, 2.0 + (b - r) / div, 4.0 + (r - g) / div))
    h6 = torch.where(chroma > 0, h6, torch.zeros_like(h6))
    h6 = torch.remainder(h6 + 6.0 * shift.view(-1, 1, 1), 6.0)  # hue in sextants, [0, 6)
    n = _const((5.0, 3.0, 1.0), x.device, x.dtype).view(1, 3, 1, 1)
    k = torch.remainder(n + h6.unsqueeze(1), 6.0)
    w = torch.minimum(k, 4.0 - k).clamp_(0.0, 1.0)
    return maxc.unsqueeze(1) - chroma.unsqueeze(1) * w




def _resize_matrix(start: torch.Tensor, length: torch.Tensor, in_size: int, out_size: int,
                   ) -> torch.Tensor:
    """Per-image resampling matrices ``(B, out_size, in_size)``: row ``u`` holds the weights
    that ``interpolate(crop, mode='bilinear', align_corners=False, antialias=True)`` (the
    resize of torchvision's ``RandomResizedCrop``) gives output pixel ``u`` of the crop
    ``[start, start + length)`` resized to ``out_size``.

    Triangle filter of support ``max(scale, 1)`` around ``center = scale * (u + 0.5)``,
    ``scale = length / out_size``, renormalised over the pixels inside the crop: plain
    bilinear (edge-clamped) when upsampling, antialiased when downsampling."""
    dtype = torch.float32
    dev = start.device
    u = torch.arange(out_size, device=dev, dtype=dtype).view(1, -1, 1)
    t = torch.arange(in_size, device=dev, dtype=dtype).view(1, 1, -1)
    n = length.to(dtype).view(-1, 1, 1)
    scale = n / out_size
    inv = torch.where(scale > 1.0, 1.0 / scale, torch.ones_like(scale))
    rel = t - start.to(dtype).view(-1, 1, 1)  # position inside the crop
    w = (1.0 - ((rel + 0.5 - scale * (u + 0.5)) * inv).abs()).clamp_(min=0.0)
    w = w * ((rel >= 0) & (rel < n))
    return w / w.sum(dim=2, keepdim=True)


def _separable(x: torch.Tensor, my: torch.Tensor, mx: torch.Tensor) -> torch.Tensor:
    """``my @ x[b, c] @ mx^T`` for every image and channel: ``x`` ``(B, C, H, W)``,
    ``my`` ``(B, S, H)``, ``mx`` ``(B, T, W)`` -> ``(B, C, S, T)``, as two plain ``bmm``
    (no broadcast copies of the matrices over channels)."""
    bsz, c, h, w = x.shape
    s, t = my.shape[1], mx.shape[1]
    y = torch.bmm(my, x.transpose(1, 2).reshape(bsz, h, c * w))  # (B, S, C*W)
    y = torch.bmm(y.view(bsz, s * c, w), mx.transpose(1, 2))  # (B, S*C, T)
    return y.view(bsz, s, c, t).transpose(1, 2).contiguous()


def _blur_matrix(sigma: torch.Tensor, enabled: torch.Tensor, size: int, ksize: int
                 ) -> torch.Tensor:
    """Per-image 1-D Gaussian blur matrices ``(B, size, size)`` with reflect padding
    (torchvision ``gaussian_blur``); the identity where ``enabled`` is False."""
    r = ksize // 2
    dev = sigma.device
    t = torch.arange(-r, r + 1, device=dev, dtype=torch.float32)
    w = torch.exp(-0.5 * (t / sigma.unsqueeze(1)) ** 2)
    w = w / w.sum(dim=1, keepdim=True)
    ident = torch.zeros_like(w)
    ident[:, r] = 1.0
    w = torch.where(enabled.unsqueeze(1), w, ident)  # (B, ksize)
    p = torch.arange(size, device=dev)
    cols = p.unsqueeze(1) + t.long().unsqueeze(0)  # (size, ksize)
    cols = cols.abs()
    cols = torch.where(cols > size - 1, 2 * (size - 1) - cols, cols)
    m = torch.zeros(sigma.shape[0], size, size, device=dev, dtype=torch.float32)
    m.scatter_add_(2, cols.unsqueeze(0).expand(sigma.shape[0], -1, -1).contiguous(),
                   w.unsqueeze(1).expand(-1, size, -1).contiguous())
    return m


class SimCLRAugment:
    """Batched SimCLR augmentation with per-image random parameters.

    Args:
        image_size: output side ``S`` (views are ``S x S``).
        channels: 3 (RGB) or 1 (grey); saturation, hue and greyscale need RGB.
        crop_scale: area fraction range of the random resized crop.
        crop_ratio: aspect-ratio range of the crop (sampled log-uniformly).
        flip: horizontal flip with probability 0.5.
        jitter: ``(brightness, contrast, saturation, hue)`` strengths (0 disables one).
        jitter_p: probability that colour jitter is applied to an image.
        grayscale_p: probability of converting an RGB image to greyscale (3 channels).
        blur: Gaussian blur with probability ``blur_p``, sigma ``U(blur_sigma)``, kernel
            ``~0.1 * image_size`` (odd, at least 3).
        mean, std: per-channel normalisation; ``None`` leaves views in [0, 1].

    ``aug(x, generator=None)`` maps uint8 (or [0, 1] float) ``(B, C, H, W)`` on any device
    to float32 ``(B, C, S, S)`` on the same device; ``generator`` (CPU or CUDA
    ``torch.Generator``) makes the draw reproducible; without it the global RNG of
    ``x``'s device is used.
    """

    def __init__(self, image_size: int, channels: int = 3, *,
                 crop_scale: Sequence[float] = (0.08, 1.0),
                 crop_ratio: Sequence[float] = (3 / 4, 4 / 3), flip: bool = True,
                 jitter: Sequence[float] = (0.8, 0.8, 0.8, 0.2), jitter_p: float = 0.8,
                 grayscale_p: float = 0.2, blur: bool = False, blur_p: float = 0.5,
                 blur_sigma: Sequence[float] = (0.1, 2.0),
                 mean: Sequence[float] | None = None, std: Sequence[float] | None = None):
        if int(image_size) < 2:
            raise ValueError(f"image_size must be >= 2, got {image_size}")
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 or 3, got {channels}")
        self.image_size = int(image_size)
        self.channels = int(channels)
        self.crop_scale = _pair(crop_scale, "crop_scale")
        if not 0 < self.crop_scale[0] <= 1 or self.crop_scale[1] > 1:
            raise ValueError(f"crop_scale must lie in (0, 1], got {self.crop_scale}")
        self.crop_ratio = _pair(crop_ratio, "crop_ratio")
        if self.crop_ratio[0] <= 0:
            raise ValueError(f"crop_ratio must be positive, got {self.crop_ratio}")
        self.flip = bool(flip)
        jitter = tuple(float(j) for j in jitter)
        if len(jitter) != 4 or min(jitter) < 0 or jitter[3] > 0.5:
            raise ValueError("jitter must be (brightness, contrast, saturation, hue) >= 0 "
                             f"with hue <= 0.5, got {jitter}")
        if channels == 1 and (jitter[2] > 0 or jitter[3] > 0 or grayscale_p > 0):
            raise ValueError("saturation, hue and grayscale_p need RGB images; set them to 0 "
                             "for channels=1 (see augment_config('mnist5k'))")
        self.jitter = jitter
        for name, p in (("jitter_p", jitter_p), ("grayscale_p", grayscale_p),
                        ("blur_p", blur_p)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {p}")
        self.jitter_p, self.grayscale_p = float(jitter_p), float(grayscale_p)
        self.blur, self.blur_p = bool(blur), float(blur_p)
        self.blur_sigma = _pair(blur_sigma, "blur_sigma")
        self.blur_kernel = max(3, int(0.1 * self.image_size) // 2 * 2 + 1)
        if (mean is None) != (std is None):
            raise ValueError("give both mean and std, or neither")
        if mean is not None and std is not None:
            mean, std = tuple(float(m) for m in mean), tuple(float(s) for s in std)
            if len(mean) != channels or len(std) != channels or min(std) <= 0:
                raise ValueError(f"mean/std need {channels} entries (std > 0), got {mean}, {std}")
        self.mean, self.std = mean, std

    def config(self) -> dict[str, Any]:
        """Constructor arguments (JSON-able), e.g. for provenance."""
        return dict(image_size=self.image_size, channels=self.channels,
                    crop_scale=self.crop_scale, crop_ratio=self.crop_ratio, flip=self.flip,
                    jitter=self.jitter, jitter_p=self.jitter_p, grayscale_p=self.grayscale_p,
                    blur=self.blur, blur_p=self.blur_p, blur_sigma=self.blur_sigma,
                    mean=self.mean, std=self.std)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.config().items())
        return f"SimCLRAugment({args})"

    # ------------------------------------------------------------------ sampling
    def sample_params(self, batch: int, height: int, width: int,
                      generator: torch.Generator | None = None,
                      device: torch.device | str = "cpu",
                      u: torch.Tensor | None = None) -> AugmentParams:
        """Draw every image's parameters with one ``torch.rand`` call (on the generator's
        device if a generator is given, else on ``device``); ``u``: that draw, made
        beforehand by :meth:`draw` (a compiled training step takes it as an input)."""
        a = _N_ATTEMPTS
        if u is None:
            u = self.draw(batch, generator, device)
        dev = u.device
        u_area, u_ratio = u[:, :a], u[:, a:2 * a]
        u_top, u_left = u[:, 2 * a:3 * a], u[:, 3 * a:4 * a]
        rest = u[:, 4 * a:]
        # --- random resized crop (torchvision's algorithm, vectorised over attempts)
        area = float(height * width)
        s0, s1 = self.crop_scale
        target = area * (s0 + (s1 - s0) * u_area)
        lr0, lr1 = math.log(self.crop_ratio[0]), math.log(self.crop_ratio[1])
        aspect = torch.exp(lr0 + (lr1 - lr0) * u_ratio)
        w = torch.round(torch.sqrt(target * aspect))
        h = torch.round(torch.sqrt(target / aspect))
        ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
        first = torch.where(ok.any(dim=1), ok.float().argmax(dim=1),
                            torch.full((batch,), -1, device=dev, dtype=torch.long))
        # fallback: central crop with the aspect ratio clamped to the allowed range
        in_ratio = width / height
        if in_ratio < self.crop_ratio[0]:
            fw, fh = width, int(round(width / self.crop_ratio[0]))
        elif in_ratio > self.crop_ratio[1]:
            fh, fw = height, int(round(height * self.crop_ratio[1]))
        else:
            fw, fh = width, height
        pick = first.clamp(min=0).unsqueeze(1)
        hh = h.gather(1, pick).squeeze(1)
        ww = w.gather(1, pick).squeeze(1)
        top = torch.floor(u_top.gather(1, pick).squeeze(1) * (height - hh + 1))
        left = torch.floor(u_left.gather(1, pick).squeeze(1) * (width - ww + 1))
        fb = first < 0
        hh = torch.where(fb, torch.full_like(hh, fh), hh)
        ww = torch.where(fb, torch.full_like(ww, fw), ww)
        top = torch.where(fb, torch.full_like(top, (height - fh) // 2), top)
        left = torch.where(fb, torch.full_like(left, (width - fw) // 2), left)
        # --- flip, jitter, greyscale, blur
        flip = (rest[:, 0] < 0.5) & self.flip
        jit_on = rest[:, 1] < self.jitter_p
        factors = torch.empty(batch, 4, device=dev)
        for k in range(3):
            lo, hi = max(0.0, 1.0 - self.jitter[k]), 1.0 + self.jitter[k]
            factors[:, k] = lo + (hi - lo) * rest[:, 2 + k]
        factors[:, 3] = self.jitter[3] * (2.0 * rest[:, 5] - 1.0)
        order = torch.argsort(rest[:, 6:10], dim=1)
        gray = (rest[:, 10] < self.grayscale_p) & (self.channels == 3)
        blur_on = (rest[:, 11] < self.blur_p) & self.blur
        sigma = self.blur_sigma[0] + (self.blur_sigma[1] - self.blur_sigma[0]) * rest[:, 12]
        return AugmentParams(top.long(), left.long(), hh.long(), ww.long(), flip, jit_on,
                             factors, order, gray, blur_on, sigma)

    @staticmethod
    def draw(batch: int, generator: torch.Generator | None = None,
             device: torch.device | str = "cpu") -> torch.Tensor:
        """The uniforms that :meth:`sample_params` turns into ``batch`` images' parameters."""
        # a torch.device (the images' own) is used as is: only a config string is resolved
        dev = (generator.device if generator is not None
               else device if isinstance(device, torch.device) else resolve_device(device))
        return torch.rand(batch, 4 * _N_ATTEMPTS + 13, generator=generator, device=dev)

    # ------------------------------------------------------------------ applying
    def apply(self, x: torch.Tensor, p: AugmentParams) -> torch.Tensor:
        """Apply given parameters to ``x`` (uint8, or float in [0, 1]) ``(B, C, H, W)``."""
        if x.ndim != 4 or x.shape[1] != self.channels:
            raise ValueError(f"expected (B, {self.channels}, H, W) images, got {tuple(x.shape)}")
        p = p.to(x.device)
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        bsz, _, height, width = x.shape
        s = self.image_size
        ry = _resize_matrix(p.top, p.height, height, s)
        rx = _resize_matrix(p.left, p.width, width, s)
        rx = torch.where(p.flip.view(-1, 1, 1), rx.flip(1), rx)
        x = _separable(x, ry, rx)
        x = x.clamp_(0.0, 1.0)  # bilinear weights are convex; clamp only float round-off
        if any(j > 0 for j in self.jitter) and self.jitter_p > 0:
            x = self._jitter(x, p)
        if self.channels == 3 and self.grayscale_p > 0:
            x = torch.where(p.gray.view(-1, 1, 1, 1), _gray(x).expand(-1, 3, -1, -1), x)
        if self.blur:
            g = _blur_matrix(p.sigma, p.blur, s, self.blur_kernel)
            x = _separable(x, g, g)
        if self.mean is not None:
            mean = _const(self.mean, x.device, x.dtype).view(1, -1, 1, 1)
            std = _const(self.std, x.device, x.dtype).view(1, -1, 1, 1)
            x = (x - mean) / std
        return x.contiguous()

    def _jitter(self, x: torch.Tensor, p: AugmentParams, gather: bool | None = None
                ) -> torch.Tensor:
        """Colour jitter in each image's own op order (torchvision ``ColorJitter``). At
        each of the 4 positions, the blend ops (brightness / contrast / saturation) run in
        one pass over the batch with factor 1 for images not using one there; the hue
        rotation runs on the images that use it: gathered (``gather=True``, default on CPU:
        no wasted work) or on the whole batch and selected (no host synchronisation:
        better on accelerators)."""
        if gather is None:  # (a compiled graph cannot branch on the gathered count)
            gather = x.device.type == "cpu" and not torch.compiler.is_compiling()
        strength = _const(self.jitter, x.device, torch.float32)
        use_hue = self.jitter[3] > 0
        for pos in range(4):
            op = p.order[:, pos]
            blend = p.jitter & (op < 3) & (strength[op.clamp(max=2)] > 0)
            f = torch.where(blend, p.factors.gather(1, op.clamp(max=2).unsqueeze(1)).squeeze(1),
                            torch.ones_like(p.factors[:, 0]))
            x = _blend_ops(x, op, f)
            if not use_hue:
                continue
            hue = p.jitter & (op == 3)
            if gather:
                idx = torch.nonzero(hue).squeeze(1)
                if idx.numel():
                    x[idx] = _hue(x[idx], p.factors[idx, 3])
            else:
                x = torch.where(hue.view(-1, 1, 1, 1), _hue(x, p.factors[:, 3]), x)
        return x

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None
                 ) -> torch.Tensor:
        """One augmented view per image: ``(B, C, H, W)`` -> float ``(B, C, S, S)``."""
        if x.ndim != 4:
            raise ValueError(f"expected a batch (B, C, H, W), got shape {tuple(x.shape)}")
        params = self.sample_params(x.shape[0], x.shape[2], x.shape[3], generator, x.device)
        return self.apply(x, params)

    def two_views(self, x: torch.Tensor, generator: torch.Generator | None = None,
                  u: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Two independent views ``(v1, v2)`` of every image of the batch, made in one
        pass over the doubled batch (half the kernel launches of two calls). ``u``: the
        uniforms of :meth:`draw` for ``2 B`` images, instead of drawing them here."""
        if u is not None:
            xx = torch.cat([x, x])
            v = self.apply(xx, self.sample_params(xx.shape[0], xx.shape[2], xx.shape[3], u=u))
            return v[: x.shape[0]], v[x.shape[0]:]
        v = self(torch.cat([x, x]), generator)
        return v[: x.shape[0]], v[x.shape[0]:]


class EvalTransform:
    """Evaluation transform: uint8 ``(B, C, H, W)`` -> float, scaled to [0, 1] and
    normalised with ``mean``/``std`` (``None``: no normalisation). No resizing."""

    def __init__(self, mean: Sequence[float] | None = None, std: Sequence[float] | None = None):
        if (mean is None) != (std is None):
            raise ValueError("give both mean and std, or neither")
        self.mean = None if mean is None else tuple(float(m) for m in mean)
        self.std = None if std is None else tuple(float(s) for s in std)
        if self.std is not None and self.mean is not None and (
                len(self.std) != len(self.mean) or min(self.std) <= 0):
            raise ValueError(f"mean/std must have equal length and std > 0: {mean}, {std}")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        if self.mean is None:
            return x
        if x.shape[1] != len(self.mean):
            raise ValueError(f"{x.shape[1]} channels but mean/std have {len(self.mean)}")
        mean = _const(self.mean, x.device, x.dtype).view(1, -1, 1, 1)
        std = _const(self.std, x.device, x.dtype).view(1, -1, 1, 1)
        return (x - mean) / std


# ---------------------------------------------------------------------- recipes
_GRAY_RECIPE = dict(crop_scale=(0.3, 1.0), flip=False, jitter=(0.4, 0.4, 0.0, 0.0),
                    jitter_p=0.8, grayscale_p=0.0, blur=False)
_RGB_RECIPE = dict(crop_scale=(0.08, 1.0), flip=True, jitter=(0.8, 0.8, 0.8, 0.2),
                   jitter_p=0.8, grayscale_p=0.2, blur=False)


def augment_config(name: str) -> dict[str, Any]:
    """The default :class:`SimCLRAugment` arguments for a registered data set (see the
    module docstring for the choices), including its image size, channels, mean and std."""
    key = name.lower()
    if key not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASETS)}")
    spec = DATASETS[key]
    recipe = _GRAY_RECIPE if spec.channels == 1 else _RGB_RECIPE
    return dict(image_size=spec.image_size, channels=spec.channels, **recipe,
                mean=spec.mean, std=spec.std)


def build_augment(name: str, **overrides: Any) -> SimCLRAugment:
    """``SimCLRAugment(**augment_config(name))`` with keyword overrides (unknown keys
    raise ``ValueError``)."""
    cfg = augment_config(name)
    valid = set(inspect.signature(SimCLRAugment.__init__).parameters) - {"self"}
    bad = sorted(set(overrides) - valid)
    if bad:
        raise ValueError(f"unknown augmentation option(s) {bad}; valid: {sorted(valid)}")
    cfg.update(overrides)
    return SimCLRAugment(**cfg)


# ---------------------------------------------------------------------- per-image path
def reference_transform(aug: SimCLRAugment):
    """The same recipe as torchvision ``transforms.v2`` ops, for one uint8 ``(C, H, W)``
    image at a time (the classic CPU ``DataLoader`` path; antialiased resize)."""
    # here, not at the top: any torchvision import loads its models and ops, and with them
    # torch._dynamo (seconds of CPU), which a job that augments on tensors never needs
    from torchvision.transforms import v2  # noqa: PLC0415 - seconds of imports, tests/benchmarks only

    ops: list[Any] = [v2.RandomResizedCrop(aug.image_size, scale=aug.crop_scale,
                                           ratio=aug.crop_ratio, antialias=True)]
    if aug.flip:
        ops.append(v2.RandomHorizontalFlip())
    if any(j > 0 for j in aug.jitter) and aug.jitter_p > 0:
        b, c, s, h = aug.jitter
        ops.append(v2.RandomApply([v2.ColorJitter(b or None, c or None, s or None, h or None)],
                                  p=aug.jitter_p))
    if aug.channels == 3 and aug.grayscale_p > 0:
        ops.append(v2.RandomGrayscale(p=aug.grayscale_p))
    if aug.blur:
        ops.append(v2.RandomApply([v2.GaussianBlur(aug.blur_kernel, sigma=aug.blur_sigma)],
                                  p=aug.blur_p))
    ops.append(v2.ToDtype(torch.float32, scale=True))
    if aug.mean is not None:
        ops.append(v2.Normalize(aug.mean, aug.std))
    return v2.Compose(ops)


class PerImageTwoViews(torch.utils.data.Dataset):
    """Map-style data set giving ``(v1, v2, label)`` with views made image by image by
    ``transform`` (default :func:`reference_transform` of ``aug``) — the per-image CPU
    reference path, for a ``DataLoader`` with workers."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, aug: SimCLRAugment,
                 transform=None):
        if images.dtype != torch.uint8 or images.ndim != 4:
            raise ValueError("images must be uint8 (N, C, H, W)")
        self.images, self.labels = images, labels
        self.transform = transform if transform is not None else reference_transform(aug)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def __getitem__(self, i: int):
        img = self.images[i]
        return self.transform(img), self.transform(img), self.labels[i]
