"""Multi-process (``torchrun`` + DDP) helpers for the training loops.

The all-gather *with gradient* that every rank runs on its embeddings, and why the
gradients it produces equal one process's on the whole batch, live in
:mod:`weince.utils.distributed` (the loss modules use it too, with
``gather_distributed=True``); they are re-exported here.

    torchrun --nproc_per_node 8 -m weince.cli pretrain --config cfg.yaml --out DIR
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from weince.utils.device import resolve_device
from weince.utils.distributed import gather_with_grad, is_distributed, rank, world_size

__all__ = ["DistInfo", "setup_distributed", "cleanup_distributed", "gather_with_grad",
           "is_distributed", "world_size", "rank", "all_reduce_mean", "barrier"]


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup_distributed(device: str = "auto") -> DistInfo:
    """Initialise the process group when launched by ``torchrun`` (``WORLD_SIZE > 1`` in
    the environment); otherwise return a single-process :class:`DistInfo`.

    ``device``: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"`` or
    ``"cuda:N"``. Under torchrun each rank uses ``cuda:LOCAL_RANK`` with NCCL, or the CPU
    with gloo.
    """
    ws = int(os.environ.get("WORLD_SIZE", "1"))
    want_cuda = (device == "auto" and torch.cuda.is_available()) or device.startswith("cuda")
    if want_cuda and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available; use device: cpu or auto")
    if ws <= 1:
        return DistInfo(device=resolve_device(device))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if want_cuda:
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        dev = torch.device("cpu")
        backend = "gloo"
    if not is_distributed():
        dist.init_process_group(backend=backend)
    return DistInfo(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local,
                    device=dev)


def cleanup_distributed() -> None:
    if is_distributed():
        dist.destroy_process_group()


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def all_reduce_mean(x: torch.Tensor | float) -> float:
    """Mean of a scalar over ranks (the value itself when single-process)."""
    t = torch.as_tensor(x, dtype=torch.float64)
    if not is_distributed():
        return float(t)
    backend = dist.get_backend()
    dev = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else "cpu"
    t = t.to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t) / dist.get_world_size()
