"""The one device resolver: ``"auto"`` -> CUDA when visible, else the CPU.

    from weince.utils.device import resolve_device
    resolve_device("auto")     # torch.device("cuda") on a GPU machine, else cpu
"""

from __future__ import annotations

import torch

__all__ = ["resolve_device"]


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
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} was asked for but no CUDA device is visible; "
                         f"use device: cpu (or auto)")
    if dev.type == "cuda" and dev.index is not None:
        if dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} was asked for but only "
                             f"{torch.cuda.device_count()} CUDA device(s) are visible "
                             f"(CUDA_VISIBLE_DEVICES renumbers them from 0); use device: cuda")
        torch.cuda.set_device(dev)
    return dev
