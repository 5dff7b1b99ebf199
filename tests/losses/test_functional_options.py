"""Options of the functional losses beyond the paper's: a pivot ``rho0`` given from outside."""

import pytest
import torch

from weince.losses import info_nce, pair_similarities, weince, weince_statistics


def _batch(seed: int = 0, n: int = 48):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, 16, generator=g)
    return pair_similarities(z1, z1 + 0.4 * torch.randn(n, 16, generator=g))


def test_rho0_given_equal_to_the_batch_pivot_changes_nothing():
    sim, targets, mask = _batch()
    loss, st = weince(sim, targets, mask, return_stats=True)
    for given in (st["rho0"], float(st["rho0"])):
        loss2, st2 = weince(sim, targets, mask, return_stats=True, rho0=given)
        assert torch.equal(loss2, loss)
        assert torch.equal(st2["lambda"], st["lambda"])


def test_rho0_given_moves_the_gate_and_is_returned():
    sim, targets, mask = _batch(1)
    st = weince_statistics(sim, targets, mask)
    lo, hi = float(st["rho"].min()) / 2, float(st["rho"].max()) * 2
    _, st_lo = weince(sim, targets, mask, return_stats=True, rho0=lo)
    _, st_hi = weince(sim, targets, mask, return_stats=True, rho0=hi)
    assert float(st_lo["rho0"]) == torch.tensor(lo).item()
    # a larger pivot opens the proximity gate of every row
    assert bool((st_hi["lambda"] > st_lo["lambda"]).all())
    _, st_tiny = weince(sim, targets, mask, return_stats=True, rho0=0.0)
    assert float(st_tiny["rho0"]) == torch.tensor(1e-6, dtype=torch.float64).float().item()


def test_reduction_and_weight():
    sim, targets, mask = _batch(2)
    for fn in (weince, info_nce):
        mean = fn(sim, targets, mask)
        rows = fn(sim, targets, mask, reduction="none")
        assert rows.shape == (sim.shape[0],)
        torch.testing.assert_close(rows.mean(), mean, rtol=1e-6, atol=0)
        torch.testing.assert_close(fn(sim, targets, mask, reduction="sum"), rows.sum())
        w = torch.rand(sim.shape[0], generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(fn(sim, targets, mask, weight=w), (w * rows).sum() / w.sum())
        torch.testing.assert_close(fn(sim, targets, mask, weight=w, reduction="sum"),
                                   (w * rows).sum())
        torch.testing.assert_close(fn(sim, targets, mask, weight=w, reduction="none"), w * rows)
        # equal weights: the plain mean
        torch.testing.assert_close(fn(sim, targets, mask, weight=torch.full_like(w, 3.0)), mean)


def test_reduction_and_weight_errors():
    sim, targets, mask = _batch(3)
    with pytest.raises(ValueError, match="reduction must be one of"):
        weince(sim, targets, mask, reduction="avg")
    with pytest.raises(ValueError, match="weight must be a floating"):
        weince(sim, targets, mask, weight=torch.ones(3))
