"""Run one function on several gloo processes of this machine and collect what each returns:
the harness of the tests that hold a loss across processes to one process on the whole batch."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, out_dir, work):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.save(work(rank, world), os.path.join(out_dir, f"r{rank}.pt"))
    finally:
        dist.destroy_process_group()


def on_ranks(work, world: int, out_dir, start_method: str = "spawn") -> list:
    """``work(rank, world)`` on ``world`` processes; the list of what each returned, by rank.

    ``work`` must be a module-level function (spawned processes import it). Spawn is the
    default: a parent that already ran a compiled backward cannot fork autograd's threads."""
    mp.start_processes(_rank, args=(world, _free_port(), str(out_dir), work), nprocs=world,
                       join=True, start_method=start_method)
    return [torch.load(Path(out_dir) / f"r{r}.pt") for r in range(world)]
