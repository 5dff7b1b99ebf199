"""Stop a training loop cleanly on ``SIGTERM``: checkpoint at the next optimiser step, exit.

SLURM sends ``SIGTERM`` to every process of a job when it is preempted, when it reaches
its time limit, or ``--signal=TERM@<seconds>`` before that limit; ``SIGKILL`` follows after
the cluster's ``KillWait`` (30 s by default). The training loops
(:func:`weince.train.simclr.pretrain`, :func:`weince.train.simcse.train_simcse`) run inside
a :class:`PreemptionGuard`; after every optimiser step they ask :meth:`PreemptionGuard.stop`
and, once a signal has arrived, write ``checkpoint.pt`` with the position inside the epoch
and raise :class:`Preempted`. The process then exits with :data:`PREEMPT_EXIT_CODE` (143,
the shell's code for "ended by SIGTERM"), the job counts as failed, Snakemake resubmits it
(``restart-times`` of the SLURM profile) or SLURM requeues it (``--slurm-requeue``), and
the next attempt resumes from that step: a preemption costs at most the step in flight.

    with PreemptionGuard() as guard:
        for step in ...:
            train_one_step()
            if guard.stop():
                save_checkpoint(...)
                raise guard.preempted(f"checkpoint at step {step}")

Only the main thread can install signal handlers; elsewhere the guard never fires (the
loop runs as before). Several processes of one ``torchrun`` run must stop at the same step:
``stop(distributed=True)`` takes the maximum of every rank's flag (one tiny all-reduce).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["PREEMPT_EXIT_CODE", "Preempted", "PreemptionGuard"]

# what signal.signal takes and returns
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

PREEMPT_EXIT_CODE = 128 + int(signal.SIGTERM)   # 143


class Preempted(SystemExit):
    """Training stopped on a signal after writing its checkpoint; the process exits with
    :data:`PREEMPT_EXIT_CODE` and the next run resumes from the checkpoint."""

    def __init__(self, message: str, signum: int = int(signal.SIGTERM),
                 waited_s: float | None = None) -> None:
        super().__init__(PREEMPT_EXIT_CODE)
        self.message = message
        self.signum = signum
        self.waited_s = waited_s      # signal to checkpoint written, seconds

    def __str__(self) -> str:
        return self.message


class PreemptionGuard:
    """Record a ``SIGTERM`` (or the given signals) instead of dying at once; see the module.

    The handler only sets a flag (and prints one line to stderr), so the loop finishes the
    step it is in. A second signal is recorded the same way; the previous handlers are put
    back on exit from the ``with`` block.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        self.signals = tuple(int(s) for s in signals)
        self.signum: int | None = None
        self.received_at: float | None = None    # time.monotonic() of the first signal
        self._previous: dict[int, _Handler] = {}

    # -- context manager
    def __enter__(self) -> PreemptionGuard:
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, old in self._previous.items():
            signal.signal(s, old)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        if self.signum is None:
            self.signum, self.received_at = int(signum), time.monotonic()
            print(f"[weince] received {signal.Signals(signum).name}: writing a checkpoint at "
                  f"the next optimiser step, then exiting with {PREEMPT_EXIT_CODE} so that "
                  f"the job is resubmitted and resumes there", file=sys.stderr, flush=True)

    # -- the loop's questions
    @property
    def requested(self) -> bool:
        """A signal has arrived (this process only)."""
        return self.signum is not None

    def stop(self, distributed: bool = False, device=None) -> bool:
        """Whether the loop must checkpoint and stop now. With ``distributed`` every rank
        of the process group takes the same decision (the maximum of their flags)."""
        if not distributed:
            return self.requested
        flag = torch.tensor([1 if self.requested else 0], dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def event(self, **where) -> dict:
        """A record of this stop for the run's files: the signal, where the loop stopped
        (``where``) and the seconds from the signal to the end of the step in flight."""
        waited = None if self.received_at is None else time.monotonic() - self.received_at
        name = signal.Signals(self.signum).name if self.signum is not None else None
        return {"signal": name, **where, "signal_to_checkpoint_s": waited}

    def preempted(self, where: str) -> Preempted:
        """The exception to raise once the checkpoint is written (``where``: what it holds)."""
        signum = self.signum if self.signum is not None else int(signal.SIGTERM)
        waited = None if self.received_at is None else time.monotonic() - self.received_at
        name = signal.Signals(signum).name
        took = f" {waited:.2f} s after the signal" if waited is not None else ""
        return Preempted(f"stopped on {name}: {where} written{took}; run the same command "
                         f"again (or let the scheduler requeue the job) to resume there",
                         signum=signum, waited_s=waited)
