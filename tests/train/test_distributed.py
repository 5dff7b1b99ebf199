"""gather_with_grad on 2 gloo processes == one process with the whole batch."""
from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch._dynamo  # DDP imports it on construction: here, once, before any fork
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from weince.train.ddp import all_reduce_mean, cleanup_distributed, gather_with_grad
from weince.train.simclr import pretrain
from weince.train.trainlog import read_jsonl

WORLD = 2
N, D_IN, D = 8, 6, 4   # global batch of N images, two views each


def nt_xent(z1, z2, tau=0.5):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T / tau
    n = z1.shape[0]
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, target)


def make_problem():
    g = torch.Generator().manual_seed(0)
    x1 = torch.randn(N, D_IN, generator=g)
    x2 = x1 + 0.3 * torch.randn(N, D_IN, generator=g)
    model = torch.nn.Linear(D_IN, D)
    with torch.no_grad():
        model.weight.copy_(torch.randn(D, D_IN, generator=g))
        model.bias.copy_(torch.randn(D, generator=g))
    return x1, x2, model


def single_process():
    x1, x2, model = make_problem()
    z1, z2 = model(x1), model(x2)
    z1.retain_grad()
    z2.retain_grad()
    loss = nt_xent(z1, z2)
    loss.backward()
    return loss.detach(), model.weight.grad, model.bias.grad, z1.grad, z2.grad


def _worker(rank, port, out_dir, variants):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        for v in variants:
            _step(rank, out_dir, v)
    finally:
        dist.destroy_process_group()


def _step(rank, out_dir, use_grad_gather):
    x1, x2, model = make_problem()
    ddp = DDP(model)
    n = N // WORLD
    sl = slice(rank * n, (rank + 1) * n)
    z1, z2 = ddp(x1[sl]), ddp(x2[sl])
    z1.retain_grad()
    z2.retain_grad()
    if use_grad_gather:
        g1, g2 = gather_with_grad(z1), gather_with_grad(z2)
    else:  # the broken pattern: a plain all_gather, own slice put back in
        parts = [torch.empty_like(z1) for _ in range(WORLD)]
        dist.all_gather(parts, z1.detach())
        parts[rank] = z1
        g1 = torch.cat(parts)
        parts = [torch.empty_like(z2) for _ in range(WORLD)]
        dist.all_gather(parts, z2.detach())
        parts[rank] = z2
        g2 = torch.cat(parts)
    loss = nt_xent(g1, g2)
    loss.backward()
    mean_loss = all_reduce_mean(loss.detach())
    torch.save({"loss": loss.detach(), "mean_loss": mean_loss,
                "w": model.weight.grad, "b": model.bias.grad,
                "z1": z1.grad, "z2": z2.grad},
               os.path.join(out_dir, f"{int(use_grad_gather)}r{rank}.pt"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory):
    """Both variants in one pair of processes (process start-up dominates the cost).
    Fork start: the workers need no re-import of torch and the test module."""
    out = tmp_path_factory.mktemp("ddp")
    mp.start_processes(_worker, args=(_free_port(), str(out), (True, False)), nprocs=WORLD,
                       join=True, start_method="fork")
    return {v: [torch.load(out / f"{int(v)}r{r}.pt") for r in range(WORLD)] for v in (True, False)}


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")
def test_gather_with_grad_matches_single_process(two_process_results):
    loss, gw, gb, gz1, gz2 = single_process()
    res = two_process_results[True]
    n = N // WORLD
    for r, out in enumerate(res):
        assert torch.allclose(out["loss"], loss, atol=1e-6)
        assert out["mean_loss"] == pytest.approx(float(loss), abs=1e-6)
        # DDP averaged the parameter gradients: equal to the whole-batch gradient
        assert torch.allclose(out["w"], gw, atol=1e-5)
        assert torch.allclose(out["b"], gb, atol=1e-5)
        # the embedding gradient on a rank is WORLD x the whole-batch one (the all-reduce
        # sum); DDP's 1/WORLD average of the parameter gradients undoes it
        sl = slice(r * n, (r + 1) * n)
        assert torch.allclose(out["z1"], WORLD * gz1[sl], atol=1e-5)
        assert torch.allclose(out["z2"], WORLD * gz2[sl], atol=1e-5)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")
def test_plain_all_gather_is_wrong(two_process_results):
    """Negative control: without the gradient all-reduce the parameter gradients differ."""
    _, gw, _, _, _ = single_process()
    res = two_process_results[False]
    assert not torch.allclose(res[0]["w"], gw, atol=1e-3)


def test_single_process_is_identity():
    z = torch.randn(3, 2, requires_grad=True)
    assert gather_with_grad(z) is z


def _pretrain_worker(rank, port, out_dir, stop_after):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    cfg = dict(dataset="digits", max_train_images=64, batch_size=32, epochs=2,
               loss="weince_recipe", loss_kwargs={"top_m": 20}, progress=False, device="cpu",
               keep_checkpoint=True)   # the finished run's checkpoint is read below
    try:
        pretrain(cfg, out_dir, stop_after=stop_after)
    finally:
        cleanup_distributed()


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")
def test_pretrain_on_two_processes_resumes(tmp_path):
    """The SimCLR loop under DDP (gloo, 2 ranks): killed after epoch 1 and resumed, it
    writes one log record per epoch and the encoder; rank 0 alone writes files."""
    for stop in (1, None):
        mp.start_processes(_pretrain_worker, args=(_free_port(), str(tmp_path), stop),
                           nprocs=WORLD, join=True, start_method="fork")
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert ck["epoch"] == 2 and len(ck["aug_gen"]) == WORLD
    assert [r["epoch"] for r in read_jsonl(tmp_path / "train_log.jsonl")] == [1, 2]
    assert (tmp_path / "encoder.pt").exists()
    train = json.loads((tmp_path / "train.json").read_text())
    assert train["world_size"] == WORLD and train["resumed_from_epoch"] == 1
