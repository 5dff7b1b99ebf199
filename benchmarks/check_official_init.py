"""Are our initial SimCLR weights, at an encoder seed, the official ones bit for bit?

    git --git-dir <mirror of hsme98/weince> archive HEAD | tar x -C /tmp/official
    python benchmarks/check_official_init.py --official /tmp/official [--seeds 7 21 63 84]

Builds the official model the way ``main_hard_select.py`` does after
``torch.manual_seed(seed)`` (nothing between the seed and the model draws random numbers:
the data set, the transforms and the DataLoader are only constructed):
``simclr.modules.get_resnet_adaptable(resnet, dataset)`` (torchvision's ResNet, then the
CIFAR stem: a new 3x3 ``conv1``, no max-pool) and ``simclr.SimCLR(encoder, 64, n_features)``
(bias-free Linear-ReLU-Linear head), imported from the given checkout, and ours as
``weince.train.simclr`` builds it (``torch.manual_seed(seed)``, then
``build_simclr_model``). Compares every parameter and buffer in order with
``torch.equal``. Prints one line per (seed, backbone) and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from weince.models.vision import build_simclr_model


def official(repo: Path, resnet: str, dataset: str, seed: int) -> list[torch.Tensor]:
    sys.path.insert(0, str(repo))
    try:
        # the official repository, on sys.path only now (its checkout is the argument)
        from simclr.modules.resnet import get_resnet_adaptable  # noqa: PLC0415
        from simclr.simclr import SimCLR  # noqa: PLC0415
    finally:
        sys.path.remove(str(repo))
    torch.manual_seed(seed)
    enc = get_resnet_adaptable(resnet, dataset, pretrained=False)
    model = SimCLR(enc, 64, enc.fc.in_features)
    return list(model.state_dict().values())


def ours(resnet: str, seed: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    model = build_simclr_model(resnet, 32, 3, hidden_dim=None, out_dim=64)
    return list(model.state_dict().values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official", type=Path, required=True,
                    help="a checkout of hsme98/weince (the folder holding simclr/)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 21, 63, 84])
    ap.add_argument("--backbones", nargs="+", default=["resnet18", "resnet50"])
    args = ap.parse_args()
    bad = 0
    for resnet in args.backbones:
        for seed in args.seeds:
            a, b = official(args.official, resnet, "cifar100", seed), ours(resnet, seed)
            shapes = [tuple(t.shape) for t in a] == [tuple(t.shape) for t in b]
            equal = shapes and all(torch.equal(x, y) for x, y in zip(a, b))
            diff = 0.0 if not shapes else max(
                (x.double() - y.double()).abs().max().item() for x, y in zip(a, b)
                if x.is_floating_point())
            print(f"{resnet} seed {seed}: {len(a)} tensors, shapes "
                  f"{'match' if shapes else 'DIFFER'}, bit for bit "
                  f"{'equal' if equal else 'NOT equal'} (largest |diff| {diff:.3g})")
            bad += not equal
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
