"""How far our batched float32 colour jitter is from the official views' PIL arithmetic.

    python benchmarks/jitter_vs_pil.py [--images 512] [--seed 0]

The official views go through torchvision's PIL path (``ColorJitter`` on PIL images, then
``ToTensor``): brightness, contrast and saturation are PIL ``ImageEnhance`` blends rounded
to 8 bits after each op, and hue is an integer shift of the H channel in PIL's 8-bit HSV
(``uint8(hue_factor * 255)``, so a factor below 1/255 in size shifts nothing). Ours
(``weince.data.augment``) runs the same definitions in float32 on the batch, unrounded.
For the same parameters, this prints per op and factor the largest and the mean absolute
per-pixel difference, in units of 1/255, between our output and the PIL output of the same
uint8 image, then the same for the four ops chained in one order. Images: random 32 x 32
crops of scikit-learn's two sample photographs (natural colours, no download).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from PIL import Image
from sklearn.datasets import load_sample_images
from torchvision.transforms import functional as F

from weince.data.augment import _blend_ops, _hue

OPS = {0: "brightness", 1: "contrast", 2: "saturation", 3: "hue"}
PIL_OPS = {0: F.adjust_brightness, 1: F.adjust_contrast, 2: F.adjust_saturation,
           3: F.adjust_hue}


def crops(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    photos = load_sample_images().images
    out = np.empty((n, 32, 32, 3), np.uint8)
    for i in range(n):
        p = photos[i % len(photos)]
        y, x = rng.integers(0, p.shape[0] - 32), rng.integers(0, p.shape[1] - 32)
        out[i] = p[y:y + 32, x:x + 32]
    return out


def ours(x: torch.Tensor, op: int, f: float) -> torch.Tensor:
    b = x.shape[0]
    if op == 3:
        return _hue(x, torch.full((b,), f))
    return _blend_ops(x, torch.full((b,), op), torch.full((b,), f))


def pil(imgs: list[Image.Image], op: int, f: float) -> list[Image.Image]:
    return [PIL_OPS[op](im, f) for im in imgs]


def to_tensor(imgs: list[Image.Image]) -> torch.Tensor:
    return torch.from_numpy(np.stack([np.asarray(im) for im in imgs])).permute(0, 3, 1, 2
                                                                               ).float() / 255


def report(name: str, a: torch.Tensor, b: torch.Tensor) -> None:
    d = (a - b).abs() * 255
    print(f"{name:<34} max {d.max().item():6.2f}/255   mean {d.mean().item():6.3f}/255   "
          f"pixels > 1/255: {100 * (d > 1.0001).float().mean().item():5.2f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    u8 = crops(args.images, args.seed)
    imgs = [Image.fromarray(a) for a in u8]
    x = torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255
    print(f"{args.images} images 32 x 32; |ours (float32) - official (PIL, 8-bit)| per pixel "
          f"and channel")
    grid = {0: (0.2, 0.6, 1.4, 1.8), 1: (0.2, 0.6, 1.4, 1.8), 2: (0.2, 0.6, 1.4, 1.8),
            3: (-0.2, -0.1, -0.02, 0.003, 0.02, 0.1, 0.2)}
    for op, factors in grid.items():
        for f in factors:
            report(f"{OPS[op]} {f:+g}", ours(x, op, f), to_tensor(pil(imgs, op, f)))
    # the four ops chained (one of ColorJitter's 24 orders), PIL rounding after each
    chain = ((0, 1.3), (1, 0.7), (2, 1.5), (3, 0.1))
    a, p = x, imgs
    for op, f in chain:
        a, p = ours(a, op, f), pil(p, op, f)
    report("chain b 1.3, c 0.7, s 1.5, h +0.1", a, to_tensor(p))
    a, p = x, imgs
    for op, f in chain[:3]:
        a, p = ours(a, op, f), pil(p, op, f)
    report("chain b 1.3, c 0.7, s 1.5 (no hue)", a, to_tensor(p))


if __name__ == "__main__":
    main()
