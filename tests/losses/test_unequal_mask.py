"""A mask of known false negatives that keeps a different number ``K_i`` of negatives in
each row: the tail size is then per row (``k_i = tail_size(K_i)``), the pivot ``rho0``
still the quantile over every row. A row's statistics and loss are those of the row alone
(with the batch's pivot): bit for bit with the dropped columns masked, and with them
removed the statistics bit for bit and the loss to rounding (its softmax then sums over
fewer columns, in another order). Equal counts take today's path."""

from __future__ import annotations

import pytest
import torch

from weince.losses import (dual_encoder_loss, info_nce, pair_similarities, tail_size, weince,
                           weince_statistics)
from weince.losses.weince import _statistics, row_statistics

OPTS = dict(tau=0.2, tail_frac=0.3, min_tail=4)


def batch(n=40, seed=0, most=30):
    """SimCLR similarities (float64) with up to ``most`` random negatives of each row
    masked out: unequal counts ``K_i``."""
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, 8, generator=g, dtype=torch.float64)
    sim, t, m = pair_similarities(z1, z1 + 0.3 * torch.randn(n, 8, generator=g,
                                                            dtype=torch.float64))
    m = m.clone()
    for i in range(sim.shape[0]):
        drop = int(torch.randint(0, most + 1, (1,), generator=g))
        cols = [j for j in torch.randperm(sim.shape[1], generator=g).tolist()
                if j not in (i, int(t[i]))][:drop]
        m[i, cols] = False
    return sim, t, m


def pivot(sim, t, m, q=0.2, eps=1e-6):
    """rho0 by its definition: the q-quantile over rows of max(1 - max negative, eps)."""
    neg = sim.masked_fill(~m, float("-inf")).scatter(1, t.view(-1, 1), float("-inf"))
    rho = torch.rsub(neg.amax(dim=1), 1.0).clamp_min(eps)
    return rho.kthvalue(int(round(q * (sim.shape[0] - 1))) + 1).values


def test_each_row_has_its_own_tail_size():
    sim, t, m = batch()
    counts = m.sum(dim=1) - 1
    assert len(set(counts.tolist())) > 10
    _, st = weince(sim, t, m, return_stats=True, **OPTS)
    assert st["k"].tolist() == [tail_size(K, 0.3, 4) for K in counts.tolist()]
    assert len(set(st["k"].tolist())) > 3
    assert torch.equal(st["n"], st["k"] - torch.clamp(st["k"] // 20, min=1))
    torch.testing.assert_close(st["rho0"], pivot(sim, t, m).float(), rtol=0, atol=0)


@pytest.mark.parametrize("kw", [{}, {"beta": "anchor"}, {"gate": "aic"}])
def test_a_row_equals_the_row_alone(kw):
    sim, t, m = batch()
    loss, st = weince(sim, t, m, reduction="none", return_stats=True, **OPTS, **kw)
    rho0 = pivot(sim, t, m)
    for i in range(sim.shape[0]):
        masked, mst = weince(sim[i:i + 1], t[i:i + 1], m[i:i + 1], reduction="none",
                             return_stats=True, rho0=rho0, **OPTS, **kw)
        assert torch.equal(masked[0], loss[i]), i                 # exact
        keep = m[i].nonzero().flatten()
        alone, ast_ = weince(sim[i:i + 1, keep], (keep == t[i]).nonzero().flatten(),
                             reduction="none", return_stats=True, rho0=rho0, **OPTS, **kw)
        for key in ("lambda", "rho", "daic", "beta_w"):
            assert torch.equal(mst[key][0], st[key][i]), (i, key)
            assert torch.equal(ast_[key][0], st[key][i]), (i, key)
        assert ast_["k"] == int(st["k"][i])
        torch.testing.assert_close(alone[0], loss[i], rtol=2e-15, atol=1e-15)   # rounding
    assert float(st["lambda"].max()) > 0.01          # the correction is active somewhere


def test_the_mean_loss_is_the_mean_of_the_row_losses():
    sim, t, m = batch(seed=1)
    rows = weince(sim, t, m, reduction="none", **OPTS)
    torch.testing.assert_close(weince(sim, t, m, **OPTS), rows.mean(), rtol=1e-15, atol=0)
    w = torch.rand(sim.shape[0], dtype=torch.float64)
    torch.testing.assert_close(weince(sim, t, m, weight=w, reduction="sum", **OPTS),
                               (w * rows).sum(), rtol=1e-15, atol=0)


def test_equal_counts_take_todays_path_bit_for_bit():
    sim, t, m = batch(most=0)                        # the SimCLR mask: K = 2N - 2 everywhere
    common = dict(q=0.2, margin=2.0, kappa_rho=10.0, kappa_aic=1.0, tail_frac=0.3,
                  min_tail=4, eps=1e-6, gate="both")
    K = sim.shape[1] - 2
    today = _statistics(sim, t, ~m, K, **common)
    grouped = row_statistics(sim, t, ~m, torch.full((sim.shape[0],), K), **common)
    for key in ("lambda", "daic", "beta_w"):
        assert torch.equal(grouped[key], today[key]), key
    assert torch.equal(grouped["log_rho0"], today["log_rho0"])
    assert torch.equal(grouped["d"][:, 0], today["d"][:, 0])
    _, st = weince(sim, t, m, return_stats=True, **OPTS)
    assert isinstance(st["k"], int)                  # equal counts: the int path
    assert torch.equal(weince(sim, t, m, **OPTS),
                       weince(sim, t, m, check=False, num_negatives=K, **OPTS))


def test_unchecked_calls_read_the_counts_from_the_mask():
    sim, t, m = batch(seed=2)
    assert torch.equal(weince(sim, t, m, check=False, **OPTS), weince(sim, t, m, **OPTS))
    a = weince_statistics(sim, t, m, tail_frac=0.3, min_tail=4)
    b = weince_statistics(sim, t, m, tail_frac=0.3, min_tail=4, check=False)
    assert torch.equal(a["lambda"], b["lambda"]) and torch.equal(a["k"], b["k"])


def test_infonce_takes_unequal_counts():
    sim, t, m = batch(seed=3)
    rows = info_nce(sim, t, m, tau=0.2, reduction="none")
    for i in range(sim.shape[0]):
        keep = m[i].nonzero().flatten()
        alone = info_nce(sim[i:i + 1, keep], (keep == t[i]).nonzero().flatten(), tau=0.2)
        torch.testing.assert_close(alone, rows[i], rtol=2e-15, atol=1e-15)
    assert torch.equal(weince(sim, t, m, lam=0.0, **OPTS), info_nce(sim, t, m, tau=0.2))


def test_the_dual_encoder_loss_takes_an_unequal_mask_chunked_too():
    g = torch.Generator().manual_seed(4)
    a = torch.randn(60, 8, generator=g, dtype=torch.float64, requires_grad=True)
    b = (a.detach() + 0.4 * torch.randn(60, 8, generator=g, dtype=torch.float64)).requires_grad_()
    mask = torch.rand(60, 60, generator=g) > 0.15
    mask.fill_diagonal_(True)
    kw = dict(tau=0.1, mask=mask, min_tail=8, tail_frac=0.3, return_stats=True)
    whole, st = dual_encoder_loss(a, b, **kw)
    chunked, cst = dual_encoder_loss(a, b, chunk_size=7, **kw)
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-14)
    for side in ("a_to_b", "b_to_a"):
        assert torch.equal(cst[side]["k"], st[side]["k"])
    for side, counts in (("a_to_b", mask.sum(dim=1) - 1), ("b_to_a", mask.sum(dim=0) - 1)):
        assert st[side]["k"].tolist() == [tail_size(K, 0.3, 8) for K in counts.tolist()]
    assert not torch.equal(st["a_to_b"]["k"], st["b_to_a"]["k"])   # rows vs columns of the mask
    gw = torch.autograd.grad(whole, [a, b])
    gc = torch.autograd.grad(chunked, [a, b])
    for x, y in zip(gc, gw):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14)
    S = torch.nn.functional.normalize(a) @ torch.nn.functional.normalize(b).T
    one = dual_encoder_loss(a, b, tau=0.1, mask=mask, min_tail=8, direction="a_to_b")
    assert torch.equal(one, weince(S, torch.arange(60), mask, tau=0.1, min_tail=8))


def test_a_row_without_negatives_is_refused():
    sim, t, m = batch(n=6)
    m[0] = False
    m[0, t[0]] = True
    for fn in (weince, info_nce):
        with pytest.raises(ValueError, match="at least one negative"):
            fn(sim, t, m)
    with pytest.raises(ValueError, match="at least one negative"):
        weince(sim, t, m, check=False)
