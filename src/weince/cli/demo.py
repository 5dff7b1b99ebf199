"""A small demo of the losses: ``weince demo``.

Builds two noisy views of random embeddings, evaluates InfoNCE, WEINCE and the recipe,
prints WEINCE's per-anchor statistics, and checks that ``lambda = 0`` gives InfoNCE.
"""

from __future__ import annotations

import argparse

import torch

from weince.losses import LOSSES, build_loss, info_nce, pair_similarities, weince


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, default=256,
                   help="N, random items per view; the similarity matrix has 2N rows and each "
                        "anchor K = 2N - 2 negatives (default %(default)s)")
    p.add_argument("--dim", type=int, default=64,
                   help="embedding dimension (default %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random embeddings (default %(default)s)")


def main(args: argparse.Namespace) -> int:
    g = torch.Generator().manual_seed(args.seed)
    base = torch.randn(args.n, args.dim, generator=g)
    z1 = base + 0.7 * torch.randn(args.n, args.dim, generator=g)
    z2 = base + 0.7 * torch.randn(args.n, args.dim, generator=g)
    for name in sorted(LOSSES):
        print(f"{name:>22s}: {float(build_loss(name, tau=0.5)(z1, z2)):.4f}")
    sim, t, m = pair_similarities(z1, z2, "simclr")
    _, st = weince(sim, t, m, tau=0.5, return_stats=True)
    lam = st["lambda"]
    print(f"WEINCE statistics: K = {sim.shape[1] - 2}, k = {st['k']}, n = {st['n']}, "
          f"rho0 = {float(st['rho0']):.4f}")
    print(f"  lambda mean {float(lam.mean()):.3f}, quantiles 10/50/90%: "
          + ", ".join(f"{float(v):.3f}"
                      for v in torch.quantile(lam, torch.tensor([0.1, 0.5, 0.9]))))
    same = torch.allclose(weince(sim, t, m, lam=0.0), info_nce(sim, t, m), rtol=1e-6)
    print(f"lambda = 0 equals InfoNCE: {same}")
    return 0 if same else 1
