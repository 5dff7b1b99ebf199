"""``memory_bank_size=Q``: a FIFO of past embeddings as the negatives (MoCo's layout).

The module's loss is the functional loss of the ``(N, 1 + K)`` matrix built by hand from
the bank; WEINCE with ``lam=0`` is InfoNCE with the same bank bit for bit; the bank is a
FIFO of the batches' unit ``z2`` rows, saved and restored by ``state_dict``; no gradient
reaches it."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from weince.losses import (InfoNCELoss, WEINCELoss, WEINCERecipeLoss, build_loss, info_nce,
                           queue_similarities, topm_softmax, topm_weibull, weince)

N, D, Q = 24, 8, 100          # ceil(100 / 24) = 5 calls fill the bank; then it wraps


def batches(steps, n=N, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        z1 = torch.randn(n, D, generator=g, dtype=torch.float64)
        z2 = z1 + 0.3 * torch.randn(n, D, generator=g, dtype=torch.float64)
        out.append((z1, z2))
    return out


def by_hand(z1, z2, bank):
    """MoCo's matrix written out: column 0 the positive, then the bank rows."""
    a, b = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    sim = torch.cat([(a * b).sum(dim=1, keepdim=True), a @ bank.T], dim=1)
    return sim, torch.zeros(len(z1), dtype=torch.long)


@pytest.mark.parametrize("make, functional", [
    (lambda: InfoNCELoss(tau=0.2, memory_bank_size=Q), lambda s, t: info_nce(s, t, tau=0.2)),
    (lambda: WEINCELoss(tau=0.2, memory_bank_size=Q), lambda s, t: weince(s, t, tau=0.2)),
    (lambda: WEINCELoss(tau=0.2, beta="anchor", min_tail=20, memory_bank_size=Q),
     lambda s, t: weince(s, t, tau=0.2, beta="anchor", min_tail=20)),
], ids=["infonce", "weince", "weince-anchor"])
def test_the_module_is_the_functional_loss_of_the_bank_matrix(make, functional):
    loss_fn = make()
    for step, (z1, z2) in enumerate(batches(7)):
        bank = loss_fn.memory_bank.negatives().clone()
        got = loss_fn(z1, z2)
        assert bank.shape[0] == min(Q, step * N)          # K grows by N per call, then Q
        if step == 0:
            assert got.item() == 0.0 and math.copysign(1, got.item()) == 1   # no negatives yet
            continue
        want = functional(*by_hand(z1, z2, bank))
        assert torch.equal(got, want), (step, got, want)


def test_the_recipe_with_a_bank_is_its_terms_on_the_bank_matrix():
    """Eval mode: ``beta_t`` fixed and the bank read, not written."""
    loss_fn = WEINCERecipeLoss(tau=0.2, top_m=10, w_weib=0.3, w_soft=0.7, memory_bank_size=Q)
    for z1, z2 in batches(3):
        loss_fn(z1, z2)
    loss_fn.eval()
    z1, z2 = batches(1, seed=5)[0]
    bank = loss_fn.memory_bank.negatives().clone()
    sim, t = by_hand(z1, z2, bank)
    want = (weince(sim, t, tau=0.2) + 0.3 * topm_weibull(sim, t, None, loss_fn.beta_t, m=10)
            + 0.7 * topm_softmax(sim, t, None, tau=0.2, m=10))
    torch.testing.assert_close(loss_fn(z1, z2), want, rtol=1e-12, atol=0)
    assert torch.equal(loss_fn.memory_bank.negatives(), bank)     # eval: nothing enqueued


def test_lam0_with_a_bank_is_infonce_with_the_bank_exactly():
    wl, il = WEINCELoss(tau=0.3, lam=0.0, memory_bank_size=Q), InfoNCELoss(tau=0.3,
                                                                            memory_bank_size=Q)
    for z1, z2 in batches(6):
        a, b = wl(z1, z2), il(z1, z2)
        assert torch.equal(a, b)
    assert torch.equal(wl.memory_bank.queue, il.memory_bank.queue)


def test_the_bank_is_a_fifo_of_unit_z2_rows_and_round_trips_through_state_dict():
    loss_fn = InfoNCELoss(memory_bank_size=Q)
    data = batches(6) + batches(1, n=130, seed=3)      # the last batch is larger than Q
    pushed = []
    for step, (z1, z2) in enumerate(data[:6]):
        loss_fn(z1, z2)
        pushed.append(F.normalize(z2, dim=1))
        want = torch.cat(pushed)[-Q:]
        assert loss_fn.memory_bank.filled == min(Q, N * (step + 1))
        torch.testing.assert_close(loss_fn.memory_bank.entries(), want, rtol=0, atol=1e-15)
    assert loss_fn.memory_bank.queue.shape == (Q, D)
    assert loss_fn.memory_bank.state.tolist() == [(6 * N) % Q, Q]

    saved = loss_fn.state_dict()
    assert set(saved) == {"memory_bank.queue", "memory_bank.state"}
    fresh = InfoNCELoss(memory_bank_size=Q)
    fresh.load_state_dict(saved)
    assert fresh.memory_bank.filled == Q
    assert torch.equal(fresh.memory_bank.entries(), loss_fn.memory_bank.entries())
    z1, z2 = data[6]
    assert torch.equal(fresh(z1, z2), loss_fn(z1, z2))   # same loss, and the FIFO goes on
    torch.testing.assert_close(fresh.memory_bank.entries(), F.normalize(z2, dim=1)[-Q:],
                               rtol=0, atol=1e-15)
    assert torch.equal(fresh.memory_bank.entries(), loss_fn.memory_bank.entries())

    with pytest.raises(RuntimeError, match="memory_bank_size"):
        InfoNCELoss(memory_bank_size=Q + 1).load_state_dict(saved)


def test_eval_mode_reads_the_bank_and_to_moves_it():
    loss_fn = WEINCELoss(memory_bank_size=Q)
    for z1, z2 in batches(2):
        loss_fn(z1, z2)
    before = loss_fn.memory_bank.entries()
    loss_fn.eval()
    loss_fn(*batches(1, seed=9)[0])
    assert torch.equal(loss_fn.memory_bank.entries(), before)
    assert loss_fn.to(torch.float32).memory_bank.queue.dtype == torch.float32
    assert list(loss_fn.parameters()) == []


def test_gradients_reach_z1_and_the_positive_not_the_bank():
    loss_fn = WEINCELoss(tau=0.2, memory_bank_size=Q)
    for z1, z2 in batches(5):
        loss_fn(z1, z2)
    z1, z2 = (z.clone().requires_grad_() for z in batches(1, seed=7)[0])
    bank = loss_fn.memory_bank.negatives()
    assert not bank.requires_grad
    loss_fn(z1, z2).backward()
    assert z1.grad.abs().sum() > 0 and z2.grad.abs().sum() > 0
    assert bank.grad is None and loss_fn.memory_bank.queue.grad is None
    # z2 enters only through the positive column: its gradient is that column's
    r1, r2 = (z.detach().clone().requires_grad_() for z in (z1, z2))
    weince(*by_hand(r1, r2, bank.clone()), tau=0.2).backward()
    torch.testing.assert_close(z2.grad, r2.grad, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(z1.grad, r1.grad, rtol=1e-12, atol=1e-15)


def test_the_first_call_has_no_negatives_and_backward_works():
    loss_fn = WEINCELoss(memory_bank_size=Q)
    z1, z2 = (z.clone().requires_grad_() for z in batches(1)[0])
    loss = loss_fn(z1, z2)
    loss.backward()
    assert loss.item() == 0.0 and loss_fn.last_stats == {}
    assert torch.count_nonzero(z1.grad) == 0 and loss_fn.memory_bank.filled == N


def test_queue_similarities_is_the_matrix_by_hand():
    z1, z2 = batches(1)[0]
    queue = torch.randn(30, D, dtype=torch.float64)
    sim, t = queue_similarities(z1, z2, queue)
    want, _ = by_hand(z1, z2, F.normalize(queue, dim=1))
    torch.testing.assert_close(sim, want, rtol=0, atol=1e-15)
    assert t.tolist() == [0] * N
    with pytest.raises(ValueError, match=r"queue must be a floating \(K, d\) tensor"):
        queue_similarities(z1, z2, torch.randn(30, D + 1))


@pytest.mark.parametrize("kwargs, msg", [
    ({"memory_bank_size": -1}, r"memory_bank_size must be an int >= 0"),
    ({"memory_bank_size": 1.5}, r"memory_bank_size must be an int >= 0"),
    ({"memory_bank_size": True}, r"memory_bank_size must be an int >= 0"),
    ({"memory_bank_size": 8, "layout": "pairs"}, r"layout='pairs' and memory_bank_size=8"),
])
def test_bad_bank_options_are_refused(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        build_loss("weince", **kwargs)


@pytest.mark.parametrize("name", ["hcl", "dcl", "dclw"])
def test_the_baselines_take_no_bank(name):
    with pytest.raises(ValueError, match=r"bad options for loss .*memory_bank_size"):
        build_loss(name, memory_bank_size=8)


def test_a_batch_of_one_pair_works_with_a_bank():
    loss_fn = InfoNCELoss(memory_bank_size=4)
    for z1, z2 in batches(3, n=1):
        loss = loss_fn(z1, z2)
    assert loss.item() > 0 and loss_fn.memory_bank.filled == 3


@pytest.mark.parametrize("name", ["infonce", "weince", "weince_recipe", "infonce_topm"])
def test_the_modules_keep_nn_module_s_methods(name):
    """No helper of the losses shadows an ``nn.Module`` method (a ``half`` helper once did)."""
    own = {n for c in type(build_loss(name)).__mro__ if c.__module__.startswith("weince")
           for n in vars(c)}
    # (__annotations__: the declared types of the buffers, for the type checker)
    assert not own & set(dir(nn.Module)) - {"__init__", "forward", "extra_repr", "__doc__",
                                            "__module__", "_load_from_state_dict",
                                            "__annotations__"}
    loss_fn = build_loss(name, memory_bank_size=Q)
    assert loss_fn.half() is loss_fn and loss_fn.double() is loss_fn
