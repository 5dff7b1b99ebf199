"""Log redirection for the rules' scripts.

    from weince.pipeline.joblog import log_to
    with log_to(snakemake.log[0]):
        ...

A job that fails says why in one line on the console, where the user looks (Snakemake
prints a script's stderr above its ``Error in rule ...`` block, whose ``message:`` is
``None`` for a script), and keeps the whole traceback in its log::

    weince job failed: ValueError: ... (traceback: results/smoke/logs/pretrain/....log)
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["log_to", "one_line", "LogNotWritableError"]


class LogNotWritableError(PermissionError):
    """The job's log file cannot be written (a read-only or foreign results folder)."""


def one_line(err: BaseException, limit: int = 600) -> str:
    """``Type: message`` of ``err`` on one line (whitespace collapsed, at most ``limit``
    characters)."""
    text = " ".join(str(err).split())
    text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _say_once(err: BaseException, line: str, stream) -> None:
    """Print ``line`` on ``stream`` (the console) and let the interpreter print nothing more
    for ``err`` if it ends the script: its traceback is in the log already."""
    print(line, file=stream, flush=True)
    previous = sys.excepthook

    def hook(tp, value, tb):
        if value is not err:
            previous(tp, value, tb)

    sys.excepthook = hook


@contextlib.contextmanager
def log_to(path: str | os.PathLike | None, resources: Any = None,
           device: str | None = None) -> Iterator[None]:
    """Send stdout, stderr and ``logging`` of a rule's script to its log file.

    ``resources`` (the rule's ``snakemake.resources``): a job given ``gpu >= 1`` first takes
    a slot of the machine's GPU pool, where there is one (:mod:`weince.utils.gpu_slots`:
    ``CUDA_VISIBLE_DEVICES`` set before torch is imported; its ``jobs_per_gpu`` resource says
    how many jobs may share the device; a ``device: cpu`` job takes none, except from the
    tests' fake device list), and says which in its log; then, seeing no CUDA device, it
    fails at once, with the reason in its log
    (:func:`weince.utils.device.require_gpu`), unless the profile's ``device`` is ``cpu``:
    then the GPUs are slots asked for on purpose (a CPU/gloo run of the multi-GPU rule).

    Most of the DAG's jobs are short, and the garbage collector's passes over the objects
    that importing torch creates cost about as much as their work: inside, the collector
    runs after :data:`GC_YOUNG` new objects instead of 700 (cycles are still collected, in a
    long training run too), and on the way out everything still alive is frozen
    (:func:`gc.freeze`), so the interpreter's exit does not walk it again (what it saves:
    docs/performance.md)."""
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG), *older)
    try:
        with _logged(path, resources, device):
            yield
    finally:
        gc.freeze()
        gc.set_threshold(young, *older)


GC_YOUNG = 100_000   # new container objects between two young-generation collections


@contextlib.contextmanager
def _logged(path: str | os.PathLike | None, resources: Any, device: str | None
            ) -> Iterator[None]:
    asked = int(getattr(resources, "gpu", 0) or 0) if resources is not None else 0
    gpus = 0 if str(device or "").strip().lower() == "cpu" else asked
    # a CPU job's GPUs are slots asked for on purpose (gloo), not devices: it takes none of
    # the machine's, except from a fake device list (the tests' stand-in for a GPU machine)
    slots = asked if gpus or os.environ.get("WEINCE_FAKE_GPUS") else 0
    if not path:
        _take_slot(slots, resources, path)
        _check_gpu(gpus, path)
        yield
        return
    with _redirected(path):
        _take_slot(slots, resources, path)
        _check_gpu(gpus, path)
        yield
        _slot_end(slots)


def _open_log(path: str | os.PathLike):
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return open(path, "w", buffering=1)
    except OSError as err:
        msg = (f"cannot write the job's log {path} ({err.strerror or err}); the results "
               f"folder must be writable by this user (check `ls -ld {Path(path).parent}`, "
               f"its disk and mount)")
        new = LogNotWritableError(msg)
        _say_once(new, f"weince job failed: {msg}", sys.stderr)
        raise new from None


@contextlib.contextmanager
def _redirected(path: str | os.PathLike) -> Iterator[None]:
    with _open_log(path) as fh:
        handler = logging.StreamHandler(fh)
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = fh
        try:
            yield
        except SystemExit as e:   # a deliberate exit (e.g. SIGTERM: checkpoint written)
            print(f"exit {e.code}: {e}", file=fh)
            raise
        except Exception as err:
            traceback.print_exc(file=fh)  # the whole traceback in the log ...
            # ... and the reason in one line on the console, where the user looks
            _say_once(err, f"weince job failed: {one_line(err)} (traceback: {path})", old_err)
            raise
        except BaseException:
            traceback.print_exc(file=fh)
            raise
        finally:
            sys.stdout, sys.stderr = old_out, old_err
            root.removeHandler(handler)


def _take_slot(gpus: int, resources: Any, log: Any) -> None:
    """A GPU job's slot of the machine's pool (before anything imports torch), said in its
    log; nothing without a pool (no GPU, or a SLURM job: its allocation's devices)."""
    if gpus < 1:
        return
    from weince.utils.gpu_slots import take_slot  # noqa: PLC0415 - GPU jobs only

    per = int(getattr(resources, "jobs_per_gpu", 1) or 1)
    slot = take_slot(gpus, per, say=lambda m: print(m, flush=True), who=str(log or ""))
    if slot is not None:
        print(slot.line(), flush=True)


def _slot_end(gpus: int) -> None:
    """The log's last line of a job that holds a slot: when its work ended (the slot is
    free once the job's process ends, a moment later)."""
    if gpus < 1:
        return
    from weince.utils.gpu_slots import held  # noqa: PLC0415 - GPU jobs only

    slot = held()
    if slot is not None:
        print(f"gpu slot: {slot.name} held until {slot.now()} at least (freed when the "
              f"job's process ends)", flush=True)


def _check_gpu(gpus: int, log: Any) -> None:
    if gpus:
        from weince.utils.device import require_gpu  # noqa: PLC0415 - torch: GPU jobs only

        require_gpu(gpus, f"the job logging to {log}" if log else "this job")
