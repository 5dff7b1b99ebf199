"""The skeleton both training loops share (:mod:`weince.train.simclr`,
:mod:`weince.train.simcse`): output folder and process group, resume, checkpointing,
preemption on ``SIGTERM``, step timing, the divergence check, the log and the progress bar.

A loop owns its model, data order and step; everything around the step is here:

    with PreemptionGuard() as guard:
        run = TrainingRun(out_dir, "cuda", guard)          # folder, torchrun process group
        ckpt = run.load_checkpoint(remake="re-run `weince ...`")
        if ckpt is not None:
            check_same_config(ckpt["cfg"], cfg_dict, run.checkpoint_path, free={"threads"})
            ...                                             # the loop restores its state
        run.open_log(ckpt["log"] if ckpt else [])          # train_log.jsonl (rank 0)
        run.start_timer(warmup=1)
        for step ...:
            run.timer.start(); loss = one_step(); run.timer.stop()
            if run.should_stop():                           # SIGTERM on any rank
                run.note_preemption(step=step)
                run.save_checkpoint(lambda: {...})          # rank 0 writes, all wait
                raise run.preempted(f"checkpoint.pt at step {step}")
        run.finish(summary, cfg_dict, seed=cfg.seed, keep_checkpoint=False)

The checkpoint keeps each rank's random state: :meth:`TrainingRun.gather` collects one
object per rank (every rank must call it), :meth:`TrainingRun.save_checkpoint` writes on
rank 0 and waits for all. The divergence check: :class:`EpochStats` sums the loss and the
loss's statistics on the device and remembers the first non-finite loss without a host
sync per step; :func:`diverged` words the error (:class:`DivergedError`) the same way for
both loops, naming where, the settings and what was kept.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from weince.train import ddp as D
from weince.train.preempt import Preempted, PreemptionGuard
from weince.train.step_timer import StepTimer
from weince.train.trainlog import JsonlLogger
from weince.utils import write_json
from weince.utils.checkpoint import load_checkpoint, release_checkpoint, save_checkpoint

__all__ = ["TrainingRun", "RecordsOnly", "EpochStats", "DivergedError", "diverged",
           "weights_finite", "check_same_config", "progress_enabled", "progress_bar",
           "progress_note",
           "unwrap_model"]


# ------------------------------------------------------------------------- small pieces
def progress_enabled(flag: bool | None = None) -> bool:
    """Show a progress bar: ``flag`` when given, else when stderr is a terminal or the
    environment sets ``WEINCE_PROGRESS`` (to anything but ``0``)."""
    if flag is not None:
        return bool(flag)
    return os.environ.get("WEINCE_PROGRESS", "") not in ("", "0") or sys.stderr.isatty()


def progress_bar(iterable: Iterable | None = None, *, show: bool, **kwargs):
    """A tqdm bar (``disable`` unless ``show``); tqdm is imported only here (an optional
    dependency of the workflow extra)."""
    return tqdm(iterable, disable=not show, dynamic_ncols=True, **kwargs)


def progress_note(message: str) -> None:
    """One line on stderr that does not break a progress bar."""
    tqdm.write(message, file=sys.stderr)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The plain module inside ``torch.compile`` and ``DistributedDataParallel`` wrappers."""
    model = getattr(model, "_orig_mod", model)
    model = getattr(model, "module", model)
    return getattr(model, "_orig_mod", model)


def check_same_config(saved: Mapping[str, Any], now: Mapping[str, Any], path: Path, *,
                      free: Iterable[str] = (), defaults: Mapping[str, Any] | None = None
                      ) -> None:
    """Refuse to resume (``ValueError``) when a config key outside ``free`` differs between
    the run that wrote ``path`` and this one; a key the saved config lacks takes its value
    from ``defaults`` (a key added since)."""
    free, defaults = set(free), dict(defaults or {})
    diff = sorted(k for k in set(saved) | set(now) if k not in free
                  and saved.get(k, defaults.get(k)) != now.get(k, defaults.get(k)))
    if diff:
        details = ", ".join(f"{k} ({saved.get(k, defaults.get(k))!r} -> "
                            f"{now.get(k, defaults.get(k))!r})" for k in diff)
        raise ValueError(f"{path} was written with a different config (keys differ: "
                         f"{details}); use another --out folder or delete {path.name} to "
                         f"start over")


class RecordsOnly:
    """The log's records without a file (ranks other than 0 write nothing)."""

    def __init__(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        self.records: list[dict[str, Any]] = [dict(r) for r in records]

    def reset(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        self.records = [dict(r) for r in records]

    def append(self, record: Mapping[str, Any]) -> dict[str, Any]:
        self.records.append(dict(record))
        return self.records[-1]


# ------------------------------------------------------------------------- divergence
class DivergedError(RuntimeError):
    """The training loss or the weights became non-finite; nothing after the last good
    checkpoint is kept."""


def diverged(what: str, where: str, settings: str, kept: str, advice: str) -> DivergedError:
    """The error both loops raise: ``"<what> training diverged: <where> (<settings>);
    <kept>. <advice>"`` (``kept``: which checkpoint survives, ``advice``: the likely cause
    and the fix)."""
    return DivergedError(f"{what} training diverged: {where} ({settings}); {kept}. {advice}")


def weights_finite(model: nn.Module) -> bool:
    """Whether every parameter is finite (one host sync)."""
    return bool(torch.stack([torch.isfinite(p).all()
                             for p in unwrap_model(model).parameters()]).all())


class EpochStats:
    """Sums of the loss and ``last_stats`` kept on the device (one host sync per epoch, not
    per step). ``first_bad`` (also on the device) is the 0-based index of the first step
    with a non-finite loss, -1 while there is none: the divergence check reads it at the
    epoch's sync point instead of syncing at every step."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}
        self.first_bad: torch.Tensor | None = None

    def update(self, stats: dict[str, Any]) -> None:
        for k, v in stats.items():
            if not torch.is_tensor(v):
                v = torch.tensor(float(v))
            if v.numel() != 1:
                continue
            v = v.detach().float().reshape(())
            if k == "loss":
                step = self.counts.get(k, 0)
                if self.first_bad is None:
                    self.first_bad = torch.full((), -1, dtype=torch.long, device=v.device)
                new_bad = (~torch.isfinite(v)) & (self.first_bad < 0)
                self.first_bad = torch.where(new_bad, step, self.first_bad)
            self.sums[k] = self.sums[k] + v if k in self.sums else v.clone()
            self.counts[k] = self.counts.get(k, 0) + 1

    def bad_step(self) -> int:
        """The 0-based index of the first non-finite loss, -1 if none (a host sync)."""
        return int(self.first_bad) if self.first_bad is not None else -1

    def means(self) -> dict[str, float]:
        return {k: float(s) / self.counts[k] for k, s in self.sums.items()}

    def state(self) -> dict[str, Any]:
        """The sums so far, on the CPU (a checkpoint written mid-epoch)."""
        return {"sums": {k: v.cpu() for k, v in self.sums.items()}, "counts": dict(self.counts),
                "first_bad": None if self.first_bad is None else self.first_bad.cpu()}

    def load_state(self, state: dict[str, Any], device) -> None:
        self.sums = {k: v.to(device) for k, v in state["sums"].items()}
        self.counts = {k: int(v) for k, v in state["counts"].items()}
        fb = state.get("first_bad")
        self.first_bad = None if fb is None else fb.to(device)


# ------------------------------------------------------------------------- one run
class TrainingRun:
    """One training run's output folder, process group (``torchrun`` or one process),
    checkpoint, log, step timer and preemption guard; see the module docstring.

    Attributes: ``out``, ``info`` (:class:`weince.train.ddp.DistInfo`), ``device``,
    ``checkpoint_path``, ``log`` (after :meth:`open_log`), ``timer`` (after
    :meth:`start_timer`), ``preemptions`` (where this and earlier attempts stopped on a
    signal; a loop that keeps them stores them in its checkpoint).
    """

    def __init__(self, out_dir: str | os.PathLike, device: str, guard: PreemptionGuard,
                 *, log_name: str = "train_log.jsonl") -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.guard = guard
        self.info = D.setup_distributed(device)
        self.device = self.info.device
        self.checkpoint_path = self.out / "checkpoint.pt"
        self.log_path = self.out / log_name
        self._log: JsonlLogger | RecordsOnly | None = None
        self._timer: StepTimer | None = None
        self.preemptions: list[dict] = []

    @property
    def is_main(self) -> bool:
        return self.info.is_main

    @property
    def log(self) -> JsonlLogger | RecordsOnly:
        """The run's log (:meth:`open_log` opens it)."""
        if self._log is None:
            raise RuntimeError("the training log is read before open_log() opened it")
        return self._log

    @property
    def timer(self) -> StepTimer:
        """The step timer (:meth:`start_timer` starts it)."""
        if self._timer is None:
            raise RuntimeError("the step timer is read before start_timer() made it")
        return self._timer

    # -- resume and checkpoints
    def load_checkpoint(self, remake: str, **kwargs) -> dict[str, Any] | None:
        """The checkpoint of an interrupted run in ``out`` (None if there is none)."""
        return load_checkpoint(self.checkpoint_path, remake=remake, **kwargs)

    def gather(self, obj: Any) -> list[Any]:
        """``obj`` of every rank, in rank order (``[obj]`` in one process); every rank must
        call it."""
        if not self.info.distributed:
            return [obj]
        objs = [None] * self.info.world_size
        torch.distributed.all_gather_object(objs, obj)
        return objs

    def save_checkpoint(self, state: Callable[[], Mapping[str, Any]]) -> None:
        """Rank 0 writes ``checkpoint.pt`` with ``state()`` (called on rank 0 only); every
        rank waits until it is complete."""
        if self.is_main:
            save_checkpoint(self.checkpoint_path, **state())
        D.barrier()

    # -- logging and timing
    def open_log(self, records: Iterable[Mapping[str, Any]] = (), *,
                 tensorboard: bool = False) -> JsonlLogger | RecordsOnly:
        """``train_log.jsonl`` rewritten to hold ``records`` (rank 0; other ranks keep the
        records without a file); ``tensorboard``: TensorBoard event files beside it too."""
        self._log = (JsonlLogger(self.log_path, records, tensorboard=tensorboard)
                     if self.is_main else RecordsOnly(records))
        return self._log

    def start_timer(self, warmup: int = 1) -> StepTimer:
        """The step timer (made here so that the peak memory counts from now on)."""
        self._timer = StepTimer(self.device, warmup=warmup)
        return self._timer

    # -- preemption
    def should_stop(self) -> bool:
        """A stop signal arrived (on any rank: all take the same decision)."""
        return self.guard.stop(self.info.distributed, self.device)

    def note_preemption(self, **where: Any) -> None:
        """Record where this attempt stops (kept in :attr:`preemptions`)."""
        self.preemptions.append(self.guard.event(**where))

    def preempted(self, where: str) -> Preempted:
        """The exception to raise once the checkpoint holding ``where`` is written."""
        return self.guard.preempted(where)

    # -- the end
    def finish(self, summary: Mapping[str, Any], cfg: Mapping[str, Any], *, seed: int,
               keep_checkpoint: bool) -> None:
        """Rank 0 writes ``train.json`` and removes the resume state of the finished run
        (unless ``keep_checkpoint``); every rank waits."""
        if self.is_main:
            write_json(self.out / "train.json", summary, cfg=cfg, seed=seed)
            if not keep_checkpoint:
                release_checkpoint(self.out)   # the checkpoint and its digest's record
        D.barrier()
