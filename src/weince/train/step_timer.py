"""Time per optimiser step after warm-up and peak memory of a training run (the
rehearsal's measured cost forecast).

    timer = StepTimer(device, warmup=1)
    for batch in loader:
        timer.start(); step(batch); timer.stop()
    summary["step_timing"] = timer.result()

:meth:`StepTimer.stop` synchronises CUDA first, so a step's time includes its kernels.
Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` (the tensors' peak, reset when
the timer is made); on the CPU the process's peak resident set size
(``resource.getrusage``, which includes the data set and the libraries).

A job that took a slot of a machine's GPU pool (:mod:`weince.utils.gpu_slots`) records it
beside its step times (``gpu_slot``: which slot, and ``shared`` when other jobs may run on
the same GPU, whose step times are then not those of a GPU alone).
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import numpy as np
import torch

from weince.utils.gpu_slots import held

__all__ = ["StepTimer"]


def _cpu_peak_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak) / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0)


class StepTimer:
    """Wall-clock seconds of each optimiser step; the first ``warmup`` steps are not kept."""

    def __init__(self, device: torch.device | str, warmup: int = 1) -> None:
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.warmup = max(0, int(warmup))
        self.n_steps = 0
        self.times: list[float] = []
        self._t0: float | None = None
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def start(self) -> None:
        self._sync()
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self._t0 is None:
            raise RuntimeError("StepTimer.stop() without start()")
        self._sync()
        dt = time.perf_counter() - self._t0
        self._t0 = None
        self.n_steps += 1
        if self.n_steps > self.warmup:
            self.times.append(dt)

    def result(self) -> dict[str, Any]:
        """``{"step_s_median", "step_s_mean", "n_timed", "warmup", "peak_mem_mb",
        "peak_mem_kind", "device"}`` (and ``gpu_slot`` where the job holds a slot of the
        machine's pool); step times are None when no step was timed."""
        t = np.asarray(self.times, dtype=float)
        if self.cuda:
            peak, kind = torch.cuda.max_memory_allocated(self.device) / 2**20, "cuda_max_allocated"
        else:
            peak, kind = _cpu_peak_mb(), "cpu_max_rss"
        slot = held()
        return {
            **({"gpu_slot": slot.record()} if slot is not None else {}),
            "step_s_median": float(np.median(t)) if t.size else None,
            "step_s_mean": float(t.mean()) if t.size else None,
            "n_timed": int(t.size), "warmup": self.warmup, "steps_seen": self.n_steps,
            "peak_mem_mb": float(peak), "peak_mem_kind": kind, "device": str(self.device),
            "device_name": (torch.cuda.get_device_name(self.device) if self.cuda
                            else "cpu"),
        }
