"""Per-epoch JSON-lines logs and running means of per-step statistics.

A training loop keeps a :class:`StatsMeter` for the steps of one epoch (the loss and the
loss module's ``last_stats``), then appends one record per epoch with
:class:`JsonlLogger`. On resume, the log is rewritten from the records stored in the
checkpoint, so a run killed between a log write and a checkpoint write never shows an
epoch twice.

    log = JsonlLogger(out_dir / "train_log.jsonl")
    log.reset(ckpt["log"] if ckpt else [])      # start fresh or from the checkpoint
    meter = StatsMeter()
    for step ...: meter.update(loss=loss.item(), **loss_fn.last_stats)
    log.append({"epoch": e, **meter.means()})

With ``tensorboard=True`` the same records also go to TensorBoard event files beside the
log (:class:`TensorBoardScalars`: one scalar per numeric key, named as in the log, at the
record's ``epoch`` or ``step``), so ``tensorboard --logdir results/<profile>`` shows every
run live; a reset rewrites them as it rewrites the log.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from weince.utils.diskspace import atomic_write

__all__ = ["JsonlLogger", "StatsMeter", "TensorBoardScalars", "read_jsonl"]


def _clean(v: Any) -> Any:
    """JSON-able scalar: tensors/numpy scalars -> Python numbers, NaN/inf -> None."""
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 0) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of a JSON-lines file (blank lines skipped)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"log file {path} does not exist; it is written by training "
                                f"(`weince pretrain` / `weince simcse`)")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{i} is not valid JSON ({err})") from err
    return out


class JsonlLogger:
    """Append-only JSON-lines log, one record (a flat dict) per line, flushed per write.

    ``records`` mirrors the file, so the training loop can store the log in its
    checkpoint and :meth:`reset` to it on resume.
    """

    def __init__(self, path: str | os.PathLike, records: Iterable[Mapping[str, Any]] = (),
                 *, tensorboard: bool = False):
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []
        self.tensorboard = TensorBoardScalars(self.path.parent) if tensorboard else None
        self.reset(records)

    def reset(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        """Rewrite the file (and the TensorBoard events) to hold exactly ``records`` (atomic
        replace)."""
        self.records = [_clean(dict(r)) for r in records]
        text = "".join(json.dumps(r) + "\n" for r in self.records)
        atomic_write(self.path, lambda tmp: tmp.write_text(text), need=len(text.encode()))
        if self.tensorboard is not None:
            self.tensorboard.reset(self.records)

    def append(self, record: Mapping[str, Any]) -> dict[str, Any]:
        rec = _clean(dict(record))
        with self.path.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
        self.records.append(rec)
        if self.tensorboard is not None:
            self.tensorboard.add(rec)
        return rec


EVENTS_GLOB = "events.out.tfevents.*"


class TensorBoardScalars:
    """The log's records as TensorBoard scalars in event files in ``folder`` (beside
    ``train_log.jsonl``): each numeric key of a record under its own name, at the record's
    ``epoch`` (pretraining) or ``step`` (SimCSE), flushed per record.

    The writer is torch's ``SummaryWriter`` (the ``tensorboard`` package, in the
    ``workflow`` extra), imported only here: a run without TensorBoard never loads it."""

    def __init__(self, folder: str | os.PathLike) -> None:
        try:
            # only when enabled: importing TensorBoard costs seconds no other run should pay
            from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415
        except ImportError:
            raise ImportError("tensorboard: true needs the tensorboard package: "
                              "pip install tensorboard (in the workflow extra), or set "
                              "tensorboard: false (vision.pretrain / text.simcse)") from None
        self.folder = Path(folder)
        self._writer_cls = SummaryWriter
        self.writer: Any = None

    def reset(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Start the events over (earlier event files in the folder removed) with
        ``records``: a resumed run shows each epoch once, as its log does."""
        if self.writer is not None:
            self.writer.close()
        for old in self.folder.glob(EVENTS_GLOB):
            old.unlink(missing_ok=True)
        self.writer = self._writer_cls(log_dir=str(self.folder))
        for r in records:
            self.add(r, flush=False)
        self.writer.flush()

    def add(self, record: Mapping[str, Any], flush: bool = True) -> None:
        x = record.get("epoch", record.get("step"))
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return
        for k, v in record.items():
            if k in ("epoch", "step") or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            self.writer.add_scalar(k, float(v), int(x))
        if flush:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class StatsMeter:
    """Running means of named scalars over the steps of an epoch.

    ``update(loss=0.3, lambda_mean=0.1)``; a value that is ``None`` or not finite is
    skipped for that key (e.g. ``beta_t`` only exists for the recipe loss).
    ``means()`` -> ``{name: mean}`` over the updates that had the key.
    """

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def update(self, stats: Mapping[str, Any] | None = None, /, **kw: Any) -> None:
        items = dict(stats or {})
        items.update(kw)
        for k, v in items.items():
            if hasattr(v, "item") and callable(v.item):
                try:
                    v = v.item()
                except (RuntimeError, ValueError):
                    continue  # not a scalar
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            self.sums[k] = self.sums.get(k, 0.0) + float(v)
            self.counts[k] = self.counts.get(k, 0) + 1

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.counts[k] for k in self.sums}

    def mean(self, key: str, default: float | None = None) -> float | None:
        return self.sums[key] / self.counts[key] if self.counts.get(key) else default
