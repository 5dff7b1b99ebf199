"""``gather_distributed="local"``: each process computes its own rows against every
process's candidates (the pivot ``rho0`` from every row's ``rho``); with 2 and 4 gloo
processes holding uneven shares of the batch, the mean of their losses is the one-process
loss, DDP's averaged gradients are the one-process gradients, and ``last_stats`` agree."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from _ranks import on_ranks

from weince.losses import build_loss

pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available"),
              pytest.mark.slow]   # 2 + 4 spawned processes: about a minute on a shared CPU

N, D_IN, D = 44, 12, 8
SHARDS = {2: [0, 17, 44], 4: [0, 5, 20, 31, 44]}      # uneven shares of the N items
CASES = [("infonce", {}), ("weince", {}), ("weince", {"layout": "pairs", "min_tail": 8}),
         ("weince", {"beta": "anchor"}), ("infonce", {"layout": "pairs"}),
         # row chunks inside each process's rows (the one-process reference: unchunked)
         ("weince", {"chunk_size": 7}), ("infonce", {"layout": "pairs", "chunk_size": 5}),
         ("weince", {"layout": "pairs", "min_tail": 8, "chunk_size": 4})]


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
    x1, x2, model = make_problem()
    if not gather:
        kw = {k: v for k, v in kw.items() if k != "chunk_size"}
    loss_fn = build_loss(name, tau=0.5, gather_distributed=gather, **kw)
    if gather:
        model = torch.nn.parallel.DistributedDataParallel(model)
    loss = loss_fn(model(x1[rows]), model(x2[rows]))
    loss.backward()
    m = model.module if gather else model
    return {"loss": loss.detach(), "w": m.weight.grad.clone(), "b": m.bias.grad.clone(),
            "stats": {k: v.clone() for k, v in loss_fn.last_stats.items()}}


def _work(rank, world):
    cut = SHARDS[world]
    rows = slice(cut[rank], cut[rank + 1])
    return [run(name, kw, rows, gather="local") for name, kw in CASES]


@pytest.fixture(scope="module", params=[2, 4])
def ranks(request, tmp_path_factory):
    world = request.param
    out = tmp_path_factory.mktemp(f"local{world}")
    return on_ranks(_work, world, out)


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{n}-{kw}" for n, kw in CASES])
def test_local_rows_equal_one_process_on_the_whole_batch(ranks, i):
    name, kw = CASES[i]
    one = run(name, kw, slice(0, N), gather=False)
    mean = torch.stack([r[i]["loss"] for r in ranks]).mean()
    torch.testing.assert_close(mean, one["loss"], rtol=1e-12, atol=1e-12)
    for r in ranks:
        got = r[i]
        torch.testing.assert_close(got["w"], one["w"], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(got["b"], one["b"], rtol=1e-10, atol=1e-12)
        assert got["stats"].keys() == one["stats"].keys()
        for k in one["stats"]:
            torch.testing.assert_close(got["stats"][k], one["stats"][k], rtol=1e-10, atol=1e-12)
    # the shares differ: the ranks' losses are not all the global one
    assert len({float(r[i]["loss"]) for r in ranks}) > 1


def test_local_mode_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="memory bank"):
        build_loss("weince", gather_distributed="local", memory_bank_size=64)
    with pytest.raises(ValueError, match="InfoNCELoss and WEINCELoss"):
        build_loss("weince_recipe", gather_distributed="local")
    with pytest.raises(ValueError, match="gather_distributed must be"):
        build_loss("weince", gather_distributed="yes")
