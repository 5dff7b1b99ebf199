"""``DualEncoderLoss(gather_distributed=...)``: with 2 and 4 gloo processes holding uneven
shares of the paired batch, ``"local"`` (each process's rows of each direction against
every process's candidates, each direction's pivot from every row) and ``True`` (every
process computes the global loss) give the one-process loss on the whole batch (the mean
over processes for ``"local"``), DDP's averaged gradients equal one process's, and
``last_stats`` agree; ``chunk_size`` inside each process's rows too."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from _ranks import on_ranks

from weince.losses import DualEncoderLoss

pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available"),
              pytest.mark.slow]   # spawned processes: about a minute on a shared CPU

N, D_A, D_B, D = 44, 12, 10, 8
SHARDS = {2: [0, 17, 44], 4: [0, 5, 20, 31, 44]}
CASES = [("weince", "local", {}), ("infonce", "local", {}),
         ("weince", "local", {"direction": "a_to_b", "min_tail": 8}),
         ("weince", "local", {"direction": "b_to_a", "beta": "anchor"}),
         ("weince", "local", {"chunk_size": 5}), ("infonce", "local", {"chunk_size": 3}),
         ("weince", True, {})]


class Pair(torch.nn.Module):
    def __init__(self, g):
        super().__init__()
        self.a, self.b = torch.nn.Linear(D_A, D).double(), torch.nn.Linear(D_B, D).double()
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))

    def forward(self, xa, xb):
        return self.a(xa), self.b(xb)


def run(loss, gather, kw, rows):
    g = torch.Generator().manual_seed(0)
    xa = torch.randn(N, D_A, generator=g, dtype=torch.float64)
    xb = xa[:, :D_B] + 0.3 * torch.randn(N, D_B, generator=g, dtype=torch.float64)
    model = Pair(g)
    if not gather:
        kw = {k: v for k, v in kw.items() if k != "chunk_size"}
    loss_fn = DualEncoderLoss(tau=0.2, loss=loss, gather_distributed=gather, **kw)
    net = torch.nn.parallel.DistributedDataParallel(model) if gather else model
    out = loss_fn(*net(xa[rows], xb[rows]))
    out.backward()
    return {"loss": out.detach(), "grads": [p.grad.clone() for p in model.parameters()],
            "stats": {k: v.clone() for k, v in loss_fn.last_stats.items()}}


def _work(rank, world):
    cut = SHARDS[world]
    rows = slice(cut[rank], cut[rank + 1])
    return [run(loss, gather, kw, rows) for loss, gather, kw in CASES]


@pytest.fixture(scope="module", params=[2, 4])
def ranks(request, tmp_path_factory):
    world = request.param
    out = tmp_path_factory.mktemp(f"dual{world}")
    return on_ranks(_work, world, out)


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{a}-{b}-{c}" for a, b, c in CASES])
def test_the_processes_equal_one_process_on_the_whole_batch(ranks, i):
    loss, gather, kw = CASES[i]
    one = run(loss, False, kw, slice(0, N))
    losses = torch.stack([r[i]["loss"] for r in ranks])
    torch.testing.assert_close(losses.mean(), one["loss"], rtol=1e-12, atol=1e-12)
    if gather is True:
        for got in losses:
            torch.testing.assert_close(got, one["loss"], rtol=1e-12, atol=1e-12)
    else:
        assert len({float(v) for v in losses}) > 1      # the shares differ
    for r in ranks:
        for got, want in zip(r[i]["grads"], one["grads"]):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
        assert r[i]["stats"].keys() == one["stats"].keys()
        for k, v in one["stats"].items():
            torch.testing.assert_close(r[i]["stats"][k], v, rtol=1e-7, atol=1e-12)


def test_bad_gather_options():
    with pytest.raises(ValueError, match="gather_distributed must be"):
        DualEncoderLoss(gather_distributed="yes")
    with pytest.raises(ValueError, match="reduction and weight"):
        DualEncoderLoss(gather_distributed="local", reduction="sum")
