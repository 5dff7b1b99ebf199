"""``gather_distributed=True``: two gloo processes, each holding half of the batch, give the
loss, the statistics and (after DDP's averaging) the parameter gradients of one process on
the whole batch; the recipe's ``beta_t`` moves identically on both, and so do the memory
banks (each process enqueues the gathered batch)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # DDP imports it on construction: here, once, before any fork
import torch.distributed as dist

from _ranks import on_ranks

from weince.losses import build_loss
from weince.train.simclr import complete_config
from weince.train.simcse import SimCSEConfig

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")

WORLD = 2
N, D_IN, D = 40, 12, 8            # K = 2N - 2 = 78 >= min_tail: the real tail path
LOSSES = [("infonce", {}), ("weince", {}), ("weince", {"beta": "anchor"}), ("dclw", {}),
          ("weince_recipe", {"top_m": 10, "pool_min": 64}), ("weince", {"layout": "pairs"}),
          ("weince", {"memory_bank_size": 64}), ("infonce", {"memory_bank_size": 64})]


def make_problem():
    g = torch.Generator().manual_seed(0)
    x1 = torch.randn(N, D_IN, generator=g, dtype=torch.float64)
    x2 = x1 + 0.2 * torch.randn(N, D_IN, generator=g, dtype=torch.float64)
    model = torch.nn.Linear(D_IN, D).double()
    with torch.no_grad():
        model.weight.copy_(torch.randn(D, D_IN, generator=g))
        model.bias.copy_(torch.randn(D, generator=g))
    return x1, x2, model


def run(name, kw, rows, gather):
    """The loss of ``rows`` of the batch; returns loss, parameter grads, stats, beta_t."""
    x1, x2, model = make_problem()
    loss_fn = build_loss(name, tau=0.5, gather_distributed=gather, **kw)
    if loss_fn.memory_bank is not None:   # a first step fills the bank (K = 0 before it)
        with torch.no_grad():
            loss_fn(model(x2[rows]), model(x1[rows]))
    if gather:
        model = torch.nn.parallel.DistributedDataParallel(model)
    loss = loss_fn(model(x1[rows]), model(x2[rows]))
    loss.backward()
    m = model.module if gather else model
    return {"loss": loss.detach(), "w": m.weight.grad.clone(), "b": m.bias.grad.clone(),
            "stats": {k: v.clone() for k, v in loss_fn.last_stats.items()},
            "beta_t": getattr(loss_fn, "beta_t", torch.tensor(0.0)).clone(),
            "bank": (loss_fn.memory_bank.entries() if loss_fn.memory_bank is not None
                     else torch.zeros(0))}


def _work(rank, world):
    # uneven shards: rank 0 holds 15 items, rank 1 the other 25
    rows = slice(0, 15) if rank == 0 else slice(15, N)
    return [run(name, kw, rows, gather=True) for name, kw in LOSSES]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("gather")
    return on_ranks(_work, WORLD, out, start_method="fork")


@pytest.mark.parametrize("i", range(len(LOSSES)), ids=[f"{n}-{kw}" for n, kw in LOSSES])
def test_two_processes_equal_one_on_the_whole_batch(ranks, i):
    name, kw = LOSSES[i]
    one = run(name, kw, slice(0, N), gather=False)
    for r in range(WORLD):
        got = ranks[r][i]
        torch.testing.assert_close(got["loss"], one["loss"], rtol=1e-12, atol=1e-12)
        # DDP averaged the parameter gradients over the ranks: the one-process gradient
        torch.testing.assert_close(got["w"], one["w"], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(got["b"], one["b"], rtol=1e-10, atol=1e-12)
        assert got["stats"].keys() == one["stats"].keys()
        for k in one["stats"]:
            torch.testing.assert_close(got["stats"][k], one["stats"][k], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(got["beta_t"], one["beta_t"])
        # every process enqueued the gathered z2: the banks agree with one process's
        torch.testing.assert_close(got["bank"], one["bank"], rtol=0, atol=0)
    if "memory_bank_size" in kw:
        assert one["bank"].shape == (64, D) and float(one["loss"]) > 0   # 2N = 80 rows pushed
    if name == "weince_recipe":
        assert float(one["beta_t"]) != 4.0, \
            "the EMA did not move: the test would not see a difference"


def test_without_a_process_group_the_flag_changes_nothing():
    x1, x2, model = make_problem()
    z1, z2 = model(x1), model(x2)
    a = build_loss("weince", tau=0.5, gather_distributed=True)(z1, z2)
    b = build_loss("weince", tau=0.5)(z1, z2)
    assert torch.equal(a, b)
    assert "gather_distributed=True" in repr(build_loss("infonce", gather_distributed=True))


def test_training_configs_refuse_the_flag():
    """The training loops gather the embeddings themselves: the loss must not gather again."""
    with pytest.raises(ValueError, match="loss_kwargs.gather_distributed"):
        complete_config({"loss": "weince", "loss_kwargs": {"gather_distributed": True}})
    cfg = SimCSEConfig()
    cfg.loss_kwargs = {"gather_distributed": False}
    with pytest.raises(ValueError, match="loss_kwargs.gather_distributed"):
        cfg.validate()
