"""A batch too small for the configured tail warns, once per process."""

from __future__ import annotations

import importlib
import warnings

import pytest
import torch

from weince.losses import ShortTailWarning, WEINCELoss, pair_similarities, tail_size, weince

# the module (the package's name is the function)
W = importlib.import_module("weince.losses.weince")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(W, "_SHORT_TAIL_WARNED", False)


def views(n, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)


def test_short_tail_warns_once_per_process(fresh):
    loss_fn = WEINCELoss(tau=0.5)                   # min_tail = 32
    with pytest.warns(ShortTailWarning, match=r"K=14 negatives, fewer than min_tail=32"):
        loss_fn(*views(8))                          # K = 2*8 - 2 = 14
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss_fn(*views(8))                          # the second time: silent
        weince(*pair_similarities(*views(4)), tau=0.5)


def test_enough_negatives_or_a_smaller_min_tail_do_not_warn(fresh):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WEINCELoss(tau=0.5)(*views(17))             # K = 32 = min_tail
        WEINCELoss(tau=0.5, min_tail=10)(*views(8))  # K = 14 >= 10
    assert W._SHORT_TAIL_WARNED is False
    assert tail_size(32) == 32 and tail_size(14) == 14


def test_too_few_for_any_fit_says_lambda_is_zero(fresh):
    sim, targets, mask = pair_similarities(*views(2), "pairs")   # K = 1
    with pytest.warns(ShortTailWarning, match="lambda = 0"):
        loss, st = weince(sim, targets, mask, return_stats=True)
    assert torch.equal(st["lambda"], torch.zeros(2))
