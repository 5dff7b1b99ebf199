"""The field's per-call options on every loss module: ``mask`` (false negatives), a
per-example ``weight``, ``reduction`` and ``labels`` (several positives per anchor: the
supervised-contrastive form, the tail statistics over the negatives only)."""

from __future__ import annotations

import pytest
import torch

from weince.losses import (DualEncoderLoss, InfoNCELoss, InfoNCETopMLoss, WEINCELoss,
                           WEINCERecipeLoss, pair_similarities, weince, weince_statistics)

N, D = 40, 12


def views(seed=0, dtype=torch.float64, noise=0.3):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(N, D, generator=g, dtype=dtype)
    z2 = z1 + noise * torch.randn(N, D, generator=g, dtype=dtype)
    return z1.requires_grad_(), z2.requires_grad_()


def supcon(z: torch.Tensor, labels: torch.Tensor, tau: float) -> torch.Tensor:
    """The supervised-contrastive loss as its paper writes it: for anchor i, the mean over
    its positives p (same label, p != i) of -log(exp(s_ip / tau) / sum_{k != i} exp(s_ik /
    tau)), averaged over anchors."""
    z = torch.nn.functional.normalize(z, dim=1)
    logits = z @ z.T / tau
    eye = torch.eye(len(z), dtype=torch.bool)
    log_prob = logits - torch.logsumexp(logits.masked_fill(eye, float("-inf")), dim=1,
                                        keepdim=True)
    pos = (labels[:, None] == labels[None, :]) & ~eye
    return (-(log_prob * pos).sum(1) / pos.sum(1)).mean()


MODULES = {
    "infonce": lambda: InfoNCELoss(tau=0.2),
    "weince": lambda: WEINCELoss(tau=0.2, min_tail=16),
    "recipe": lambda: WEINCERecipeLoss(tau=0.2, min_tail=16, top_m=10).eval(),
    "dual": lambda: DualEncoderLoss(tau=0.2, min_tail=16),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_neutral_options_give_the_plain_loss(name):
    z1, z2 = views()
    fn = MODULES[name]()
    plain = fn(z1, z2)
    rows = 2 * N if name != "dual" else N
    full = torch.ones(rows, rows, dtype=torch.bool)
    if name != "dual":
        full.fill_diagonal_(False)
    for kw in ({"weight": torch.ones(N, dtype=torch.float64)}, {"reduction": "mean"},
               {"mask": full}):
        torch.testing.assert_close(fn(z1, z2, **kw), plain, rtol=1e-14, atol=0)
    per = fn(z1, z2, reduction="none")
    assert per.shape == (N,)
    torch.testing.assert_close(per.mean(), plain, rtol=1e-14, atol=0)
    torch.testing.assert_close(fn(z1, z2, reduction="sum"), per.sum(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_weights_weigh_each_examples_loss(name):
    z1, z2 = views(1)
    fn = MODULES[name]()
    w = torch.rand(N, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    per = fn(z1, z2, reduction="none")
    torch.testing.assert_close(fn(z1, z2, weight=w, reduction="none"), w * per)
    torch.testing.assert_close(fn(z1, z2, weight=w), (w * per).sum() / w.sum())
    torch.testing.assert_close(fn(z1, z2, weight=w, reduction="sum"), (w * per).sum())


@pytest.mark.parametrize("name", ["infonce", "weince", "dual"])
def test_a_mask_drops_candidates_as_the_functional_form_does(name):
    z1, z2 = views(3)
    fn = MODULES[name]()
    layout = "pairs" if name == "dual" else "simclr"
    sim, targets, mask = pair_similarities(z1, z2, layout)
    drop = torch.rand(sim.shape, generator=torch.Generator().manual_seed(4)) < 0.1
    drop[torch.arange(len(targets)), targets] = False             # positives stay
    mask = ~drop if mask is None else (mask & ~drop)
    got = fn(z1, z2, mask=mask)
    if name == "dual":
        want = (weince(sim, targets, mask, tau=0.2, min_tail=16)
                + weince(sim.T, targets, mask.T, tau=0.2, min_tail=16)) / 2
    else:
        want = weince(sim, targets, mask, tau=0.2, min_tail=16,
                      **({"lam": 0.0} if name == "infonce" else {}))
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)


@pytest.mark.parametrize("name", ["infonce", "weince"])
def test_labels_at_lambda_zero_are_the_supervised_contrastive_loss(name):
    z1, z2 = views(5)
    labels = torch.arange(N) % 7
    fn = InfoNCELoss(tau=0.2) if name == "infonce" else WEINCELoss(tau=0.2, lam=0.0)
    got = fn(z1, z2, labels=labels)
    want = supcon(torch.cat([z1, z2]), torch.cat([labels, labels]), 0.2)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)
    # one label per example: the one-positive loss
    torch.testing.assert_close(fn(z1, z2, labels=torch.arange(N)), fn(z1, z2), rtol=1e-14,
                               atol=0)


def test_with_labels_the_tail_statistics_take_the_negatives_only():
    """Items 2k and 2k + 1 are near duplicates with one label: without labels each is the
    other's hardest negative (rho near 0); with labels it is a positive, and the statistics
    are those of the batch with every other positive masked out."""
    g = torch.Generator().manual_seed(6)
    base = torch.randn(N // 2, D, generator=g, dtype=torch.float64).repeat_interleave(2, 0)
    z1 = base + 0.01 * torch.randn(N, D, generator=g, dtype=torch.float64)
    z2 = z1 + 0.3 * torch.randn(N, D, generator=g, dtype=torch.float64)
    labels = torch.arange(N) // 2
    fn = WEINCELoss(tau=0.2, min_tail=16)
    fn(z1, z2, labels=labels)
    sim, targets, mask = pair_similarities(z1, z2)
    lab = torch.cat([labels, labels])
    others = lab[:, None] == lab[None, :]
    others[torch.arange(2 * N), targets] = False       # the target stays the positive
    st = weince_statistics(sim, targets, mask & ~others, min_tail=16)
    torch.testing.assert_close(fn.last_stats["lambda_mean"], st["lambda"].double().mean(),
                               rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(fn.last_stats["rho0"], st["rho0"].double(), rtol=1e-6, atol=0)
    plain = weince_statistics(sim, targets, mask, min_tail=16)
    assert float(plain["rho0"]) < 0.5 * float(st["rho0"])     # the duplicates: no negatives


def test_dual_labels_make_every_same_label_pair_a_positive():
    z1, z2 = views(7)
    labels = torch.arange(N) % 5
    fn = DualEncoderLoss(tau=0.2, loss="infonce")
    a = torch.nn.functional.normalize(z1, dim=1)
    b = torch.nn.functional.normalize(z2, dim=1)
    logits = a @ b.T / 0.2
    pos = labels[:, None] == labels[None, :]

    def side(lg):
        return (torch.logsumexp(lg, 1) - (lg * pos).sum(1) / pos.sum(1)).mean()
    torch.testing.assert_close(fn(z1, z2, labels=labels), (side(logits) + side(logits.T)) / 2,
                               rtol=1e-13, atol=0)


@pytest.mark.parametrize("call, match", [
    (lambda z1, z2: InfoNCETopMLoss(tau=0.2)(z1, z2, reduction="sum"), "takes no per-call"),
    (lambda z1, z2: WEINCERecipeLoss(tau=0.2)(z1, z2, labels=torch.arange(N)), "one positive"),
    (lambda z1, z2: WEINCELoss(tau=0.2, memory_bank_size=64)(z1, z2, reduction="sum"),
     "memory bank"),
    (lambda z1, z2: WEINCELoss(tau=0.2)(z1, z2, reduction="avg"), "reduction must be one of"),
    (lambda z1, z2: WEINCELoss(tau=0.2)(z1, z2, weight=torch.ones(N + 1)), r"weight must be"),
    (lambda z1, z2: WEINCELoss(tau=0.2)(z1, z2, labels=torch.ones(N)), "labels must be"),
    (lambda z1, z2: WEINCELoss(tau=0.2)(z1, z2, mask=torch.ones(N, N, dtype=torch.bool)),
     r"mask must be a boolean \(80, 80\)"),
    (lambda z1, z2: DualEncoderLoss(tau=0.2)(z1, z2, labels=torch.arange(N + 1)),
     "labels must be"),
])
def test_bad_options_are_one_clear_error(call, match):
    z1, z2 = views(8)
    with pytest.raises(ValueError, match=match):
        call(z1, z2)
