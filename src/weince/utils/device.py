"""The one device resolver: ``"auto"`` -> CUDA when visible, else the CPU.

    from weince.utils.device import resolve_device
    resolve_device("auto")     # torch.device("cuda") on a GPU machine, else cpu
"""

from __future__ import annotations

import torch

__all__ = ["resolve_device", "require_gpu", "cuda_visible"]


def cuda_visible() -> bool:
    """Whether torch sees a CUDA device (one function, so that the fake-CUDA tests, which make
    CUDA tensors without a GPU, can declare the device visible to the resolver alone)."""
    return torch.cuda.is_available()


def resolve_device(name: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` (or None): CUDA when available, else CPU; otherwise ``torch.device(name)``.

    Raises:
        ValueError: a CUDA device is asked for but none is visible (the message says to use
            ``cpu`` or ``auto``), or a CUDA index that is not visible.

    A CUDA device with an index (``"cuda:1"``) also becomes the process's current device
    (``torch.cuda.set_device``): otherwise pinned-memory threads, Triton's kernels and any
    tensor made with plain ``device="cuda"`` work on device 0 while the run is on device 1.
    """
    if isinstance(name, torch.device):
        name = str(name)
    if name in (None, "", "auto"):
        return torch.device("cuda" if cuda_visible() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not cuda_visible():
        raise ValueError(f"device {name!r} was asked for but no CUDA device is visible; "
                         f"use device: cpu (or auto)")
    if dev.type == "cuda" and dev.index is not None:
        if dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} was asked for but only "
                             f"{torch.cuda.device_count()} CUDA device(s) are visible "
                             f"(CUDA_VISIBLE_DEVICES renumbers them from 0); use device: cuda")
        torch.cuda.set_device(dev)
    return dev


def require_gpu(gpus: int | None, job: str = "this job") -> None:
    """Fail at once when a job was given ``gpus >= 1`` (its ``resources: gpu``) but no CUDA
    device is visible: an old driver makes ``torch.cuda.is_available()`` false, and
    ``device: auto`` would then train on the CPU for hours.

    Raises:
        RuntimeError: naming the job, the GPUs it was given and what to check.
    """
    if not gpus or int(gpus) < 1:
        return
    if torch.cuda.is_available():
        return
    raise RuntimeError(
        f"{job} was given {int(gpus)} GPU(s) (resources: gpu) but torch sees no CUDA device "
        f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}); check nvidia-smi, "
        f"the driver version and CUDA_VISIBLE_DEVICES, or run it without a GPU "
        f"(resources: {{gpu: 0}}; the rehearsal does so by itself on a CPU-only machine)")
