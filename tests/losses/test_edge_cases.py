"""Numerics at the edges: a batch of one raises a clear error for every
loss, the functional API refuses NaN/inf, and huge or tiny embedding norms normalise to
unit vectors instead of zero vectors."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from weince.losses import LOSSES, build_loss, info_nce, pair_similarities, weince
from weince.losses._common import unit_rows
from weince.losses.baselines import dcl, hcl


@pytest.mark.parametrize("layout", ["simclr", "pairs"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_batch_of_one_is_a_clear_error(name, layout):
    """Before: weince/weince_recipe 'kth out of bounds', hcl 'math domain error', dcl/dclw
    -inf, infonce 0."""
    z = torch.randn(1, 8)
    with pytest.raises(ValueError, match=r"N=1 .*no negatives.*N >= 2"):
        build_loss(name, layout=layout)(z, z.clone())


@pytest.mark.parametrize("layout", ["simclr", "pairs"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_batch_of_two_gives_a_finite_loss(name, layout):
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(2, 8, generator=g), torch.randn(2, 8, generator=g)
    assert torch.isfinite(build_loss(name, layout=layout)(z1, z2))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("fn", [info_nce, weince, hcl, dcl])
def test_functional_api_refuses_non_finite_similarities(fn, bad):
    z1, z2 = torch.randn(6, 8), torch.randn(6, 8)
    sim, targets, mask = pair_similarities(z1, z2, "simclr")
    sim[3, 4] = bad
    with pytest.raises(ValueError, match=r"sim holds 1 NaN/inf value"):
        fn(sim, targets, mask)


def test_unit_rows_is_f_normalize_bit_for_bit_on_ordinary_rows():
    g = torch.Generator().manual_seed(1)
    for scale in (1e-3, 1.0, 7.5, 1e6):
        z = torch.randn(64, 32, generator=g) * scale
        assert torch.equal(unit_rows(z), F.normalize(z, dim=1))
    z = torch.randn(16, 8, dtype=torch.float64, generator=g)
    assert torch.equal(unit_rows(z), F.normalize(z, dim=1))


@pytest.mark.parametrize("scale", [1e19, 1e25, 1e37, 1e-30])
def test_huge_and_tiny_norms_normalise_to_unit_rows(scale):
    z = torch.randn(8, 32, generator=torch.Generator().manual_seed(2))
    before = F.normalize(z * scale, dim=1).norm(dim=1)
    assert not torch.allclose(before, torch.ones(8))  # the old behaviour: zero / non-unit rows
    assert torch.allclose(unit_rows(z * scale), F.normalize(z, dim=1), atol=1e-6)


@pytest.mark.parametrize("name", ["infonce", "weince", "weince_recipe", "hcl", "dcl"])
def test_losses_do_not_see_a_power_of_two_rescaling(name):
    g = torch.Generator().manual_seed(3)
    z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    ref = build_loss(name)(z1, z2)
    big = build_loss(name)(z1 * 2.0 ** 70, z2 * 2.0 ** 70)  # norms ~1e21
    assert torch.isfinite(big) and torch.equal(big, ref)


def test_unit_rows_gradient_is_f_normalize_gradient_on_ordinary_rows():
    """The norms analysis intercepts F.normalize inside the losses: for ordinary rows the
    rescaling must be the identity, in the backward pass too."""
    g = torch.Generator().manual_seed(4)
    z = torch.randn(16, 8, generator=g)
    w = torch.randn(16, 8, generator=g)
    a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
    (unit_rows(a) * w).sum().backward()
    (F.normalize(b, dim=1) * w).sum().backward()
    assert torch.equal(a.grad, b.grad)
